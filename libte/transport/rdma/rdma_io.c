/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Requests as slices: a task is cut into MC_SLICE_SIZE pieces (a tail up
 * to slice/MC_FRAGMENT_RATIO joins the piece before it), each routed to a
 * (local NIC, peer NIC) pair by the priority matrices of both sides
 * (rdma_path.c) and posted as one RDMA READ or WRITE on one of that
 * pair's QPs, round robin. Only the last request of each ibv_post_send()
 * chain on a QP asks for a completion: an RC send queue completes in
 * order, so its completion ends the requests posted before it on that QP
 * too (one completion per chain instead of per slice, as perftest's
 * completion moderation). A slice whose path fails is routed again
 * with its retry count raised (another NIC pair where there is one, a new
 * endpoint otherwise), up to MC_RETRY_CNT and within the task's deadline;
 * refusals (an address the peer does not expose, a key it rejects) end
 * the task at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_log.h"
#include "mc_time.h"
#include "rdma_int.h"
#include "mooncake/mc_err.h"

#define POST_BATCH 32

static bool retriable(int rc)
{
	return rc == -EIO || rc == -ECONNRESET || rc == -ECONNREFUSED ||
	       rc == -EHOSTUNREACH || rc == -ETIMEDOUT || rc == -EPROTO ||
	       rc == -EAGAIN || rc == -ENETDOWN;
}

static void slice_free(struct rdma_slice *s)
{
	free(s);
}

void rdma_ep_break(struct rdma_ep *ep, int why)
{
	struct rdma_peer *owner;
	struct rdma_slice *waiting;
	bool was_owned = false;

	/* Detach from the owner's slot first (lock order: owner, ep). */
	pthread_mutex_lock(&ep->lock);
	owner = ep->owner;
	pthread_mutex_unlock(&ep->lock);
	if (owner) {
		pthread_mutex_lock(&owner->lock);
		pthread_mutex_lock(&ep->lock);
		if (ep->owner == owner) {
			owner->ep[ep->ctx->index][ep->remote_dev] = NULL;
			ep->owner = NULL;
			was_owned = true;
		}
		pthread_mutex_unlock(&ep->lock);
		pthread_mutex_unlock(&owner->lock);
	}
	pthread_mutex_lock(&ep->lock);
	if (ep->state != EP_BROKEN) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

		ep->state = EP_BROKEN;
		ep->error = why;
		for (unsigned i = 0; i < ep->nqp; i++)
			(void)ibv_modify_qp(ep->qp[i], &a, IBV_QP_STATE);
	}
	waiting = ep->wait_head;
	ep->wait_head = ep->wait_tail = NULL;
	pthread_mutex_unlock(&ep->lock);
	/* Slices that never reached the NIC go elsewhere (or fail). */
	while (waiting) {
		struct rdma_slice *s = waiting;

		waiting = s->next;
		s->ep = NULL;
		rdma_slice_end(ep->ctx->t, s, why);
	}
	if (was_owned)
		rdma_ep_put(ep);
}

void rdma_rail_pause(struct rdma_ep *ep, int why)
{
	struct rdma_transport *t = ep->ctx->t;
	uint64_t now = mc_mono_ms();
	bool fresh = false; /* not paused already: say so */

	if (!t->s.rail_pause_s || atomic_load(&t->stopping))
		return;
	/* The owner stays while ep is attached to it (under ep->lock). */
	pthread_mutex_lock(&ep->lock);
	if (ep->owner) {
		_Atomic uint64_t *u =
			&ep->owner->paused_until[ep->ctx->index][ep->remote_dev];

		fresh = atomic_exchange(u, now + t->s.rail_pause_s * 1000ull) <=
			now;
	}
	pthread_mutex_unlock(&ep->lock);
	if (fresh)
		mc_log_warn("te",
			    "rdma %s -> %s failed (%s): new requests to that "
			    "peer take its other NIC pairs for %u s "
			    "(MC_RDMA_RAIL_PAUSE_SECONDS), this one only if "
			    "none other can serve",
			    ep->local_path, ep->remote_path, mc_strerror(why),
			    t->s.rail_pause_s);
}

void rdma_slice_end(struct rdma_transport *t, struct rdma_slice *s, int rc)
{
	struct te_task *task = s->task;

	if (rc && retriable(rc) && s->retry < t->s.retry_cnt &&
	    mc_mono_ns() < task->deadline_ns && !atomic_load(&t->stopping)) {
		s->retry++;
		s->posted = false;
		rdma_slice_route(t, s);
		return;
	}
	if (rc && mc_mono_ns() >= task->deadline_ns)
		rc = -ETIMEDOUT;
	if (rc == MC_ENOTREG && task->peer)
		te__peer_invalidate(task->peer); /* its keys may have changed */
	te__slice_done(task, rc ? 0 : s->len, rc);
	slice_free(s);
}

/* Room for one more request in c's CQ (counted), or false (starved: the
 * poller posts what waits once completions free room). */
static bool cq_room(struct rdma_ctx *c)
{
	if (atomic_fetch_add(&c->posted, 1) < c->cqe)
		return true;
	atomic_fetch_sub(&c->posted, 1);
	atomic_store(&c->starved, true);
	return false;
}

/* A QP with room, the next in turn, with a CQ slot taken; -1: none. */
static int take_qp(struct rdma_ep *ep)
{
	unsigned max = ep->ctx->t->s.max_wr;

	for (unsigned k = 0; k < ep->nqp; k++) {
		unsigned q = (ep->next_qp + k) % ep->nqp;

		if (ep->qp_posted[q] >= max)
			continue;
		if (!cq_room(ep->ctx))
			return -1;
		ep->next_qp = q + 1;
		return (int)q;
	}
	return -1;
}

static void post_link(struct rdma_ep *ep, struct rdma_slice *s)
{
	s->prev = ep->post_tail;
	s->next = NULL;
	if (ep->post_tail)
		ep->post_tail->next = s;
	else
		ep->post_head = s;
	ep->post_tail = s;
}

static void post_unlink(struct rdma_ep *ep, struct rdma_slice *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		ep->post_head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		ep->post_tail = s->prev;
	s->next = s->prev = NULL;
}

static struct rdma_slice *wait_pop(struct rdma_ep *ep)
{
	struct rdma_slice *s = ep->wait_head;

	ep->wait_head = s->next;
	if (!ep->wait_head)
		ep->wait_tail = NULL;
	s->next = NULL;
	return s;
}

static void wait_push_front(struct rdma_ep *ep, struct rdma_slice *s)
{
	s->next = ep->wait_head;
	ep->wait_head = s;
	if (!ep->wait_tail)
		ep->wait_tail = s;
}

/* Account s as posted on QP q (its CQ slot already taken). */
static void mark_posted(struct rdma_ep *ep, struct rdma_slice *s, int q)
{
	s->qp = (unsigned)q;
	s->posted = true;
	if (!ep->post_head)
		ep->progress_ns = mc_mono_ns();
	ep->qp_posted[q]++;
	atomic_fetch_add(&ep->refs, 1);
	post_link(ep, s);
}

/* Undo mark_posted() for a request the NIC did not take. */
static void unmark_posted(struct rdma_ep *ep, struct rdma_slice *s)
{
	post_unlink(ep, s);
	s->posted = false;
	ep->qp_posted[s->qp]--;
	atomic_fetch_sub(&ep->refs, 1); /* the caller holds one more */
	atomic_fetch_sub(&ep->ctx->posted, 1);
}

/*
 * Post what waits while there is room: slices go to the endpoint's QPs in
 * turn (so the NIC works on them in parallel), up to POST_BATCH at a time
 * with one ibv_post_send() per QP for its share (one doorbell, one system
 * call under soft-RoCE); ep->lock held. False: the NIC refused a post (the
 * caller breaks the endpoint once it let go of the lock); what it did not
 * take waits again.
 */
static bool post_waiting(struct rdma_ep *ep)
{
	while (ep->wait_head && ep->state == EP_READY) {
		struct ibv_send_wr wr[POST_BATCH], *bad = NULL;
		struct ibv_send_wr *head[RDMA_MAX_QP_PER_EP] = { 0 };
		struct ibv_send_wr *tail[RDMA_MAX_QP_PER_EP] = { 0 };
		struct ibv_sge sge[POST_BATCH];
		struct rdma_slice *sl[POST_BATCH];
		unsigned n = 0, q;
		int k;

		while (n < POST_BATCH && ep->wait_head &&
		       (k = take_qp(ep)) >= 0) {
			struct rdma_slice *s = wait_pop(ep);

			mark_posted(ep, s, k);
			sge[n] = (struct ibv_sge){ .addr = s->local,
						   .length = (uint32_t)s->len,
						   .lkey = s->lkey };
			wr[n] = (struct ibv_send_wr){
				.wr_id = (uintptr_t)s,
				.sg_list = &sge[n],
				.num_sge = 1,
				.opcode = s->task->req.opcode == TE_READ ?
						  IBV_WR_RDMA_READ :
						  IBV_WR_RDMA_WRITE,
				.wr.rdma = { .remote_addr = s->remote,
					     .rkey = s->rkey },
			};
			if (tail[k])
				tail[k]->next = &wr[n];
			else
				head[k] = &wr[n];
			tail[k] = &wr[n];
			sl[n++] = s;
		}
		if (!n)
			return true;
		/* One completion per chain (rdma_complete() ends the rest);
		 * a chain ends the send queue's run of unsignalled requests,
		 * so they never fill it. */
		if (ep->ctx->t->s.signal_all)
			for (unsigned i = 0; i < n; i++)
				wr[i].send_flags = IBV_SEND_SIGNALED;
		for (q = 0; q < ep->nqp; q++)
			if (tail[q])
				tail[q]->send_flags = IBV_SEND_SIGNALED;
		for (q = 0; q < ep->nqp; q++)
			if (head[q] && ibv_post_send(ep->qp[q], head[q], &bad))
				break;
		if (q == ep->nqp)
			continue;
		mc_log_warn("te", "rdma %s: ibv_post_send toward %s failed",
			    ep->ctx->name, ep->remote_path);
		/* Not taken: QP q's from the refused one on, later QPs' all. */
		for (unsigned i = n; i-- > 0;) {
			if (sl[i]->qp < q ||
			    (sl[i]->qp == q && bad && &wr[i] < bad))
				continue;
			unmark_posted(ep, sl[i]);
			wait_push_front(ep, sl[i]);
		}
		return false;
	}
	return true;
}

bool rdma_ep_post_waiting(struct rdma_ep *ep)
{
	return post_waiting(ep);
}

static struct rdma_peer *peer_table(struct rdma_transport *t, struct te_peer *p)
{
	void **slot = &p->tp_priv[t->base.index];
	struct rdma_peer *rp = __atomic_load_n(slot, __ATOMIC_ACQUIRE), *none;

	if (rp)
		return rp;
	rp = calloc(1, sizeof(*rp));
	if (!rp)
		return NULL;
	pthread_mutex_init(&rp->lock, NULL);
	none = NULL;
	if (!__atomic_compare_exchange_n((struct rdma_peer **)slot, &none, rp,
					 false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		pthread_mutex_destroy(&rp->lock);
		free(rp);
		rp = none;
	}
	return rp;
}

/* The endpoint for (c, dev), made when missing; a new reference. */
static struct rdma_ep *ep_for(struct rdma_transport *t, struct te_peer *p,
			      struct rdma_peer *rp, struct rdma_ctx *c, int dev)
{
	struct rdma_ep *ep;

	pthread_mutex_lock(&rp->lock);
	ep = rp->ep[c->index][dev];
	if (!ep) {
		ep = rdma_ep_new_active(t, c, p, dev, rp);
		rp->ep[c->index][dev] = ep;
	}
	if (ep)
		atomic_fetch_add(&ep->refs, 1);
	pthread_mutex_unlock(&rp->lock);
	return ep;
}

/* Post what waits on ep, breaking it when the NIC refuses; drops the
 * caller's reference. */
static void post_and_put(struct rdma_ep *ep)
{
	bool ok;

	pthread_mutex_lock(&ep->lock);
	ok = post_waiting(ep);
	pthread_mutex_unlock(&ep->lock);
	if (!ok)
		rdma_ep_break(ep, -EIO);
	rdma_ep_put(ep);
}

/* What pair_score() rates pairs with. */
struct pair_ctx {
	struct rdma_transport *t;
	struct rdma_peer *rp;
	const struct rdma_mr *mr;
	const struct rdma_rbuf *rb;
	uint64_t now;
};

/* rdma_path_score_fn: a pair the buffers are registered on and whose
 * local port is up, paused or not (rdma_rail_pause). */
static int pair_score(void *arg, int ci, int dev)
{
	const struct pair_ctx *pc = arg;

	if ((unsigned)dev >= pc->rb->n_rkeys || !pc->mr->mr[ci] ||
	    atomic_load_explicit(&pc->t->ctx[ci].down, memory_order_relaxed))
		return 0;
	return rdma_path_paused(
		       atomic_load_explicit(&pc->rp->paused_until[ci][dev],
					    memory_order_relaxed),
		       pc->t->s.rail_pause_s * 1000ull,
		       atomic_load_explicit(&pc->t->ctx[ci].up_at,
					    memory_order_relaxed),
		       pc->now) ?
		       1 :
		       2;
}

/*
 * Queue s on the endpoint the matrices choose (made when missing). Its
 * endpoint with a new reference, for the caller to post (post_and_put:
 * a task's slices go out together); NULL when the slice ended instead.
 */
static struct rdma_ep *slice_queue(struct rdma_transport *t,
				   struct rdma_slice *s)
{
	struct te_task *task = s->task;
	struct te_peer *p = task->peer;
	const struct rdma_peer_desc *d = p->tp_desc[t->base.index];
	const struct rdma_mr *mr = task->local_reg->tp_priv[t->base.index];
	const struct rdma_rbuf *rb;
	const char *dnames[RDMA_MAX_NICS];
	struct rdma_peer *rp = peer_table(t, p);
	uint64_t now = mc_mono_ns();
	unsigned spread = t->s.round_robin ?
				  atomic_fetch_add(&t->rr, 1) :
				  (unsigned)now ^ (unsigned)(s->remote >> 12);
	int ci, dev;

	if (now >= task->deadline_ns) {
		rdma_slice_end(t, s, -ETIMEDOUT);
		return NULL;
	}
	rb = d ? rdma_rbuf_find(d, s->remote, s->len) : NULL;
	if (!rb || !mr || !rp) {
		rdma_slice_end(t, s, !rp ? -ENOMEM : MC_ENOTREG);
		return NULL;
	}
	for (unsigned i = 0; i < d->n_devs; i++)
		dnames[i] = d->devs[i].name;
	{
		struct rdma_path_side l = { t->topo.matrix, mr->location,
					    t->names, t->n_ctx };
		struct rdma_path_side r = { d->matrix, rb->location, dnames,
					    d->n_devs };
		struct pair_ctx pc = { t, rp, mr, rb, now / 1000000 };

		if (rdma_path_pick_pair(&l, &r, s->retry, spread, pair_score,
					&pc, &ci, &dev))
			ci = dev = -1;
	}
	if (ci < 0 || dev < 0 || (unsigned)dev >= rb->n_rkeys || !mr->mr[ci]) {
		rdma_slice_end(t, s, MC_ENOTSUPPORTED);
		return NULL;
	}
	/* Down, as is every other NIC it may use: */
	if (atomic_load(&t->ctx[ci].down)) {
		rdma_slice_end(t, s, -ENETUNREACH);
		return NULL;
	}
	s->lkey = mr->mr[ci]->lkey;
	s->rkey = rb->rkey[dev];
	for (int tries = 0; tries < 4; tries++) {
		struct rdma_ep *ep = ep_for(t, p, rp, &t->ctx[ci], dev);

		if (!ep)
			break;
		pthread_mutex_lock(&ep->lock);
		if (ep->state == EP_BROKEN) { /* lost a race with a break */
			pthread_mutex_unlock(&ep->lock);
			rdma_ep_put(ep);
			continue;
		}
		s->ep = ep;
		s->next = NULL;
		if (ep->wait_tail)
			ep->wait_tail->next = s;
		else
			ep->wait_head = s;
		ep->wait_tail = s;
		pthread_mutex_unlock(&ep->lock);
		return ep;
	}
	rdma_slice_end(t, s, -ENOMEM);
	return NULL;
}

void rdma_slice_route(struct rdma_transport *t, struct rdma_slice *s)
{
	struct rdma_ep *ep = slice_queue(t, s);

	if (ep)
		post_and_put(ep);
}

/* ep->lock held: s no longer posted (its CQ slot and QP room freed). */
static void unpost(struct rdma_ctx *c, struct rdma_ep *ep, struct rdma_slice *s)
{
	post_unlink(ep, s);
	ep->qp_posted[s->qp]--;
	atomic_fetch_sub(&c->posted, 1);
	s->posted = false;
}

/*
 * ep->lock held: the requests posted on s's QP before s that have no
 * completion of their own (unsignalled), in posting order, as a list
 * through ->next. The send queue completes in order, so they ended before
 * s: successfully, unless s was flushed (the QP broke before s ran: some
 * may not have run at all; a NIC need not report flushed unsignalled
 * requests), in which case they end as s does (a READ or WRITE done twice
 * writes the same bytes: retrying one that ran is harmless).
 */
static struct rdma_slice *ended_before(struct rdma_ctx *c, struct rdma_ep *ep,
				       struct rdma_slice *s)
{
	struct rdma_slice *head = NULL, **tailp = &head, *p, *next;

	for (p = ep->post_head; p && p != s; p = next) {
		next = p->next;
		if (p->qp != s->qp)
			continue;
		unpost(c, ep, p);
		*tailp = p;
		tailp = &p->next;
	}
	return head;
}

void rdma_complete(struct rdma_ctx *c, const struct ibv_wc *wc)
{
	struct rdma_slice *s = (struct rdma_slice *)(uintptr_t)wc->wr_id;
	struct rdma_ep *ep = s->ep;
	struct rdma_slice *before;
	int rc = 0, rc_before;
	bool ok;

	pthread_mutex_lock(&ep->lock);
	before = ended_before(c, ep, s);
	unpost(c, ep, s);
	ep->progress_ns = mc_mono_ns();
	ok = post_waiting(ep);
	if (wc->status != IBV_WC_SUCCESS)
		rc = wc->status == IBV_WC_WR_FLUSH_ERR ?
			     (ep->error ? ep->error : -ECONNRESET) :
		     wc->status == IBV_WC_REM_ACCESS_ERR ||
				     wc->status == IBV_WC_REM_INV_REQ_ERR ?
			     MC_ENOTREG :
		     wc->status == IBV_WC_LOC_PROT_ERR ? -EFAULT :
							 -EIO;
	rc_before = wc->status == IBV_WC_WR_FLUSH_ERR ? rc : 0;
	pthread_mutex_unlock(&ep->lock);
	if (rc && wc->status != IBV_WC_WR_FLUSH_ERR)
		mc_log_debug("te", "rdma %s -> %s: %s (%s)", ep->local_path,
			     ep->remote_path, ibv_wc_status_str(wc->status),
			     mc_strerror(rc));
	if (rc == -EIO) /* the path failed (retries exceeded, ...) */
		rdma_rail_pause(ep, rc);
	if (rc || !ok)
		rdma_ep_break(ep, rc && rc != MC_ENOTREG ? rc : -EIO);
	while (before) {
		struct rdma_slice *b = before;

		before = b->next;
		b->next = NULL;
		b->ep = NULL;
		rdma_slice_end(c->t, b, rc_before);
		rdma_ep_put(ep); /* its posted reference */
	}
	s->ep = NULL;
	rdma_slice_end(c->t, s, rc);
	rdma_ep_put(ep); /* the posted request's reference */
}

void rdma_sweep_deadlines(struct rdma_ctx *c)
{
	uint64_t now = mc_mono_ns();
	uint64_t probe_ns = (uint64_t)c->t->s.probe_ms * 1000000ULL;
	struct rdma_ep *late[64], *quiet[64];
	unsigned n = 0, nq = 0;

	pthread_mutex_lock(&c->eps_lock);
	for (unsigned i = 0; i < c->n_eps && n < 64 && nq < 64; i++) {
		struct rdma_ep *ep = c->eps[i];
		bool is_late, is_quiet;

		pthread_mutex_lock(&ep->lock);
		is_late = ep->state != EP_BROKEN && ep->post_head &&
			  ep->post_head->task->deadline_ns <= now;
		/* Posted requests and no completion for a while: is the peer
		 * alive? (A dead process's QPs are gone: the NIC drops what
		 * we send them and may retry long before it gives up.) */
		is_quiet = !is_late && probe_ns && !ep->passive &&
			   ep->state == EP_READY && ep->post_head &&
			   !ep->probing && now - ep->progress_ns >= probe_ns;
		if (is_quiet)
			ep->probing = true;
		pthread_mutex_unlock(&ep->lock);
		if (is_late && rdma_ep_tryget(ep))
			late[n++] = ep;
		else if (is_quiet && rdma_ep_tryget(ep))
			quiet[nq++] = ep;
	}
	pthread_mutex_unlock(&c->eps_lock);
	for (unsigned i = 0; i < nq; i++) {
		rdma_ep_queue(c->t, quiet[i]);
		rdma_ep_put(quiet[i]);
	}
	for (unsigned i = 0; i < n; i++) {
		mc_log_debug("te",
			     "rdma %s -> %s: a request is past its "
			     "deadline; endpoint reset",
			     late[i]->local_path, late[i]->remote_path);
		rdma_ep_break(late[i], -ETIMEDOUT);
		rdma_ep_put(late[i]);
	}
}

int rdma_submit(struct rdma_transport *t, struct te_task *task)
{
	uint64_t len = task->req.length, size = t->s.slice_size;
	uint64_t n = (len + size - 1) / size, tail = len % size;
	uintptr_t local = (uintptr_t)task->req.local;
	struct rdma_ep *eps[8];
	unsigned n_eps = 0;

	/* A short tail joins the slice before it (upstream's rule). */
	if (n > 1 && tail && tail <= size / t->s.fragment_ratio)
		n--;
	if (n > 1)
		te__task_add_slices(task, (int)(n - 1));
	/* Queue every slice, then post each endpoint's share at once. */
	for (uint64_t i = 0; i < n; i++) {
		struct rdma_slice *s = calloc(1, sizeof(*s));
		uint64_t off = i * size;
		struct rdma_ep *ep;
		unsigned k;

		if (!s) {
			te__slice_done(task, 0, -ENOMEM);
			continue;
		}
		s->task = task;
		s->local = local + off;
		s->remote = task->req.target_addr + off;
		s->len = i == n - 1 ? len - off : size;
		ep = slice_queue(t, s);
		if (!ep)
			continue;
		for (k = 0; k < n_eps && eps[k] != ep; k++)
			;
		if (k < n_eps)
			rdma_ep_put(ep); /* already ours */
		else if (n_eps < 8)
			eps[n_eps++] = ep;
		else
			post_and_put(ep);
	}
	for (unsigned k = 0; k < n_eps; k++)
		post_and_put(eps[k]);
	return 0;
}
