/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A NIC in use: the verbs device opened, a protection domain, one shared
 * completion queue with its channel, the port's addressing (LID, the GID
 * discovery chose, the active MTU), and the poller thread that reaps the
 * CQ. Polling is adaptive: after a completion the poller keeps polling
 * for MC_RDMA_SPIN_US, then arms the CQ and sleeps on the channel (100 ms
 * at most, to sweep deadlines), so an idle engine costs no CPU.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>

#include "mc_log.h"
#include "mc_time.h"
#include "rdma_int.h"
#include "mooncake/mc_err.h"

#define POLL_BATCH 32
#define SLEEP_MS 100

void rdma_gid_str(const union ibv_gid *g, char out[48])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + i * 3, 4, i == 15 ? "%02x" : "%02x:", g->raw[i]);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int rdma_gid_parse(const char *s, union ibv_gid *g)
{
	/* Upstream writes 16 bytes as "xx:xx:...:xx". */
	if (!s || strlen(s) != 47)
		return -EINVAL;
	for (int i = 0; i < 16; i++) {
		int hi = hexval(s[i * 3]), lo = hexval(s[i * 3 + 1]);

		if (hi < 0 || lo < 0 || (i < 15 && s[i * 3 + 2] != ':'))
			return -EINVAL;
		g->raw[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

static enum ibv_mtu mtu_of(unsigned bytes)
{
	return bytes >= 4096 ? IBV_MTU_4096 :
	       bytes >= 2048 ? IBV_MTU_2048 :
	       bytes >= 1024 ? IBV_MTU_1024 :
	       bytes >= 512  ? IBV_MTU_512 :
			       IBV_MTU_256;
}

static struct ibv_context *open_named(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

int rdma_ctx_open(struct rdma_transport *t, const struct rdma_nic *nic,
		  struct rdma_ctx *c, char *err, size_t errlen)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	const char *why = NULL;

	c->t = t;
	snprintf(c->name, sizeof(c->name), "%s", nic->name);
	c->port = (uint8_t)nic->port;
	c->gid_index = nic->gid_index;
	pthread_mutex_init(&c->eps_lock, NULL);
	c->ctx = open_named(nic->name);
	if (!c->ctx)
		why = "cannot open the device";
	else if (ibv_query_device(c->ctx, &da))
		why = "ibv_query_device failed";
	else if (ibv_query_port(c->ctx, c->port, &pa))
		why = "ibv_query_port failed";
	else if (pa.state != IBV_PORT_ACTIVE)
		why = "its port is not ACTIVE";
	else if (c->gid_index < 0)
		why = "no usable GID";
	else if (ibv_query_gid(c->ctx, c->port, c->gid_index, &c->gid))
		why = "ibv_query_gid failed";
	if (!why) {
		c->lid = pa.lid;
		c->roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
		c->mtu = mtu_of(t->s.mtu);
		if (c->mtu > pa.active_mtu)
			c->mtu = pa.active_mtu;
		c->max_rd_atom =
			da.max_qp_rd_atom ? (unsigned)da.max_qp_rd_atom : 1;
		if (c->max_rd_atom > 16)
			c->max_rd_atom = 16;
		c->cqe = (int)t->s.max_cqe;
		if (da.max_cqe > 0 && c->cqe > da.max_cqe)
			c->cqe = da.max_cqe;
		c->pd = ibv_alloc_pd(c->ctx);
		c->ch = c->pd ? ibv_create_comp_channel(c->ctx) : NULL;
		c->cq = c->ch ? ibv_create_cq(c->ctx, c->cqe, c, c->ch, 0) :
				NULL;
		if (!c->cq)
			why = "cannot allocate its PD, channel or CQ";
	}
	if (why) {
		snprintf(err, errlen, "rdma: device %s: %s", nic->name, why);
		rdma_ctx_close(c);
		return MC_ENOTSUPPORTED;
	}
	(void)fcntl(c->ch->fd, F_SETFL, fcntl(c->ch->fd, F_GETFL) | O_NONBLOCK);
	return 0;
}

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

void rdma_ctx_close(struct rdma_ctx *c)
{
	if (c->poller_started)
		pthread_join(c->poller, NULL);
	c->poller_started = false;
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->ch)
		ibv_destroy_comp_channel(c->ch);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->ctx)
		ibv_close_device(c->ctx);
	c->cq = NULL;
	c->ch = NULL;
	c->pd = NULL;
	c->ctx = NULL;
	free(c->eps);
	c->eps = NULL;
	c->n_eps = c->cap_eps = 0;
	pthread_mutex_destroy(&c->eps_lock);
}

void rdma_ctx_add_ep(struct rdma_ctx *c, struct rdma_ep *ep)
{
	pthread_mutex_lock(&c->eps_lock);
	if (c->n_eps == c->cap_eps) {
		unsigned cap = c->cap_eps ? c->cap_eps * 2 : 16;
		struct rdma_ep **n = realloc(c->eps, cap * sizeof(*n));

		if (!n) { /* not swept: its deadlines wait for the NIC's */
			pthread_mutex_unlock(&c->eps_lock);
			return;
		}
		c->eps = n;
		c->cap_eps = cap;
	}
	c->eps[c->n_eps++] = ep;
	pthread_mutex_unlock(&c->eps_lock);
}

void rdma_ctx_del_ep(struct rdma_ctx *c, struct rdma_ep *ep)
{
	pthread_mutex_lock(&c->eps_lock);
	for (unsigned i = 0; i < c->n_eps; i++)
		if (c->eps[i] == ep) {
			c->eps[i] = c->eps[--c->n_eps];
			break;
		}
	pthread_mutex_unlock(&c->eps_lock);
}
