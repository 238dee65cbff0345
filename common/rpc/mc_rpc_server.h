/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_rpc_server.h
 * A framed-RPC listener: one thread per connection reading frames
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
 *
 * The master serves its RPC with it; any process may serve the same
 * frames with its own handler. Log lines are under the subsystem "rpc".
 */
#ifndef MC_RPC_SERVER_H
#define MC_RPC_SERVER_H

#include <stddef.h>
#include <stdint.h>

struct mc_rpc_hdr;
struct mc_rpc_server;
struct mc_auth_key;

struct mc_rpc_server_cfg {
	const char *name; /* in refusals: "... off on this master" */
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
	/* Called with the handler's arg by mc_rpc_server_stop once every
	 * connection is shut down: wake handlers that wait (long polls).
	 * NULL: none. */
	void (*on_stop)(void *arg);
};

/**
 * Answer the request h (its body: h->length bytes): 0 with *frame
 * (malloc'd, *len bytes; the server frees it) the response frame to send,
 * or a negative errno to close the connection (-EPROTO: the body does not
 * decode). Called by each connection's thread, one request at a time per
 * connection.
 */
typedef int (*mc_rpc_handler_fn)(void *arg, const struct mc_rpc_hdr *h,
				 const uint8_t *body, uint8_t **frame,
				 size_t *len);

/** name NULL: "server". 0, or a negative errno (err says why). */
int mc_rpc_server_start(const struct mc_rpc_server_cfg *cfg,
			mc_rpc_handler_fn fn, void *arg,
			struct mc_rpc_server **out, char *err, size_t errlen);
int mc_rpc_server_port(const struct mc_rpc_server *s);
/** Stop accepting, close every connection, join the threads. */
void mc_rpc_server_stop(struct mc_rpc_server *s);

#endif
