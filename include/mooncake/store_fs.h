/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file store_fs.h
 * Extensions of the store client (libmooncake) that a filesystem needs and
 * upstream's API lacks: objects opened for ranged reads under a hold,
 * objects written at offsets straight into their replicas, stat without a
 * lease, paged listing, atomic rename, pool figures and the change feed.
 * The FUSE daemon (mooncakefs/fuse) is built on these.
 *
 * Conventions are store.h's: a mooncake_store_t set up with
 * mooncake_store_setup(); every function returns 0 (or a count) or a
 * negative *upstream store code*; handles are thread-safe unless said.
 *
 * Handles (objects, writers) belong to their store: close them before
 * mooncake_store_destroy(). After mooncake_store_close() their calls
 * return -1010 UNAVAILABLE_IN_CURRENT_STATUS and closing them only frees
 * them (close() has released the holds and the master discards unfinished
 * puts by itself). Callbacks (list, watch) run after the call has left the
 * store, so they may call into it again.
 */
#ifndef MOONCAKE_STORE_FS_H
#define MOONCAKE_STORE_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mooncake/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- attributes ---------------------------------------------------------- */

/**
 * Filesystem attributes of an object or a directory record, stored by the
 * master with it (durably). Objects put through the plain API have none
 * (mode 0): a filesystem shows its defaults for them. Times are wall-clock
 * ns; a time whose MOONCAKE_ATTR_*_SET flag is clear is the object's
 * version time (the completion of its put).
 */
typedef struct mooncake_fs_attr {
	uint32_t mode; /* S_IF* type and permission bits; 0: none stored */
	uint32_t uid, gid;
	uint32_t flags; /* MOONCAKE_ATTR_*_SET */
	int64_t atime_ns, mtime_ns, ctime_ns;
} mooncake_fs_attr_t;

#define MOONCAKE_ATTR_ATIME_SET 1u
#define MOONCAKE_ATTR_MTIME_SET 2u
#define MOONCAKE_ATTR_CTIME_SET 4u

/* mooncake_store_setattr()'s mask: which fields to change. */
#define MOONCAKE_SET_MODE 1u
#define MOONCAKE_SET_UID 2u
#define MOONCAKE_SET_GID 4u
#define MOONCAKE_SET_ATIME 8u
#define MOONCAKE_SET_MTIME 16u

/* ---- stat and listing (no lease taken) ---------------------------------- */

typedef struct mooncake_obj_stat {
	uint64_t size;
	uint64_t mtime_ms; /* wall clock of the put's completion */
	uint32_t replicas; /* readable replicas now (0 for an empty object) */
	uint32_t holds; /* readers holding it open */
	uint64_t lease_ms; /* lease time left, 0 none */
	bool hard_pin;
	uint64_t soft_pin_ms; /* soft pin left, 0 none */
	uint64_t version; /* see mooncake_store_object_version() */
	mooncake_fs_attr_t attr; /* mode 0: none stored */
	bool is_dir; /* mooncake_store_stat_dir() found a directory */
	uint32_t subdirs; /* a directory: its records one level below */
} mooncake_obj_stat_t;

/** -704 when absent. */
MOONCAKE_API int mooncake_store_stat(mooncake_store_t store, const char *key,
				     mooncake_obj_stat_t *out);
/**
 * Stat key as an object or, when there is none, as the directory key/: a
 * directory record (mooncake_store_mkdir(); out->attr its attributes) or
 * keys under it (no attributes). out->is_dir tells which; -704 when
 * neither exists. One round trip for what a filesystem's lookup asks.
 */
MOONCAKE_API int mooncake_store_stat_dir(mooncake_store_t store,
					 const char *key,
					 mooncake_obj_stat_t *out);
/**
 * Change attributes of the object key, or of the directory key when dir
 * (key then ends in '/'; a directory that only has keys under it gets a
 * record). Fields in mask (MOONCAKE_SET_*) are set from attr; the others
 * are kept, or taken from attr when nothing was stored yet, so attr->mode
 * must carry the type (S_IFREG, S_IFDIR, S_IFLNK; -600 otherwise). ctime
 * becomes now. out (may be NULL) gets the attributes stored. -704 when
 * absent.
 */
MOONCAKE_API int mooncake_store_setattr(mooncake_store_t store, const char *key,
					bool dir, unsigned mask,
					const mooncake_fs_attr_t *attr,
					mooncake_fs_attr_t *out);
/**
 * Make a directory record at path (a prefix ending in '/') with attr
 * (NULL: none). -705 when the directory exists already (a record, keys
 * under it, or an object named path without its '/'). Directory records
 * are listed by mooncake_store_list_dirs() and survive restarts.
 */
MOONCAKE_API int mooncake_store_mkdir(mooncake_store_t store, const char *path,
				      const mooncake_fs_attr_t *attr);
/** Remove the directory record at path; -700 (INVALID_WRITE) when any
 *  key or directory record is under it, -704 when there is no record. */
MOONCAKE_API int mooncake_store_rmdir(mooncake_store_t store, const char *path);

/* Replica descriptions for an extended attribute: "endpoint@0xaddr\n"
 * lines into buf (NUL-terminated, truncated to len; buf may be NULL when
 * len is 0); returns the count of replicas, also when truncated. No lease
 * is taken. */
MOONCAKE_API int mooncake_store_replica_text(mooncake_store_t store,
					     const char *key, char *buf,
					     size_t len);

typedef struct mooncake_list_entry {
	const char *name; /* full key, or a common prefix ending in delim */
	uint64_t size;
	uint64_t mtime_ms;
	bool is_prefix;
	uint64_t version; /* see mooncake_store_object_version(); 0: prefix */
	mooncake_fs_attr_t attr; /* mode 0: none stored */
} mooncake_list_entry_t;

/**
 * One page of keys under prefix, after start_after (NULL or "": from the
 * start), in bytewise order; with a delimiter, keys containing it after
 * the prefix collapse into one prefix entry. fn is called per entry
 * (strings valid during the call only; fn may be NULL). *truncated (may
 * be NULL) tells whether more follow the last entry; the next page starts
 * after the last name returned, a common prefix included. limit 0: 1000
 * (the master caps it at 100000). Returns the number of entries.
 */
MOONCAKE_API int mooncake_store_list(mooncake_store_t store, const char *prefix,
				     const char *delimiter,
				     const char *start_after, unsigned limit,
				     void (*fn)(void *arg,
						const mooncake_list_entry_t *e),
				     void *arg, bool *truncated);

/** mooncake_store_list() that also lists directory records under prefix
 *  (as prefix entries, with their attributes, when delimiter is "/"). */
MOONCAKE_API int
mooncake_store_list_dirs(mooncake_store_t store, const char *prefix,
			 const char *delimiter, const char *start_after,
			 unsigned limit,
			 void (*fn)(void *arg, const mooncake_list_entry_t *e),
			 void *arg, bool *truncated);

/** Atomic rename; replaces an existing `to` unless no_replace (-705).
 *  -704 when `from` is absent; a `to` still being written is -714.
 *  Holds follow the object: a reader of `from` keeps reading it, and a
 *  reader of the replaced `to` keeps reading the old object. */
MOONCAKE_API int mooncake_store_rename(mooncake_store_t store, const char *from,
				       const char *to, bool no_replace);
/** As mooncake_store_rename(), for a from that is the next version of to
 *  (the mount's publish of a file written under a hidden key): to's
 *  directory record is touched only when to is a new name, and from's not
 *  at all, so a file rewritten in place leaves its directory's mtime and
 *  ctime alone, as on a local filesystem (a master without
 *  RenameRequest.version touches both, as for any rename). */
MOONCAKE_API int mooncake_store_rename_version(mooncake_store_t store,
					       const char *from, const char *to,
					       bool no_replace);
/**
 * Rename the directory from to to (both prefixes ending in '/'): every key
 * and directory record under from moves in one step (readers holding
 * objects open keep reading them). -704 when nothing is under from and it
 * has no record; -700 (INVALID_WRITE) when to has entries; an empty
 * directory record at to is replaced.
 */
MOONCAKE_API int mooncake_store_rename_dir(mooncake_store_t store,
					   const char *from, const char *to);

typedef struct mooncake_pool_stat {
	uint64_t capacity; /* = master_total_capacity_bytes */
	uint64_t allocated; /* = master_allocated_bytes */
	uint64_t keys;
	uint32_t clients;
	uint32_t segments; /* mounted (those capacity counts) */
	/* The largest segment's size (of those capacity counts, restored
	 * ones awaiting their owner included): an object (a file) is stored
	 * whole in one segment per replica, so no larger one fits. 0: no
	 * segment. */
	uint64_t largest_segment;
} mooncake_pool_stat_t;

MOONCAKE_API int mooncake_store_pool_stat(mooncake_store_t store,
					  mooncake_pool_stat_t *out);
/**
 * The largest object the pool can place: the largest segment's size, as
 * mooncake_pool_stat_t.largest_segment (0: no segment). Cached by the
 * segments' view: the master is asked (GetStatus) only when the heartbeat
 * has reported a view that changed since the last ask (a segment joined,
 * left or was re-adopted; a new master), so a caller may ask before every
 * write. Stale for at most a heartbeat (ping_interval_ms) after a change.
 * When that ask fails, its code is returned and *out keeps the last size
 * known; the view is not asked about again.
 */
MOONCAKE_API int mooncake_store_largest_segment(mooncake_store_t store,
						uint64_t *out);

/* ---- reading by range ---------------------------------------------------- */

typedef struct mooncake_object *mooncake_object_t;

/**
 * Open key for reading: fetches its replicas and takes a hold, so the
 * object's memory stays readable until mooncake_store_object_close(),
 * even if it is removed or renamed over meanwhile. The hold is renewed
 * in the background while open (one thread per store renews every open
 * object's hold). -704 when absent, -703 while it is still being written.
 */
MOONCAKE_API int mooncake_store_object_open(mooncake_store_t store,
					    const char *key,
					    mooncake_object_t *out);
MOONCAKE_API uint64_t mooncake_store_object_size(mooncake_object_t obj);
/**
 * The version of the object opened: a number the master gives every
 * object at its PutEnd, unique in the pool (two objects never share one;
 * a key's next object has another), kept by a rename. stat and list
 * report it too, so a reader can tell whether a key still names the object
 * it saw (the mount binds its inodes to versions this way). Never 0 for a
 * complete object.
 */
MOONCAKE_API uint64_t mooncake_store_object_version(mooncake_object_t obj);
/**
 * Copy [off, off+len) of the object into buf, which must lie in memory
 * registered with mooncake_store_register_buffer() (or be any memory when
 * the library's staging buffer is large enough: it is copied through it).
 * Reads past the end are cut short (0 at or after the end). Returns bytes
 * copied or a code; a failed replica is skipped for the next one before
 * -800 is returned (the one that answered is tried first next time).
 * -707 LEASE_EXPIRED when the hold is gone (the master restarted, or it
 * could not be renewed for 3 lease TTLs): the memory may have been
 * reused, so nothing is returned; reopen the key. Unregistered memory
 * larger than the staging buffer is -600. Any number of threads may read
 * one object at once.
 */
MOONCAKE_API int64_t mooncake_store_object_read(mooncake_object_t obj,
						uint64_t off, void *buf,
						size_t len);
/**
 * Where the replica lives in this process's own segment: *ptr points at
 * byte off and the return value is how many bytes (up to len) may be read
 * there, with no copy, for as long as the object stays open. -1012
 * (NOT_SUPPORTED) when no replica is in this process's memory (use
 * object_read), -707 when the hold lapsed.
 */
MOONCAKE_API int64_t mooncake_store_object_peek(mooncake_object_t obj,
						uint64_t off, size_t len,
						const void **ptr);
/**
 * Copy [off, off+len) of the object into a pipe (pipe_fd: its write end,
 * with room for len bytes, F_SETPIPE_SZ) instead of memory: over TCP the
 * bytes go from the socket into the pipe without a copy (splice), for a
 * FUSE daemon that answers a read from the pipe (fuse_reply_data). Cut
 * short at the end as object_read; returns the bytes added. -1012
 * (NOT_SUPPORTED): nothing was added and this read cannot go this way now
 * (the replica is reached by shared memory or RDMA, or every connection
 * to its holder is busy): use object_read. Any other code (a transfer
 * error, -707 when the hold lapsed before the bytes were all in): the
 * pipe may hold part of the range, which the caller must discard; then
 * object_read, which also tries the other replicas, gives the answer.
 */
MOONCAKE_API int64_t mooncake_store_object_splice(mooncake_object_t obj,
						  uint64_t off, size_t len,
						  int pipe_fd);
/** Release the hold and free the handle (NULL is fine). Not concurrent
 *  with reads of the same handle. */
MOONCAKE_API void mooncake_store_object_close(mooncake_object_t obj);

/* ---- writing by range ---------------------------------------------------- */

typedef struct mooncake_writer *mooncake_writer_t;

/**
 * Start a put of exactly size bytes under key (PutStart): replicas are
 * allocated now; -705 if key already exists (complete or being written),
 * -200 when the pool has no room. size 0 is allowed (an empty object).
 * The object becomes visible at close(commit). Bytes never written read
 * as zeros (close fills the holes). A put not ended within the master's
 * put_start_discard_timeout_sec (30 s) may be discarded for another put of
 * the same key: write under a key nobody else writes, then rename. A put
 * must end within put_start_release_timeout_sec (600 s): the master then
 * frees its memory and nothing tells the writer (the master cannot renew
 * a put yet), so later writes could land in another object's memory.
 */
MOONCAKE_API int mooncake_store_writer_open(
	mooncake_store_t store, const char *key, uint64_t size,
	const mooncake_replicate_config_t *config, mooncake_writer_t *out);
/** writer_open() of an object with attributes (attr NULL: none): a file.
 *  Its completion, a rename of it and its removal also set the mtime of
 *  its parent's directory record, when there is one. */
MOONCAKE_API int mooncake_store_writer_open_attr(
	mooncake_store_t store, const char *key, uint64_t size,
	const mooncake_replicate_config_t *config,
	const mooncake_fs_attr_t *attr, mooncake_writer_t *out);
/**
 * writer_open_attr() of an object its caller renames over its real name
 * right after the commit (rename_version: a file's next version written
 * under a hidden key, as the mount publishes). The committed object is
 * not evicted before that rename, for up to the master's
 * --default_kv_lease_ttl (10 s) after the commit (a "publish lease"), so
 * another put's eviction cannot take it in between and fail the rename
 * with -704. A master from before 2026-12-07 ignores the request (the
 * object is evictable as any other).
 */
MOONCAKE_API int mooncake_store_writer_open_publish(
	mooncake_store_t store, const char *key, uint64_t size,
	const mooncake_replicate_config_t *config,
	const mooncake_fs_attr_t *attr, mooncake_writer_t *out);
/**
 * Write [off, off+len) into every replica; buf as for object_read. Past
 * the end is -600 (and harmless). A write that fails on any replica
 * (-800) spoils the put: later writes return that code and close() revokes
 * it. Writes at different offsets may run in several threads at once;
 * overlapping concurrent writes leave either's bytes.
 */
MOONCAKE_API int mooncake_store_writer_write(mooncake_writer_t w, uint64_t off,
					     const void *buf, size_t len);
/**
 * PutEnd (commit = true) or PutRevoke, then free the handle; not
 * concurrent with its writes. A commit after a failed write revokes and
 * returns the write's code; a revoke frees the memory at once.
 */
MOONCAKE_API int mooncake_store_writer_close(mooncake_writer_t w, bool commit);
/** writer_close(w, true), and *version the object's version once
 *  committed (0 on failure, or when the master does not say: one from
 *  before 2026-12-06, or a retry after a takeover). */
MOONCAKE_API int mooncake_store_writer_commit(mooncake_writer_t w,
					      uint64_t *version);

/* ---- change feed ---------------------------------------------------------- */

enum mooncake_event_type {
	MOONCAKE_EV_PUT = 1,
	MOONCAKE_EV_REMOVE = 2,
	MOONCAKE_EV_RENAME = 3,
	MOONCAKE_EV_EVICT = 4,
	MOONCAKE_EV_LOST = 5,
	MOONCAKE_EV_ATTR =
		6, /* attributes changed (a directory: key ends '/') */
	MOONCAKE_EV_MKDIR = 7, /* key: the directory's prefix */
	MOONCAKE_EV_RMDIR = 8,
	/* Checkpoints (ckpt.h): key is the checkpoint's name, not a key. */
	MOONCAKE_EV_CKPT_PUT = 9,
	MOONCAKE_EV_CKPT_REMOVE = 10,
};

typedef struct mooncake_event {
	uint64_t seq;
	enum mooncake_event_type type;
	const char *key;
	const char *to; /* rename target, "" otherwise */
	/* put, rename of one key: the object's version (0: none, or a
	 * master from before the field) */
	uint64_t version;
} mooncake_event_t;

/**
 * Follow the change feed from cursor (*epoch, *after); 0/0 starts at the
 * present. Waits up to wait_ms for an event, calls fn for each (in order;
 * strings valid during the call only; fn may be NULL), advances the
 * cursor. Returns the number of events (0 when none came in time), or 1
 * with *reset set and fn not called when events were lost or the master
 * restarted (the caller must forget everything it cached; the cursor then
 * points at the present), or a code. *reset may be NULL. Uses its own
 * connections, so a long poll blocks nobody else; close() of the store
 * and mooncake_store_watch_stop() end a waiting watch at once (-1010).
 */
MOONCAKE_API int mooncake_store_watch(mooncake_store_t store, uint64_t *epoch,
				      uint64_t *after, unsigned wait_ms,
				      void (*fn)(void *arg,
						 const mooncake_event_t *e),
				      void *arg, bool *reset);

/**
 * Stop following the change feed, from any thread: watches waiting now
 * return -1010 at once and later ones too, while the rest of the store
 * works on (for a caller that shuts its watcher down before it closes the
 * store). Returns 0, or -1010 before setup and after close.
 */
MOONCAKE_API int mooncake_store_watch_stop(mooncake_store_t store);

#ifdef __cplusplus
}
#endif
#endif
