/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A NIC in use: the verbs device opened, a protection domain, one shared
 * completion queue with its channel, the port's addressing (LID, the GID
 * discovery chose, the active MTU), and the list of its endpoints (for
 * its poller, rdma_threads.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>

#include "mc_log.h"
#include "rdma_int.h"
#include "mooncake/mc_err.h"

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
	/* The poller reads the device's events between its other work. */
	(void)fcntl(c->ctx->async_fd, F_SETFL,
		    fcntl(c->ctx->async_fd, F_GETFL) | O_NONBLOCK);
	return 0;
}

void rdma_ctx_close(struct rdma_ctx *c)
{
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
