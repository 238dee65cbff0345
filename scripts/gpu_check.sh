#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# GPU check, for a machine with an NVIDIA GPU and its driver (one command,
# under 3 minutes): libte's device-memory paths against the real driver.
# It starts a te_peer (host memory) on 127.0.0.1 and runs
# tests/tools/te_gpu: device memory written to the peer and read back
# into other device memory at sizes across the staging chunks, a second
# engine serving its device memory to the first over tcp, copies through
# the local transport, and WRITE rates from device and from host memory
# at 1 MiB and 16 MiB (target: device >= 0.8x host). Prints a short
# report; exits non-zero on any mismatch or failure.
#
#   scripts/gpu_check.sh [--stand-in]
#
# --stand-in runs the same checks through the tests' stand-in driver
# (tests/tools/fake_cuda.c) on any machine: it checks this script and the
# staging logic, never a GPU. Builds build-release (scripts/build.sh
# release) unless MC_BUILD_DIR names a build. Not yet covered here: the
# store client's and the Python package's device paths (issue 18).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MC_BUILD_DIR:-$root/build-release}
stand_in=0
[[ ${1:-} == --stand-in ]] && stand_in=1

if [[ ! -x $build/tests/tools/te_gpu ]]; then
	"$root/scripts/build.sh" release >/dev/null
	build=$root/build-release
fi
if [[ $stand_in == 1 ]]; then
	export MC_CUDA_LIBRARY=$build/tests/tools/libmc_fake_cuda.so
	echo "gpu_check: STAND-IN driver ($MC_CUDA_LIBRARY): logic only, no GPU"
else
	unset MC_CUDA_LIBRARY
	if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L; then
		echo "gpu_check: no NVIDIA GPU here (nvidia-smi -L failed)" >&2
		exit 2
	fi
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mc-gpu-check.XXXXXX")
peer=
cleanup() {
	[[ -n $peer ]] && kill "$peer" 2>/dev/null && wait "$peer" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

"$build/tests/tools/te_peer" --metadata P2PHANDSHAKE --name 127.0.0.1 \
	--size 64M --ready "$tmp/ready" --pattern 1 >"$tmp/peer.log" 2>&1 &
peer=$!
for _ in $(seq 100); do
	[[ -s $tmp/ready ]] && break
	sleep 0.1
done
[[ -s $tmp/ready ]] || { cat "$tmp/peer.log" >&2; exit 1; }
read -r name addr size < <(python3 -c 'import json,sys
d = json.load(open(sys.argv[1])); print(d["name"], d["addr"], d["size"])' \
	"$tmp/ready")

status=0
timeout 150 "$build/tests/tools/te_gpu" --target "$name" --target_addr "$addr" \
	--target_size "$size" --bench >"$tmp/out" 2>"$tmp/err" || status=$?
cat "$tmp/out"
if [[ $status != 0 ]] || grep -q '^FAIL' "$tmp/out"; then
	tail -20 "$tmp/err" >&2
	echo "gpu_check: FAILED"
	exit 1
fi
awk '/^ok bench/ { printf "gpu_check: %s bytes: device/host %s%s\n", $3, $11,
	($11 < 0.8 ? " (below the 0.8 target)" : "") }' "$tmp/out"
echo "gpu_check: passed"
