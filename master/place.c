/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replica placement: which segments receive the replicas of a new object.
 * Preferred segments first, then the strategy (--allocation_strategy):
 * random (a random start, walking on), free_ratio_first (most free space
 * first) or local_first (the writer's own segments, then its host's, then
 * random). Replicas of one object always land on distinct segments.
 */
#include <stdlib.h>
#include <string.h>

#include "master.h"
#include "mst_util.h"
#include "place.h"

static bool taken(const struct mst_replica *out, unsigned n,
		  const struct mst_segment *s)
{
	for (unsigned i = 0; i < n; i++)
		if (out[i].seg == s)
			return true;
	return false;
}

static bool try_seg(struct master *m, struct mst_segment *s, uint64_t size,
		    struct mst_replica *out, unsigned *n)
{
	struct mc_alloc_block *b;

	if (!s->owner || taken(out, *n, s))
		return false;
	if (mc_alloc_alloc(s->alloc, size, &b))
		return false;
	out[*n].seg = s;
	out[*n].blk = b;
	s->n_replicas++;
	m->allocated += mc_alloc_block_size(b);
	m->placed++;
	(*n)++;
	return true;
}

void mst_replica_free(struct master *m, struct mst_replica *r)
{
	if (!r->seg || !r->blk)
		return;
	m->allocated -= mc_alloc_block_size(r->blk);
	mc_alloc_free(r->seg->alloc, r->blk);
	r->seg->n_replicas--;
	r->seg = NULL;
	r->blk = NULL;
}

static double free_ratio(const struct mst_segment *s)
{
	uint64_t cap = mc_alloc_capacity(s->alloc);

	return cap ? (double)(cap - mc_alloc_used(s->alloc)) / (double)cap : 0;
}

static int by_free_ratio(const void *a, const void *b)
{
	double fa = free_ratio(*(struct mst_segment *const *)a);
	double fb = free_ratio(*(struct mst_segment *const *)b);

	return (fa < fb) - (fa > fb);
}

/* Rank for local_first: 0 the writer's own, 1 same host, 2 others. */
static int locality(struct master *m, const struct mst_segment *s,
		    const uint8_t *client, const char *host)
{
	(void)m;
	if (s->owner && !memcmp(s->owner->id, client, MST_ID_LEN))
		return 0;
	if (host && s->host_id && !strcmp(host, s->host_id))
		return 1;
	return 2;
}

unsigned mst_place(struct master *m, const uint8_t *client, uint64_t size,
		   unsigned want, const struct mst_put_cfg *pc,
		   struct mst_replica *out)
{
	struct mst_segment **arr, *s;
	size_t nseg = 0, start;
	unsigned n = 0;
	const char *host = NULL;

	for (size_t i = 0; pc && i < pc->n_preferred && n < want; i++)
		for (s = m->segments; s && n < want; s = s->next)
			if ((s->name && !strcmp(s->name, pc->preferred[i])) ||
			    (s->endpoint &&
			     !strcmp(s->endpoint, pc->preferred[i])))
				try_seg(m, s, size, out, &n);
	if (n >= want)
		return n;
	for (s = m->segments; s; s = s->next) {
		if (s->owner)
			nseg++;
		if (s->owner && !memcmp(s->owner->id, client, MST_ID_LEN))
			host = s->host_id;
	}
	if (!nseg)
		return n;
	arr = malloc(nseg * sizeof(*arr));
	if (!arr)
		return n;
	nseg = 0;
	for (s = m->segments; s; s = s->next)
		if (s->owner)
			arr[nseg++] = s;
	start = (size_t)(mst_rand(m) % nseg);
	if (m->cfg.strategy == MST_FREE_RATIO_FIRST) {
		qsort(arr, nseg, sizeof(*arr), by_free_ratio);
		start = 0;
	}
	if (m->cfg.strategy == MST_LOCAL_FIRST) {
		for (int rank = 0; rank < 2 && n < want; rank++)
			for (size_t i = 0; i < nseg && n < want; i++) {
				s = arr[(start + i) % nseg];
				if (locality(m, s, client, host) == rank)
					try_seg(m, s, size, out, &n);
			}
	}
	for (size_t i = 0; i < nseg && n < want; i++)
		try_seg(m, arr[(start + i) % nseg], size, out, &n);
	free(arr);
	return n;
}
