/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file store_int.h
 * Internals of the store client shared by its files, mooncake_client and
 * the tests: the handle, its lifecycle lock, the put/get engines and the
 * replica helpers they and the store_fs.h calls share.
 *
 * Lifecycle: `lock` is a writer-preferring rwlock. Every API call holds it
 * for reading while it runs (mcs_enter/mcs_leave); setup and close hold it
 * for writing, so close() waits for calls in progress and no call sees a
 * half-built or half-torn-down handle.
 *
 * Codes: functions here return internal codes (0, -errno, MC_E*); the
 * public functions (store.c, store_io.c, store_meta.c and the store_fs.h
 * ones in store_fs_meta.c, store_object.c, store_writer.c, store_watch.c)
 * convert once with mc_err_to_store().
 */
#ifndef MCS_STORE_INT_H
#define MCS_STORE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "contact.h"
#include "mc_host.h"
#include "master_client.h"
#include "mooncake/mc_err.h"
#include "mooncake/store.h"
#include "mooncake/store_fs.h"
#include "put_slots.h"
#include "regs.h"
#include "store_cfg.h"
#include "xfer.h"

struct te_engine;
struct mcs_holds;
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
	_Atomic unsigned forks; /* the process's fork count, made/set up */
	struct mcs_cfg cfg;
	char *name; /* the engine's name, kept until destroy */
	const char *protocol; /* what the segment speaks (check_protocol) */
	struct te_engine *eng;
	struct mcs_master *master;
	uint8_t client_id[MCS_CLIENT_ID_LEN];
	char host_id[MC_HOST_ID_LEN];
	struct mcs_segment *seg;
	_Atomic bool seg_mounted; /* the master knows our segment */
	bool remount_fenced; /* ping thread: fenced for the re-mount owed */
	pthread_mutex_t mount_lock; /* serialises (re)mounts */
	struct mcs_staging *staging;
	struct mcs_xfer *xfer;
	struct mcs_ping *ping;
	struct mcs_holds *holds; /* of open objects (store_fs.h) */
	struct mcs_locs *locs; /* NULL: off (location_cache_keys 0) */
	struct mcs_slots slots; /* reserved space for puts (put_slots.h) */
	struct mcs_contact contact; /* the master's run (contact.h) */
	struct mcs_regs regs; /* user buffers */
	_Atomic unsigned rpc_ms; /* 0: from the config */
	_Atomic unsigned transfer_ms;
	bool rpc_ms_set, transfer_ms_set; /* by set_timeouts before setup */
	char *tenant; /* by set_tenant before setup; NULL: cfg.tenant_id */
	/* mooncake_store_largest_segment(): the size last asked, and the
	 * segments' view it was asked in, plus one (0: never asked). */
	_Atomic uint64_t largest, largest_view;
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
/**
 * What would make mcs_store_setup() with a fail for good, found without
 * contacting anyone: the configuration, the metadata connection string's
 * form, a kept segment's name and (when segment_name is given) room in
 * /dev/shm. 0, or a code with the reason in err.
 */
int mcs_join_check(const struct mcs_cfg_args *a, char *err, size_t errlen);
/** The handle was made or set up before a fork and this is the child:
 *  its threads, locks and connections are the parent's (store.c). */
bool mcs_store_forked(const struct mooncake_store *s);

/* ---- put/get engines (store_put.c, store_get.c) -------------------------- */

/* The longest group id (the master's MST_GROUP_ID_MAX). */
#define MCS_GROUP_ID_MAX 1024

struct mcs_put_key {
	const char *key;
	void *const *parts; /* the value is the concatenation of the parts */
	const size_t *part_sizes;
	size_t n_parts;
	bool trusted; /* parts are in the staging buffer: skip the check */
	const char *group; /* group id, NULL: from the config (or none) */
	int result; /* out: internal code */
};

/** Set keys[i].group (where NULL) from cfg->group_ids: one for every key,
 *  or one per key; 0, or -EINVAL (logged) for another count or an id
 *  longer than MCS_GROUP_ID_MAX. */
int mcs_put_groups(struct mcs_put_key *keys, size_t n,
		   const mooncake_replicate_config_t *cfg);

/**
 * Put n keys with one PutStart (batch false: n == 1) and as few transfer
 * batches as possible. Every result is set. Returns 0.
 */
int mcs_put_keys(struct mooncake_store *s, struct mcs_put_key *keys, size_t n,
		 const mooncake_replicate_config_t *cfg, bool batch);

/**
 * A transfer with endpoint ended in rc: when rc says the peer could not
 * be reached (mcs_peer_unreachable), the next puts are placed elsewhere
 * (mcs_master_note_unreachable), this client's slots there are given back
 * and reads try that endpoint's replicas last, for the next seconds.
 */
void mcs_note_transfer(struct mooncake_store *s, const char *endpoint, int rc);

struct mcs_xfer_op;
/**
 * Write ops into space that the master's run placed (PutStart's
 * replicas, a reserved slot), each part only while that run is in
 * contact (contact.h; mcs_xfer_write with the transfer timeout). Every
 * result is set; MC_EMASTERGONE for what was not written because another
 * run serves now. Returns 0 or the code that stopped the write.
 */
int mcs_write_placed(struct mooncake_store *s, uint64_t run,
		     struct mcs_xfer_op *ops, size_t n);
/**
 * A call that ends a put placed by run (PutEnd) failed with rc: was it
 * because another run serves now (it knows nothing of the put)? Asks the
 * master with a Ping: MC_EMASTERGONE if so, else rc (also when the Ping
 * fails, and for rc 0).
 */
int mcs_contact_blame(struct mooncake_store *s, uint64_t run, int rc);

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
/**
 * A slot of the staging buffer for n bytes of key moved to or from memory
 * that is not registered (what: "put", "get", "read", "write"). -EINVAL,
 * with a warning naming the setting to change, when there is no staging
 * buffer that large; otherwise as mcs_staging_alloc().
 */
int mcs_staging_take(struct mooncake_store *s, const char *what,
		     const char *key, uint64_t n, void **out) MC_MUST_CHECK;

/* ---- replicas (replicas.c) ------------------------------------------------ */

/** A replica as handles keep it: where its bytes are. */
struct mcs_loc {
	const char *endpoint; /* the engine's name */
	uint64_t address; /* of byte 0 there */
	const uint8_t *seg_id; /* its segment (MCS_SEG_ID_LEN), or NULL */
};

/** The segment id of replica r, or NULL (mcs_xfer_op.seg_id). */
static inline const uint8_t *mcs_rep_seg_id(const Mcrpc__Replica *r)
{
	return r->segment_id.len == MCS_SEG_ID_LEN ? r->segment_id.data : NULL;
}

/** A complete replica that can hold size bytes. */
bool mcs_replica_usable(const Mcrpc__Replica *r, uint64_t size);
/** On this host (the engine then copies through shared memory). */
bool mcs_replica_local(const struct mooncake_store *s, const Mcrpc__Replica *r);
/**
 * The usable replicas of rl into out (room for rl->n_replicas), those on
 * this host first, otherwise in the master's order; returns how many.
 */
size_t mcs_replicas_order(const struct mooncake_store *s,
			  const Mcrpc__ReplicaList *rl,
			  const Mcrpc__Replica **out);
/** PutStart's replicas for size bytes: 0, MC_EPOOLFULL (none), -EPROTO. */
int mcs_replicas_check_put(const Mcrpc__ReplicaList *rl, uint64_t size);
/**
 * 0 for a NULL config or one whose replica_num is 1 to
 * MOONCAKE_MAX_REPLICAS; otherwise -EINVAL, logged with the value. Every
 * public call that takes a config checks it before anything else.
 */
int mcs_replicate_config_check(const mooncake_replicate_config_t *c);
/** The wire form of a checked replicate config (NULL: one replica, no
 *  pins). */
void mcs_replicate_config(const mooncake_replicate_config_t *c,
			  Mcrpc__ReplicateConfig *out);
/**
 * One calloc'd block: head bytes (the handle), then n locations copied
 * from reps, then their endpoints and key; *locs and *key_copy point into
 * it, so one free() frees all. NULL when out of memory.
 */
void *mcs_flat_alloc(size_t head, const Mcrpc__Replica *const *reps, size_t n,
		     const char *key, struct mcs_loc **locs, char **key_copy);

#endif
