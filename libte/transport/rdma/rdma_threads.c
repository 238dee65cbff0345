/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rdma transport's threads: one poller per NIC, which reaps the
 * NIC's completion queue, posts what waited for room in it and sweeps
 * deadlines; and one connector, which brings new active endpoints up
 * through the Connection handshake so that submit never waits on the
 * network. Polling is adaptive: after a completion the poller keeps
 * polling for MC_RDMA_SPIN_US, then arms the CQ and sleeps on its channel
 * (100 ms at most, to sweep deadlines), so an idle engine costs no CPU.
 * The poller also reads the device's asynchronous events (its port going
 * down and up): a NIC whose port is down takes no new slices.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>

#include "mc_log.h"
#include "mc_time.h"
#include "rdma_int.h"
#include "mooncake/mc_err.h"

#define POLL_BATCH 32
#define SLEEP_MS 100
#define PROBE_TIMEOUT_MS 1000

/* Wait for the CQ's event (armed first) or the device's, SLEEP_MS at
 * most: true when the device has one. */
static bool sleep_on_cq(struct rdma_ctx *c)
{
	/* A failed device's event file may stay readable: not polled. */
	struct pollfd p[2] = { { .fd = c->ch->fd, .events = POLLIN },
			       { .fd = c->fatal ? -1 : c->ctx->async_fd,
				 .events = POLLIN } };
	struct ibv_cq *cq;
	void *cq_ctx;

	if (poll(p, 2, SLEEP_MS) <= 0)
		return false;
	if ((p[0].revents & POLLIN) && !ibv_get_cq_event(c->ch, &cq, &cq_ctx))
		ibv_ack_cq_events(cq, 1);
	return p[1].revents & POLLIN;
}

/* References to c's endpoints (taken under eps_lock, for work outside
 * it): an array to free, NULL with *n 0 when there are none or no
 * memory (*cap: how many there were). */
static struct rdma_ep **take_eps(struct rdma_ctx *c, unsigned *n, unsigned *cap)
{
	struct rdma_ep **eps;

	*n = 0;
	pthread_mutex_lock(&c->eps_lock);
	*cap = c->n_eps;
	eps = *cap ? malloc(*cap * sizeof(*eps)) : NULL;
	for (unsigned i = 0; eps && i < *cap; i++)
		if (rdma_ep_tryget(c->eps[i]))
			eps[(*n)++] = c->eps[i];
	pthread_mutex_unlock(&c->eps_lock);
	return eps;
}

/* The port went down or came back (up). Down: its endpoints break, so
 * what they carry is retried on another NIC at once (or ends, when none
 * is up) instead of at the RC timeout; they are made again on next use. */
static void port_state(struct rdma_ctx *c, bool up, const char *why)
{
	struct rdma_ep **eps;
	unsigned n, cap;

	if (atomic_exchange(&c->down, !up) == !up)
		return;
	if (up) {
		/* Rails paused meanwhile serve again (rdma_path_paused). */
		atomic_store(&c->up_at, mc_mono_ms());
		mc_log_notice("te", "rdma: %s port %u is up again (%s)",
			      c->name, c->port, why);
		return;
	}
	mc_log_warn("te",
		    "rdma: %s port %u is down (%s): requests take the other "
		    "NICs, and fail at once while none is up",
		    c->name, c->port, why);
	eps = take_eps(c, &n, &cap);
	for (unsigned i = 0; i < n; i++) {
		rdma_ep_break(eps[i], -ENETDOWN);
		rdma_ep_put(eps[i]);
	}
	free(eps);
}

/* The device's asynchronous events, without waiting: its port going down
 * and coming back, the device failing. While down, the port's state is
 * also read (an event missed or merged does not keep it down). */
static void device_events(struct rdma_ctx *c)
{
	struct ibv_async_event ev;
	struct ibv_port_attr pa;

	while (!ibv_get_async_event(c->ctx, &ev)) {
		enum ibv_event_type type = ev.event_type;
		bool mine = (type == IBV_EVENT_PORT_ERR ||
			     type == IBV_EVENT_PORT_ACTIVE) &&
			    ev.element.port_num == c->port;

		ibv_ack_async_event(&ev);
		if (type == IBV_EVENT_DEVICE_FATAL) {
			c->fatal = true;
			port_state(c, false, "device fatal error");
		} else if (mine && type == IBV_EVENT_PORT_ERR) {
			port_state(c, false, "IBV_EVENT_PORT_ERR");
		} else if (mine && !c->fatal) {
			port_state(c, true, "IBV_EVENT_PORT_ACTIVE");
		} else {
			mc_log_debug("te", "rdma: %s: %s", c->name,
				     ibv_event_type_str(type));
		}
	}
	if (atomic_load(&c->down) && !c->fatal &&
	    !ibv_query_port(c->ctx, c->port, &pa) &&
	    pa.state == IBV_PORT_ACTIVE)
		port_state(c, true, "the port reads ACTIVE");
}

/* The CQ had no room for some posts: post what waits, endpoint by
 * endpoint. */
static void post_starved(struct rdma_ctx *c)
{
	unsigned n, cap;
	struct rdma_ep **eps = take_eps(c, &n, &cap);

	if (!eps) {
		atomic_store(&c->starved, cap > 0); /* try again next time */
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		bool ok;

		pthread_mutex_lock(&eps[i]->lock);
		ok = rdma_ep_post_waiting(eps[i]);
		pthread_mutex_unlock(&eps[i]->lock);
		if (!ok)
			rdma_ep_break(eps[i], -EIO);
		rdma_ep_put(eps[i]);
	}
	free(eps);
}

static void *poller_main(void *arg)
{
	struct rdma_ctx *c = arg;
	struct rdma_transport *t = c->t;
	uint64_t spin_ns = (uint64_t)t->s.spin_us * 1000ULL;
	uint64_t last_work = 0, last_sweep = mc_mono_ns();
	bool armed = false;

	while (!atomic_load(&t->stopping)) {
		struct ibv_wc wc[POLL_BATCH];
		int n = ibv_poll_cq(c->cq, POLL_BATCH, wc);
		uint64_t now = mc_mono_ns();

		for (int i = 0; i < n; i++)
			rdma_complete(c, &wc[i]);
		if (n > 0) {
			last_work = now;
			armed = false;
		}
		if (n > 0 && atomic_exchange(&c->starved, false))
			post_starved(c);
		if (now - last_sweep >= SLEEP_MS * 1000000ULL) {
			device_events(c);
			rdma_sweep_deadlines(c);
			last_sweep = now;
		}
		if (n > 0 || now - last_work < spin_ns)
			continue;
		if (!armed) {
			/* Arm, then poll once more: a completion that came
			 * before the arm raises no event. */
			ibv_req_notify_cq(c->cq, 0);
			armed = true;
			continue;
		}
		if (sleep_on_cq(c))
			device_events(c);
		armed = false;
	}
	return NULL;
}

int rdma_ctx_start(struct rdma_ctx *c)
{
	int rc = pthread_create(&c->poller, NULL, poller_main, c);

	c->poller_started = rc == 0;
	return -rc;
}

/* A connected endpoint whose requests made no progress for a while: a
 * peer whose RPC port does not answer is gone, and the endpoint breaks
 * (its requests go elsewhere or fail) instead of waiting for the NIC's
 * retries or the deadline. */
static void probe(struct rdma_transport *t, struct rdma_ep *ep)
{
	int rc = atomic_load(&t->stopping) ?
			 0 :
			 te__rpc_probe(ep->peer_ip, ep->peer_rpc_port,
				       PROBE_TIMEOUT_MS, t->base.eng->auth);

	pthread_mutex_lock(&ep->lock);
	ep->probing = false;
	ep->progress_ns = mc_mono_ns();
	pthread_mutex_unlock(&ep->lock);
	if (rc) {
		mc_log_warn("te",
			    "rdma %s -> %s: the peer does not answer "
			    "(%s); its requests go elsewhere or fail",
			    ep->local_path, ep->remote_path, mc_strerror(rc));
		rdma_ep_break(ep, -ECONNRESET);
	}
}

static void *connector_main(void *arg)
{
	struct rdma_transport *t = arg;

	pthread_mutex_lock(&t->lock);
	for (;;) {
		struct rdma_ep *ep;
		bool probing, broken;
		int rc;

		while (!t->conn_head && !atomic_load(&t->stopping))
			pthread_cond_wait(&t->conn_cond, &t->lock);
		ep = t->conn_head;
		if (!ep)
			break;
		t->conn_head = ep->conn_next;
		if (!t->conn_head)
			t->conn_tail = NULL;
		pthread_mutex_unlock(&t->lock);

		pthread_mutex_lock(&ep->lock);
		probing = ep->probing;
		broken = ep->state == EP_BROKEN;
		pthread_mutex_unlock(&ep->lock);
		if (probing || broken) { /* broken: its peer went meanwhile */
			if (probing && !broken)
				probe(t, ep);
			rdma_ep_put(ep);
			pthread_mutex_lock(&t->lock);
			continue;
		}
		rc = atomic_load(&t->stopping) ? -ECANCELED :
						 rdma_ep_connect(t, ep);
		if (rc) {
			mc_log_debug("te", "rdma: connect %s -> %s: %s",
				     ep->local_path, ep->remote_path,
				     mc_strerror(rc));
			if (rc != -ECANCELED)
				rdma_rail_pause(ep, rc);
			rdma_ep_break(ep, rc);
		} else {
			bool ok = true;

			pthread_mutex_lock(&ep->lock);
			if (ep->state == EP_CONNECTING) {
				ep->state = EP_READY;
				ok = rdma_ep_post_waiting(ep);
			}
			pthread_mutex_unlock(&ep->lock);
			if (!ok)
				rdma_ep_break(ep, -EIO);
		}
		rdma_ep_put(ep);
		pthread_mutex_lock(&t->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int rdma_connector_start(struct rdma_transport *t)
{
	int rc = pthread_create(&t->connector, NULL, connector_main, t);

	t->connector_started = rc == 0;
	return -rc;
}

void rdma_connector_stop(struct rdma_transport *t)
{
	pthread_mutex_lock(&t->lock);
	atomic_store(&t->stopping, true);
	pthread_cond_broadcast(&t->conn_cond);
	pthread_mutex_unlock(&t->lock);
	if (t->connector_started)
		pthread_join(t->connector, NULL);
	t->connector_started = false;
}
