/* SPDX-License-Identifier: Apache-2.0 */
/* Bump allocator for building RPC responses (see arena.h). */
#include <stdlib.h>
#include <string.h>

#include "arena.h"

struct arena_chunk {
	struct arena_chunk *next;
	size_t cap;
	_Alignas(16) char data[];
};

void *arena_alloc(struct arena *a, size_t size)
{
	void *p;

	size = (size + 15) & ~(size_t)15;
	if (!a->head || a->used + size > a->cap) {
		size_t cap = size > 32768 ? size : 32768;
		struct arena_chunk *c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->next = a->head;
		c->cap = cap;
		a->head = c;
		a->used = 0;
		a->cap = cap;
	}
	p = a->head->data + a->used;
	a->used += size;
	memset(p, 0, size);
	return p;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *d = arena_alloc(a, n + 1);

	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

void arena_free(struct arena *a)
{
	while (a->head) {
		struct arena_chunk *c = a->head;
		a->head = c->next;
		free(c);
	}
	a->used = a->cap = 0;
}
