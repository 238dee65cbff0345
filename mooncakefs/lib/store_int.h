/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file store_int.h
 * Internals of the store client shared by its files, mooncake_client and
 * the tests: the handle, its lifecycle lock, and the put/get engines.
 *
 * Lifecycle: `lock` is a writer-preferring rwlock. Every API call holds it
 * for reading while it runs (mcs_enter/mcs_leave); setup and close hold it
 * for writing, so close() waits for calls in progress and no call sees a
 * half-built or half-torn-down handle.
 *
 * Codes: functions here return internal codes (0, -errno, MC_E*); the
 * public functions in store.c, store_io.c and store_meta.c convert once
 * with mc_err_to_store().
 */
#ifndef MCS_STORE_INT_H
#define MCS_STORE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hostid.h"
#include "master_client.h"
#include "mooncake/mc_err.h"
#include "mooncake/store.h"
#include "regs.h"
#include "store_cfg.h"

struct te_engine;
struct mcs_segment;
struct mcs_staging;
struct mcs_xfer;
struct mcs_ping;

enum mcs_state { MCS_NEW = 0, MCS_READY, MCS_CLOSED };

/* A call the handle's state does not allow (before setup, after close):
 * UNAVAILABLE_IN_CURRENT_STATUS (-1010) at the public API. */
#define MCS_EBADSTATE MC_ENEEDREMOUNT

struct mooncake_store {
	pthread_rwlock_t lock;
	enum mcs_state state;
	struct mcs_cfg cfg;
	char *name; /* the engine's name, kept until destroy */
	struct te_engine *eng;
	struct mcs_master *master;
	uint8_t client_id[MCS_CLIENT_ID_LEN];
	char host_id[MCS_HOST_ID_LEN];
	struct mcs_segment *seg;
	_Atomic bool seg_mounted; /* the master knows our segment */
	pthread_mutex_t mount_lock; /* serialises (re)mounts */
	struct mcs_staging *staging;
	struct mcs_xfer *xfer;
	struct mcs_ping *ping;
	struct mcs_regs regs; /* user buffers */
	_Atomic unsigned rpc_ms; /* 0: from the config */
	_Atomic unsigned transfer_ms;
	bool rpc_ms_set, transfer_ms_set; /* by set_timeouts before setup */
};

/**
 * Take the handle for one call: 0, or the *store code* to return
 * (INVALID_PARAMS for NULL, UNAVAILABLE_IN_CURRENT_STATUS before setup
 * or after close).
 */
int mcs_enter(struct mooncake_store *s);
void mcs_leave(struct mooncake_store *s);

/** setup() with every setting (mooncake_client passes segment_name). */
int mcs_store_setup(struct mooncake_store *s, const struct mcs_cfg_args *a);

/* ---- put/get engines (store_put.c, store_get.c) -------------------------- */

struct mcs_put_key {
	const char *key;
	void *const *parts; /* the value is the concatenation of the parts */
	const size_t *part_sizes;
	size_t n_parts;
	bool trusted; /* parts are in the staging buffer: skip the check */
	int result; /* out: internal code */
};

/**
 * Put n keys with one PutStart (batch false: n == 1) and as few transfer
 * batches as possible. Every result is set. Returns 0.
 */
int mcs_put_keys(struct mooncake_store *s, struct mcs_put_key *keys, size_t n,
		 const mooncake_replicate_config_t *cfg, bool batch);

struct mcs_get_key {
	const char *key;
	void *const *parts; /* filled in order, up to the object's size */
	const size_t *part_sizes;
	size_t n_parts;
	bool trusted;
	int64_t result; /* out: bytes read or an internal code */
};

/** Get n keys into their (registered) parts. Every result is set. */
int mcs_get_keys(struct mooncake_store *s, struct mcs_get_key *keys, size_t n,
		 bool batch);

/** get(): through the staging buffer into any memory. */
int64_t mcs_get_staged(struct mooncake_store *s, const char *key, void *buf,
		       size_t size);
/** put(): through the staging buffer from any memory. */
int mcs_put_staged(struct mooncake_store *s, const char *key, const void *value,
		   size_t size, const mooncake_replicate_config_t *cfg);

/** A usable key: non-NULL, non-empty. */
bool mcs_key_ok(const char *key);

#endif
