/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One RPC connection's thread: wait for a request (busy-poll, then sleep
 * up to the idle timeout), read its frame by a deadline into a buffer that
 * grows as bytes arrive and is counted in the server's in-flight budget,
 * handle it, answer, repeat. See rpc_conn.h for the states.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "mc_log.h"
#include "mc_net.h"
#include "mc_rpc.h"
#include "mc_rpc_auth.h"
#include "rpc_conn.h"
#include "mooncake/mc_err.h"

#define RL_MS 10000u /* one line per cause per 10 s */

uint64_t mc_rpc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool budget_take(struct mc_rpc_server *s, size_t n)
{
	size_t cur = atomic_load_explicit(&s->inflight, memory_order_relaxed);

	do {
		if (n > s->cfg.max_inflight - cur)
			return false;
	} while (!atomic_compare_exchange_weak(&s->inflight, &cur, cur + n));
	return true;
}

static void budget_give(struct mc_rpc_server *s, size_t n)
{
	atomic_fetch_sub(&s->inflight, n);
}

/* Grow the body buffer towards len + 1 bytes: to the free part first,
 * then doubling, so it stays within twice what arrived. -ENOBUFS when the
 * budget has no room. */
static int body_grow(struct conn *c, size_t len)
{
	struct mc_rpc_server *s = c->srv;
	size_t cap = c->cap * 2;
	size_t charge;
	uint8_t *nb;

	if (cap < MC_RPC_CONN_FREE_BYTES)
		cap = MC_RPC_CONN_FREE_BYTES;
	if (cap > len + 1)
		cap = len + 1;
	if (cap <= c->cap)
		return 0;
	charge = cap > MC_RPC_CONN_FREE_BYTES ? cap - MC_RPC_CONN_FREE_BYTES :
						0;
	if (charge > c->charged && !budget_take(s, charge - c->charged))
		return -ENOBUFS;
	nb = realloc(c->body, cap);
	if (!nb) {
		if (charge > c->charged)
			budget_give(s, charge - c->charged);
		return -ENOMEM;
	}
	c->body = nb;
	c->cap = cap;
	if (charge > c->charged)
		c->charged = charge;
	return 0;
}

/* Give back a buffer larger than the free part (after a request). */
static void body_trim(struct conn *c)
{
	if (c->cap <= MC_RPC_CONN_FREE_BYTES)
		return;
	free(c->body);
	c->body = NULL;
	c->cap = 0;
	budget_give(c->srv, c->charged);
	c->charged = 0;
}

/* Read up to len bytes, waiting no later than deadline: the count, or
 * -ETIMEDOUT, -ECONNRESET (the peer closed, or the socket was shut down
 * when shed or stopping), another negative errno. */
static ssize_t read_some(int fd, void *buf, size_t len, uint64_t deadline)
{
	for (;;) {
		ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now;
		int rc;

		if (n > 0)
			return n;
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		now = mc_rpc_now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		rc = poll(&p, 1, (int)(deadline - now));
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

static int read_by(int fd, uint8_t *buf, size_t len, uint64_t deadline)
{
	while (len) {
		ssize_t n = read_some(fd, buf, len, deadline);
		if (n < 0)
			return (int)n;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read the body of h into c->body by the deadline. */
static int read_body(struct conn *c, size_t len, uint64_t deadline)
{
	size_t got = 0;
	int rc = body_grow(c, len); /* at least one byte, even for len 0 */

	if (rc)
		return rc;
	while (got < len) {
		size_t room = (c->cap < len ? c->cap : len) - got;
		ssize_t n;

		if (!room) {
			rc = body_grow(c, len);
			if (rc)
				return rc;
			continue;
		}
		n = read_some(c->fd, c->body + got, room, deadline);
		if (n < 0)
			return (int)n;
		got += (size_t)n;
	}
	return 0;
}

static void log_closed(struct conn *c, struct mc_ratelimit *rl, const char *why)
{
	unsigned dropped;

	if (mc_ratelimit_ok(rl, RL_MS, &dropped))
		mc_log_warn("rpc",
			    "closing the connection from %s: %s (%u more "
			    "such closes in the last %u s not logged)",
			    c->peer, why, dropped, RL_MS / 1000);
}

/* One request: 0 when answered, otherwise the connection ends. */
static int serve_one(struct conn *c)
{
	struct mc_rpc_server *s = c->srv;
	uint8_t hb[MC_RPC_HDR_LEN], *frame;
	struct mc_rpc_hdr h;
	uint64_t now, deadline;
	int expect = CONN_WAITING;
	size_t len;
	int rc;

	rc = mc_busy_poll_wait(
		&c->bp, c->fd,
		s->cfg.idle_timeout_s ? (int)s->cfg.idle_timeout_s * 1000 : -1);
	if (rc) {
		if (rc == -ETIMEDOUT)
			mc_log_debug("rpc",
				     "closing the idle connection from %s",
				     c->peer);
		return rc;
	}
	now = mc_rpc_now_ms();
	atomic_store_explicit(&c->since_ms, now, memory_order_relaxed);
	deadline = now + (uint64_t)s->cfg.frame_timeout_s * 1000;
	rc = read_by(c->fd, hb, sizeof(hb), deadline);
	if (rc) {
		if (rc == -ETIMEDOUT)
			log_closed(c, &s->rl_slow,
				   "request header not received within "
				   "--rpc_frame_timeout_seconds");
		return rc;
	}
	rc = mc_rpc_hdr_decode(hb, (uint32_t)s->cfg.max_body, &h);
	if (!rc && h.kind == MC_RPC_AUTH &&
	    !mc_rpc_auth_len_ok(h.method, h.length))
		rc = -EPROTO;
	if (rc || h.kind == MC_RPC_RESPONSE) {
		/* Anyone who can connect sends these at will: rate-limited
		 * (3,000 connections logged 312 KB in 0.6 s). */
		log_closed(c, &s->rl_proto,
			   rc == -EMSGSIZE ? "frame over the size limit" :
					     "not a request frame");
		return rc ? rc : -EPROTO;
	}
	/* Before authenticating, a request is refused without reading its
	 * body: anyone who can connect could otherwise hold the in-flight
	 * budget that authenticated clients' requests need. */
	if (h.kind == MC_RPC_REQUEST && c->auth != CONN_AUTHED)
		return mc_rpc_conn_auth(c, &h);
	rc = read_body(c, h.length, deadline);
	if (rc) {
		if (rc == -ETIMEDOUT)
			log_closed(c, &s->rl_slow,
				   "request body not received within "
				   "--rpc_frame_timeout_seconds");
		else if (rc == -ENOBUFS)
			log_closed(c, &s->rl_budget,
				   "request bytes in flight would exceed "
				   "--rpc_max_inflight_bytes");
		return rc;
	}
	if (h.kind == MC_RPC_AUTH || c->auth != CONN_AUTHED) {
		rc = mc_rpc_conn_auth(c, &h);
		body_trim(c);
		return rc;
	}
	if (!atomic_compare_exchange_strong(&c->state, &expect, CONN_SERVING))
		return -ECONNRESET; /* shed */
	rc = s->fn(s->arg, &h, c->body, &frame, &len);
	body_trim(c);
	if (rc) {
		log_closed(c, &s->rl_proto,
			   rc == -EPROTO ? "request does not decode" :
					   mc_strerror(rc));
		return rc;
	}
	rc = mc_net_write_all(c->fd, frame, len);
	free(frame);
	if (rc) {
		if (rc == -EAGAIN || rc == -EWOULDBLOCK)
			log_closed(c, &s->rl_slow,
				   "answer not taken within "
				   "--rpc_frame_timeout_seconds");
		return rc;
	}
	atomic_store_explicit(&c->since_ms, mc_rpc_now_ms(),
			      memory_order_relaxed);
	atomic_store_explicit(&c->state, CONN_WAITING, memory_order_release);
	return 0;
}

void *mc_rpc_conn_main(void *arg)
{
	struct conn *c = arg;

	while (!serve_one(c))
		;
	free(c->body);
	budget_give(c->srv, c->charged);
	mc_rpc_conn_close(c);
	return NULL;
}
