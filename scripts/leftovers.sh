#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# What a test run must not leave behind: /dev/shm/mooncake.* files, FUSE
# mounts, checkpoint caches and copies under /var/cache/mooncakefs (a
# mount's ckpt/ cache, `mooncake ckpt publish --copy`), and processes of this checkout's builds (or the etcd,
# redis-server and qemu the tests start). scripts/test.sh takes a snapshot
# before the tests and checks after each ctest pass.
#
#   scripts/leftovers.sh snapshot DIR      record what exists now
#   scripts/leftovers.sh check DIR [WHAT]  fail (exit 1) listing what
#                                          appeared since the snapshot,
#                                          then remove it so the next
#                                          step starts clean
#
# Whatever existed at the snapshot (a quickstart pool, another user's
# mount) is never touched.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

shm_files() {
	find /dev/shm -maxdepth 1 -name 'mooncake.*' -printf '%p\n' 2>/dev/null |
		sort
}

# (The directories need not exist: find's failure is no failure here.)
ckpt_dirs() {
	{ find /var/cache/mooncakefs/ckpt /var/cache/mooncakefs/ckpt-publish \
		-mindepth 1 -maxdepth 1 -printf '%p\n' 2>/dev/null || true; } |
		sort
}

fuse_mounts() {
	awk '$3 ~ /^fuse/ { print $2 }' /proc/self/mounts | sort
}

# pid and program of the processes of this checkout, etcd, redis-server
# and qemu (scripts/rdma_vm.sh's VMs).
our_procs() {
	local exe
	for d in /proc/[0-9]*; do
		exe=$(readlink "$d/exe" 2>/dev/null) || continue
		exe=${exe% (deleted)}
		case $exe in
		"$root"/* | /usr/bin/etcd | /usr/bin/redis-server | /usr/bin/qemu-system-x86_64)
			echo "${d#/proc/} $exe"
			;;
		esac
	done | sort
}

new_lines() { comm -13 "$1" <(cat); }

case ${1:-} in
snapshot)
	dir=$2
	mkdir -p "$dir"
	shm_files >"$dir/shm"
	ckpt_dirs >"$dir/ckpt"
	fuse_mounts >"$dir/mounts"
	our_procs >"$dir/procs"
	;;
check)
	dir=$2
	what=${3:-the tests}
	# Processes killed at a test's end may take a moment to be reaped.
	for _ in $(seq 50); do
		procs=$(our_procs | new_lines "$dir/procs")
		[ -z "$procs" ] && break
		sleep 0.1
	done
	shm=$(shm_files | new_lines "$dir/shm")
	ckpt=$(ckpt_dirs | new_lines "$dir/ckpt")
	mounts=$(fuse_mounts | new_lines "$dir/mounts")
	bad=0
	if [ -n "$mounts" ]; then
		echo "leftovers: $what left FUSE mounts:" >&2
		echo "$mounts" | sed 's/^/  /' >&2
		while read -r m; do umount -l "$m" || true; done <<<"$mounts"
		bad=1
	fi
	if [ -n "$procs" ]; then
		echo "leftovers: $what left processes running:" >&2
		echo "$procs" | sed 's/^/  /' >&2
		while read -r pid _; do kill -9 "$pid" 2>/dev/null || true; done <<<"$procs"
		bad=1
	fi
	if [ -n "$shm" ]; then
		echo "leftovers: $what left files in /dev/shm:" >&2
		while read -r f; do
			echo "  $f ($(stat -c %s "$f" 2>/dev/null || echo '?') bytes)" >&2
			rm -f "$f"
		done <<<"$shm"
		bad=1
	fi
	if [ -n "$ckpt" ]; then
		echo "leftovers: $what left checkpoint caches or copies:" >&2
		while read -r f; do
			echo "  $f ($(du -sh "$f" 2>/dev/null | cut -f1))" >&2
			rm -rf "$f"
		done <<<"$ckpt"
		bad=1
	fi
	[ $bad = 0 ] && echo "leftovers: $what left no shm files, checkpoint caches, mounts or processes"
	exit $bad
	;;
*)
	echo "usage: $0 snapshot DIR | check DIR [WHAT]" >&2
	exit 2
	;;
esac
