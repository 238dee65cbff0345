/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Master RPC client: a mutex-guarded stack of idle connections; a caller
 * takes one (or connects), does one request/response on it, and gives it
 * back unless it failed. With a key, a new connection authenticates
 * (mc_rpc_auth.h) before it carries its first request.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mc_busy_poll.h"
#include "mc_net.h"
#include "mc_parse.h"
#include "mc_rpc_auth.h"
#include "mc_rpc_client.h"
#include "rpc_leader.h"
#include "mooncake/mc_err.h"

#define MAX_IDLE 16
#define MAX_BUSY 16

static uint64_t mono_ms(void);

struct mc_rpc_client {
	char host[256]; /* under lock when leader is set */
	int port;
	struct mc_rpc_leader *leader; /* etcd:// address: HA masters */
	_Atomic unsigned timeout_ms;
	atomic_uint_fast64_t next_id;
	pthread_mutex_t lock;
	int idle[MAX_IDLE];
	unsigned idle_tmo[MAX_IDLE]; /* the timeout set on each idle socket */
	unsigned n_idle;
	/* Connections in a call (up to MAX_BUSY tracked), which
	 * mc_rpc_client_abort() shuts down; aborted: calls refused. */
	int busy[MAX_BUSY];
	unsigned n_busy;
	atomic_bool aborted;
	unsigned connect_ms; /* 0: timeout_ms */
	struct mc_busy_poll bp; /* waiting for answers */
	bool has_key; /* set before the first call */
	struct mc_auth_key key;
	/* Not HA, with restart_ms: a master this client reached once and
	 * that now refuses connections is restarting; calls wait for it up
	 * to restart_ms (each), and once one waited in vain calls fail at
	 * once (down) until a connection is made again. */
	_Atomic unsigned restart_ms;
	atomic_bool reached, down;
};

int mc_rpc_client_create(const char *hostport, unsigned timeout_ms,
			 struct mc_rpc_client **out)
{
	struct mc_rpc_client *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	rc = mc_rpc_leader_is(hostport) ?
		     mc_rpc_leader_create(hostport, &c->leader) :
		     mc_parse_hostport(hostport, c->host, sizeof(c->host),
				       50051, &c->port);
	if (rc) {
		free(c);
		return rc;
	}
	c->timeout_ms = timeout_ms ? timeout_ms : 5000;
	atomic_init(&c->next_id, 1);
	if (c->leader) {
		/* Ids unique across clients: a retried request is known by
		 * its id on another master. */
		uint64_t seed = 0;

		if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
			seed = (uint64_t)mono_ms() * 2654435761u ^
			       (uint64_t)getpid() << 32;
		atomic_init(&c->next_id, seed | 1);
	}
	mc_busy_poll_init(&c->bp, MC_RPC_BUSY_POLL_US);
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

void mc_rpc_client_reset(struct mc_rpc_client *c)
{
	pthread_mutex_lock(&c->lock);
	while (c->n_idle)
		close(c->idle[--c->n_idle]);
	pthread_mutex_unlock(&c->lock);
}

void mc_rpc_client_abort(struct mc_rpc_client *c)
{
	pthread_mutex_lock(&c->lock);
	atomic_store(&c->aborted, true);
	for (unsigned i = 0; i < c->n_busy; i++)
		shutdown(c->busy[i], SHUT_RDWR);
	while (c->n_idle)
		close(c->idle[--c->n_idle]);
	pthread_mutex_unlock(&c->lock);
}

void mc_rpc_client_destroy(struct mc_rpc_client *c)
{
	if (!c)
		return;
	mc_rpc_client_reset(c);
	mc_rpc_leader_destroy(c->leader);
	pthread_mutex_destroy(&c->lock);
	mc_auth_key_clear(&c->key);
	free(c);
}

void mc_rpc_client_set_restart_wait(struct mc_rpc_client *c, unsigned ms)
{
	atomic_store(&c->restart_ms, ms);
}

void mc_rpc_client_set_timeout(struct mc_rpc_client *c, unsigned timeout_ms)
{
	if (timeout_ms)
		c->timeout_ms = timeout_ms;
}

unsigned mc_rpc_client_timeout(const struct mc_rpc_client *c)
{
	return c->timeout_ms;
}

void mc_rpc_client_set_connect_timeout(struct mc_rpc_client *c,
				       unsigned connect_ms)
{
	c->connect_ms = connect_ms;
}

void mc_rpc_client_set_busy_poll(struct mc_rpc_client *c, unsigned max_us)
{
	mc_busy_poll_init(&c->bp, max_us);
}

void mc_rpc_client_set_auth(struct mc_rpc_client *c,
			    const struct mc_auth_key *key)
{
	c->has_key = key != NULL;
	if (key)
		c->key = *key;
	else
		mc_auth_key_clear(&c->key);
}

/* Authenticate a new connection; its timeouts are set here. */
static int authenticate(struct mc_rpc_client *c, int fd, unsigned *tmo)
{
	int rc = mc_net_set_timeouts(fd, (int)c->timeout_ms);

	if (rc)
		return rc;
	*tmo = c->timeout_ms;
	return mc_rpc_auth_client(fd, &c->key);
}

/* Track fd as in a call (c->lock held). */
static void track(struct mc_rpc_client *c, int fd)
{
	if (c->n_busy < MAX_BUSY)
		c->busy[c->n_busy++] = fd;
}

/* fd is no longer in a call (c->lock held). */
static void untrack(struct mc_rpc_client *c, int fd)
{
	for (unsigned i = 0; i < c->n_busy; i++)
		if (c->busy[i] == fd) {
			c->busy[i] = c->busy[--c->n_busy];
			return;
		}
}

/* Close a connection taken for a call. */
static void drop(struct mc_rpc_client *c, int fd)
{
	pthread_mutex_lock(&c->lock);
	untrack(c, fd);
	pthread_mutex_unlock(&c->lock);
	close(fd);
}

/* A pooled connection (unless fresh), or a new one. */
static int take(struct mc_rpc_client *c, bool fresh, int *fd, unsigned *tmo,
		bool *pooled)
{
	char host[sizeof(c->host)];
	int rc, port;

	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->aborted)) {
		pthread_mutex_unlock(&c->lock);
		return -ECANCELED;
	}
	if (c->n_idle && !fresh) {
		c->n_idle--;
		*fd = c->idle[c->n_idle];
		*tmo = c->idle_tmo[c->n_idle];
		track(c, *fd);
		pthread_mutex_unlock(&c->lock);
		*pooled = true;
		return 0;
	}
	memcpy(host, c->host, sizeof(host));
	port = c->port;
	pthread_mutex_unlock(&c->lock);
	*pooled = false;
	*tmo = 0;
	if (!port)
		return -EAGAIN; /* HA: no leader known */
	rc = mc_net_connect(
		host, port,
		(int)(c->connect_ms ? c->connect_ms : c->timeout_ms), fd);
	if (rc)
		return rc;
	(void)mc_net_set_nodelay(*fd);
	atomic_store(&c->reached, true);
	atomic_store(&c->down, false);
	pthread_mutex_lock(&c->lock);
	rc = atomic_load(&c->aborted) ? -ECANCELED : 0;
	if (!rc)
		track(c, *fd);
	pthread_mutex_unlock(&c->lock);
	if (!rc && c->has_key)
		rc = authenticate(c, *fd, tmo);
	if (rc) {
		drop(c, *fd);
		return rc;
	}
	return 0;
}

static void give(struct mc_rpc_client *c, int fd, unsigned tmo)
{
	pthread_mutex_lock(&c->lock);
	untrack(c, fd);
	if (!atomic_load(&c->aborted) && c->n_idle < MAX_IDLE) {
		c->idle_tmo[c->n_idle] = tmo;
		c->idle[c->n_idle++] = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&c->lock);
	if (fd >= 0)
		close(fd);
}

static int timeout_errno(int rc)
{
	return rc == -EAGAIN || rc == -EWOULDBLOCK ? -ETIMEDOUT : rc;
}

/* One exchange on fd; *sent tells whether the request left entirely. */
static int exchange(struct mc_rpc_client *c, int fd, unsigned *tmo,
		    const uint8_t *frame, size_t len, uint16_t method,
		    uint64_t id, const ProtobufCMessageDescriptor *rd,
		    ProtobufCMessage **resp, bool *got_any)
{
	/* The header and, for most answers (a batch of 16 keys' replica
	 * lists is about 2 KiB), the whole body in one read. */
	uint8_t in[MC_RPC_HDR_LEN + 4096];
	struct mc_rpc_hdr h;
	uint8_t *body;
	unsigned want = c->timeout_ms;
	size_t got, early;
	int rc;

	*got_any = false;
	if (*tmo != want) { /* two syscalls: only when it changes */
		rc = mc_net_set_timeouts(fd, (int)want);
		if (rc)
			return rc;
		*tmo = want;
	}
	rc = mc_net_write_all(fd, frame, len);
	if (rc)
		return timeout_errno(rc);
	/* Without spinning the socket's receive timeout bounds the read
	 * itself: no poll(2) first. */
	if (c->bp.max_us) {
		rc = mc_busy_poll_wait(&c->bp, fd, (int)want);
		if (rc)
			return rc;
	}
	rc = mc_net_read_some(fd, in, MC_RPC_HDR_LEN, sizeof(in), &got);
	if (rc)
		return timeout_errno(rc);
	*got_any = true;
	rc = mc_rpc_hdr_decode(in, MC_RPC_MAX_BODY, &h);
	if (rc)
		return -EPROTO;
	if (h.kind != MC_RPC_RESPONSE || h.req_id != id || h.method != method)
		return -EPROTO;
	if (h.flags & MC_RPC_FLAG_AUTH_REQUIRED)
		return c->has_key ? MC_EAUTHFAILED : MC_EAUTHREQUIRED;
	/* One call at a time on a connection: nothing follows the answer. */
	early = got - MC_RPC_HDR_LEN;
	if (early > h.length)
		return -EPROTO;
	body = malloc(h.length ? h.length : 1);
	if (!body)
		return -ENOMEM;
	if (early)
		memcpy(body, in + MC_RPC_HDR_LEN, early);
	rc = mc_net_read_all(fd, body + early, h.length - early);
	if (rc) {
		free(body);
		return timeout_errno(rc);
	}
	*resp = mc_rpc_unpack(rd, body, h.length);
	free(body);
	return *resp ? 0 : -EPROTO;
}

/* One call on the current master: the request on a pooled connection,
 * or on a new one when the pooled one turns out stale. */
static int call_once(struct mc_rpc_client *c, const struct mc_rpc_method *m,
		     uint16_t method, uint64_t id, const uint8_t *frame,
		     size_t len, ProtobufCMessage **resp)
{
	int rc = 0;

	for (int attempt = 0; attempt < 2; attempt++) {
		bool pooled, got_any;
		unsigned tmo;
		int fd;

		rc = take(c, attempt > 0, &fd, &tmo, &pooled);
		if (rc)
			break;
		rc = exchange(c, fd, &tmo, frame, len, method, id, m->resp,
			      resp, &got_any);
		if (!rc) {
			give(c, fd, tmo);
			break;
		}
		drop(c, fd);
		/* A stale pooled connection (the master restarted, or
		 * closed it idle or to make room): no answer came, the
		 * request was not handled; send it on a new connection. */
		if (!(pooled && !got_any &&
		      (rc == -ECONNRESET || rc == -EPIPE)))
			break;
	}
	return rc;
}

/* Not HA: whether to send a call refused with rc again (the master was
 * reached before and is not known down; *until: the end of this call's
 * wait, 0 before its first). */
static bool restarting(struct mc_rpc_client *c, int rc, uint64_t *until)
{
	unsigned wait = atomic_load(&c->timeout_ms),
		 most = atomic_load(&c->restart_ms);

	if (rc != -ECONNREFUSED || !most || !atomic_load(&c->reached) ||
	    atomic_load(&c->down) || atomic_load(&c->aborted))
		return false;
	if (!*until)
		*until = mono_ms() + (wait < most ? wait : most);
	if (mono_ms() < *until)
		return true;
	atomic_store(&c->down, true);
	return false;
}

/* HA: what sends a call to look for the leader again. A master that
 * stopped leading answers UNAVAILABLE_IN_CURRENT_MODE; one that could not
 * write its op log, ETCD_OPERATION_ERROR (the change was not made). */
static bool leader_gone(int rc, ProtobufCMessage *resp)
{
	if (!rc) {
		int32_t code = mc_rpc_resp_code(resp);

		return code == MC_STORE_UNAVAILABLE_IN_CURRENT_MODE ||
		       code == MC_STORE_ETCD_OPERATION_ERROR;
	}
	switch (rc) {
	case -EAGAIN:
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -ECONNABORTED:
	case -EPIPE:
	case -ETIMEDOUT:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -EHOSTDOWN:
		return true;
	default:
		return false;
	}
}

/* Point c at the leader etcd names now (closing connections to another). */
static int follow_leader(struct mc_rpc_client *c, bool refresh)
{
	char host[sizeof(c->host)];
	int port = 0, rc;

	rc = mc_rpc_leader_get(c->leader, refresh, host, sizeof(host), &port);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	if (port != c->port || strcmp(host, c->host)) {
		memcpy(c->host, host, sizeof(c->host));
		c->port = port;
		while (c->n_idle)
			close(c->idle[--c->n_idle]);
	}
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static void nap_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int mc_rpc_call(struct mc_rpc_client *c, uint16_t method,
		const ProtobufCMessage *req, ProtobufCMessage **resp)
{
	const struct mc_rpc_method *m = mc_rpc_method(method);
	struct mc_rpc_hdr h = { .version = MC_RPC_VERSION,
				.kind = MC_RPC_REQUEST,
				.method = method };
	uint64_t until = 0;
	uint8_t *frame;
	size_t len;
	int rc;

	*resp = NULL;
	if (!m || req->descriptor != m->req)
		return -EINVAL;
	h.req_id = atomic_fetch_add(&c->next_id, 1);
	if (c->leader)
		h.flags = MC_RPC_FLAG_OPID;
	rc = mc_rpc_pack_frame(&h, req, &frame, &len);
	if (rc)
		return rc;
	if (c->leader)
		(void)follow_leader(c, false);
	for (;;) {
		rc = call_once(c, m, method, h.req_id, frame, len, resp);
		if (!c->leader) {
			/* A refused connection carried nothing: the same
			 * request again while the master restarts. */
			if (!restarting(c, rc, &until))
				break;
			nap_ms(50);
			continue;
		}
		if (!leader_gone(rc, *resp))
			break;
		if (atomic_load(&c->aborted)) { /* not a leader gone: us */
			rc = -ECANCELED;
			break;
		}
		/* The same request again, on whoever leads now, until the
		 * failover window closes. */
		if (!until)
			until = mono_ms() + mc_rpc_leader_wait_ms(c->leader);
		if (mono_ms() >= until)
			break;
		if (*resp) {
			protobuf_c_message_free_unpacked(*resp, NULL);
			*resp = NULL;
		}
		nap_ms(100);
		(void)follow_leader(c, true);
		if (!(h.flags & MC_RPC_FLAG_RETRY)) {
			h.flags |= MC_RPC_FLAG_RETRY;
			h.length = (uint32_t)(len - MC_RPC_HDR_LEN);
			mc_rpc_hdr_encode(&h, frame);
		}
	}
	free(frame);
	/* HA: no leader was found in the window. */
	return c->leader && rc == -EAGAIN ? MC_ENOLEADER : rc;
}
