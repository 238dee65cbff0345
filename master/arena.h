/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file arena.h
 * A bump allocator for building one RPC response: many small protobuf
 * structs and strings, all freed at once after packing.
 * arena_alloc() returns zeroed memory or NULL when out of memory.
 */
#ifndef MASTER_ARENA_H
#define MASTER_ARENA_H

#include <stddef.h>

struct arena_chunk;

struct arena {
	struct arena_chunk *head;
	size_t used, cap;
};

void *arena_alloc(struct arena *a, size_t size);
char *arena_strndup(struct arena *a, const char *s, size_t n);
void arena_free(struct arena *a);

#endif
