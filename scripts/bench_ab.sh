#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Compare two versions of the code with one of our benchmark scripts, in
# the same run: the script of each checkout runs against that checkout's
# Release build, interleaved A B B A A B ... for --rounds rounds, and the
# figures of every case are reported as medians over the rounds with the
# ratio B/A. For claims of a few percent (docs/benchmarks.md says how they
# are made). By hand only, never in CI.
#
#   scripts/bench_ab.sh [--rounds N] [--out DIR] A_ROOT B_ROOT -- SCRIPT [ARGS]
#
# A_ROOT, B_ROOT: checkouts (e.g. `git worktree add /tmp/a HEAD~1`), each
# with its Release build in build-release/ (scripts/build.sh release).
# SCRIPT: a benchmark script of scripts/ that takes --results FILE and
# writes JSON lines there (bench_fs.sh). ARGS go to it unchanged.
# --rounds N (default 5): runs of each side. --out DIR keeps every run's
# JSON lines and logs (default: a temporary directory, removed).
#
# A case is a JSON line without its numeric figures and its "rep"; each
# numeric field is a figure (gbps, seconds, per_s, ...): its median over
# every run of a side is reported.
set -euo pipefail

rounds=5
out=
while [[ $# -gt 0 ]]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
	*) break ;;
	esac
done
[[ $# -ge 4 && $3 == -- ]] || {
	echo "usage: $0 [--rounds N] [--out DIR] A_ROOT B_ROOT -- SCRIPT [ARGS]" >&2
	exit 2
}
a=$(cd "$1" && pwd)
b=$(cd "$2" && pwd)
script=$4
shift 4
for r in "$a" "$b"; do
	[[ -x $r/scripts/$script ]] || { echo "bench_ab: no $r/scripts/$script" >&2; exit 2; }
	[[ -d $r/build-release ]] || { echo "bench_ab: no $r/build-release (scripts/build.sh release)" >&2; exit 2; }
done
keep=1
if [[ -z $out ]]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/mc-bench-ab.XXXXXX")
	keep=0
fi
mkdir -p "$out"
trap '[[ $keep = 1 ]] || rm -rf "$out"' EXIT

run() { # SIDE ROOT ROUND ARGS...
	local side=$1 root=$2 round=$3
	shift 3
	echo "bench_ab: round $round, $side ($root)" >&2
	MC_BENCH_BUILD_DIR=$root/build-release "$root/scripts/$script" "$@" \
		--results "$out/$side-$round.jsonl" >"$out/$side-$round.log" 2>&1 ||
		{ tail -20 "$out/$side-$round.log" >&2; exit 1; }
}

for ((i = 1; i <= rounds; i++)); do
	if ((i % 2)); then
		run A "$a" "$i" "$@"
		run B "$b" "$i" "$@"
	else
		run B "$b" "$i" "$@"
		run A "$a" "$i" "$@"
	fi
done

python3 - "$out" "$a" "$b" "$rounds" <<'EOF'
import glob, json, os, statistics, sys
out, a, b, rounds = sys.argv[1:]
fig = {}  # (case, figure) -> {"A": [...], "B": [...]}
for path in sorted(glob.glob(os.path.join(out, "*.jsonl"))):
    side = os.path.basename(path)[0]
    for line in open(path):
        if not line.strip():
            continue
        row = json.loads(line)
        case = tuple(sorted((k, v) for k, v in row.items()
                            if k != "rep" and not isinstance(v, (int, float))
                            or k in ("jobs", "bytes", "names")))
        for k, v in row.items():
            if k in ("rep", "jobs", "bytes", "names") or \
                    not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            fig.setdefault((case, k), {"A": [], "B": []})[side].append(v)
print(f"A = {a}\nB = {b}\n{rounds} rounds each, interleaved; medians\n")
print("| case | figure | A | B | B/A |")
print("|---|---|---|---|---|")
for (case, k), v in sorted(fig.items(), key=lambda x: str(x[0])):
    if not v["A"] or not v["B"]:
        continue
    ma, mb = statistics.median(v["A"]), statistics.median(v["B"])
    name = " ".join(f"{x}={y}" for x, y in case)
    r = f"{mb / ma:.3f}" if ma else "-"
    print(f"| {name} | {k} | {ma:.4g} | {mb:.4g} | {r} |")
EOF
