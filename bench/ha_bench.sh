#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# HA masters (issue 21; docs/benchmarks.md "Master high availability"),
# on loopback, everything started here and stopped at the end:
#
#   rates     store_bench (same host, 1 and 4 processes) against one master without
#             HA and against an HA pair (leader + standby on a 3-member etcd
#             cluster, clients given the etcd:// address; measured once the
#             standby is in the in-sync set), interleaved
#             ROUNDS times; the median of the per-round ratios HA/no-HA per
#             case. Targets: batch puts within 30%, gets within 5%.
#   failover  a client loop (the mooncake CLI: one put and one get of a
#             fresh key per iteration) while the leader is killed with
#             kill -9: the time from the kill to the end of the first put
#             and the first get started after it that succeed, FAILOVERS
#             times per lease TTL.
#             Target: within TTL + 3 s. The CLI's start (joining the pool)
#             is in the figure, so it is an upper bound. With --objects N
#             the pool holds N objects (64 bytes each, put in batches of
#             1,000 through the Python package) before the loop starts:
#             the new leader then restores a record of that size.
#
# Usage: bench/ha_bench.sh [--build DIR] [--rounds N] [--failovers N]
#                          [--only rates|failover] [--ttls "5 2"]
#                          [--procs 1,4]   (client processes, rates)
#                          [--sizes 4KiB,64KiB,1MiB] [--forms single,batch]
#                          [--ops put,get] [--seconds 2]   (rates: narrow
#                          the cases for an A/B of one of them)
#                          [--objects N]   (failover: the pool's objects)
#                          [--pin]   (rates: what HA adds, the 3 etcd members
#                          and the standby, on CPU 1, everything else on CPU
#                          0: a stand-in for hosts of their own, where the
#                          leader, the member and the clients get no more
#                          CPU than the master without HA)
# etcd's data lives under a temporary directory on the disk of /tmp (each
# write an fsync, as etcd does in production).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-release
ROUNDS=3
FAILOVERS=3
PROCS=1,4
SIZES=4KiB,64KiB,1MiB
FORMS=single,batch
OPS=put,get
SECONDS_PER=2
ONLY=
TTLS="5 2"
PIN=0
OBJECTS=0
while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--failovers) FAILOVERS=$2; shift 2 ;;
	--only) ONLY=$2; shift 2 ;;
	--ttls) TTLS=$2; shift 2 ;;
	--procs) PROCS=$2; shift 2 ;;
	--sizes) SIZES=$2; shift 2 ;;
	--forms) FORMS=$2; shift 2 ;;
	--ops) OPS=$2; shift 2 ;;
	--seconds) SECONDS_PER=$2; shift 2 ;;
	--pin) PIN=1; shift ;;
	--objects) OBJECTS=$2; shift 2 ;;
	*) echo "usage: $0 [--build DIR] [--rounds N] [--failovers N] [--only rates|failover] [--ttls LIST] [--procs LIST] [--sizes LIST] [--forms LIST] [--ops LIST] [--seconds N] [--pin] [--objects N]" >&2; exit 2 ;;
	esac
done
MASTER=$BUILD/master/mooncake_master
MEMBER=$BUILD/mooncakefs/cli/mooncake_client
CLI=$BUILD/mooncakefs/cli/mooncake
SB=$BUILD/bench/store_bench
for b in "$MASTER" "$MEMBER" "$CLI" "$SB"; do
	[ -x "$b" ] || { echo "missing $b: scripts/build.sh release" >&2; exit 1; }
done
command -v etcd >/dev/null || { echo "etcd missing: scripts/setup.sh" >&2; exit 1; }

W=$(mktemp -d /tmp/ha_bench.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pkill -9 -f "$W" 2>/dev/null || true
	rm -rf "$W"
	rm -f "/dev/shm/mooncake.seg.habench$$"_* 2>/dev/null || true
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
# With --pin, the words that put a command on CPU 0 or CPU 1 (none
# without it), for start's and sb's command lines.
CPU0=()
CPU1=()
if [ "$PIN" = 1 ]; then
	CPU0=(taskset -c 0)
	CPU1=(taskset -c 1)
fi
start() { # name cmd...: in the background, logs in $W/name.log
	local name=$1; shift
	setsid "$@" >"$W/$name.log" 2>&1 &
	PIDS+=($!)
}

# ---- a 3-member etcd cluster ---------------------------------------------
declare -a EC EP
for i in 0 1 2; do EC[i]=$(port); EP[i]=$(port); done
CLUSTER=""
for i in 0 1 2; do CLUSTER+="e$i=http://127.0.0.1:${EP[$i]},"; done
for i in 0 1 2; do
	start "etcd$i" "${CPU1[@]}" etcd --name "e$i" --data-dir "$W/etcd$i" \
		--listen-client-urls "http://127.0.0.1:${EC[$i]}" \
		--advertise-client-urls "http://127.0.0.1:${EC[$i]}" \
		--listen-peer-urls "http://127.0.0.1:${EP[$i]}" \
		--initial-advertise-peer-urls "http://127.0.0.1:${EP[$i]}" \
		--initial-cluster "${CLUSTER%,}" --initial-cluster-state new
done
ETCD="127.0.0.1:${EC[0]};127.0.0.1:${EC[1]};127.0.0.1:${EC[2]}"
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:${EC[0]}/health" | grep -q true && break
	sleep 0.2
done
export MOONCAKE_CLUSTER_ID=habench

wait_file() { for _ in $(seq 300); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "timeout: $1" >&2; exit 1; }
leader() { ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:${EC[0]}" get "mooncake-store/$1/master_view" --print-value-only; }

# An HA master: name cluster ttl
ha_master() { # name cluster ttl [0|1: its CPU with --pin]
	local p; p=$(port)
	local -a cpu=()
	case ${4:-} in
	0) cpu=("${CPU0[@]}") ;;
	1) cpu=("${CPU1[@]}") ;;
	esac
	start "$1" "${cpu[@]}" "$MASTER" --enable_ha --etcd_endpoints "$ETCD" \
		--cluster_id "$2" --ha_lease_ttl_sec "$3" \
		--rpc_address 127.0.0.1 --rpc_port "$p" \
		--metrics_host 127.0.0.1 --metrics_port 0 \
		--default_kv_lease_ttl 200 --db_path "$W/$1.db" \
		--port_file "$W/$1.port"
	echo "${PIDS[-1]} $p"
}
member() { # name master_address
	start "$1" "${CPU0[@]}" "$MEMBER" --host 127.0.0.1 --port 0 \
		--global_segment_size 256MiB --master_server_address "$2" \
		--metadata_server P2PHANDSHAKE --port_file "$W/$1.port" \
		--segment_name "habench$$_$1"
	wait_file "$W/$1.port"
	echo "${PIDS[-1]}"
}
stop() { kill -TERM "$1" 2>/dev/null || true; for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done; kill -9 "$1" 2>/dev/null || true; }

# store_bench rows "op form size ... ops/s" -> "op/form/size ops"
sb() { # master_address
	"${CPU0[@]}" "$SB" --master_server_address "$1" --metadata_server P2PHANDSHAKE \
		--procs "$PROCS" --sizes "$SIZES" --ops "$OPS" \
		--forms "$FORMS" --seconds "$SECONDS_PER" --same_host --pool_size 256MiB |
		awk -F'|' '/^\| (put|get) /{gsub(/ /,"",$2);gsub(/ /,"",$3);gsub(/ /,"",$4);gsub(/ /,"",$5);gsub(/ /,"",$7); print $2"/"$3"/"$4"/"$5"procs", $7}'
}

rates() {
	local r
	for r in $(seq "$ROUNDS"); do
		# without HA
		local p; p=$(port)
		start "plain$r" "${CPU0[@]}" "$MASTER" --rpc_address 127.0.0.1 --rpc_port "$p" \
			--metrics_host 127.0.0.1 --metrics_port 0 \
			--default_kv_lease_ttl 200 --db_path "$W/plain$r.db" \
			--port_file "$W/plain$r.port"
		local mp=${PIDS[-1]}
		wait_file "$W/plain$r.port"
		local c; c=$(member "mp$r" "127.0.0.1:$p")
		sb "127.0.0.1:$p" >"$W/off.$r"
		stop "$c"; stop "$mp"
		# with HA: a leader and a standby
		read -r l1 _ < <(ha_master "hl$r" "rates$r" 5 0)
		wait_file "$W/hl$r.port"
		read -r l2 _ < <(ha_master "hs$r" "rates$r" 5 1)
		c=$(MOONCAKE_CLUSTER_ID="rates$r" member "mh$r" "etcd://$ETCD")
		# Measure with the standby in sync (it takes the leader's
		# stream; docs/design.md "Entries straight to standbys").
		for _ in $(seq 100); do
			ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:${EC[0]}" \
				get "mooncake-store/rates$r/insync" --print-value-only |
				grep -q ' ' && break
			sleep 0.1
		done
		if [ "$PIN" = 1 ] && [ "$(leader "rates$r")" != "127.0.0.1:$(cat "$W/hl$r.port")" ]; then
			echo "round $r: the master on CPU 1 leads; --pin measures the wrong one" >&2
		fi
		MOONCAKE_CLUSTER_ID="rates$r" sb "etcd://$ETCD" >"$W/on.$r"
		stop "$c"; stop "$l2"; stop "$l1"
		echo "round $r done" >&2
	done
	echo
	echo "| case | no HA ops/s (median) | HA ops/s (median) | HA/no HA (median of $ROUNDS rounds) |"
	echo "|---|---|---|---|"
	python3 - "$W" "$ROUNDS" <<'EOF'
import statistics, sys
w, n = sys.argv[1], int(sys.argv[2])
def load(p):
    d = {}
    for line in open(p):
        k, v = line.split()
        d[k] = float(v)
    return d
off = [load(f"{w}/off.{r}") for r in range(1, n + 1)]
on = [load(f"{w}/on.{r}") for r in range(1, n + 1)]
for k in off[0]:
    a = [o[k] for o in off if k in o]
    b = [o[k] for o in on if k in o]
    ratios = [y / x for x, y in zip(a, b) if x > 0]
    print(f"| {k.replace('/', ' ')} | {statistics.median(a):.0f} | "
          f"{statistics.median(b):.0f} | {statistics.median(ratios):.2f}x |")
EOF
}

failover() {
	local ttl=$1 i
	for i in $(seq "$FAILOVERS"); do
		local cl="fo${ttl}_$i"
		read -r a _ < <(ha_master "${cl}a" "$cl" "$ttl")
		wait_file "$W/${cl}a.port"
		read -r b _ < <(ha_master "${cl}b" "$cl" "$ttl")
		sleep 1
		local c; c=$(MOONCAKE_CLUSTER_ID=$cl member "${cl}m" "etcd://$ETCD")
		[ "$OBJECTS" -gt 0 ] && fill "$cl" "$OBJECTS"
		head -c 65536 /dev/urandom >"$W/val"
		# the client loop: put then get of a fresh key, stamps of each
		(
			export MOONCAKE_CLUSTER_ID=$cl
			k=0
			while [ ! -e "$W/${cl}.stop" ]; do
				k=$((k + 1))
				s=$(now)
				if timeout 30 "$CLI" --master "etcd://$ETCD" --metadata P2PHANDSHAKE \
					put "$W/val" "k$k" >/dev/null 2>"$W/${cl}.err"; then
					echo "put $s $(now)"
					s=$(now)
					if timeout 30 "$CLI" --master "etcd://$ETCD" --metadata P2PHANDSHAKE \
						get "k$k" "$W/${cl}.out" >/dev/null 2>"$W/${cl}.err"; then
						echo "get $s $(now)"
					else
						echo "get-failed $s $(now) $(tail -1 "$W/${cl}.err" | tr -s ' \t' '_')"
					fi
				else
					echo "put-failed $s $(now) $(tail -1 "$W/${cl}.err" | tr -s ' \t' '_')"
				fi
			done
		) >"$W/${cl}.stamps" &
		local loop=$!
		sleep 2
		local who; who=$(leader "$cl")
		local victim=$a
		[ "$who" = "127.0.0.1:$(cat "$W/${cl}b.port" 2>/dev/null)" ] && victim=$b
		local t0; t0=$(now)
		kill -9 "$victim"
		# the record's load: about 2-3 s per million objects here
		sleep $((ttl + 6 + OBJECTS / 250000))
		touch "$W/${cl}.stop"
		wait "$loop" || true
		local heir=${cl}b
		[ "$victim" = "$b" ] && heir=${cl}a
		python3 - "$W/${cl}.stamps" "$t0" "$ttl" "$W/$heir.log" <<'EOF'
import datetime, sys
stamps, t0, ttl, log = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
# the heir's log: when it was elected and when it served (the record's
# load between the two)
when = {}
for line in open(log):
    for what in ("HA: elected leader", "serving RPC on"):
        if what in line and what not in when:
            when[what] = datetime.datetime.strptime(
                " ".join(line.split()[:2]), "%Y-%m-%d %H:%M:%S.%f").timestamp()
elected = when.get("HA: elected leader", float("nan")) - t0
serving = when.get("serving RPC on", float("nan")) - t0
first = {}
# the first operation that started after the kill and succeeded
failed = []
for line in open(stamps):
    op, start, end = line.split()[:3]
    if op.endswith("-failed"):
        if float(end) > t0:
            failed.append(f"{op} {float(start) - t0:.2f}..{float(end) - t0:.2f} s: "
                          + " ".join(line.split()[3:])[:160])
        continue
    if float(start) > t0 and op not in first:
        first[op] = float(end) - t0
# what failed after the kill (CLI runs), to stderr: where the time went
for f in failed[:12]:
    print("  " + f, file=sys.stderr)
print(f"| {ttl} s | put {first.get('put', float('nan')):.2f} s | "
      f"get {first.get('get', float('nan')):.2f} s | target {ttl + 3} s | "
      f"elected {elected:.2f} s, serving {serving:.2f} s |")
EOF
		stop "$c"; stop "$a"; stop "$b"
	done
}

# fill cluster n: n objects of 64 bytes through the Python package (a
# client without a segment), in batches of 1,000; then waits until the
# standbys' records hold them (the entry each standby's key names stays
# the same for 2 s), so the takeover measured does not also catch up.
fill() {
	local t0; t0=$(now)
	MOONCAKE_CLUSTER_ID=$1 PYTHONPATH="$ROOT/python" \
		MOONCAKE_LIB="$BUILD/mooncakefs/lib/libmooncake.so" \
		python3 - "etcd://$ETCD" "$2" <<'EOF'
import sys
from mooncake.store import MooncakeDistributedStore
master, n = sys.argv[1], int(sys.argv[2])
s = MooncakeDistributedStore()
rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master)
if rc:
    sys.exit(f"fill: setup: {rc}")
v = b"v" * 64
for i in range(0, n, 1000):
    keys = [f"fill{j}" for j in range(i, min(n, i + 1000))]
    rc = s.put_batch(keys, [v] * len(keys))
    if rc:
        sys.exit(f"fill: put_batch at {i}: {rc}")
s.close()
EOF
	echo "filled $2 objects in $(python3 -c "print(round($(now) - $t0, 1))") s" >&2
	local last="" same=0 cur
	for _ in $(seq 300); do
		cur=$(ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:${EC[0]}" get \
			--prefix "mooncake-store/$1/standby/" --print-value-only | awk '{print $1}' | sort | tr '\n' ' ')
		if [ -n "$cur" ] && [ "$cur" = "$last" ]; then
			same=$((same + 1))
			[ "$same" -ge 4 ] && break
		else
			same=0
		fi
		last=$cur
		sleep 0.5
	done
	echo "standbys at op log entry $last, $(python3 -c "print(round($(now) - $t0, 1))") s after the fill began" >&2
}

# The floor under an HA put: one etcd transaction of the kind the leader
# writes (a compare and a put of an entry-sized value) through the same
# JSON gateway, sequential, on one kept-alive connection: the median and
# p90 of 200, and the single-client put rate they allow (1 / median).
etcd_latency() {
	python3 - "${EC[0]}" <<'EOF'
import base64, http.client, json, statistics, sys, time
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
k = base64.b64encode(b"habench/latency").decode()
v = base64.b64encode(b"x" * 1024).decode()
body = json.dumps({"compare": [{"key": k, "target": "CREATE",
                                "result": "EQUAL", "create_revision": "0"}],
                   "success": [{"request_put": {"key": k, "value": v}}],
                   "failure": [{"request_put": {"key": k, "value": v}}]})
t = []
for _ in range(200):
    t0 = time.perf_counter()
    c.request("POST", "/v3/kv/txn", body, {"Content-Type": "application/json"})
    c.getresponse().read()
    t.append((time.perf_counter() - t0) * 1000)
t.sort()
med = statistics.median(t)
print(f"etcd transaction (compare + 1 KiB put, sequential): median {med:.2f} ms, "
      f"p90 {t[179]:.2f} ms: at most {1000 / med:.0f} acknowledged changes/s "
      f"for one client")
EOF
}

echo "# HA bench: $(nproc) CPUs, $(date -u +%F), etcd $(etcd --version | head -1 | awk '{print $3}')"
etcd_latency
if [ "$ONLY" != failover ]; then
	echo "## put/get rates, store_bench same host, $PROCS client processes"
	rates
fi
if [ "$ONLY" != rates ]; then
	echo
	echo "## failover: kill -9 of the leader under a put+get loop"
	echo "| lease TTL | first put after | first get after | target | the heir (after the kill) |"
	echo "|---|---|---|---|---|"
	for t in $TTLS; do failover "$t"; done
fi
