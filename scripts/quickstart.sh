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
# model). State lives in $MC_STATE_DIR (default: .state/ in the checkout).
# Ports (upstream's defaults): MC_MASTER_PORT 50051, MC_METRICS_PORT 9003,
# MC_METAD_PORT 8080. MC_SEGMENT_SIZE (1GiB) is the memory the node
# contributes; MC_MOUNT (default $MC_STATE_DIR/pool) is the mount point.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
state=${MC_STATE_DIR:-$root/.state}
rpc_port=${MC_MASTER_PORT:-50051}
metrics_port=${MC_METRICS_PORT:-9003}
meta_port=${MC_METAD_PORT:-8080}
segment=${MC_SEGMENT_SIZE:-1GiB}
mnt=${MC_MOUNT:-$state/pool}
bin=$root/build

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

case ${1:-start} in
stop)
	if mounted; then
		umount "$mnt" && echo "unmounted $mnt (the node left the pool)"
	else
		echo "$mnt is not mounted"
	fi
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

scripts/setup.sh
MC_BUILD_DIR=build scripts/build.sh release
mkdir -p "$state"

start mooncake_master "$state/master.port" \
	"$bin/master/mooncake_master" --rpc_address 127.0.0.1 --rpc_port "$rpc_port" \
	--metrics_host 127.0.0.1 --metrics_port "$metrics_port" \
	--enable_http_metadata_server --http_metadata_server_host 127.0.0.1 \
	--http_metadata_server_port "$meta_port" --db_path "$state/master.db" \
	--port_file "$state/master.port" --log_file "$state/mooncake_master.log"
mkdir -p "$mnt"
if mounted; then
	echo "already mounted on $mnt"
else
	"$bin/mooncakefs/fuse/mooncakefs" "127.0.0.1:$rpc_port" "$mnt" -o \
		"metadata=http://127.0.0.1:$meta_port/metadata,segment_size=$segment,log_file=$state/mooncakefs.log,segment_name=quickstart" ||
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
