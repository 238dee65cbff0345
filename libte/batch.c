/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Batches: the public batch API. Submitting resolves each request's
 * segment to a peer (peer.c), checks the local range (memreg.c), picks
 * the first transport that reaches it and hands the task over through
 * its submit op (or to GPU staging, stage.c, when the local buffer is
 * device memory); the task ends in task.c. No thread ever spins: waiting
 * is a condition variable that task.c signals.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mc_time.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

int te_batch_create(struct te_engine *eng, unsigned capacity,
		    struct te_batch **out)
{
	struct te_batch *b;

	if (!capacity || capacity > (1u << 20))
		return -EINVAL;
	if (te__forked(eng))
		return MC_EFORKED;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->tasks = calloc(capacity, sizeof(*b->tasks));
	if (!b->tasks) {
		free(b);
		return -ENOMEM;
	}
	b->eng = eng;
	b->capacity = capacity;
	pthread_mutex_init(&b->lock, NULL);
	mc_cond_init_mono(&b->cond);
	*out = b;
	return 0;
}

void te_batch_set_write_window(struct te_batch *b, unsigned window_ms)
{
	b->write_window_ms = window_ms;
}

int te_batch_destroy(struct te_batch *b)
{
	if (!b)
		return 0;
	if (te__forked(b->eng))
		return MC_EFORKED;
	if (atomic_load(&b->inflight))
		return -EBUSY;
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
	free(b->tasks);
	free(b);
	return 0;
}

int te_batch_reset(struct te_batch *b)
{
	if (te__forked(b->eng))
		return MC_EFORKED;
	if (atomic_load(&b->inflight))
		return -EBUSY;
	atomic_store(&b->n, 0);
	return 0;
}

int te__pick_transport(struct te_engine *eng, struct te_peer *peer,
		       const struct te_request *req)
{
	if (eng->forced_tp >= 0) {
		struct te_transport *tp = eng->tps[eng->forced_tp];
		if (tp && tp->ops->reachable(tp, peer, req))
			return eng->forced_tp;
		/* This engine's own memory: copied, as upstream's local
		 * shortcut, whatever transport is forced (MC_FORCE_TCP puts
		 * into a client's own segment failed with TRANSFER_FAIL). */
		tp = eng->tps[TE_TP_LOCAL];
		return peer == eng->self && tp &&
				       tp->ops->reachable(tp, peer, req) ?
			       TE_TP_LOCAL :
			       -1;
	}
	/* The registry's order is the order of preference. */
	for (int i = 0; i < TE_TP_COUNT; i++) {
		struct te_transport *tp = eng->tps[i];
		if (tp && tp->ops->reachable(tp, peer, req))
			return i;
	}
	return -1;
}

/*
 * Resolve task t's peer and transport. true: ready to hand over; false:
 * it ended here (no peer, nothing to move, no transport reaches it).
 */
static bool resolve(struct te_engine *eng, struct te_task *t)
{
	int err;

	t->peer = te__segment_peer_at(t->req.target, t->req.target_addr,
				      t->req.length, t->req.owner, &err);
	t->req.owner = NULL; /* read here only (te_request) */
	if (!t->peer) {
		/* Stale and not resolvable again (peer gone), or not the
		 * owner's memory. */
		t->tp = eng->forced_tp >= 0 ? eng->forced_tp : TE_TP_TCP;
		te__slice_done(t, 0, err);
		return false;
	}
	if (!t->req.length) {
		t->tp = TE_TP_LOCAL;
		te__slice_done(t, 0, 0);
		return false;
	}
	t->tp = te__pick_transport(eng, t->peer, &t->req);
	if (t->tp < 0) {
		/*
		 * No transport reaches this range of the cached descriptor:
		 * the peer may have registered more memory or restarted, so
		 * resolve it again on the next use.
		 */
		if (!t->peer->is_self)
			te__peer_invalidate(t->peer);
		t->tp = eng->forced_tp >= 0 ? eng->forced_tp : TE_TP_TCP;
		te__slice_done(t, 0, MC_ENOTSUPPORTED);
		return false;
	}
	return true;
}

/* Give a resolved task to its transport (or to GPU staging). */
static void hand_over(struct te_engine *eng, struct te_task *t)
{
	struct te_transport *tp = eng->tps[t->tp];
	int rc;

	/* GPU memory goes through pinned host buffers, unless the
	 * transport moves it itself (local, cuda_ipc). */
	if (t->local_reg->gpu && !tp->ops->gpu_direct)
		rc = te__stage_submit(eng, t);
	else
		rc = tp->ops->submit(tp, t);
	if (rc)
		te__slice_done(t, 0, rc);
}

/*
 * te_batch_transfer's fast path: every task resolved, all to one peer
 * through one transport that has a run op, none staged through GPU
 * buffers: offer them all to that op. true: it took them (each ends
 * through te__slice_done, on this thread or a later one).
 */
static bool try_run(struct te_engine *eng, struct te_task *tasks, unsigned n)
{
	struct te_transport *tp = tasks[0].ready ? eng->tps[tasks[0].tp] : NULL;
	bool ok = tp && tp->ops->run;

	for (unsigned i = 0; ok && i < n; i++)
		ok = tasks[i].ready && !tasks[i].local_reg->gpu &&
		     tasks[i].tp == tasks[0].tp &&
		     tasks[i].peer == tasks[0].peer;
	return ok && tp->ops->run(tp, tasks, n) == 0;
}

/*
 * Check and start n requests: refuse the whole submission before
 * starting any of it, prepare every task, resolve each, then hand the
 * ready ones over. With `run` the caller waits next, so a transport's
 * run op may carry them on this thread (try_run).
 */
static int submit(struct te_batch *b, const struct te_request *reqs, unsigned n,
		  bool run)
{
	struct te_engine *eng = b->eng;
	unsigned base = atomic_load(&b->n);
	uint64_t deadline, now;

	if (n > b->capacity - base)
		return -E2BIG;
	for (unsigned i = 0; i < n; i++) {
		const struct te_request *r = &reqs[i];
		if ((r->opcode != TE_READ && r->opcode != TE_WRITE) ||
		    !r->target || (r->length && !r->local))
			return -EINVAL;
	}
	/* Refuse the whole submission before starting any of it. */
	for (unsigned i = 0; i < n; i++) {
		struct te_memreg *reg;

		b->tasks[base + i].local_reg = NULL;
		if (!reqs[i].length)
			continue;
		reg = te__reg_find(eng, (uintptr_t)reqs[i].local,
				   reqs[i].length, false);
		if (!reg) {
			for (unsigned j = 0; j < i; j++) {
				struct te_task *t = &b->tasks[base + j];
				if (t->local_reg)
					te__reg_put(t->local_reg);
				t->local_reg = NULL;
			}
			return MC_ENOTREG;
		}
		b->tasks[base + i].local_reg = reg;
	}
	now = mc_mono_ns();
	deadline = now + (uint64_t)eng->timeout_ms * 1000000ULL;
	/*
	 * Every new task is WAITING and counted in flight before b->n makes
	 * it visible: a concurrent te_batch_status() never reads the status
	 * of the batch's previous use, and a concurrent te_batch_wait() does
	 * not return while later requests of this submission are unstarted.
	 */
	for (unsigned i = 0; i < n; i++) {
		struct te_task *t = &b->tasks[base + i];

		t->batch = b;
		t->req = reqs[i];
		t->tp = -1;
		t->peer = NULL;
		t->on_done = NULL;
		t->deadline_ns = deadline;
		t->send_by_ns = b->write_window_ms &&
						t->req.opcode == TE_WRITE ?
					now + b->write_window_ms * 1000000ULL :
					0;
		atomic_store(&t->status, TE_WAITING);
		atomic_store(&t->transferred, 0);
		atomic_store(&t->error, 0);
		atomic_store(&t->timed_out, false);
		atomic_store(&t->pending, 1);
	}
	atomic_fetch_add(&b->inflight, n);
	atomic_store(&b->n, base + n);
	for (unsigned i = 0; i < n; i++) {
		struct te_task *t = &b->tasks[base + i];

		t->ready = resolve(eng, t);
	}
	if (run && n && try_run(eng, &b->tasks[base], n))
		return 0;
	for (unsigned i = 0; i < n; i++)
		if (b->tasks[base + i].ready)
			hand_over(eng, &b->tasks[base + i]);
	return 0;
}

int te_batch_submit(struct te_batch *b, const struct te_request *reqs,
		    unsigned n)
{
	if (te__forked(b->eng))
		return MC_EFORKED;
	return submit(b, reqs, n, false);
}

int te_batch_transfer(struct te_batch *b, const struct te_request *reqs,
		      unsigned n, int timeout_ms)
{
	int rc;

	if (te__forked(b->eng))
		return MC_EFORKED;
	rc = submit(b, reqs, n, true);
	return rc ? rc : te_batch_wait(b, timeout_ms);
}

int te_batch_status(struct te_batch *b, unsigned idx, struct te_status *st)
{
	struct te_task *t;

	if (te__forked(b->eng))
		return MC_EFORKED;
	if (idx >= atomic_load(&b->n))
		return -EINVAL;
	t = &b->tasks[idx];
	st->status = atomic_load(&t->status);
	st->transferred = atomic_load(&t->transferred);
	st->error = st->status == TE_WAITING ? 0 : atomic_load(&t->error);
	return 0;
}

int te_batch_wait(struct te_batch *b, int timeout_ms)
{
	struct timespec ts =
		mc_mono_deadline(timeout_ms >= 0 ? (uint64_t)timeout_ms : 0);
	int rc = 0;

	if (te__forked(b->eng))
		return MC_EFORKED;
	pthread_mutex_lock(&b->lock);
	while (atomic_load(&b->inflight) && rc == 0) {
		if (timeout_ms < 0)
			pthread_cond_wait(&b->cond, &b->lock);
		else if (pthread_cond_timedwait(&b->cond, &b->lock, &ts) ==
			 ETIMEDOUT)
			rc = atomic_load(&b->inflight) ? -ETIMEDOUT : 0;
	}
	pthread_mutex_unlock(&b->lock);
	return rc;
}
