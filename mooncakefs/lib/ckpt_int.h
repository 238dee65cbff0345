/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file ckpt_int.h
 * Inside the checkpoint API (include/mooncake/ckpt.h): the handle that
 * ckpt.c (handle, list, info, remove), ckpt_publish.c and ckpt_get.c
 * share. Functions here return internal codes; the public ones convert
 * once with mc_err_to_store().
 */
#ifndef MCS_CKPT_INT_H
#define MCS_CKPT_INT_H

#include "ckpt_fetch.h"
#include "ckpt_serve.h"
#include "mooncake/ckpt.h"
#include "store_int.h"

/* How often a handle tells the master again what it holds: a master
 * that dropped this client (silent past client_ttl, or restarted and past
 * its restore grace) learns it back within this. */
#define MCS_CKPT_REANNOUNCE_MS 5000

struct mooncake_ckpt {
	struct mooncake_store *store;
	struct mcs_ckpt_srv *srv;
	struct mcs_ckpt_peers *peers;
	mooncake_ckpt_options_t opt; /* strings copied (below) */
	char *serve_host, *cache_dir;
	pthread_t keeper; /* re-announces (MCS_CKPT_REANNOUNCE_MS) */
	bool keeper_started;
	pthread_mutex_t klock;
	pthread_cond_t kcond; /* CLOCK_MONOTONIC */
	bool stopping;
	/* Held while announcing one checkpoint and while one stops being
	 * served (unlisted, then dropped at the master), so a re-announce
	 * never brings back a holder record just dropped. */
	pthread_mutex_t alock;
	/* Checkpoints read on demand (ckpt_cache.c), under cache_lock. */
	pthread_mutex_t cache_lock;
	pthread_cond_t cache_cond; /* a shard fetch ended */
	struct mcs_ckpt_cached *cached;
	unsigned readahead; /* read-ahead and prefetch threads running */
	bool cache_closing; /* close: prefetch threads stop */
};

/** Make every entry of lay under root (directories, symlinks, files of
 *  their final sizes, sparse); the first error, logged. */
int mcs_ckpt_lay_out(const struct mcs_ckpt_layout *lay, const char *root);
/** Remove what mcs_ckpt_lay_out() made. */
void mcs_ckpt_undo(const struct mcs_ckpt_layout *lay, const char *root);
/** Stop every on-demand checkpoint and empty the cache (close). */
void mcs_ckpt_cache_free(struct mooncake_ckpt *c);

/** The checkpoint name, a link followed one level: its CkptInfo answer's
 *  layout (checked). */
int mcs_ckpt_lookup(struct mooncake_ckpt *c, const char *name,
		    struct mcs_ckpt_layout **out);
/** Serve sv and tell the master which shards it holds (all it has). */
int mcs_ckpt_announce(struct mooncake_ckpt *c, struct mcs_ckpt_served *sv);
/** Stop serving sv: unlisted here, then its holder record dropped at
 *  the master (errors logged). */
void mcs_ckpt_unserve(struct mooncake_ckpt *c, struct mcs_ckpt_served *sv);
/** Tell the master which shards sv holds (none: nothing is said). */
int mcs_ckpt_announce_held(struct mooncake_ckpt *c, struct mcs_ckpt_served *sv);
/** The fetch settings of c (progress: as given). */
void mcs_ckpt_fetch_cfg(struct mooncake_ckpt *c, struct mcs_ckpt_fetch_cfg *f,
			mooncake_ckpt_progress_fn progress, void *arg);

#endif
