/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file rdma_int.h
 * The "rdma" transport's internals: one-sided RDMA READ/WRITE over RC queue
 * pairs (libibverbs), upstream's descriptor fields and Connection handshake.
 *
 * Objects and lifetimes:
 * - struct rdma_transport: the NICs in use (struct rdma_ctx, one per verbs
 *   device that discovery kept), the passive endpoints peers connected to
 *   us, the connector thread. Lives from init to fini.
 * - struct rdma_ctx: an opened device: protection domain, one completion
 *   queue with its channel, the port's LID/GID/MTU, and one poller thread
 *   that reaps completions (adaptive: it spins briefly after activity and
 *   then sleeps on the channel, so an idle engine uses no CPU).
 * - struct rdma_mr: a registered buffer's memory regions, one per NIC, in
 *   its struct te_memreg (tp_priv[index]); made at te_register, dropped at
 *   te_unregister (reg_add/reg_remove ops).
 * - struct rdma_ep: an endpoint, RC QPs (MC_NUM_QP_PER_EP) between one
 *   local NIC and one NIC of a peer. Active endpoints live in the peer's
 *   table (struct rdma_peer, peer->tp_priv[index]) and are connected by
 *   the connector thread through the peer's handshake listener; passive
 *   ones are made by our listener for peers that connect to us. Counted
 *   references: the owner's (dropped when the endpoint breaks or its
 *   owner goes) plus one per posted work request, so a broken endpoint's
 *   QPs are destroyed only after every request posted on them completed
 *   (flushed).
 * - struct rdma_slice: a piece of a task (MC_SLICE_SIZE bytes) posted as
 *   one signalled work request; wr_id points to it.
 *
 * Locking: ep->lock guards an endpoint's state, queues and QP counters;
 * peer table (struct rdma_peer) lock guards its endpoint slots;
 * t->lock guards the passive table and the connector queue. Order:
 * rdma_peer.lock, then ep->lock; never two endpoints' locks at once.
 */
#ifndef TE_RDMA_INT_H
#define TE_RDMA_INT_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "rdma_path.h"
#include "te_int.h"
#include "topo.h"

#define RDMA_MAX_NICS 16
#define RDMA_MAX_QP_PER_EP 16
#define RDMA_NIC_PATH_MAX (TE_NAME_MAX + RDMA_TOPO_NAME_MAX + 2)
#define RDMA_PASSIVE_MAX 4096

struct rdma_transport;

/* Settings, upstream's MC_ variables (docs/config.md). */
struct rdma_settings {
	uint64_t slice_size; /* MC_SLICE_SIZE, 65536 */
	unsigned fragment_ratio; /* MC_FRAGMENT_RATIO, 4 */
	unsigned retry_cnt; /* MC_RETRY_CNT, 9 */
	unsigned qp_per_ep; /* MC_NUM_QP_PER_EP, 2 */
	unsigned max_wr; /* MC_MAX_WR, 256 */
	unsigned max_cqe; /* MC_MAX_CQE_PER_CTX, 4096 */
	unsigned mtu; /* MC_MTU, 4096 (clamped to the port's active MTU) */
	unsigned spin_us; /* MC_RDMA_SPIN_US, 50: poll this long after work */
	unsigned probe_ms; /* MC_RDMA_PROBE_MS, 1000; 0: never probe */
	unsigned rail_pause_s; /* MC_RDMA_RAIL_PAUSE_SECONDS, 30; 0: never */
	bool round_robin; /* MC_PATH_ROUNDROBIN */
	bool signal_all; /* MC_RDMA_SIGNAL_ALL: a completion per request */
	int ib_tc, ib_sl; /* MC_IB_TC, MC_IB_SL; -1: default */
};

struct rdma_ctx {
	struct rdma_transport *t;
	int index;
	char name[RDMA_TOPO_NAME_MAX];
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	int cqe; /* the CQ's depth */
	_Atomic int posted; /* work requests on this CQ not yet reaped */
	uint8_t port;
	int gid_index;
	union ibv_gid gid;
	uint16_t lid;
	enum ibv_mtu mtu;
	bool roce;
	unsigned max_rd_atom;
	pthread_t poller;
	bool poller_started;
	/* Endpoints of this NIC (active and passive), for the poller's
	 * deadline sweep and for posting what waited on a full CQ. */
	pthread_mutex_t eps_lock;
	struct rdma_ep **eps;
	unsigned n_eps, cap_eps;
	_Atomic bool starved; /* a post waited for room in the CQ */
	/* Its port is not ACTIVE (IBV_EVENT_PORT_ERR until PORT_ACTIVE, or
	 * the device failed for good: fatal): new slices take other NICs,
	 * and end at once when none is up (rdma_threads.c, rdma_io.c). */
	_Atomic bool down;
	_Atomic uint64_t up_at; /* mono ms it last came up (0: never down) */
	bool fatal; /* the poller's */
};

enum rdma_ep_state {
	EP_CONNECTING, /* queued to the connector; slices wait */
	EP_READY,
	EP_BROKEN, /* QPs in error, no new posts; freed at the last ref */
};

struct rdma_slice {
	struct te_task *task;
	struct rdma_ep *ep; /* where it is queued or posted */
	struct rdma_slice *next, *prev;
	uint64_t local, remote, len;
	uint32_t lkey, rkey;
	unsigned retry;
	unsigned qp; /* the QP it was posted on */
	bool posted;
};

struct rdma_ep {
	_Atomic int refs;
	struct rdma_ctx *ctx;
	bool passive;
	/* Active: the peer table slot that holds us (NULL once detached) and
	 * where the peer's handshake listener is. */
	struct rdma_peer *owner;
	int remote_dev;
	char peer_ip[TE_NAME_MAX];
	int peer_rpc_port;
	/* "<server>@<nic>" of both ends (upstream's nic paths). */
	char local_path[RDMA_NIC_PATH_MAX];
	char remote_path[RDMA_NIC_PATH_MAX];
	unsigned nqp;
	struct ibv_qp *qp[RDMA_MAX_QP_PER_EP];
	unsigned qp_posted[RDMA_MAX_QP_PER_EP];
	unsigned next_qp;

	pthread_mutex_t lock;
	enum rdma_ep_state state;
	int error; /* why it broke (for slices that waited on it) */
	/* Slices waiting to be posted (connecting, or no room), FIFO. */
	struct rdma_slice *wait_head, *wait_tail;
	/* Posted slices, oldest first (deadline sweep). */
	struct rdma_slice *post_head, *post_tail;
	struct rdma_ep *conn_next; /* connector queue */
	/* Liveness: when the oldest posted request started waiting or the
	 * last completed; a probe of the peer's RPC port is queued to the
	 * connector when it is older than MC_RDMA_PROBE_MS. */
	uint64_t progress_ns;
	bool probing;
};

/* An active peer's endpoints: [local NIC][the peer's device]. */
struct rdma_peer {
	pthread_mutex_t lock;
	struct rdma_ep *ep[RDMA_MAX_NICS][RDMA_MAX_NICS];
	/* A (local, peer NIC) pair whose connection or requests failed is
	 * avoided by new slices until this mono ms (rdma_rail_pause). */
	_Atomic uint64_t paused_until[RDMA_MAX_NICS][RDMA_MAX_NICS];
};

/* A peer's descriptor, as far as rdma reads it (desc_decode). */
struct rdma_rdev {
	char name[RDMA_TOPO_NAME_MAX];
	uint16_t lid;
	union ibv_gid gid;
};

struct rdma_rbuf {
	uint64_t addr, len;
	char location[TE_LOCATION_LEN];
	unsigned n_rkeys;
	uint32_t rkey[RDMA_MAX_NICS];
};

struct rdma_peer_desc {
	unsigned n_devs;
	struct rdma_rdev devs[RDMA_MAX_NICS];
	unsigned n_bufs;
	struct rdma_rbuf *bufs; /* sorted by addr */
	json_t *matrix; /* its priority_matrix, or NULL */
};

/* A registered buffer's MRs, per NIC (te_memreg tp_priv). */
struct rdma_mr {
	struct ibv_mr *mr[RDMA_MAX_NICS];
	/* The location NICs are chosen by: the registration's, or for "*"
	 * the NUMA node of its first page ("cpu:N"), as upstream detects. */
	char location[TE_LOCATION_LEN];
};

struct rdma_transport {
	struct te_transport base;
	struct rdma_settings s;
	struct rdma_topo topo;
	unsigned n_ctx;
	struct rdma_ctx ctx[RDMA_MAX_NICS];
	const char *names[RDMA_MAX_NICS]; /* ctx[i].name, for rdma_path */
	_Atomic bool stopping;
	_Atomic unsigned rr; /* round-robin / spread counter */

	pthread_mutex_t lock;
	pthread_cond_t conn_cond;
	struct rdma_ep *conn_head, *conn_tail;
	pthread_t connector;
	bool connector_started;
	struct rdma_ep **passive;
	unsigned n_passive;

	/* Resources alive (te_counters: connections, registrations). */
	_Atomic uint64_t n_qps, n_mrs;
};

static inline struct rdma_transport *to_rdma(struct te_transport *tp)
{
	return (struct rdma_transport *)tp;
}

/*
 * Files, each calling only those below it (test_layering checks it):
 *   rdma.c          the ops table, init/fini, registrations
 *   rdma_threads.c  pollers (one per NIC) and the connector
 *   rdma_io.c       slices: routing, posting, completions, retries,
 *                   endpoint breaks, deadlines
 *   rdma_ep.c       endpoints: QPs, bring-up, the handshake both ways
 *   rdma_ctx.c      devices
 *   rdma_desc.c     wire formats (descriptor fields, handshake, GIDs)
 *   rdma_path.c     NIC choice; topo.c NIC discovery
 */

/* rdma_ctx.c: devices. */
int rdma_ctx_open(struct rdma_transport *t, const struct rdma_nic *nic,
		  struct rdma_ctx *c, char *err, size_t errlen);
/** Close the device; its poller was joined. */
void rdma_ctx_close(struct rdma_ctx *c);
void rdma_ctx_add_ep(struct rdma_ctx *c, struct rdma_ep *ep);
void rdma_ctx_del_ep(struct rdma_ctx *c, struct rdma_ep *ep);

/* rdma_threads.c */
int rdma_ctx_start(struct rdma_ctx *c);
int rdma_connector_start(struct rdma_transport *t);
void rdma_connector_stop(struct rdma_transport *t);

/* rdma_ep.c: endpoints and the Connection handshake. */
/** A new active endpoint toward dev of the peer (refs 1: the owner's),
 *  queued to the connector. */
struct rdma_ep *rdma_ep_new_active(struct rdma_transport *t, struct rdma_ctx *c,
				   struct te_peer *peer, int dev,
				   struct rdma_peer *owner);
void rdma_ep_put(struct rdma_ep *ep);
/** Hand ep to the connector (a new reference): to connect it, or with
 *  ep->probing set to probe its peer. */
void rdma_ep_queue(struct rdma_transport *t, struct rdma_ep *ep);
/** A new reference unless the last one is already gone (the endpoint is
 *  being destroyed); for walkers of a NIC's list under its eps_lock. */
static inline bool rdma_ep_tryget(struct rdma_ep *ep)
{
	int r = atomic_load(&ep->refs);

	while (r > 0)
		if (atomic_compare_exchange_weak(&ep->refs, &r, r + 1))
			return true;
	return false;
}
/** The active side's exchange (the connector's); 0 with QPs in RTS. */
int rdma_ep_connect(struct rdma_transport *t, struct rdma_ep *ep);
/** Serve a peer's Connection request (our handshake listener). */
int rdma_ep_accept(struct rdma_transport *t, const char *json, size_t len,
		   char **reply);
void rdma_passive_free_all(struct rdma_transport *t);

/* rdma_io.c: slices. */
/** Mark ep broken (QPs to error: posted requests flush), detach it from
 *  its owner, drop the owner's reference, and send the slices waiting on
 *  it elsewhere (or fail them). Caller holds no ep lock. */
void rdma_ep_break(struct rdma_ep *ep, int why);
/* ep's pair failed (why): new slices to its peer avoid it for
 * MC_RDMA_RAIL_PAUSE_SECONDS while another pair can serve. Before
 * rdma_ep_break(), which detaches ep from its peer. */
void rdma_rail_pause(struct rdma_ep *ep, int why);
/** Route and queue or post one slice (retry counts its attempts). */
void rdma_slice_route(struct rdma_transport *t, struct rdma_slice *s);
/** Post what waits on ep while there is room (ep->lock held). False: the
 *  NIC refused a post; the caller breaks ep once it let go of the lock. */
bool rdma_ep_post_waiting(struct rdma_ep *ep);
/** A slice ended: bytes moved, or an error (then maybe retried). */
void rdma_slice_end(struct rdma_transport *t, struct rdma_slice *s, int rc);
/** Reap one work completion. */
void rdma_complete(struct rdma_ctx *c, const struct ibv_wc *wc);
/** Break endpoints of c whose oldest posted slice is past its deadline;
 *  queue a probe of the peer for those without progress for
 *  MC_RDMA_PROBE_MS. */
void rdma_sweep_deadlines(struct rdma_ctx *c);
int rdma_submit(struct rdma_transport *t, struct te_task *task);

/* rdma_desc.c: descriptor fields and handshake bodies. */
/** "xx:xx:...": 47 characters and a NUL. */
void rdma_gid_str(const union ibv_gid *g, char out[48]);
/** Parse upstream's gid text: 0 or -EINVAL. */
int rdma_gid_parse(const char *s, union ibv_gid *g);
int rdma_describe(struct rdma_transport *t, json_t *desc);
int rdma_desc_decode(json_t *desc, void **out);
void rdma_desc_free(void *blob);
/** The peer's buffer holding [addr, addr+len), or NULL. */
const struct rdma_rbuf *rdma_rbuf_find(const struct rdma_peer_desc *d,
				       uint64_t addr, uint64_t len);

/* The Connection handshake body (upstream's fields). */
struct rdma_hs_msg {
	char local_nic_path[RDMA_NIC_PATH_MAX];
	char peer_nic_path[RDMA_NIC_PATH_MAX];
	uint16_t lid;
	union ibv_gid gid;
	unsigned n_qp;
	uint32_t qp_num[RDMA_MAX_QP_PER_EP];
	unsigned mtu; /* ours: the sender's path MTU in bytes, 0: absent */
	char reply_msg[256];
};
/** Parse one body (bytes from the network: every field bounded): 0 or
 *  -EBADMSG. */
int rdma_hs_parse(const char *json, size_t len, struct rdma_hs_msg *m);
/** Encode one body; malloc'd text or NULL. */
char *rdma_hs_encode(const struct rdma_hs_msg *m);

#endif
