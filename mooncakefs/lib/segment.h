/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file segment.h
 * The segment a client contributes to the pool: 4096 + size bytes from
 * te_mem_alloc(), registered whole (remote accessible). A kept segment is
 * named shared memory, /dev/shm/mooncake.seg.<name>, that survives its
 * process; any other is unnamed (a memfd that same-host peers map through
 * the owner's descriptor) and dies with it. The first page is a header:
 *
 *   offset 0   char magic[8] = "MCSEG001"
 *   offset 8   u32 version = 1
 *   offset 12  u8 id[16]          the segment's UUID at the master
 *   offset 32  u64 size           pool bytes after the header
 *   offset 40  u64 created_ms     wall clock when the id was made
 *
 * The pool, [base + 4096, base + 4096 + size), is what the master places
 * replicas in. A kept segment found with a valid header of the same size
 * was left by a previous process of this name (kill -9): its id is kept
 * so the master can re-adopt the objects in it.
 */
#ifndef MCS_SEGMENT_H
#define MCS_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mc_compiler.h"

#define MCS_SEG_HDR_LEN 4096u
#define MCS_SEG_MIN_SIZE (1u << 20)
#define MCS_SEG_MAGIC "MCSEG001"
#define MCS_SEG_VERSION 1u
#define MCS_SEG_NAME_MAX 200

struct te_engine;

struct mcs_seg_hdr {
	char magic[8];
	uint32_t version;
	uint8_t id[16];
	uint64_t size;
	uint64_t created_ms;
};

struct mcs_segment {
	void *map; /* header + pool */
	size_t map_len;
	void *pool; /* map + MCS_SEG_HDR_LEN */
	uint64_t size;
	uint8_t id[16];
	bool kept; /* named in /dev/shm, outlives the process */
	bool reused; /* the header was valid: try re-adoption */
	bool registered;
	char name[MCS_SEG_NAME_MAX + 1];
};

/**
 * Turn an engine name into a segment name: ':' and '/' become '_'.
 * -ENAMETOOLONG beyond MCS_SEG_NAME_MAX.
 */
int mcs_segment_name(const char *engine_name, char *out,
		     size_t outlen) MC_MUST_CHECK;

/**
 * Make the segment `name` of `size` pool bytes and register it; with
 * `keep`, map (or re-map) /dev/shm/mooncake.seg.<name>, otherwise unnamed
 * memory (the name is for messages only). The memory is reserved (no
 * fault can SIGBUS) and faults in in the background.
 * -EINVAL for size < MCS_SEG_MIN_SIZE or a bad name, MC_ESEGEXISTS when a
 * live process holds the memory of that name, -ENOSPC when /dev/shm cannot
 * hold a kept segment (err names the fix), else te's codes; err says why.
 */
/** A live process holds the kept segment of this name (its memory in
 *  /dev/shm is locked). */
bool mcs_segment_held(const char *name);
/** Whether a kept segment of this name and size could be made: a valid
 *  name and size, and room in /dev/shm (counting a kept segment's own
 *  blocks). 0, or -EINVAL / -ENOSPC with the reason in err. */
int mcs_segment_check(const char *name, uint64_t size, char *err,
		      size_t errlen);
int mcs_segment_open(struct te_engine *eng, const char *name, uint64_t size,
		     bool keep, struct mcs_segment **out, char *err,
		     size_t errlen) MC_MUST_CHECK;

/**
 * Unregister (eng non-NULL, while the engine lives) and unmap; with
 * `unlink`, remove the name first so the memory goes with the last map.
 * Call with eng first (before te_engine_destroy), then with NULL to free.
 */
void mcs_segment_unregister(struct mcs_segment *seg, struct te_engine *eng);
void mcs_segment_free(struct mcs_segment *seg, struct te_engine *eng,
		      bool unlink);

#endif
