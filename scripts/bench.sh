#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Benchmark of the HTTP metadata service, by hand only (never in CI, no
# timing is asserted). Builds Release in build-bench/, starts three
# mooncake_metad on 127.0.0.1 with ephemeral ports -- memory store, sqlite
# store, sqlite store with --store_full_sync -- and runs metad_bench against
# all three in one run, so every row shares the same raw TCP baseline.
# Prints a markdown table (docs/benchmarks.md). Daemons and the temporary
# directory are cleaned up on any exit.
#
# Client threads run on one CPU and every server (the daemons, and the raw
# TCP echo server inside metad_bench) on another, so each side has a core
# and the figures do not depend on where the scheduler happens to put the
# two ends of a ping-pong (on a 2-vCPU VM that alone changes a 1-client
# round trip from ~4 us, same core, to ~70 us, cross-core).
#
# Usage: scripts/bench.sh [metad_bench options, e.g. --seconds 5]
# Environment: MC_BENCH_BUILD_DIR (default build-bench), TMPDIR (the stores
# live there), MC_BENCH_PIN (CLIENT_CPU,SERVER_CPU; default 0,1 when there
# are two CPUs or more; empty: no pinning), and mooncake_metad's own
# MOONCAKE_METAD_* (e.g. MOONCAKE_METAD_THREADS=2).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MC_BENCH_BUILD_DIR:-$root/build-bench}
tmp=
pids=()

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

log="$build/bench-build.log"
mkdir -p "$build"
echo "bench: building Release in $build" >&2
if ! { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
	-DBUILD_TESTING=OFF &&
	cmake --build "$build" -j"$(nproc)" \
		--target mooncake_metad metad_bench; } >"$log" 2>&1; then
	tail -n 30 "$log" >&2
	echo "bench: build failed (full log: $log)" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mc-bench.XXXXXX")
urls=()
pin_args=()
server_cmd=()
if [[ $(nproc) -ge 2 ]]; then
	pin=${MC_BENCH_PIN-0,1}
else
	pin=${MC_BENCH_PIN-}
fi
if [[ -n $pin ]]; then
	pin_args=(--pin "$pin")
	server_cmd=(taskset -c "${pin#*,}")
fi

# start_metad NAME [mooncake_metad options]: appends NAME=URL to urls.
start_metad() {
	local name=$1 port_file="$tmp/$1.port" pid i
	shift
	"${server_cmd[@]}" "$build/metad/mooncake_metad" --host 127.0.0.1 \
		--port 0 --port_file "$port_file" "$@" 2>"$tmp/$name.log" &
	pid=$!
	pids+=("$pid")
	for ((i = 0; i < 100; i++)); do
		[[ -s $port_file ]] && break
		if ! kill -0 "$pid" 2>/dev/null; then
			cat "$tmp/$name.log" >&2
			echo "bench: mooncake_metad ($name) exited" >&2
			exit 1
		fi
		sleep 0.1
	done
	if [[ ! -s $port_file ]]; then
		echo "bench: mooncake_metad ($name) wrote no port file" >&2
		exit 1
	fi
	urls+=(--url "$name=http://127.0.0.1:$(<"$port_file")/metadata")
}

start_metad memory --store memory
start_metad sqlite --store "sqlite:$tmp/metad.db"
start_metad sqlite+fsync --store "sqlite:$tmp/metad-sync.db" \
	--store_full_sync=true

read -r load _ </proc/loadavg
if awk -v l="$load" 'BEGIN { exit !(l > 0.5) }'; then
	echo "bench: warning: load average $load; other work (or the" \
		"build just done) may make the figures noisy" >&2
fi
echo "bench: running metad_bench (about 40 s with the defaults)" >&2
# In the background so that a signal to this script runs cleanup at once.
"$build/bench/metad_bench" "${pin_args[@]}" "${urls[@]}" "$@" &
pids+=("$!")
wait "$!"
