/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file staging.h
 * The staging buffer: local_buffer_size bytes registered with the transfer
 * engine, through which put() and get() copy values that live in memory
 * the engine does not know. A first-fit allocator over a sorted list of
 * free extents (coalesced on free), 64-byte aligned; a caller that does
 * not fit waits for others to free, up to a timeout.
 *
 * Thread safety: every function may be called from any thread.
 */
#ifndef MCS_STAGING_H
#define MCS_STAGING_H

#include <stddef.h>
#include <stdint.h>

#include "mc_compiler.h"

struct te_engine;
struct mcs_staging;

/**
 * Map len bytes and register them with eng (location "cpu:0", local only);
 * eng may be NULL (tests). 0, -EINVAL (len 0), -ENOMEM or te_register's
 * code.
 */
int mcs_staging_create(struct te_engine *eng, size_t len,
		       struct mcs_staging **out) MC_MUST_CHECK;
/** Unregister (when eng is still alive) and unmap. */
void mcs_staging_destroy(struct mcs_staging *s, struct te_engine *eng);

size_t mcs_staging_size(const struct mcs_staging *s);

/**
 * Take len bytes (len > 0). -EMSGSIZE when len exceeds the buffer,
 * -ENOBUFS when nothing fitted within timeout_ms, -ENOMEM.
 */
int mcs_staging_alloc(struct mcs_staging *s, size_t len, unsigned timeout_ms,
		      void **out) MC_MUST_CHECK;
/** Give back what alloc(len) returned. */
void mcs_staging_free(struct mcs_staging *s, void *p, size_t len);

/** Bytes free now (for tests and stats). */
size_t mcs_staging_free_bytes(struct mcs_staging *s);

#endif
