#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Benchmark of the Mooncake Store, by hand only (never in CI, no timing is
# asserted). Builds the four programs it needs in Release (build-release/,
# as scripts/build.sh release configures it), then, on 127.0.0.1 with
# ephemeral ports:
#
#   1. store_bench: a mooncake_master (durable: sqlite in the temporary
#      directory, WAL, synchronous=NORMAL) with its HTTP metadata server,
#      one pool member (mooncake_client, --global_segment_size, default
#      256MiB, pre-faulted) and a redis-server (no persistence). store_bench
#      puts and gets through the C API from 1 and 4 processes, our client
#      reading through shared memory and then forced onto TCP
#      (MC_FORCE_TCP=1), each case next to Redis measured with hiredis.
#      The master runs with upstream's default --default_kv_lease_ttl, 5 s
#      (MC_BENCH_LEASE_MS): a client reads a key it read within that lease
#      straight from its holder (the location cache, docs/design.md; the
#      bench's gets cycle through their working set in about a second),
#      and the master keeps the memory of a removed object until the
#      object's read lease ends; the bench waits for that after every case.
#   2. master_bench: a fresh mooncake_master of its own (the bench mounts
#      a fake 1 TiB segment there), durable as above: RPC rates, latency
#      and RSS per key after 1,000,000 keys. Then the single-key latencies
#      again with the bench and every master thread on CPU 0: on this kind
#      of VM a round trip between two vCPUs costs ~60 us of wake-up alone.
#   3. master_bench again, puts only, against a master with
#      --db_full_sync (an fsync per commit).
#
# Prints the benches' markdown tables (docs/benchmarks.md). Daemons, the
# temporary directory and the pool member's /dev/shm/mooncake.seg.* are
# cleaned up on any exit.
#
# With --auth (or MC_BENCH_AUTH=1) the pool is authenticated
# (docs/operations.md, "The token"): a fresh 0600 token in the temporary
# directory, --auth_token_file to every mooncake_master, and
# MOONCAKE_AUTH_TOKEN_FILE to the pool member, store_bench (libmooncake)
# and master_bench. Each master is then checked before use: its log must
# say "authentication on" and a master_bench without the token must be
# refused. Without it, MOONCAKE_AUTH_TOKEN_FILE is removed from the
# environment, so that both sides of an A/B are what they say. Redis is
# the same either way. After each bench, stderr says how many TCP
# connections to the master's and the member's ports were closed during
# it (TIME-WAIT sockets): a count that grew with the calls would mean a
# connection (and its authentication) per request.
#
# Usage: scripts/bench_store.sh [--only store|master] [--seconds S]
#                               [--segment_size SIZE] [--no_full_sync]
#                               [--auth] [--master_args 'ARGS']
#                               [-- store_bench options]
#   --only store|master  run one bench only
#   --seconds S          per case (store_bench default 2, master_bench 3)
#   --segment_size SIZE  the pool member's segment (default 256MiB)
#   --no_full_sync       skip step 3
#   --auth               authentication on (above)
#   --master_args 'ARGS' more master_bench options (split on blanks) for
#                        step 2's first run, after the script's own: e.g.
#                        '--procs 1 --forms single --mem_keys 0
#                        --load_keys 100000' for the single-key cases only
#   -- ...               passed to store_bench (e.g. --procs 1 --sizes 1MiB)
# Takes about 8 minutes with the defaults.
# Environment: MC_BENCH_BUILD_DIR (default build-release), MC_BENCH_LEASE_MS
# (the store master's read lease in ms, default 5000; 1000 makes most gets
# miss the location cache), MC_BENCH_AUTH (1: as --auth), TMPDIR.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MC_BENCH_BUILD_DIR:-$root/build-release}
only=
seconds=
segsize=256MiB
full_sync=1
auth=${MC_BENCH_AUTH:-0}
master_args=()
store_args=()
tmp=
segname=mc-bench-store-$$
pids=()

while [[ $# -gt 0 ]]; do
	case $1 in
	--only) only=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--segment_size) segsize=$2; shift 2 ;;
	--no_full_sync) full_sync=0; shift ;;
	--auth) auth=1; shift ;;
	--master_args) read -r -a master_args <<<"$2"; shift 2 ;;
	--) shift; store_args=("$@"); break ;;
	-h | --help) sed -n '3,/^# Environment/p' "$0"; exit 0 ;;
	*) echo "bench_store: unknown argument $1" >&2; exit 2 ;;
	esac
done
case $only in
'' | store | master) ;;
*) echo "bench_store: --only store|master" >&2; exit 2 ;;
esac
case $auth in
0 | '') auth=0 ;;
1) ;;
*) echo "bench_store: MC_BENCH_AUTH=0|1" >&2; exit 2 ;;
esac

cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	# The member unlinks its segment when it leaves cleanly; not after
	# a kill -9 (the name is ours alone).
	rm -f "/dev/shm/mooncake.seg.$segname"
	if [[ -n $tmp ]]; then
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log="$build/bench-store-build.log"
mkdir -p "$build"
echo "bench_store: building Release in $build" >&2
if ! { { [[ -f $build/CMakeCache.txt ]] ||
	CC=gcc cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
		-DMC_WERROR=OFF -DBUILD_TESTING=OFF; } &&
	cmake --build "$build" -j"$(nproc)" --target mooncake_master \
		mooncake_client store_bench master_bench; } >"$log" 2>&1; then
	tail -n 30 "$log" >&2
	echo "bench_store: build failed (full log: $log)" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mc-bench-store.XXXXXX")
master_auth=()
if ((auth)); then
	# 32 random bytes, hex: the loader wants >= 16 bytes, mode 0600.
	(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' \
		>"$tmp/token")
	export MOONCAKE_AUTH_TOKEN_FILE=$tmp/token
	master_auth=(--auth_token_file "$tmp/token")
	echo "bench_store: authentication on (token $tmp/token)" >&2
else
	unset MOONCAKE_AUTH_TOKEN_FILE
	echo "bench_store: authentication off" >&2
fi

# forget PID: drop a process that has ended from the cleanup list.
forget() {
	local p keep=()
	for p in "${pids[@]}"; do
		[[ $p == "$1" ]] || keep+=("$p")
	done
	pids=("${keep[@]}")
}

# stop PID: SIGTERM (a clean leave), then wait.
stop() {
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	forget "$1"
}

# wait_file NAME PID FILE...: until every FILE is non-empty.
wait_file() {
	local name=$1 pid=$2 f i
	shift 2
	for f in "$@"; do
		for ((i = 0; i < 300; i++)); do
			[[ -s $f ]] && break
			if ! kill -0 "$pid" 2>/dev/null; then
				cat "$tmp/$name.log" >&2
				echo "bench_store: $name exited" >&2
				exit 1
			fi
			sleep 0.1
		done
		if [[ ! -s $f ]]; then
			cat "$tmp/$name.log" >&2
			echo "bench_store: $name wrote no $(basename "$f")" >&2
			exit 1
		fi
	done
}

# start_master NAME [options]: sets master_pid, master_addr, meta_url.
start_master() {
	local name=$1
	shift
	"$build/master/mooncake_master" --rpc_address 127.0.0.1 \
		--rpc_port 0 --port_file "$tmp/$name.port" \
		--metrics_host 127.0.0.1 --metrics_port 0 \
		--enable_http_metadata_server \
		--http_metadata_server_host 127.0.0.1 \
		--http_metadata_server_port 0 \
		--metadata_port_file "$tmp/$name.meta" \
		--db_path "$tmp/$name.db" --enable_metric_reporting=false \
		"${master_auth[@]}" "$@" >"$tmp/$name.log" 2>&1 &
	master_pid=$!
	pids+=("$master_pid")
	wait_file "$name" "$master_pid" "$tmp/$name.port" "$tmp/$name.meta"
	master_addr=127.0.0.1:$(<"$tmp/$name.port")
	meta_url=http://127.0.0.1:$(<"$tmp/$name.meta")/metadata
	((auth)) && check_auth "$name"
	return 0
}

# check_auth NAME: the master NAME (just started) requires the token.
check_auth() {
	local name=$1 out=$tmp/$1.probe
	if ! grep -q "authentication on" "$tmp/$name.log"; then
		cat "$tmp/$name.log" >&2
		echo "bench_store: master $name: no \"authentication on\"" >&2
		exit 1
	fi
	# A client without the token: refused before it can do anything
	# (it would otherwise mount its fake segment in this master).
	if env -u MOONCAKE_AUTH_TOKEN_FILE "$build/bench/master_bench" \
		--master_server_address "$master_addr" --procs 1 \
		--cases exist --forms single --mem_keys 0 --load_keys 1 \
		--seconds 0.1 --warmup 0 --no_raw >"$out" 2>&1; then
		cat "$out" >&2
		echo "bench_store: master $name served a client without" \
			"the token" >&2
		exit 1
	fi
	echo "bench_store: master $name: authentication on; a client" \
		"without the token: $(grep -m1 -io 'auth[^.]*' "$out" ||
			tail -n1 "$out")" >&2
}

# listen_ports PID...: the TCP ports the processes listen on, as an ss
# filter ("sport = :P or dport = :P ...").
listen_ports() {
	local pid f=
	for pid in "$@"; do
		while read -r port; do
			f+="${f:+ or }sport = :$port or dport = :$port"
		done < <(ss -Htlnp 2>/dev/null | grep "pid=$pid," |
			awk '{ n = split($4, a, ":"); print a[n] }')
	done
	echo "$f"
}

# closed_conns WHAT PID...: how many connections to the ports of PID...
# were closed in the last minute (TIME-WAIT sockets, either side).
closed_conns() {
	local what=$1 f
	shift
	f=$(listen_ports "$@")
	[[ -n $f ]] || return 0
	echo "bench_store: $what: $(ss -Htan state time-wait "( $f )" |
		wc -l) connections to the master and member ports closed" \
		"in the last 60 s (TIME-WAIT)" >&2
}

free_port() {
	python3 -c 'import socket; s = socket.socket();
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# run COMMAND...: in the background, so that a signal reaches cleanup.
run() {
	local pid
	"$@" &
	pid=$!
	pids+=("$pid")
	if ! wait "$pid"; then
		forget "$pid"
		echo "bench_store: failed: $*" >&2
		exit 1
	fi
	forget "$pid"
}

read -r load _ </proc/loadavg
if awk -v l="$load" 'BEGIN { exit !(l > 0.5) }'; then
	echo "bench_store: warning: load average $load; other work (or the" \
		"build just done) may make the figures noisy" >&2
fi

if [[ $only != master ]]; then
	start_master store --default_kv_lease_ttl "${MC_BENCH_LEASE_MS:-5000}"
	store_master=$master_pid
	"$build/mooncakefs/cli/mooncake_client" --host 127.0.0.1 --port 0 \
		--global_segment_size "$segsize" \
		--master_server_address "$master_addr" \
		--metadata_server "$meta_url" --segment_name "$segname" \
		--port_file "$tmp/member.port" >"$tmp/member.log" 2>&1 &
	member=$!
	pids+=("$member")
	wait_file member "$member" "$tmp/member.port"
	redis_port=$(free_port)
	redis-server --port "$redis_port" --bind 127.0.0.1 --save "" \
		--appendonly no --daemonize no --dir "$tmp" \
		>"$tmp/redis.log" 2>&1 &
	pids+=("$!")
	for ((i = 0; i < 100; i++)); do
		redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
		sleep 0.1
	done
	echo "bench_store: master $master_addr, member" \
		"127.0.0.1:$(<"$tmp/member.port") ($segsize), redis" \
		"127.0.0.1:$redis_port" >&2
	sargs=(--master_server_address "$master_addr"
		--metadata_server "$meta_url" --pool_size "$segsize"
		--redis "127.0.0.1:$redis_port")
	[[ -n $seconds ]] && sargs+=(--seconds "$seconds")
	echo "## store_bench"
	echo
	run "$build/bench/store_bench" "${sargs[@]}" "${store_args[@]}"
	echo
	closed_conns store_bench "$store_master" "$member"
	stop "$member"
	stop "$store_master"
fi

if [[ $only != store ]]; then
	margs=()
	[[ -n $seconds ]] && margs+=(--seconds "$seconds")
	start_master meta
	echo "## master_bench (sqlite, synchronous=NORMAL)"
	echo
	run "$build/bench/master_bench" --master_server_address "$master_addr" \
		--master_pid "$master_pid" --label sqlite "${margs[@]}" \
		"${master_args[@]}"
	closed_conns master_bench "$master_pid"
	du -k "$tmp/meta.db"* | awk '{ s += $1 } END {
		printf "\nsqlite files after the run: %.0f MiB\n\n", s / 1024 }'
	echo "## master_bench, single keys, bench and master on CPU 0"
	echo
	taskset -a -p -c 0 "$master_pid" >/dev/null
	run "$build/bench/master_bench" --master_server_address "$master_addr" \
		--master_pid "$master_pid" --label "sqlite, 1 vCPU" \
		--procs 1 --forms single --cases put,commit,get --mem_keys 0 \
		--pin 0,0 "${margs[@]}"
	echo
	stop "$master_pid"
	if ((full_sync)); then
		start_master sync --db_full_sync
		echo "## master_bench (sqlite, --db_full_sync)"
		echo
		run "$build/bench/master_bench" \
			--master_server_address "$master_addr" \
			--master_pid "$master_pid" --label "sqlite+fsync" \
			--cases put,commit --mem_keys 0 "${margs[@]}"
		stop "$master_pid"
	fi
fi
