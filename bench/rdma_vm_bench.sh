#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The transfer engine over RDMA against perftest, in the soft-RoCE VM of
# scripts/rdma_vm.sh (rxe0 on a veth pair, one VM run for everything). By
# hand only (never in CI, no timing is asserted):
#
#   perftest   ib_write_bw and ib_read_bw, server and client on rxe0
#              (-d rxe0 -x $MC_RDMA_GID_INDEX, the client connecting to
#              10.0.0.1), -s 64 KiB and 1 MiB, -n iterations for --bytes
#              in all (-D misbehaves on soft-RoCE under TCG: its warm-up
#              margin eats short runs); "4 threads" is one process pair
#              with -q 4 (four QPs, -n per QP: the same bytes in all).
#   TE         bench/transfer_engine_bench: a target and an initiator
#              (P2PHANDSHAKE, both 10.0.0.1), write and read, 64 KiB and
#              1 MiB blocks, --threads 1 and 4, batches of 128 slices a
#              thread (perftest's default depth, -t 128), for each protocol:
#                rdma  --protocol rdma, MC_FORCE_HCA=1 (every transfer to
#                      a peer on rdma, though one VM is one host)
#                tcp   --protocol tcp, MC_FORCE_TCP=1 (loopback TCP, for
#                      comparison)
#
# Prints one table: GB/s (10^9 bytes/s) per row, each TE row's ratio to
# perftest's row of the same operation, size and threads, and the packets
# rxe0 sent during the row (hw_counters/sent_pkts: the rdma rows must have
# them, the tcp rows none). A protocol the
# build refuses (rdma before the transport lands) gets rows that say so.
# Under TCG (no KVM) every number is the emulator's, not a NIC's: compare
# ratios, not absolute numbers.
#
# Usage: bench/rdma_vm_bench.sh [--duration S] [--bytes N] [--rounds R]
#                               [--protocols "rdma tcp"] [--timeout S]
#                               [--smp N] [--mem MIB]
#   --duration S   seconds per TE row (default 3)
#   --bytes N      bytes per perftest row (default 64M: ~3 s at soft-RoCE's
#                  ~20 MB/s under TCG; 24 rows in all, ~4 min with the boot)
#   --protocols P  the TE protocols, in order (default "rdma tcp"); a
#                  protocol may carry settings of its own for an A/B in
#                  one run: "rdma rdma+MC_RDMA_SPIN_US=0" (K=V after each +)
#   --rounds R     rounds of every row, interleaved (default 3): each
#                  configuration's perftest row runs right before its TE
#                  rows, and the table reports medians
#   --timeout S    the VM's timeout (default 900)
#   --only C       only these configurations, OP.BLOCK.THREADS separated by
#                  spaces (e.g. "write.65536.1 read.65536.1")
#   -e K=V         set K=V for every TE process (e.g. MC_RDMA_SPIN_US=2000)
# Environment: MC_BUILD_DIR (the build under test, default build/).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
duration=3
bytes=64M
rounds=3
protocols="rdma tcp"
timeout=900
only=""
vmargs=()
teenv=()

if [ "${1:-}" != --in-vm ]; then
	while [[ $# -gt 0 ]]; do
		case $1 in
		--duration) duration=$2; shift 2 ;;
		--bytes) bytes=$2; shift 2 ;;
		--protocols) protocols=$2; shift 2 ;;
		--rounds) rounds=$2; shift 2 ;;
		--timeout) timeout=$2; shift 2 ;;
		--only) only=$2; shift 2 ;;
		-e) teenv+=("$2"); shift 2 ;;
		--smp | --mem) vmargs+=("$1" "$2"); shift 2 ;;
		-h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
		*) echo "rdma_vm_bench: unknown argument $1" >&2; exit 2 ;;
		esac
	done
	build=$(cd "${MC_BUILD_DIR:-$root/build}" && pwd)
	[ -x "$build/bench/transfer_engine_bench" ] || {
		echo "rdma_vm_bench: $build/bench/transfer_engine_bench not built" \
			"(set MC_BUILD_DIR)" >&2
		exit 2
	}
	for t in ib_write_bw ib_read_bw; do
		command -v $t >/dev/null || {
			echo "rdma_vm_bench: $t not found (apt-get install perftest)" >&2
			exit 2
		}
	done
	exec "$root/scripts/rdma_vm.sh" -t "$timeout" "${vmargs[@]}" \
		-e "MC_BUILD_DIR=$build" -e "BENCH_DURATION=$duration" \
		-e "BENCH_BYTES=$(numfmt --from=iec "$bytes")" \
		-e "BENCH_PROTOCOLS=$protocols" -e "BENCH_ROUNDS=$rounds" \
		-e "BENCH_ONLY=$only" -e "BENCH_TE_ENV=${teenv[*]}" \
		-- bash "$0" --in-vm
fi

# ------------------------------------------------------- inside the VM

duration=${BENCH_DURATION:-3}
bytes=${BENCH_BYTES:-67108864}
protocols=${BENCH_PROTOCOLS:-rdma tcp}
rounds=${BENCH_ROUNDS:-3}
only=${BENCH_ONLY:-}
read -r -a teenv <<<"${BENCH_TE_ENV:-}"
te=$MC_BUILD_DIR/bench/transfer_engine_bench
dev=$MC_RDMA_DEVICE
gid=$MC_RDMA_GID_INDEX
ip=$MC_RDMA_IP
tmp=$(mktemp -d)
pids=()
port=18600

cleanup() {
	local p
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

# perftest OP SIZE QPS PORT -> GB/s on stdout ("" when it failed; why on
# stderr)
perftest() {
	local op=$1 size=$2 qps=$3 out spid i n
	n=$((bytes / size / qps))
	[ "$n" -ge 5 ] || n=5
	local args=(-d "$dev" -x "$gid" -s "$size" -q "$qps" -n "$n" -F
		-p "$4")
	"ib_${op}_bw" "${args[@]}" >"$tmp/srv" 2>&1 &
	spid=$!
	pids+=("$spid")
	for i in $(seq 1 100); do
		if "ib_${op}_bw" "${args[@]}" "$ip" >"$tmp/cli" 2>&1; then
			break
		fi
		grep -q "Couldn't connect\|Unable to open file descriptor" \
			"$tmp/cli" || break
		sleep 0.2
	done
	wait "$spid" || true
	# "#bytes #iterations BW peak[MiB/sec] BW average[MiB/sec] MsgRate":
	# the average of the client's result line.
	out=$(awk -v s="$size" '$1 == s && NF >= 5 { print $4 }' "$tmp/cli" | tail -n1)
	if [ -z "$out" ]; then
		echo "rdma_vm_bench: ib_${op}_bw -s $size -q $qps failed:" >&2
		sed 's/^/  | /' "$tmp/cli" "$tmp/srv" >&2
		return 0
	fi
	awk -v m="$out" 'BEGIN { printf "%.3f\n", m * 1048576 / 1e9 }'
}

# te PROTO OP SIZE THREADS -> GB/s on stdout, or a reason in parentheses
te_row() {
	local proto=${1%%+*} op=$2 size=$3 threads=$4 batch envs seg i tpid extra=()
	# "rdma+K=V+K2=V2": the protocol with settings of its own.
	[[ $1 != *+* ]] || IFS=+ read -r -a extra <<<"${1#*+}"
	# The same depth of outstanding work as perftest (its default -t 128
	# per QP): 128 slices of MC_SLICE_SIZE (64 KiB) a batch per thread.
	batch=$((128 * 65536 / size))
	[ "$batch" -ge 1 ] || batch=1
	if [ "$proto" = rdma ]; then envs=(MC_FORCE_HCA=1); else envs=(MC_FORCE_TCP=1); fi
	envs+=("${teenv[@]}" "${extra[@]}")
	rm -f "$tmp/ready"
	env "${envs[@]}" "$te" --mode target --protocol "$proto" \
		--buffer_size 256M --local_server_name "$ip" \
		--ready_file "$tmp/ready" >"$tmp/target" 2>&1 &
	tpid=$!
	pids+=("$tpid")
	for i in $(seq 1 300); do
		[ -s "$tmp/ready" ] && break
		kill -0 "$tpid" 2>/dev/null || break
		sleep 0.1
	done
	if [ ! -s "$tmp/ready" ]; then
		kill -9 "$tpid" 2>/dev/null || true
		wait "$tpid" 2>/dev/null || true
		echo "(target: $(grep -v '^$' "$tmp/target" | tail -n1 | cut -c1-120))"
		return 0
	fi
	seg=$(sed -n 's/.*"segment": *"\([^"]*\)".*/\1/p' "$tmp/ready")
	env "${envs[@]}" "$te" --mode initiator --protocol "$proto" \
		--segment_id "$seg" --local_server_name "$ip" \
		--operation "$op" --block_size "$size" --batch_size "$batch" \
		--threads "$threads" --duration "$duration" --json \
		>"$tmp/init" 2>&1 || true
	kill -TERM "$tpid" 2>/dev/null || true
	wait "$tpid" 2>/dev/null || true
	i=$(sed -n 's/^{.*"gbps": *\([0-9.]*\).*/\1/p' "$tmp/init" | tail -n1)
	if [ -n "$i" ]; then
		echo "$i"
	else
		echo "(initiator: $(grep -v '^$' "$tmp/init" | tail -n1 | cut -c1-120))"
	fi
}

pkts() { cat "/sys/class/infiniband/$dev/ports/1/hw_counters/sent_pkts"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
echo "rdma_vm_bench: $(uname -r), $(nproc) CPUs, $dev GID $gid," \
	"$bytes bytes a perftest row, ${duration}s a TE row, $rounds rounds," \
	"TE env: ${teenv[*]:-(none)}" >&2
# Interleaved: in every round, each configuration's perftest row is
# followed at once by its TE rows, so a ratio compares runs seconds apart
# (the emulator's speed drifts with the host's load); medians over rounds.
declare -A gbps ratios npk
configs=()
for op in write read; do
	for size in 65536 1048576; do
		for t in 1 4; do
			[ -z "$only" ] || [[ " $only " == *" $op.$size.$t "* ]] || continue
			configs+=("$op.$size.$t")
		done
	done
done
for r in $(seq 1 "$rounds"); do
	for c in "${configs[@]}"; do
		IFS=. read -r op size t <<<"$c"
		p0=$(pkts)
		b=$(perftest "$op" "$size" "$t" "$port")
		port=$((port + 1))
		gbps[perftest.$c]+="${b:-} "
		npk[perftest.$c]=$(($(pkts) - p0))
		echo "rdma_vm_bench: round $r perftest $op $size x$t: ${b:-failed}" >&2
		for proto in $protocols; do
			p0=$(pkts)
			g=$(te_row "$proto" "$op" "$size" "$t")
			npk[$proto.$c]=$(($(pkts) - p0))
			if [[ $g == \(* ]]; then
				gbps[$proto.$c]="$g"
				echo "rdma_vm_bench: round $r TE $proto $op $size x$t: $g" >&2
				continue
			fi
			gbps[$proto.$c]+="$g "
			if [ -n "$b" ]; then
				ratios[$proto.$c]+="$(awk -v a="$g" -v b="$b" 'BEGIN { if (b > 0) printf "%.3f", a / b }') "
			fi
			echo "rdma_vm_bench: round $r TE $proto $op $size x$t: $g" >&2
		done
	done
done

echo
echo "| what | op | block | threads | GB/s (median) | TE/perftest (median of per-round ratios) | per-round ratios | rxe0 pkts (last round) |"
echo "|---|---|---|---|---|---|---|---|"
for what in perftest $protocols; do
	for c in "${configs[@]}"; do
		IFS=. read -r op size t <<<"$c"
		case $size in 65536) sz="64 KiB" ;; 1048576) sz="1 MiB" ;; *) sz=$size ;; esac
		v=${gbps[$what.$c]:-}
		if [[ $v == \(* ]]; then
			g=$v
		else
			g=$(tr ' ' '\n' <<<"$v" | { grep . || true; } | median)
		fi
		rr=$(tr ' ' '\n' <<<"${ratios[$what.$c]:-}" | { grep . || true; } | median)
		label=$what
		[ "$what" = perftest ] || label="TE $what"
		echo "| $label | $op | $sz | $t | ${g:-(failed)} | ${rr:--} | ${ratios[$what.$c]:--} | ${npk[$what.$c]} |"
	done
done
