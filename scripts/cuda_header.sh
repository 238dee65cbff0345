#!/usr/bin/env bash
# Fetch cuda.h, the CUDA driver API's header, for the unit test that
# checks libte's hand-written declarations of it (libte/gpu_abi.h,
# tests/unit/libte/test_gpu_abi.c). Nothing else uses it: the build never
# needs CUDA (libte loads the driver at run time, docs/design.md "GPU
# memory").
#
# The header comes from Debian's nvidia-cuda-dev (the non-free component,
# CUDA 11.8 on bookworm). The package is downloaded, not installed (it
# would pull in 2.8 GB of libraries): one header is taken out of it into
# $MC_CUDA_HEADER_DIR (default /var/cache/mooncakefs/cuda)/include. The
# system's apt sources are not touched: the non-free list lives in a
# temporary directory for this download only. About 10 s where the mirror
# is fast (774 MB); does nothing when the header is already there.
#   scripts/cuda_header.sh            fetch if missing
#   scripts/cuda_header.sh --force    fetch again
#   MC_CUDA_HEADER_DIR=DIR scripts/cuda_header.sh
set -euo pipefail

dest=${MC_CUDA_HEADER_DIR:-/var/cache/mooncakefs/cuda}
if [ -f "$dest/include/cuda.h" ] && [ "${1:-}" != --force ]; then
	echo "cuda_header.sh: $dest/include/cuda.h present"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "cuda_header.sh: run as root (apt-get download needs it)" >&2
	exit 1
fi

# shellcheck disable=SC1091
. /etc/os-release
mirror=$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources \
	2>/dev/null | grep -v security | head -n1 || true)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/parts" "$work/dl"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]" \
	"$mirror ${VERSION_CODENAME:-bookworm} non-free" >"$work/nonfree.list"
apt_opts=(-q -o "Dir::Etc::SourceList=$work/nonfree.list"
	-o "Dir::Etc::SourceParts=$work/parts"
	-o "Dir::State::Lists=$work/lists" -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" update >"$work/update.log" 2>&1 || {
	cat "$work/update.log" >&2
	echo "cuda_header.sh: apt-get update of the non-free list failed" >&2
	exit 1
}
(cd "$work/dl" && apt-get "${apt_opts[@]}" download nvidia-cuda-dev) ||
	{
		echo "cuda_header.sh: nvidia-cuda-dev could not be downloaded" >&2
		exit 1
	}
deb=$(ls "$work"/dl/nvidia-cuda-dev_*.deb)
# cuda.h is near the start of the archive: stop reading there (dpkg-deb
# then complains of a broken pipe, which is expected).
(cd "$work" && dpkg-deb --fsys-tarfile "$deb" 2>/dev/null |
	tar -x --occurrence=1 ./usr/include/cuda.h) || true
if [ ! -s "$work/usr/include/cuda.h" ]; then
	echo "cuda_header.sh: no usr/include/cuda.h in $(basename "$deb")" >&2
	exit 1
fi
install -D -m 0644 "$work/usr/include/cuda.h" "$dest/include/cuda.h"
basename "$deb" >"$dest/SOURCE"
echo "cuda_header.sh: $dest/include/cuda.h from $(basename "$deb")"
