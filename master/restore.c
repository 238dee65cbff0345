/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's state rebuilt from its record (restore.h): at a start, and
 * at a takeover, where its time is part of the failover (about 2 s per
 * million objects before 2026-12-05, docs/benchmarks.md "Master high
 * availability"). What keeps it fast at millions of objects:
 *   - a replica's segment is found by a binary search over the segments'
 *     ids whose 8-byte prefixes sit in one small array;
 *   - replicas are queued per segment as they are read, so each segment's
 *     reservations are sorted on their own (small sorts, in cache) and
 *     nothing sorts or copies all of them together;
 *   - objects enter the index a few objects after they are built, each
 *     one's slot prefetched meanwhile, so the index's cache misses
 *     overlap instead of following each other;
 *   - only objects that lost a replica are looked at again afterwards
 *     (none, but for a damaged record), not every object.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "groups.h"
#include "master.h"
#include "mst_util.h"
#include "objects.h"
#include "objmap.h"
#include "restore.h"
#include "segments.h"

/* A replica read from the record, reserved in its segment's allocator
 * once all are known: reservations go in offset order (alloc.h). */
struct pending {
	struct mst_object *obj;
	/* Where its block goes (obj->repl is a pointer: reaching it through
	 * obj would be one more cache miss), and the object's size. */
	struct mst_replica *slot;
	uint64_t offset, size;
};

/* One segment's replicas to reserve. */
struct seg_queue {
	struct pending *p;
	size_t n, cap;
};

/* Objects built but not yet in the index (their slots being fetched). */
#define INDEX_AHEAD 16

struct restore {
	struct master *m;
	struct mst_restore_counts *c;
	/* The restored segments sorted by id (built at the first replica:
	 * the record gives every segment before any object), their ids as
	 * two big-endian numbers (the search's keys, in the same order, in
	 * one small array rather than behind the pointers), and each
	 * segment's queue of replicas. */
	struct mst_segment **by_id;
	uint64_t (*id_key)[2];
	struct seg_queue *queue;
	size_t n_seg;
	bool indexed;
	/* Objects that lost a replica or have none: looked at again once
	 * everything is reserved. */
	struct mst_object **lost;
	size_t n_lost, cap_lost;
	struct mst_object *ahead[INDEX_AHEAD];
	uint64_t ahead_hash[INDEX_AHEAD];
	unsigned n_ahead, first_ahead;
};

static void id_key(const uint8_t *id, uint64_t key[2])
{
	_Static_assert(MST_ID_LEN == 16, "an id is two keys");
	key[0] = key[1] = 0;
	for (int i = 0; i < 16; i++)
		key[i / 8] = key[i / 8] << 8 | id[i];
}

static int cmp_seg_id(const void *a, const void *b)
{
	return memcmp((*(struct mst_segment *const *)a)->id,
		      (*(struct mst_segment *const *)b)->id, MST_ID_LEN);
}

static int index_segments(struct restore *r)
{
	size_t n = 0, k = 0;

	r->indexed = true;
	for (struct mst_segment *s = r->m->segments; s; s = s->next)
		n++;
	if (!n)
		return 0;
	r->by_id = malloc(n * sizeof(*r->by_id));
	r->id_key = malloc(n * sizeof(*r->id_key));
	r->queue = calloc(n, sizeof(*r->queue));
	if (!r->by_id || !r->id_key || !r->queue)
		return -ENOMEM;
	for (struct mst_segment *s = r->m->segments; s; s = s->next)
		r->by_id[k++] = s;
	qsort(r->by_id, n, sizeof(*r->by_id), cmp_seg_id);
	for (k = 0; k < n; k++)
		id_key(r->by_id[k]->id, r->id_key[k]);
	r->n_seg = n;
	return 0;
}

/* The index in by_id of the segment with this id, or -1. */
static ptrdiff_t find_seg(const struct restore *r, const uint8_t *id)
{
	uint64_t key[2];
	size_t lo = 0, hi = r->n_seg;

	id_key(id, key);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const uint64_t *k = r->id_key[mid];

		if (k[0] == key[0] && k[1] == key[1])
			return (ptrdiff_t)mid;
		if (k[0] < key[0] || (k[0] == key[0] && k[1] < key[1]))
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static int push(void **v, size_t *n, size_t *cap, size_t size, size_t first)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : first;
		void *nv = realloc(*v, nc * size);
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*n)++;
	return 0;
}

static int add_lost(struct restore *r, struct mst_object *o)
{
	void *v = r->lost;
	int rc = push(&v, &r->n_lost, &r->cap_lost, sizeof(*r->lost), 64);

	r->lost = v;
	if (!rc)
		r->lost[r->n_lost - 1] = o;
	return rc;
}

/* Replicas a restored object has room for: what add_replicas() adds. */
static unsigned repl_room(const struct mst_db_object *d)
{
	return d->n_repl < MST_MAX_REPLICAS ? d->n_repl : MST_MAX_REPLICAS;
}

/* Queue o's recorded replicas on their segments; a replica on a segment
 * the record does not have is dropped. */
static int add_replicas(struct restore *r, struct mst_object *o,
			const struct mst_db_object *d)
{
	if (!r->indexed && index_segments(r))
		return -ENOMEM;
	for (unsigned i = 0; i < d->n_repl && o->n_repl < MST_MAX_REPLICAS;
	     i++) {
		ptrdiff_t k = find_seg(r, d->repl[i].seg_id);
		struct seg_queue *q;
		void *v;

		if (k < 0) {
			r->c->dropped_replicas++;
			continue;
		}
		q = &r->queue[k];
		v = q->p;
		if (push(&v, &q->n, &q->cap, sizeof(*q->p), 256))
			return -ENOMEM;
		q->p = v;
		q->p[q->n - 1] = (struct pending){ .obj = o,
						   .slot = &o->repl[o->n_repl],
						   .offset = d->repl[i].offset,
						   .size = o->size };
		o->repl[o->n_repl++].seg = r->by_id[k];
	}
	return o->n_repl || !o->size ? 0 : add_lost(r, o);
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
	r->c->segments++;
	return 0;
}

/* The oldest object waiting for the index goes in (its slot fetched by
 * now); room was made sure when it was queued. */
static void index_one(struct restore *r)
{
	unsigned i = r->first_ahead;

	mst_objmap_place(&r->m->objs, r->ahead[i], r->ahead_hash[i]);
	r->first_ahead = (i + 1) % INDEX_AHEAD;
	r->n_ahead--;
}

static void index_all(struct restore *r)
{
	while (r->n_ahead)
		index_one(r);
}

/* o into the index, a few objects from now when the index has room. */
static int index_later(struct restore *r, struct mst_object *o)
{
	struct mst_objmap *om = &r->m->objs;
	uint64_t h = mst_objmap_hash(om, o->key, o->key_len);

	if ((om->count + r->n_ahead + 1) * 2 > om->cap) {
		/* No room reserved (the count was off): add it now. */
		index_all(r);
		return mst_objmap_add(om, o);
	}
	mst_objmap_prefetch_hash(om, h);
	if (r->n_ahead == INDEX_AHEAD)
		index_one(r);
	r->ahead[(r->first_ahead + r->n_ahead) % INDEX_AHEAD] = o;
	r->ahead_hash[(r->first_ahead + r->n_ahead) % INDEX_AHEAD] = h;
	r->n_ahead++;
	return 0;
}

/* A complete object as the record has it (key NULL: an orphan), with room
 * for its replicas; NULL when out of memory. */
static struct mst_object *restored(const struct mst_db_object *d,
				   const char *key, size_t key_len)
{
	struct mst_object *o = mst_object_new(key, key_len, repl_room(d));

	if (!o)
		return NULL;
	if (d->has_attr && !(o->attr = malloc(sizeof(*o->attr)))) {
		free(o);
		return NULL;
	}
	if (o->attr)
		*o->attr = d->attr;
	o->size = d->size;
	o->state = MST_COMPLETE;
	return o;
}

static int on_object(void *arg, const struct mst_db_object *d)
{
	struct restore *r = arg;
	struct master *m = r->m;
	struct mst_object *o = restored(d, d->key, d->key_len);

	if (!o)
		return -ENOMEM;
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
	if (index_later(r, o)) {
		mst_group_leave(m, o);
		free(o->attr);
		free(o);
		return -ENOMEM;
	}
	mst_lru_add(m, o);
	m->n_complete++;
	return add_replicas(r, o, d);
}

/* The index sized for the record's objects before they come. */
static int on_count(void *arg, uint64_t n)
{
	struct restore *r = arg;

	r->c->in_record = n;
	return n < SIZE_MAX / 4 ? mst_objmap_reserve(&r->m->objs, (size_t)n) :
				  -ENOMEM;
}

/* An orphan from before the restart: its memory stays reserved until
 * every reader of that time is surely done (quarantine_until). */
static int on_orphan(void *arg, const struct mst_db_object *d)
{
	struct restore *r = arg;
	struct master *m = r->m;
	struct mst_object *o = restored(d, NULL, 0);

	if (!o)
		return -ENOMEM;
	o->orphan = true;
	o->orphan_id = d->orphan_id;
	if (d->orphan_id > m->next_orphan_id)
		m->next_orphan_id = d->orphan_id;
	o->onext = m->orphans;
	m->orphans = o;
	r->c->orphans++;
	return add_replicas(r, o, d);
}

static int by_offset(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

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

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (void *const *)a;
	uintptr_t y = (uintptr_t) * (void *const *)b;

	return (x > y) - (x < y);
}

/* Reserve every queued replica's range, segment by segment in offset
 * order; then drop what did not fit (a record overlapping another, which
 * only a corrupted file could hold) and the objects left with nothing. */
static int reserve_all(struct restore *r)
{
	struct master *m = r->m;
	int rc = 0;

	for (size_t k = 0; k < r->n_seg; k++) {
		struct mst_segment *s = r->by_id[k];
		struct seg_queue *q = &r->queue[k];

		if (q->n > 1)
			qsort(q->p, q->n, sizeof(*q->p), by_offset);
		for (size_t i = 0; i < q->n; i++) {
			struct pending *p = &q->p[i];
			struct mc_alloc_block *b;

			/* The replica a few steps on is written then: its
			 * object is anywhere in memory. */
			if (i + 8 < q->n)
				__builtin_prefetch(q->p[i + 8].slot, 1);
			if (mc_alloc_reserve(s->alloc, p->offset, p->size,
					     &b)) {
				p->slot->seg = NULL;
				r->c->dropped_replicas++;
				if (!rc)
					rc = add_lost(r, p->obj);
				continue;
			}
			p->slot->blk = b;
			s->n_replicas++;
			m->allocated += mc_alloc_block_size(b);
		}
		free(q->p);
		q->p = NULL;
	}
	if (rc)
		return rc;
	for (struct mst_object *o = m->orphans; o; o = o->onext)
		compact_replicas(o);
	/* Objects twice in the list (two replicas lost) are looked at once;
	 * orphans are not in the index and were compacted above. */
	if (r->n_lost > 1)
		qsort(r->lost, r->n_lost, sizeof(*r->lost), cmp_ptr);
	for (size_t i = 0; i < r->n_lost; i++) {
		struct mst_object *o = r->lost[i];

		if ((i && o == r->lost[i - 1]) || o->orphan)
			continue;
		if (compact_replicas(o) || !o->size)
			continue;
		mst_objmap_del(&m->objs, o);
		mst_lru_del(m, o);
		mst_group_leave(m, o);
		m->n_complete--;
		free(o->attr);
		free(o);
	}
	return 0;
}

int mst_restore(struct master *m, struct mst_restore_counts *c)
{
	struct restore r = { .m = m, .c = c };
	int rc;

	memset(c, 0, sizeof(*c));
	rc = mst_db_load(m->db, on_segment, on_object, on_orphan, on_count, &r);
	index_all(&r);
	if (!rc)
		rc = reserve_all(&r);
	c->objects = m->objs.count;
	for (size_t k = 0; k < r.n_seg; k++)
		free(r.queue[k].p);
	free(r.queue);
	free(r.id_key);
	free(r.by_id);
	free(r.lost);
	return rc;
}
