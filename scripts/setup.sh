#!/usr/bin/env bash
# Install every Debian package mooncakefs needs to build, test and run.
# Idempotent; fails loudly. Runs apt-get as root (through sudo when needed).
# The CUDA toolkit is never installed here: libte loads the driver at run
# time. Only cuda.h is fetched (scripts/cuda_header.sh, out of Debian's
# non-free nvidia-cuda-dev, without installing it) for the unit test that
# checks libte's declarations of the driver API against it.
# Every package a test, benchmark script or the quickstart calls is listed
# here; scripts/check_deps.py (a step of scripts/test.sh) keeps it so.
#   scripts/setup.sh          install what is missing
#   scripts/setup.sh --list   print the package names, one per line
set -euo pipefail

PACKAGES=(
	# toolchain
	build-essential cmake pkg-config clang llvm libclang-rt-14-dev
	clang-format git
	# libraries
	libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev libsqlite3-dev
	sqlite3 libfuse3-dev fuse3 libibverbs-dev libnuma-dev
	protobuf-c-compiler libprotobuf-c-dev libpcre2-dev libsodium-dev
	# tests
	libcriterion-dev python3 python3-pytest python3-numpy python3-venv curl iproute2
	procps etcd-server etcd-client redis-server redis-tools libhiredis-dev
	fio iperf3 strace autoconf automake openssl rsync valgrind
	# benchmarks (bench/ckpt_p2p_bench.sh: nginx is the HTTP baseline)
	nginx
	# RDMA in a VM (scripts/rdma_vm.sh: soft-RoCE under QEMU; the kernel
	# is fetched by the script on first use, not here)
	qemu-system-x86 busybox-static kmod cpio ibverbs-utils
	ibverbs-providers perftest
)

if [ "${1:-}" = --list ]; then
	printf '%s\n' "${PACKAGES[@]}"
	exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
	SUDO=()
elif command -v sudo >/dev/null; then
	SUDO=(sudo)
else
	echo "setup.sh: run as root (apt-get needs it) or install sudo" >&2
	exit 1
fi

# cuda.h for unit.test_gpu_abi (skipped, saying why, without it).
cuda_header() {
	"${SUDO[@]}" "$(dirname "$0")/cuda_header.sh" ||
		echo "setup.sh: WARNING: cuda.h not fetched;" \
			"unit.test_gpu_abi will be skipped" >&2
}

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "setup.sh: all ${#PACKAGES[@]} packages present"
	cuda_header
	exit 0
fi
echo "setup.sh: installing ${missing[*]}"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -q --no-install-recommends "${missing[@]}"
cuda_header
