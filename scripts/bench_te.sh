#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Benchmark of the transfer engine, by hand only (never in CI, no timing is
# asserted). Builds Release in build-bench/, starts two
# transfer_engine_bench targets on 127.0.0.1 (P2PHANDSHAKE, one with a
# plain buffer for tcp, one with te_mem_alloc memory for shm) and runs the
# initiator against them, each case right after its baseline measured in
# the same run:
#
#   tcp, 64 KiB / 1 MiB / 4 MiB blocks, read and write:
#     1 thread  x 1 lane   vs tcp_pump with 1 stream (and with
#                          SO_RCVLOWAT 256 KiB, raw TCP at its best)
#     4 threads x 4 lanes  vs tcp_pump with 4 streams
#     1 thread  x 4 lanes  vs tcp_pump with 4 streams (64 KiB, 1 MiB)
#     12 threads x 4 lanes vs tcp_pump with 4 streams (64 KiB, 1 MiB;
#                          upstream's default --threads)
#   shm, 1 MiB blocks, read and write, 1 thread vs memcpy_bench
#
# Lanes are TCP connections, so each row compares the same number of
# streams. Every benchmark walks the same amount of pre-faulted memory
# (a --buffer_size target, batch_size x block_size per initiator thread).
# Prints a markdown table with the ratios (docs/benchmarks.md). Targets and
# the temporary directory are cleaned up on any exit.
#
# Usage: scripts/bench_te.sh [--duration S] [--buffer_size SIZE] [--iperf3]
#                            [--repeat N]
#   --duration S      seconds per case (default 4; ~4 min in all)
#   --repeat N        run every case and its baseline N times, interleaved,
#                     and report medians (the ratio: of the N pairs) and
#                     the ratio's range; N x the time
#   --buffer_size SZ  target buffer (default 1G, upstream's default)
#   --iperf3          also run iperf3 (loopback, same streams and block
#                     size) as a second TCP baseline
# Environment: MC_BENCH_BUILD_DIR (default build-bench), TMPDIR.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MC_BENCH_BUILD_DIR:-$root/build-bench}
duration=4
bufsize=1G
iperf=0
repeat=1
tmp=
pids=()

while [[ $# -gt 0 ]]; do
	case $1 in
	--duration) duration=$2; shift 2 ;;
	--buffer_size) bufsize=$2; shift 2 ;;
	--iperf3) iperf=1; shift ;;
	--repeat) repeat=$2; shift 2 ;;
	-h | --help) sed -n '3,/^# Environment/p' "$0"; exit 0 ;;
	*) echo "bench_te: unknown argument $1" >&2; exit 2 ;;
	esac
done

cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	if [[ -n $tmp ]]; then
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log="$build/bench-te-build.log"
mkdir -p "$build"
echo "bench_te: building Release in $build" >&2
if ! { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
	-DBUILD_TESTING=OFF &&
	cmake --build "$build" -j"$(nproc)" \
		--target transfer_engine_bench tcp_pump memcpy_bench; } \
	>"$log" 2>&1; then
	tail -n 30 "$log" >&2
	echo "bench_te: build failed (full log: $log)" >&2
	exit 1
fi

bin=$build/bench
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mc-bench-te.XXXXXX")
results=$tmp/results

# forget PID: drop a process that has ended from the cleanup list.
forget() {
	local p keep=()
	for p in "${pids[@]}"; do
		[[ $p == "$1" ]] || keep+=("$p")
	done
	pids=("${keep[@]}")
}

# start_target NAME PROTOCOL: sets $segment to the target's segment name.
# (Not in a $(...) subshell: the target's pid must reach cleanup.)
start_target() {
	local name=$1 proto=$2 ready=$tmp/$1.ready i pid
	"$bin/transfer_engine_bench" --mode target --protocol "$proto" \
		--buffer_size "$bufsize" --ready_file "$ready" \
		>"$tmp/$name.log" 2>&1 &
	pid=$!
	pids+=("$pid")
	for ((i = 0; i < 600; i++)); do
		[[ -s $ready ]] && break
		if ! kill -0 "$pid" 2>/dev/null; then
			cat "$tmp/$name.log" >&2
			echo "bench_te: target ($name) exited" >&2
			exit 1
		fi
		sleep 0.1
	done
	if [[ ! -s $ready ]]; then
		echo "bench_te: target ($name) wrote no ready file" >&2
		exit 1
	fi
	segment=$(sed -n 's/.*"segment": "\([^"]*\)".*/\1/p' "$ready")
}

# run KIND KEY COMMAND...: runs a benchmark in the background (so a signal
# reaches cleanup at once) and appends "KIND<TAB>KEY<TAB>JSON" to results.
run() {
	local kind=$1 key=$2 out=$tmp/out pid
	shift 2
	"$@" >"$out" 2>"$tmp/err" &
	pid=$!
	pids+=("$pid")
	if ! wait "$pid"; then
		forget "$pid"
		cat "$out" "$tmp/err" >&2
		echo "bench_te: failed: $*" >&2
		exit 1
	fi
	forget "$pid"
	printf '%s\t%s\t%s\t%s\n' "$kind" "$key" "$rep" \
		"$(grep '^{' "$out" | tail -n 1)" >>"$results"
	printf 'bench_te: %-8s %-28s %s\n' "$kind" "$key" \
		"$(sed -n 's/.*"gbps": \([0-9.]*\).*/\1 GB\/s/p' "$out" |
			tail -n 1)" >&2
}

iperf_port=
if ((iperf)); then
	iperf_port=$(python3 -c 'import socket; s = socket.socket();
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	iperf3 -s -B 127.0.0.1 -p "$iperf_port" >"$tmp/iperf3.log" 2>&1 &
	pids+=("$!")
	sleep 0.5
fi

# iperf3 as a tool printing our JSON line. Its blocks stop at 1 MiB.
iperf_json() {
	local op=$1 streams=$2 block=$3 rev=()
	[[ $op == read ]] && rev=(-R)
	[[ $block == 4M ]] && block=1M
	iperf3 -c 127.0.0.1 -p "$iperf_port" -t "$duration" -l "$block" \
		-P "$streams" "${rev[@]}" -J |
		python3 -c 'import json, sys; d = json.load(sys.stdin)
print(json.dumps({"tool": "iperf3", "gbps":
      d["end"]["sum_received"]["bits_per_second"] / 8e9}))'
}

read -r load_start _ </proc/loadavg
start_target tcp tcp
tcp_seg=$segment
start_target shm shm
shm_seg=$segment
echo "bench_te: targets up: tcp $tcp_seg, shm $shm_seg;" \
	"$duration s per case" >&2

te() { # te KEY PROTO SEGMENT OP BLOCK BATCH THREADS LANES
	run te "$1" "$bin/transfer_engine_bench" --mode initiator \
		--protocol "$2" --segment_id "$3" --operation "$4" \
		--block_size "$5" --batch_size "$6" --threads "$7" \
		--lanes "$8" --duration "$duration" --json
}

pump() { # pump KEY OP BLOCK BATCH STREAMS
	run pump "$1" "$bin/tcp_pump" --operation "$2" --block_size "$3" \
		--batch_size "$4" --threads "$5" --buffer_size "$bufsize" \
		--duration "$duration" --json
	# One stream leaves a vCPU idle: plain sockets then wake the reader
	# per segment, and on a VM each wake-up of an idle vCPU is costly.
	# SO_RCVLOWAT shows what raw TCP reaches without that (with more
	# streams it changed < 5% here, so it is not run there).
	if (($5 == 1)); then
		run pump+lw "$1" "$bin/tcp_pump" --operation "$2" \
			--block_size "$3" --batch_size "$4" --threads "$5" \
			--buffer_size "$bufsize" --duration "$duration" \
			--rcvlowat 256K --json
	fi
	if ((iperf)); then
		run iperf3 "$1" iperf_json "$2" "$5" "$3"
	fi
}

for block in 64K 1M 4M; do
	batch=128
	[[ $block == 4M ]] && batch=32 # 512 MiB per thread otherwise
	for op in read write; do
		for ((rep = 1; rep <= repeat; rep++)); do
			pump "$op/$block/s1" "$op" "$block" "$batch" 1
			te "tcp/$op/$block/t1/l1" tcp "$tcp_seg" "$op" \
				"$block" "$batch" 1 1
			pump "$op/$block/s4" "$op" "$block" "$batch" 4
			te "tcp/$op/$block/t4/l4" tcp "$tcp_seg" "$op" \
				"$block" "$batch" 4 4
			[[ $block == 4M ]] && continue
			te "tcp/$op/$block/t1/l4" tcp "$tcp_seg" "$op" \
				"$block" "$batch" 1 4
			# Upstream's default thread count, where its engine
			# collapsed on this machine (0.03-0.15 GB/s).
			te "tcp/$op/$block/t12/l4" tcp "$tcp_seg" "$op" \
				"$block" "$batch" 12 4
		done
	done
done
for op in read write; do
	for ((rep = 1; rep <= repeat; rep++)); do
		run memcpy "$op/1M" "$bin/memcpy_bench" --operation "$op" \
			--block_size 1M --batch_size 128 \
			--buffer_size "$bufsize" --duration "$duration" --json
		te "shm/$op/1M/t1/l0" shm "$shm_seg" "$op" 1M 128 1 0
	done
done
read -r load_end _ </proc/loadavg

python3 - "$results" "$load_start" "$load_end" "$(nproc)" "$repeat" <<'EOF'
import json, statistics as st, sys

res = {}  # (kind, key) -> {rep: record}
for line in open(sys.argv[1]):
    kind, key, rep, j = line.rstrip("\n").split("\t", 3)
    res.setdefault((kind, key), {})[rep] = json.loads(j)
reps = int(sys.argv[5])
print(f"Load average {sys.argv[2]} at the start, {sys.argv[3]} at the end;"
      f" {sys.argv[4]} CPUs; {reps} run(s) per case"
      + (" (medians; the ratio's range in brackets)" if reps > 1 else "")
      + ".\n")
has_iperf = any(k == "iperf3" for k, _ in res)


def med(runs, field="gbps"):
    return st.median(r[field] for r in runs.values())


def ratio(te, base):
    rs = [te[k]["gbps"] / base[k]["gbps"] for k in te if k in base]
    text = f"{st.median(rs):.2f}x"
    if len(rs) > 1:
        text += f" [{min(rs):.2f}-{max(rs):.2f}]"
    return st.median(rs), text


head = ("| transport | op | block | threads | lanes | GB/s | p50 batch (ms) "
        "| p99 batch (ms) | baseline | baseline GB/s | ratio | target "
        "| pump, rcvlowat GB/s | vs it |")
if has_iperf:
    head += " iperf3 GB/s | vs iperf3 |"
print(head)
print("|" + "---|" * (head.count("|") - 1))
targets = {("tcp", "64K"): 0.5, ("tcp", "1M"): 1.0, ("shm", "1M"): 0.7}
for (kind, key), te in res.items():
    if kind != "te":
        continue
    proto, op, block, t, l = key.split("/")
    threads, lanes = int(t[1:]), int(l[1:])
    if proto == "tcp":
        bkey = f"{op}/{block}/s{lanes}"
        base, bname = res[("pump", bkey)], f"tcp_pump x{lanes}"
    else:
        bkey = f"{op}/{block}"
        base, bname = res[("memcpy", bkey)], "memcpy x1"
    r, rtext = ratio(te, base)
    goal = targets.get((proto, block))
    verdict = "-" if goal is None else (
        f">= {goal}x: {'met' if r >= goal else 'MISSED'}")
    line = (f"| {proto} | {op} | {block}iB | {threads} | "
            f"{lanes if proto == 'tcp' else '-'} | {med(te):.2f} | "
            f"{med(te, 'p50_batch_us') / 1e3:.1f} | "
            f"{med(te, 'p99_batch_us') / 1e3:.1f} "
            f"| {bname} | {med(base):.2f} | {rtext} | {verdict} |")
    for k in ["pump+lw"] + (["iperf3"] if has_iperf else []):
        b = res.get((k, bkey)) if proto == "tcp" else None
        line += f" {med(b):.2f} | {ratio(te, b)[1]} |" if b else " - | - |"
    print(line)
EOF
