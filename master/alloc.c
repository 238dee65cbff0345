/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's per-segment buffer allocator: TLSF over offsets, with every
 * block described by a malloc'd node outside the managed range (see
 * alloc.h for the contract).
 *
 * Size classes: sizes below SMALL_SIZE (2 KiB) have one class per
 * MC_ALLOC_ALIGN step (first level 0); above, first level f covers
 * [2^(f+10), 2^(f+11)) split into SL_COUNT equal second-level classes.
 * All sizes are multiples of MC_ALLOC_ALIGN, so the smallest class width,
 * SMALL_SIZE / SL_COUNT, is exactly one alignment unit.
 *
 * Blocks tile [0, capacity) and are linked in offset order (phys_prev,
 * phys_next). Free blocks are never adjacent: freeing merges at once. The
 * node of the block at offset 0 is therefore never released (a merge
 * always keeps the lower node), which destroy and reserve rely on.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "alloc.h"

#define ALIGN_LOG2 6
#define SL_LOG2 5
#define SL_COUNT (1u << SL_LOG2)
#define FL_SHIFT (SL_LOG2 + ALIGN_LOG2)
#define SMALL_SIZE (1ull << FL_SHIFT)
/* First levels for floor(log2(size)) from FL_SHIFT up to 63, plus 0. */
#define FL_COUNT (64 - FL_SHIFT + 1)

/* Released nodes kept for reuse, so steady alloc/free churn stays off
 * malloc; beyond this many they go back to malloc. */
#define SPARE_MAX 64

_Static_assert(MC_ALLOC_ALIGN == 1u << ALIGN_LOG2, "ALIGN_LOG2");
_Static_assert(SMALL_SIZE / SL_COUNT == MC_ALLOC_ALIGN, "small classes");
_Static_assert(FL_COUNT <= 64, "first-level bitmap is a uint64_t");

enum block_state {
	BLOCK_FREE = 1,
	BLOCK_USED,
	BLOCK_SPARE, /* released node, in the spare cache */
};

struct mc_alloc_block {
	uint64_t offset;
	uint64_t size;
	struct mc_alloc_block *phys_prev, *phys_next;
	/* The class list while free; the spare cache uses free_next. */
	struct mc_alloc_block *free_prev, *free_next;
	enum block_state state;
};

struct mc_alloc {
	uint64_t capacity;
	uint64_t used;
	struct mc_alloc_block *first; /* the block at offset 0 */
	/* Where the last reserve ended, to make ascending reserves O(1). */
	struct mc_alloc_block *cursor;
	struct mc_alloc_block *spare;
	unsigned n_spare;
	uint64_t fl_bitmap;
	uint32_t sl_bitmap[FL_COUNT];
	struct mc_alloc_block *heads[FL_COUNT][SL_COUNT];
};

static unsigned fls64(uint64_t x)
{
	return 63u - (unsigned)__builtin_clzll(x);
}

static unsigned ffs64(uint64_t x)
{
	return (unsigned)__builtin_ctzll(x);
}

/* The class of a size (> 0): the one whose range contains it. */
static void mapping(uint64_t size, unsigned *fl, unsigned *sl)
{
	unsigned f;

	if (size < SMALL_SIZE) {
		*fl = 0;
		*sl = (unsigned)(size >> ALIGN_LOG2);
		return;
	}
	f = fls64(size);
	*fl = f - (FL_SHIFT - 1);
	*sl = (unsigned)(size >> (f - SL_LOG2)) ^ SL_COUNT;
}

/* The smallest class whose every block holds size (size <= 2^62). */
static void mapping_search(uint64_t size, unsigned *fl, unsigned *sl)
{
	if (size >= SMALL_SIZE)
		size += (1ull << (fls64(size) - SL_LOG2)) - 1;
	mapping(size, fl, sl);
}

static void list_insert(struct mc_alloc *a, struct mc_alloc_block *b)
{
	unsigned fl, sl;
	struct mc_alloc_block **head;

	mapping(b->size, &fl, &sl);
	head = &a->heads[fl][sl];
	b->state = BLOCK_FREE;
	b->free_prev = NULL;
	b->free_next = *head;
	if (*head)
		(*head)->free_prev = b;
	*head = b;
	a->fl_bitmap |= 1ull << fl;
	a->sl_bitmap[fl] |= 1u << sl;
}

static void list_remove(struct mc_alloc *a, struct mc_alloc_block *b)
{
	unsigned fl, sl;

	mapping(b->size, &fl, &sl);
	if (b->free_prev)
		b->free_prev->free_next = b->free_next;
	else
		a->heads[fl][sl] = b->free_next;
	if (b->free_next)
		b->free_next->free_prev = b->free_prev;
	b->free_prev = b->free_next = NULL;
	if (!a->heads[fl][sl]) {
		a->sl_bitmap[fl] &= ~(1u << sl);
		if (!a->sl_bitmap[fl])
			a->fl_bitmap &= ~(1ull << fl);
	}
}

static struct mc_alloc_block *node_get(struct mc_alloc *a)
{
	struct mc_alloc_block *n = a->spare;

	if (n) {
		a->spare = n->free_next;
		a->n_spare--;
		return n;
	}
	return malloc(sizeof(*n));
}

static void node_put(struct mc_alloc *a, struct mc_alloc_block *n)
{
	if (!n)
		return;
	if (a->cursor == n)
		a->cursor = NULL;
	if (a->n_spare >= SPARE_MAX) {
		free(n);
		return;
	}
	n->state = BLOCK_SPARE;
	n->free_next = a->spare;
	a->spare = n;
	a->n_spare++;
}

/* Put n in the physical list right after b. */
static void phys_link_after(struct mc_alloc_block *b, struct mc_alloc_block *n)
{
	n->phys_prev = b;
	n->phys_next = b->phys_next;
	if (b->phys_next)
		b->phys_next->phys_prev = n;
	b->phys_next = n;
}

static void phys_unlink(struct mc_alloc_block *b)
{
	if (b->phys_prev)
		b->phys_prev->phys_next = b->phys_next;
	if (b->phys_next)
		b->phys_next->phys_prev = b->phys_prev;
}

/*
 * Cut b (off every list) to size bytes; the rest becomes the free block n
 * (a fresh node), or n goes back unused when nothing is left over.
 */
static void split(struct mc_alloc *a, struct mc_alloc_block *b, uint64_t size,
		  struct mc_alloc_block *n)
{
	if (b->size == size) {
		node_put(a, n);
		return;
	}
	n->offset = b->offset + size;
	n->size = b->size - size;
	b->size = size;
	phys_link_after(b, n);
	list_insert(a, n);
}

int mc_alloc_create(uint64_t size, struct mc_alloc **out)
{
	struct mc_alloc *a;
	struct mc_alloc_block *b;

	*out = NULL;
	if (size < MC_ALLOC_ALIGN || size > MC_ALLOC_MAX_CAPACITY)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	b = calloc(1, sizeof(*b));
	if (!a || !b) {
		free(a);
		free(b);
		return -ENOMEM;
	}
	a->capacity = size & ~(uint64_t)(MC_ALLOC_ALIGN - 1);
	b->offset = 0;
	b->size = a->capacity;
	a->first = b;
	list_insert(a, b);
	*out = a;
	return 0;
}

void mc_alloc_destroy(struct mc_alloc *a)
{
	struct mc_alloc_block *b, *next;

	if (!a)
		return;
	for (b = a->first; b; b = next) {
		next = b->phys_next;
		free(b);
	}
	for (b = a->spare; b; b = next) {
		next = b->free_next;
		free(b);
	}
	free(a);
}

/* A free block of at least size bytes, or NULL. */
static struct mc_alloc_block *find_free(struct mc_alloc *a, uint64_t size)
{
	struct mc_alloc_block *b;
	unsigned fl, sl;
	uint64_t fl_map;
	uint32_t sl_map;

	/* size <= capacity <= 2^62, so fl < FL_COUNT - 1 here. */
	mapping_search(size, &fl, &sl);
	sl_map = a->sl_bitmap[fl] & (~0u << sl);
	if (!sl_map) {
		fl_map = a->fl_bitmap & (~0ull << (fl + 1));
		if (fl_map) {
			fl = ffs64(fl_map);
			sl_map = a->sl_bitmap[fl];
		}
	}
	if (sl_map)
		return a->heads[fl][ffs64(sl_map)];
	/*
	 * Good fit found nothing. Blocks of the request's own class may
	 * still hold it when the request is not at the class's lower bound
	 * (they were skipped by the rounding); look through that one list.
	 */
	mapping(size, &fl, &sl);
	for (b = a->heads[fl][sl]; b; b = b->free_next)
		if (b->size >= size)
			return b;
	return NULL;
}

int mc_alloc_alloc(struct mc_alloc *a, uint64_t len,
		   struct mc_alloc_block **out)
{
	struct mc_alloc_block *b, *n;
	uint64_t size;

	*out = NULL;
	if (!len)
		return -EINVAL;
	if (len > a->capacity)
		return -ENOSPC;
	size = (len + MC_ALLOC_ALIGN - 1) & ~(uint64_t)(MC_ALLOC_ALIGN - 1);
	b = find_free(a, size);
	if (!b)
		return -ENOSPC;
	n = NULL;
	if (b->size > size) {
		n = node_get(a);
		if (!n)
			return -ENOMEM;
	}
	list_remove(a, b);
	split(a, b, size, n);
	b->state = BLOCK_USED;
	a->used += size;
	*out = b;
	return 0;
}

/*
 * The block holding offset (< capacity): a walk from the last reserved
 * block, backwards when offset is below it but nearer to it than to 0,
 * otherwise forwards from it or from the first block.
 */
static struct mc_alloc_block *block_at(struct mc_alloc *a, uint64_t offset)
{
	struct mc_alloc_block *b = a->cursor;

	if (b && offset < b->offset && offset >= b->offset / 2) {
		while (offset < b->offset)
			b = b->phys_prev;
		return b;
	}
	if (!b || offset < b->offset)
		b = a->first;
	while (offset >= b->offset + b->size)
		b = b->phys_next;
	return b;
}

int mc_alloc_reserve(struct mc_alloc *a, uint64_t offset, uint64_t len,
		     struct mc_alloc_block **out)
{
	struct mc_alloc_block *b, *head = NULL, *tail = NULL;
	uint64_t size, end;

	*out = NULL;
	if (!len || offset % MC_ALLOC_ALIGN || offset >= a->capacity ||
	    len > a->capacity - offset)
		return -EINVAL;
	size = (len + MC_ALLOC_ALIGN - 1) & ~(uint64_t)(MC_ALLOC_ALIGN - 1);
	end = offset + size;
	b = block_at(a, offset);
	/* Free blocks are never adjacent, so a range that runs past this
	 * one's end reaches an allocated block. */
	if (b->state != BLOCK_FREE || end > b->offset + b->size)
		return -EEXIST;
	if (b->offset < offset) {
		head = node_get(a);
		if (!head)
			return -ENOMEM;
	}
	if (end < b->offset + b->size) {
		tail = node_get(a);
		if (!tail) {
			node_put(a, head);
			return -ENOMEM;
		}
	}
	list_remove(a, b);
	if (head) {
		/* b keeps the part before offset; head becomes the block. */
		head->offset = offset;
		head->size = b->offset + b->size - offset;
		b->size = offset - b->offset;
		phys_link_after(b, head);
		list_insert(a, b);
		b = head;
	}
	if (tail)
		split(a, b, size, tail);
	b->state = BLOCK_USED;
	a->used += size;
	a->cursor = b;
	*out = b;
	return 0;
}

void mc_alloc_free(struct mc_alloc *a, struct mc_alloc_block *b)
{
	struct mc_alloc_block *p, *n;

	if (!b)
		return;
	MC_BUG_ON(b->state != BLOCK_USED);
	a->used -= b->size;
	p = b->phys_prev;
	if (p && p->state == BLOCK_FREE) {
		list_remove(a, p);
		p->size += b->size;
		phys_unlink(b);
		node_put(a, b);
		b = p;
	}
	n = b->phys_next;
	if (n && n->state == BLOCK_FREE) {
		list_remove(a, n);
		b->size += n->size;
		phys_unlink(n);
		node_put(a, n);
	}
	list_insert(a, b);
}

uint64_t mc_alloc_block_offset(const struct mc_alloc_block *b)
{
	return b->offset;
}

uint64_t mc_alloc_block_size(const struct mc_alloc_block *b)
{
	return b->size;
}

uint64_t mc_alloc_used(const struct mc_alloc *a)
{
	return a->used;
}

uint64_t mc_alloc_capacity(const struct mc_alloc *a)
{
	return a->capacity;
}

uint64_t mc_alloc_largest_free(const struct mc_alloc *a)
{
	const struct mc_alloc_block *b;
	uint64_t best = 0;
	unsigned fl, sl;

	if (!a->fl_bitmap)
		return 0;
	fl = fls64(a->fl_bitmap);
	sl = fls64(a->sl_bitmap[fl]);
	for (b = a->heads[fl][sl]; b; b = b->free_next)
		if (b->size > best)
			best = b->size;
	return best;
}

#define CHECK(cond)                      \
	do {                             \
		if (!(cond))             \
			return -EUCLEAN; \
	} while (0)

int mc_alloc_check(const struct mc_alloc *a)
{
	const struct mc_alloc_block *b, *prev = NULL;
	uint64_t off = 0, used = 0, n_free = 0, n_listed = 0;
	unsigned fl, sl;

	CHECK(a->first && a->first->offset == 0);
	for (b = a->first; b; prev = b, b = b->phys_next) {
		CHECK(b->phys_prev == prev);
		CHECK(b->offset == off);
		CHECK(b->size && b->size % MC_ALLOC_ALIGN == 0);
		CHECK(b->size <= a->capacity - off);
		CHECK(b->state == BLOCK_FREE || b->state == BLOCK_USED);
		if (b->state == BLOCK_USED) {
			used += b->size;
		} else {
			CHECK(!prev || prev->state != BLOCK_FREE);
			n_free++;
		}
		off += b->size;
	}
	CHECK(off == a->capacity);
	CHECK(used == a->used);
	for (fl = 0; fl < FL_COUNT; fl++) {
		CHECK(!!(a->fl_bitmap & (1ull << fl)) == !!a->sl_bitmap[fl]);
		for (sl = 0; sl < SL_COUNT; sl++) {
			const struct mc_alloc_block *h = a->heads[fl][sl];
			unsigned f, s;

			CHECK(!!(a->sl_bitmap[fl] & (1u << sl)) == !!h);
			for (prev = NULL, b = h; b;
			     prev = b, b = b->free_next) {
				CHECK(b->free_prev == prev);
				CHECK(b->state == BLOCK_FREE);
				mapping(b->size, &f, &s);
				CHECK(f == fl && s == sl);
				CHECK(++n_listed <= n_free);
			}
		}
	}
	CHECK(n_listed == n_free);
	for (b = a->spare, n_listed = 0; b; b = b->free_next, n_listed++)
		CHECK(b->state == BLOCK_SPARE);
	CHECK(n_listed == a->n_spare && a->n_spare <= SPARE_MAX);
	return 0;
}
