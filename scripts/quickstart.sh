#!/usr/bin/env bash
# The main job, one command: install what is needed, build, start the pool
# on this machine and show it answering. Today the pool is its metadata
# service (mooncake_metad with a durable sqlite store); later issues add the
# master, the mounted filesystem and the rest.
#
#   scripts/quickstart.sh          set up, build, start, demonstrate
#   scripts/quickstart.sh stop     stop what it started
#   scripts/quickstart.sh status   show what runs
#
# Everything listens on 127.0.0.1 only (see docs/operations.md, trust
# model). State lives in $MC_STATE_DIR (default: .state/ in the checkout).
# MC_METAD_PORT picks the port (default 8080, upstream's).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
state=${MC_STATE_DIR:-$root/.state}
port=${MC_METAD_PORT:-8080}
pidfile=$state/metad.pid

running() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

stop() {
	if running; then
		pid=$(cat "$pidfile")
		kill -TERM "$pid"
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		echo "stopped mooncake_metad (pid $pid)"
	else
		echo "mooncake_metad is not running"
	fi
	rm -f "$pidfile"
}

case ${1:-start} in
stop) stop; exit 0 ;;
status)
	if running; then
		echo "mooncake_metad running, pid $(cat "$pidfile"), http://127.0.0.1:$(cat "$state/metad.port")/metadata"
	else
		echo "mooncake_metad not running"
	fi
	exit 0
	;;
start) ;;
*) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac

scripts/setup.sh
MC_BUILD_DIR=build scripts/build.sh release
mkdir -p "$state"

if running; then
	echo "mooncake_metad already running (pid $(cat "$pidfile"))"
else
	rm -f "$state/metad.port"
	setsid build/metad/mooncake_metad --host 127.0.0.1 --port "$port" \
		--store "sqlite:$state/metad.db" --port_file "$state/metad.port" \
		--log_file "$state/metad.log" </dev/null >/dev/null 2>"$state/metad.err" &
	echo $! >"$pidfile"
	for _ in $(seq 100); do
		[ -s "$state/metad.port" ] && break
		if ! running; then
			cat "$state/metad.err" >&2
			echo "mooncake_metad failed to start (port $port taken? set MC_METAD_PORT)" >&2
			rm -f "$pidfile"
			exit 1
		fi
		sleep 0.05
	done
fi
url="http://127.0.0.1:$(cat "$state/metad.port")/metadata"
key="mooncake/rpc_meta/$(hostname):12345"
esc=$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1],safe=""))' "$key")

echo
echo "metadata service: $url (store $state/metad.db, log $state/metad.log)"
echo "\$ curl -X PUT '$url?key=$esc' -d '{\"ip_or_host_name\":\"127.0.0.1\",\"rpc_port\":12345}'"
curl -sS -X PUT -H 'Content-Type: application/json' "$url?key=$esc" \
	-d '{"ip_or_host_name":"127.0.0.1","rpc_port":12345}'
echo
echo "\$ curl '$url?key=$esc'"
curl -sS "$url?key=$esc"
echo
echo "\$ curl '${url%/metadata}/health'"
curl -sS "${url%/metadata}/health"
echo
echo
echo "Stop it with: scripts/quickstart.sh stop"
