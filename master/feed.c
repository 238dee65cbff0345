/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The change feed: numbered put, remove, rename, evict and lost events in
 * a ring, so mounts invalidate their caches by following a cursor. The
 * epoch changes on every master start; a cursor from another epoch, or one
 * older than the ring, gets reset=true (invalidate everything).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "feed.h"
#include "master.h"
#include "mc_time.h"

int mst_feed_init(struct mst_feed *f, size_t cap)
{
	f->ring = calloc(cap, sizeof(*f->ring));
	if (!f->ring)
		return -1;
	f->cap = cap;
	f->head = f->n = 0;
	f->last_seq = 0;
	/* Long polls wait on it by the monotonic clock: a stepped wall
	 * clock made a 1 s Watch wait as long as the step. */
	mc_cond_init_mono(&f->cond);
	return 0;
}

void mst_feed_free(struct mst_feed *f)
{
	for (size_t i = 0; i < f->cap && f->ring; i++) {
		free(f->ring[i].key);
		free(f->ring[i].to);
	}
	free(f->ring);
	f->ring = NULL;
	pthread_cond_destroy(&f->cond);
}

static char *dup_n(const char *s, size_t n)
{
	char *d;

	if (!s)
		return NULL;
	d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

void mst_feed_emit(struct master *m, int type, const char *key, size_t key_len,
		   const char *to, size_t to_len, uint64_t version)
{
	struct mst_feed *f = &m->feed;
	struct mst_event *e;
	size_t slot = (f->head + f->n) % f->cap;

	if (f->n == f->cap) {
		slot = f->head;
		f->head = (f->head + 1) % f->cap;
	} else {
		f->n++;
	}
	e = &f->ring[slot];
	free(e->key);
	free(e->to);
	e->seq = ++f->last_seq;
	e->type = type;
	e->key = dup_n(key, key_len);
	e->to = dup_n(to, to_len);
	e->version = version;
	pthread_cond_broadcast(&f->cond);
}
