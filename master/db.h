/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file db.h
 * The master's durable record in sqlite (WAL): segments and complete
 * objects with their replicas (segment id + offset). Leases, holds,
 * recency and PROCESSING puts are never written: a restart forgets them,
 * so nothing half-written comes back as complete.
 *
 * Writes happen inside a transaction the caller opens with mst_db_begin()
 * and ends with mst_db_commit() (or _rollback); a commit that returns 0 is
 * on disk (kill -9 safe; with full_sync also power-loss safe). The file is
 * locked to one master (flock): a second master on it fails to start.
 * A NULL db (memory mode) accepts every call and stores nothing.
 */
#ifndef MASTER_DB_H
#define MASTER_DB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mooncake/store_fs.h"

/* Filesystem attributes (store_fs.h's, and Attr on the wire): objects
 * written through the mount, and directory records. */
typedef mooncake_fs_attr_t mst_attr_t;

struct mst_db;
struct mst_object;
struct mst_segment;

/* mst_db_open's flags. */
#define MST_DB_FULL_SYNC 1u /* fsync every commit (power-loss safe) */
#define MST_DB_CKPT_THREAD 2u /* WAL checkpoints on a thread (below) */

/** Open (or make) the record at path ("memory" or NULL: none survives).
 *  flags: MST_DB_*. 0, or a code with err saying why. */
int mst_db_open(const char *path, unsigned flags, struct mst_db **out,
		char *err, size_t errlen);
void mst_db_close(struct mst_db *db);

/*
 * WAL checkpoints. By default sqlite's: the commit that takes the WAL past
 * 1,000 pages copies it into the database file and fsyncs both, with the
 * master's lock held (a stall of several ms for every caller). With
 * MST_DB_CKPT_THREAD a thread with its own connection copies it (db_wal.c)
 * and a commit copies at most a short tail the thread leaves it. Memory
 * mode has no thread.
 */
struct mst_db_wal_stats {
	uint64_t frames; /* the WAL's length after the last commit (pages) */
	uint64_t runs; /* checkpoints the thread made */
	uint64_t failures; /* checkpoints that failed */
	uint64_t busy; /* found the writer's lock: tried again later */
	uint64_t us, max_us; /* their time in all, the longest */
	uint64_t tail_runs; /* a commit copied the tail the thread left */
	uint64_t tail_us, tail_max_us; /* their time in all, the longest */
	uint64_t inline_runs; /* made by commits: the thread was behind */
};
/** The checkpoint thread's counts: false (all 0) without one. */
bool mst_db_wal_stats(struct mst_db *db, struct mst_db_wal_stats *out);

/*
 * The op log (HA, master/ha.c; docs/design.md "High availability"): with
 * log ops set, every transaction that changes something gets the next
 * sequence number (stored in the record, meta 'ha_seq', inside the same
 * transaction) and its changes are captured as an entry (an sqlite
 * patchset (db_rec.c) and its CRC-32C, little-endian). Group commit: before COMMIT
 * ops->may_commit says whether this master may still change its record
 * (a code rolls the transaction back and mst_db_commit() returns it);
 * after the COMMIT the entry goes to ops->append, in sequence order, which
 * takes it (malloc'd) and ships it later. Whoever answers for a change
 * waits for it with mst_db_log_wait() first: a change is acknowledged
 * only once it is in the log.
 */
struct mst_db_log_ops {
	int (*may_commit)(void *arg);
	void (*append)(void *arg, uint64_t seq, void *entry, size_t len);
	/** 0 once entries up to seq are shipped (every master that may
	 *  lead next has them), else a code (never). */
	int (*wait)(void *arg, uint64_t seq);
	/** 0 once entries up to seq are in the log itself, else a code. */
	int (*wait_logged)(void *arg, uint64_t seq);
};
void mst_db_set_log(struct mst_db *db, const struct mst_db_log_ops *ops,
		    void *arg);
/** Wait until the entries up to seq are shipped (0 at once without a
 *  log); called without any lock. 0 or a code. */
int mst_db_log_wait(struct mst_db *db, uint64_t seq);
/** Wait until the entries up to seq are in the log itself (a copy of the
 *  record given to a standby); 0 or a code. */
int mst_db_log_wait_logged(struct mst_db *db, uint64_t seq);
/**
 * HA: the epoch under which this record last led (meta 'ha_led', 0
 * never). Such a record may hold changes committed here but never shipped
 * (group commit): it follows a log only once ha.c has shown it has none.
 * Not a change of the log: set while no log ops are set.
 */
uint64_t mst_db_ha_led(struct mst_db *db);
int mst_db_set_ha_led(struct mst_db *db, uint64_t epoch);
/**
 * A number kept in the record's meta table under k (0: none; setting 0
 * removes it), outside the op log: set while no log ops are set. HA keeps
 * its marks there (ha.c: which leaderships this record led and followed).
 */
uint64_t mst_db_meta_u64(struct mst_db *db, const char *k);
int mst_db_set_meta_u64(struct mst_db *db, const char *k, uint64_t v);
/** The last sequence number in the record (0: none yet). */
uint64_t mst_db_log_seq(const struct mst_db *db);
/**
 * A standby: apply entry seq (the next one: mst_db_log_seq() + 1, else
 * -ESPIPE) of a leader's log in one transaction. 0 or a code: -EBADMSG
 * for an entry whose checksum fails or that changes what is not this
 * record's (a table or columns it lacks).
 */
int mst_db_log_apply(struct mst_db *db, uint64_t seq, const void *cs,
		     size_t len);
/** One entry of mst_db_log_apply_many(). */
struct mst_db_log_ref {
	const void *cs; /* patchset and CRC-32C, as mst_db_log_apply */
	size_t len;
};
/**
 * Apply entries first..first+n-1 (first: the next one) as one: their
 * patchsets combined (sqlite's changegroup), in one transaction, so a
 * standby pays sqlite's per-apply statement preparation once per batch.
 * Should the combination fail, each is applied alone. 0 or a code as
 * mst_db_log_apply (then mst_db_log_seq() says how far it got).
 */
int mst_db_log_apply_many(struct mst_db *db, uint64_t first,
			  const struct mst_db_log_ref *e, size_t n);

/*
 * Request ids (HA): the id of the request being served goes into the
 * record with the first change it makes (when a log function is set), so
 * any master can tell later that it was applied.
 */
void mst_db_set_op(struct mst_db *db, uint64_t id);
/** 1 when request id was applied, 0 when not, or a code. */
int mst_db_op_applied(struct mst_db *db, uint64_t id);
/** Forget the ids noted before wall clock ms `before` (one transaction). */
int mst_db_ops_prune(struct mst_db *db, int64_t before);
/**
 * A consistent copy of the record into a new sqlite file at path (HA: a
 * standby the op log no longer reaches starts from it), copied a few
 * pages at a time with lock (the master's) held, so the master keeps
 * serving; changes made meanwhile go into the copy too. *seq: the op log
 * entry the copy holds. 0 or a code, err saying why.
 */
int mst_db_snapshot(struct mst_db *db, pthread_mutex_t *lock, const char *path,
		    uint64_t *seq, char *err, size_t errlen);
/** The op log entry the record in file path holds (0 none). */
int mst_db_file_seq(const char *path, uint64_t *seq);
/** Remove path's sqlite side files (-wal, -shm) of a closed record. */
void mst_db_unlink_sides(const char *path);
/** true while changes go to an op log (this master leads an HA group). */
bool mst_db_logged(const struct mst_db *db);

int mst_db_begin(struct mst_db *db);
int mst_db_commit(struct mst_db *db);
void mst_db_rollback(struct mst_db *db);
/** A write failed and no commit succeeded since (a full disk). */
bool mst_db_failing(struct mst_db *db);
/** Bytes free for the record on its filesystem (UINT64_MAX: a record in
 *  memory, or unknown); *low (may be NULL) is set when they are under
 *  MST_DB_LOW_FREE or a twentieth of the filesystem, whichever is less
 *  (a disk about to refuse commits, or refusing them, while some still
 *  pass). Thread-safe. */
uint64_t mst_db_disk_free(struct mst_db *db, bool *low);
#define MST_DB_LOW_FREE (64ull << 20)

int mst_db_put_segment(struct mst_db *db, const struct mst_segment *s);
int mst_db_del_segment(struct mst_db *db, const uint8_t *id);
/** The object's row, and its attributes' row in attrs when it has
 *  attributes (objects put through the API write one row). */
int mst_db_put_object(struct mst_db *db, const struct mst_object *o);
/** attr: the object had attributes (their row goes too). */
int mst_db_del_object(struct mst_db *db, const char *key, size_t len,
		      bool attr);
/** The replicas of an object removed while it may still be read, under
 *  o->orphan_id; deleted once no reader can be left. */
int mst_db_put_orphan(struct mst_db *db, const struct mst_object *o);
int mst_db_del_orphan(struct mst_db *db, uint64_t id);

/* Restore: segments first, then the objects' count (on_count, may be
 * NULL: a hint for sizing, skipped if it cannot be read), the objects,
 * then orphans. A callback's non-zero return stops the load with it. */
struct mst_db_segment {
	const uint8_t *id;
	const char *name, *endpoint, *protocol, *host_id;
	uint64_t size;
};
struct mst_db_replica {
	const uint8_t *seg_id;
	uint64_t offset;
};
struct mst_db_object {
	const char *key; /* NULL for an orphan */
	size_t key_len;
	uint64_t orphan_id;
	uint64_t size, version, soft_pin_until; /* version: mst_object's */
	bool hard_pin;
	unsigned n_repl;
	struct mst_db_replica repl[8];
	bool has_attr;
	mst_attr_t attr;
	const char *group; /* group id (group_len bytes), NULL none */
	size_t group_len;
};
int mst_db_load(struct mst_db *db,
		int (*on_segment)(void *arg, const struct mst_db_segment *s),
		int (*on_object)(void *arg, const struct mst_db_object *o),
		int (*on_orphan)(void *arg, const struct mst_db_object *o),
		int (*on_count)(void *arg, uint64_t objects), void *arg);

/* Paged listing in key order (bytewise). */
struct mst_db_entry {
	const char *name;
	size_t name_len;
	uint64_t size, version; /* version: mst_object's */
	bool is_prefix;
	const mst_attr_t *attr; /* NULL: none stored */
};
/**
 * Entries under prefix after start_after; with a delimiter, keys that
 * contain it after the prefix collapse into one prefix entry. dirs: the
 * directory records under prefix too (prefix entries; prefix's own record
 * is no entry). Calls fn for up to limit entries; *truncated tells whether
 * more follow.
 */
int mst_db_list(struct mst_db *db, const char *prefix, size_t prefix_len,
		const char *delim, size_t delim_len, const char *start_after,
		size_t start_len, unsigned limit, bool dirs,
		void (*fn)(void *arg, const struct mst_db_entry *e), void *arg,
		bool *truncated);

/* Directory records: path is a prefix ending in '/'. */
/** 1 (*a filled, zeroed when the record has no attributes; a may be
 *  NULL), 0 when there is no record, or a code. */
int mst_db_dir_get(struct mst_db *db, const char *path, size_t len,
		   mst_attr_t *a);
int mst_db_dir_put(struct mst_db *db, const char *path, size_t len,
		   const mst_attr_t *a);
int mst_db_dir_del(struct mst_db *db, const char *path, size_t len);
/** The record's mtime and ctime become now_ns (none: nothing happens). */
int mst_db_dir_touch(struct mst_db *db, const char *path, size_t len,
		     int64_t now_ns);
/** 1 when a complete key (prefix itself included: "d/" is an entry of
 *  d) or a directory record other than prefix's own lies under prefix,
 *  0 when none, or a code. */
int mst_db_has_under(struct mst_db *db, const char *prefix, size_t plen);

/** A count of the record's objects made a part at a time (a standby's:
 *  exact only if nothing changes meanwhile). Zeroed to start. */
struct mst_db_count {
	uint64_t n;
	char *last; /* the last key counted (malloc'd), NULL at the start */
	size_t last_len, last_cap;
	bool done;
};
/** Count up to `step` more objects after c->last into c (c->done once
 *  past the last). 0 or a code. */
int mst_db_count_objects(struct mst_db *db, struct mst_db_count *c,
			 unsigned step);
void mst_db_count_free(struct mst_db_count *c);
/** *n: the directory records one level below prefix (not deeper); 0 or
 *  a code. One seek per such record: their subtrees are skipped. */
int mst_db_subdirs(struct mst_db *db, const char *prefix, size_t plen,
		   uint32_t *n);
/** fn for every complete key (dirs: every directory record) under
 *  prefix, in order; name valid during the call only; fn must not use
 *  the database (collect, then change). Stops at fn's first
 *  non-zero return (returned). */
int mst_db_each_under(struct mst_db *db, bool dirs, const char *prefix,
		      size_t plen,
		      int (*fn)(void *arg, const char *name, size_t len,
				const mst_attr_t *a),
		      void *arg);

/* Checkpoints (ckpt.c): rec is the packed Ckpt without holder_list. */
/** Also records id as the last id given out (ids are never reused). */
int mst_db_ckpt_put(struct mst_db *db, uint64_t id, const char *name,
		    const void *rec, size_t len, int64_t created_ns);
/** The checkpoint and its holder records. */
int mst_db_ckpt_del(struct mst_db *db, uint64_t id);
int mst_db_holder_put(struct mst_db *db, uint64_t ckpt, const uint8_t *client,
		      const char *endpoint, bool publisher,
		      const uint8_t *bitmap, size_t len);
/** client NULL: every holder of ckpt. */
int mst_db_holder_del(struct mst_db *db, uint64_t ckpt, const uint8_t *client);
struct mst_db_holder {
	uint64_t ckpt;
	const uint8_t *client; /* MST_ID_LEN bytes */
	const char *endpoint;
	bool publisher;
	const uint8_t *bitmap;
	size_t len;
};
/** *last_id: the highest id ever given out; checkpoints in id order,
 *  then holders. */
int mst_db_ckpt_load(struct mst_db *db, uint64_t *last_id,
		     int (*on_ckpt)(void *arg, uint64_t id, const void *rec,
				    size_t len),
		     int (*on_holder)(void *arg, const struct mst_db_holder *h),
		     void *arg);

#endif
