/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file rpc_conn.h
 * Inside the RPC server (mc_rpc_server.h; rpc_server.c accepts and
 * admits, rpc_conn.c serves one connection, rpc_conn_auth.c authenticates
 * it): the connection and server records they share. Not installed.
 *
 * A connection is WAITING while its thread waits for a request or reads
 * one, SERVING while the request is handled and answered (a long poll,
 * such as the master's Watch, included). Only a WAITING connection may be shed (the acceptor
 * swaps WAITING for SHED and shuts the socket down; the thread, which
 * swaps WAITING for SERVING once a frame is complete, then finds SHED and
 * leaves), so a request that was handled is always answered, and one that
 * was shed was never handled: clients retry it on a new connection.
 */
#ifndef MC_RPC_CONN_H
#define MC_RPC_CONN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mc_auth.h"
#include "mc_busy_poll.h"
#include "mc_ratelimit.h"
#include "mc_rpc.h"
#include "mc_rpc_server.h"

enum conn_state { CONN_WAITING, CONN_SERVING, CONN_SHED };

/* Where a connection is in its authentication (mc_rpc_auth.h). */
enum conn_auth { CONN_AUTHED, CONN_AUTH_HELLO, CONN_AUTH_PROOF };

struct conn {
	struct mc_rpc_server *srv;
	int fd;
	_Atomic int state; /* enum conn_state */
	/* When the connection began its current wait (for a request, or
	 * for the rest of one): the oldest is shed first. */
	_Atomic uint64_t since_ms;
	struct mc_busy_poll bp; /* waiting for the next request */
	uint8_t *body; /* request body buffer, grown as bytes arrive */
	size_t cap, charged; /* its size, the part counted in the budget */
	char peer[64]; /* "ip:port" for log lines */
	enum conn_auth auth; /* CONN_AUTHED from the start without a key */
	uint8_t nc[MC_AUTH_NONCE_LEN], ns[MC_AUTH_NONCE_LEN]; /* its nonces */
	struct conn *prev, *next;
};

struct mc_rpc_server {
	struct mc_rpc_server_cfg cfg;
	mc_rpc_handler_fn fn; /* answers requests, with arg */
	void *arg;
	int lfd, port;
	int stop_pipe[2];
	pthread_t acceptor;
	pthread_mutex_t lock;
	pthread_cond_t gone;
	struct conn *conns;
	unsigned n_conns, n_shed; /* n_shed: shed and not yet gone */
	bool stopping;
	_Atomic size_t inflight; /* body bytes counted in the budget */
	struct mc_ratelimit rl_refused, rl_shed, rl_slow, rl_budget, rl_auth,
		rl_proto;
	bool auth; /* connections must authenticate with key */
	struct mc_auth_key key;
};

/* Each connection's first bytes of body buffer are outside the budget. */
#define MC_RPC_CONN_FREE_BYTES (16u << 10)

/** CLOCK_MONOTONIC_COARSE in ms. */
uint64_t mc_rpc_now_ms(void);

/** The connection's thread (pthread start routine). */
void *mc_rpc_conn_main(void *arg);

/**
 * An AUTH frame h (body in c->body), or a request on a connection that
 * has not authenticated: answer it. 0 keeps the connection; a negative
 * code closes it (logged here).
 */
int mc_rpc_conn_auth(struct conn *c, const struct mc_rpc_hdr *h);

/** Unlink, close and free c (its thread, at its end). */
void mc_rpc_conn_close(struct conn *c);

#endif
