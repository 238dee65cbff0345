/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file objmap.h
 * The object index: key -> object, and the recency list (objmap.c).
 * Locking, time and codes as master.h says.
 */
#ifndef MST_OBJMAP_H
#define MST_OBJMAP_H

#include "master.h"

int mst_objmap_init(struct mst_objmap *om);
void mst_objmap_free(struct mst_objmap *om);
struct mst_object *mst_objmap_get(struct mst_objmap *om, const char *key,
				  size_t len);
int mst_objmap_add(struct mst_objmap *om, struct mst_object *o);
/** mst_objmap_add() of an object whose hash the caller computed
 *  (mst_objmap_hash) and for which room is sure: (count + 1) * 2 <= cap,
 *  as after mst_objmap_reserve(). */
void mst_objmap_place(struct mst_objmap *om, struct mst_object *o,
		      uint64_t hash);
/** Prefetch the home slot of a hash: a loader that adds objects a few
 *  steps after hashing them overlaps the slots' cache misses. */
static inline void mst_objmap_prefetch_hash(const struct mst_objmap *om,
					    uint64_t hash)
{
	__builtin_prefetch(&om->slots[hash & (om->cap - 1)], 1);
}
/* Room for n objects without growing (a restore that knows its count:
 * no table rebuilt on the way). 0 or -ENOMEM (the map unchanged). */
int mst_objmap_reserve(struct mst_objmap *om, size_t n);
void mst_objmap_del(struct mst_objmap *om, struct mst_object *o);
/**
 * Prefetch what looking up keys[0..n) will touch: their home slots, then
 * the objects those slots point to. A batch handler calls it for a window
 * of keys before looking them up one by one, so the cache misses of the
 * window overlap instead of following each other. n <= MST_PREFETCH_MAX;
 * a hint only (under the master lock, like every objmap call).
 */
#define MST_PREFETCH_MAX 16
void mst_objmap_prefetch(const struct mst_objmap *om, char *const *keys,
			 size_t n);
uint64_t mst_objmap_hash(const struct mst_objmap *om, const char *key,
			 size_t len);
/** Every object now in the map (malloc'd array), for the rare passes
 *  over all of them that also delete. */
int mst_objmap_snapshot(const struct mst_objmap *om, struct mst_object ***out,
			size_t *n);
/* The recency list of complete objects (m->lru_head: least recent). */
void mst_lru_add(struct master *m, struct mst_object *o);
void mst_lru_del(struct master *m, struct mst_object *o);
void mst_lru_touch(struct master *m, struct mst_object *o);
/* The unfinished puts (PROCESSING and ENDING objects in the map), oldest
 * first, through the same links: the abandoned-put sweep reads only them.
 * mst_pend_del() of an object on no list does nothing. */
void mst_pend_add(struct master *m, struct mst_object *o);
void mst_pend_del(struct master *m, struct mst_object *o);

#endif
