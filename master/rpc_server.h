/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file rpc_server.h
 * The master's RPC listener: one thread per connection reading frames
 * (common/rpc/mc_rpc.h), answering each in order, so clients may pipeline.
 * A frame that cannot be accepted closes its connection only.
 */
#ifndef MASTER_RPC_SERVER_H
#define MASTER_RPC_SERVER_H

#include <stddef.h>

struct master;
struct mst_rpc_server;

struct mst_rpc_server_cfg {
	const char *host;
	int port; /* 0: ephemeral */
	unsigned max_connections; /* 0: 4096 */
	unsigned idle_timeout_s; /* 0: none */
	size_t max_body;
	unsigned busy_poll_us; /* 0: never busy-poll (mc_busy_poll.h) */
};

int mst_rpc_server_start(struct master *m, const struct mst_rpc_server_cfg *cfg,
			 struct mst_rpc_server **out, char *err, size_t errlen);
int mst_rpc_server_port(const struct mst_rpc_server *s);
/** Stop accepting, close every connection, join the threads. */
void mst_rpc_server_stop(struct mst_rpc_server *s);

#endif
