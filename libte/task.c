/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tasks end here. A task counts its unfinished slices; the transport
 * that finishes the last one (te__slice_done) sets the final status,
 * counts it in the transport's counters, drops the task's references and
 * wakes te_batch_wait().
 *
 * This is the service the transports call back into: it calls nothing
 * above it (only te__peer_put and te__reg_put to drop references), so a
 * transport depends on task.c, peer.c, memreg.c and copy.c, never on
 * batch.c, engine.c or the handshake.
 * Threads: any transport thread; task progress is atomic, the batch's
 * lock guards only its condition variable.
 */
#include <errno.h>

#include "te_int.h"

static void count(struct te_transport *tp, enum te_opcode op, uint64_t bytes)
{
	if (op == TE_READ) {
		atomic_fetch_add(&tp->read_bytes, bytes);
		atomic_fetch_add(&tp->read_requests, 1);
	} else {
		atomic_fetch_add(&tp->write_bytes, bytes);
		atomic_fetch_add(&tp->write_requests, 1);
	}
}

/* A staging sub-task (stage.c): no batch, no counters (its parent
 * counts the whole request). */
static void sub_finish(struct te_task *t)
{
	int err = atomic_load(&t->error);

	if (t->peer)
		te__peer_put(t->peer);
	t->peer = NULL;
	atomic_store(&t->status, !err			    ? TE_COMPLETED :
				 atomic_load(&t->timed_out) ? TE_TIMEOUT :
							      TE_FAILED);
	t->on_done(t);
}

static void task_finish(struct te_task *t)
{
	struct te_batch *b = t->batch;
	/* tp is -1 when the request failed before a transport was chosen. */
	struct te_transport *tp = t->tp >= 0 ? b->eng->tps[t->tp] : NULL;
	int err = atomic_load(&t->error);
	int st = !err			    ? TE_COMPLETED :
		 atomic_load(&t->timed_out) ? TE_TIMEOUT :
					      TE_FAILED;

	if (tp) {
		if (err)
			atomic_fetch_add(&tp->failed_requests, 1);
		else
			count(tp, t->req.opcode, t->req.length);
	}
	if (t->local_reg)
		te__reg_put(t->local_reg);
	if (t->peer)
		te__peer_put(t->peer);
	t->local_reg = NULL;
	t->peer = NULL;
	atomic_store(&t->status, st);
	pthread_mutex_lock(&b->lock);
	if (atomic_fetch_sub(&b->inflight, 1) == 1)
		pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

void te__task_add_slices(struct te_task *task, int n)
{
	atomic_fetch_add(&task->pending, n);
}

void te__slice_done(struct te_task *task, uint64_t bytes, int rc)
{
	if (rc < 0) {
		int zero = 0;
		atomic_compare_exchange_strong(&task->error, &zero, rc);
		if (rc == -ETIMEDOUT)
			atomic_store(&task->timed_out, true);
	}
	atomic_fetch_add(&task->transferred, bytes);
	if (atomic_fetch_sub(&task->pending, 1) == 1) {
		if (task->on_done)
			sub_finish(task);
		else
			task_finish(task);
	}
}
