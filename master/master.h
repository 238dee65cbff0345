/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file master.h
 * The master's shared types: clients, the segments they contribute,
 * objects and their replicas, leases, holds, pins, recency, the change
 * feed, and the sqlite record of it all. The functions over them are
 * declared by one header per file: lifecycle.h (master.c), objects.h,
 * objmap.h, segments.h, dirs.h, evict.h, txn.h, place.h, feed.h and
 * mst_util.h. docs/design.md ("Master") explains the rules.
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
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "db.h"

#define MST_ID_LEN 16
#define MST_MAX_REPLICAS 8

struct mst_db;
struct mst_client;
struct mst_group;
struct mst_ckpts;

struct mst_segment {
	uint8_t id[MST_ID_LEN];
	char *name, *endpoint, *protocol, *host_id;
	uint64_t base, size;
	struct mc_alloc *alloc;
	struct mst_client *owner; /* NULL: restored, waiting for its owner */
	uint64_t restore_deadline; /* mono ms, when owner == NULL */
	/* Mounted as new memory shortly after it was dropped with slots on
	 * it: no new replica here before this (mono ms; slots.h); 0 none. */
	uint64_t fenced_until;
	uint64_t n_replicas;
	uint64_t evictable; /* scratch of mst_evict_for_put(): bytes */
	struct mst_segment *next; /* master.segments list */
};

struct mst_client {
	uint8_t id[MST_ID_LEN];
	uint64_t last_seen; /* mono ms */
	/* A writer reported it could not reach this client's segments (mono
	 * ms; 0 none): new replicas go elsewhere while there is room, until
	 * its next ping (mst_note_unreachable). */
	uint64_t unreachable_at;
	uint32_t n_slots; /* reserved space held (slots.h) */
	/* It mounted or re-mounted (with no segment, too) since it was
	 * made here; one made by another call (a checkpoint's hold) has not,
	 * and its ping is answered "re-mount" until it does. */
	bool joined;
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
	bool evict_mark; /* picked by the eviction run in progress */
	bool publish; /* PutStartRequest.publish: leased from its PutEnd */
	uint32_t holds;
	union {
		uint64_t put_start; /* mono ms; PROCESSING objects */
		uint64_t orphan_id; /* its db row; when orphan is set */
	};
	uint64_t lease_until; /* mono ms: reads (and existence checks) */
	uint64_t read_lease_until; /* mono ms: reads only */
	/* Mono ms: the publish lease (set at the PutEnd of a put with
	 * publish): not evicted before this; its rename ends it. */
	uint64_t publish_until;
	uint64_t last_access; /* mono ms: last read or completed write */
	uint64_t soft_pin_until; /* wall ms, 0 none */
	/* Wall clock ns of PutEnd, made unique: every PutEnd takes a value
	 * above every version this master (or its record) has given out
	 * (mst_next_version), so a key's successive objects, and any two
	 * objects, differ. Readers bind to it (the mount's inodes); the
	 * object's mtime is version / 1e6 ms. Rename keeps it. */
	uint64_t version;
	uint8_t writer[MST_ID_LEN];
	/* COMPLETE objects: the recency list; unfinished puts in the map:
	 * master.pend_head's list (objmap.h). */
	struct mst_object *lru_prev, *lru_next;
	struct mst_object *onext; /* orphan / release list */
	/* The object's group (ReplicateConfig.group_ids; groups.c), NULL
	 * none; members are linked through grp_prev/grp_next. */
	struct mst_group *group;
	struct mst_object *grp_prev, *grp_next;
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
	uint32_t ckpt_holder_slots; /* CkptSource: sources per holder */
	uint32_t reserve_slots; /* per client (slots.h); 0: none given */
	uint64_t reserve_max_size; /* bytes: larger puts get no slot */
};

enum mst_strategy { MST_RANDOM = 0, MST_FREE_RATIO_FIRST, MST_LOCAL_FIRST };

/* Counters for /metrics (monotonic unless said). */
struct mst_stats {
	uint64_t evicted_keys, evicted_bytes;
	uint64_t eviction_attempts, eviction_successes;
	uint64_t alloc_failures, partial_allocations;
	uint64_t unreachable_reports; /* mst_note_unreachable */
	uint64_t discarded, released, discarded_bytes;
	uint64_t slot_grants, slot_commits, slot_returns, slot_reclaimed;
	uint64_t *requests, *failures; /* per method row, mc_rpc_method_at */
	uint64_t *batch_items, *batch_failed_items;
};

/* Evictions not logged yet (evict.c logs once a second at most). */
struct mst_evict_log {
	uint64_t at; /* mono ms of the last line */
	uint64_t keys, bytes, runs;
	char why[160]; /* the last run's reason */
};

/* place.c: the segments with an owner, as of view_version. */
struct mst_place_cache {
	struct mst_segment **arr;
	size_t n, cap;
	uint64_t version;
	bool valid;
};

#define MST_SLOT_DROPS 64 /* master.slot_drops */

/* A transfer engine whose client the master dropped for good: its
 * metadata entries are stale unless written after `seen` (mono ms). */
struct mst_gone_engine {
	struct mst_gone_engine *next;
	uint64_t seen;
	uint64_t due; /* daemon.c: forgotten from then (mono ms) */
	char name[];
};

struct mst_ghost;

struct master {
	pthread_mutex_t lock;
	struct mst_config cfg;
	struct mst_objmap objs;
	struct mst_segment *segments;
	struct mst_client *clients;
	struct mc_map *client_ids; /* id -> struct mst_client * */
	/* Set before the master serves when the metadata service is
	 * embedded: the engines of dropped clients are queued on gone_engines
	 * (segments.c) for it to forget (daemon.c, mst_take_gone_engines). */
	bool track_gone_engines;
	struct mst_gone_engine *gone_engines;
	struct mst_object *lru_head, *lru_tail; /* head = least recent */
	struct mst_object *pend_head, *pend_tail; /* head = oldest PutStart */
	struct mst_object *orphans; /* freed once unleased and unheld */
	uint64_t last_slow_tick, last_sweep,
		last_ops_prune; /* mst_tick(), mono ms */
	/* HA (ha.c): serve only until this mono ms (the leader's lease, as
	 * last renewed); 0: no HA. Read without the lock. */
	_Atomic uint64_t ha_until;
	/* HA: until this mono ms after taking over, a get of an object whose
	 * segments wait for their owners to re-mount (they do within a ping)
	 * answers UNAVAILABLE_IN_CURRENT_MODE, which clients retry. */
	uint64_t ha_settle_until;
	uint64_t next_orphan_id;
	uint64_t last_version; /* the highest mst_object.version given out */
	/* After a restart, until this time (mono ms), readers from before
	 * the restart may still read objects whose leases and holds were
	 * forgotten: removals keep the memory and eviction waits. */
	uint64_t quarantine_until;
	struct mst_object *releasing; /* discarded PutStarts */
	/* Reserved space for puts (slots.h): client id + slot id -> a
	 * PROCESSING object without a key. */
	struct mst_objmap put_slots;
	uint64_t next_slot;
	uint64_t run; /* random, per start or takeover: PutStart/PutCommit */
	/* Mono ms: calls that place wait until then after a restart or a
	 * takeover (slots.h, MST_SLOT_FENCE_MS); 0 none. Set before the
	 * master serves, read without the lock. */
	uint64_t fence_until;
	/* Mono ms: the end of the time in which pieces of a run before this
	 * one may still start (MST_SLOT_FENCE_MS after the start or the
	 * election, whether or not a run came before: a master without a
	 * record cannot tell). Members re-mounting fence their connections
	 * only when it has at most 150 ms left (PingResponse.fence_ms).
	 * Set before the master serves, read without the lock. */
	uint64_t run_fence_until;
	/* Ranges of puts in flight on dropped segments (ghosts.c). */
	struct mst_ghost *ghosts;
	/* Segments dropped lately, and until when their memory may still
	 * be used (slots.c, mst_seg_fence_note()). */
	struct mst_slot_drop {
		uint8_t id[MST_ID_LEN];
		uint64_t until; /* mono ms */
	} slot_drops[MST_SLOT_DROPS];
	struct mst_hold *holds;
	struct mc_map *hold_ids; /* id -> hold, for renewals and releases */
	struct mc_map *groups; /* group id -> struct mst_group * (groups.c) */
	uint64_t next_hold;
	uint64_t capacity, allocated;
	/* Blocks handed out and freed so far (place.c), and the op log entry
	 * of the last call or tick that freed one. HA: a call that placed a
	 * block answers only once freed_seq is in the op log, so memory freed
	 * by a change the log may still lose (a remove, an eviction) is never
	 * written by a new put before that change is safe (service.c). */
	uint64_t placed, frees, freed_seq;
	struct mst_place_cache place;
	uint64_t n_complete;
	struct mst_feed feed;
	struct mst_stats stats;
	struct mst_db *db;
	uint64_t started; /* mono ms */
	uint64_t view_version;
	struct mst_evict_log evict_log;
	/* Puts that found no room, not logged yet (noroom.c). */
	struct {
		uint64_t at, quiet; /* mono ms of the last line; since */
	} no_room;
	uint64_t evict_pass; /* numbers eviction passes (groups' verdicts) */
	bool stopping; /* shutting down: long polls return */
	uint64_t rng;
	struct mst_ckpts *ckpts; /* checkpoints (ckpt.c) */
};

#endif
