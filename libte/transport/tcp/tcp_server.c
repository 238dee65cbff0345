/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP server: peers' requests go straight between the socket and our
 * registered memory (no bounce buffer). Every request is checked against
 * the registration table first; a range outside remote-accessible memory
 * is refused without touching memory (version 2: status code 1 and the
 * connection goes on; version 1: the connection is closed, as upstream).
 * With the pool's key, a connection carries requests only after it
 * authenticated (tcp_auth.c); a READ or WRITE before that closes it.
 *
 * Threads: one accept thread, one thread per served connection (peers
 * keep a few persistent lanes each). reg_lock is held for reading while a
 * request's bytes move, so te_unregister() waits for them; each data
 * phase is bounded by the engine's request timeout.
 *
 * A fence (te_fence_inbound) first has the accept thread close its
 * listener and listen on the same port with a new socket: connections
 * not accepted yet are reset, and handshakes not finished yet (a peer's
 * ACK held up in the network) find no listener that knows them. Then it
 * marks every connection there is and shuts it down; a marked
 * connection's thread starts no request more (what one in progress reads
 * from the socket still lands) and ends, and the fence returns once all
 * of them have: bytes a peer sent before it that are still in the
 * network meet a closed socket.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mc_busy_poll.h"
#include "mc_log.h"
#include "mc_net.h"
#include "mc_ratelimit.h"
#include "mc_time.h"
#include "tcp_int.h"
#include "mooncake/mc_err.h"

/* A rejected WRITE's payload is read and dropped up to this size, so the
 * connection stays usable; beyond it the connection is closed. */
#define DRAIN_MAX (64u << 20)

struct tcp_conn {
	struct tcp_conn *next, *prev;
	struct tcp_transport *t;
	int fd;
	struct mc_busy_poll bp; /* waiting for the next request */
	struct tcp_rx rx; /* its requests, once authenticated */
	pthread_t thread;
	struct tcp_gpu_bounce *gpu; /* for requests of our GPU memory */
	_Atomic bool fenced; /* serves nothing more (set under conns_lock) */
	_Atomic bool authed; /* authenticated (or no key): never evicted */
	bool evicted; /* shut down for a newcomer (conns_lock) */
	uint64_t since_ms; /* accepted */
};

static int drain(struct tcp_rx *rx, uint64_t len, uint64_t deadline)
{
	char buf[65536];

	while (len) {
		size_t n = len < sizeof(buf) ? (size_t)len : sizeof(buf);
		int rc = tcp_rx_read(rx, buf, n, deadline);
		if (rc)
			return rc;
		len -= n;
	}
	return 0;
}

/* Serve one request; a negative return closes the connection. */
static int serve_request(struct tcp_transport *t, struct tcp_conn *c,
			 struct tcp_rx *rx, const struct tcp_hdr *h)
{
	struct te_engine *eng = t->base.eng;
	uint64_t deadline = mc_mono_ns() + eng->timeout_ms * 1000000ULL;
	void *mem = (void *)(uintptr_t)h->addr;
	uint8_t st[TCP_STATUS_LEN];
	struct te_memreg *r = NULL;
	int rc = 0, fd = c->fd;
	bool ok;

	pthread_rwlock_rdlock(&eng->reg_lock);
	if (h->size)
		r = te__reg_find_remote(eng, h->addr, h->size);
	ok = h->size == 0 || r;
	if (ok && r && r->gpu) {
		rc = tcp_gpu_serve(&c->gpu, rx, h, r->gpu - 1, deadline);
	} else if (ok && h->op == TCP_OP_READ) {
		tcp_status_encode(TCP_STATUS_OK, st);
		rc = tcp_io_send2(fd, st, h->v2 ? sizeof(st) : 0, mem, h->size,
				  deadline);
	} else if (ok) {
		rc = tcp_rx_read(rx, mem, h->size, deadline);
	}
	pthread_rwlock_unlock(&eng->reg_lock);
	if (rc)
		return rc;
	if (ok) {
		atomic_fetch_add(&t->base.served_bytes, h->size);
		if (h->op == TCP_OP_WRITE && h->v2) {
			tcp_status_encode(TCP_STATUS_OK, st);
			rc = tcp_io_send(fd, st, sizeof(st), deadline);
		}
		return rc;
	}
	mc_log_debug("te", "tcp: refused %s of %llu bytes at 0x%llx",
		     h->op == TCP_OP_READ ? "READ" : "WRITE",
		     (unsigned long long)h->size, (unsigned long long)h->addr);
	if (!h->v2)
		return -EACCES;
	if (h->op == TCP_OP_WRITE) {
		if (h->size > DRAIN_MAX)
			return -EACCES;
		rc = drain(rx, h->size, deadline);
		if (rc)
			return rc;
	}
	tcp_status_encode(TCP_STATUS_REJECTED, st);
	return tcp_io_send(fd, st, sizeof(st), deadline);
}

/* Log a refused connection, at most once per 10 s. */
static void log_refused(int fd, const char *why)
{
	static struct mc_ratelimit rl;
	unsigned dropped;
	char peer[64];

	if (!mc_ratelimit_ok(&rl, 10000, &dropped))
		return;
	mc_net_peer_name(fd, peer, sizeof(peer));
	mc_log_warn("te", "tcp: refused data connection from %s: %s (%u more)",
		    peer, why, dropped);
}

/*
 * A request on a connection that has not authenticated while we hold the
 * key: version 2 learns why, then the connection closes either way.
 */
static void refuse_unauthenticated(struct tcp_transport *t, int fd,
				   const struct tcp_hdr *h)
{
	uint64_t deadline = mc_mono_ns() + t->base.eng->timeout_ms * 1000000ULL;
	uint8_t st[TCP_STATUS_LEN];

	log_refused(fd, "not authenticated");
	if (!h->v2)
		return;
	tcp_status_encode(TCP_STATUS_AUTH_REQUIRED, st);
	(void)tcp_io_send(fd, st, sizeof(st), deadline);
}

/*
 * Answers to READs of plain registered memory gathered while the next
 * request is already buffered: a batch of small gets is answered with
 * one write (and reg_lock taken once), not one per request.
 */
#define BATCH_MAX 64
#define BATCH_BYTES (4u << 20)

struct reply_batch {
	struct iovec iov[2 * BATCH_MAX];
	int cnt;
	unsigned n;
	uint64_t bytes;
	bool locked; /* reg_lock held for reading */
	uint8_t ok[TCP_STATUS_LEN]; /* the status of every answer */
};

static int batch_flush(struct tcp_transport *t, struct tcp_conn *c,
		       struct reply_batch *b)
{
	uint64_t deadline = mc_mono_ns() + t->base.eng->timeout_ms * 1000000ULL;
	int rc = b->cnt ? tcp_io_sendv(c->fd, b->iov, b->cnt, deadline) : 0;

	if (b->locked)
		pthread_rwlock_unlock(&t->base.eng->reg_lock);
	if (!rc)
		atomic_fetch_add(&t->base.served_bytes, b->bytes);
	b->cnt = 0;
	b->n = 0;
	b->bytes = 0;
	b->locked = false;
	return rc;
}

/* Add h's answer to the batch when it is a READ of plain (not GPU)
 * registered memory that fits; false: the caller flushes and serves h
 * on its own. */
static bool batch_add(struct tcp_transport *t, struct reply_batch *b,
		      const struct tcp_hdr *h)
{
	struct te_engine *eng = t->base.eng;
	struct te_memreg *r;

	if (h->op != TCP_OP_READ || !h->size || b->n == BATCH_MAX ||
	    h->size > BATCH_BYTES - b->bytes)
		return false;
	if (!b->locked) {
		pthread_rwlock_rdlock(&eng->reg_lock);
		b->locked = true;
	}
	r = te__reg_find_remote(eng, h->addr, h->size);
	if (!r || r->gpu)
		return false;
	if (h->v2)
		b->iov[b->cnt++] = (struct iovec){ b->ok, TCP_STATUS_LEN };
	b->iov[b->cnt++] =
		(struct iovec){ (void *)(uintptr_t)h->addr, h->size };
	b->n++;
	b->bytes += h->size;
	return true;
}

static void *serve_conn(void *arg)
{
	struct tcp_conn *c = arg;
	struct tcp_transport *t = c->t;
	const struct mc_auth_key *key = t->base.eng->auth;
	uint64_t timeout_ns = t->base.eng->timeout_ms * 1000000ULL;
	bool authed = key == NULL;
	struct reply_batch *b = calloc(1, sizeof(*b));

	atomic_store(&c->authed, authed);
	uint8_t raw[TCP_HDR_LEN];
	struct tcp_hdr h;
	int rc;

	c->rx.fd = c->fd;
	c->rx.bp = c->bp.max_us ? &c->bp : NULL;
	if (b)
		tcp_status_encode(TCP_STATUS_OK, b->ok);
	while (b && !atomic_load(&t->stopping)) {
		/* Answer what was gathered before waiting for more. */
		if (tcp_rx_buffered(&c->rx) < TCP_HDR_LEN && b->n &&
		    batch_flush(t, c, b))
			break;
		/* Idle connections wait here until data or shutdown (a
		 * client's next request often follows at once: the rx
		 * polls briefly before sleeping, mc_busy_poll.h); one that
		 * has yet to authenticate, only for the timeout, and
		 * unbuffered: the authentication reads the socket. */
		if (authed ? tcp_rx_read(&c->rx, raw, sizeof(raw), 0) :
			     tcp_io_recv(c->fd, raw, sizeof(raw),
					 mc_mono_ns() + timeout_ns))
			break;
		if (tcp_hdr_decode(raw, &h))
			break;
		if (h.op == TCP_OP_AUTH) {
			if (key && authed)
				break; /* once per connection */
			rc = tcp_auth_server(c->fd, key, &h,
					     mc_mono_ns() + timeout_ns);
			if (rc) {
				if (rc == MC_EAUTHFAILED)
					log_refused(c->fd,
						    "wrong authentication "
						    "proof");
				break;
			}
			authed = true;
			atomic_store(&c->authed, true);
			continue;
		}
		if (!authed) {
			refuse_unauthenticated(t, c->fd, &h);
			break;
		}
		if (atomic_load(&c->fenced))
			break;
		if (batch_add(t, b, &h))
			continue;
		if (batch_flush(t, c, b) || serve_request(t, c, &c->rx, &h))
			break;
	}
	if (b && b->locked)
		pthread_rwlock_unlock(&t->base.eng->reg_lock);
	free(b);
	pthread_mutex_lock(&t->conns_lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		t->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	close(c->fd);
	tcp_gpu_bounce_free(c->gpu);
	free(c);
	atomic_fetch_sub(&t->n_conns, 1);
	pthread_cond_broadcast(&t->conns_cond);
	pthread_mutex_unlock(&t->conns_lock);
	return NULL;
}

/* A fence's new listener (accept thread): the same port, else, asked by
 * a fence (relisten 1), any (relisten_rc 1: the fence's caller publishes
 * our descriptor again); after a failure the accept loop asks again for
 * the same port (relisten 2). */
static void relisten(struct tcp_transport *t)
{
	bool may_move = atomic_load(&t->relisten) == 1;
	struct te_engine *eng = t->base.eng;
	int fd = -1, port = 0, rc;

	if (t->listen_fd >= 0)
		close(t->listen_fd);
	rc = mc_net_listen(eng->ip, atomic_load(&t->data_port), 128, 1, &fd,
			   &port);
	if (rc && may_move) {
		mc_log_warn("te",
			    "tcp: cannot listen on port %d again after a "
			    "fence (%s): taking another",
			    atomic_load(&t->data_port), mc_strerror(rc));
		rc = mc_net_listen(eng->ip, 0, 128, 1, &fd, &port);
		rc = rc ? rc : 1;
	}
	t->listen_fd = fd; /* -1: none (accept_loop tries again) */
	if (fd >= 0)
		atomic_store(&t->data_port, port);
	pthread_mutex_lock(&t->conns_lock);
	t->relisten_rc = rc;
	atomic_store(&t->relisten, 0);
	pthread_cond_broadcast(&t->conns_cond);
	pthread_mutex_unlock(&t->conns_lock);
}

/*
 * Connections served at once: MC_TCP_MAX_CONNS, else 4096, and at most
 * half the descriptor limit (each is a thread and a descriptor; peers
 * use a few lanes each). Past it a newcomer shuts down the oldest
 * connection that has not authenticated (with a key; they have the
 * transfer timeout to do so), else it is refused: connections without
 * the token held a thread and a descriptor each, unbounded (10,000 took
 * a member to its descriptor limit).
 */
static int max_conns(void)
{
	const char *v = getenv("MC_TCP_MAX_CONNS");
	struct rlimit rl;
	long n = v && *v ? strtol(v, NULL, 10) : 4096;

	if (n < 16)
		n = 16;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)n > rl.rlim_cur / 2)
		n = rl.rlim_cur / 2 > 16 ? (long)(rl.rlim_cur / 2) : 16;
	return (int)n;
}

/* Room for one more connection (conns_lock held): true, possibly after
 * shutting down the oldest unauthenticated one; false: refuse it. */
static bool make_room(struct tcp_transport *t, int limit)
{
	static struct mc_ratelimit rl;
	struct tcp_conn *old = NULL;
	unsigned dropped;
	int live = 0;

	for (struct tcp_conn *c = t->conns; c; c = c->next) {
		if (c->evicted)
			continue;
		live++;
		if (!atomic_load(&c->authed) &&
		    (!old || c->since_ms < old->since_ms))
			old = c;
	}
	if (live < limit)
		return true;
	if (old) {
		/* Its thread wakes, ends and closes it (under conns_lock,
		 * held here: the number is still its own). */
		old->evicted = true;
		(void)shutdown(old->fd, SHUT_RDWR);
	}
	if (mc_ratelimit_ok(&rl, 10000, &dropped))
		mc_log_warn("te",
			    "tcp: %d data connections at once (MC_TCP_MAX_CONNS"
			    "): %s (%u more in the last 10 s)",
			    limit,
			    old ? "closed the oldest unauthenticated one" :
				  "refused a new one",
			    dropped);
	return old != NULL;
}

static void *accept_loop(void *arg)
{
	struct tcp_transport *t = arg;

	while (!atomic_load(&t->stopping)) {
		struct pollfd p = { .fd = t->listen_fd, .events = POLLIN };
		struct tcp_conn *c;
		pthread_attr_t attr;
		int fd;

		if (atomic_load(&t->relisten)) {
			relisten(t);
			continue;
		}
		if (t->listen_fd < 0) {
			/* A fence's new listener failed: try again. */
			usleep(200000);
			atomic_store(&t->relisten, 2);
			continue;
		}
		if (poll(&p, 1, 200) <= 0)
			continue;
		fd = accept4(t->listen_fd, NULL, NULL,
			     SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			continue;
		mc_net_set_nodelay(fd);
		/* A peer host that died leaves the connection open, and its
		 * thread, for good: probed after 30 s idle. */
		(void)mc_net_set_keepalive(fd);
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->t = t;
		c->fd = fd;
		c->since_ms = mc_mono_ms();
		mc_busy_poll_init(&c->bp, t->busy_poll_us);
		pthread_mutex_lock(&t->conns_lock);
		if (!make_room(t, max_conns())) {
			pthread_mutex_unlock(&t->conns_lock);
			close(fd);
			free(c);
			continue;
		}
		c->next = t->conns;
		if (t->conns)
			t->conns->prev = c;
		t->conns = c;
		atomic_fetch_add(&t->n_conns, 1);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&c->thread, &attr, serve_conn, c)) {
			t->conns = c->next;
			if (c->next)
				c->next->prev = NULL;
			atomic_fetch_sub(&t->n_conns, 1);
			close(fd);
			free(c);
		}
		pthread_attr_destroy(&attr);
		pthread_mutex_unlock(&t->conns_lock);
	}
	return NULL;
}

int tcp_server_start(struct tcp_transport *t, char *err, size_t errlen)
{
	struct te_engine *eng = t->base.eng;
	int rc, port = 0;

	rc = mc_net_listen(eng->ip, 0, 128, 1, &t->listen_fd, &port);
	atomic_store(&t->data_port, port);
	if (rc) {
		snprintf(err, errlen, "tcp transport: cannot listen on %s: %s",
			 eng->ip, mc_strerror(rc));
		return rc;
	}
	rc = pthread_create(&t->accept_thread, NULL, accept_loop, t);
	if (rc) {
		close(t->listen_fd);
		return -rc;
	}
	return 0;
}

static bool any_fenced(const struct tcp_transport *t)
{
	for (const struct tcp_conn *c = t->conns; c; c = c->next)
		if (atomic_load(&c->fenced))
			return true;
	return false;
}

/* Wait on conns_cond (conns_lock held) for at most 10 ms; false once
 * deadline_ns has passed. */
static bool wait_a_little(struct tcp_transport *t, uint64_t deadline_ns)
{
	struct timespec ts;

	if (mc_mono_ns() >= deadline_ns)
		return false;
	ts = mc_mono_deadline(10);
	pthread_cond_timedwait(&t->conns_cond, &t->conns_lock, &ts);
	return true;
}

int tcp_server_fence(struct tcp_transport *t, uint64_t deadline_ns)
{
	unsigned n = 0;
	int rc = 0, lrc;

	pthread_mutex_lock(&t->conns_lock);
	/* A new listener first (the accept thread's poll wakes up on the
	 * shut-down one); conns_cond is broadcast once it is there. */
	atomic_store(&t->relisten, 1);
	shutdown(t->listen_fd, SHUT_RD);
	while (atomic_load(&t->relisten))
		if (!wait_a_little(t, deadline_ns + 1000000000ULL))
			break;
	lrc = atomic_load(&t->relisten) ? -ETIMEDOUT : t->relisten_rc;
	/* Then every connection from before it. */
	for (struct tcp_conn *c = t->conns; c; c = c->next) {
		if (!atomic_exchange(&c->fenced, true)) {
			shutdown(c->fd, SHUT_RDWR);
			n++;
		}
	}
	/* conns_cond is broadcast as each connection's thread ends. */
	while (any_fenced(t)) {
		if (!wait_a_little(t, deadline_ns)) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&t->conns_lock);
	if (lrc < 0)
		mc_log_err("te", "tcp: no listener after a fence: %s",
			   mc_strerror(lrc));
	if (lrc < 0 && !rc)
		rc = lrc;
	if (!rc && lrc == 1)
		rc = 1; /* another port: our descriptor changed */
	if (n)
		mc_log_info("te",
			    "tcp: ended %u connection%s peers opened "
			    "before the fence%s",
			    n, n == 1 ? "" : "s",
			    rc ? " (some still inside a request)" : "");
	return rc;
}

void tcp_server_stop(struct tcp_transport *t)
{
	atomic_store(&t->stopping, true);
	/* Wake the accept thread's poll now rather than at its next
	 * timeout. listen_fd changes only in relisten(), which a fence
	 * starts under conns_lock and which ends with relisten at 0. */
	pthread_mutex_lock(&t->conns_lock);
	if (!atomic_load(&t->relisten) && t->listen_fd >= 0)
		shutdown(t->listen_fd, SHUT_RD);
	pthread_mutex_unlock(&t->conns_lock);
	pthread_join(t->accept_thread, NULL);
	close(t->listen_fd);
	pthread_mutex_lock(&t->conns_lock);
	for (struct tcp_conn *c = t->conns; c; c = c->next)
		shutdown(c->fd, SHUT_RDWR);
	while (atomic_load(&t->n_conns))
		pthread_cond_wait(&t->conns_cond, &t->conns_lock);
	pthread_mutex_unlock(&t->conns_lock);
}
