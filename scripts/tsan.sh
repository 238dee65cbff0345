#!/usr/bin/env bash
# ThreadSanitizer run of the whole suite (not in CI: slow on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh tsan
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
cd build-tsan && ctest --output-on-failure -j2 -E '^fuzz_replay'
