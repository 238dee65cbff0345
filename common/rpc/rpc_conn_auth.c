/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server's side of a connection's authentication (the exchange is in
 * mc_rpc_auth.h): a connection of a server with a key starts in
 * CONN_AUTH_HELLO and is served only once it reaches CONN_AUTHED. Called
 * by the connection's own thread (rpc_conn.c) with a complete frame, so
 * no locking. Every refusal closes the connection, after a frame that
 * says why, and is logged (rate-limited: a peer can cause it at will).
 */
#include <errno.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mc_log.h"
#include "mc_net.h"
#include "mc_rpc_auth.h"
#include "mooncake/mc_err.h"
#include "rpc_conn.h"

#define RL_MS 10000u

static int send_step(struct conn *c, uint16_t step, const void *body,
		     size_t len)
{
	uint8_t f[MC_RPC_HDR_LEN + MC_RPC_AUTH_MAX_BODY];

	return mc_net_write_all(c->fd, f,
				mc_rpc_auth_frame(step, body, len, f));
}

static void log_refused(struct conn *c, const char *why)
{
	unsigned dropped;

	if (mc_ratelimit_ok(&c->srv->rl_auth, RL_MS, &dropped))
		mc_log_warn("rpc",
			    "refused the connection from %s: %s (%u more "
			    "refusals in the last %u s not logged)",
			    c->peer, why, dropped, RL_MS / 1000);
}

/* Answer DENIED with why, and close. */
static int deny(struct conn *c, const char *why, int rc)
{
	log_refused(c, why);
	(void)send_step(c, MC_RPC_AUTH_DENIED, why, strlen(why));
	return rc;
}

/* The request's body, unread (rpc_conn.c does not buffer a request
 * before authentication), is read and dropped for at most 200 ms: closing
 * with it unread would reset the connection, and the client could lose
 * the answer that says why. */
static void drain(int fd, uint32_t left)
{
	uint64_t end = mc_rpc_now_ms() + 200;
	char junk[4096];

	(void)shutdown(fd, SHUT_WR);
	while (left) {
		uint64_t now = mc_rpc_now_ms();
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (now >= end || poll(&p, 1, (int)(end - now)) <= 0)
			return;
		n = read(fd, junk, left < sizeof(junk) ? left : sizeof(junk));
		if (n <= 0)
			return;
		left -= (uint32_t)n;
	}
}

/* A request before authenticating (a client without a token, upstream's
 * included): a code every client decodes, a flag ours turns into
 * MC_EAUTHREQUIRED. */
static int refuse_request(struct conn *c, const struct mc_rpc_hdr *h)
{
	uint8_t *frame;
	size_t len;
	int rc;

	log_refused(c, "a request before authenticating (the client has "
		       "no token: " MC_AUTH_HINT ")");
	rc = mc_rpc_pack_code(h, MC_STORE_ILLEGAL_CLIENT,
			      MC_RPC_FLAG_AUTH_REQUIRED, &frame, &len);
	if (rc)
		return rc;
	rc = mc_net_write_all(c->fd, frame, len);
	free(frame);
	if (!rc)
		drain(c->fd, h->length);
	return rc ? rc : MC_EAUTHREQUIRED;
}

static int on_hello(struct conn *c)
{
	uint8_t body[MC_AUTH_NONCE_LEN + MC_AUTH_MAC_LEN];
	int rc;

	memcpy(c->nc, c->body, MC_AUTH_NONCE_LEN);
	mc_auth_nonce(c->ns);
	memcpy(body, c->ns, MC_AUTH_NONCE_LEN);
	mc_auth_proof(&c->srv->key, MC_AUTH_SERVER, c->nc, c->ns,
		      body + MC_AUTH_NONCE_LEN);
	rc = send_step(c, MC_RPC_AUTH_CHALLENGE, body, sizeof(body));
	c->auth = CONN_AUTH_PROOF;
	return rc;
}

static int on_proof(struct conn *c)
{
	bool ok = mc_auth_proof_ok(&c->srv->key, MC_AUTH_CLIENT, c->nc, c->ns,
				   c->body);

	sodium_memzero(c->ns, sizeof(c->ns));
	if (!ok)
		return deny(c,
			    "wrong token (the client's proof does not match)",
			    MC_EAUTHFAILED);
	c->auth = CONN_AUTHED;
	mc_log_debug("rpc", "connection from %s authenticated", c->peer);
	return send_step(c, MC_RPC_AUTH_OK, NULL, 0);
}

int mc_rpc_conn_auth(struct conn *c, const struct mc_rpc_hdr *h)
{
	if (h->kind == MC_RPC_REQUEST)
		return refuse_request(c, h);
	if (!c->srv->auth) {
		char why[MC_RPC_AUTH_REASON_MAX];

		snprintf(why, sizeof(why),
			 "authentication is off on this %s (it has no token)",
			 c->srv->cfg.name);
		return deny(c, why, MC_EAUTHOFF);
	}
	if (h->method == MC_RPC_AUTH_HELLO && c->auth == CONN_AUTH_HELLO)
		return on_hello(c);
	if (h->method == MC_RPC_AUTH_PROOF && c->auth == CONN_AUTH_PROOF)
		return on_proof(c);
	return deny(c, "authentication step out of turn", -EPROTO);
}
