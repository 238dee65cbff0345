#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# shellcheck disable=SC2012 # ls -t on Debian's package file names
# Run a command inside a small QEMU VM that has a soft-RoCE device (rdma_rxe
# on a veth pair), for testing RDMA on machines without an RDMA NIC.
#
#   scripts/rdma_vm.sh [options] -- CMD ARGS...
#
# The VM boots Debian's own kernel (linux-image-6.1.0-NN-amd64, resolved
# through `apt-cache depends linux-image-amd64` and fetched with
# `apt-get download` on first use into the cache directory) with a busybox
# initramfs that loads the modules, mounts this machine's root filesystem
# read-only over virtio-9p with a tmpfs overlay on top (so every path,
# python3, the libraries and the checkout with its build directories are
# where they are here; writes inside the VM are thrown away), makes
# veth0 (10.0.0.1) <-> veth1 (10.0.0.2), runs
# `rdma link add rxe0 type rxe netdev veth0`, waits for the port to be
# ACTIVE, then runs CMD as root in the caller's working directory and
# environment plus:
#   MC_RDMA_DEVICE=rxe0  MC_RDMA_GID_INDEX=<RoCE v2 GID of 10.0.0.1>
#   MC_RDMA_IP=10.0.0.1  MC_RDMA_NETDEV=veth0  MC_RDMA_PEER_IP=10.0.0.2
#   MC_RDMA_VM=1
# Both ends of a connection must use the one rxe device (two rxe devices in
# one VM do not connect to each other).
#
# CMD's stdout and stderr are printed here when the VM ends, and the script
# exits with CMD's exit status. Its own failures:
#   124  the timeout ran out (the VM is killed; what CMD wrote so far and
#        the end of the VM's console are printed)
#   125  the VM ended without a result (console printed), or preparing
#        it failed
#   77   the VM cannot run here: no qemu-system-x86_64, no kernel package
#   2    bad options
# The qemu process never outlives this script (it dies with it, even on
# SIGKILL, through PR_SET_PDEATHSIG).
#
# Options:
#   -t, --timeout S   from qemu's start, boot included (default 300)
#   -m, --mem MIB     VM memory (default 1024)
#   --smp N           VM CPUs (default 2; 1 makes ping-pong ~60x slower)
#   --accel A         kvm or tcg, no fallback. Default: KVM when /dev/kvm
#                     opens, falling back to TCG when the KVM boot fails
#                     or has not reached /init within 10s (a broken nested
#                     KVM hangs; remembered in the cache directory, per
#                     host kernel and qemu version). The choice is printed.
#   --rw DIR          also share DIR writable, at the same path (repeatable):
#                     what CMD writes there is seen here
#   -e NAME=VALUE     set a variable for CMD (repeatable)
#   --cache DIR       kernel and initramfs cache (default
#                     /var/cache/mooncakefs/rdma-vm, or
#                     ~/.cache/mooncakefs/rdma-vm when that is not writable;
#                     also MC_RDMA_VM_CACHE)
#   --prepare         fetch the kernel and build the initramfs, boot nothing
#   -v, --verbose     print the VM's console too (kernel messages included)
set -euo pipefail

ME=rdma_vm
TIMEOUT=300
MEM=1024
SMP=2
ACCEL=
VERBOSE=0
PREPARE=0
RW=()
SETENV=()
CACHE=${MC_RDMA_VM_CACHE:-}
# Modules the VM loads (their dependencies come along): 9p root, overlay,
# veth, soft-RoCE with user verbs and the RDMA connection manager.
MODULES="virtio_pci 9pnet_virtio 9p overlay veth crc32_generic rdma_rxe
ib_uverbs rdma_ucm"

die() { echo "$ME: $*" >&2; exit 125; }
unavailable() { echo "$ME: VM unavailable: $*" >&2; exit 77; }
say() { echo "$ME: $*" >&2; }
bad() { echo "$ME: $*" >&2; exit 2; }

usage() { sed -n '4,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit "$1"; }

while [ $# -gt 0 ]; do
	case $1 in -t | --timeout | -m | --mem | --smp | --accel | --rw | -e | --cache)
		[ $# -ge 2 ] || bad "$1 needs a value" ;;
	esac
	case $1 in
	-t | --timeout) TIMEOUT=$2; shift 2 ;;
	-m | --mem) MEM=$2; shift 2 ;;
	--smp) SMP=$2; shift 2 ;;
	--accel) ACCEL=$2; shift 2 ;;
	--rw) d=$(cd "$2" 2>/dev/null && pwd -P) || bad "--rw $2: no such directory"
		RW+=("$d"); shift 2 ;;
	-e) [[ $2 == [A-Za-z_]*=* ]] || bad "-e $2: want NAME=VALUE"
		SETENV+=("$2"); shift 2 ;;
	--cache) CACHE=$2; shift 2 ;;
	--prepare) PREPARE=1; shift ;;
	-v | --verbose) VERBOSE=1; shift ;;
	-h | --help) usage 0 ;;
	--) shift; break ;;
	*) echo "$ME: unknown option $1" >&2; usage 2 ;;
	esac
done
[ $# -gt 0 ] || [ $PREPARE = 1 ] || usage 2
[[ $TIMEOUT =~ ^[0-9]+$ ]] || bad "--timeout $TIMEOUT: want seconds"
case $ACCEL in '' | kvm | tcg) ;; *) bad "--accel $ACCEL: want kvm or tcg" ;; esac

command -v qemu-system-x86_64 >/dev/null ||
	unavailable "qemu-system-x86_64 not found (scripts/setup.sh installs qemu-system-x86)"
[ -x /bin/busybox ] ||
	unavailable "/bin/busybox not found (scripts/setup.sh installs busybox-static)"

if [ -z "$CACHE" ]; then
	CACHE=/var/cache/mooncakefs/rdma-vm
	if ! mkdir -p "$CACHE" 2>/dev/null || [ ! -w "$CACHE" ]; then
		CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mooncakefs/rdma-vm
	fi
fi
mkdir -p "$CACHE" || die "cannot create the cache directory $CACHE"
CACHE=$(cd "$CACHE" && pwd -P)

# The VM's /init. Runs busybox's sh; reads /out/vm.conf from the run
# directory the host shares as "mcout".
init_script() {
	cat <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
say() { echo "mcvm: $*"; }
halt() { sync; reboot -f; sleep 10; }
for m in $(cat /modules.list); do
	insmod "/lib/modules/$m" || say "insmod $m failed"
done
p9() { mount -t 9p -o "trans=virtio,version=9p2000.L,msize=512000,$3" "$1" "$2"; }
mkdir -p /out
i=0
until p9 mcout /out cache=none 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 50 ] || { say "cannot mount the result share"; halt; }
	sleep 0.1
done
: >/out/alive
fail() { say "$*"; echo "$*" >/out/vm_error; umount /out; halt; }
. /out/vm.conf
mkdir -p /lower /upper /newroot
p9 hostroot /lower ro,cache=loose || fail "cannot mount the host's root (9p)"
mount -t tmpfs -o mode=0755 upper /upper
mkdir -p /upper/u /upper/w
mount -t overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w \
	root /newroot || fail "cannot mount the overlay on the host's root"
R=/newroot
mount -t proc proc $R/proc
mount -t sysfs sys $R/sys
mount -t devtmpfs dev $R/dev
mkdir -p $R/dev/shm $R/dev/pts
mount -t tmpfs -o mode=1777 shm $R/dev/shm
mount -t devpts devpts $R/dev/pts
mount -t tmpfs -o mode=0755 run $R/run
mkdir -p "$R$OUT_DIR"
mount --move /out "$R$OUT_DIR" || fail "cannot move the result share"
O=$R$OUT_DIR
fail() { say "$*"; echo "$*" >"$O/vm_error"; umount "$O"; halt; }
n=0
for d in $RW_DIRS; do
	mkdir -p "$R$d" && p9 "mcrw$n" "$R$d" cache=none ||
		fail "cannot mount the shared directory $d"
	n=$((n + 1))
done
ch() { chroot $R "$@"; }
# iproute2's ip (busybox's cannot make veth), once: every program
# started from the 9p root costs its loading under TCG.
cat >$R/run/mcvm.ip <<EOF
link set lo up
link add veth0 type veth peer name veth1
addr add 10.0.0.1/24 dev veth0
addr add 10.0.0.2/24 dev veth1
link set veth0 up
link set veth1 up
EOF
ch /usr/bin/ip -batch /run/mcvm.ip || fail "cannot set up the veth pair"
ch /usr/bin/rdma link add rxe0 type rxe netdev veth0 ||
	fail "rdma link add rxe0 type rxe netdev veth0 failed"
P=/sys/class/infiniband/rxe0/ports/1
gid=
i=0
while [ $i -lt 50 ]; do
	for g in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
		v=$(cat $P/gids/$g 2>/dev/null) || continue
		t=$(cat $P/gid_attrs/types/$g 2>/dev/null) || continue
		if [ "$v" = 0000:0000:0000:0000:0000:ffff:0a00:0001 ] &&
			[ "$t" = "RoCE v2" ]; then
			gid=$g
			break
		fi
	done
	case $(cat $P/state) in *ACTIVE*) [ -n "$gid" ] && break ;; esac
	i=$((i + 1))
	sleep 0.1
done
[ -n "$gid" ] || fail "no RoCE v2 GID for 10.0.0.1 on rxe0"
case $(cat $P/state) in *ACTIVE*) ;; *) fail "rxe0 port 1: $(cat $P/state)" ;; esac
cat >$R/run/mcvm.env <<EOF
export MC_RDMA_VM=1 MC_RDMA_DEVICE=rxe0 MC_RDMA_GID_INDEX=$gid
export MC_RDMA_IP=10.0.0.1 MC_RDMA_PEER_IP=10.0.0.2 MC_RDMA_NETDEV=veth0
EOF
accel=tcg
dmesg | grep -q "Hypervisor detected: KVM" && accel=kvm
echo "$accel $(cut -d' ' -f1 /proc/uptime)" >"$O/boot"
ch /bin/bash "$OUT_DIR/cmd.sh" <"$R/dev/null" >"$O/stdout" 2>"$O/stderr"
echo $? >"$O/rc.tmp"
mv "$O/rc.tmp" "$O/rc"
umount "$O"
halt
INIT
}

# ------------------------------------------------------------- prepare

# Kernel package: what linux-image-amd64 depends on; the newest one
# already cached when apt cannot say (offline).
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
	sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n1) || true
deb=
if [ -n "$kpkg" ]; then
	deb=$(ls -t "$CACHE/${kpkg}"_*.deb 2>/dev/null | head -n1) || true
fi
if [ -z "$deb" ] && [ -n "$kpkg" ]; then
	exec 9>"$CACHE/.lock"
	flock 9
	deb=$(ls -t "$CACHE/${kpkg}"_*.deb 2>/dev/null | head -n1) || true
fi
if [ -z "$deb" ] && [ -n "$kpkg" ]; then
	say "downloading $kpkg into $CACHE"
	dl=$(mktemp -d "$CACHE/download.XXXXXX")
	sandbox=()
	[ "$(id -u)" -ne 0 ] || sandbox=(-o APT::Sandbox::User=root)
	if ! out=$(cd "$dl" && apt-get download "${sandbox[@]}" "$kpkg" 2>&1); then
		rm -rf "$dl"
		unavailable "apt-get download $kpkg failed: $(echo "$out" | tail -n1)"
	fi
	mv "$dl"/*.deb "$CACHE/" && rm -rf "$dl"
	deb=$(ls -t "$CACHE/${kpkg}"_*.deb | head -n1)
	# older kernels are no longer needed
	for old in "$CACHE"/linux-image-*.deb; do
		[ "$old" = "$deb" ] || rm -f "$old"
	done
fi
exec 9>&-
if [ -z "$deb" ]; then
	deb=$(ls -t "$CACHE"/linux-image-*.deb 2>/dev/null | head -n1) || true
	[ -n "$deb" ] || unavailable "no kernel: apt-cache depends linux-image-amd64 names none and $CACHE holds none"
	say "apt-cache names no kernel; using the cached $(basename "$deb")"
fi

# Rebuilt when the kernel, busybox or this script (the /init, the module
# list, the way it is built) change.
key=$({
	basename "$deb"
	sha256sum /bin/busybox "${BASH_SOURCE[0]}" | cut -d' ' -f1
} | sha256sum | cut -c1-16)
IMG=$CACHE/$key
if [ ! -f "$IMG/initrd.gz" ]; then
	exec 9>"$CACHE/.lock"
	flock 9
	if [ ! -f "$IMG/initrd.gz" ]; then
		say "building the initramfs for $(basename "$deb")"
		b=$(mktemp -d "$CACHE/build.XXXXXX")
		trap 'rm -rf "$b"' EXIT
		dpkg-deb -x "$deb" "$b/k" || die "dpkg-deb -x $deb failed"
		kver=$(ls "$b/k/lib/modules")
		depmod -b "$b/k" "$kver" || die "depmod -b failed"
		mkdir -p "$b/i/bin" "$b/i/lib/modules" "$b/i/proc" "$b/i/sys" \
			"$b/i/dev" "$b/out" "$b/img"
		cp /bin/busybox "$b/i/bin/busybox"
		# shellcheck disable=SC2086 # the list is split on purpose
		modprobe -d "$b/k" -S "$kver" -a --show-depends $MODULES >"$b/deps" ||
			die "modprobe --show-depends failed for: $MODULES"
		: >"$b/i/modules.list"
		while read -r what path _; do
			[ "$what" = insmod ] || continue
			m=$(basename "$path")
			grep -qx "$m" "$b/i/modules.list" && continue
			cp "$path" "$b/i/lib/modules/$m"
			echo "$m" >>"$b/i/modules.list"
		done <"$b/deps"
		init_script >"$b/i/init"
		chmod 755 "$b/i/init"
		(cd "$b/i" && find . | cpio -o -H newc --quiet | gzip -1) \
			>"$b/img/initrd.gz" || die "cpio failed"
		# The bzImage's xz payload, an ELF that qemu boots through PVH:
		# decompressing it in a TCG guest took 10 of the 17 s to the
		# kernel's first line.
		z=$b/k/boot/vmlinuz-$kver
		off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$z" | head -n1 | cut -d: -f1) || true
		if grep -qx CONFIG_PVH=y "$b/k/boot/config-$kver" && [ -n "$off" ] &&
			tail -c +$((off + 1)) "$z" >"$b/vmlinux.xz" &&
			xz -dcq --single-stream "$b/vmlinux.xz" >"$b/img/kernel" &&
			[ "$(head -c4 "$b/img/kernel" | od -An -c | tr -d ' ')" = 177ELF ]; then
			:
		else
			say "booting the compressed kernel (no PVH entry or xz payload)"
			cp "$z" "$b/img/kernel"
		fi
		echo "$kver" >"$b/img/kver"
		# older images are no longer needed
		find "$CACHE" -mindepth 1 -maxdepth 1 -type d -regextype egrep \
			-regex '.*/[0-9a-f]{16}' -exec rm -rf {} +
		mv "$b/img" "$IMG"
		rm -rf "$b"
		trap - EXIT
	fi
	exec 9>&-
fi
[ $PREPARE = 0 ] || { say "ready: $IMG ($(cat "$IMG/kver"))"; exit 0; }

# ----------------------------------------------------------------- run

RUN=$(mktemp -d /tmp/rdma_vm.XXXXXX)
qpid=
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	if [ -n "$qpid" ]; then
		kill -KILL "$qpid" 2>/dev/null || true
		wait "$qpid" 2>/dev/null || true
	fi
	rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

{
	echo "OUT_DIR=$RUN"
	echo "RW_DIRS='${RW[*]}'"
} >"$RUN/vm.conf"
for d in "${RW[@]}"; do
	[[ $d != *[[:space:]\']* ]] || bad "--rw $d: no spaces or quotes, please"
done
{
	echo "# made by scripts/rdma_vm.sh"
	export -p | grep -Ev '^declare -x (PWD|OLDPWD|SHLVL|_|MC_RDMA_[A-Z_]*)='
	for e in "${SETENV[@]}"; do
		printf 'export %q=%q\n' "${e%%=*}" "${e#*=}"
	done
	echo ". /run/mcvm.env"
	printf 'cd %q || exit 125\n' "$PWD"
	printf 'exec'
	printf ' %q' "$@"
	echo
} >"$RUN/cmd.sh"

shares=(-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
	-virtfs "local,path=$RUN,mount_tag=mcout,security_model=none,multidevs=remap")
n=0
for d in "${RW[@]}"; do
	shares+=(-virtfs "local,path=$d,mount_tag=mcrw$n,security_model=none,multidevs=remap")
	n=$((n + 1))
done

# KVM where /dev/kvm opens, unless an earlier run found that it does not
# boot here (a nested KVM can hang: noted in $KVM_BAD per host kernel and
# qemu version); a KVM boot that has not reached /init within
# $KVM_ALIVE_S seconds is dropped for TCG.
KVM_ALIVE_S=${MC_RDMA_VM_KVM_ALIVE_S:-10}
KVM_BAD=$CACHE/kvm-broken.$(uname -r).$(qemu-system-x86_64 --version |
	sed -n '1s/.*version \([^ ]*\).*/\1/p')
fallback=0
if [ -z "$ACCEL" ]; then
	ACCEL=tcg
	if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
		if [ -f "$KVM_BAD" ]; then
			say "accel tcg: KVM did not work here before ($KVM_BAD)"
		else
			ACCEL=kvm
			fallback=1
		fi
	else
		say "accel tcg: /dev/kvm cannot be opened"
	fi
fi

quiet="quiet loglevel=3"
[ $VERBOSE = 0 ] || quiet=loglevel=7
start=$(date +%s.%N)
elapsed() { echo "$(date +%s.%N) $start" | awk '{printf "%.1f", $1 - $2}'; }
past() { awk -v e="$(elapsed)" -v t="$1" 'BEGIN { exit !(e >= t) }'; }

# boot ACCEL: runs the VM; sets timed_out=1 when the timeout ran out, or
# dead_kvm=1 when a KVM boot with fallback did not reach /init in time.
boot() {
	rm -f "$RUN"/{alive,boot,rc,stdout,stderr,vm_error,console.log}
	local t0
	t0=$(elapsed)
	setpriv --pdeathsig KILL -- qemu-system-x86_64 -nodefaults \
		-no-user-config -display none -monitor none -no-reboot \
		-accel "$1" -cpu max -m "$MEM" -smp "$SMP" \
		-kernel "$IMG/kernel" -initrd "$IMG/initrd.gz" \
		-append "console=ttyS0 $quiet panic=-1 rdinit=/init" \
		-chardev "file,id=con,path=$RUN/console.log" -serial chardev:con \
		"${shares[@]}" </dev/null >"$RUN/qemu.log" 2>&1 &
	qpid=$!
	while kill -0 "$qpid" 2>/dev/null; do
		if past "$TIMEOUT"; then
			timed_out=1
		elif [ $fallback = 1 ] && [ ! -f "$RUN/alive" ] &&
			past "$(awk -v a="$t0" -v b="$KVM_ALIVE_S" 'BEGIN { print a + b }')"; then
			dead_kvm=1
		fi
		if [ $timed_out = 1 ] || [ $dead_kvm = 1 ]; then
			kill -TERM "$qpid" 2>/dev/null || true
			sleep 1
			kill -KILL "$qpid" 2>/dev/null || true
			break
		fi
		sleep 0.2
	done
	qrc=0
	wait "$qpid" || qrc=$?
	qpid=
	# qemu that could not start KVM at all
	if [ $fallback = 1 ] && [ ! -f "$RUN/alive" ] && [ $timed_out = 0 ]; then
		dead_kvm=1
	fi
}

timed_out=0
dead_kvm=0
boot "$ACCEL"
if [ $dead_kvm = 1 ]; then
	why="it did not reach /init within ${KVM_ALIVE_S}s"
	[ $qrc = 0 ] || [ $qrc = 143 ] || why="qemu failed: $(tr '\n' ' ' <"$RUN/qemu.log")"
	say "accel kvm unusable ($why); falling back to tcg (noted in $KVM_BAD)"
	echo "$why" >"$KVM_BAD"
	ACCEL=tcg
	fallback=0
	dead_kvm=0
	boot tcg
fi

show_output() {
	[ ! -s "$RUN/stdout" ] || cat "$RUN/stdout"
	[ ! -s "$RUN/stderr" ] || cat "$RUN/stderr" >&2
}
show_console() {
	say "qemu: $(tr '\n' ' ' <"$RUN/qemu.log")"
	say "the VM's console (last 40 lines):"
	tail -n 40 "$RUN/console.log" | tr -d '\r' | sed 's/^/  | /' >&2
}

booted=
if [ -f "$RUN/boot" ]; then
	read -r vaccel boot_s <"$RUN/boot"
	booted=", booted in ${boot_s}s"
else
	vaccel=$ACCEL
fi
[ $VERBOSE = 0 ] || { say "console:"; tr -d '\r' <"$RUN/console.log" | sed 's/^/  | /' >&2; }
if [ $timed_out = 1 ]; then
	show_output
	say "TIMEOUT: the VM ran past ${TIMEOUT}s (accel $vaccel$booted); killed it"
	show_console
	exit 124
fi
if [ ! -f "$RUN/rc" ]; then
	show_output
	if [ -s "$RUN/vm_error" ]; then
		say "the VM failed before running the command: $(cat "$RUN/vm_error")"
	else
		say "the VM ended without a result (qemu exit $qrc)"
	fi
	show_console
	exit 125
fi
rc=$(cat "$RUN/rc")
show_output
say "accel $vaccel$booted, done in $(elapsed)s, exit $rc"
exit "$rc"
