/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory made ready ahead of a load (prefault.h; docs/design.md, "A
 * standby's memory").
 *
 * The memory is heap, in blocks below glibc's mmap threshold, each page
 * written once, and kept allocated while the standby waits (freed, it
 * could be trimmed or handed out piecemeal). At the load all are freed
 * but the block at the highest address: the rest coalesces into free
 * chunks that the highest block keeps apart from the heap's top, so
 * free() never trims them, and the restore's allocations are carved from
 * them. After the load that last block goes too, and malloc_trim() gives
 * back what the restore did not use.
 */
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <unistd.h>

#include "memfree.h"
#include "prefault.h"

#define BLOCK (64u << 10) /* under glibc's smallest mmap threshold */
#define OBJECT_BYTES 256u /* a restored object's memory, but its key */
#define HEADROOM (16u << 20) /* given back when malloc refuses a block */

static void **blocks;
static size_t n_blocks, cap_blocks;
static void *fence;

size_t mst_prefault_want(uint64_t objects, uint64_t record_bytes, bool *capped)
{
	/* What a load adds to a master's resident memory (10 MiB empty),
	 * measured: master_sim's records (64-byte keys) of 1.18 million
	 * objects and 145 MiB, 441 MiB; of 4.72 million and 577 MiB, 1,713
	 * MiB; 300,000 objects with keys of 2-7 bytes and 13.5 MiB, 92 MiB.
	 * 256 bytes an object plus the record's size is within 6% of each
	 * (the index included). */
	uint64_t want = objects * OBJECT_BYTES + record_bytes;
	/* Half of what is free and what is ready together: the same cap
	 * round after round, as the ready part grows out of the free. */
	uint64_t room = (n_blocks * (uint64_t)BLOCK + mst_mem_free()) / 2;

	*capped = want > room;
	return (size_t)(want < room ? want : room);
}

/* Blocks given back, newest first, until bytes went or none are left. */
static void give_back(size_t bytes)
{
	for (; bytes && n_blocks; bytes -= bytes < BLOCK ? bytes : BLOCK)
		free(blocks[--n_blocks]);
}

size_t mst_prefault_grow(size_t want, size_t step, bool *refused)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), ready;

	*refused = false;
	if (!page)
		page = 4096;
	for (ready = n_blocks * (size_t)BLOCK; ready < want && step >= BLOCK;
	     ready += BLOCK, step -= BLOCK) {
		volatile char *p = NULL;

		if (n_blocks == cap_blocks) {
			size_t cap = cap_blocks ? 2 * cap_blocks : 1024;
			void **b = realloc(blocks, cap * sizeof(*b));

			if (b) {
				blocks = b;
				cap_blocks = cap;
			}
		}
		if (n_blocks < cap_blocks)
			p = malloc(BLOCK);
		if (!p) {
			/* The process's own allocations come first. */
			*refused = true;
			give_back(HEADROOM);
			return n_blocks * (size_t)BLOCK;
		}
		for (size_t off = 0; off < BLOCK; off += page)
			p[off] = 0;
		blocks[n_blocks++] = (void *)p;
	}
	return ready;
}

void mst_prefault_use(void)
{
	size_t top = 0;

	if (!n_blocks)
		return;
	for (size_t i = 1; i < n_blocks; i++)
		if ((uintptr_t)blocks[i] > (uintptr_t)blocks[top])
			top = i;
	fence = blocks[top];
	for (size_t i = 0; i < n_blocks; i++)
		if (i != top)
			free(blocks[i]);
	free(blocks);
	blocks = NULL;
	n_blocks = cap_blocks = 0;
}

void mst_prefault_end(void)
{
	if (!fence)
		return;
	free(fence);
	fence = NULL;
#ifdef __GLIBC__
	(void)malloc_trim(0);
#endif
}
