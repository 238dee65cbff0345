/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file rpc_server.h
 * The master's RPC listener: one thread per connection reading frames
 * (common/rpc/mc_rpc.h), answering each in order, so clients may pipeline.
 * A frame that cannot be accepted closes its connection only.
 *
 * Limits on what peers can hold (docs/design.md, "Connections"): a
 * connection idle for idle_timeout_s is closed; a request must arrive in
 * full within frame_timeout_s of its first byte and an answer must be
 * taken within frame_timeout_s; a body's buffer grows as its bytes arrive,
 * and all buffers together beyond a small one per connection stay within
 * max_inflight bytes (a connection that would exceed it is closed); at
 * max_connections, a new connection sheds the connection that has waited
 * longest for its next request (or for the rest of one), and is refused
 * only when every connection is being served. With a key, a connection
 * is served only once it has authenticated (rpc_conn_auth.c).
 */
#ifndef MASTER_RPC_SERVER_H
#define MASTER_RPC_SERVER_H

#include <stddef.h>

struct master;
struct mst_rpc_server;
struct mc_auth_key;

struct mst_rpc_server_cfg {
	const char *host;
	int port; /* 0: ephemeral */
	unsigned max_connections; /* 0: 4096 */
	unsigned idle_timeout_s; /* 0: none */
	unsigned frame_timeout_s; /* 0: 30 */
	size_t max_body; /* 0: MC_RPC_MAX_BODY */
	size_t max_inflight; /* 0: max_body */
	unsigned busy_poll_us; /* 0: never busy-poll (mc_busy_poll.h) */
	/* The pool's key (copied): each connection authenticates before
	 * its first request (common/rpc/mc_rpc_auth.h). NULL: none. */
	const struct mc_auth_key *auth;
};

int mst_rpc_server_start(struct master *m, const struct mst_rpc_server_cfg *cfg,
			 struct mst_rpc_server **out, char *err, size_t errlen);
int mst_rpc_server_port(const struct mst_rpc_server *s);
/** Stop accepting, close every connection, join the threads. */
void mst_rpc_server_stop(struct mst_rpc_server *s);

#endif
