/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_rpc_client.h
 * A client of the master RPC: a pool of TCP connections to one master,
 * one call at a time per connection, any number of threads at once.
 *
 * Errors: 0 or a negative errno: -ETIMEDOUT (no answer within the
 * timeout), -ECONNREFUSED and other connect errors, -ECONNRESET (the
 * master closed the connection), -EPROTO (an answer that does not decode).
 * A call that fails on a pooled connection the master had already closed
 * (it restarted, or closed the connection idle or to make room for
 * another) before any answer came is retried once on a new connection.
 *
 * Authentication (mc_rpc_auth.h): with a key, each new connection proves
 * it before its first request; the cost is one exchange per connection.
 * MC_EAUTHREQUIRED: the master has a token and this client none;
 * MC_EAUTHFAILED: the tokens differ; MC_EAUTHOFF: the master has none.
 * None of these is retried.
 */
#ifndef MC_RPC_CLIENT_H
#define MC_RPC_CLIENT_H

#include "mc_auth.h"
#include "mc_compiler.h"
#include "mc_rpc.h"

struct mc_rpc_client;

/** hostport: "host:port" (port defaults to 50051). Connects lazily. */
int mc_rpc_client_create(const char *hostport, unsigned timeout_ms,
			 struct mc_rpc_client **out) MC_MUST_CHECK;
void mc_rpc_client_destroy(struct mc_rpc_client *c);

/** Per-call timeout (connect + send + answer), ms, > 0. */
void mc_rpc_client_set_timeout(struct mc_rpc_client *c, unsigned timeout_ms);
unsigned mc_rpc_client_timeout(const struct mc_rpc_client *c);

/** Connect timeout, ms (0: the call's timeout), for a client whose calls
 *  wait long (long polls) but whose connects should not. */
void mc_rpc_client_set_connect_timeout(struct mc_rpc_client *c,
				       unsigned connect_ms);

/** Default busy-polling window for answers, us (mc_busy_poll.h). */
#define MC_RPC_BUSY_POLL_US 200u

/**
 * Busy-poll for an answer up to max_us before sleeping (adaptive, see
 * mc_busy_poll.h); 0 turns it off. Set before the first call.
 */
void mc_rpc_client_set_busy_poll(struct mc_rpc_client *c, unsigned max_us);

/**
 * Authenticate new connections with key (copied; NULL: do not). Set
 * before the first call.
 */
void mc_rpc_client_set_auth(struct mc_rpc_client *c,
			    const struct mc_auth_key *key);

/**
 * Not HA: a peer this client reached before that now refuses connections
 * (a master restarting, e.g. under systemd's Restart=) gets each call
 * again for up to ms (at most the timeout) before -ECONNREFUSED; once a
 * call waited that long in vain, calls fail at once until a connection
 * is made again (a peer down for good costs callers nothing). 0 (the
 * default): refused calls fail at once. Thread-safe.
 */
void mc_rpc_client_set_restart_wait(struct mc_rpc_client *c, unsigned ms);

/**
 * Send req as method and wait for the answer, decoded into *resp (free
 * with protobuf_c_message_free_unpacked(*resp, NULL)). With a restart
 * wait (mc_rpc_client_set_restart_wait), a peer that was reached before
 * and now refuses connections is tried again; HA clients follow the
 * leader instead (etcd://).
 */
int mc_rpc_call(struct mc_rpc_client *c, uint16_t method,
		const ProtobufCMessage *req,
		ProtobufCMessage **resp) MC_MUST_CHECK;

/** Close idle connections (after the master is known to have gone). */
void mc_rpc_client_reset(struct mc_rpc_client *c);

/**
 * For shutdown, from any thread: calls under way end now (the connections
 * of up to 16 of them are shut down; they return an error) and later
 * calls return -ECANCELED. Not undone; destroy() still frees c.
 */
void mc_rpc_client_abort(struct mc_rpc_client *c);

#endif
