/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The handshake (RPC) listener: answers peers' Probe, Metadata (our
 * descriptor, desc.c) and Notify (queued by notify.c) requests, and hands
 * Connection (RDMA) requests to the transport that serves them (its
 * serve_handshake op; refused in upstream's form where none does). Frames are read and written by the
 * codec in handshake.c; with the pool's key, a connection is served only
 * after the client proved it (hs_auth.c).
 *
 * Calls down only: handshake.c, hs_auth.c, desc.c (te__describe), notify.c
 * (te__notif_push). engine.c starts and stops it.
 *
 * Threads: the listener thread accepts, and serves each connection on a
 * thread of its own, at most HS_MAX_CONNS at once; a connection gets 2 s
 * in all to send its frames (authentication included). Served one at a
 * time, a few connections that sent nothing held every other caller's
 * Probe, Notify, Metadata and RDMA connection set-up. At the bound, a
 * newcomer closes the connection that got least far (sent nothing, then
 * sent a frame but did not authenticate), the oldest of those; one that
 * authenticated (without a key: sent its request) is never closed, and
 * a newcomer is refused only while all are such. A legitimate client
 * sends its first frame at once and authenticates in a round trip, so
 * idle connections, however many, do not keep it out. Requests to a
 * transport (serve_handshake) are served one at a time.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mc_log.h"
#include "mc_net.h"
#include "mc_parse.h"
#include "mc_time.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

#define HS_SERVE_TIMEOUT_MS 2000
#define HS_MAX_CONNS 64
#define HS_EVICT_WAIT_MS 1000 /* for a closed connection's thread to end */
#define HS_WARN_EVERY_MS 10000

/* How far a connection got: one that sent nothing is closed first for a
 * newcomer, then one that sent a frame but has not authenticated (or,
 * without a key, sent its request); one that did is never closed. */
enum { HS_IDLE, HS_HEARD, HS_KEPT };

/* A connection being served: a slot of the listener's table. */
struct hs_conn {
	struct te_hs_server *srv;
	pthread_t thread;
	bool running; /* a thread to join; the listener thread's */
	uint64_t since_ms; /* accepted (mono); set before the thread starts */
	/* Under srv->lock: */
	int fd; /* -1 once its thread is done with it */
	bool done; /* its thread ended (or is about to) */
	int stage; /* HS_IDLE, HS_HEARD or HS_KEPT */
};

struct te_hs_server {
	struct te_engine *eng;
	pthread_mutex_t lock;
	pthread_cond_t done_cv; /* CLOCK_MONOTONIC; a connection's end */
	pthread_mutex_t tp_lock; /* serve_handshake calls, one at a time */
	/* The listener thread's: closed and refused connections since the
	 * last warning, and when that was. */
	unsigned evicted, refused;
	uint64_t warned_ms;
	struct hs_conn conns[HS_MAX_CONNS];
};

/* Read and decode one frame; *buf is the caller's to free. */
static int recv_frame(int fd, uint8_t **buf, uint8_t *type, const char **json,
		      size_t *jlen)
{
	size_t len;
	int rc = te__hs_recv(fd, te__hs_max_length(), buf, &len);

	if (rc)
		return rc;
	rc = te__hs_decode(*buf, len, te__hs_max_length(), type, json, jlen);
	if (rc) {
		mc_log_debug("te", "handshake: bad frame: %s", mc_strerror(rc));
		free(*buf);
		*buf = NULL;
	}
	return rc;
}

/* A request the core does not serve: the transport that does (rdma's
 * Connection), or a refusal in upstream's form. */
static void serve_transport(struct te_engine *eng, int fd, uint8_t type,
			    const char *json, size_t jlen)
{
	static const char no_rdma[] = "{\"reply_msg\":\"RDMA is not enabled "
				      "in this mooncakefs engine\"}";

	pthread_mutex_lock(&eng->hs->tp_lock);
	for (int i = 0; i < TE_TP_COUNT; i++) {
		struct te_transport *tp = eng->tps[i];
		char *reply = NULL;
		int rc;

		if (!tp || !tp->ops->serve_handshake)
			continue;
		rc = tp->ops->serve_handshake(tp, type, json, jlen, &reply);
		if (rc == MC_ENOTSUPPORTED)
			continue;
		pthread_mutex_unlock(&eng->hs->tp_lock);
		if (!rc && reply)
			(void)te__hs_send(fd, type, reply, strlen(reply));
		free(reply);
		return;
	}
	pthread_mutex_unlock(&eng->hs->tp_lock);
	(void)te__hs_send(fd, type, no_rdma, sizeof(no_rdma) - 1);
}

static void set_stage(struct hs_conn *c, int stage)
{
	pthread_mutex_lock(&c->srv->lock);
	c->stage = stage;
	pthread_mutex_unlock(&c->srv->lock);
}

static void serve_one(struct hs_conn *c, int fd)
{
	struct te_engine *eng = c->srv->eng;
	static const char probe_ok[] = "{\"status\":\"success\"}";
	static const char notify_ok[] =
		"{\"name\":\"\",\"notify_msg\":\"success\"}";
	const char *json;
	size_t jlen;
	uint8_t *buf, type;
	char *name, *msg, *desc;

	if (mc_net_set_timeouts(fd, HS_SERVE_TIMEOUT_MS))
		return;
	if (recv_frame(fd, &buf, &type, &json, &jlen))
		return;
	set_stage(c, eng->auth ? HS_HEARD : HS_KEPT);
	/* With a key, the first frames are the authentication steps. */
	if (te__hs_auth_server(fd, eng->auth, type, json, jlen)) {
		free(buf);
		return;
	}
	if (eng->auth) {
		set_stage(c, HS_KEPT);
		free(buf);
		if (recv_frame(fd, &buf, &type, &json, &jlen))
			return;
		if (type == TE_HS_AUTH) {
			free(buf);
			return;
		}
	}
	switch (type) {
	case TE_HS_PROBE:
		(void)te__hs_send(fd, type, probe_ok, sizeof(probe_ok) - 1);
		break;
	case TE_HS_NOTIFY:
		if (te__hs_parse_notify(json, jlen, &name, &msg) == 0) {
			te__notif_push(eng, name, msg);
			(void)te__hs_send(fd, type, notify_ok,
					  sizeof(notify_ok) - 1);
		}
		break;
	case TE_HS_METADATA:
		desc = te__describe(eng);
		if (desc)
			(void)te__hs_send(fd, type, desc, strlen(desc));
		free(desc);
		break;
	default: /* TE_HS_CONNECTION: a transport's (rdma) */
		serve_transport(eng, fd, type, json, jlen);
		break;
	}
	free(buf);
}

static void *conn_thread(void *arg)
{
	struct hs_conn *c = arg;
	struct te_hs_server *s = c->srv;
	int fd = c->fd; /* only this thread changes it */

	te__hs_recv_deadline(c->since_ms + HS_SERVE_TIMEOUT_MS);
	serve_one(c, fd);
	pthread_mutex_lock(&s->lock);
	c->fd = -1; /* before close: no one shuts a reused number down */
	c->done = true;
	pthread_cond_broadcast(&s->done_cv);
	pthread_mutex_unlock(&s->lock);
	close(fd);
	return NULL;
}

/* Join the connections' threads that ended. */
static void reap(struct te_hs_server *s)
{
	for (int i = 0; i < HS_MAX_CONNS; i++) {
		struct hs_conn *c = &s->conns[i];
		bool done;

		if (!c->running)
			continue;
		pthread_mutex_lock(&s->lock);
		done = c->done;
		pthread_mutex_unlock(&s->lock);
		if (done) {
			pthread_join(c->thread, NULL);
			c->running = false;
		}
	}
}

/* A slot for a new connection: a free one, else that of the connection
 * that got least far, the oldest of those, closed for it. NULL: every
 * connection is authenticated (or sent its request). */
static struct hs_conn *take_slot(struct te_hs_server *s)
{
	struct hs_conn *old = NULL;
	struct timespec ts;
	bool done = false;

	reap(s);
	for (int i = 0; i < HS_MAX_CONNS; i++)
		if (!s->conns[i].running)
			return &s->conns[i];
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < HS_MAX_CONNS; i++) {
		struct hs_conn *c = &s->conns[i];

		if (c->done) {
			/* Ended since reap(): its slot, at once. */
			pthread_mutex_unlock(&s->lock);
			pthread_join(c->thread, NULL);
			c->running = false;
			return c;
		}
		if (c->fd < 0 || c->stage == HS_KEPT)
			continue;
		if (!old || c->stage < old->stage ||
		    (c->stage == old->stage && c->since_ms < old->since_ms))
			old = c;
	}
	if (old) {
		/* Its thread wakes (end of file) and ends at once. */
		(void)shutdown(old->fd, SHUT_RDWR);
		ts = mc_mono_deadline(HS_EVICT_WAIT_MS);
		while (!old->done &&
		       pthread_cond_timedwait(&s->done_cv, &s->lock, &ts) == 0)
			;
		done = old->done;
	}
	pthread_mutex_unlock(&s->lock);
	if (!done)
		return NULL;
	pthread_join(old->thread, NULL);
	old->running = false;
	s->evicted++;
	return old;
}

/* Say, at most every HS_WARN_EVERY_MS, that connections were closed or
 * refused for being too many. */
static void warn_full(struct te_hs_server *s)
{
	uint64_t now = mc_mono_ms();

	if (!s->evicted && !s->refused)
		return;
	if (s->warned_ms && now - s->warned_ms < HS_WARN_EVERY_MS)
		return;
	mc_log_warn("te",
		    "handshake: %d connections at once on %s: closed %u "
		    "that had not authenticated (or sent a request) for "
		    "newer ones, refused %u (idle or slow clients, or a "
		    "flood)",
		    HS_MAX_CONNS, s->eng->rpc_address, s->evicted, s->refused);
	s->evicted = s->refused = 0;
	s->warned_ms = now;
}

static void serve(struct te_hs_server *s, int fd)
{
	struct hs_conn *c = take_slot(s);

	if (!c) {
		s->refused++;
		close(fd);
		return;
	}
	c->since_ms = mc_mono_ms();
	pthread_mutex_lock(&s->lock);
	c->fd = fd;
	c->done = false;
	c->stage = HS_IDLE;
	pthread_mutex_unlock(&s->lock);
	if (pthread_create(&c->thread, NULL, conn_thread, c)) {
		pthread_mutex_lock(&s->lock);
		c->fd = -1;
		pthread_mutex_unlock(&s->lock);
		s->refused++;
		close(fd);
		return;
	}
	c->running = true;
}

/* Close every connection and wait for their threads. */
static void end_all(struct te_hs_server *s)
{
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < HS_MAX_CONNS; i++)
		if (s->conns[i].running && s->conns[i].fd >= 0)
			(void)shutdown(s->conns[i].fd, SHUT_RDWR);
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < HS_MAX_CONNS; i++)
		if (s->conns[i].running) {
			pthread_join(s->conns[i].thread, NULL);
			s->conns[i].running = false;
		}
}

static void *rpc_thread(void *arg)
{
	struct te_engine *eng = arg;
	struct te_hs_server *s = eng->hs;

	while (!atomic_load(&eng->stopping)) {
		struct pollfd p = { .fd = eng->rpc_fd, .events = POLLIN };
		int fd;

		if (poll(&p, 1, 200) <= 0) {
			reap(s);
			continue;
		}
		fd = accept4(eng->rpc_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		serve(s, fd);
		warn_full(s);
	}
	end_all(s);
	return NULL;
}

static struct te_hs_server *hs_new(struct te_engine *eng)
{
	struct te_hs_server *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->eng = eng;
	for (int i = 0; i < HS_MAX_CONNS; i++) {
		s->conns[i].srv = s;
		s->conns[i].fd = -1;
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->tp_lock, NULL);
	mc_cond_init_mono(&s->done_cv);
	return s;
}

static void hs_free(struct te_hs_server *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->tp_lock);
	pthread_cond_destroy(&s->done_cv);
	free(s);
}

int te__rpc_start(struct te_engine *eng, int port, char *err, size_t errlen)
{
	const char *los = getenv("MC_MIN_RPC_PORT");
	const char *his = getenv("MC_MAX_RPC_PORT");
	int lo = 15000, hi = 17000;
	unsigned seed = (unsigned)(mc_mono_ns() ^ (uint64_t)getpid());
	int rc = -EADDRINUSE;

	if (port > 0) {
		rc = mc_net_listen(eng->ip, port, 128, 0, &eng->rpc_fd,
				   &eng->rpc_port);
	} else {
		/* A bad range is refused, never silently the default. */
		if (mc_parse_port_range(los, his, &lo, &hi)) {
			snprintf(err, errlen,
				 "MC_MIN_RPC_PORT='%s', MC_MAX_RPC_PORT='%s': "
				 "expected ports 1..65535, the minimum not "
				 "above the maximum",
				 los ? los : "", his ? his : "");
			return -EINVAL;
		}
		/* Upstream picks a random free port in the range. */
		for (int i = 0; i < 500 && rc == -EADDRINUSE; i++) {
			int p = lo +
				(int)(rand_r(&seed) % (unsigned)(hi - lo + 1));
			rc = mc_net_listen(eng->ip, p, 128, 0, &eng->rpc_fd,
					   &eng->rpc_port);
		}
	}
	if (rc) {
		snprintf(err, errlen,
			 "transfer engine: cannot listen on %s "
			 "(RPC port %d): %s",
			 eng->ip, port, mc_strerror(rc));
		return rc;
	}
	/* "[v6]:port" for an IPv6 ip: with P2PHANDSHAKE this is the name
	 * peers address us by, so it must parse back (mc_parse_hostport). */
	(void)mc_fmt_hostport(eng->rpc_address, sizeof(eng->rpc_address),
			      eng->ip, eng->rpc_port);
	eng->hs = hs_new(eng);
	rc = eng->hs ? pthread_create(&eng->rpc_thread, NULL, rpc_thread, eng) :
		       ENOMEM;
	if (rc) {
		hs_free(eng->hs);
		eng->hs = NULL;
		close(eng->rpc_fd);
		eng->rpc_fd = -1;
		return -rc;
	}
	return 0;
}

void te__rpc_stop(struct te_engine *eng)
{
	if (eng->rpc_fd < 0)
		return;
	atomic_store(&eng->stopping, true);
	shutdown(eng->rpc_fd, SHUT_RD); /* wakes the thread's poll now */
	pthread_join(eng->rpc_thread, NULL); /* and the connections' */
	hs_free(eng->hs);
	eng->hs = NULL;
	close(eng->rpc_fd);
	eng->rpc_fd = -1;
}
