#!/usr/bin/env bash
# Configure and build one flavour into build-<flavour>/ (or $MC_BUILD_DIR).
#   scripts/build.sh release|gcc|asan|tsan|fuzz [extra cmake args]
# gcc: -Werror, RelWithDebInfo; asan: clang ASan+UBSan; tsan: clang TSan;
# fuzz: clang libFuzzer + ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."

flavour=${1:-release}
shift || true
dir=${MC_BUILD_DIR:-build-$flavour}
case $flavour in
release) args=(-DCMAKE_BUILD_TYPE=Release -DMC_WERROR=OFF -DBUILD_TESTING=OFF) cc=gcc ;;
gcc) args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMC_WERROR=ON) cc=gcc ;;
asan)
	args=(-DCMAKE_BUILD_TYPE=Debug -DMC_WERROR=ON
		-DMC_SANITIZE=address,undefined -DMC_TEST_TIMEOUT_SCALE=3)
	cc=clang
	;;
tsan)
	args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMC_SANITIZE=thread
		-DMC_TEST_TIMEOUT_SCALE=4)
	cc=clang
	;;
fuzz)
	args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMC_FUZZ=ON
		-DMC_SANITIZE=address,undefined -DMC_TEST_TIMEOUT_SCALE=3)
	cc=clang
	;;
*)
	echo "build.sh: unknown flavour '$flavour'" >&2
	exit 2
	;;
esac
CC=$cc cmake -S . -B "$dir" "${args[@]}" "$@" >"$dir.configure.log" 2>&1 ||
	{ cat "$dir.configure.log"; exit 1; }
grep -E '^-- +(FUSE|RDMA|CUDA|sanitizers)' "$dir.configure.log" || true
cmake --build "$dir" -j"$(nproc)"
