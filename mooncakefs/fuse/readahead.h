/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file readahead.h
 * Read-ahead for sequential reads of objects held by other pool members
 * (docs/design.md, "Reads"). A remote read is one transfer per FUSE
 * request, so a sequential reader waits for every one in turn; with
 * read-ahead, an open file read sequentially has the next `read_ahead`
 * bytes fetched in chunks by the mount's fetcher threads while the
 * kernel is answered from the chunks already there.
 *
 * Memory: chunks come from one registered pool of `read_ahead_limit`
 * bytes, made on first use; a file whose window finds the pool empty
 * reads the rest directly (as without read-ahead). Reads of objects in
 * this mount's own segment never come here (they are answered from the
 * segment).
 *
 * Errors: a chunk whose fetch failed is dropped and the request that
 * needed it is read directly, so the error the caller sees is that read's.
 */
#ifndef MCFS_READAHEAD_H
#define MCFS_READAHEAD_H

#include <stdbool.h>
#include <stdint.h>

#include "mooncake/store.h"
#include "mooncake/store_fs.h"

struct fuse_req; /* fuse_req_t */
struct mcfs_ra; /* one open file's window */
struct mcfs_ra_pool; /* the mount's chunks and fetchers */
struct mcfs_splice; /* splice.h */

/** The pool's settings; nothing is allocated until a read needs it.
 *  window 0 turns read-ahead off; with splice->on, chunks over TCP are
 *  fetched into pipes and answered from there (splice.h; the pool keeps
 *  the pointer). 0 or -ENOMEM. */
int mcfs_ra_pool_init(struct mcfs_ra_pool **out, mooncake_store_t store,
		      uint64_t window, uint64_t limit,
		      struct mcfs_splice *splice);
/** Stops the fetchers and frees the chunks; every window must be closed
 *  first. NULL is ignored. */
void mcfs_ra_pool_fini(struct mcfs_ra_pool *p);

/**
 * Answers a read of [off, off + size) of obj (size bytes; off < size of
 * the object) from obj's window *rap (made at the first read; it fetches
 * ahead from a read at offset 0 or where the previous read ended)
 * and returns true once it replied to req; false: nothing was replied
 * (the read is not sequential, read-ahead is off or out of memory, or a
 * fetch failed) and the caller reads directly. others: remote reads of
 * this mount in flight besides this one (with others, a request of half a
 * chunk or more fetches nothing ahead). Safe from several threads on the
 * same handle.
 */
bool mcfs_ra_read(struct mcfs_ra_pool *p, struct mcfs_ra **rap,
		  mooncake_object_t obj, uint64_t obj_size,
		  struct fuse_req *req, uint64_t off, size_t size,
		  unsigned others);

/** Closes a window: waits for its fetches in flight (never for queued
 *  ones) and for replies being sent from it, then gives its chunks back.
 *  Call before the object is closed. NULL is ignored. */
void mcfs_ra_close(struct mcfs_ra_pool *p, struct mcfs_ra *ra);

/** Counters for .mooncake/stats: chunks fetched ahead, requests answered
 *  from them, fetches that failed, windows refused for want of chunks. */
void mcfs_ra_stats(struct mcfs_ra_pool *p, uint64_t *fetched, uint64_t *hits,
		   uint64_t *failed, uint64_t *starved);
/** Of those requests, the ones answered from a chunk's pipe. */
uint64_t mcfs_ra_spliced(struct mcfs_ra_pool *p);

#endif
