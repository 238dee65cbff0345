/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file locs.h
 * The location cache (docs/design.md, "One round trip per get"): where the
 * objects of keys this client read are, each under the read lease the
 * master granted with its replica list. While the lease runs the master
 * neither evicts the object nor lets its memory go to another object (a
 * forced remove keeps it as an orphan until the lease ends), so a get of
 * a cached key reads the holder directly, and the read counts only if it
 * ended before the lease did.
 *
 * Cached reads renew the lease as gets through the master would: one
 * thread (the toucher) tells the master, every quarter lease, of the keys
 * read from the cache since its last round, each with the age of its
 * last read (one BatchGetReplicaList with read_age_ms per 1,024 keys):
 * the master renews each lease from that read (as upstream, an object is
 * removable a lease after its last get), the reads count for eviction,
 * a key still the same object (version) is cached on under the renewed
 * lease, and a key removed or replaced elsewhere leaves the cache within
 * a round. A key not read for a round is not renewed and lapses.
 *
 * Thread-safe. A NULL cache (turned off) answers every lookup with a miss.
 */
#ifndef MCS_LOCS_H
#define MCS_LOCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master.pb-c.h"
#include "mc_compiler.h"
#include "mooncake/store.h"

struct mcs_master;
struct mcs_locs;

/** A cached list, rebuilt for read_lists(): rl points into rep[]; strings
 *  belong to the cache and live as long as it. */
struct mcs_loc_hit {
	Mcrpc__ReplicaList rl;
	Mcrpc__Replica rep[MOONCAKE_MAX_REPLICAS];
	Mcrpc__Replica *reps[MOONCAKE_MAX_REPLICAS];
	uint8_t seg_ids[MOONCAKE_MAX_REPLICAS][16]; /* rep[].segment_id */
	uint64_t until; /* the lease's end, mcs_now_ms() time */
};

struct mcs_locs_stats {
	uint64_t keys; /* cached now */
	uint64_t hits, misses; /* lookups */
	uint64_t stale; /* hits whose read failed or outlasted the lease */
	uint64_t touched; /* cached keys renewed at the master (per round) */
	uint64_t dropped; /* keys the toucher found removed or replaced */
};

/** max_keys > 0; m outlives the cache. 0 or -ENOMEM. */
int mcs_locs_create(struct mcs_master *m, size_t max_keys,
		    struct mcs_locs **out) MC_MUST_CHECK;
/** Stops the toucher; NULL is fine. */
void mcs_locs_destroy(struct mcs_locs *c);

/**
 * Look key up at now (mcs_now_ms()): true, with *hit filled and the key
 * marked read (told to the master next round), when it is cached with
 * more than an eighth of its lease left.
 */
bool mcs_locs_get(struct mcs_locs *c, const char *key, uint64_t now,
		  struct mcs_loc_hit *hit);

/** The generation to pass to mcs_locs_put() for a list asked for now. */
uint64_t mcs_locs_gen(struct mcs_locs *c);

/**
 * Remember rl for key: a readable object (code 0, size > 0) with a read
 * lease that started no earlier than t0 (taken before the request). Not
 * kept when a forget or clear came after gen was taken (the list may
 * predate a remove of this client's), when rl has no lease or more
 * replicas than MOONCAKE_MAX_REPLICAS, or when the cache is full.
 */
void mcs_locs_put(struct mcs_locs *c, const char *key,
		  const Mcrpc__ReplicaList *rl, uint64_t t0, uint64_t gen);

/** Drop key (a hit that failed, a put of the key). */
void mcs_locs_drop(struct mcs_locs *c, const char *key);
/** Drop key, and keep lists asked for before from entering (a remove or
 *  rename of this client's). */
void mcs_locs_forget(struct mcs_locs *c, const char *key);
/** The master says key's object has size bytes: forget a cached object
 *  of another size (replaced since), as mcs_locs_forget(). */
void mcs_locs_sized(struct mcs_locs *c, const char *key, uint64_t size);
/** Forget every key (remove_all, remove_by_regex, a prefix rename). */
void mcs_locs_clear(struct mcs_locs *c);
/** Count a hit that could not be used (the key is then dropped). */
void mcs_locs_stale(struct mcs_locs *c, const char *key);

void mcs_locs_stats(struct mcs_locs *c, struct mcs_locs_stats *out);

#endif
