#!/usr/bin/env bash
# Set up, build and run the whole test suite: the README's test command and
# exactly what CI runs (.ci/run). On 2 cores it takes 35-40 minutes
# (docs/testing.md, "Where the time goes").
#   1. setup.sh installs packages; check_deps.py: it installs all that the
#      tree calls; clang-format check of every C file
#   2. gcc -Werror build, full ctest (unit, integration, fuzz corpus replay)
#   3. clang ASan+UBSan build, full ctest (the corpus replay included)
#   4. every libFuzzer target fuzzed ~30 s (MC_FUZZ_SECONDS), one per CPU
#      at once (MC_FUZZ_JOBS)
# After each ctest pass, leftovers.sh fails the run if a test left a
# /dev/shm/mooncake.* file, a FUSE mount or a process behind. Tests marked
# ONLY plain|asan run in one of the two passes (docs/testing.md).
# MC_SKIP_FUZZ=1 skips step 4 for a quicker local run.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

step() { printf '\n==== %s (%ds)\n' "$*" $((SECONDS - start)); }

step "setup"
scripts/setup.sh

step "dependency check"
scripts/check_deps.py

# Room the tests' segments need in /dev/shm (Debian's default is half the
# RAM): fs.pjdfstest mounts a 3 GiB segment with another test beside it.
shm_free=$(df -P -k /dev/shm | awk 'NR == 2 { print $4 }')
if [ "${shm_free:-0}" -lt $((4 << 20)) ]; then
	echo "test.sh: WARNING: /dev/shm has $((shm_free >> 10)) MiB free;" \
		"the suite needs 4096 (fs.pjdfstest and others will fail):" \
		"mount -o remount,size=8g /dev/shm, or a machine with more RAM" >&2
fi

step "format check"
scripts/format.sh --check
# strerror(-rc) printed our own codes (MC_E*, below -4000) as "Unknown
# error 4026": mc_strerror() names both those and errno values (one error
# convention: mc_strerror(-errno) for errno).
if grep -rn --include='*.c' --include='*.h' '\(^\|[^_[:alnum:]]\)strerror(' \
	common libte master metad mooncakefs mount_helpers; then
	echo "test.sh: use mc_strerror(rc) or mc_strerror(-errno), not" \
		"strerror(), above" >&2
	exit 1
fi

snap=$(mktemp -d)
trap 'rm -rf "$snap"' EXIT
scripts/leftovers.sh snapshot "$snap"

# ctest, then the check that it left nothing behind.
run_ctest() {
	local rc=0
	(cd "$1" && ctest --output-on-failure -j"$(nproc)" --timeout 600) || rc=$?
	scripts/leftovers.sh check "$snap" "ctest in $1" || rc=1
	return $rc
}

step "gcc -Werror build and tests"
scripts/build.sh gcc
run_ctest build-gcc

step "clang ASan+UBSan build and tests"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
scripts/build.sh asan
run_ctest build-asan

if [ "${MC_SKIP_FUZZ:-0}" != 1 ]; then
	step "fuzzing"
	scripts/build.sh fuzz
	scripts/fuzz.sh
fi
step "all passed"
