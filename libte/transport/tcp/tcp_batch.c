/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Batches of answers to small READs (struct tcp_reply_batch): a served
 * connection's thread and the reactor gather the answers to the READs
 * already buffered and send them with one sendmsg(), taking reg_lock once
 * for the whole batch.
 */
#include <stdlib.h>

#include "mc_time.h"
#include "tcp_int.h"

int tcp_batch_flush(struct tcp_transport *t, struct tcp_conn *c,
		    struct tcp_reply_batch *b, bool wait)
{
	uint64_t deadline = mc_mono_ns() + t->base.eng->timeout_ms * 1000000ULL;
	int rc = 0;

	if (b->cnt && wait)
		rc = tcp_io_sendv(c->fd, b->iov, b->cnt, deadline);
	else if (b->cnt)
		rc = tcp_io_sendv_now(c->fd, b->iov, b->cnt, &c->pend,
				      &c->pend_len);
	if (b->locked)
		pthread_rwlock_unlock(&t->base.eng->reg_lock);
	if (!rc)
		atomic_fetch_add(&t->base.served_bytes, b->bytes);
	b->cnt = 0;
	b->n = 0;
	b->bytes = 0;
	b->locked = false;
	return rc;
}

bool tcp_batch_add(struct tcp_transport *t, struct tcp_reply_batch *b,
		   const struct tcp_hdr *h, uint64_t max_bytes)
{
	struct te_engine *eng = t->base.eng;
	struct te_memreg *r;

	if (h->op != TCP_OP_READ || !h->size || b->n == TCP_BATCH_MAX ||
	    b->bytes > max_bytes || h->size > max_bytes - b->bytes)
		return false;
	if (!b->locked) {
		pthread_rwlock_rdlock(&eng->reg_lock);
		b->locked = true;
	}
	r = te__reg_find_remote(eng, h->addr, h->size);
	if (!r || r->gpu)
		return false;
	if (h->v2)
		b->iov[b->cnt++] = (struct iovec){ b->ok, TCP_STATUS_LEN };
	b->iov[b->cnt++] =
		(struct iovec){ (void *)(uintptr_t)h->addr, h->size };
	b->n++;
	b->bytes += h->size;
	return true;
}
