/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file ckpt_master.h
 * Typed wrappers of the master's checkpoint methods (master.proto,
 * "checkpoints"; docs/design.md, "Checkpoints"), with master_client.h's
 * conventions: 0 or an internal code (-errno, MC_E*): transport errors as
 * they are, store codes translated with mcs_err_from_store() (-704 becomes
 * -ENOENT, -705 -EEXIST, -600 -EINVAL, -710 REPLICA_NOT_FOUND -ENODATA:
 * a shard no holder has).
 * Responses returned through `out` are owned by the caller: free them with
 * mcs_master_free(). Any number of threads may call at once.
 *
 * Bitmaps of shards: bit i is (byte[i / 8] >> (i % 8)) & 1.
 */
#ifndef MCS_CKPT_MASTER_H
#define MCS_CKPT_MASTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master_client.h"

/** Publish ck (name, shard_size, files, crcs, or link), sealed. endpoint:
 *  this client also holds every shard, serving at endpoint (NULL: not).
 *  replace: a link replaces a link of that name. *id: the new id. */
int mcs_ckpt_create(struct mcs_master *m, const Mcrpc__Ckpt *ck,
		    const char *endpoint, bool replace,
		    uint64_t *id) MC_MUST_CHECK;
/** One page of checkpoints whose names start with prefix (NULL: all),
 *  after start_after (NULL: from the first); limit 0: the master's 1000. */
int mcs_ckpt_list(struct mcs_master *m, const char *prefix,
		  const char *start_after, unsigned limit,
		  Mcrpc__CkptListResponse **out) MC_MUST_CHECK;
/** By name, or by id when name is NULL or "". holders: with holder_list. */
int mcs_ckpt_info(struct mcs_master *m, const char *name, uint64_t id,
		  bool holders, Mcrpc__CkptInfoResponse **out) MC_MUST_CHECK;
int mcs_ckpt_remove(struct mcs_master *m, const char *name) MC_MUST_CHECK;
/** Add (drop false) or drop the shards of bitmap[len] for this client,
 *  serving at endpoint; drop with len 0 drops the holder record. */
int mcs_ckpt_hold(struct mcs_master *m, uint64_t id, const char *endpoint,
		  const uint8_t *bitmap, size_t len, bool drop) MC_MUST_CHECK;
/** A source for shard (shard >= 0), or for any shard not set in
 *  have[have_len] (shard < 0). exclude: endpoints to skip. */
int mcs_ckpt_source(struct mcs_master *m, uint64_t id, int64_t shard,
		    const uint8_t *have, size_t have_len,
		    const char *const *exclude, size_t n_exclude,
		    Mcrpc__CkptSourceResponse **out) MC_MUST_CHECK;

/* CkptDone results. */
enum mcs_ckpt_result {
	MCS_CKPT_FETCHED = 0,
	MCS_CKPT_UNREACHABLE = 1,
	MCS_CKPT_CORRUPT = 2,
};
/** A fetch of shard from holder (its client id, MCS_CLIENT_ID_LEN bytes)
 *  ended with result; hold_endpoint: this client now serves it there
 *  (NULL: not). */
int mcs_ckpt_done(struct mcs_master *m, uint64_t id, uint32_t shard,
		  const uint8_t *holder, int result, uint64_t bytes,
		  const char *hold_endpoint) MC_MUST_CHECK;

#endif
