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
#   scripts/bench_ab.sh [--rounds N] [--out DIR] [--markdown]
#                       [--a-env K=V] [--b-env K=V] [--a-arg ARG] [--b-arg ARG]
#                       A_ROOT B_ROOT -- SCRIPT [ARGS]
#
# A_ROOT, B_ROOT: checkouts (e.g. `git worktree add /tmp/a HEAD~1`), each
# with its Release build in build-release/ (scripts/build.sh release).
# They may be the same checkout, to compare two settings of one build:
# --a-env K=V / --b-env K=V (repeatable) set an environment variable for
# that side's runs only, --a-arg ARG / --b-arg ARG (repeatable) append
# one argument to that side's ARGS. E.g. authentication off against on:
#   scripts/bench_ab.sh --markdown --b-env MC_BENCH_AUTH=1 . . -- \
#       bench_store.sh --only store -- --procs 1 --sizes 1MiB --forms single
# SCRIPT: a benchmark script of scripts/ that takes --results FILE and
# writes JSON lines there (bench_fs.sh). ARGS go to it unchanged.
# --rounds N (default 5): runs of each side. --out DIR keeps every run's
# JSON lines and logs (default: a temporary directory, removed).
# --markdown: SCRIPT takes no --results and prints markdown tables
# (bench_store.sh); every numeric cell of a row is a figure, the row is
# known by its table's heading, its position and its other cells.
#
# A case is a JSON line without its numeric figures and its "rep"; each
# numeric field is a figure (gbps, seconds, per_s, ...): its median over
# every run of a side is reported, then the spread (min-max) of each
# side. The load average (1 min) at the start of each run is kept in the
# run's log and summed up above the table.
set -euo pipefail

rounds=5
out=
markdown=0
a_env=()
b_env=()
a_args=()
b_args=()
while [[ $# -gt 0 ]]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--markdown) markdown=1; shift ;;
	--a-env | --b-env)
		[[ $2 == [A-Za-z_]*=* ]] ||
			{ echo "bench_ab: $1 K=V, not $2" >&2; exit 2; }
		if [[ $1 == --a-env ]]; then a_env+=("$2"); else b_env+=("$2"); fi
		shift 2
		;;
	--a-arg) a_args+=("$2"); shift 2 ;;
	--b-arg) b_args+=("$2"); shift 2 ;;
	-h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
	*) break ;;
	esac
done
[[ $# -ge 4 && $3 == -- ]] || {
	echo "usage: $0 [--rounds N] [--out DIR] [--markdown] [--a-env K=V]" \
		"[--b-env K=V] [--a-arg ARG] [--b-arg ARG] A_ROOT B_ROOT --" \
		"SCRIPT [ARGS]" >&2
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

# md_to_jsonl FILE: the markdown tables of FILE as JSON lines.
md_to_jsonl() {
	python3 - "$1" <<'EOF'
import json, re, sys
NUM = re.compile(r"^(-?[\d,]*\.?\d+(?:[eE][-+]?\d+)?)\s*"
                 r"(?:x|%|us|ms|s|GB/s|ops/s|keys/s)?$")
heading, header, row = "", None, 0
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("#"):
        heading, header = line.lstrip("# "), None
        continue
    if not line.startswith("|"):
        header = None
        continue
    cells = [c.strip() for c in line.strip("|").split("|")]
    if header is None:
        header, row = cells, 0
        continue
    if all(set(c) <= set("-: ") for c in cells):
        continue
    rec = {"table": heading, "row": f"r{row}"}
    for i, (h, c) in enumerate(zip(header, cells)):
        parts = [p.strip() for p in c.split(" / ")]
        nums = [NUM.match(p) for p in parts]
        if all(nums):
            for j, m in enumerate(nums):
                suffix = f".{j}" if len(nums) > 1 else ""
                rec[f"c{i} {h}{suffix}"] = float(m.group(1).replace(",", ""))
        elif h != "target":  # met / MISSED: an outcome, not a name
            rec[h] = c
    row += 1
    print(json.dumps(rec))
EOF
}

run() { # SIDE ROOT ROUND ARGS...
	local side=$1 root=$2 round=$3 base load
	local -a env
	shift 3
	base=$out/$side-$round
	if [[ $side == A ]]; then
		env=("${a_env[@]}")
		set -- "$@" "${a_args[@]}"
	else
		env=("${b_env[@]}")
		set -- "$@" "${b_args[@]}"
	fi
	read -r load _ </proc/loadavg
	echo "bench_ab: round $round, $side ($root${env[*]:+, ${env[*]}}), load $load" >&2
	echo "bench_ab: load average $load at start" >"$base.log"
	if ((markdown)); then
		env "${env[@]}" MC_BENCH_BUILD_DIR="$root/build-release" \
			"$root/scripts/$script" "$@" >"$base.md" 2>>"$base.log" ||
			{ tail -20 "$base.log" >&2; exit 1; }
		md_to_jsonl "$base.md" >"$base.jsonl"
		return
	fi
	env "${env[@]}" MC_BENCH_BUILD_DIR="$root/build-release" \
		"$root/scripts/$script" "$@" \
		--results "$base.jsonl" >>"$base.log" 2>&1 ||
		{ tail -20 "$base.log" >&2; exit 1; }
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

a_desc=$a
b_desc=$b
a_set=("${a_env[@]}" "${a_args[@]}")
b_set=("${b_env[@]}" "${b_args[@]}")
((${#a_set[@]})) && a_desc+=" (${a_set[*]})"
((${#b_set[@]})) && b_desc+=" (${b_set[*]})"
python3 - "$out" "$a_desc" "$b_desc" "$rounds" <<'EOF'
import glob, json, os, re, statistics, sys
out, a, b, rounds = sys.argv[1:]
loads = []
for path in sorted(glob.glob(os.path.join(out, "[AB]-*.log"))):
    with open(path) as f:
        m = re.match(r"bench_ab: load average ([\d.]+)", f.readline())
        if m:
            loads.append(float(m.group(1)))
# Numbers that name a case rather than measure it.
IDENT = ("jobs", "direct", "names", "threads", "procs")
fig = {}  # (case, figure) -> {"A": [...], "B": [...]}
for path in sorted(glob.glob(os.path.join(out, "*.jsonl"))):
    side = os.path.basename(path)[0]
    for line in open(path):
        if not line.strip():
            continue
        row = json.loads(line)
        case = tuple(sorted((k, v) for k, v in row.items()
                            if k != "rep" and not isinstance(v, (int, float))
                            or k in IDENT))
        for k, v in row.items():
            if k == "rep" or k in IDENT or \
                    not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            fig.setdefault((case, k), {"A": [], "B": []})[side].append(v)
print(f"A = {a}\nB = {b}\n{rounds} rounds each, interleaved; medians")
if loads:
    print(f"load average (1 min) at the runs' starts: {min(loads):.2f}-"
          f"{max(loads):.2f}, median {statistics.median(loads):.2f}")
print()
print("| case | figure | A | B | B/A | A min-max | B min-max |")
print("|---|---|---|---|---|---|---|")
for (case, k), v in sorted(fig.items(), key=lambda x: str(x[0])):
    if not v["A"] or not v["B"]:
        continue
    ma, mb = statistics.median(v["A"]), statistics.median(v["B"])
    name = " ".join(f"{x}={y}" for x, y in case)
    r = f"{mb / ma:.3f}" if ma else "-"
    print(f"| {name} | {k} | {ma:.4g} | {mb:.4g} | {r} | "
          f"{min(v['A']):.4g}-{max(v['A']):.4g} | "
          f"{min(v['B']):.4g}-{max(v['B']):.4g} |")
EOF
