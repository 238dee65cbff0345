#!/usr/bin/env bash
# The main job, one command: install what is needed, build, start a
# single-node pool on this machine and show it working: mooncake_master
# (with its embedded metadata service and its sqlite record) and the pool
# mounted with mooncakefs, which contributes MC_SEGMENT_SIZE of memory
# (pre-faulted in the background: the mount answers at once).
#
#   scripts/quickstart.sh          set up, build, start, demonstrate
#   scripts/quickstart.sh stop     stop what it started
#   scripts/quickstart.sh status   show what runs
#
# Everything listens on 127.0.0.1 only (see docs/operations.md, trust
# model). State lives in $MC_STATE_DIR (default: .state/ in the checkout),
# with the pool's token ($MC_STATE_DIR/token, mode 0600, made on the first
# start): the master authenticates its RPC clients with it.
# Ports (upstream's defaults): MC_MASTER_PORT 50051, MC_METRICS_PORT 9003,
# MC_METAD_PORT 8080. MC_SEGMENT_SIZE (1GiB) is the memory the node
# contributes, in /dev/shm/mooncake.seg.$MC_SEGMENT_NAME (quickstart);
# MC_MOUNT (default $MC_STATE_DIR/pool) is the mount point.
# MC_QUICKSTART_BUILD=DIR uses the binaries of that existing build and
# skips setup and building (the suite's test of this script does).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
state=${MC_STATE_DIR:-$root/.state}
rpc_port=${MC_MASTER_PORT:-50051}
metrics_port=${MC_METRICS_PORT:-9003}
meta_port=${MC_METAD_PORT:-8080}
segment=${MC_SEGMENT_SIZE:-1GiB}
segment_name=${MC_SEGMENT_NAME:-quickstart}
mnt=${MC_MOUNT:-$state/pool}
token=$(realpath -m "$state")/token
export MOONCAKE_AUTH_TOKEN_FILE=$token
bin=${MC_QUICKSTART_BUILD:-$root/build}

running() { [ -f "$state/$1.pid" ] && kill -0 "$(cat "$state/$1.pid")" 2>/dev/null; }

stop_one() {
	if running "$1"; then
		pid=$(cat "$state/$1.pid")
		kill -TERM "$pid"
		for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		echo "stopped $1 (pid $pid)"
	else
		echo "$1 is not running"
	fi
	rm -f "$state/$1.pid"
}

# start NAME PORTFILE COMMAND...: run detached, wait for its port file.
start() {
	local name=$1 pf=$2
	shift 2
	if running "$name"; then
		echo "$name already running (pid $(cat "$state/$name.pid"))"
		return
	fi
	rm -f "$pf"
	setsid "$@" </dev/null >/dev/null 2>"$state/$name.err" &
	echo $! >"$state/$name.pid"
	for _ in $(seq 600); do
		[ -s "$pf" ] && return
		if ! running "$name"; then
			cat "$state/$name.err" "$state/$name.log" 2>/dev/null | tail -20 >&2
			echo "$name failed to start (a port taken? see the MC_*_PORT variables)" >&2
			rm -f "$state/$name.pid"
			exit 1
		fi
		sleep 0.1
	done
	echo "$name did not become ready; see $state/$name.log" >&2
	exit 1
}

mounted() { grep -q " $(realpath -m "$mnt") fuse.mooncakefs " /proc/self/mounts; }

# The pid of the mooncakefs daemon serving $mnt (it daemonizes itself).
daemon_pid() { pgrep -f -o "/mooncakefs 127.0.0.1:$rpc_port $mnt " || true; }

# Does the master still list segment $1 (its admin port, one name a line)?
listed() {
	"$bin/mooncakefs/cli/mooncake" --master "127.0.0.1:$rpc_port" --rpc_timeout 2000 status 2>/dev/null |
		awk '{ print $1 }' | grep -qxF "$1"
}

# Unmount, then wait until the daemon has left the pool: its process has
# exited (it unmounts its segment at the master on the way out) and the
# master no longer lists the segment. Stopping the master any earlier
# leaves the segment in its record, shown as "awaiting owner" after the
# next start next to the new one.
unmount_pool() {
	local pid seg=
	if ! mounted; then
		echo "$mnt is not mounted"
		return
	fi
	pid=$(daemon_pid)
	[ -n "$pid" ] && seg=$(grep -a " $pid mcfs: joined the pool at " \
		"$state/mooncakefs.log" 2>/dev/null | tail -1 |
		sed -n 's/.* as \([^,]*\), contributing .*/\1/p')
	umount "$mnt"
	if [ -n "$pid" ]; then
		for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "$pid" 2>/dev/null; then
			echo "mooncakefs (pid $pid) still runs 30 s after the unmount; see $state/mooncakefs.log" >&2
			return 1
		fi
	fi
	if [ -n "$seg" ] && running mooncake_master; then
		for _ in $(seq 100); do listed "$seg" || break; sleep 0.1; done
		if listed "$seg"; then
			echo "the master still lists segment $seg after the daemon exited; see $state/mooncakefs.log" >&2
			return 1
		fi
	fi
	echo "unmounted $mnt; the node left the pool${seg:+ (segment $seg)}"
}

case ${1:-start} in
stop)
	unmount_pool
	stop_one mooncake_master
	exit 0
	;;
status)
	if running mooncake_master; then echo "mooncake_master running, pid $(cat "$state/mooncake_master.pid")"; else echo "mooncake_master not running"; fi
	if mounted; then echo "mounted on $mnt"; else echo "not mounted"; fi
	if running mooncake_master; then
		"$bin/mooncakefs/cli/mooncake" --master "127.0.0.1:$rpc_port" status || true
	fi
	exit 0
	;;
start) ;;
*) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac

if [ -z "${MC_QUICKSTART_BUILD:-}" ]; then
	scripts/setup.sh
	MC_BUILD_DIR=build scripts/build.sh release
fi
mkdir -p "$state"
if [ ! -s "$token" ]; then
	(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$token")
fi

start mooncake_master "$state/master.port" \
	"$bin/master/mooncake_master" --rpc_address 127.0.0.1 --rpc_port "$rpc_port" \
	--metrics_host 127.0.0.1 --metrics_port "$metrics_port" \
	--enable_http_metadata_server --http_metadata_server_host 127.0.0.1 \
	--http_metadata_server_port "$meta_port" --db_path "$state/master.db" \
	--port_file "$state/master.port" --log_file "$state/mooncake_master.log" \
	--auth_token_file "$token"
mkdir -p "$mnt"
if mounted; then
	echo "already mounted on $mnt"
else
	"$bin/mooncakefs/fuse/mooncakefs" "127.0.0.1:$rpc_port" "$mnt" -o \
		"metadata=http://127.0.0.1:$meta_port/metadata,segment_size=$segment,log_file=$state/mooncakefs.log,segment_name=$segment_name,auth_token_file=$token" ||
		{ tail -20 "$state/mooncakefs.log" >&2; exit 1; }
fi

export MOONCAKE_MASTER=127.0.0.1:$rpc_port
export MOONCAKE_TE_META_DATA_SERVER=http://127.0.0.1:$meta_port/metadata
cli=$bin/mooncakefs/cli/mooncake
for _ in $(seq 100); do
	"$cli" status 2>/dev/null | grep -q mounted && break
	sleep 0.1
done

echo
echo "pool: master 127.0.0.1:$rpc_port (record $state/master.db), metadata http://127.0.0.1:$meta_port/metadata,"
echo "      admin http://127.0.0.1:$metrics_port/metrics; mounted on $mnt, contributing $segment"
run() { echo "\$ $*"; "$@"; }
run cp README.md "$mnt/kv/readme.md"
run mkdir -p "$mnt/kv/demo"
run cp scripts/quickstart.sh "$mnt/kv/demo/quickstart.sh"
run ls -l "$mnt/kv" "$mnt/kv/demo"
run cmp README.md "$mnt/kv/readme.md" && echo "(identical)"
run du -sh "$mnt/kv"
run df -h "$mnt"
run "$cli" status
echo
echo "Stop it with: scripts/quickstart.sh stop"
