#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Benchmark of the filesystem (mooncakefs), by hand only (never in CI, no
# timing is asserted). Builds nothing: it needs mooncake_master, mooncakefs,
# fuse_trivial and lib_read_bench in a Release build (scripts/build.sh
# release makes build-release/). Needs root (mounts, drop_caches), fio and
# python3; strace, when present, times the close() that commits a file
# written through the mount (fio's own figure stops at the last write).
#
# On 127.0.0.1 with ephemeral ports it starts a mooncake_master (sqlite in
# the temporary directory, --default_kv_lease_ttl 5s, upstream's default:
# a 1 GiB get over TCP can outlast 1 s and then fails LEASE_EXPIRED) with
# its HTTP metadata server, mounts mooncakefs on it (the only pool member:
# --segment_size, staging_limit 6GiB) and fuse_trivial (one file of --size
# served from its own memory: FUSE's own ceiling here), and measures in
# one run, each case --repeat times, interleaved, reporting medians:
#
#   reads (fio, psync, 1 MiB blocks) of one --size file on tmpfs (under
#     /dev/shm), on fuse_trivial and on the mount (kv/fsbench/r1g, copied
#     there from the tmpfs file, then compared with cmp):
#     O_DIRECT and buffered, 1 job (the whole file) and 4 jobs (a quarter
#     each, --offset_increment); buffered "cold" is one pass after fio's
#     invalidate (POSIX_FADV_DONTNEED), "warm" --seconds of passes with
#     the file in the page cache; O_DIRECT also --seconds of passes;
#   the same object through the library (lib_read_bench): object_read in
#     1 MiB chunks with 1 and 4 threads, get_into of the whole object;
#     same host (shared memory) and MC_FORCE_TCP=1;
#   writes of new files: fio (--create_on_open=1: fio's default layout
#     pass writes and closes the file first, and the mount would then
#     copy that object into a new version on reopen) on tmpfs and on the
#     mount, 1 job of
#     --size and 4 jobs of a quarter each; the mount stages such writes in
#     memory (size unknown) and puts them at close. Then a python writer
#     that ftruncate()s to the final size first (the mount allocates the
#     replicas and writes go straight into them), open to close timed;
#   remote reads: a second mount (no segment, MC_FORCE_TCP=1, so every
#     byte comes over TCP from the first mount's segment) read with fio
#     (O_DIRECT and buffered cold, 1 and 4 jobs), each run next to the
#     library's TCP get_into of the whole object (lib_read_bench,
#     MC_FORCE_TCP=1): issue 22's "remote sequential read through the
#     mount >= 0.8x the library's get rate for the same size";
#   metadata: --keys objects of 16 bytes under kv/fsbench/meta/ (put with
#     lib_read_bench, batches of 1000), `ls -l` of that directory cold
#     (after `echo 2 > /proc/sys/vm/drop_caches`) and warm, and a stat
#     storm (python, one os.stat per name) cold and warm; next to tmpfs
#     (as many empty files) and fuse_trivial -o files=N, with getxattr not
#     implemented (the kernel stops asking) and answered ENODATA (as the
#     mount answers the names ls asks for).
#
# Prints markdown tables (docs/benchmarks.md, "Filesystem"). Daemons,
# mounts, the temporary directory and the /dev/shm files it made are
# cleaned up on any exit.
#
# Usage: scripts/bench_fs.sh [--repeat N] [--seconds S] [--size SIZE]
#                            [--keys N] [--segment_size SIZE]
#                            [--only read,lib,remote,write,meta,locks,trees]
#                            [--files N]
#                            [--results FILE]
#   --repeat N           runs of every case (default 3); medians reported
#   --seconds S          time-based cases (default 2)
#   --size SIZE          the file read and written (default 1GiB)
#   --keys N             keys listed and stat'ed (default 100000)
#   --segment_size SIZE  the mount's contribution (default 3GiB)
#   --files N            files of the trees phase (default 1000)
#   --only LIST          phases to run (default all)
#   --results FILE       also keep every run's figures there (JSON lines)
# Takes about 6 minutes with the defaults (10 with --repeat 5).
# Environment: MC_BENCH_BUILD_DIR (default build-release), TMPDIR,
# MC_BENCH_REMOTE_OPTS (more -o options of the remote phase's mount, e.g.
# read_ahead=0 to measure without read-ahead).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MC_BENCH_BUILD_DIR:-$root/build-release}
repeat=3
seconds=2
size=1GiB
nkeys=100000
segsize=3GiB
only=read,lib,remote,write,meta,locks,trees
nfiles=1000
results_copy=
tmp=
shm=
segname=mc-bench-fs-$$
pids=()
mounts=()

while [[ $# -gt 0 ]]; do
	case $1 in
	--repeat) repeat=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--keys) nkeys=$2; shift 2 ;;
	--files) nfiles=$2; shift 2 ;;
	--segment_size) segsize=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--results) results_copy=$2; shift 2 ;;
	-h | --help) sed -n '3,/^# Environment/p' "$0"; exit 0 ;;
	*) echo "bench_fs: unknown argument $1" >&2; exit 2 ;;
	esac
done

die() {
	echo "bench_fs: $*" >&2
	exit 1
}

phase() {
	[[ ,$only, == *,$1,* ]]
}

# stop_pid PID: SIGTERM, wait, forget.
stop_pid() {
	local p keep=()
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	for p in "${pids[@]}"; do
		[[ $p == "$1" ]] || keep+=("$p")
	done
	pids=("${keep[@]}")
}

# unmount DIR: the daemon behind it then exits by itself.
unmount() {
	local m keep=()
	if mountpoint -q "$1"; then
		umount "$1" 2>/dev/null || umount -l "$1" 2>/dev/null || true
	fi
	for m in "${mounts[@]}"; do
		[[ $m == "$1" ]] || keep+=("$m")
	done
	mounts=("${keep[@]}")
}

cleanup() {
	local m p
	for m in "${mounts[@]}"; do
		if mountpoint -q "$m"; then
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ||
				true
		fi
	done
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	# The mount unlinks its segment when it leaves cleanly; not after a
	# kill -9 (the name is ours alone).
	rm -f "/dev/shm/mooncake.seg.$segname"
	[[ -n $shm ]] && rm -rf "$shm"
	[[ -n $tmp ]] && rm -rf "$tmp"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[[ $(id -u) -eq 0 ]] || die "run as root (FUSE mounts, drop_caches)"
[[ -c /dev/fuse ]] || die "no /dev/fuse"
command -v fio >/dev/null || die "fio missing (scripts/setup.sh installs it)"
command -v python3 >/dev/null || die "python3 missing"
for b in master/mooncake_master mooncakefs/fuse/mooncakefs \
	bench/fuse_trivial bench/lib_read_bench; do
	[[ -x $build/$b ]] ||
		die "$build/$b missing: scripts/build.sh release" \
			"(or set MC_BENCH_BUILD_DIR)"
done
have_strace=0
if command -v strace >/dev/null; then
	have_strace=1
fi
bytes=$(python3 -c '
import re, sys
m = re.fullmatch(r"(\d+)([KMG]i?B?)?", sys.argv[1])
if not m:
    sys.exit(1)
mult = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
print(int(m.group(1)) * mult[(m.group(2) or "")[:1]])' "$size") ||
	die "bad --size $size"
quarter=$((bytes / 4))
((bytes % (4 << 20) == 0)) || die "--size must be a multiple of 4 MiB"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mc-bench-fs.XXXXXX")
shm=/dev/shm/mc-bench-fs-$$
mkdir -p "$shm" "$tmp/mnt" "$tmp/rmnt" "$tmp/triv" "$tmp/trivmeta"
res=$tmp/results.jsonl
: >"$res"

# record JSON: one result line.
record() {
	echo "$1" >>"$res"
}

read -r load0 _ </proc/loadavg

# ---- daemons ---------------------------------------------------------------

"$build/master/mooncake_master" --rpc_address 127.0.0.1 --rpc_port 0 \
	--port_file "$tmp/m.port" --metrics_host 127.0.0.1 --metrics_port 0 \
	--enable_http_metadata_server --http_metadata_server_host 127.0.0.1 \
	--http_metadata_server_port 0 --metadata_port_file "$tmp/m.meta" \
	--db_path "$tmp/m.db" --enable_metric_reporting=false \
	--default_kv_lease_ttl 5000 >"$tmp/master.log" 2>&1 &
master_pid=$!
pids+=("$master_pid")
for ((i = 0; i < 300; i++)); do
	[[ -s $tmp/m.port && -s $tmp/m.meta ]] && break
	kill -0 "$master_pid" 2>/dev/null ||
		{ cat "$tmp/master.log" >&2; die "mooncake_master exited"; }
	sleep 0.1
done
[[ -s $tmp/m.port && -s $tmp/m.meta ]] ||
	{ cat "$tmp/master.log" >&2; die "mooncake_master wrote no ports"; }
master=127.0.0.1:$(<"$tmp/m.port")
meta=http://127.0.0.1:$(<"$tmp/m.meta")/metadata

# wait_mount DIR PID LOG: until DIR is a mount point served by PID.
wait_mount() {
	local i
	for ((i = 0; i < 300; i++)); do
		mountpoint -q "$1" && return 0
		kill -0 "$2" 2>/dev/null ||
			{ cat "$3" >&2; die "the daemon of $1 exited"; }
		sleep 0.1
	done
	cat "$3" >&2
	die "$1 was not mounted"
}

mnt=$tmp/mnt
"$build/mooncakefs/fuse/mooncakefs" "$master" "$mnt" -f -o \
	"metadata=$meta,segment_size=$segsize,segment_name=$segname,staging_limit=6GiB" \
	>"$tmp/mooncakefs.log" 2>&1 &
mcfs_pid=$!
pids+=("$mcfs_pid")
mounts+=("$mnt")
wait_mount "$mnt" "$mcfs_pid" "$tmp/mooncakefs.log"
# Operations wait until the daemon has joined the pool (segment faulted).
mkdir -p "$mnt/kv/fsbench/w" || die "mkdir in the mount failed"

# start_trivial DIR OPTIONS: sets triv_pid.
start_trivial() {
	"$build/bench/fuse_trivial" "$1" -f -o "$2" >"$tmp/trivial.log" 2>&1 &
	triv_pid=$!
	pids+=("$triv_pid")
	mounts+=("$1")
	wait_mount "$1" "$triv_pid" "$tmp/trivial.log"
}

# stop_trivial DIR
stop_trivial() {
	unmount "$1"
	wait "$triv_pid" 2>/dev/null || true
	stop_pid "$triv_pid"
}

echo "bench_fs: master $master, mooncakefs on $mnt ($segsize)," \
	"results in $res" >&2

# ---- fio -------------------------------------------------------------------

n_fio=0
# fio_case TARGET RW JOBS DIRECT MODE REP PATH: one fio run, recorded.
#   MODE: once (one pass, cache dropped first), warm (time-based, cache
#   kept), timed (time-based). For JOBS 4, PATH is one file read in
#   quarters, or a directory of 4 files written.
fio_case() {
	local target=$1 rw=$2 jobs=$3 direct=$4 mode=$5 rep=$6 path=$7
	local out args=() strace_pre=()
	n_fio=$((n_fio + 1))
	out=$tmp/fio-$n_fio
	args=(--name=fsb --rw="$rw" --bs=1M --ioengine=psync
		--direct="$direct" --group_reporting --output-format=json
		--numjobs="$jobs")
	if [[ $rw == read ]]; then
		args+=(--readonly --filename="$path")
		if ((jobs == 1)); then
			args+=(--size="$bytes")
		else
			args+=(--size="$quarter" --offset_increment="$quarter")
		fi
	else
		args+=(--create_on_open=1 --directory="$path")
		# shellcheck disable=SC2016 # fio expands $jobnum
		args+=(--filename_format='w.$jobnum')
		if ((jobs == 1)); then
			args+=(--size="$bytes")
		else
			args+=(--size="$quarter")
		fi
		if ((have_strace)); then
			strace_pre=(strace --seccomp-bpf -f -qq -e trace=close -T
				-y -o "$out.strace")
		fi
	fi
	case $mode in
	once) ;;
	warm) args+=(--invalidate=0 --time_based --runtime="$seconds") ;;
	timed) args+=(--time_based --runtime="$seconds") ;;
	esac
	if ! "${strace_pre[@]}" fio "${args[@]}" >"$out.json" 2>"$out.err"; then
		cat "$out.err" "$out.json" >&2
		die "fio failed: ${args[*]}"
	fi
	python3 - "$out" "$target" "$rw" "$jobs" "$direct" "$mode" "$rep" \
		"$path" >>"$res" <<'EOF'
import json, os, re, sys
out, target, rw, jobs, direct, mode, rep, path = sys.argv[1:]
with open(out + ".json") as f:
    txt = f.read()
j = json.loads(txt[txt.index("{"):])
job = j["jobs"][0]
d = job["read" if rw == "read" else "write"]
rec = {"kind": "fio", "target": target, "rw": rw, "jobs": int(jobs),
       "direct": int(direct), "mode": mode, "rep": int(rep),
       "bytes": d["io_bytes"], "runtime_ms": d["runtime"],
       "gbps": d["bw_bytes"] / 1e9}
if job.get("error"):
    sys.exit("fio error %d" % job["error"])
st = out + ".strace"
if os.path.exists(st):
    closes, pending = [], {}
    with open(st) as f:
        for line in f:
            # "PID close(FD</path>) = 0 <secs>", or split in two when
            # jobs close at once: "PID close(FD</path> <unfinished ...>"
            # then "PID <... close resumed>) = 0 <secs>".
            pid = line.split(None, 1)[0]
            m = re.search(r"close\(\d+<([^>]*)>(\)\s*= \d+ <([\d.]+)>)?",
                          line)
            if m and m.group(2):
                name, secs = m.group(1), m.group(3)
            elif m:
                pending[pid] = m.group(1)
                continue
            else:
                r = re.search(r"close resumed>\)\s*= \d+ <([\d.]+)>", line)
                if not r or pid not in pending:
                    continue
                name, secs = pending.pop(pid), r.group(1)
            if name.startswith(path):
                closes.append(float(secs))
    if closes:
        rec["close_s"] = max(closes)
        rec["gbps_close"] = d["io_bytes"] / 1e9 / (d["runtime"] / 1e3 +
                                                  max(closes))
print(json.dumps(rec))
EOF
}

drop_caches() {
	sync
	echo "$1" >/proc/sys/vm/drop_caches
}

# ---- reads -----------------------------------------------------------------

if phase read || phase lib || phase remote; then
	# The file every reader reads: fio's random data, on tmpfs, then
	# copied into the mount (a staged write of unknown size).
	fio --name=src --rw=write --bs=1M --ioengine=psync --size="$bytes" \
		--filename="$shm/r1g" >/dev/null ||
		die "fio could not write $shm/r1g"
	t0=$(date +%s%N)
	cp "$shm/r1g" "$mnt/kv/fsbench/r1g" || die "cp into the mount failed"
	t1=$(date +%s%N)
	record "{\"kind\": \"cp\", \"bytes\": $bytes, \"seconds\": $(((t1 - t0) / 1000000))e-3}"
	cmp "$shm/r1g" "$mnt/kv/fsbench/r1g" ||
		die "the mount returned other bytes than were written"
fi

if phase read; then
	start_trivial "$tmp/triv" "size=$bytes"
	echo "bench_fs: reads (fio, $repeat x)" >&2
	for ((r = 1; r <= repeat; r++)); do
		for jobs in 1 4; do
			for t in tmpfs:$shm/r1g trivial:$tmp/triv/data \
				mount:$mnt/kv/fsbench/r1g; do
				fio_case "${t%%:*}" read "$jobs" 1 timed "$r" \
					"${t#*:}"
				fio_case "${t%%:*}" read "$jobs" 0 once "$r" \
					"${t#*:}"
				fio_case "${t%%:*}" read "$jobs" 0 warm "$r" \
					"${t#*:}"
			done
		done
	done
	stop_trivial "$tmp/triv"
fi

if phase lib; then
	echo "bench_fs: library reads ($repeat x)" >&2
	largs=(--master_server_address "$master" --metadata_server "$meta"
		--keys fsbench/r1g --threads "1,4" --seconds "$seconds")
	for ((r = 1; r <= repeat; r++)); do
		for path in same-host tcp; do
			force=0
			[[ $path == tcp ]] && force=1
			MC_FORCE_TCP=$force "$build/bench/lib_read_bench" \
				"${largs[@]}" 2>"$tmp/lib.err" |
				sed "s/^{/{\"kind\": \"lib\", \"rep\": $r, /" \
					>>"$res" ||
				{ cat "$tmp/lib.err" >&2; die "lib_read_bench failed"; }
		done
	done
fi

if phase remote; then
	echo "bench_fs: remote reads ($repeat x); fs.pipe-max-size" \
		"$(cat /proc/sys/fs/pipe-max-size) (the mount's 1 MiB reads" \
		"go through pipes from 2097152 up: docs/operations.md)" >&2
	rmnt=$tmp/rmnt
	MC_FORCE_TCP=1 "$build/mooncakefs/fuse/mooncakefs" "$master" "$rmnt" \
		-f -o "metadata=$meta,segment_size=0${MC_BENCH_REMOTE_OPTS:+,$MC_BENCH_REMOTE_OPTS}" \
		>"$tmp/rmount.log" 2>&1 &
	rmcfs_pid=$!
	pids+=("$rmcfs_pid")
	mounts+=("$rmnt")
	wait_mount "$rmnt" "$rmcfs_pid" "$tmp/rmount.log"
	cmp "$shm/r1g" "$rmnt/kv/fsbench/r1g" ||
		die "the remote mount returned other bytes than were written"
	for ((r = 1; r <= repeat; r++)); do
		MC_FORCE_TCP=1 "$build/bench/lib_read_bench" \
			--master_server_address "$master" --metadata_server "$meta" \
			--keys fsbench/r1g --ops get_into --seconds "$seconds" \
			2>"$tmp/lib.err" |
			sed "s/^{/{\"kind\": \"rlib\", \"rep\": $r, /" >>"$res" ||
			{ cat "$tmp/lib.err" >&2; die "lib_read_bench failed"; }
		for jobs in 1 4; do
			fio_case remote read "$jobs" 1 timed "$r" \
				"$rmnt/kv/fsbench/r1g"
			fio_case remote read "$jobs" 0 once "$r" \
				"$rmnt/kv/fsbench/r1g"
		done
	done
	grep -E '^mount_(reads|read_bytes|readahead|splice)' "$rmnt/.mooncake/stats" |
		tr '\n' ' ' | sed 's/^/bench_fs: remote mount: /; s/$/\n/' >&2
	unmount "$rmnt"
	wait "$rmcfs_pid" 2>/dev/null || true
	stop_pid "$rmcfs_pid"
fi

if phase read || phase lib || phase remote; then
	rm -f "$shm/r1g"
fi

# ---- writes ----------------------------------------------------------------

cat >"$tmp/writer.py" <<'EOF'
# writer.py MODE SIZE N DIR: N processes each write a new file DIR/p<i> of
# SIZE bytes in 1 MiB writes, from open to close; MODE "known" calls
# ftruncate(SIZE) before any data. Prints aggregate bytes and seconds.
import json, multiprocessing as mp, os, queue, sys, time

def one(mode, size, path, barrier, q):
    buf = memoryview(os.urandom(1 << 20))
    barrier.wait()
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    if mode == "known":
        os.ftruncate(fd, size)
    done = 0
    while done < size:
        done += os.write(fd, buf[: min(len(buf), size - done)])
    os.close(fd)
    q.put((t0, time.perf_counter()))

mode, size, n, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
barrier, q = mp.Barrier(n), mp.Queue()
ps = [mp.Process(target=one, args=(mode, size, f"{d}/p{i}", barrier, q))
      for i in range(n)]
for p in ps:
    p.start()
times = []
while len(times) < n:  # a child that failed never reports: stop then
    try:
        times.append(q.get(timeout=1))
    except queue.Empty:
        if any(p.exitcode for p in ps):
            for p in ps:
                p.kill()
            sys.exit(1)
for p in ps:
    p.join()
    if p.exitcode:
        sys.exit(1)
s = max(t[1] for t in times) - min(t[0] for t in times)
print(json.dumps({"bytes": size * n, "seconds": s}))
EOF

# clear_dir DIR: remove the files written there.
clear_dir() {
	find "$1" -mindepth 1 -maxdepth 1 -type f -delete
}

if phase write; then
	echo "bench_fs: writes ($repeat x)" >&2
	mkdir -p "$shm/w"
	for ((r = 1; r <= repeat; r++)); do
		for jobs in 1 4; do
			for direct in 0 1; do
				for t in tmpfs:$shm/w mount:$mnt/kv/fsbench/w; do
					clear_dir "${t#*:}"
					fio_case "${t%%:*}" write "$jobs" \
						"$direct" once "$r" "${t#*:}"
					clear_dir "${t#*:}"
				done
			done
			for t in tmpfs:$shm/w mount:$mnt/kv/fsbench/w; do
				for wmode in known unknown; do
					each=$((jobs == 1 ? bytes : quarter))
					clear_dir "${t#*:}"
					out=$(python3 "$tmp/writer.py" "$wmode" \
						"$each" "$jobs" "${t#*:}") ||
						die "writer.py $wmode failed" \
							"on ${t%%:*}"
					clear_dir "${t#*:}"
					record "{\"kind\": \"pywrite\", \"target\": \"${t%%:*}\", \"mode\": \"$wmode\", \"jobs\": $jobs, \"rep\": $r, ${out:1}"
				done
			done
		done
	done
	rm -rf "$shm/w"
fi

# ---- metadata --------------------------------------------------------------

cat >"$tmp/stat.py" <<'EOF'
# stat.py DIR N: os.stat() of DIR/k0 .. DIR/k<N-1>; prints stats per second.
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
names = [f"{d}/k{i}" for i in range(n)]
st = os.stat
t0 = time.perf_counter()
for p in names:
    st(p)
print(n / (time.perf_counter() - t0))
EOF

# time_ls TARGET REP DIR: ls -l DIR, cold (after dropping dentries and
# inodes) then warm, and the same for the stat storm; checks the count of
# names.
time_ls() {
	local target=$1 rep=$2 dir=$3 temp t0 t1 n
	for temp in cold warm; do
		[[ $temp == cold ]] && drop_caches 2
		t0=$(date +%s%N)
		ls -l "$dir" >"$tmp/ls.out"
		t1=$(date +%s%N)
		n=$(($(wc -l <"$tmp/ls.out") - 1))
		((n >= nkeys)) || die "ls -l $dir listed $n names, not $nkeys"
		record "{\"kind\": \"ls\", \"target\": \"$target\", \"temp\": \"$temp\", \"rep\": $rep, \"names\": $n, \"seconds\": $(((t1 - t0) / 1000))e-6}"
	done
	for temp in cold warm; do
		[[ $temp == cold ]] && drop_caches 2
		n=$(python3 "$tmp/stat.py" "$dir" "$nkeys") ||
			die "stat storm on $dir failed"
		record "{\"kind\": \"stat\", \"target\": \"$target\", \"temp\": \"$temp\", \"rep\": $rep, \"per_s\": $n}"
	done
}

if phase meta; then
	echo "bench_fs: metadata, $nkeys keys ($repeat x)" >&2
	"$build/bench/lib_read_bench" --master_server_address "$master" \
		--metadata_server "$meta" --put_keys "$nkeys" \
		--prefix fsbench/meta/k 2>"$tmp/lib.err" |
		sed 's/^{/{"kind": "put_keys", /' >>"$res" ||
		{ cat "$tmp/lib.err" >&2; die "putting $nkeys keys failed"; }
	mkdir -p "$shm/meta"
	python3 -c '
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    os.close(os.open(f"{d}/k{i}", os.O_WRONLY | os.O_CREAT, 0o644))' \
		"$shm/meta" "$nkeys"
	for ((r = 1; r <= repeat; r++)); do
		time_ls mount "$r" "$mnt/kv/fsbench/meta"
		time_ls tmpfs "$r" "$shm/meta"
		for x in noxattr xattr; do
			o="size=1MiB,files=$nkeys"
			[[ $x == xattr ]] && o+=",xattr"
			start_trivial "$tmp/trivmeta" "$o"
			time_ls "trivial-$x" "$r" "$tmp/trivmeta"
			stop_trivial "$tmp/trivmeta"
		done
	done
	rm -rf "$shm/meta"
fi

# Lock and unlock pairs per second on one file: flock (LOCK_EX then
# LOCK_UN) and POSIX (lockf), by one process, then by two processes
# taking turns on one file (each waiting for the other: the contended
# case). The mount keeps locks in its daemon (docs/design.md, "Locks"):
# a FUSE round trip each; tmpfs keeps them in the kernel.
cat >"$tmp/locks.py" <<'PYEOF'
import fcntl, json, os, sys, time
path, secs, kind, procs = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def lock(f, ex):
    if kind == "flock":
        fcntl.flock(f, fcntl.LOCK_EX if ex else fcntl.LOCK_UN)
    else:
        fcntl.lockf(f, fcntl.LOCK_EX if ex else fcntl.LOCK_UN)
open(path, "a").close()
r, w = os.pipe()
kids = []
for _ in range(procs):
    pid = os.fork()
    if pid == 0:
        os.close(r)
        f = open(path, "r+")
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < secs:
            for _ in range(100):
                lock(f, True)
                lock(f, False)
            n += 100
        os.write(w, f"{n / (time.monotonic() - t0)}\n".encode())
        os._exit(0)
    kids.append(pid)
os.close(w)
for pid in kids:
    os.waitpid(pid, 0)
print(sum(float(x) for x in os.read(r, 4096).decode().split()))
PYEOF
if phase locks; then
	echo "bench_fs: locks ($repeat x)" >&2
	mkdir -p "$shm/locks" "$mnt/kv/fsbench/locks"
	for ((r = 1; r <= repeat; r++)); do
		for kind in flock lockf; do
			for procs in 1 2; do
				for target in tmpfs mount; do
					d=$shm/locks
					[[ $target == mount ]] && d=$mnt/kv/fsbench/locks
					n=$(python3 "$tmp/locks.py" "$d/f" "$seconds" \
						"$kind" "$procs") ||
						die "locks on $d failed"
					record "{\"kind\": \"locks\", \"target\": \"$target\", \"op\": \"$kind\", \"procs\": $procs, \"rep\": $r, \"per_s\": $n}"
				done
			done
		done
	done
	rm -rf "$shm/locks"
fi

# Trees of small files: tar -x and rsync -a create every file with O_EXCL
# (exclusive between mounts: a publish at the create, docs/design.md),
# cp -r with O_TRUNC; --files files of 4 KiB, files per second.
if phase trees; then
	echo "bench_fs: trees ($repeat x)" >&2
	mkdir -p "$tmp/tree/d"
	for ((i = 0; i < nfiles; i++)); do
		head -c 4096 /dev/urandom >"$tmp/tree/d/f$i"
	done
	tar cf "$tmp/tree.tar" -C "$tmp/tree" d
	for ((r = 1; r <= repeat; r++)); do
		for tool in tar rsync cp; do
			for target in tmpfs mount; do
				d=$shm/trees
				[[ $target == mount ]] && d=$mnt/kv/fsbench/trees
				mkdir -p "$d"
				t0=$(date +%s%N)
				case $tool in
				tar) tar xf "$tmp/tree.tar" -C "$d" ;;
				rsync) rsync -a "$tmp/tree/d/" "$d/d/" ;;
				cp) cp -r "$tmp/tree/d" "$d/d" ;;
				esac
				t1=$(date +%s%N)
				n=$(find "$d/d" -type f | wc -l)
				((n == nfiles)) || die "$tool into $d: $n of $nfiles files"
				rm -rf "$d"
				record "{\"kind\": \"trees\", \"target\": \"$target\", \"op\": \"$tool\", \"rep\": $r, \"per_s\": $((nfiles * 1000000000 / (t1 - t0)))}"
			done
		done
	done
fi

read -r load1 _ </proc/loadavg
if [[ -n $results_copy ]]; then
	cp "$res" "$results_copy"
fi

# ---- report ----------------------------------------------------------------

python3 - "$res" "$load0" "$load1" "$size" "$nkeys" "$repeat" <<'EOF'
import json, statistics, sys
res, load0, load1, size, nkeys, repeat = sys.argv[1:]
rows = [json.loads(l) for l in open(res) if l.strip()]

def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None

def pick(kind, key, **kw):
    return med([r.get(key) for r in rows if r["kind"] == kind and
                all(r.get(k) == v for k, v in kw.items())])

def f(v, nd=2):
    return "-" if v is None else f"{v:.{nd}f}"

def ratio(a, b):
    return "-" if a is None or not b else f"{a / b:.2f}x"

def by_rep(kind, key, **kw):
    return {r["rep"]: r.get(key) for r in rows if r["kind"] == kind and
            all(r.get(k) == v for k, v in kw.items())}

def paired(kind, key, kw_a, kw_b):
    """Median of the per-run ratios a/b, their range, and the median."""
    a, b = by_rep(kind, key, **kw_a), by_rep(kind, key, **kw_b)
    rs = sorted(a[k] / b[k] for k in a if k in b and a[k] and b[k])
    if not rs:
        return "-", None
    m = statistics.median(rs)
    if len(rs) == 1:
        return f"{m:.2f}x", m
    return f"{m:.2f}x [{rs[0]:.2f}-{rs[-1]:.2f}]", m

print(f"Medians of {repeat} runs (ratios: median of the per-run ratios "
      f"[range]); GB/s is 10^9 bytes/s. Load average "
      f"{load0} at the start, {load1} at the end.\n")
targets_met = []

if any(r["kind"] == "fio" and r["rw"] == "read" and r["target"] != "remote"
       for r in rows):
    print(f"### Sequential reads, {size} file, fio psync 1 MiB blocks\n")
    print("| mode | jobs | tmpfs | fuse_trivial | mooncakefs | mount / "
          "trivial | mount / tmpfs |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, direct, mode in (("O_DIRECT", 1, "timed"),
                                ("buffered, cold", 0, "once"),
                                ("buffered, warm", 0, "warm")):
        for jobs in (1, 4):
            kw = dict(rw="read", jobs=jobs, direct=direct, mode=mode)
            v = {t: pick("fio", "gbps", target=t, **kw)
                 for t in ("tmpfs", "trivial", "mount")}
            rt, mt = paired("fio", "gbps", dict(target="mount", **kw),
                            dict(target="trivial", **kw))
            rf, _ = paired("fio", "gbps", dict(target="mount", **kw),
                           dict(target="tmpfs", **kw))
            print(f"| {label} | {jobs} | {f(v['tmpfs'])} | "
                  f"{f(v['trivial'])} | {f(v['mount'])} | {rt} | {rf} |")
            if mt is not None:
                targets_met.append((f"read {label}, {jobs} job(s): mount "
                                    ">= 0.8x fuse_trivial", mt >= 0.8, rt))
    print()

if any(r["kind"] == "lib" for r in rows):
    print("### The same object through the library (lib_read_bench)\n")
    print("| call | threads | same host | TCP | mount O_DIRECT, same jobs "
          "| library same host / mount |")
    print("|---|---:|---:|---:|---:|---:|")
    for op, threads in (("object_read", 1), ("object_read", 4),
                        ("get_into", 1)):
        sh = pick("lib", "gbps", op=op, threads=threads, path="same-host")
        tcp = pick("lib", "gbps", op=op, threads=threads, path="tcp")
        m = pick("fio", "gbps", rw="read", target="mount", jobs=threads,
                 direct=1, mode="timed")
        name = ("object_read, 1 MiB chunks" if op == "object_read" else
                "get_into, whole object")
        print(f"| {name} | {threads} | {f(sh)} | {f(tcp)} | {f(m)} | "
              f"{ratio(sh, m)} |")
    first = [(r["path"], r["op"], r["threads"], r["first_gbps"])
             for r in rows if r["kind"] == "lib" and r["rep"] == 1]
    print("\nFirst pass (first run; maps the owner's memory): " +
          ", ".join(f"{p} {o} x{t} {g:.2f}" for p, o, t, g in first) +
          " GB/s.\n")

if any(r["kind"] == "rlib" for r in rows):
    print("### Remote reads through a mount (TCP) against the library's "
          "get\n")
    print("A second mount with no segment, MC_FORCE_TCP=1, reads the "
          "object held in the first mount's segment; the library's "
          "get_into of the whole object over TCP in the same runs.\n")
    print("| mode | jobs | remote mount (GB/s) | library get_into, TCP "
          "(GB/s) | mount / library |")
    print("|---|---:|---:|---:|---:|")
    lib = pick("rlib", "gbps")
    for label, direct, mode in (("O_DIRECT", 1, "timed"),
                                ("buffered, cold", 0, "once")):
        for jobs in (1, 4):
            kw = dict(rw="read", jobs=jobs, direct=direct, mode=mode)
            m = pick("fio", "gbps", target="remote", **kw)
            per = by_rep("fio", "gbps", target="remote", **kw)
            libr = by_rep("rlib", "gbps")
            rs = sorted(per[k] / libr[k] for k in per
                        if per.get(k) and libr.get(k))
            rr = statistics.median(rs) if rs else None
            span = f" [{rs[0]:.2f}-{rs[-1]:.2f}]" if rs else ""
            print(f"| {label} | {jobs} | {f(m)} | {f(lib)} | "
                  f"{f(rr)}x{span} |")
            if rr is not None:
                targets_met.append((f"remote read {label}, {jobs} "
                                    "job(s): mount >= 0.8x library get",
                                    rr >= 0.8, f"{rr:.2f}x"))
    print()

cp = [r for r in rows if r["kind"] == "cp"]
if any(r["kind"] in ("fio", "pywrite") and r.get("rw", "write") == "write"
       for r in rows if r["kind"] != "cp"):
    print(f"### Writes of new files ({size} per job with 1 job, a quarter "
          "each with 4)\n")
    print("| writer | O_DIRECT | jobs | tmpfs | mooncakefs, to last write "
          "| mooncakefs, to close | mount (to close) / tmpfs |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for jobs in (1, 4):
        for direct in (0, 1):
            t = pick("fio", "gbps", rw="write", target="tmpfs", jobs=jobs,
                     direct=direct)
            tc = pick("fio", "gbps_close", rw="write", target="tmpfs",
                      jobs=jobs, direct=direct)
            m = pick("fio", "gbps", rw="write", target="mount", jobs=jobs,
                     direct=direct)
            mc = pick("fio", "gbps_close", rw="write", target="mount",
                      jobs=jobs, direct=direct)
            print(f"| fio, size unknown (staged) | {'yes' if direct else 'no'}"
                  f" | {jobs} | {f(tc if tc else t)} | {f(m)} | {f(mc)} | "
                  f"{ratio(mc, tc if tc else t)} |")
        for mode, label in (("unknown", "python, size unknown (staged)"),
                            ("known", "python, ftruncate first (direct)")):
            vals = {}
            for tg in ("tmpfs", "mount"):
                vals[tg] = med([r["bytes"] / 1e9 / r["seconds"] for r in rows
                                if r["kind"] == "pywrite" and
                                r["target"] == tg and r["mode"] == mode and
                                r["jobs"] == jobs])
            print(f"| {label} | no | {jobs} | {f(vals['tmpfs'])} | - | "
                  f"{f(vals['mount'])} | "
                  f"{ratio(vals['mount'], vals['tmpfs'])} |")
    if cp:
        print(f"\n`cp` of the read file into the mount: "
              f"{cp[0]['bytes'] / 1e9 / cp[0]['seconds']:.2f} GB/s.")
    print()

if any(r["kind"] == "ls" for r in rows):
    print(f"### Metadata, {nkeys} keys in one directory\n")
    print("| target | ls -l cold (s) | ls -l warm (s) | stat cold (/s) | "
          "stat warm (/s) |")
    print("|---|---:|---:|---:|---:|")
    names = {"tmpfs": "tmpfs", "trivial-noxattr":
             "fuse_trivial, getxattr ENOSYS",
             "trivial-xattr": "fuse_trivial, getxattr ENODATA",
             "mount": "mooncakefs"}
    for tg in ("tmpfs", "trivial-noxattr", "trivial-xattr", "mount"):
        lc = pick("ls", "seconds", target=tg, temp="cold")
        lw = pick("ls", "seconds", target=tg, temp="warm")
        sc = pick("stat", "per_s", target=tg, temp="cold")
        sw = pick("stat", "per_s", target=tg, temp="warm")
        print(f"| {names[tg]} | {f(lc)} | {f(lw)} | {f(sc, 0)} | "
              f"{f(sw, 0)} |")
        if tg == "mount":
            for temp, v in (("cold", lc), ("warm", lw)):
                if v is not None:
                    targets_met.append((f"ls -l of {nkeys} keys, {temp}, "
                                        "under 4 s", v < 4, f"{v:.2f} s"))
    pk = [r for r in rows if r["kind"] == "put_keys"]
    if pk:
        print(f"\nKeys put with batch_put_from (1000 per call): "
              f"{pk[0]['keys_per_s']:.0f} keys/s.")
    print()

if any(r["kind"] == "locks" for r in rows):
    print("### Locks: lock and unlock pairs per second on one file\n")
    print("| lock | processes | tmpfs | mooncakefs | mount / tmpfs |")
    print("|---|---:|---:|---:|---:|")
    for op in ("flock", "lockf"):
        for procs in (1, 2):
            t = pick("locks", "per_s", target="tmpfs", op=op, procs=procs)
            m = pick("locks", "per_s", target="mount", op=op, procs=procs)
            txt, _ = paired("locks", "per_s",
                            dict(target="mount", op=op, procs=procs),
                            dict(target="tmpfs", op=op, procs=procs))
            print(f"| {op} | {procs} | {f(t, 0)} | {f(m, 0)} | {txt} |")
    print()

if any(r["kind"] == "trees" for r in rows):
    print("### Trees of 4 KiB files: files per second\n")
    print("| tool | tmpfs | mooncakefs | mount / tmpfs |")
    print("|---|---:|---:|---:|")
    for op in ("tar", "rsync", "cp"):
        t = pick("trees", "per_s", target="tmpfs", op=op)
        m = pick("trees", "per_s", target="mount", op=op)
        txt, _ = paired("trees", "per_s", dict(target="mount", op=op),
                        dict(target="tmpfs", op=op))
        print(f"| {op} | {f(t, 0)} | {f(m, 0)} | {txt} |")
    print()

if targets_met:
    print("### Targets\n")
    print("| target | figure | met |")
    print("|---|---:|---|")
    for name, ok, fig in targets_met:
        print(f"| {name} | {fig} | {'met' if ok else 'NOT met'} |")
EOF
