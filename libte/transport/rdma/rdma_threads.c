/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rdma transport's threads: one poller per NIC, which reaps the
 * NIC's completion queue, posts what waited for room in it and sweeps
 * deadlines; and one connector, which brings new active endpoints up
 * through the Connection handshake so that submit never waits on the
 * network. Polling is adaptive: after a completion the poller keeps
 * polling for MC_RDMA_SPIN_US, then arms the CQ and sleeps on its channel
 * (100 ms at most, to sweep deadlines), so an idle engine costs no CPU.
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

/* Wait for the CQ's event (armed first), SLEEP_MS at most. */
static void sleep_on_cq(struct rdma_ctx *c)
{
	struct pollfd p = { .fd = c->ch->fd, .events = POLLIN };
	struct ibv_cq *cq;
	void *cq_ctx;

	if (poll(&p, 1, SLEEP_MS) > 0 && !ibv_get_cq_event(c->ch, &cq, &cq_ctx))
		ibv_ack_cq_events(cq, 1);
}

/* The CQ had no room for some posts: post what waits, endpoint by
 * endpoint (references taken under eps_lock, posting outside it). */
static void post_starved(struct rdma_ctx *c)
{
	struct rdma_ep **eps;
	unsigned n = 0, cap;

	pthread_mutex_lock(&c->eps_lock);
	cap = c->n_eps;
	eps = cap ? malloc(cap * sizeof(*eps)) : NULL;
	for (unsigned i = 0; eps && i < cap; i++)
		if (rdma_ep_tryget(c->eps[i]))
			eps[n++] = c->eps[i];
	pthread_mutex_unlock(&c->eps_lock);
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
		sleep_on_cq(c);
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
