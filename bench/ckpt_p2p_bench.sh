#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Checkpoints shared peer to peer against one HTTP server (issue 20). By
# hand only (never in CI, no timing is asserted); needs root.
#
# Every host is a network namespace made here: the master, the publisher
# and one per reader, each with a veth pair into a bridge that lives in a
# namespace of its own (nothing is added to the caller's namespace). The
# publisher's and the readers' links are limited with tc tbf to --rate
# in both directions (on the host's end for what it sends, on the
# bridge's end for what it receives); the master's link is not limited.
# The checkpoint is --files files of random bytes, --size in all, in the
# temporary directory; the publisher runs `mooncake ckpt publish` on it
# and, on the same host and link, nginx serves the same directory.
#
# For each reader count N of --readers, two rounds:
#   p2p    --via mount (default): N hosts each with its own mooncakefs
#          mount (made for the round: an empty cache), all running
#          `cp -r MOUNT/ckpt/ck DIR` at once; a reader is done when its
#          cp is, and its mount keeps serving what it read until the
#          round ends. --via cli: N x `mooncake ckpt get ck DIR --serve`
#          instead, done when it prints "serving". Time: start to the
#          last one done.
#   nginx  N x `curl --parallel` of the same files from the publisher's
#          host, all started at once. Time: start to the last one done.
# Every reader's files are compared with the source (cmp) and removed
# after each round. The publisher's share is measured two ways: the
# served_bytes of its holder record (`mooncake ckpt info`: what readers
# reported fetching from it) and the tx bytes of its interface (all of
# its traffic, headers included), each as a multiple of the checkpoint's
# size; for nginx the interface only.
#
# Prints a markdown table (docs/benchmarks.md, "Checkpoints peer to
# peer"). Processes, namespaces and the temporary directory are removed on
# any exit.
#
# Usage: bench/ckpt_p2p_bench.sh [--size SIZE] [--readers "1 2 4 8"]
#                                [--rate RATE] [--files N]
#                                [--shard_size SIZE] [--inflight N]
#   --size SIZE        the checkpoint (default 1G; K, M, G: powers of 2)
#   --readers "N ..."  reader counts, one round each (default "1 2 4 8")
#   --rate RATE        each limited link, each way, in tc's units
#                      (default 1gbit; kbit, mbit, gbit)
#   --files N          files the checkpoint is cut into (default 4)
#   --shard_size SIZE  the checkpoint's shards (default: the library's,
#                      64 MiB)
#   --inflight N       shards each reader fetches at once (default 4;
#                      --via cli only: a mount fetches 4)
#   --via mount|cli    how readers fetch (default mount)
# The readers' files and the source go to TMPDIR (default /tmp): room for
# (max readers + 1) x SIZE is needed. About 5 minutes with the defaults on
# 2 cores.
# Environment: MC_BENCH_BUILD_DIR (default build-release; built here,
# mooncake_master and mooncake only), TMPDIR.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MC_BENCH_BUILD_DIR:-$root/build-release}
size=1G
readers="1 2 4 8"
rate=1gbit
nfiles=4
shard=
inflight=4
via=mount

while [[ $# -gt 0 ]]; do
	case $1 in
	--size) size=$2; shift 2 ;;
	--readers) readers=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--files) nfiles=$2; shift 2 ;;
	--shard_size) shard=$2; shift 2 ;;
	--inflight) inflight=$2; shift 2 ;;
	--via) via=$2; shift 2 ;;
	-h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "ckpt_p2p_bench: unknown argument $1" >&2; exit 2 ;;
	esac
done

die() {
	echo "ckpt_p2p_bench: $*" >&2
	exit 1
}

[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, tc)"
[[ $via == mount || $via == cli ]] || die "--via: mount or cli"
for c in ip tc nginx curl cmp numfmt python3; do
	command -v "$c" >/dev/null || die "$c not found (scripts/setup.sh)"
done
s=${size%B}
bytes=$(numfmt --from=iec "${s%i}") || die "--size $size: not a size"
((bytes >= nfiles && nfiles >= 1)) || die "--size too small for --files"
max=0
for n in $readers; do
	if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 1 || n > 200)); then
		die "--readers: counts from 1 to 200"
	fi
	((n > max)) && max=$n
done
# tbf's bucket: 4 ms at the rate, at least 64 KiB (a GSO packet).
case $rate in
*gbit) bps=$((${rate%gbit} * 1000000000)) ;;
*mbit) bps=$((${rate%mbit} * 1000000)) ;;
*kbit) bps=$((${rate%kbit} * 1000)) ;;
*) die "--rate: a whole number of kbit, mbit or gbit" ;;
esac
burst=$((bps / 8 / 250))
((burst >= 65536)) || burst=65536

log="$build/bench-ckpt-build.log"
mkdir -p "$build"
echo "ckpt_p2p_bench: building Release in $build" >&2
if ! { { [[ -f $build/CMakeCache.txt ]] ||
	CC=gcc cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
		-DMC_WERROR=OFF -DBUILD_TESTING=OFF; } &&
	cmake --build "$build" -j"$(nproc)" --target mooncake_master \
		mooncake_cli mooncakefs; } >"$log" 2>&1; then
	tail -n 30 "$log" >&2
	die "build failed (full log: $log)"
fi
master_bin=$build/master/mooncake_master
cli_bin=$build/mooncakefs/cli/mooncake
mcfs_bin=$build/mooncakefs/fuse/mooncakefs
unset MOONCAKE_AUTH_TOKEN_FILE MOONCAKE_CONFIG_PATH

tag=mcb$((RANDOM % 1000))
net=10.215.$((RANDOM % 200 + 20))
tmp=
nss=()
jobs_=()

cleanup() {
	local ns pid m
	if [[ -n $tmp ]]; then
		for m in "$tmp"/mnt*; do
			if [[ -d $m ]]; then
				umount -l "$m" 2>/dev/null || true
			fi
		done
	fi
	for ns in "${nss[@]}"; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -TERM "$pid" 2>/dev/null || true
		done
	done
	sleep 0.5
	for ns in "${nss[@]}"; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null || true
		done
	done
	for pid in "${jobs_[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	for ns in "${nss[@]}"; do
		ip netns del "$ns" 2>/dev/null || true
	done
	if [[ -n $tmp ]]; then
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mc-bench-ckpt.XXXXXX")

# ---- the network -----------------------------------------------------------

sw=$tag-sw
add_ns() {
	ip netns add "$1"
	nss+=("$1")
	ip -n "$1" link set lo up
}
add_ns "$sw"
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up

# add_host NAME ADDRESS LIMIT: namespace $tag-NAME, eth0 at ADDRESS/24 on
# the bridge; LIMIT 1: tbf at --rate both ways.
add_host() {
	local ns=$tag-$1
	add_ns "$ns"
	ip -n "$sw" link add "v$1" type veth peer name eth0 netns "$ns"
	ip -n "$sw" link set "v$1" master br0 up
	ip -n "$ns" addr add "$2/24" dev eth0
	ip -n "$ns" link set eth0 up
	if (($3)); then
		tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" \
			burst "$burst" latency 50ms
		tc -n "$sw" qdisc add dev "v$1" root tbf rate "$rate" \
			burst "$burst" latency 50ms
	fi
}
add_host m "$net.1" 0
add_host p "$net.2" 1
for ((i = 1; i <= max; i++)); do
	add_host "r$i" "$net.$((10 + i))" 1
done

# on NAME CMD...: run CMD on host NAME.
on() {
	local ns=$tag-$1
	shift
	ip netns exec "$ns" "$@"
}

# wait_file PID FILE WHAT: until FILE is non-empty (PID must live).
wait_file() {
	local i
	for ((i = 0; i < 600; i++)); do
		[[ -s $2 ]] && return 0
		kill -0 "$1" 2>/dev/null || die "$3 exited"
		sleep 0.1
	done
	die "$3: nothing in $2 after 60 s"
}

# ---- the checkpoint, the master, the publisher, nginx ----------------------

mkdir "$tmp/src"
part=$((bytes / nfiles))
files=()
for ((i = 0; i < nfiles; i++)); do
	n=$part
	((i == nfiles - 1)) && n=$((bytes - part * (nfiles - 1)))
	f=$(printf 'model-%05d.safetensors' "$((i + 1))")
	head -c "$n" /dev/urandom >"$tmp/src/$f"
	files+=("$f")
done
echo "ckpt_p2p_bench: $bytes bytes in $nfiles files, links $rate each way," \
	"readers: $readers" >&2

on m "$master_bin" --rpc_address "$net.1" --rpc_port 0 \
	--port_file "$tmp/master.port" --metrics_host "$net.1" \
	--metrics_port 0 --enable_http_metadata_server \
	--http_metadata_server_host "$net.1" --http_metadata_server_port 0 \
	--metadata_port_file "$tmp/master.meta" --db_path "$tmp/master.db" \
	--enable_metric_reporting=false >"$tmp/master.log" 2>&1 &
jobs_+=($!)
wait_file $! "$tmp/master.port" master
wait_file "${jobs_[-1]}" "$tmp/master.meta" master
MOONCAKE_MASTER=$net.1:$(<"$tmp/master.port")
MOONCAKE_TE_META_DATA_SERVER=http://$net.1:$(<"$tmp/master.meta")/metadata
export MOONCAKE_MASTER MOONCAKE_TE_META_DATA_SERVER

shard_args=()
[[ -n $shard ]] && shard_args=(--shard_size "$shard")
on p "$cli_bin" ckpt publish "$tmp/src" ck "${shard_args[@]}" \
	--local_hostname "$net.2" >"$tmp/pub.out" 2>"$tmp/pub.log" &
jobs_+=($!)
wait_file $! "$tmp/pub.out" "the publisher"
grep -q '^serving ' "$tmp/pub.out" || die "publisher: $(cat "$tmp/pub.log")"

mkdir "$tmp/nginx"
cat >"$tmp/nginx.conf" <<EOF
user root;
worker_processes 2;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log;
events { worker_connections 1024; }
http {
	access_log off;
	sendfile on;
	tcp_nopush on;
	default_type application/octet-stream;
	client_body_temp_path $tmp/nginx/body;
	proxy_temp_path $tmp/nginx/proxy;
	fastcgi_temp_path $tmp/nginx/fastcgi;
	uwsgi_temp_path $tmp/nginx/uwsgi;
	scgi_temp_path $tmp/nginx/scgi;
	server {
		listen $net.2:8080;
		root $tmp/src;
	}
}
EOF
on p nginx -p "$tmp/nginx" -e "$tmp/nginx/error.log" \
	-c "$tmp/nginx.conf" >"$tmp/nginx.log" 2>&1 &
jobs_+=($!)
for ((i = 0; i < 100; i++)); do
	on r1 curl -sfI "http://$net.2:8080/${files[0]}" >/dev/null && break
	kill -0 "${jobs_[-1]}" 2>/dev/null ||
		die "nginx: $(cat "$tmp/nginx.log" "$tmp/nginx/error.log")"
	sleep 0.1
done

# ---- measuring -------------------------------------------------------------

now() { date +%s.%N; }
pub_tx() { on p cat /sys/class/net/eth0/statistics/tx_bytes; }
pub_served() {
	on m "$cli_bin" ckpt info ck | python3 -c '
import json, sys
print(sum(h["served_bytes"] for h in json.load(sys.stdin)["holder_list"]
          if h["publisher"]))'
}
# check DIR: every file of the checkpoint in DIR, the same bytes.
check() {
	local f
	for f in "${files[@]}"; do
		cmp -s "$tmp/src/$f" "$1/$f" || die "$1/$f differs from the source"
	done
}
# stop_readers N: SIGTERM to everything on hosts r1..rN.
stop_readers() {
	local i pid
	for ((i = 1; i <= $1; i++)); do
		for pid in $(ip netns pids "$tag-r$i"); do
			kill -TERM "$pid" 2>/dev/null || true
		done
	done
}

# mount_reader I: mount mooncakefs on host rI at $tmp/mntI (its cache
# empty), and wait until its ckpt/ lists the checkpoint.
mount_reader() {
	local i=$1 m=$tmp/mnt$1 k
	mkdir -p "$m"
	rm -rf "$tmp/cache$i"
	nsenter --net="/run/netns/$tag-r$i" "$mcfs_bin" "$MOONCAKE_MASTER" "$m" \
		-o "metadata=$MOONCAKE_TE_META_DATA_SERVER,segment_size=16MiB" \
		-o "local_hostname=$net.$((10 + i)),segment_name=$tag-r$i" \
		-o "ckpt_cache=$tmp/cache$i,log_file=$tmp/mnt$i.log" ||
		die "mount $i: $(tail -n 5 "$tmp/mnt$i.log")"
	for ((k = 0; k < 300; k++)); do
		[[ -d $m/ckpt/ck ]] && return 0
		sleep 0.1
	done
	die "mount $i: no ckpt/ck after 30 s: $(tail -n 5 "$tmp/mnt$i.log")"
}

umount_readers() {
	local i k
	for ((i = 1; i <= $1; i++)); do
		umount "$tmp/mnt$i" 2>/dev/null || umount -l "$tmp/mnt$i"
	done
	# The daemons leave the pool after the unmount: wait for them.
	for ((k = 0; k < 300; k++)); do
		pgrep -f "$mcfs_bin .*$tmp/mnt" >/dev/null || return 0
		sleep 0.1
	done
}

mount_round() {
	local n=$1 i t0 pids=() served0 tx0
	for ((i = 1; i <= n; i++)); do
		mount_reader "$i"
	done
	served0=$(pub_served)
	tx0=$(pub_tx)
	t0=$(now)
	for ((i = 1; i <= n; i++)); do
		cp -r "$tmp/mnt$i/ckpt/ck" "$tmp/r$i" 2>"$tmp/r$i.log" &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		wait "${pids[i]}" ||
			die "p2p reader $((i + 1)): $(cat "$tmp/r$((i + 1)).log")"
	done
	p2p_time=$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
	p2p_served=$(($(pub_served) - served0))
	p2p_tx=$(($(pub_tx) - tx0))
	umount_readers "$n"
	for ((i = 1; i <= n; i++)); do
		check "$tmp/r$i"
		rm -rf "$tmp/r$i" "$tmp/cache$i"
	done
}

p2p_round() {
	local n=$1 i t0 pids=() left served0 tx0 last=0 t
	if [[ $via == mount ]]; then
		mount_round "$n"
		return
	fi
	served0=$(pub_served)
	tx0=$(pub_tx)
	t0=$(now)
	for ((i = 1; i <= n; i++)); do
		rm -f "$tmp/r$i.done"
		{
			on "r$i" "$cli_bin" ckpt get ck "$tmp/r$i" --serve \
				--inflight "$inflight" --local_hostname \
				"$net.$((10 + i))" 2>"$tmp/r$i.log" | {
				IFS= read -r _ && now >"$tmp/r$i.done"
				cat >/dev/null
			}
		} &
		pids+=($!)
	done
	for ((left = n; left > 0;)); do
		left=0
		for ((i = 1; i <= n; i++)); do
			[[ -s $tmp/r$i.done ]] && continue
			left=$((left + 1))
			kill -0 "${pids[i - 1]}" 2>/dev/null || {
				stop_readers "$n"
				die "p2p reader $i failed: $(tail -n 5 "$tmp/r$i.log")"
			}
		done
		((left)) && sleep 0.05
	done
	for ((i = 1; i <= n; i++)); do
		t=$(<"$tmp/r$i.done")
		last=$(awk -v a="$last" -v b="$t" 'BEGIN { print (b > a) ? b : a }')
	done
	p2p_time=$(awk -v a="$last" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
	p2p_served=$(($(pub_served) - served0))
	p2p_tx=$(($(pub_tx) - tx0))
	stop_readers "$n"
	for i in "${pids[@]}"; do
		wait "$i" 2>/dev/null || true
	done
	for ((i = 1; i <= n; i++)); do
		check "$tmp/r$i"
		rm -rf "$tmp/r$i"
	done
}

nginx_round() {
	local n=$1 i f t0 t1 pids=() tx0 urls
	tx0=$(pub_tx)
	t0=$(now)
	for ((i = 1; i <= n; i++)); do
		mkdir -p "$tmp/h$i"
		urls=()
		for f in "${files[@]}"; do
			urls+=(-o "$tmp/h$i/$f" "http://$net.2:8080/$f")
		done
		on "r$i" curl -sSf --parallel --parallel-max 4 "${urls[@]}" \
			2>"$tmp/h$i.log" &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		wait "${pids[i]}" ||
			die "nginx reader $((i + 1)): $(cat "$tmp/h$((i + 1)).log")"
	done
	t1=$(now)
	nginx_time=$(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
	nginx_tx=$(($(pub_tx) - tx0))
	for ((i = 1; i <= n; i++)); do
		check "$tmp/h$i"
		rm -rf "$tmp/h$i"
	done
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

rows=()
for n in $readers; do
	p2p_round "$n"
	nginx_round "$n"
	echo "ckpt_p2p_bench: $n readers: p2p ${p2p_time} s" \
		"(publisher served $p2p_served, sent $p2p_tx bytes)," \
		"nginx ${nginx_time} s (sent $nginx_tx bytes)" >&2
	rows+=("| $n | $p2p_time | $nginx_time | $(ratio "$p2p_time" "$nginx_time") | $(ratio "$p2p_served" "$bytes") | $(ratio "$p2p_tx" "$bytes") | $(ratio "$nginx_tx" "$bytes") |")
done

echo
echo "Checkpoint of $(numfmt --to=iec-i --suffix=B "$bytes") in $nfiles files," \
	"links $rate each way, shard size ${shard:-64MiB}, readers:" \
	"$([[ $via == mount ]] && echo "mounts, cp -r" || echo "CLI, inflight $inflight")."
echo
echo "| readers | p2p s | nginx s | p2p / nginx | publisher served / size | publisher tx / size (p2p) | publisher tx / size (nginx) |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
