/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file db_int.h
 * The inside of struct mst_db, shared by db.c (the record) and db_log.c
 * (the HA op log over it). Nothing else includes this.
 */
#ifndef MASTER_DB_INT_H
#define MASTER_DB_INT_H

#define SQLITE_ENABLE_SESSION 1 /* the changeset reader and changegroup */
#define SQLITE_ENABLE_PREUPDATE_HOOK 1
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "db.h"

/* The record's tables: the only ones an op log entry may change. */
#define MST_DB_TABLES 9
#define MST_DB_MAX_COLS 16

/* A growing byte buffer of db_rec.c. */
struct mst_db_rbuf {
	uint8_t *p;
	size_t len, cap;
};

/* The VFS of the record's connections (db.c, open_handle). */
#define MST_DB_VFS "unix-excl"

struct mst_db_wal;

struct mst_db {
	sqlite3 *h;
	int lock_fd;
	/* The WAL's checkpoint thread (db_wal.c); NULL: commits checkpoint
	 * it themselves (memory mode, the option off, or no MST_DB_VFS). */
	struct mst_db_wal *wal;
	sqlite3_stmt *begin, *commit, *rollback;
	sqlite3_stmt *put_seg, *del_seg, *put_obj, *del_obj, *seek;
	sqlite3_stmt *put_attr, *del_attr;
	sqlite3_stmt *put_orphan, *del_orphan;
	sqlite3_stmt *dir_get, *dir_put, *dir_del, *dir_seek, *dir_touch;
	/* Failures are logged once a second at most (a full disk fails
	 * every change): when the last line went, how many since. */
	uint64_t err_at;
	uint64_t err_quiet;
	uint64_t ok_said_at; /* mono ms: "writable again" last logged */
	/* A write failed and none committed since (a full disk): /health
	 * says so; the next commit logs that the record is writable. */
	_Atomic bool failing;
	/* The op log (db_log.c): with log_ops set, every transaction's
	 * changes are captured (db_rec.c) and appended after COMMIT. */
	const struct mst_db_log_ops *log_ops;
	void *log_arg;
	bool rec_on; /* a logged transaction is open: capturing */
	int rec_err; /* 0, or why the capture failed (the change rolls back) */
	struct mst_db_rbuf rec[MST_DB_TABLES]; /* its patchset, per table */
	struct mst_db_rbuf rec_del, rec_key; /* a held DELETE's key; scratch */
	int rec_del_tab; /* the held DELETE's table, -1 none */
	uint64_t log_seq, log_pending; /* last committed / being committed */
	void *log_entry; /* log_pending's entry (malloc'd) */
	size_t log_entry_len;
	sqlite3_stmt *log_set_seq, *log_ins_seq;
	uint64_t op_id; /* the request being served (HA), 0 none */
	sqlite3_stmt *op_put, *op_get, *op_prune;
	int ncols[MST_DB_TABLES]; /* columns of mst_db_tables[i] */
	/* per column: its place in the primary key (1...), 0 none */
	uint8_t pk[MST_DB_TABLES][MST_DB_MAX_COLS];
};

extern const char *const mst_db_tables[MST_DB_TABLES];

/* db_log.c, called by db.c's begin, commit and rollback. */
int mst_db_log_begin(struct mst_db *db);
/** Capture the changes as the next entry: 0 (commit may go on) or a code
 *  (roll back). */
int mst_db_log_capture(struct mst_db *db);
/** After COMMIT (ok: it succeeded): the entry goes to the log, or is
 *  dropped. */
void mst_db_log_committed(struct mst_db *db, bool ok);
/** Drop the open transaction's capture (rollback, or after commit). */
void mst_db_log_end(struct mst_db *db);
/** The sequence number stored in the record (0: none): at open. */
int mst_db_log_load(struct mst_db *db);
void mst_db_log_close(struct mst_db *db);

/* db_wal.c: WAL checkpoints on a thread of their own. */
/** Open a second connection to path (MST_DB_VFS) and checkpoint from it
 *  whenever commits have grown the WAL enough (db->h opened through
 *  MST_DB_VFS in normal locking mode). 0, or a code (logged; commits
 *  then checkpoint themselves, as sqlite does by default). */
int mst_db_wal_start(struct mst_db *db, const char *path, bool full_sync);
/** Stop the thread and close its connection (before db->h closes). */
void mst_db_wal_stop(struct mst_db *db);

/* db_rec.c: the capture of a logged transaction's changes. */
/** Start capturing (the transaction has begun). */
void mst_db_rec_begin(struct mst_db *db);
/** Stop capturing (what was captured stays until the next begin). */
void mst_db_rec_end(struct mst_db *db);
/** 1 when nothing was captured, 0 when something was, or why the capture
 *  failed (a negative errno). */
int mst_db_rec_empty(struct mst_db *db);
/** The captured changes as one patchset (malloc'd, with 4 bytes spare at
 *  its end): 0, or a negative errno. */
int mst_db_rec_take(struct mst_db *db, uint8_t **out, size_t *len);
/** Free the capture's buffers (at close). */
void mst_db_rec_free(struct mst_db *db);

#endif
