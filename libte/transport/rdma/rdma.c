/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The "rdma" transport's ops table: NICs from discovery (topo.c), opened
 * only when the engine was asked for rdma (te_engine_cfg.transport
 * "rdma"; an engine that speaks tcp pins no memory and opens no device,
 * as upstream's tcp engine does), registration of every host buffer on
 * every NIC (reg_add/reg_remove), our descriptor's rdma fields, the
 * Connection handshake (serve_handshake), and requests (rdma_io.c).
 *
 * A peer is reached when its descriptor lists devices and a buffer with
 * keys covering the target range, and the local buffer is host memory
 * registered on our NICs (device memory is staged through the tcp path:
 * GPUDirect RDMA needs a real NIC and a GPU, neither here).
 */
#include <errno.h>
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_log.h"
#include "mc_time.h"
#include "rdma_int.h"
#include "mooncake/mc_err.h"

static unsigned env_u(const char *name, unsigned def, unsigned lo, unsigned hi)
{
	const char *s = getenv(name);
	char *end;
	unsigned long v;

	if (!s || !*s)
		return def;
	v = strtoul(s, &end, 10);
	if (*end || v < lo || v > hi) {
		mc_log_warn("te", "%s=%s: want %u..%u; using %u", name, s, lo,
			    hi, def);
		return def;
	}
	return (unsigned)v;
}

static int env_i(const char *name)
{
	const char *s = getenv(name);

	return s && *s ? atoi(s) : -1;
}

static void read_settings(struct rdma_settings *s)
{
	const char *rr = getenv("MC_PATH_ROUNDROBIN");

	s->slice_size = env_u("MC_SLICE_SIZE", 65536, 4096, 1u << 30);
	s->fragment_ratio = env_u("MC_FRAGMENT_RATIO", 4, 1, 1024);
	s->retry_cnt = env_u("MC_RETRY_CNT", 9, 0, 64);
	s->qp_per_ep = env_u("MC_NUM_QP_PER_EP", 2, 1, RDMA_MAX_QP_PER_EP);
	s->max_wr = env_u("MC_MAX_WR", 256, 1, 1u << 16);
	s->max_cqe = env_u("MC_MAX_CQE_PER_CTX", 4096, 64, 1u << 22);
	s->mtu = env_u("MC_MTU", 4096, 256, 4096);
	s->spin_us = env_u("MC_RDMA_SPIN_US", 50, 0, 1000000);
	s->probe_ms = env_u("MC_RDMA_PROBE_MS", 1000, 0, 3600000);
	s->rail_pause_s = env_u("MC_RDMA_RAIL_PAUSE_SECONDS", 30, 0, 86400);
	s->round_robin = rr && *rr && strcmp(rr, "0");
	s->signal_all = env_u("MC_RDMA_SIGNAL_ALL", 0, 0, 1) != 0;
	s->ib_tc = env_i("MC_IB_TC");
	s->ib_sl = env_i("MC_IB_SL");
}

static void rdma_fini(struct te_transport *tp);

static int open_nics(struct rdma_transport *t, const char *devices, char *err,
		     size_t errlen)
{
	struct rdma_topo_opts o = rdma_topo_opts_env(devices);
	char why[TE_ERR_LEN] = "";
	int rc = rdma_topo_discover(&o, &t->topo, err, errlen);

	if (rc)
		return rc;
	for (size_t i = 0; i < t->topo.n_nics && t->n_ctx < RDMA_MAX_NICS;
	     i++) {
		struct rdma_ctx *c = &t->ctx[t->n_ctx];

		if (rdma_ctx_open(t, &t->topo.nics[i], c, why, sizeof(why))) {
			mc_log_warn("te", "%s; not used", why);
			memset(c, 0, sizeof(*c));
			continue;
		}
		c->index = (int)t->n_ctx;
		t->names[t->n_ctx++] = c->name;
	}
	if (!t->n_ctx) {
		snprintf(err, errlen, "rdma: no usable device (%s)", why);
		return MC_ENOTSUPPORTED;
	}
	return 0;
}

static int rdma_init(struct te_engine *eng, const struct te_engine_cfg *cfg,
		     struct te_transport **out, char *err, size_t errlen)
{
	struct rdma_transport *t = calloc(1, sizeof(*t));
	int rc = 0;

	if (!t)
		return -ENOMEM;
	t->base.eng = eng;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->conn_cond, NULL);
	*out = &t->base;
	if (!eng->rdma_on)
		return 0; /* not asked for: no device opened */
	read_settings(&t->s);
	t->passive = calloc(RDMA_PASSIVE_MAX, sizeof(*t->passive));
	if (!t->passive)
		rc = -ENOMEM;
	if (!rc)
		rc = open_nics(t, cfg->rdma_devices, err, errlen);
	for (unsigned i = 0; !rc && i < t->n_ctx; i++)
		rc = rdma_ctx_start(&t->ctx[i]);
	if (!rc)
		rc = rdma_connector_start(t);
	if (rc) {
		t->base.index = -1;
		rdma_fini(&t->base);
		*out = NULL;
		return rc;
	}
	mc_log_debug("te", "rdma: %u device%s, first %s (GID index %d)",
		     t->n_ctx, t->n_ctx == 1 ? "" : "s", t->ctx[0].name,
		     t->ctx[0].gid_index);
	return 0;
}

/* Where NICs are chosen from for r: its location, or for "*" (none
 * given) the NUMA node its first page is on, now that it is pinned. */
static void mr_location(const struct te_memreg *r, struct rdma_mr *m)
{
	int node = -1;

	if (strcmp(r->location, "*") && r->location[0]) {
		snprintf(m->location, sizeof(m->location), "%s", r->location);
		return;
	}
	if (get_mempolicy(&node, NULL, 0, (void *)r->addr,
			  MPOL_F_NODE | MPOL_F_ADDR) ||
	    node < 0)
		snprintf(m->location, sizeof(m->location), "*");
	else
		snprintf(m->location, sizeof(m->location), "cpu:%d", node);
}

/* Memory regions of a registration, on every NIC. */
static int rdma_reg_add(struct te_transport *tp, struct te_memreg *r)
{
	struct rdma_transport *t = to_rdma(tp);
	struct rdma_mr *m;

	if (!t->n_ctx || r->gpu)
		return 0;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	for (unsigned i = 0; i < t->n_ctx; i++) {
		m->mr[i] = ibv_reg_mr(t->ctx[i].pd, (void *)r->addr, r->len,
				      IBV_ACCESS_LOCAL_WRITE |
					      IBV_ACCESS_REMOTE_READ |
					      IBV_ACCESS_REMOTE_WRITE);
		if (!m->mr[i]) {
			int e = errno ? errno : ENOMEM;

			mc_log_err("te",
				   "rdma %s: cannot register %zu bytes at "
				   "%#lx: %s%s",
				   t->ctx[i].name, r->len,
				   (unsigned long)r->addr, mc_strerror(-e),
				   e == ENOMEM || e == EPERM ?
					   " (raise the locked-memory limit, "
					   "ulimit -l)" :
					   "");
			while (i--) {
				ibv_dereg_mr(m->mr[i]);
				atomic_fetch_sub(&t->n_mrs, 1);
			}
			free(m);
			return -e;
		}
		atomic_fetch_add(&t->n_mrs, 1);
	}
	mr_location(r, m);
	r->tp_priv[tp->index] = m;
	return 0;
}

static void rdma_reg_remove(struct te_transport *tp, struct te_memreg *r)
{
	struct rdma_transport *t = to_rdma(tp);
	struct rdma_mr *m = r->tp_priv[tp->index];

	if (!m)
		return;
	for (unsigned i = 0; i < t->n_ctx; i++)
		if (m->mr[i]) {
			ibv_dereg_mr(m->mr[i]);
			atomic_fetch_sub(&t->n_mrs, 1);
		}
	free(m);
	r->tp_priv[tp->index] = NULL;
}

/* Requests posted before the stop end (flushed) while pollers still run:
 * a bounded wait, since a NIC owes a completion for each. */
static void drain(struct rdma_transport *t)
{
	uint64_t until = mc_mono_ns() + 2000000000ULL;

	for (unsigned i = 0; i < t->n_ctx; i++)
		while (atomic_load(&t->ctx[i].posted) && mc_mono_ns() < until)
			usleep(1000);
}

static void rdma_fini(struct te_transport *tp)
{
	struct rdma_transport *t = to_rdma(tp);
	struct te_engine *eng = tp->eng;

	drain(t);
	rdma_connector_stop(t);
	for (unsigned i = 0; i < t->n_ctx; i++)
		if (t->ctx[i].poller_started) {
			pthread_join(t->ctx[i].poller, NULL);
			t->ctx[i].poller_started = false;
		}
	rdma_passive_free_all(t);
	/* Registrations outlive the transports (engine.c frees them last):
	 * their regions go now, before the protection domains. */
	if (tp->index >= 0) {
		pthread_rwlock_rdlock(&eng->reg_lock);
		for (unsigned i = 0; i < eng->n_regs; i++)
			rdma_reg_remove(tp, eng->regs[i]);
		pthread_rwlock_unlock(&eng->reg_lock);
	}
	for (unsigned i = 0; i < t->n_ctx; i++)
		rdma_ctx_close(&t->ctx[i]);
	if (atomic_load(&t->n_qps) || atomic_load(&t->n_mrs))
		mc_log_warn("te", "rdma: %llu QPs and %llu MRs left at stop",
			    (unsigned long long)atomic_load(&t->n_qps),
			    (unsigned long long)atomic_load(&t->n_mrs));
	rdma_topo_free(&t->topo);
	free(t->passive);
	pthread_cond_destroy(&t->conn_cond);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static int rdma_describe_op(struct te_transport *tp, json_t *desc)
{
	return rdma_describe(to_rdma(tp), desc);
}

static bool rdma_reachable(struct te_transport *tp, struct te_peer *peer,
			   const struct te_request *req)
{
	struct rdma_transport *t = to_rdma(tp);
	const struct rdma_peer_desc *d = peer->tp_desc[tp->index];

	return t->n_ctx && !peer->is_self && d && d->n_devs &&
	       rdma_rbuf_find(d, req->target_addr, req->length);
}

static int rdma_submit_op(struct te_transport *tp, struct te_task *task)
{
	if (!task->local_reg || !task->local_reg->tp_priv[tp->index])
		return MC_ENOTSUPPORTED; /* device memory, or not registered */
	return rdma_submit(to_rdma(tp), task);
}

static void rdma_peer_release(struct te_transport *tp, struct te_peer *p)
{
	struct rdma_peer *rp = p->tp_priv[tp->index];

	if (!rp)
		return;
	for (unsigned i = 0; i < RDMA_MAX_NICS; i++)
		for (unsigned j = 0; j < RDMA_MAX_NICS; j++) {
			struct rdma_ep *ep;

			/* A reference of our own: the connector may break
			 * and drop it the moment the lock is let go. */
			pthread_mutex_lock(&rp->lock);
			ep = rp->ep[i][j];
			if (ep)
				atomic_fetch_add(&ep->refs, 1);
			pthread_mutex_unlock(&rp->lock);
			if (ep) {
				rdma_ep_break(ep, -ECANCELED);
				rdma_ep_put(ep);
			}
		}
	pthread_mutex_destroy(&rp->lock);
	free(rp);
	p->tp_priv[tp->index] = NULL;
}

static int rdma_serve(struct te_transport *tp, uint8_t type, const char *json,
		      size_t len, char **reply)
{
	struct rdma_transport *t = to_rdma(tp);

	*reply = NULL;
	if (type != TE_HS_CONNECTION || !t->n_ctx)
		return MC_ENOTSUPPORTED;
	return rdma_ep_accept(t, json, len, reply);
}

static void rdma_stats(struct te_transport *tp, struct te_counters *out)
{
	struct rdma_transport *t = to_rdma(tp);
	uint64_t posted = 0;

	for (unsigned i = 0; i < t->n_ctx; i++)
		posted += (uint64_t)atomic_load(&t->ctx[i].posted);
	out->connections = atomic_load(&t->n_qps);
	out->registrations = atomic_load(&t->n_mrs);
	out->inflight = posted;
}

const struct te_transport_ops te_rdma_ops = {
	.name = "rdma",
	.version = 1,
	.init = rdma_init,
	.fini = rdma_fini,
	.describe = rdma_describe_op,
	.reachable = rdma_reachable,
	.submit = rdma_submit_op,
	.peer_release = rdma_peer_release,
	.desc_decode = rdma_desc_decode,
	.desc_free = rdma_desc_free,
	.reg_add = rdma_reg_add,
	.reg_remove = rdma_reg_remove,
	.serve_handshake = rdma_serve,
	.stats = rdma_stats,
};
