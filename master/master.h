/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file master.h
 * The master's state: clients, the segments they contribute, objects and
 * their replicas, leases, holds, pins, recency, the change feed, and the
 * sqlite record of it all. docs/design.md ("Master") explains the rules.
 *
 * Locking: one mutex (struct master.lock) guards everything below; every
 * mst_* function that takes `struct master *` expects it held unless it
 * says otherwise. The RPC handlers (service.c) take it around each call.
 *
 * Time: leases, holds and liveness use the monotonic clock (ms);
 * modification times and soft-pin deadlines that go to sqlite use the wall
 * clock (ms since the epoch).
 *
 * Codes: functions return 0 or an upstream store code (MC_STORE_*), the
 * currency of the RPC protocol.
 */
#ifndef MASTER_H
#define MASTER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "db.h"

#define MST_ID_LEN 16
#define MST_MAX_REPLICAS 8

struct mst_db;
struct mst_client;

struct mst_segment {
	uint8_t id[MST_ID_LEN];
	char *name, *endpoint, *protocol, *host_id;
	uint64_t base, size;
	struct mc_alloc *alloc;
	struct mst_client *owner; /* NULL: restored, waiting for its owner */
	uint64_t restore_deadline; /* mono ms, when owner == NULL */
	uint64_t n_replicas;
	uint64_t evictable; /* scratch of mst_evict_for_put(): bytes */
	struct mst_segment *next; /* master.segments list */
};

struct mst_client {
	uint8_t id[MST_ID_LEN];
	uint64_t last_seen; /* mono ms */
	struct mst_client *next;
};

/* ENDING and REMOVING mark an object inside one batch between its sqlite
 * write and the commit, so a key repeated in that batch is seen once. */
enum mst_obj_state {
	MST_PROCESSING = 1,
	MST_ENDING = 2,
	MST_COMPLETE = 3,
	MST_REMOVING = 4,
};

struct mst_replica {
	struct mst_segment *seg; /* NULL: its segment went away */
	struct mc_alloc_block *blk;
};

struct mst_object {
	uint64_t size;
	uint8_t state; /* enum mst_obj_state */
	uint8_t n_repl;
	bool hard_pin;
	bool orphan; /* out of the namespace (or about to be, while its
		      * remove commits), memory kept for readers */
	uint32_t holds;
	union {
		uint64_t put_start; /* mono ms; PROCESSING objects */
		uint64_t orphan_id; /* its db row; when orphan is set */
	};
	uint64_t lease_until; /* mono ms: reads (and existence checks) */
	uint64_t read_lease_until; /* mono ms: reads only */
	uint64_t last_access; /* mono ms: last read or completed write */
	uint64_t soft_pin_until; /* wall ms, 0 none */
	/* Wall clock ns of PutEnd, made unique: every PutEnd takes a value
	 * above every version this master (or its record) has given out
	 * (mst_next_version), so a key's successive objects, and any two
	 * objects, differ. Readers bind to it (the mount's inodes); the
	 * object's mtime is version / 1e6 ms. Rename keeps it. */
	uint64_t version;
	uint8_t writer[MST_ID_LEN];
	struct mst_object *lru_prev, *lru_next; /* COMPLETE objects only */
	struct mst_object *onext; /* orphan / release list */
	/* A file's attributes (malloc'd, owned); NULL for objects put
	 * through the API: the mount shows its defaults for those. */
	mst_attr_t *attr;
	/* n_repl replicas (at most the number it was made with), in the
	 * same allocation, after the key: mst_object_new() */
	struct mst_replica *repl;
	size_t key_len;
	char key[]; /* key_len bytes + NUL */
};

struct mst_slot {
	uint64_t hash;
	struct mst_object *obj; /* NULL: empty */
};

struct mst_objmap {
	struct mst_slot *slots;
	size_t cap, count; /* cap: a power of two */
	uint64_t seed[2];
};

struct mst_event {
	uint64_t seq;
	int type; /* MCRPC__EVENT_TYPE__* */
	char *key, *to;
	uint64_t version; /* put, rename of one key: the object's (else 0) */
};

struct mst_feed {
	struct mst_event *ring;
	size_t cap, head, n; /* ring of the newest n events */
	uint64_t epoch, last_seq;
	pthread_cond_t cond;
};

struct mst_hold {
	uint64_t id;
	struct mst_object *obj;
	uint64_t expires; /* mono ms */
	struct mst_hold *prev, *next; /* m->holds */
};

struct mst_config {
	uint64_t lease_ttl_ms;
	uint64_t soft_pin_ttl_ms, max_soft_pin_ttl_ms;
	bool allow_evict_soft_pinned;
	double eviction_ratio, high_watermark;
	uint64_t client_ttl_ms;
	int strategy; /* enum mst_strategy */
	uint64_t discard_timeout_ms, release_timeout_ms;
	uint64_t restore_grace_ms;
	uint64_t exist_max_idle_ms;
	uint64_t hold_ttl_ms;
	size_t max_key_len;
};

enum mst_strategy { MST_RANDOM = 0, MST_FREE_RATIO_FIRST, MST_LOCAL_FIRST };

/* Counters for /metrics (monotonic unless said). */
struct mst_stats {
	uint64_t evicted_keys, evicted_bytes;
	uint64_t eviction_attempts, eviction_successes;
	uint64_t alloc_failures, partial_allocations;
	uint64_t discarded, released, discarded_bytes;
	uint64_t *requests, *failures; /* per method row, mc_rpc_method_at */
	uint64_t *batch_items, *batch_failed_items;
};

/* Evictions not logged yet (evict.c logs once a second at most). */
struct mst_evict_log {
	uint64_t at; /* mono ms of the last line */
	uint64_t keys, bytes, runs;
	char why[160]; /* the last run's reason */
};

struct master {
	pthread_mutex_t lock;
	struct mst_config cfg;
	struct mst_objmap objs;
	struct mst_segment *segments;
	struct mst_client *clients;
	struct mst_object *lru_head, *lru_tail; /* head = least recent */
	struct mst_object *orphans; /* freed once unleased and unheld */
	uint64_t last_slow_tick, last_sweep; /* mst_tick(), mono ms */
	uint64_t next_orphan_id;
	uint64_t last_version; /* the highest mst_object.version given out */
	/* After a restart, until this time (mono ms), readers from before
	 * the restart may still read objects whose leases and holds were
	 * forgotten: removals keep the memory and eviction waits. */
	uint64_t quarantine_until;
	struct mst_object *releasing; /* discarded PutStarts */
	struct mst_hold *holds;
	struct mc_map *hold_ids; /* id -> hold, for renewals and releases */
	uint64_t next_hold;
	uint64_t capacity, allocated;
	uint64_t n_complete;
	struct mst_feed feed;
	struct mst_stats stats;
	struct mst_db *db;
	uint64_t started; /* mono ms */
	uint64_t view_version;
	struct mst_evict_log evict_log;
	bool stopping; /* shutting down: long polls return */
	uint64_t rng;
};

/* ---- time and ids (util.c) ------------------------------------------- */
uint64_t mst_now(void); /* monotonic ms */
uint64_t mst_wall(void); /* wall ms */
int64_t mst_wall_ns(void);
/** A new object version: wall ns, above every version given out so far. */
uint64_t mst_next_version(struct master *m);
/** Wall ms of a version. */
#define MST_VERSION_MS(v) ((v) / 1000000u)
uint64_t mst_rand(struct master *m);
void mst_id_hex(const uint8_t *id, char out[2 * MST_ID_LEN + 1]);

/* ---- lifecycle (master.c) -------------------------------------------- */
/** Create the state; db_path NULL or "memory": nothing durable. */
int mst_create(const struct mst_config *cfg, const char *db_path,
	       bool full_sync, struct master **out, char *err, size_t errlen);
void mst_destroy(struct master *m);
/** Housekeeping, called every ~10 ms by the background thread: client
 *  liveness, restore grace, holds, orphans, abandoned puts, eviction. */
void mst_tick(struct master *m);

/* ---- object map (objmap.c) -------------------------------------------- */
int mst_objmap_init(struct mst_objmap *om);
void mst_objmap_free(struct mst_objmap *om);
struct mst_object *mst_objmap_get(struct mst_objmap *om, const char *key,
				  size_t len);
int mst_objmap_add(struct mst_objmap *om, struct mst_object *o);
void mst_objmap_del(struct mst_objmap *om, struct mst_object *o);
/**
 * Prefetch what looking up keys[0..n) will touch: their home slots, then
 * the objects those slots point to. A batch handler calls it for a window
 * of keys before looking them up one by one, so the cache misses of the
 * window overlap instead of following each other. n <= MST_PREFETCH_MAX;
 * a hint only (under the master lock, like every objmap call).
 */
#define MST_PREFETCH_MAX 16
void mst_objmap_prefetch(const struct mst_objmap *om, char *const *keys,
			 size_t n);
uint64_t mst_objmap_hash(const struct mst_objmap *om, const char *key,
			 size_t len);
/** Every object now in the map (malloc'd array), for the rare passes
 *  over all of them that also delete. */
int mst_objmap_snapshot(const struct mst_objmap *om, struct mst_object ***out,
			size_t *n);
/* The recency list of complete objects (m->lru_head: least recent). */
void mst_lru_add(struct master *m, struct mst_object *o);
void mst_lru_del(struct master *m, struct mst_object *o);
void mst_lru_touch(struct master *m, struct mst_object *o);

/* ---- segments and clients (segments.c) -------------------------------- */
struct mst_seg_desc {
	const uint8_t *id;
	const char *name, *endpoint, *protocol, *host_id;
	uint64_t base, size;
};
struct mst_client *mst_client_find(struct master *m, const uint8_t *id);
struct mst_client *mst_client_touch(struct master *m, const uint8_t *id);
/** 0 mounted; MC_STORE_SEGMENT_ALREADY_EXISTS if another live client
 *  owns it. */
int mst_mount(struct master *m, const uint8_t *client,
	      const struct mst_seg_desc *d);
/** 0 re-adopted (*objects kept), 1 mounted as new, or a code. */
int mst_remount(struct master *m, const uint8_t *client,
		const struct mst_seg_desc *d, uint64_t *objects);
int mst_unmount(struct master *m, const uint8_t *client, const uint8_t *seg);
struct mst_segment *mst_segment_find(struct master *m, const uint8_t *id);
/** Drop a segment and every replica on it (objects left with none go). */
void mst_segment_drop(struct master *m, struct mst_segment *s, const char *why);
void mst_expire_clients(struct master *m, uint64_t now);
/** A client closing (Ping with leaving): forgotten at once unless it still
 *  owns a segment. Its unfinished puts then have no writer. */
void mst_client_leave(struct master *m, struct mst_client *c);
size_t mst_client_count(struct master *m);

/* ---- objects (objects.c) ---------------------------------------------- */
struct mst_put_cfg {
	unsigned replicas;
	bool hard_pin, soft_pin;
	uint64_t soft_pin_ttl_ms;
	const char *const *preferred;
	size_t n_preferred;
	const mst_attr_t *attr; /* NULL: none (an API object) */
};
/** Allocate replicas for key (state PROCESSING); *out for the reply.
 *  OBJECT_ALREADY_EXISTS with *out the object there (complete, or a put
 *  in progress). */
int mst_put_start(struct master *m, const uint8_t *client, const char *key,
		  size_t key_len, uint64_t size, const struct mst_put_cfg *pc,
		  struct mst_object **out);
/** Stage the completion of key in the open transaction; applied by
 *  mst_put_end_apply() once the transaction commits. */
int mst_put_end_prepare(struct master *m, const uint8_t *client,
			const char *key, size_t key_len,
			struct mst_object **out);
void mst_put_end_apply(struct master *m, struct mst_object *o);
/** The transaction failed: the put is given up (its memory freed, its
 *  key free for the next put), as its writer is told. */
void mst_put_end_fail(struct master *m, struct mst_object *o);
int mst_put_revoke(struct master *m, const uint8_t *client, const char *key,
		   size_t key_len);
/** COMPLETE object or code (-704 missing, -703 processing or no readable
 *  replica). Grants a read lease, refreshes recency; hold: *hold_id. */
int mst_get(struct master *m, const char *key, size_t key_len, bool hold,
	    struct mst_object **out, uint64_t *hold_id);
/** 1, 0 or a code; grants an existence lease. */
int mst_exist(struct master *m, const char *key, size_t key_len);
/** COMPLETE object without any lease, or a code. */
int mst_stat(struct master *m, const char *key, size_t key_len,
	     struct mst_object **out);
/** Remove (db row first; caller commits), then mst_remove_apply(). */
int mst_remove_prepare(struct master *m, const char *key, size_t key_len,
		       bool force, struct mst_object **out);
void mst_remove_apply(struct master *m, struct mst_object *o, int ev_type);
void mst_remove_undo(struct master *m, struct mst_object *o);
/**
 * In the caller's transaction, before o leaves the namespace (remove,
 * eviction, rename over it): delete its row and, when a reader may still
 * copy from its memory, mark it an orphan and record its replicas, so
 * that the memory stays reserved, across a restart too, until no reader
 * can be left. mst_unlink_undo() when the transaction fails.
 */
int mst_unlink_prepare(struct master *m, struct mst_object *o);
void mst_unlink_undo(struct mst_object *o);
int mst_rename(struct master *m, const char *from, size_t from_len,
	       const char *to, size_t to_len, bool no_replace);
/** Remove objects v[0..n) (complete, in the namespace) in one
 *  transaction, emitting ev_type for each; 0, or a code with nothing
 *  removed. */
int mst_drop_objects(struct master *m, struct mst_object **v, size_t n,
		     int ev_type);
/** Move every key and directory record under the prefix from (ending in
 *  '/') under to, in one transaction (RenameRequest.prefix). */
int mst_rename_dir(struct master *m, const char *from, size_t from_len,
		   const char *to, size_t to_len);
/** Set the fields of mask (MOONCAKE_SET_*) of a COMPLETE object's
 *  attributes from a; *out the result. */
int mst_setattr(struct master *m, const char *key, size_t key_len,
		unsigned mask, const mst_attr_t *a, mst_attr_t *out);
int mst_hold_renew(struct master *m, uint64_t id);
/** Forget hold h (expired, released or its object freed) and free it. */
void mst_hold_drop(struct master *m, struct mst_hold *h);
int mst_hold_release(struct master *m, uint64_t id);
/** Replica i readable now (its segment mounted). */
bool mst_replica_live(const struct mst_replica *r);
uint64_t mst_replica_addr(const struct mst_replica *r);
/** A zeroed object with its key (NULL with key_len 0: none) and room for
 *  n_repl replicas (<= MST_MAX_REPLICAS), one allocation; NULL: ENOMEM. */
struct mst_object *mst_object_new(const char *key, size_t key_len,
				  unsigned n_repl);
/** Free every replica of o and o itself (o must be out of every list). */
void mst_object_free(struct master *m, struct mst_object *o);
bool mst_object_leased(const struct mst_object *o, uint64_t now);

/* ---- directories (dirs.c) ---------------------------------------------- */
/**
 * Directory records (Mkdir) live in sqlite only: they are few, and only
 * the mount's lookups, listings and namespace changes read them. A
 * directory exists when it has a record or anything under its prefix.
 * Paths are prefixes ending in '/'.
 */
/** 1 with *a (may be NULL) when path has a record, 0 when not, or a code. */
int mst_dir_record(struct master *m, const char *path, size_t len,
		   mst_attr_t *a);
/** 1 when any key or record other than path's own lies under path. */
int mst_dir_has_entries(struct master *m, const char *path, size_t len);
/** The directory records one level below path (a directory's link count
 *  is 2 + this); 0 or a code. */
int mst_dir_subdirs(struct master *m, const char *path, size_t len,
		    uint32_t *n);
int mst_mkdir(struct master *m, const char *path, size_t len,
	      const mst_attr_t *a);
int mst_rmdir(struct master *m, const char *path, size_t len);
int mst_dir_setattr(struct master *m, const char *path, size_t len,
		    unsigned mask, const mst_attr_t *a, mst_attr_t *out);
/** In the caller's transaction: the record of key's parent directory (if
 *  any) gets mtime and ctime now. */
int mst_dir_touch_parent(struct master *m, const char *key, size_t len);
/** Apply the fields of mask from a onto t (MOONCAKE_SET_*); ctime now. */
void mst_attr_apply(mst_attr_t *t, unsigned mask, const mst_attr_t *a);

/* ---- eviction (evict.c): a policy of the service ------------------------- */
/** A put of size bytes found no room: evict from the segment that can
 *  hold it once its evictable objects are gone, as few as that takes.
 *  true when some segment now has room; false (nothing evicted) when no
 *  segment could hold it, or during a restart's quarantine. */
bool mst_evict_for_put(struct master *m, uint64_t size);
/** Watermark check: evict down to watermark - ratio; logs evictions. */
void mst_evict_tick(struct master *m);

/* ---- transactions (txn.c) ------------------------------------------------ */
/** Prepare item i in the open transaction: 0, or a code that aborts it. */
typedef int (*mst_txn_prepare_fn)(void *ctx, size_t i);
/** After the transaction: apply item i (committed) or undo it. */
typedef void (*mst_txn_finish_fn)(void *ctx, size_t i, bool committed);
/** prepare(0..n) in one sqlite transaction (stopping at the first code),
 *  commit, then finish(i, committed) for every i < n, prepared or not.
 *  0 or the code that aborted it. */
int mst_txn_run(struct master *m, size_t n, mst_txn_prepare_fn prepare,
		mst_txn_finish_fn finish, void *ctx);

/* ---- allocation (place.c) --------------------------------------------- */
/** Place up to n replicas of size bytes on distinct segments. Returns the
 *  number placed (0: pool full). */
unsigned mst_place(struct master *m, const uint8_t *client, uint64_t size,
		   unsigned n, const struct mst_put_cfg *pc,
		   struct mst_replica *out);
void mst_replica_free(struct master *m, struct mst_replica *r);

/* ---- change feed (feed.c) --------------------------------------------- */
int mst_feed_init(struct mst_feed *f, size_t cap);
void mst_feed_free(struct mst_feed *f);
/** An event; version: the object's, for a put or a rename of one key
 *  (0 otherwise). */
void mst_feed_emit(struct master *m, int type, const char *key, size_t key_len,
		   const char *to, size_t to_len, uint64_t version);

#endif
