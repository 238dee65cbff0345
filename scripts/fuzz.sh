#!/usr/bin/env bash
# Fuzz every libFuzzer target for $MC_FUZZ_SECONDS (default 30) each,
# $MC_FUZZ_JOBS targets at once (default: one per CPU; each fuzzer uses
# one). New inputs go to a temporary directory, never into the committed
# corpus; a crash leaves its reproducer under build-fuzz/findings/ and
# fails.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${MC_FUZZ_SECONDS:-30}
jobs=${MC_FUZZ_JOBS:-$(nproc)}
dir=${MC_BUILD_DIR:-build-fuzz}
[ -x "$dir/tests/fuzz/fuzz_size" ] || scripts/build.sh fuzz
mkdir -p "$dir/findings"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT

# One target; its verdict and summary in $results/<name>.
fuzz_one() {
	local name=$1 work
	work=$(mktemp -d)
	if "$dir/tests/fuzz/$name" -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$dir/findings/$name-" \
		"$work" "tests/fuzz/corpus/$name" >"$dir/findings/$name.log" 2>&1; then
		grep -E 'stat::number_of_executed_units|stat::new_units_added' \
			"$dir/findings/$name.log" | tr '\n' ' ' >"$results/$name.ok"
	else
		: >"$results/$name.failed"
	fi
	rm -rf "$work"
}

names=()
for t in tests/fuzz/fuzz_*.c; do
	names+=("$(basename "$t" .c)")
done
echo "fuzz: ${#names[@]} targets, ${secs}s each, $jobs at a time"
running=0
for name in "${names[@]}"; do
	if [ "$running" -ge "$jobs" ]; then
		wait -n || true
		running=$((running - 1))
	fi
	fuzz_one "$name" &
	running=$((running + 1))
done
wait || true

status=0
for name in "${names[@]}"; do
	echo "== $name: ${secs}s"
	if [ -f "$results/$name.ok" ]; then
		cat "$results/$name.ok"
		echo
	else
		tail -40 "$dir/findings/$name.log"
		echo "fuzz: $name FAILED (log: $dir/findings/$name.log)"
		status=1
	fi
done
exit $status
