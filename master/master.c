/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's state: creation (restoring segments and complete objects
 * from sqlite), teardown, and the periodic housekeeping of mst_tick().
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "ckpt.h"
#include "db.h"
#include "evict.h"
#include "feed.h"
#include "lifecycle.h"
#include "master.h"
#include "mc_log.h"
#include "mc_map.h"
#include "mc_rpc.h"
#include "mooncake/mc_err.h"
#include "mst_util.h"
#include "objects.h"
#include "groups.h"
#include "objmap.h"
#include "place.h"
#include "slots.h"
#include "segments.h"

/* A replica read from sqlite, reserved in its allocator once all are
 * known: reservations must go in offset order per segment (alloc.h). */
struct pending {
	struct mst_object *obj;
	struct mst_segment *seg;
	uint64_t offset;
	unsigned idx;
};

struct restore {
	struct master *m;
	struct pending *p;
	size_t n, cap;
	uint64_t objects, dropped_replicas, segments, orphans;
	/* The restored segments by id, for the replicas' lookups (built
	 * once they are all read: a list walk per replica is 1,000 steps
	 * with 1,000 segments). */
	struct mst_segment **by_id;
	size_t n_by_id;
};

static int cmp_seg_id(const void *a, const void *b)
{
	return memcmp((*(struct mst_segment *const *)a)->id,
		      (*(struct mst_segment *const *)b)->id, MST_ID_LEN);
}

static struct mst_segment *find_seg(struct restore *r, const uint8_t *id)
{
	size_t lo = 0, hi;

	if (r->n_by_id != r->segments) {
		struct mst_segment **a = realloc(
			r->by_id, (r->segments ? r->segments : 1) * sizeof(*a));
		size_t k = 0;

		if (!a)
			return mst_segment_find(r->m, id);
		for (struct mst_segment *s = r->m->segments;
		     s && k < r->segments; s = s->next)
			a[k++] = s;
		qsort(a, k, sizeof(*a), cmp_seg_id);
		r->by_id = a;
		r->n_by_id = k;
	}
	hi = r->n_by_id;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = memcmp(r->by_id[mid]->id, id, MST_ID_LEN);

		if (!c)
			return r->by_id[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int on_segment(void *arg, const struct mst_db_segment *d)
{
	struct restore *r = arg;
	struct master *m = r->m;
	struct mst_segment *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	memcpy(s->id, d->id, MST_ID_LEN);
	s->name = strdup(d->name ? d->name : "");
	s->endpoint = strdup(d->endpoint ? d->endpoint : "");
	s->protocol = strdup(d->protocol ? d->protocol : "tcp");
	s->host_id = strdup(d->host_id ? d->host_id : "");
	s->size = d->size;
	if (!s->name || !s->endpoint || !s->protocol || !s->host_id ||
	    mc_alloc_create(d->size, &s->alloc)) {
		free(s->name);
		free(s->endpoint);
		free(s->protocol);
		free(s->host_id);
		free(s);
		return -ENOMEM;
	}
	s->restore_deadline = mst_now() + m->cfg.restore_grace_ms;
	s->next = m->segments;
	m->segments = s;
	m->capacity += s->size;
	r->segments++;
	return 0;
}

/* Replicas a restored object has room for: what add_replicas() adds. */
static unsigned repl_room(const struct mst_db_object *d)
{
	return d->n_repl < MST_MAX_REPLICAS ? d->n_repl : MST_MAX_REPLICAS;
}

/* Queue o's recorded replicas for reserve_all(). */
static int add_replicas(struct restore *r, struct mst_object *o,
			const struct mst_db_object *d)
{
	for (unsigned i = 0; i < d->n_repl && o->n_repl < MST_MAX_REPLICAS;
	     i++) {
		struct mst_segment *s = find_seg(r, d->repl[i].seg_id);
		if (!s) {
			r->dropped_replicas++;
			continue;
		}
		if (r->n == r->cap) {
			size_t nc = r->cap ? 2 * r->cap : 4096;
			struct pending *np = realloc(r->p, nc * sizeof(*np));
			if (!np)
				return -ENOMEM;
			r->p = np;
			r->cap = nc;
		}
		r->p[r->n++] = (struct pending){ .obj = o,
						 .seg = s,
						 .offset = d->repl[i].offset,
						 .idx = o->n_repl };
		o->repl[o->n_repl++].seg = s;
	}
	return 0;
}

static int on_object(void *arg, const struct mst_db_object *d)
{
	struct restore *r = arg;
	struct master *m = r->m;
	struct mst_object *o = mst_object_new(d->key, d->key_len, repl_room(d));

	if (!o)
		return -ENOMEM;
	if (d->has_attr && !(o->attr = malloc(sizeof(*o->attr)))) {
		free(o);
		return -ENOMEM;
	}
	if (o->attr)
		*o->attr = d->attr;
	o->size = d->size;
	o->state = MST_COMPLETE;
	o->hard_pin = d->hard_pin;
	o->soft_pin_until = d->soft_pin_until;
	o->version = d->version;
	if (o->version > m->last_version)
		m->last_version = o->version;
	if (d->group_len && mst_group_join(m, o, d->group, d->group_len)) {
		free(o->attr);
		free(o);
		return -ENOMEM;
	}
	if (mst_objmap_add(&m->objs, o)) {
		mst_group_leave(m, o);
		free(o->attr);
		free(o);
		return -ENOMEM;
	}
	mst_lru_add(m, o);
	m->n_complete++;
	return add_replicas(r, o, d);
}

/* The map sized for the record's objects before they come. */
static int on_count(void *arg, uint64_t n)
{
	struct restore *r = arg;

	return n < SIZE_MAX / 4 ? mst_objmap_reserve(&r->m->objs, (size_t)n) :
				  -ENOMEM;
}

/* An orphan from before the restart: its memory stays reserved until
 * every reader of that time is surely done (quarantine_until). */
static int on_orphan(void *arg, const struct mst_db_object *d)
{
	struct restore *r = arg;
	struct master *m = r->m;
	struct mst_object *o = mst_object_new(NULL, 0, repl_room(d));

	if (!o)
		return -ENOMEM;
	if (d->has_attr && !(o->attr = malloc(sizeof(*o->attr)))) {
		free(o);
		return -ENOMEM;
	}
	if (o->attr)
		*o->attr = d->attr;
	o->size = d->size;
	o->state = MST_COMPLETE;
	o->orphan = true;
	o->orphan_id = d->orphan_id;
	if (d->orphan_id > m->next_orphan_id)
		m->next_orphan_id = d->orphan_id;
	o->onext = m->orphans;
	m->orphans = o;
	r->orphans++;
	return add_replicas(r, o, d);
}

static int by_seg_offset(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	if (x->seg != y->seg)
		return (uintptr_t)x->seg < (uintptr_t)y->seg ? -1 : 1;
	return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Keep the replicas whose range was reserved; returns how many. */
static unsigned compact_replicas(struct mst_object *o)
{
	unsigned j = 0;

	for (unsigned i = 0; i < o->n_repl; i++)
		if (o->repl[i].seg && o->repl[i].blk)
			o->repl[j++] = o->repl[i];
	for (unsigned i = j; i < o->n_repl; i++)
		o->repl[i] = (struct mst_replica){ 0 };
	o->n_repl = (uint8_t)j;
	return j;
}

/* Reserve every replica's range, then drop what did not fit (a record
 * overlapping another, which only a corrupted file could hold). */
static void reserve_all(struct restore *r)
{
	struct master *m = r->m;

	if (r->n)
		qsort(r->p, r->n, sizeof(*r->p), by_seg_offset);
	for (size_t i = 0; i < r->n; i++) {
		struct pending *p = &r->p[i];
		struct mc_alloc_block *b;
		if (mc_alloc_reserve(p->seg->alloc, p->offset, p->obj->size,
				     &b)) {
			p->obj->repl[p->idx].seg = NULL;
			r->dropped_replicas++;
			continue;
		}
		p->obj->repl[p->idx].blk = b;
		p->seg->n_replicas++;
		m->allocated += mc_alloc_block_size(b);
	}
	struct mst_object **all;
	size_t n_all;

	if (mst_objmap_snapshot(&m->objs, &all, &n_all))
		return;
	for (struct mst_object *o = m->orphans; o; o = o->onext)
		compact_replicas(o);
	for (size_t k = 0; k < n_all; k++) {
		struct mst_object *o = all[k];
		unsigned j = compact_replicas(o);
		if (j || !o->size) {
			r->objects++;
			continue;
		}
		mst_objmap_del(&m->objs, o);
		mst_lru_del(m, o);
		m->n_complete--;
		free(o->attr);
		free(o);
	}
	free(all);
}

int mst_create(const struct mst_config *cfg, const char *db_path,
	       unsigned db_flags, struct master **out, char *err, size_t errlen)
{
	struct master *m = calloc(1, sizeof(*m));
	size_t nm = mc_rpc_method_count();
	struct restore r = { .m = m };
	int rc;

	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	m->cfg = *cfg;
	m->started = mst_now();
	if (getrandom(&m->rng, sizeof(m->rng), 0) != sizeof(m->rng) || !m->rng)
		m->rng = mst_wall() | 1;
	m->view_version = mst_rand(m) >> 16;
	/* Hold ids of different runs must differ: clients renew ids of the
	 * previous run after a restart and must be told they are unknown. */
	m->next_hold = (mst_rand(m) & 0xffffffffull) << 32;
	m->stats.requests = calloc(nm, sizeof(uint64_t));
	m->stats.failures = calloc(nm, sizeof(uint64_t));
	m->stats.batch_items = calloc(nm, sizeof(uint64_t));
	m->stats.batch_failed_items = calloc(nm, sizeof(uint64_t));
	if (!m->stats.requests || !m->stats.failures || !m->stats.batch_items ||
	    !m->stats.batch_failed_items || mst_objmap_init(&m->objs) ||
	    mst_objmap_init(&m->put_slots) || mc_map_create(&m->hold_ids) ||
	    mc_map_create(&m->client_ids) || mc_map_create(&m->groups) ||
	    mst_feed_init(&m->feed, 65536)) {
		snprintf(err, errlen, "out of memory");
		mst_destroy(m);
		return -ENOMEM;
	}
	m->feed.epoch = mst_rand(m) >> 1 | 1;
	m->run = mst_rand(m) | 1;
	rc = mst_db_open(db_path, db_flags, &m->db, err, errlen);
	if (rc) {
		mst_destroy(m);
		return rc;
	}
	rc = mst_db_load(m->db, on_segment, on_object, on_orphan, on_count, &r);
	if (!rc)
		reserve_all(&r);
	if (!rc)
		rc = mst_ckpt_restore(m);
	if (!rc && (r.segments || r.orphans)) {
		/* Readers of the previous run keep reading until a renewal
		 * tells them their hold is gone, or their lease ends. */
		m->quarantine_until = mst_now() + cfg->hold_ttl_ms;
		for (struct mst_object *o = m->orphans; o; o = o->onext)
			o->read_lease_until = m->quarantine_until;
	}
	/* The previous run's clients may hold slots on the segments just
	 * restored: nothing is placed there until they cannot use them. */
	if (!rc && r.segments && cfg->reserve_slots)
		m->fence_until = mst_now() + MST_SLOT_FENCE_MS;
	free(r.p);
	free(r.by_id);
	if (rc) {
		snprintf(err, errlen, "restoring from %s failed", db_path);
		mst_destroy(m);
		return rc;
	}
	if (r.segments)
		mc_log_notice("master",
			      "restored %llu segments and %llu objects from "
			      "%s (%llu replicas dropped); owners have %llu "
			      "ms to re-mount; for %llu ms removed objects "
			      "keep their memory (%llu removed before the "
			      "restart) and eviction waits, for readers of "
			      "the previous run",
			      (unsigned long long)r.segments,
			      (unsigned long long)r.objects, db_path,
			      (unsigned long long)r.dropped_replicas,
			      (unsigned long long)cfg->restore_grace_ms,
			      (unsigned long long)cfg->hold_ttl_ms,
			      (unsigned long long)r.orphans);
	*out = m;
	return 0;
}

static void free_group(const struct mc_map_entry *e, void *arg)
{
	struct mst_group *g;

	(void)arg;
	memcpy(&g, e->val, sizeof(g));
	free(g);
}

void mst_destroy(struct master *m)
{
	if (!m)
		return;
	while (m->holds) {
		struct mst_hold *h = m->holds;
		m->holds = h->next;
		free(h);
	}
	for (size_t i = 0; m->objs.slots && i < m->objs.cap; i++) {
		struct mst_object *o = m->objs.slots[i].obj;
		if (o)
			free(o->attr);
		free(o); /* allocators go below, whole */
	}
	for (struct mst_object *o = m->orphans, *n; o; o = n) {
		n = o->onext;
		free(o->attr);
		free(o);
	}
	for (struct mst_object *o = m->releasing, *n; o; o = n) {
		n = o->onext;
		free(o->attr);
		free(o);
	}
	while (m->segments) {
		struct mst_segment *s = m->segments;
		m->segments = s->next;
		mc_alloc_destroy(s->alloc);
		free(s->name);
		free(s->endpoint);
		free(s->protocol);
		free(s->host_id);
		free(s);
	}
	while (m->clients) {
		struct mst_client *c = m->clients;
		m->clients = c->next;
		free(c);
	}
	mc_map_destroy(m->client_ids);
	mst_ckpt_free(m);
	mst_place_cache_free(m);
	mst_objmap_free(&m->objs);
	mst_slots_free_all(m);
	mc_map_destroy(m->hold_ids);
	if (m->groups)
		mc_map_foreach(m->groups, free_group, NULL);
	mc_map_destroy(m->groups);
	if (m->feed.ring)
		mst_feed_free(&m->feed);
	mst_db_close(m->db);
	free(m->stats.requests);
	free(m->stats.failures);
	free(m->stats.batch_items);
	free(m->stats.batch_failed_items);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static void expire_holds(struct master *m, uint64_t now)
{
	for (struct mst_hold *h = m->holds, *n; h; h = n) {
		n = h->next;
		if (h->expires <= now)
			mst_hold_drop(m, h);
	}
}

/*
 * An unfinished put's memory may be taken back only once its writer is
 * gone too: a live writer (it pings) may still be writing into it, however
 * slowly, and reusing that memory would corrupt another object. A writer
 * the master never knew (no heartbeat) or that went silent for client_ttl
 * has no such claim after the release timeout.
 */
static bool put_reclaimable(struct master *m, const struct mst_object *o,
			    uint64_t now)
{
	return now - o->put_start >= m->cfg.release_timeout_ms &&
	       !mst_client_find(m, o->writer);
}

static bool reclaimable(struct master *m, const struct mst_object *o,
			uint64_t now, bool releasing)
{
	return releasing ? put_reclaimable(m, o, now) :
			   !o->holds && o->read_lease_until <= now;
}

/*
 * Free what nobody may use any more. Orphans lose their rows first, in
 * one transaction; if that fails they stay (and are tried again on the
 * next tick): freeing memory a row still records would let a restart
 * reserve it twice.
 */
static void reclaim(struct master *m, struct mst_object **list, uint64_t now,
		    bool releasing)
{
	struct mst_object **pp, *done = NULL;
	int rc = 0;

	for (pp = list; *pp;) {
		struct mst_object *o = *pp;
		if (!reclaimable(m, o, now, releasing)) {
			pp = &o->onext;
			continue;
		}
		*pp = o->onext;
		o->onext = done;
		done = o;
	}
	if (!done)
		return;
	if (!releasing) {
		rc = mst_db_begin(m->db);
		for (struct mst_object *o = done; !rc && o; o = o->onext)
			rc = mst_db_del_orphan(m->db, o->orphan_id);
		if (!rc)
			rc = mst_db_commit(m->db);
		else
			mst_db_rollback(m->db);
	}
	if (rc) {
		mc_log_warn("master", "orphans not freed: their records could "
				      "not be deleted (retrying)");
		while (done) {
			struct mst_object *o = done;
			done = o->onext;
			o->onext = *list;
			*list = o;
		}
		return;
	}
	while (done) {
		struct mst_object *o = done;
		done = o->onext;
		if (releasing)
			m->stats.released++;
		mst_object_free(m, o);
	}
}

/* PutStarts nobody finished or pre-empted: freed after the release
 * timeout once their writer is gone. The unfinished puts only, oldest
 * first, up to the first one younger than the timeout. */
static void sweep_abandoned(struct master *m, uint64_t now)
{
	struct mst_object *o = m->pend_head, *next;

	for (; o && now - o->put_start >= m->cfg.release_timeout_ms; o = next) {
		next = o->lru_next;
		if (o->state == MST_PROCESSING && put_reclaimable(m, o, now)) {
			mst_objmap_del(&m->objs, o);
			m->stats.released++;
			mst_object_free(m, o);
		}
	}
}

void mst_tick(struct master *m)
{
	uint64_t now = mst_now(), frees0 = m->frees;

	if (now - m->last_slow_tick >= 100) {
		m->last_slow_tick = now;
		mst_expire_clients(m, now);
		expire_holds(m, now);
		reclaim(m, &m->orphans, now, false);
		reclaim(m, &m->releasing, now, true);
	}
	if (now - m->last_sweep >= 5000) {
		m->last_sweep = now;
		sweep_abandoned(m, now);
		mst_slots_sweep(m, now);
	}
	/* HA: request ids are kept 10 minutes (clients retry for 20 s). */
	if (mst_db_logged(m->db) && now - m->last_ops_prune >= 60000) {
		m->last_ops_prune = now;
		(void)mst_db_ops_prune(m->db, (int64_t)mst_wall() - 600000);
	}
	mst_evict_tick(m);
	if (m->frees != frees0)
		m->freed_seq = mst_db_log_seq(m->db);
}
