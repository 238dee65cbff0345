/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Endpoints: RC queue pairs between a local NIC and a peer's NIC, brought
 * up through upstream's Connection handshake (type 0 on the peer's RPC
 * port, authenticated like every handshake when the pool has a key):
 *   {"local_nic_path": "<us>@<nic>", "peer_nic_path": "<peer>@<nic>",
 *    "local_lid": N, "local_gid": "xx:..", "qp_num": [..], "reply_msg": ""}
 * answered with the same fields from the peer's side; a non-empty
 * reply_msg is a refusal. The active side's connector thread makes the
 * exchange (submit never blocks on the network); the passive side answers
 * it from the handshake listener (rdma_ep_accept) and keeps the new
 * endpoint in the transport's passive table, replacing one the same peer
 * NIC made before (the peer restarted or rebuilt a broken endpoint).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_log.h"
#include "rdma_int.h"
#include "mooncake/mc_err.h"

#define HS_TIMEOUT_MS 5000
/* RC retransmission: 4.096 us * 2^14 ~ 67 ms per try, 7 tries; a dead
 * peer's requests fail in about half a second. */
#define QP_TIMEOUT 14
#define QP_RETRY 7

static void ep_destroy(struct rdma_ep *ep)
{
	struct rdma_transport *t = ep->ctx->t;

	rdma_ctx_del_ep(ep->ctx, ep);
	for (unsigned i = 0; i < ep->nqp; i++)
		if (ep->qp[i]) {
			ibv_destroy_qp(ep->qp[i]);
			atomic_fetch_sub(&t->n_qps, 1);
		}
	pthread_mutex_destroy(&ep->lock);
	free(ep);
}

void rdma_ep_put(struct rdma_ep *ep)
{
	if (ep && atomic_fetch_sub(&ep->refs, 1) == 1)
		ep_destroy(ep);
}

static struct rdma_ep *ep_alloc(struct rdma_ctx *c, unsigned nqp)
{
	struct rdma_transport *t = c->t;
	struct rdma_ep *ep = calloc(1, sizeof(*ep));

	if (!ep)
		return NULL;
	atomic_init(&ep->refs, 1);
	ep->ctx = c;
	ep->nqp = nqp;
	pthread_mutex_init(&ep->lock, NULL);
	for (unsigned i = 0; i < nqp; i++) {
		struct ibv_qp_init_attr a = {
			.send_cq = c->cq,
			.recv_cq = c->cq,
			.qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = t->s.max_wr,
				 .max_recv_wr = 1,
				 .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};
		struct ibv_qp_attr m = {
			.qp_state = IBV_QPS_INIT,
			.pkey_index = 0,
			.port_num = c->port,
			.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
					   IBV_ACCESS_REMOTE_READ |
					   IBV_ACCESS_REMOTE_WRITE,
		};

		ep->qp[i] = ibv_create_qp(c->pd, &a);
		if (!ep->qp[i]) {
			mc_log_warn("te", "rdma %s: ibv_create_qp: %s", c->name,
				    mc_strerror(-errno));
			ep_destroy(ep);
			return NULL;
		}
		atomic_fetch_add(&t->n_qps, 1);
		if (ibv_modify_qp(ep->qp[i], &m,
				  IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
			ep_destroy(ep);
			return NULL;
		}
	}
	rdma_ctx_add_ep(c, ep);
	return ep;
}

/* INIT -> RTR -> RTS toward the remote QPs of m. */
static int ep_bring_up(struct rdma_ep *ep, const struct rdma_hs_msg *m)
{
	struct rdma_ctx *c = ep->ctx;
	struct rdma_transport *t = c->t;
	enum ibv_mtu mtu = c->mtu;

	if (m->n_qp != ep->nqp)
		return -EPROTO;
	if (m->mtu) { /* the smaller of both ends, where the peer says */
		enum ibv_mtu theirs = m->mtu >= 4096 ? IBV_MTU_4096 :
				      m->mtu >= 2048 ? IBV_MTU_2048 :
				      m->mtu >= 1024 ? IBV_MTU_1024 :
				      m->mtu >= 512  ? IBV_MTU_512 :
						       IBV_MTU_256;
		if (theirs < mtu)
			mtu = theirs;
	}
	for (unsigned i = 0; i < ep->nqp; i++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTR,
			.path_mtu = mtu,
			.dest_qp_num = m->qp_num[i],
			.rq_psn = 0,
			.max_dest_rd_atomic = (uint8_t)c->max_rd_atom,
			.min_rnr_timer = 12,
			.ah_attr = { .dlid = m->lid,
				     .sl = t->s.ib_sl >= 0 ?
						   (uint8_t)t->s.ib_sl :
						   0,
				     .port_num = c->port },
		};
		struct ibv_qp_attr r = {
			.qp_state = IBV_QPS_RTS,
			.timeout = QP_TIMEOUT,
			.retry_cnt = QP_RETRY,
			.rnr_retry = 7,
			.sq_psn = 0,
			.max_rd_atomic = (uint8_t)c->max_rd_atom,
		};

		if (c->roce || m->gid.global.interface_id) {
			a.ah_attr.is_global = 1;
			a.ah_attr.grh.dgid = m->gid;
			a.ah_attr.grh.sgid_index = (uint8_t)c->gid_index;
			a.ah_attr.grh.hop_limit = 64;
			if (t->s.ib_tc >= 0)
				a.ah_attr.grh.traffic_class =
					(uint8_t)t->s.ib_tc;
		}
		if (ibv_modify_qp(ep->qp[i], &a,
				  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC |
					  IBV_QP_MIN_RNR_TIMER) ||
		    ibv_modify_qp(ep->qp[i], &r,
				  IBV_QP_STATE | IBV_QP_TIMEOUT |
					  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					  IBV_QP_SQ_PSN |
					  IBV_QP_MAX_QP_RD_ATOMIC)) {
			mc_log_warn("te",
				    "rdma %s: QP to RTR/RTS toward %s: %s",
				    c->name, ep->remote_path,
				    mc_strerror(-errno));
			return -EIO;
		}
	}
	return 0;
}

static void hs_fill(const struct rdma_ep *ep, struct rdma_hs_msg *m)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->local_nic_path, sizeof(m->local_nic_path), "%s",
		 ep->local_path);
	snprintf(m->peer_nic_path, sizeof(m->peer_nic_path), "%s",
		 ep->remote_path);
	m->lid = ep->ctx->lid;
	m->gid = ep->ctx->gid;
	m->n_qp = ep->nqp;
	for (unsigned i = 0; i < ep->nqp; i++)
		m->qp_num[i] = ep->qp[i]->qp_num;
	m->mtu = 128u << ep->ctx->mtu;
}

struct rdma_ep *rdma_ep_new_active(struct rdma_transport *t, struct rdma_ctx *c,
				   struct te_peer *peer, int dev,
				   struct rdma_peer *owner)
{
	const struct rdma_peer_desc *d = peer->tp_desc[t->base.index];
	struct rdma_ep *ep = ep_alloc(c, t->s.qp_per_ep);

	if (!ep)
		return NULL;
	ep->owner = owner;
	ep->remote_dev = dev;
	ep->state = EP_CONNECTING;
	snprintf(ep->peer_ip, sizeof(ep->peer_ip), "%s", peer->ip);
	ep->peer_rpc_port = peer->rpc_port;
	snprintf(ep->local_path, sizeof(ep->local_path), "%s@%s",
		 t->base.eng->name, c->name);
	snprintf(ep->remote_path, sizeof(ep->remote_path), "%s@%s", peer->name,
		 d->devs[dev].name);
	rdma_ep_queue(t, ep);
	return ep;
}

void rdma_ep_queue(struct rdma_transport *t, struct rdma_ep *ep)
{
	/* The connector's reference, dropped when it is done. */
	atomic_fetch_add(&ep->refs, 1);
	pthread_mutex_lock(&t->lock);
	ep->conn_next = NULL;
	if (t->conn_tail)
		t->conn_tail->conn_next = ep;
	else
		t->conn_head = ep;
	t->conn_tail = ep;
	pthread_cond_signal(&t->conn_cond);
	pthread_mutex_unlock(&t->lock);
}

/* The active side's exchange; 0 with the QPs in RTS. */
int rdma_ep_connect(struct rdma_transport *t, struct rdma_ep *ep)
{
	struct rdma_hs_msg m, r;
	char *req, *reply = NULL;
	size_t rlen = 0;
	int rc;

	hs_fill(ep, &m);
	req = rdma_hs_encode(&m);
	if (!req)
		return -ENOMEM;
	rc = te__rpc_connect(ep->peer_ip, ep->peer_rpc_port, HS_TIMEOUT_MS,
			     t->base.eng->auth, req, &reply, &rlen);
	free(req);
	if (!rc && rdma_hs_parse(reply, rlen, &r))
		rc = -EPROTO;
	if (!rc && r.reply_msg[0]) {
		mc_log_warn("te", "rdma: %s refused the connection from %s: %s",
			    ep->remote_path, ep->local_path, r.reply_msg);
		rc = MC_ENOTSUPPORTED;
	}
	if (!rc)
		rc = ep_bring_up(ep, &r);
	free(reply);
	return rc;
}

/* ------------------------------------------------ the passive side */

static struct rdma_ctx *ctx_named(struct rdma_transport *t, const char *name)
{
	for (unsigned i = 0; i < t->n_ctx; i++)
		if (!strcmp(t->ctx[i].name, name))
			return &t->ctx[i];
	return NULL;
}

/* Keep ep in the passive table, replacing (and returning) an endpoint
 * the same remote NIC made to the same local NIC before. */
static struct rdma_ep *passive_put(struct rdma_transport *t, struct rdma_ep *ep)
{
	struct rdma_ep *old = NULL;

	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < t->n_passive; i++)
		if (t->passive[i]->ctx == ep->ctx &&
		    !strcmp(t->passive[i]->remote_path, ep->remote_path)) {
			old = t->passive[i];
			t->passive[i] = ep;
			ep = NULL;
			break;
		}
	if (ep && t->n_passive == RDMA_PASSIVE_MAX) {
		/* Full: the oldest goes (upstream's FIFO store). */
		old = t->passive[0];
		memmove(t->passive, t->passive + 1,
			(t->n_passive - 1) * sizeof(*t->passive));
		t->n_passive--;
	}
	if (ep)
		t->passive[t->n_passive++] = ep;
	pthread_mutex_unlock(&t->lock);
	return old;
}

static char *refuse(const struct rdma_hs_msg *m, const char *why)
{
	struct rdma_hs_msg r;

	memset(&r, 0, sizeof(r));
	snprintf(r.local_nic_path, sizeof(r.local_nic_path), "%s",
		 m->peer_nic_path);
	snprintf(r.peer_nic_path, sizeof(r.peer_nic_path), "%s",
		 m->local_nic_path);
	snprintf(r.reply_msg, sizeof(r.reply_msg), "%s", why);
	return rdma_hs_encode(&r);
}

int rdma_ep_accept(struct rdma_transport *t, const char *json, size_t len,
		   char **reply)
{
	struct rdma_hs_msg m, r;
	const char *at;
	struct rdma_ctx *c;
	struct rdma_ep *ep, *old;

	if (rdma_hs_parse(json, len, &m) || !m.n_qp) {
		*reply = NULL;
		return -EBADMSG;
	}
	at = strrchr(m.peer_nic_path, '@');
	c = at ? ctx_named(t, at + 1) : NULL;
	if (!c || (size_t)(at - m.peer_nic_path) != strlen(t->base.eng->name) ||
	    strncmp(m.peer_nic_path, t->base.eng->name,
		    (size_t)(at - m.peer_nic_path))) {
		*reply = refuse(&m, "no such NIC path here");
		return *reply ? 0 : -ENOMEM;
	}
	ep = ep_alloc(c, m.n_qp);
	if (!ep) {
		*reply = refuse(&m, "cannot create queue pairs");
		return *reply ? 0 : -ENOMEM;
	}
	ep->passive = true;
	snprintf(ep->local_path, sizeof(ep->local_path), "%s", m.peer_nic_path);
	snprintf(ep->remote_path, sizeof(ep->remote_path), "%s",
		 m.local_nic_path);
	if (ep_bring_up(ep, &m)) {
		rdma_ep_put(ep);
		*reply = refuse(&m, "cannot bring the queue pairs up");
		return *reply ? 0 : -ENOMEM;
	}
	ep->state = EP_READY;
	hs_fill(ep, &r);
	*reply = rdma_hs_encode(&r);
	old = passive_put(t, ep);
	if (old)
		rdma_ep_put(old);
	return *reply ? 0 : -ENOMEM;
}

void rdma_passive_free_all(struct rdma_transport *t)
{
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < t->n_passive; i++)
		rdma_ep_put(t->passive[i]);
	free(t->passive);
	t->passive = NULL;
	t->n_passive = 0;
	pthread_mutex_unlock(&t->lock);
}
