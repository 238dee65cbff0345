/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Eviction: the policy the service applies when memory runs short. It runs
 * for real pressure only:
 *  - the watermark (mst_evict_tick): above --eviction_high_watermark_ratio
 *    of the pool, objects go until usage is eviction_ratio below it, a
 *    bounded run per tick (10 ms) so the lock is never held for long.
 *    It makes room with older data only: the most recently read or
 *    written object that holds memory stays, even when the pool stays
 *    above the watermark so (a file that fills the pool, just written,
 *    is not evicted the moment its close publishes it; a put that needs
 *    the room later evicts for itself);
 *  - a put that finds no room (mst_evict_for_put): objects go from the one
 *    segment that can hold the new object once its evictable objects are
 *    gone, and only as many as that takes. Whether it can is tried first,
 *    in the allocator only: the candidates' blocks on that segment are
 *    freed one by one, least recent first, until a free range is as long
 *    as the put (they need not be adjacent, and pinned, leased or held
 *    objects may split the segment so that none ever is), then reserved
 *    again where they were; only then do those candidates go. A put that
 *    no segment could hold even then evicts nothing and fails at once.
 * Never during a restart's quarantine (readers from before the restart
 * may hold any object). Every eviction is logged with its reason (one
 * line per second at most, counting what the others evicted).
 *
 * Candidates, least recently read (or written) first (the recency list,
 * objmap.c): objects that are not hard pinned, not held open, not under a
 * read lease, not under a publish lease (a put with
 * PutStartRequest.publish, complete and not renamed yet: the mount's file
 * between its commit and the rename that publishes it, for at most
 * lease_ttl after the commit), and not under an existence lease unless
 * the object went unread for exist_max_idle (so polling batch_is_exist
 * cannot pin the pool: upstream's #2187). Soft-pinned objects go only when nothing else
 * is left and --allow_evict_soft_pinned_objects is on. A member of a
 * group (groups.h) is a candidate only when every member is, and takes
 * the whole group with it. An empty object (no memory) is never one:
 * evicting it frees nothing (it was the empty version a shell's `> f`
 * publishes, evicted while the write of f's content was in progress).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "db.h"
#include "evict.h"
#include "groups.h"
#include "master.h"
#include "master.pb-c.h"
#include "mc_log.h"
#include "mst_util.h"
#include "objects.h"
#include "place.h"

#define LOG_EVERY_MS 1000
#define EVICT_RUN_MAX 4096 /* objects one watermark run takes */

static bool evictable(struct master *m, const struct mst_object *o,
		      uint64_t now, uint64_t wall, bool soft_ok)
{
	if (o->hard_pin || o->holds || o->read_lease_until > now ||
	    o->publish_until > now)
		return false;
	if (o->lease_until > now &&
	    now - o->last_access < m->cfg.exist_max_idle_ms)
		return false;
	if (o->soft_pin_until > wall && !soft_ok)
		return false;
	return true;
}

/* Whether o may go in this pass: o and, for a member of a group, every
 * readable member (a group goes whole or not at all). The verdict is
 * kept per group for the pass (pass: m's counter, fresh per pass). */
static bool may_go(struct master *m, const struct mst_object *o, uint64_t now,
		   uint64_t wall, bool soft_ok, uint64_t pass)
{
	struct mst_group *g = o->group;

	if (!g)
		return evictable(m, o, now, wall, soft_ok);
	if (g->pass != pass) {
		g->pass = pass;
		g->evictable = true;
		for (const struct mst_object *x = g->head; x; x = x->grp_next)
			if (x->state == MST_COMPLETE && !x->orphan &&
			    !evictable(m, x, now, wall, soft_ok)) {
				g->evictable = false;
				break;
			}
	}
	return g->evictable;
}

/* Bytes o's eviction frees: on seg, or everywhere (seg NULL). */
static uint64_t frees(const struct mst_object *o, const struct mst_segment *seg)
{
	uint64_t b = 0;

	for (unsigned i = 0; i < o->n_repl; i++)
		if (o->repl[i].blk && (!seg || o->repl[i].seg == seg))
			b += mc_alloc_block_size(o->repl[i].blk);
	return b;
}

/* Log what was evicted and why, at most once a second: evictions in
 * between are counted into the next line (the tick writes it). */
static void note(struct master *m, uint64_t keys, uint64_t bytes,
		 const char *why)
{
	struct mst_evict_log *l = &m->evict_log;
	uint64_t now = mst_now();

	if (keys) {
		l->keys += keys;
		l->bytes += bytes;
		l->runs++;
		snprintf(l->why, sizeof(l->why), "%s", why);
	}
	if (!l->runs || now - l->at < LOG_EVERY_MS)
		return;
	if (l->runs == 1)
		mc_log_notice("master",
			      "evicted %" PRIu64 " objects (%" PRIu64
			      " bytes) %s",
			      l->keys, l->bytes, l->why);
	else
		mc_log_notice("master",
			      "evicted %" PRIu64 " objects (%" PRIu64
			      " bytes) in %" PRIu64 " runs, the last %s",
			      l->keys, l->bytes, l->runs, l->why);
	l->at = now;
	l->keys = l->bytes = l->runs = 0;
}

/* Bytes that evicting o (with its group) frees on seg. */
static uint64_t group_frees(const struct mst_object *o,
			    const struct mst_segment *seg)
{
	uint64_t b = 0;

	if (!o->group)
		return frees(o, seg);
	for (const struct mst_object *x = o->group->head; x; x = x->grp_next)
		if (x->state == MST_COMPLETE && !x->orphan && !x->evict_mark)
			b += frees(x, seg);
	return b;
}

/* A candidate's block on the segment, freed for a trial (fit mode). */
struct trial_blk {
	struct mst_replica *r;
	uint64_t off, len;
};

/* What one eviction run takes. */
struct victims {
	struct mst_object **v;
	uint64_t n, cap, freed; /* freed: bytes on seg (or everywhere) */
	const struct mst_segment *seg;
	int err;
	/* Fit mode (fit > 0): pick until seg has a free range of fit bytes,
	 * the picks' blocks on seg freed in the allocator meanwhile
	 * (tried[]) and reserved again at the end (untry). */
	uint64_t fit;
	bool fits;
	struct trial_blk *tried;
	uint64_t n_tried, cap_tried;
};

/* Fit mode: free x's blocks on p->seg for the trial. */
static void try_free(struct victims *p, struct mst_object *x)
{
	struct mst_segment *seg = (struct mst_segment *)p->seg;

	for (unsigned i = 0; i < x->n_repl && !p->err; i++) {
		struct mst_replica *r = &x->repl[i];

		if (!r->blk || r->seg != seg)
			continue;
		if (p->n_tried == p->cap_tried) {
			uint64_t cap = p->cap_tried ? 2 * p->cap_tried : 64;
			struct trial_blk *nt =
				realloc(p->tried, cap * sizeof(*nt));
			if (!nt) {
				p->err = -ENOMEM;
				return;
			}
			p->tried = nt;
			p->cap_tried = cap;
		}
		p->tried[p->n_tried++] =
			(struct trial_blk){ r, mc_alloc_block_offset(r->blk),
					    mc_alloc_block_size(r->blk) };
		mc_alloc_free(seg->alloc, r->blk);
		r->blk = NULL;
	}
	if (!p->err && mc_alloc_largest_free(seg->alloc) >= p->fit)
		p->fits = true;
}

static int by_offset(const void *a, const void *b)
{
	const struct trial_blk *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* Fit mode: every block freed for the trial reserved again where it was
 * (in offset order: the allocator's reserve is O(1) so). Nothing else
 * allocated meanwhile (the master's lock is held), so each range is free. */
static void untry(struct victims *p)
{
	struct mst_segment *seg = (struct mst_segment *)p->seg;

	if (p->n_tried) /* tried is NULL when nothing was: qsort's nonnull */
		qsort(p->tried, p->n_tried, sizeof(*p->tried), by_offset);
	for (uint64_t i = 0; i < p->n_tried; i++) {
		struct trial_blk *t = &p->tried[i];

		if (mc_alloc_reserve(seg->alloc, t->off, t->len, &t->r->blk)) {
			mc_log_err("master",
				   "eviction: cannot reserve %" PRIu64
				   " bytes at offset %" PRIu64
				   " again on segment %s",
				   t->len, t->off, seg->name ? seg->name : "");
			abort(); /* the allocator lost track of them */
		}
	}
	free(p->tried);
	p->tried = NULL;
	p->n_tried = p->cap_tried = 0;
}

static void pick_one(struct mst_object *x, void *arg)
{
	struct victims *p = arg;

	if (p->err || x->evict_mark)
		return;
	if (p->n == p->cap) {
		struct mst_object **nv =
			realloc(p->v, 2 * p->cap * sizeof(*p->v));
		if (!nv) {
			p->err = -ENOMEM;
			return;
		}
		p->v = nv;
		p->cap *= 2;
	}
	x->evict_mark = true;
	p->v[p->n++] = x;
	p->freed += frees(x, p->seg);
	if (p->fit)
		try_free(p, x);
}

/* The most recently read or written object that holds memory (NULL:
 * none): the watermark leaves it (with its group) alone. */
static const struct mst_object *newest(const struct master *m)
{
	const struct mst_object *o = m->lru_tail;

	while (o && !frees(o, NULL))
		o = o->lru_prev;
	return o;
}

static bool kept(const struct mst_object *o, const struct mst_object *keep)
{
	return keep && (o == keep || (o->group && o->group == keep->group));
}

/* Evict candidates (only those with a replica on seg, when seg is set)
 * until bytes were freed (on seg) or count objects went, whichever comes
 * first (0: no limit on that measure); with fit (and seg), those that
 * leave seg a free range of fit bytes, or none when all of them would
 * not. An object that frees nothing (empty) never goes: it makes no
 * room. keep (with its group) does not go either. Returns the bytes
 * freed. */
static uint64_t evict(struct master *m, const struct mst_segment *seg,
		      uint64_t bytes, uint64_t count, uint64_t fit,
		      const struct mst_object *keep, const char *why)
{
	uint64_t now = mst_now(), wall = mst_wall();
	struct victims p = { .cap = 256, .seg = seg, .fit = seg ? fit : 0 };

	if (now < m->quarantine_until)
		return 0;
	p.v = malloc(p.cap * sizeof(*p.v));
	if (!p.v)
		return 0;
	m->stats.eviction_attempts++;
	for (int pass = 0; pass < 2 && !p.err; pass++) {
		bool soft = pass == 1;
		uint64_t pid = ++m->evict_pass;
		if (soft && !m->cfg.allow_evict_soft_pinned)
			break;
		for (struct mst_object *o = m->lru_head; o && !p.err;
		     o = o->lru_next) {
			if ((bytes && p.freed >= bytes) ||
			    (count && p.n >= count) || p.fits)
				break;
			if (o->evict_mark || kept(o, keep) ||
			    !may_go(m, o, now, wall, soft, pid))
				continue;
			if ((o->soft_pin_until > wall) != soft)
				continue; /* pass 0: unpinned; 1: soft pinned */
			if (!group_frees(o, seg))
				continue; /* empty: evicting it frees nothing */
			/* o, or o's whole group */
			mst_group_each(o, pick_one, &p);
		}
		if ((bytes && p.freed >= bytes) || (count && p.n >= count) ||
		    p.fits)
			break;
	}
	for (uint64_t i = 0; i < p.n; i++)
		p.v[i]->evict_mark = false;
	if (p.fit) {
		untry(&p);
		if (!p.fits || p.err)
			p.n = p.freed = 0; /* it would not fit: nothing goes */
	}
	if (p.n && mst_drop_objects(m, p.v, p.n, MCRPC__EVENT_TYPE__EV_EVICT)) {
		mc_log_err("master", "eviction not recorded; nothing evicted");
		p.n = p.freed = 0;
	}
	free(p.v);
	if (!p.n)
		return 0;
	m->stats.eviction_successes++;
	m->stats.evicted_keys += p.n;
	m->stats.evicted_bytes += p.freed;
	note(m, p.n, p.freed, why);
	return p.freed;
}

/* Room on s for a put of size: free bytes plus evictable ones tallied so
 * far (s->evictable), 0 when s cannot take it at all. */
static uint64_t room(const struct mst_segment *s, uint64_t size)
{
	if (!mst_seg_placeable(s) || mc_alloc_capacity(s->alloc) < size)
		return 0;
	return mc_alloc_capacity(s->alloc) - mc_alloc_used(s->alloc) +
	       s->evictable;
}

/*
 * The segment a put of size evicts on: the first whose free bytes plus
 * what its evictable objects hold reach size, tallying candidates from the
 * least recent on, so only the coldest part of the recency list is read
 * (the whole of it only when no segment can hold the put). A segment
 * that has the bytes free already (fragmented) is taken first, the one
 * with the most room.
 */
static bool skipped(const struct mst_segment *s,
		    const struct mst_segment *const *skip, unsigned n_skip)
{
	for (unsigned i = 0; i < n_skip; i++)
		if (skip[i] == s)
			return true;
	return false;
}

static struct mst_segment *pick_segment(struct master *m, uint64_t size,
					const struct mst_segment *const *skip,
					unsigned n_skip)
{
	uint64_t now = mst_now(), wall = mst_wall(), pid = ++m->evict_pass;
	bool soft = m->cfg.allow_evict_soft_pinned;
	struct mst_segment *best = NULL;
	uint64_t best_room = 0;

	for (struct mst_segment *s = m->segments; s; s = s->next) {
		s->evictable = 0;
		if (skipped(s, skip, n_skip))
			continue;
		if (room(s, size) >= size && room(s, size) > best_room) {
			best = s;
			best_room = room(s, size);
		}
	}
	for (struct mst_object *o = m->lru_head; o && !best; o = o->lru_next) {
		if (!may_go(m, o, now, wall, soft, pid))
			continue;
		for (unsigned i = 0; i < o->n_repl; i++) {
			struct mst_segment *s = o->repl[i].seg;

			if (!s || !o->repl[i].blk || skipped(s, skip, n_skip))
				continue;
			s->evictable += mc_alloc_block_size(o->repl[i].blk);
			if (!best && room(s, size) >= size)
				best = s;
		}
	}
	return best;
}

/* Segments a put tries before it gives up (each a walk of the recency
 * list at worst). */
#define FIT_TRIES 4

bool mst_evict_for_put(struct master *m, uint64_t size)
{
	const struct mst_segment *tried[FIT_TRIES];
	struct mst_segment *best;
	char why[160];

	/* --eviction_ratio 0 turns eviction off, for puts too (upstream
	 * evicts only with a ratio above 0): a full pool is -200. */
	if (!size || mst_now() < m->quarantine_until ||
	    m->cfg.eviction_ratio <= 0)
		return false;
	for (unsigned t = 0; t < FIT_TRIES; t++) {
		best = pick_segment(m, size, tried, t);
		if (!best)
			return false; /* no segment could hold it */
		if (mc_alloc_largest_free(best->alloc) >= size)
			return true;
		snprintf(why, sizeof(why),
			 "for a put of %" PRIu64 " bytes on %s", size,
			 best->name ? best->name : "a segment");
		/* Those that leave a free range of size, or none. */
		(void)evict(m, best, 0, 0, size, NULL, why);
		if (mc_alloc_largest_free(best->alloc) >= size)
			return true;
		tried[t] = best; /* pinned objects split it: the next */
	}
	return false;
}

void mst_evict_tick(struct master *m)
{
	double hw = m->cfg.high_watermark, er = m->cfg.eviction_ratio;
	double cap = (double)m->capacity;
	char why[96];

	if (m->capacity && er > 0 && (double)m->allocated > hw * cap) {
		double target = (hw - er) * cap;
		if (target < 0)
			target = 0;
		snprintf(why, sizeof(why),
			 "because the pool was %.1f%% full, above the "
			 "high watermark %.1f%%",
			 100.0 * (double)m->allocated / cap, 100.0 * hw);
		/* At most EVICT_RUN_MAX objects per tick (the lock is held
		 * throughout): the next tick goes on. */
		evict(m, NULL, (uint64_t)((double)m->allocated - target),
		      EVICT_RUN_MAX, 0, newest(m), why);
	}
	note(m, 0, 0, NULL); /* what waited for its second */
}
