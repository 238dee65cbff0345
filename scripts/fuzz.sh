#!/usr/bin/env bash
# Fuzz every libFuzzer target for $MC_FUZZ_SECONDS (default 30) each.
# New inputs go to a temporary directory, never into the committed corpus;
# a crash leaves its reproducer under build-fuzz/findings/ and fails.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${MC_FUZZ_SECONDS:-30}
dir=${MC_BUILD_DIR:-build-fuzz}
[ -x "$dir/tests/fuzz/fuzz_size" ] || scripts/build.sh fuzz
mkdir -p "$dir/findings"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
status=0
for t in tests/fuzz/fuzz_*.c; do
	name=$(basename "$t" .c)
	work=$(mktemp -d)
	echo "== $name: ${secs}s"
	if ! "$dir/tests/fuzz/$name" -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$dir/findings/$name-" \
		"$work" "tests/fuzz/corpus/$name" >"$dir/findings/$name.log" 2>&1; then
		tail -40 "$dir/findings/$name.log"
		echo "fuzz: $name FAILED (log: $dir/findings/$name.log)"
		status=1
	else
		grep -E 'stat::number_of_executed_units|stat::new_units_added' \
			"$dir/findings/$name.log" | tr '\n' ' '
		echo
	fi
	rm -rf "$work"
done
exit $status
