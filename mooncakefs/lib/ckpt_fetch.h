/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file ckpt_fetch.h
 * Fetching a checkpoint's shards from its holders (docs/design.md,
 * "Checkpoints"): the master names a source per shard (CkptSource), the
 * bytes come from that holder (CkptRead, MCS_CKPT_READ_MAX at a time),
 * are checked against the shard's crc, land in the destination's backing
 * (its file descriptors or memory), and the outcome goes back to the
 * master (CkptDone), which makes this client a holder of the shard when
 * it serves (cfg.srv). A holder that fails or sends bad bytes is reported
 * and another is asked; a shard fails after MCS_CKPT_TRIES sources.
 */
#ifndef MCS_CKPT_FETCH_H
#define MCS_CKPT_FETCH_H

#include <stdint.h>

#include "ckpt_serve.h"
#include "mc_auth.h"
#include "mooncake/ckpt.h"

#define MCS_CKPT_TRIES 8

struct mcs_master;
struct mcs_ckpt_peers;

/** Connections to holders (one pooled RPC client per endpoint). */
int mcs_ckpt_peers_new(const struct mc_auth_key *auth, unsigned timeout_ms,
		       struct mcs_ckpt_peers **out);
void mcs_ckpt_peers_free(struct mcs_ckpt_peers *p);

struct mcs_ckpt_fetch_cfg {
	struct mcs_master *master;
	struct mcs_ckpt_peers *peers;
	struct mcs_ckpt_srv *srv; /* serve what is fetched; NULL: do not */
	unsigned inflight; /* shards at once (0: 4) */
	mooncake_ckpt_progress_fn progress; /* NULL: none */
	void *arg;
};

/** Fetch every shard dst does not hold: 0, or the first error (-ENOENT:
 *  the checkpoint went away; -ENODATA: a shard no holder has; the last
 *  source's error for a shard that failed MCS_CKPT_TRIES times). */
int mcs_ckpt_fetch_all(const struct mcs_ckpt_fetch_cfg *cfg,
		       struct mcs_ckpt_served *dst);
/**
 * Fetch shard from the source the master named (a CkptSource answer),
 * into dst, and report the outcome (CkptDone). buf: room for the shard
 * when dst keeps it in files. 0, or the fetch's error.
 */
int mcs_ckpt_fetch_from(const struct mcs_ckpt_fetch_cfg *cfg,
			struct mcs_ckpt_served *dst, uint32_t shard,
			const Mcrpc__CkptSourceResponse *src, uint8_t *buf);
/** Fetch one shard (on demand): 0, or an error. */
int mcs_ckpt_fetch_shard(const struct mcs_ckpt_fetch_cfg *cfg,
			 struct mcs_ckpt_served *dst, uint32_t shard);

#endif
