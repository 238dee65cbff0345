#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The master's work per RPC, counted: instructions each RPC handler
# executes (inclusive of sqlite, protobuf and everything else it calls),
# per call, for two versions of the code. Deterministic to a fraction of a
# percent where wall-clock runs on a small VM swing by 20%: the way a
# claim of "within 5%" on the master is checked (docs/benchmarks.md). By
# hand only, never in CI (each side runs under valgrind for ~30 s).
#
#   scripts/bench_master_instr.sh [--seconds S] A_ROOT B_ROOT
#
# A_ROOT, B_ROOT: checkouts (e.g. `git worktree add /tmp/a HEAD~1`), each
# with its Release build in build-release/ (scripts/build.sh release).
# For each side and each form (single, batch of 128): a fresh master under
# callgrind, master_bench of that side against it (puts, then gets), the
# master stopped; prints a markdown table of instructions per call of
# PutStart, PutEnd and GetReplicaList and the ratio B/A.
set -euo pipefail

seconds=4
if [ "${1:-}" = --seconds ]; then
	seconds=$2
	shift 2
fi
if [ $# -ne 2 ]; then
	sed -n '3,18p' "$0" >&2
	exit 2
fi
a_root=$(realpath "$1")
b_root=$(realpath "$2")
for r in "$a_root" "$b_root"; do
	for b in master/mooncake_master bench/master_bench; do
		[ -x "$r/build-release/$b" ] || {
			echo "$r/build-release/$b missing (scripts/build.sh release)" >&2
			exit 1
		}
	done
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run SIDE ROOT FORM: one master under callgrind, one master_bench.
run() {
	local side=$1 root=$2 form=$3 d="$work/$1.$3" port pid
	mkdir -p "$d"
	port=$((40000 + RANDOM % 20000))
	valgrind --tool=callgrind --callgrind-out-file="$d/cg.out" \
		"$root/build-release/master/mooncake_master" \
		--rpc_address 127.0.0.1 --rpc_port "$port" \
		--metrics_host 127.0.0.1 --metrics_port $((port + 1)) --db_path "$d/m.db" \
		--port_file "$d/port" --log_file "$d/master.log" \
		>"$d/valgrind.log" 2>&1 &
	pid=$!
	for _ in $(seq 600); do
		[ -s "$d/port" ] && break
		kill -0 "$pid" 2>/dev/null || {
			cat "$d/valgrind.log" >&2
			exit 1
		}
		sleep 0.2
	done
	"$root/build-release/bench/master_bench" \
		--master_server_address "127.0.0.1:$port" --procs 1 \
		--cases put,get --forms "$form" --mem_keys 0 --load_keys 3000 \
		--seconds "$seconds" --no_raw --warmup 20 >"$d/bench.txt" 2>&1
	kill -TERM "$pid"
	wait "$pid" || true
	callgrind_annotate --inclusive=yes "$d/cg.out" >"$d/annotate.txt" 2>/dev/null
}

for form in single batch; do
	run a "$a_root" "$form"
	run b "$b_root" "$form"
done

python3 - "$work" <<'EOF'
import re
import sys

work = sys.argv[1]
HANDLERS = {"h_put_start": "PutStart", "h_put_end": "PutEnd",
            "h_get_replica_list": "GetReplicaList"}


def calls(path):
    """Calls of each handler: the calls= lines after a cfn= naming it."""
    names, out, cur = {}, {}, None
    for line in open(path, errors="replace"):
        m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if m:
            kind, i, name = m.groups()
            if name:
                names[i] = name
            cur = names.get(i) if kind == "cfn" else None
            continue
        m = re.match(r"^calls=(\d+)", line)
        if m and cur:
            out[cur] = out.get(cur, 0) + int(m.group(1))
            cur = None
    return out


def inclusive(path):
    out = {}
    for line in open(path):
        m = re.match(r"^\s*([\d,]+) \(.*\)\s+\S*?:?(\w+) \[", line)
        if m and m.group(2) in HANDLERS and m.group(2) not in out:
            out[m.group(2)] = int(m.group(1).replace(",", ""))
    return out


print("| RPC | A (instructions per call) | B | B / A |")
print("|---|---:|---:|---:|")
for form in ("single", "batch"):
    per = {}
    for side in ("a", "b"):
        d = f"{work}/{side}.{form}"
        c, i = calls(d + "/cg.out"), inclusive(d + "/annotate.txt")
        per[side] = {h: i[h] / c[h] for h in HANDLERS if c.get(h)}
    for h, name in HANDLERS.items():
        if h in per["a"] and h in per["b"]:
            label = name if form == "single" else \
                f"Batch{name} (128 keys)"
            a, b = per["a"][h], per["b"][h]
            print(f"| {label} | {a:,.0f} | {b:,.0f} | {b / a:.3f} |")
EOF
