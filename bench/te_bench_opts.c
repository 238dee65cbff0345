/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transfer_engine_bench's options: upstream's flag names and defaults
 * (mooncake-transfer-engine/example/transfer_engine_bench.cpp) where they
 * make sense here, plus ours (--ready_file, --lanes, --print_topology,
 * --json, --verify). Loopback and no etcd are assumed, so the metadata
 * default is P2PHANDSHAKE and the server name 127.0.0.1.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "te_bench.h"

#define OPT(n, t, f, d, lo, hi, h)                                           \
	{                                                                    \
		.name = n, .type = t, .offset = offsetof(struct teb_cfg, f), \
		.def = d, .min = lo, .max = hi, .help = h                    \
	}

static const struct mc_opt teb_opts[] = {
	OPT("mode", MC_OPT_STRING, mode, "initiator", 0, 0,
	    "'target' (registers a buffer and waits for SIGINT/SIGTERM) or "
	    "'initiator' (runs the transfers)."),
	OPT("metadata_server", MC_OPT_STRING, metadata_server, "P2PHANDSHAKE",
	    0, 0,
	    "Metadata connection string: P2PHANDSHAKE (no service), "
	    "http://host:port/metadata, or etcd://host:port."),
	OPT("local_server_name", MC_OPT_STRING, local_server_name, "127.0.0.1",
	    0, 0,
	    "This engine's name (host or host:port); with P2PHANDSHAKE it "
	    "becomes host:rpcport."),
	OPT("segment_id", MC_OPT_STRING, segment_id, NULL, 0, 0,
	    "Initiator: the target's segment name (P2PHANDSHAKE: the "
	    "host:port the target prints)."),
	OPT("protocol", MC_OPT_STRING, protocol, "tcp", 0, 0,
	    "Transport: tcp or shm (same host, target memory from "
	    "te_mem_alloc) or rdma (the NICs; set MC_FORCE_HCA=1 for a "
	    "target on the same host)."),
	OPT("operation", MC_OPT_STRING, operation, "read", 0, 0,
	    "read (target -> initiator) or write (initiator -> target)."),
	OPT("buffer_size", MC_OPT_SIZE, buffer_size, "1GiB", 4096,
	    1099511627776.0,
	    "Target: its buffer (1G syntax). The initiator's buffers are "
	    "batch_size x block_size per thread."),
	OPT("batch_size", MC_OPT_INT, batch_size, "128", 1, 1048576,
	    "Requests per batch."),
	OPT("block_size", MC_OPT_SIZE, block_size, "65536", 1, 1073741824.0,
	    "Bytes per request."),
	OPT("duration", MC_OPT_INT, duration, "10", 1, 86400,
	    "Seconds of measured transfers."),
	OPT("threads", MC_OPT_INT, threads, "12", 1, 256,
	    "Submitting threads (each with its own batch and local buffer)."),
	OPT("report_unit", MC_OPT_STRING, report_unit, "GB", 0, 0,
	    "Throughput unit: GB, GiB, Gb, MB, MiB, Mb, KB, KiB or Kb."),
	OPT("report_precision", MC_OPT_INT, report_precision, "2", 0, 9,
	    "Digits after the point in the throughput."),
	OPT("json", MC_OPT_BOOL, json, "false", 0, 0,
	    "Initiator: print one JSON summary line on stdout (GB/s, batch "
	    "latency p50/p99)."),
	OPT("ready_file", MC_OPT_STRING, ready_file, NULL, 0, 0,
	    "Target: once serving, write {\"segment\": name, \"rpc\": "
	    "address} to this file (atomically)."),
	OPT("lanes", MC_OPT_INT, lanes, "0", 0, 256,
	    "TCP connections per peer (te_engine_cfg.tcp_lanes); 0: the "
	    "engine's default (MC_TCP_LANES_PER_PEER or 4)."),
	OPT("print_topology", MC_OPT_BOOL, print_topology, "false", 0, 0,
	    "Print te_topology_json() and the NUMA node of the buffer."),
	OPT("verify", MC_OPT_BOOL, verify, "true", 0, 0,
	    "Initiator: check data both ways before the timed run."),
	OPT("v", MC_OPT_VERBOSITY, v, "0", 0, 9,
	    "Verbosity: -v or -v=1 debug, -v=2 trace (MC_LOG_LEVEL also)."),
};

const struct mc_cfg_spec teb_cfg_spec = {
	.prog = "transfer_engine_bench",
	.summary = "Transfer engine throughput: run a target, then an "
		   "initiator that reads or writes it in batches.",
	.opts = teb_opts,
	.n_opts = sizeof(teb_opts) / sizeof(teb_opts[0]),
	.strict = true,
};

int teb_cfg_check(const struct teb_cfg *c, char *err, size_t errlen)
{
	bool target = !strcmp(c->mode, "target");

	if (!target && strcmp(c->mode, "initiator")) {
		snprintf(err, errlen,
			 "--mode: 'target' or 'initiator', not '%s'", c->mode);
		return -EINVAL;
	}
	if (strcmp(c->operation, "read") && strcmp(c->operation, "write")) {
		snprintf(err, errlen,
			 "--operation: 'read' or 'write', not '%s'",
			 c->operation);
		return -EINVAL;
	}
	if (isnan(teb_rate(1.0, c->report_unit))) {
		snprintf(err, errlen, "--report_unit: unknown unit '%s'",
			 c->report_unit);
		return -EINVAL;
	}
	if (!target && (!c->segment_id || !*c->segment_id)) {
		snprintf(err, errlen,
			 "--segment_id: the target's segment name is "
			 "required (the target prints it)");
		return -EINVAL;
	}
	if (!target &&
	    c->block_size * (uint64_t)c->batch_size > (64ull << 30)) {
		snprintf(err, errlen,
			 "--batch_size x --block_size is each thread's local "
			 "buffer; more than 64 GiB is refused");
		return -EINVAL;
	}
	return 0;
}
