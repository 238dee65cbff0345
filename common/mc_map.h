/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_map.h
 * A hash map from byte-string keys to byte-string values, both copied in.
 *
 * Keys come from the network, so buckets are chosen with SipHash-1-3 under
 * a random per-map seed: a client cannot pick keys that all collide.
 * Invariants: count equals the number of entries; every entry's value is
 * NUL-terminated one byte past val_len (handy for text, not counted).
 * Not thread-safe: callers hold their own lock. Pointers returned by
 * mc_map_get() stay valid until the next mutation of the map.
 */
#ifndef MC_MAP_H
#define MC_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "mc_compiler.h"

struct mc_map;

struct mc_map_entry {
	struct mc_map_entry *next;
	uint64_t hash;
	size_t key_len;
	size_t val_len;
	char *val;
	char key[]; /* key_len bytes, then NUL */
};

int mc_map_create(struct mc_map **out) MC_MUST_CHECK;
void mc_map_destroy(struct mc_map *m);

/** Insert or replace; 0 or -ENOMEM (the map is unchanged on failure). */
int mc_map_put(struct mc_map *m, const char *key, size_t key_len,
	       const void *val, size_t val_len) MC_MUST_CHECK;

/** NULL if absent. */
const struct mc_map_entry *mc_map_get(const struct mc_map *m, const char *key,
				      size_t key_len);

/** 0 or -ENOENT. */
int mc_map_del(struct mc_map *m, const char *key, size_t key_len);

size_t mc_map_count(const struct mc_map *m);

/** Visit every entry (order unspecified); fn must not mutate the map. */
void mc_map_foreach(const struct mc_map *m,
		    void (*fn)(const struct mc_map_entry *e, void *arg),
		    void *arg);

/** SipHash-1-3 of data under a 128-bit key. */
uint64_t mc_siphash(const uint64_t key[2], const void *data, size_t len);

#endif
