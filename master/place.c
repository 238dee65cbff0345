/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replica placement: which segments receive the replicas of a new object.
 * Preferred segments first, then the strategy (--allocation_strategy):
 * random (a random start, walking on), free_ratio_first (most free space
 * first) or local_first (the writer's own segments, then its host's, then
 * random). Replicas of one object always land on distinct segments.
 *
 * A writer that could not write to a segment (its member killed, its host
 * cut off) names it in its next PutStarts (PutStartRequest.unreachable):
 * that put's replicas never go there, and the segment's owner is marked
 * so that every put goes elsewhere while there is room, until the owner
 * pings again (alive after all) or is dropped after client_ttl. Without
 * it, a dead member took its share of new replicas until client_ttl and
 * each of those puts failed (TRANSFER_FAIL).
 */
#include <stdlib.h>
#include <string.h>

#include "master.h"
#include "mc_log.h"
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

bool mst_seg_placeable(const struct mst_segment *s)
{
	return s->owner && (!s->fenced_until || mst_now() >= s->fenced_until);
}

/* pc's writer could not reach s. */
static bool avoided(const struct mst_put_cfg *pc, const struct mst_segment *s)
{
	for (size_t i = 0; pc && i < pc->n_avoid; i++)
		if ((s->endpoint && !strcmp(s->endpoint, pc->avoid[i])) ||
		    (s->name && !strcmp(s->name, pc->avoid[i])))
			return true;
	return false;
}

/* marked: a segment another writer could not reach may be taken. */
static bool try_seg(struct master *m, struct mst_segment *s, uint64_t size,
		    const struct mst_put_cfg *pc, bool marked,
		    struct mst_replica *out, unsigned *n)
{
	struct mc_alloc_block *b;

	if (!mst_seg_placeable(s) || taken(out, *n, s) ||
	    (!marked && s->owner->unreachable_at) || avoided(pc, s))
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
	m->frees++;
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

/* The segments that have an owner, as an array: rebuilt only when the
 * segments or their owners changed (m->view_version moves with every such
 * change: segments.c), so a put does not walk every segment. NULL when
 * out of memory. */
static struct mst_segment **owned(struct master *m, size_t *n)
{
	struct mst_place_cache *c = &m->place;
	size_t k = 0;

	if (c->valid && c->version == m->view_version) {
		*n = c->n;
		return c->arr;
	}
	for (struct mst_segment *s = m->segments; s; s = s->next)
		k++;
	if (k > c->cap) {
		struct mst_segment **a = realloc(c->arr, k * sizeof(*a));

		if (!a)
			return NULL;
		c->arr = a;
		c->cap = k;
	}
	c->n = 0;
	for (struct mst_segment *s = m->segments; s; s = s->next)
		if (s->owner)
			c->arr[c->n++] = s;
	c->version = m->view_version;
	c->valid = true;
	*n = c->n;
	return c->arr;
}

void mst_place_cache_free(struct master *m)
{
	free(m->place.arr);
	m->place = (struct mst_place_cache){ 0 };
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
				try_seg(m, s, size, pc, false, out, &n);
	if (n >= want)
		return n;
	arr = owned(m, &nseg);
	if (!arr || !nseg)
		return n;
	start = (size_t)(mst_rand(m) % nseg);
	if (m->cfg.strategy == MST_FREE_RATIO_FIRST) {
		/* The cache's order does not matter to the others. */
		qsort(arr, nseg, sizeof(*arr), by_free_ratio);
		start = 0;
	}
	if (m->cfg.strategy == MST_LOCAL_FIRST) {
		for (size_t i = 0; i < nseg; i++)
			if (!memcmp(arr[i]->owner->id, client, MST_ID_LEN))
				host = arr[i]->host_id;
		for (int rank = 0; rank < 2 && n < want; rank++)
			for (size_t i = 0; i < nseg && n < want; i++) {
				s = arr[(start + i) % nseg];
				if (locality(m, s, client, host) == rank)
					try_seg(m, s, size, pc, false, out, &n);
			}
	}
	for (size_t i = 0; i < nseg && n < want; i++)
		try_seg(m, arr[(start + i) % nseg], size, pc, false, out, &n);
	/* Only segments another writer could not reach have room: one of
	 * them rather than no room at all (the report may be that writer's
	 * own trouble). */
	for (size_t i = 0; i < nseg && !n; i++)
		try_seg(m, arr[(start + i) % nseg], size, pc, true, out, &n);
	return n;
}

void mst_note_unreachable(struct master *m, const char *endpoint)
{
	for (struct mst_segment *s = m->segments; s; s = s->next) {
		if (!s->owner || s->owner->unreachable_at ||
		    !((s->endpoint && !strcmp(s->endpoint, endpoint)) ||
		      (s->name && !strcmp(s->name, endpoint))))
			continue;
		s->owner->unreachable_at = mst_now();
		m->stats.unreachable_reports++;
		mc_log_notice("master",
			      "a writer could not reach segment %s (%s): new "
			      "replicas go elsewhere until its owner pings",
			      s->name ? s->name : "?", endpoint);
	}
}

void mst_note_reachable(struct master *m, struct mst_client *c)
{
	(void)m;
	if (!c->unreachable_at)
		return;
	c->unreachable_at = 0;
	mc_log_info("master",
		    "a client reported unreachable pings again: its segments "
		    "take new replicas again");
}
