/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file stage.h
 * The bytes of a file being written whose size is not known in advance,
 * held in memory until its commit: a sparse array of chunks.
 *
 * Chunks are MCFS_STAGE_CHUNK bytes (the first one grows from 64 KiB, so
 * a small file holds little). A chunk never written is a hole and reads as
 * zeros. Each chunk has a fill mark: [0, fill) holds written bytes or
 * zeros, [fill, end) is logically zero and may hold stale bytes of a
 * previous file, so sequential writes never zero anything and reused
 * chunks need no memset. Full-size chunks come from a per-mount pool of
 * chunks already faulted in, which keeps up to 64 MiB of them idle.
 *
 * Every chunk a file holds counts against the mount's staging_limit
 * (ENOSPC beyond it, never out-of-memory). Not thread-safe: the file
 * handle's lock guards a stage; the pool has its own lock.
 */
#ifndef MCFS_STAGE_H
#define MCFS_STAGE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define MCFS_STAGE_CHUNK (4u << 20)

struct mcfs_stage_pool {
	pthread_mutex_t lock;
	char **free;
	size_t n_free, max_free;
	uint64_t limit; /* bytes all stages together may hold */
	_Atomic uint64_t held; /* bytes they hold now */
};

struct mcfs_stage {
	char **chunk; /* NULL: a hole */
	uint32_t *cap, *fill;
	size_t n; /* entries in the arrays */
	uint64_t size;
};

void mcfs_stage_pool_init(struct mcfs_stage_pool *p, uint64_t limit);
void mcfs_stage_pool_fini(struct mcfs_stage_pool *p);

/** Could a write of [off, off + len) ever fit the limit? 0, or -EFBIG
 *  (past the largest offset) or -ENOSPC (more than the limit holds),
 *  checked before anything changes. */
int mcfs_stage_fits(const struct mcfs_stage_pool *p, uint64_t off,
		    uint64_t len);
/** Copy len bytes at off in, growing the size: 0, -ENOSPC or -ENOMEM. */
int mcfs_stage_write(struct mcfs_stage_pool *p, struct mcfs_stage *st,
		     uint64_t off, const void *buf, size_t len);
/** Set the size; bytes past a shrink read as zeros if it grows again. */
int mcfs_stage_truncate(struct mcfs_stage_pool *p, struct mcfs_stage *st,
			uint64_t size);
/**
 * The bytes at off, up to len: returns how many are contiguous there
 * (0 at or past the size) and sets *ptr to them, or to NULL when they
 * are zeros (a hole, or past a chunk's fill mark).
 */
size_t mcfs_stage_span(const struct mcfs_stage *st, uint64_t off, size_t len,
		       const char **ptr);
/** Give every chunk back to the pool; the stage is empty again. */
void mcfs_stage_release(struct mcfs_stage_pool *p, struct mcfs_stage *st);

#endif
