/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's key -> object index: open addressing with linear probing
 * over (hash, object) slots, SipHash with a random seed, at most half
 * full, backward-shift deletion (no tombstones). The hash sits in the
 * slot, so a probe touches an object only when the full hash matches:
 * one cache miss per lookup instead of one per chain link.
 * And the recency list: complete objects from least to most recently
 * read (or written), which eviction (evict.c) walks from the head.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "master.h"
#include "mc_map.h"
#include "objmap.h"

int mst_objmap_init(struct mst_objmap *om)
{
	om->cap = 1024;
	om->count = 0;
	om->slots = calloc(om->cap, sizeof(*om->slots));
	if (!om->slots)
		return -ENOMEM;
	if (getrandom(om->seed, sizeof(om->seed), 0) != sizeof(om->seed)) {
		om->seed[0] = (uint64_t)(uintptr_t)om;
		om->seed[1] = 0x9e3779b97f4a7c15ull;
	}
	return 0;
}

void mst_objmap_free(struct mst_objmap *om)
{
	free(om->slots);
	om->slots = NULL;
	om->cap = om->count = 0;
}

uint64_t mst_objmap_hash(const struct mst_objmap *om, const char *key,
			 size_t len)
{
	return mc_siphash(om->seed, key, len);
}

struct mst_object *mst_objmap_get(struct mst_objmap *om, const char *key,
				  size_t len)
{
	uint64_t h = mst_objmap_hash(om, key, len);
	size_t mask = om->cap - 1;

	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct mst_object *o = om->slots[i].obj;
		if (!o)
			return NULL;
		if (om->slots[i].hash == h && o->key_len == len &&
		    !memcmp(o->key, key, len))
			return o;
	}
}

void mst_objmap_prefetch(const struct mst_objmap *om, char *const *keys,
			 size_t n)
{
	uint64_t h[MST_PREFETCH_MAX];
	size_t mask = om->cap - 1;

	if (n > MST_PREFETCH_MAX)
		n = MST_PREFETCH_MAX;
	for (size_t i = 0; i < n; i++) {
		h[i] = mst_objmap_hash(om, keys[i], strlen(keys[i]));
		__builtin_prefetch(&om->slots[h[i] & mask]);
	}
	for (size_t i = 0; i < n; i++) {
		const struct mst_slot *s = &om->slots[h[i] & mask];
		const struct mst_object *o = s->obj;
		if (!o || s->hash != h[i]) {
			h[i] = 0;
			continue;
		}
		/* The fields a get reads: state and leases, the key, then
		 * the replicas (after the key, see mst_object_new()). */
		__builtin_prefetch(o, 1);
		__builtin_prefetch(&o->key_len);
	}
	/* What a get reaches through the object: its LRU neighbours (a read
	 * moves it to the tail), its replicas and the first one's block. */
	for (size_t i = 0; i < n; i++) {
		const struct mst_object *o;
		if (!h[i])
			continue;
		o = om->slots[h[i] & mask].obj;
		if (o->lru_prev)
			__builtin_prefetch(o->lru_prev, 1);
		if (o->lru_next)
			__builtin_prefetch(o->lru_next, 1);
		if (o->n_repl) {
			__builtin_prefetch(o->repl);
			if (o->repl[0].blk)
				__builtin_prefetch(o->repl[0].blk);
		}
	}
}

static void place(struct mst_slot *slots, size_t mask, uint64_t h,
		  struct mst_object *o)
{
	size_t i = h & mask;

	while (slots[i].obj)
		i = (i + 1) & mask;
	slots[i].hash = h;
	slots[i].obj = o;
}

static int grow(struct mst_objmap *om)
{
	size_t cap = om->cap * 2;
	struct mst_slot *s = calloc(cap, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < om->cap; i++)
		if (om->slots[i].obj)
			place(s, cap - 1, om->slots[i].hash, om->slots[i].obj);
	free(om->slots);
	om->slots = s;
	om->cap = cap;
	return 0;
}

int mst_objmap_reserve(struct mst_objmap *om, size_t n)
{
	while (n * 2 > om->cap)
		if (grow(om))
			return -ENOMEM;
	return 0;
}

int mst_objmap_add(struct mst_objmap *om, struct mst_object *o)
{
	uint64_t h = mst_objmap_hash(om, o->key, o->key_len);

	if ((om->count + 1) * 2 > om->cap && grow(om) &&
	    om->count + 1 >= om->cap)
		return -ENOMEM; /* a fuller table still works; a full one not */
	place(om->slots, om->cap - 1, h, o);
	om->count++;
	return 0;
}

void mst_objmap_place(struct mst_objmap *om, struct mst_object *o,
		      uint64_t hash)
{
	place(om->slots, om->cap - 1, hash, o);
	om->count++;
}

void mst_objmap_del(struct mst_objmap *om, struct mst_object *o)
{
	size_t mask = om->cap - 1;
	uint64_t h = mst_objmap_hash(om, o->key, o->key_len);
	size_t i = h & mask, j;

	while (om->slots[i].obj && om->slots[i].obj != o)
		i = (i + 1) & mask;
	if (!om->slots[i].obj)
		return;
	/* Backward shift: move later members of the cluster that may live
	 * at i (their home is not in (i, j]). */
	for (j = (i + 1) & mask; om->slots[j].obj; j = (j + 1) & mask) {
		size_t k = om->slots[j].hash & mask;
		bool movable = i <= j ? (k <= i || k > j) : (k <= i && k > j);
		if (movable) {
			om->slots[i] = om->slots[j];
			i = j;
		}
	}
	om->slots[i] = (struct mst_slot){ 0, NULL };
	om->count--;
}

int mst_objmap_snapshot(const struct mst_objmap *om, struct mst_object ***out,
			size_t *n)
{
	struct mst_object **v =
		malloc((om->count ? om->count : 1) * sizeof(*v));
	size_t k = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < om->cap && k < om->count; i++)
		if (om->slots[i].obj)
			v[k++] = om->slots[i].obj;
	*out = v;
	*n = k;
	return 0;
}

/* ---- recency ------------------------------------------------------------ */

static void list_add(struct mst_object **head, struct mst_object **tail,
		     struct mst_object *o)
{
	o->lru_next = NULL;
	o->lru_prev = *tail;
	if (*tail)
		(*tail)->lru_next = o;
	else
		*head = o;
	*tail = o;
}

/* A no-op for an object on no list (links NULL, not the head). */
static void list_del(struct mst_object **head, struct mst_object **tail,
		     struct mst_object *o)
{
	if (o->lru_prev)
		o->lru_prev->lru_next = o->lru_next;
	else if (*head == o)
		*head = o->lru_next;
	if (o->lru_next)
		o->lru_next->lru_prev = o->lru_prev;
	else if (*tail == o)
		*tail = o->lru_prev;
	o->lru_prev = o->lru_next = NULL;
}

void mst_lru_add(struct master *m, struct mst_object *o)
{
	list_add(&m->lru_head, &m->lru_tail, o);
}

void mst_lru_del(struct master *m, struct mst_object *o)
{
	list_del(&m->lru_head, &m->lru_tail, o);
}

void mst_pend_add(struct master *m, struct mst_object *o)
{
	list_add(&m->pend_head, &m->pend_tail, o);
}

void mst_pend_del(struct master *m, struct mst_object *o)
{
	list_del(&m->pend_head, &m->pend_tail, o);
}

void mst_lru_touch(struct master *m, struct mst_object *o)
{
	if (m->lru_tail == o)
		return;
	mst_lru_del(m, o);
	mst_lru_add(m, o);
}
