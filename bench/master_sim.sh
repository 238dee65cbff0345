#!/usr/bin/env bash
# The master at scale, in process (bench/master_sim.c): memory db runs at
# 1M, 3M and 10M keys on 1,000 segments, one sqlite-file run at 1M, and a
# table of the medians (docs/benchmarks.md, "Master at scale").
#   bench/master_sim.sh [outdir]
# Environment: SIM_BIN (default build-release/bench/master_sim),
# SIM_SIZES ("1000000 3000000 10000000"), SIM_RUNS (3: runs per size below
# SIM_BIG, 10000000, which runs SIM_BIG_RUNS, 1, times: ~10 min each on a
# 2 vCPU VM), SIM_FILE_KEYS (1000000; 0 skips the file run), SIM_ARGS
# (more flags for every run). A run whose JSON is already in outdir is not
# run again (delete it to rerun).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${SIM_BIN:-build-release/bench/master_sim}
out=${1:-/tmp/master_sim}
sizes=${SIM_SIZES:-1000000 3000000 10000000}
runs=${SIM_RUNS:-3}
big=${SIM_BIG:-10000000}
big_runs=${SIM_BIG_RUNS:-1}
file_keys=${SIM_FILE_KEYS:-1000000}
read -r -a extra <<<"${SIM_ARGS:-}"
[ -x "$bin" ] || { echo "build it first: scripts/build.sh release" >&2; exit 1; }
mkdir -p "$out"

run() { # name, flags...
	local name=$1
	shift
	[ -s "$out/$name.json" ] && return 0
	echo "master_sim $* -> $out/$name.json" >&2
	"$bin" "$@" "${extra[@]}" --json >"$out/$name.json.tmp" 2>"$out/$name.err"
	mv "$out/$name.json.tmp" "$out/$name.json"
}

for n in $sizes; do
	r=$runs
	[ "$n" -ge "$big" ] && r=$big_runs
	for i in $(seq 1 "$r"); do
		run "mem-$n-$i" --keys "$n" --db memory
	done
done
if [ "$file_keys" -gt 0 ]; then
	run "file-$file_keys-1" --keys "$file_keys" --db "$out/sim.db"
	rm -f "$out/sim.db" "$out/sim.db-wal" "$out/sim.db-shm"
fi

python3 - "$out" <<'EOF'
import glob, json, os, statistics, sys
out = sys.argv[1]
groups = {}
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    try:
        d = json.load(open(f))
    except ValueError:
        continue  # a run still going, or one that failed
    groups.setdefault((d["db"], d["keys"]), []).append(d)
def med(v, k):
    x = [d[k] for d in v if k in d]
    return statistics.median(x) if x else float("nan")
print("Rates per CPU second of the (single-threaded) master, medians; wall-clock")
print("figures (longest tick, p50) include other jobs' contention (wall/CPU).")
print()
print("| db | keys | runs | RSS B/key | put/s | get/s | put/s, watermark evicting | longest tick ms (wall) | put/s, each evicting | its p50 ms (wall) | wall/CPU | sqlite B/key | restore s per M keys (CPU / wall) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (db, n), v in sorted(groups.items(), key=lambda kv: (kv[0][0] != "memory", kv[0][1])):
    f = db == "file"
    sq = "%.0f" % med(v, "db_bytes_per_key") if f else "-"
    rs = "%.1f / %.1f" % (med(v, "restore_cpu_s") * 1e6 / med(v, "restored"),
                          med(v, "restore_s_per_M")) if f else "-"
    print("| %s | %s | %d | %.0f | %s | %s | %s | %.0f | %.1f | %.0f | %.1f | %s | %s |" % (
        db, f"{n:,}", len(v), med(v, "rss_per_key"),
        f"{med(v, 'put_per_cpu_s'):,.0f}", f"{med(v, 'get_per_cpu_s'):,.0f}",
        f"{med(v, 'evict_put_per_cpu_s'):,.0f}", med(v, "evict_tick_max_ms"),
        med(v, "full_put_per_cpu_s"), med(v, "full_p50_ms"),
        med(v, "wall_over_cpu"), sq, rs))
EOF
