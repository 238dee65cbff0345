/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file alloc.h
 * The master's per-segment buffer allocator: places object replicas in the
 * memory segments that clients contribute.
 *
 * The segment's memory lives in another process and the master never
 * touches it, so the allocator deals only in offsets inside [0, capacity)
 * and keeps all of its metadata (one malloc'd node per block) outside the
 * managed range.
 *
 * Algorithm: TLSF (two-level segregated fit, Masmano et al. 2004). Free
 * blocks sit in per-size-class doubly linked lists, the class being the
 * first level floor(log2(size)) split into 32 second-level subdivisions,
 * with a bitmap per level so the smallest non-empty class that fits is
 * found in O(1). Every block knows its physical neighbours, so freeing
 * coalesces in O(1). The search is "good fit": the request is rounded up
 * to the next class boundary so any block of the class found fits; when
 * that finds nothing, the request's own class list is scanned, so an
 * allocation fails only when no free block at all is large enough (a
 * nearly full segment still hands out its last fitting block).
 *
 * Costs: mc_alloc_alloc() O(1) plus, in the fallback only, a scan of one
 * class list; mc_alloc_free() O(1); mc_alloc_largest_free() scans the
 * largest non-empty class list; mc_alloc_reserve() walks the blocks from
 * where the previous reserve was, so it is O(1) amortised when successive
 * calls come in increasing (or decreasing) offset order but O(number of
 * blocks) each in random order. Sort the records by offset before
 * restoring them after a restart: 100k random-order reserves take over a
 * minute, sorted ones a few milliseconds.
 *
 * Not thread-safe: the master holds its own lock around every call,
 * including the read-only ones.
 */
#ifndef MC_MASTER_ALLOC_H
#define MC_MASTER_ALLOC_H

#include <stdint.h>

#include "mc_compiler.h"

/** One allocator per segment; it manages offsets [0, capacity). */
struct mc_alloc;

/**
 * Opaque handle of one allocation. It stays valid until it is passed to
 * mc_alloc_free() or the allocator is destroyed.
 */
struct mc_alloc_block;

/** Every offset and every (rounded) block size is a multiple of this. */
#define MC_ALLOC_ALIGN 64

/** The largest capacity mc_alloc_create() accepts: 4 EiB. */
#define MC_ALLOC_MAX_CAPACITY (1ull << 62)

/**
 * Create an allocator managing [0, size), all of it free. A size that is
 * not a multiple of MC_ALLOC_ALIGN is rounded down (the tail is never
 * handed out); mc_alloc_capacity() gives the rounded value.
 * @return 0, -EINVAL (size < MC_ALLOC_ALIGN or > MC_ALLOC_MAX_CAPACITY)
 *         or -ENOMEM.
 */
int mc_alloc_create(uint64_t size, struct mc_alloc **out) MC_MUST_CHECK;

/** Free all metadata; every outstanding handle becomes invalid. NULL ok. */
void mc_alloc_destroy(struct mc_alloc *a);

/**
 * Allocate len bytes, rounded up to a multiple of MC_ALLOC_ALIGN, at an
 * offset that is a multiple of MC_ALLOC_ALIGN.
 * @return 0 with *out set; -EINVAL for len 0; -ENOSPC when no free range
 *         is large enough (it fails only then); -ENOMEM when a metadata
 *         node cannot be allocated. On error nothing changed.
 */
int mc_alloc_alloc(struct mc_alloc *a, uint64_t len,
		   struct mc_alloc_block **out) MC_MUST_CHECK;

/**
 * Mark exactly [offset, offset + len) as allocated, to restore the state
 * recorded before a restart. offset must be a multiple of MC_ALLOC_ALIGN;
 * len is rounded up to one, as in mc_alloc_alloc(), so the length that
 * was asked for and the block size it got both restore the same block.
 * @return 0 with *out set; -EINVAL for len 0, a misaligned offset or a
 *         range reaching past the capacity; -EEXIST if any part of the
 *         range is allocated; -ENOMEM. On error nothing changed.
 */
int mc_alloc_reserve(struct mc_alloc *a, uint64_t offset, uint64_t len,
		     struct mc_alloc_block **out) MC_MUST_CHECK;

/**
 * Return a block; it merges with free physical neighbours at once. The
 * handle is invalid afterwards (freeing it twice is a bug and aborts when
 * detected). NULL is ignored.
 */
void mc_alloc_free(struct mc_alloc *a, struct mc_alloc_block *b);

/** The block's offset inside the segment. */
uint64_t mc_alloc_block_offset(const struct mc_alloc_block *b);

/** The block's size: the length asked for, rounded up. */
uint64_t mc_alloc_block_size(const struct mc_alloc_block *b);

/** Bytes in allocated blocks (their rounded sizes). */
uint64_t mc_alloc_used(const struct mc_alloc *a);

/** The managed size (the size given to mc_alloc_create(), rounded down). */
uint64_t mc_alloc_capacity(const struct mc_alloc *a);

/**
 * The size of the largest free block: an mc_alloc_alloc() of at most this
 * many bytes succeeds (barring -ENOMEM), one of more fails. 0 when full.
 */
uint64_t mc_alloc_largest_free(const struct mc_alloc *a);

/**
 * Debugging aid for tests: walk every block and every free list and check
 * the invariants (blocks tile [0, capacity) in order, no two free blocks
 * adjacent, each free block in the list of its class, bitmaps matching
 * the lists, used bytes matching the allocated blocks). O(blocks).
 * @return 0 or -EUCLEAN.
 */
int mc_alloc_check(const struct mc_alloc *a);

#endif
