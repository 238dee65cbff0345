/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sqlite persistence of the master (see db.h). Memory mode uses an
 * in-memory database, so listing works the same way without a file.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "db.h"
#include "db_int.h"
#include "groups.h"
#include "master.h"
#include "mc_le.h"
#include "mc_log.h"
#include "mooncake/mc_err.h"
#include "mst_util.h"

#define SCHEMA_VERSION 5

/* The attribute columns (schema 2), in objects after replicas and in dirs
 * after path: NULL mode means none stored. */
#define ATTR_COLS "mode,uid,gid,aflags,atime,amtime,actime"
#define N_ATTR_COLS 7
/* The same columns of attrs joined as "a" to objects. */
#define OBJ_ATTR_COLS "a.mode,a.uid,a.gid,a.aflags,a.atime,a.amtime,a.actime"

static const char *const schema =
	"CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER);"
	"CREATE TABLE IF NOT EXISTS segments(id BLOB PRIMARY KEY, name TEXT,"
	" endpoint TEXT, protocol TEXT, host_id TEXT, size INTEGER)"
	" WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS objects(key BLOB PRIMARY KEY,"
	" size INTEGER, flags INTEGER, soft_pin_until INTEGER,"
	" mtime INTEGER, replicas BLOB, grp BLOB) WITHOUT ROWID;"
	/* The attributes of objects written through a mount, in a table of
	 * their own: a put through the API writes the row it always did. */
	"CREATE TABLE IF NOT EXISTS attrs(key BLOB PRIMARY KEY,"
	" mode INTEGER, uid INTEGER, gid INTEGER, aflags INTEGER,"
	" atime INTEGER, amtime INTEGER, actime INTEGER) WITHOUT ROWID;"
	/* Directories made with mkdir (docs/design.md, "Directories"). */
	"CREATE TABLE IF NOT EXISTS dirs(path BLOB PRIMARY KEY,"
	" mode INTEGER, uid INTEGER, gid INTEGER, aflags INTEGER,"
	" atime INTEGER, amtime INTEGER, actime INTEGER) WITHOUT ROWID;"
	/* Memory of removed objects that readers may still use: kept across
	 * a restart until they are surely done (docs/design.md). */
	"CREATE TABLE IF NOT EXISTS orphans(id INTEGER PRIMARY KEY,"
	" size INTEGER, replicas BLOB);"
	/* Checkpoints (schema 5; ckpt.c): the sealed record (a packed Ckpt
	 * without holder_list) and who holds which shards. */
	"CREATE TABLE IF NOT EXISTS checkpoints(id INTEGER PRIMARY KEY,"
	" name BLOB UNIQUE, rec BLOB, created INTEGER);"
	"CREATE TABLE IF NOT EXISTS ckpt_holders(ckpt INTEGER, client BLOB,"
	" endpoint TEXT, publisher INTEGER, bitmap BLOB,"
	" PRIMARY KEY(ckpt, client)) WITHOUT ROWID;"
	/* HA: request ids applied (db_log.c), kept a few minutes so a
	 * request retried on the next leader is not applied twice. */
	"CREATE TABLE IF NOT EXISTS ops(id INTEGER PRIMARY KEY, t INTEGER);";

/* Schema 1 had no attributes (the schema's statements add the tables);
 * schema 2 kept objects' attributes in columns of objects, which every
 * put paid for: they move to attrs. */
static const char *const upgrade_2_3 =
	"BEGIN;"
	"INSERT OR REPLACE INTO attrs SELECT key,mode,uid,gid,aflags,atime,"
	" amtime,actime FROM objects WHERE mode IS NOT NULL;"
	"ALTER TABLE objects DROP COLUMN mode;"
	"ALTER TABLE objects DROP COLUMN uid;"
	"ALTER TABLE objects DROP COLUMN gid;"
	"ALTER TABLE objects DROP COLUMN aflags;"
	"ALTER TABLE objects DROP COLUMN atime;"
	"ALTER TABLE objects DROP COLUMN amtime;"
	"ALTER TABLE objects DROP COLUMN actime;"
	"COMMIT;";

/* Schema 4 added the objects' group ids (NULL: none). */
static const char *const upgrade_3_4 =
	"ALTER TABLE objects ADD COLUMN grp BLOB;";

void mst_db_unlink_sides(const char *path)
{
	char side[PATH_MAX + 8];

	snprintf(side, sizeof(side), "%s-wal", path);
	(void)unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	(void)unlink(side);
}

static int prep(struct mst_db *db, const char *sql, sqlite3_stmt **st)
{
	return sqlite3_prepare_v3(db->h, sql, -1, SQLITE_PREPARE_PERSISTENT, st,
				  NULL);
}

static int db_fail(struct mst_db *db, const char *what)
{
	uint64_t now = mst_now();
	int ec = sqlite3_errcode(db->h) & 0xff;

	/* What a full or failing disk gives (a write's): /health says so. */
	if (ec == SQLITE_FULL || ec == SQLITE_IOERR || ec == SQLITE_READONLY)
		atomic_store(&db->failing, true);
	if (db->err_at && now - db->err_at < 1000) {
		db->err_quiet++;
		return MC_STORE_INTERNAL_ERROR;
	}
	if (db->err_quiet)
		mc_log_err("master",
			   "sqlite %s: %s (and %llu more failures in the "
			   "last %llu ms)",
			   what, sqlite3_errmsg(db->h),
			   (unsigned long long)db->err_quiet,
			   (unsigned long long)(now - db->err_at));
	else
		mc_log_err("master", "sqlite %s: %s", what,
			   sqlite3_errmsg(db->h));
	db->err_at = now;
	db->err_quiet = 0;
	return MC_STORE_INTERNAL_ERROR;
}

static int step_done(struct mst_db *db, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : db_fail(db, what);
}

/*
 * Open db->h on name (a file, or ":memory:") and make the schema. A file
 * is opened through sqlite's "unix-excl" VFS: the first lock taken keeps
 * every other process out for as long as the record is open (as the
 * exclusive locking mode would), while connections of this process share
 * the WAL index in memory, so the checkpoint thread's connection
 * (db_wal.c) can copy the WAL beside the master's, and a transaction
 * takes no file lock of its own (no -shm file either). Without the
 * thread (*excl true on entry) the record is opened as it always was: the
 * exclusive locking mode through the default VFS. 0, or MC_EDB with err
 * set and db->h closed. *excl on return: opened in the exclusive mode (no
 * second connection can share it).
 */
static int open_handle(struct mst_db *db, const char *name, bool full_sync,
		       bool *excl, char *err, size_t errlen)
{
	bool mem = !strcmp(name, ":memory:");
	char pragma[160];

	if (!*excl && !sqlite3_vfs_find(MST_DB_VFS)) {
		mc_log_warn("master",
			    "sqlite has no VFS %s: the record's WAL is "
			    "checkpointed by commits",
			    MST_DB_VFS);
		*excl = true;
	}
	if (sqlite3_open_v2(name, &db->h,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				    SQLITE_OPEN_NOMUTEX,
			    *excl ? NULL : MST_DB_VFS) != SQLITE_OK)
		goto fail;
	snprintf(pragma, sizeof(pragma),
		 "PRAGMA locking_mode=%s; PRAGMA journal_mode=WAL;"
		 " PRAGMA synchronous=%s;"
		 /* A WAL that grew under steady load (a pass cannot start
		  * it over while transactions keep coming) is cut back to
		  * 16 MB when it starts over; it kept its peak (53 MB). */
		 " PRAGMA journal_size_limit=16777216;",
		 *excl ? "EXCLUSIVE" : "NORMAL", full_sync ? "FULL" : "NORMAL");
	/* Only the checkpoint thread's brief locks can make it wait. */
	sqlite3_busy_timeout(db->h, 5000);
	if (sqlite3_exec(db->h, mem ? "PRAGMA locking_mode=EXCLUSIVE;" : pragma,
			 NULL, NULL, NULL) == SQLITE_OK &&
	    sqlite3_exec(db->h, schema, NULL, NULL, NULL) == SQLITE_OK)
		return 0;
fail:
	snprintf(err, errlen, "database %s: %s", mem ? "(memory)" : name,
		 db->h ? sqlite3_errmsg(db->h) : "out of memory");
	sqlite3_close(db->h);
	db->h = NULL;
	return MC_EDB;
}

int mst_db_open(const char *path, unsigned flags, struct mst_db **out,
		char *err, size_t errlen)
{
	bool mem = !path || !*path || !strcmp(path, "memory"), excl;
	bool full_sync = flags & MST_DB_FULL_SYNC;
	struct mst_db *db = calloc(1, sizeof(*db));
	int rc, ver = 0;
	sqlite3_stmt *st;

	if (!db)
		return -ENOMEM;
	db->lock_fd = -1;
	db->rec_del_tab = -1;
	if (!mem) {
		db->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (db->lock_fd < 0) {
			rc = -errno;
			snprintf(err, errlen, "database %s: %s", path,
				 mc_strerror(rc));
			free(db);
			return rc;
		}
		if (flock(db->lock_fd, LOCK_EX | LOCK_NB)) {
			snprintf(err, errlen,
				 "database %s is in use by another master",
				 path);
			close(db->lock_fd);
			free(db);
			return -EBUSY;
		}
	}
	excl = mem || !(flags & MST_DB_CKPT_THREAD);
	rc = open_handle(db, mem ? ":memory:" : path, full_sync, &excl, err,
			 errlen);
	if (rc) {
		mst_db_close(db);
		return rc;
	}
	if (prep(db, "SELECT v FROM meta WHERE k='schema'", &st) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			ver = sqlite3_column_int(st, 0);
		sqlite3_finalize(st);
	}
	if (ver > SCHEMA_VERSION) {
		snprintf(err, errlen,
			 "database %s has schema %d, newer than this master's "
			 "%d",
			 path, ver, SCHEMA_VERSION);
		mst_db_close(db);
		return MC_EDB;
	}
	if (ver == 2 &&
	    sqlite3_exec(db->h, upgrade_2_3, NULL, NULL, NULL) != SQLITE_OK)
		goto sql_err;
	if (ver && ver < 4 &&
	    sqlite3_exec(db->h, upgrade_3_4, NULL, NULL, NULL) != SQLITE_OK)
		goto sql_err;
	if (ver && ver < SCHEMA_VERSION)
		mc_log_info("master",
			    "database %s upgraded from schema %d to %d", path,
			    ver, SCHEMA_VERSION);
	/* Written only when it changes: a master restarted on a full disk
	 * still reads its record (and serves what it holds). */
	if (ver != SCHEMA_VERSION &&
	    sqlite3_exec(db->h,
			 "INSERT OR REPLACE INTO meta VALUES('schema', 5)",
			 NULL, NULL, NULL) != SQLITE_OK)
		goto sql_err;
	if (prep(db, "BEGIN", &db->begin) || prep(db, "COMMIT", &db->commit) ||
	    prep(db, "ROLLBACK", &db->rollback) ||
	    prep(db,
		 "INSERT OR REPLACE INTO segments VALUES(?1,?2,?3,?4,?5,?6)",
		 &db->put_seg) ||
	    prep(db, "DELETE FROM segments WHERE id=?1", &db->del_seg) ||
	    prep(db,
		 "INSERT OR REPLACE INTO objects(key,size,flags,"
		 "soft_pin_until,mtime,replicas,grp)"
		 " VALUES(?1,?2,?3,?4,?5,?6,?7)",
		 &db->put_obj) ||
	    prep(db,
		 "INSERT OR REPLACE INTO attrs(key," ATTR_COLS
		 ") VALUES(?1,?2,?3,?4,?5,?6,?7,?8)",
		 &db->put_attr) ||
	    prep(db, "DELETE FROM objects WHERE key=?1", &db->del_obj) ||
	    prep(db, "DELETE FROM attrs WHERE key=?1", &db->del_attr) ||
	    prep(db, "INSERT OR REPLACE INTO orphans VALUES(?1,?2,?3)",
		 &db->put_orphan) ||
	    prep(db, "DELETE FROM orphans WHERE id=?1", &db->del_orphan) ||
	    prep(db,
		 "SELECT o.key,o.size,o.mtime," OBJ_ATTR_COLS " FROM objects"
		 " o LEFT JOIN attrs a ON a.key=o.key WHERE o.key>=?1 ORDER"
		 " BY o.key",
		 &db->seek) ||
	    prep(db, "SELECT path," ATTR_COLS " FROM dirs WHERE path=?1",
		 &db->dir_get) ||
	    prep(db,
		 "INSERT OR REPLACE INTO dirs(path," ATTR_COLS
		 ") VALUES(?1,?2,?3,?4,?5,?6,?7,?8)",
		 &db->dir_put) ||
	    prep(db, "DELETE FROM dirs WHERE path=?1", &db->dir_del) ||
	    prep(db,
		 "SELECT path," ATTR_COLS " FROM dirs WHERE path>=?1 ORDER "
		 "BY path",
		 &db->dir_seek) ||
	    prep(db, "UPDATE dirs SET amtime=?2, actime=?2 WHERE path=?1",
		 &db->dir_touch) ||
	    mst_db_log_load(db))
		goto sql_err;
	if (!excl)
		(void)mst_db_wal_start(db, path, full_sync); /* logs why not */
	*out = db;
	return 0;

sql_err:
	snprintf(err, errlen, "database %s: %s", mem ? "(memory)" : path,
		 sqlite3_errmsg(db->h));
	mst_db_close(db);
	return MC_EDB;
}

void mst_db_close(struct mst_db *db)
{
	if (!db)
		return;
	mst_db_wal_stop(db);
	sqlite3_finalize(db->begin);
	sqlite3_finalize(db->commit);
	sqlite3_finalize(db->rollback);
	sqlite3_finalize(db->put_seg);
	sqlite3_finalize(db->del_seg);
	sqlite3_finalize(db->put_obj);
	sqlite3_finalize(db->put_attr);
	sqlite3_finalize(db->del_attr);
	sqlite3_finalize(db->del_obj);
	sqlite3_finalize(db->put_orphan);
	sqlite3_finalize(db->del_orphan);
	sqlite3_finalize(db->seek);
	sqlite3_finalize(db->dir_get);
	sqlite3_finalize(db->dir_put);
	sqlite3_finalize(db->dir_del);
	sqlite3_finalize(db->dir_seek);
	sqlite3_finalize(db->dir_touch);
	mst_db_log_close(db);
	sqlite3_close(db->h);
	if (db->lock_fd >= 0)
		close(db->lock_fd);
	free(db);
}

int mst_db_begin(struct mst_db *db)
{
	int rc = step_done(db, db->begin, "begin");

	if (!rc && db->log_ops) {
		rc = mst_db_log_begin(db);
		if (rc)
			mst_db_rollback(db);
	}
	return rc;
}

/*
 * After a failed COMMIT sqlite has rolled the transaction back in memory,
 * but its frames can be whole in the WAL file: with synchronous=FULL the
 * frames and the commit mark are written before the fsync that failed. A
 * restart would read them back as committed: a put the client was told
 * failed (its memory freed, perhaps reused) would come back, a remove the
 * client was told failed would have happened. Each transaction's frames
 * go where the failed one's went, and a frame counts only while the
 * checksums chained from the start of the WAL match: a small transaction
 * that changes nothing the master reads ends the WAL's valid part before
 * the failed transaction's commit mark. It may fail too (writes failing),
 * and then the failed transaction's commit mark was not written either.
 */
static void fence(struct mst_db *db)
{
	if (!sqlite3_get_autocommit(db->h))
		return; /* the rollback failed: nothing to fence with */
	if (sqlite3_exec(db->h,
			 "INSERT OR REPLACE INTO meta VALUES('fence',random())",
			 NULL, NULL, NULL) != SQLITE_OK)
		(void)db_fail(db, "fence after a failed commit");
}

int mst_db_commit(struct mst_db *db)
{
	int rc = db->rec_on ? mst_db_log_capture(db) : 0;

	if (rc) {
		mst_db_rollback(db);
		return rc;
	}
	rc = step_done(db, db->commit, "commit");
	mst_db_log_committed(db, rc == 0);
	if (!rc && atomic_load(&db->failing)) {
		uint64_t now = mst_now();

		atomic_store(&db->failing, false);
		/* On a disk that stays nearly full, commits fail and pass
		 * by turns: said once, then at most every 10 s. */
		if (!db->ok_said_at || now - db->ok_said_at >= 10000) {
			mc_log_notice("master", "the record is writable again");
			db->ok_said_at = now;
		}
	}

	if (rc) {
		mst_db_rollback(db);
		fence(db);
	}
	return rc;
}

bool mst_db_failing(struct mst_db *db)
{
	return db && atomic_load(&db->failing);
}

uint64_t mst_db_disk_free(struct mst_db *db, bool *low)
{
	struct statvfs vfs;
	uint64_t free_b, floor;

	if (low)
		*low = false;
	if (!db || db->lock_fd < 0 || fstatvfs(db->lock_fd, &vfs))
		return UINT64_MAX;
	free_b = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	floor = (uint64_t)vfs.f_blocks * vfs.f_frsize / 20;
	if (floor > MST_DB_LOW_FREE)
		floor = MST_DB_LOW_FREE;
	if (low)
		*low = free_b < floor;
	return free_b;
}

void mst_db_rollback(struct mst_db *db)
{
	mst_db_log_end(db);
	if (!sqlite3_get_autocommit(db->h))
		(void)step_done(db, db->rollback, "rollback");
}

int mst_db_put_segment(struct mst_db *db, const struct mst_segment *s)
{
	sqlite3_stmt *st = db->put_seg;

	sqlite3_bind_blob(st, 1, s->id, MST_ID_LEN, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, s->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, s->endpoint, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, s->protocol, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, s->host_id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 6, (sqlite3_int64)s->size);
	return step_done(db, st, "put segment");
}

int mst_db_del_segment(struct mst_db *db, const uint8_t *id)
{
	sqlite3_bind_blob(db->del_seg, 1, id, MST_ID_LEN, SQLITE_STATIC);
	return step_done(db, db->del_seg, "delete segment");
}

#define REPL_REC (MST_ID_LEN + 8)

/* The replicas' (segment id, offset) records; returns the bytes used. */
/*
 * The mtime column holds the object's version (wall ns, master.h). Records
 * written before versions existed hold wall ms there: below 1e15 (year
 * 33658 in ms, 1970-01-12 in ns) a value is ms and read as ns.
 */
static uint64_t mst_db_version(sqlite3_int64 v)
{
	uint64_t u = v > 0 ? (uint64_t)v : 0;

	return u < 1000000000000000ull ? u * 1000000u : u;
}

static size_t encode_replicas(const struct mst_object *o, uint8_t *blob)
{
	size_t n = 0;

	for (unsigned i = 0; i < o->n_repl; i++) {
		const struct mst_replica *r = &o->repl[i];
		if (!r->seg || !r->blk)
			continue;
		memcpy(blob + n, r->seg->id, MST_ID_LEN);
		mc_put_le64(blob + n + MST_ID_LEN,
			    mc_alloc_block_offset(r->blk));
		n += REPL_REC;
	}
	return n;
}

static void decode_replicas(const uint8_t *b, int bl, struct mst_db_object *o)
{
	for (int off = 0; b && off + REPL_REC <= bl && o->n_repl < 8;
	     off += REPL_REC) {
		o->repl[o->n_repl].seg_id = b + off;
		o->repl[o->n_repl].offset = mc_get_le64(b + off + MST_ID_LEN);
		o->n_repl++;
	}
}

/* Attribute parameters from ?first on (NULLs when a is NULL). */
static void bind_attr(sqlite3_stmt *st, int first, const mst_attr_t *a)
{
	if (!a) {
		for (int i = 0; i < N_ATTR_COLS; i++)
			sqlite3_bind_null(st, first + i);
		return;
	}
	sqlite3_bind_int64(st, first, a->mode);
	sqlite3_bind_int64(st, first + 1, a->uid);
	sqlite3_bind_int64(st, first + 2, a->gid);
	sqlite3_bind_int64(st, first + 3, a->flags);
	sqlite3_bind_int64(st, first + 4, a->atime_ns);
	sqlite3_bind_int64(st, first + 5, a->mtime_ns);
	sqlite3_bind_int64(st, first + 6, a->ctime_ns);
}

/* Attribute columns from col on; false when none are stored. */
static bool column_attr(sqlite3_stmt *st, int col, mst_attr_t *a)
{
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		return false;
	a->mode = (uint32_t)sqlite3_column_int64(st, col);
	a->uid = (uint32_t)sqlite3_column_int64(st, col + 1);
	a->gid = (uint32_t)sqlite3_column_int64(st, col + 2);
	a->flags = (uint32_t)sqlite3_column_int64(st, col + 3);
	a->atime_ns = sqlite3_column_int64(st, col + 4);
	a->mtime_ns = sqlite3_column_int64(st, col + 5);
	a->ctime_ns = sqlite3_column_int64(st, col + 6);
	return true;
}

int mst_db_put_object(struct mst_db *db, const struct mst_object *o)
{
	uint8_t blob[MST_MAX_REPLICAS * REPL_REC];
	sqlite3_stmt *st = db->put_obj;
	size_t n = encode_replicas(o, blob);
	int rc;

	sqlite3_bind_blob(st, 1, o->key, (int)o->key_len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)o->size);
	sqlite3_bind_int(st, 3, o->hard_pin ? 1 : 0);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)o->soft_pin_until);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)o->version);
	sqlite3_bind_blob(st, 6, blob, (int)n, SQLITE_STATIC);
	if (o->group)
		sqlite3_bind_blob(st, 7, o->group->id, (int)o->group->id_len,
				  SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 7);
	rc = step_done(db, st, "put object");
	if (rc || !o->attr) /* the API's objects: nothing more to write */
		return rc;
	sqlite3_bind_blob(db->put_attr, 1, o->key, (int)o->key_len,
			  SQLITE_STATIC);
	bind_attr(db->put_attr, 2, o->attr);
	return step_done(db, db->put_attr, "put attributes");
}

int mst_db_put_orphan(struct mst_db *db, const struct mst_object *o)
{
	uint8_t blob[MST_MAX_REPLICAS * REPL_REC];
	sqlite3_stmt *st = db->put_orphan;
	size_t n = encode_replicas(o, blob);

	sqlite3_bind_int64(st, 1, (sqlite3_int64)o->orphan_id);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)o->size);
	sqlite3_bind_blob(st, 3, blob, (int)n, SQLITE_STATIC);
	return step_done(db, st, "put orphan");
}

int mst_db_del_orphan(struct mst_db *db, uint64_t id)
{
	sqlite3_bind_int64(db->del_orphan, 1, (sqlite3_int64)id);
	return step_done(db, db->del_orphan, "delete orphan");
}

int mst_db_del_object(struct mst_db *db, const char *key, size_t len, bool attr)
{
	int rc;

	sqlite3_bind_blob(db->del_obj, 1, key, (int)len, SQLITE_STATIC);
	rc = step_done(db, db->del_obj, "delete object");
	if (rc || !attr)
		return rc;
	sqlite3_bind_blob(db->del_attr, 1, key, (int)len, SQLITE_STATIC);
	return step_done(db, db->del_attr, "delete attributes");
}

int mst_db_load(struct mst_db *db,
		int (*on_segment)(void *arg, const struct mst_db_segment *s),
		int (*on_object)(void *arg, const struct mst_db_object *o),
		int (*on_orphan)(void *arg, const struct mst_db_object *o),
		int (*on_count)(void *arg, uint64_t objects), void *arg)
{
	sqlite3_stmt *st;
	int rc = 0, step = SQLITE_DONE;

	if (prep(db,
		 "SELECT id,name,endpoint,protocol,host_id,size FROM "
		 "segments",
		 &st))
		return db_fail(db, "load segments");
	while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
		struct mst_db_segment s = {
			.id = sqlite3_column_blob(st, 0),
			.name = (const char *)sqlite3_column_text(st, 1),
			.endpoint = (const char *)sqlite3_column_text(st, 2),
			.protocol = (const char *)sqlite3_column_text(st, 3),
			.host_id = (const char *)sqlite3_column_text(st, 4),
			.size = (uint64_t)sqlite3_column_int64(st, 5),
		};
		if (sqlite3_column_bytes(st, 0) != MST_ID_LEN)
			continue;
		rc = on_segment(arg, &s);
	}
	if (!rc && step != SQLITE_DONE)
		rc = db_fail(db, "load segments");
	sqlite3_finalize(st);
	if (rc)
		return rc;
	if (on_count && !prep(db, "SELECT count(*) FROM objects", &st)) {
		if (sqlite3_step(st) == SQLITE_ROW)
			rc = on_count(arg,
				      (uint64_t)sqlite3_column_int64(st, 0));
		sqlite3_finalize(st);
		if (rc)
			return rc;
	}
	if (prep(db,
		 "SELECT o.key,o.size,o.flags,o.soft_pin_until,o.mtime,"
		 "o.replicas,o.grp," OBJ_ATTR_COLS
		 " FROM objects o LEFT JOIN attrs a"
		 " ON a.key=o.key",
		 &st))
		return db_fail(db, "load objects");
	while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
		struct mst_db_object o = { 0 };
		const uint8_t *b = sqlite3_column_blob(st, 5);
		int bl = sqlite3_column_bytes(st, 5);

		o.key = sqlite3_column_blob(st, 0);
		o.key_len = (size_t)sqlite3_column_bytes(st, 0);
		o.size = (uint64_t)sqlite3_column_int64(st, 1);
		o.hard_pin = sqlite3_column_int(st, 2) & 1;
		o.soft_pin_until = (uint64_t)sqlite3_column_int64(st, 3);
		o.version = mst_db_version(sqlite3_column_int64(st, 4));
		decode_replicas(b, bl, &o);
		o.group = sqlite3_column_blob(st, 6);
		o.group_len = o.group ? (size_t)sqlite3_column_bytes(st, 6) : 0;
		o.has_attr = column_attr(st, 7, &o.attr);
		if (!o.key)
			continue;
		rc = on_object(arg, &o);
	}
	if (!rc && step != SQLITE_DONE)
		rc = db_fail(db, "load objects");
	sqlite3_finalize(st);
	if (rc)
		return rc;
	if (prep(db, "SELECT id,size,replicas FROM orphans", &st))
		return db_fail(db, "load orphans");
	while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
		struct mst_db_object o = { 0 };

		o.orphan_id = (uint64_t)sqlite3_column_int64(st, 0);
		o.size = (uint64_t)sqlite3_column_int64(st, 1);
		decode_replicas(sqlite3_column_blob(st, 2),
				sqlite3_column_bytes(st, 2), &o);
		rc = on_orphan(arg, &o);
	}
	if (!rc && step != SQLITE_DONE)
		rc = db_fail(db, "load orphans");
	sqlite3_finalize(st);
	return rc;
}

/* Smallest string greater than every string that starts with s (false
 * when none: s is all 0xff). */
static bool prefix_successor(char *s, size_t *len)
{
	while (*len) {
		unsigned char c = (unsigned char)s[*len - 1];
		if (c != 0xff) {
			s[*len - 1] = (char)(c + 1);
			return true;
		}
		(*len)--;
	}
	return false;
}

static bool has_prefix(const char *k, size_t kl, const char *p, size_t pl)
{
	return kl >= pl && !memcmp(k, p, pl);
}

static int cmp_bytes(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	return c ? c : (al > bl) - (al < bl);
}

static const char *find_delim(const char *s, size_t len, const char *d,
			      size_t dl)
{
	if (!dl || len < dl)
		return NULL;
	return memmem(s, len, d, dl);
}

/* The first row of st (objects or dirs seek) at or after bound: its name;
 * NULL at the end or on error (*rc). */
/* *buf holds at least need bytes (growing it, with room to spare): 0, or
 * MC_STORE_INTERNAL_ERROR with *buf unchanged. */
static int room(char **buf, size_t *cap, size_t need)
{
	char *nb;

	if (need <= *cap)
		return 0;
	nb = realloc(*buf, need + 64);
	if (!nb)
		return MC_STORE_INTERNAL_ERROR;
	*buf = nb;
	*cap = need + 64;
	return 0;
}

static const char *seek_row(struct mst_db *db, sqlite3_stmt *st,
			    const char *bound, size_t blen, size_t *len,
			    int *rc)
{
	int s;

	sqlite3_reset(st);
	sqlite3_bind_blob(st, 1, bound, (int)blen, SQLITE_TRANSIENT);
	s = sqlite3_step(st);
	if (s == SQLITE_ROW) {
		*len = (size_t)sqlite3_column_bytes(st, 0);
		return sqlite3_column_blob(st, 0);
	}
	if (s != SQLITE_DONE)
		*rc = db_fail(db, "list");
	return NULL;
}

int mst_db_list(struct mst_db *db, const char *prefix, size_t prefix_len,
		const char *delim, size_t delim_len, const char *start_after,
		size_t start_len, unsigned limit, bool dirs,
		void (*fn)(void *arg, const struct mst_db_entry *e), void *arg,
		bool *truncated)
{
	size_t cap = prefix_len + start_len + 64, blen;
	char *bound = malloc(cap);
	unsigned count = 0;
	int rc = 0;

	*truncated = false;
	if (!bound)
		return MC_STORE_INTERNAL_ERROR;
	/* Start at the prefix, or just after the cursor when it is later. */
	if (start_len &&
	    cmp_bytes(start_after, start_len, prefix, prefix_len) >= 0) {
		memcpy(bound, start_after, start_len);
		bound[start_len] = 0;
		blen = start_len + 1;
	} else {
		memcpy(bound, prefix, prefix_len);
		blen = prefix_len;
	}
	/* Merge the keys and (with dirs) the directory records, in order. */
	for (;;) {
		size_t kl = 0, dl = 0, nl;
		const char *k = seek_row(db, db->seek, bound, blen, &kl, &rc);
		const char *dk = dirs && !rc ? seek_row(db, db->dir_seek, bound,
							blen, &dl, &rc) :
					       NULL;
		mst_attr_t attr;
		bool is_dir;

		if (rc)
			break;
		if (k && !has_prefix(k, kl, prefix, prefix_len))
			k = NULL;
		if (dk && !has_prefix(dk, dl, prefix, prefix_len))
			dk = NULL;
		if (!k && !dk)
			break;
		is_dir = dk && (!k || cmp_bytes(dk, dl, k, kl) < 0);
		if (is_dir) {
			k = dk;
			kl = dl;
		}
		const char *d = find_delim(k + prefix_len, kl - prefix_len,
					   delim, delim_len);
		struct mst_db_entry e = { .name = k, .name_len = kl };

		nl = kl;
		if (d) {
			nl = (size_t)(d - k) + delim_len;
			e.name_len = nl;
			e.is_prefix = true;
			/* A record of exactly this directory: its attributes */
			if (is_dir && nl == kl &&
			    column_attr(db->dir_seek, 1, &attr))
				e.attr = &attr;
		} else if (is_dir) {
			e.is_prefix = true;
			if (column_attr(db->dir_seek, 1, &attr))
				e.attr = &attr;
		} else {
			e.size = (uint64_t)sqlite3_column_int64(db->seek, 1);
			e.version = mst_db_version(
				sqlite3_column_int64(db->seek, 2));
			if (column_attr(db->seek, 3, &attr))
				e.attr = &attr;
		}
		/* The listed directory's own record is not an entry of it. */
		bool skip = (is_dir && kl == prefix_len) ||
			    (start_len &&
			     cmp_bytes(k, nl, start_after, start_len) <= 0);
		if (!skip && count == limit) {
			*truncated = true;
			break;
		}
		if (!skip) {
			fn(arg, &e);
			count++;
		}
		/* Next bound: past this key, or past the whole prefix. */
		rc = room(&bound, &cap, nl + 1);
		if (rc)
			break;
		memcpy(bound, k, nl);
		blen = nl;
		if (d) {
			if (!prefix_successor(bound, &blen))
				break;
		} else {
			bound[blen++] = 0;
		}
	}
	sqlite3_reset(db->seek);
	sqlite3_clear_bindings(db->seek);
	sqlite3_reset(db->dir_seek);
	sqlite3_clear_bindings(db->dir_seek);
	free(bound);
	return rc;
}

/* ---- directory records ---------------------------------------------------- */

int mst_db_dir_get(struct mst_db *db, const char *path, size_t len,
		   mst_attr_t *a)
{
	sqlite3_stmt *st = db->dir_get;
	int s, rc = 0;

	sqlite3_bind_blob(st, 1, path, (int)len, SQLITE_STATIC);
	s = sqlite3_step(st);
	if (s == SQLITE_ROW) {
		rc = 1;
		if (a && !column_attr(st, 1, a))
			memset(a, 0, sizeof(*a));
	} else if (s != SQLITE_DONE) {
		rc = db_fail(db, "get directory");
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc;
}

int mst_db_dir_put(struct mst_db *db, const char *path, size_t len,
		   const mst_attr_t *a)
{
	sqlite3_bind_blob(db->dir_put, 1, path, (int)len, SQLITE_STATIC);
	bind_attr(db->dir_put, 2, a);
	return step_done(db, db->dir_put, "put directory");
}

int mst_db_dir_del(struct mst_db *db, const char *path, size_t len)
{
	sqlite3_bind_blob(db->dir_del, 1, path, (int)len, SQLITE_STATIC);
	return step_done(db, db->dir_del, "delete directory");
}

int mst_db_dir_touch(struct mst_db *db, const char *path, size_t len,
		     int64_t now_ns)
{
	sqlite3_bind_blob(db->dir_touch, 1, path, (int)len, SQLITE_STATIC);
	sqlite3_bind_int64(db->dir_touch, 2, now_ns);
	return step_done(db, db->dir_touch, "touch directory");
}

/* The first name of st's table under prefix, prefix itself only with
 * self: 1 (with *name, *len valid until the next call on st), 0, or a
 * code. */
static int first_under(struct mst_db *db, sqlite3_stmt *st, const char *prefix,
		       size_t plen, bool self, const char **name, size_t *len)
{
	char *bound = malloc(plen + 1);
	const char *k;
	size_t kl = 0;
	int rc = 0;

	if (!bound)
		return MC_STORE_INTERNAL_ERROR;
	memcpy(bound, prefix, plen);
	bound[plen] = 0; /* past prefix itself */
	k = seek_row(db, st, bound, self ? plen : plen + 1, &kl, &rc);
	free(bound);
	if (!rc && k && has_prefix(k, kl, prefix, plen)) {
		*name = k;
		*len = kl;
		return 1;
	}
	return rc;
}

int mst_db_has_under(struct mst_db *db, const char *prefix, size_t plen)
{
	const char *n;
	size_t l;
	/* A key equal to prefix ("d/") is an entry of the directory (the
	 * mount's d/%00, listed by mst_db_list); a record equal to it is
	 * the directory's own. */
	int rc = first_under(db, db->seek, prefix, plen, true, &n, &l);

	if (!rc)
		rc = first_under(db, db->dir_seek, prefix, plen, false, &n, &l);
	sqlite3_reset(db->seek);
	sqlite3_reset(db->dir_seek);
	return rc;
}

int mst_db_count_objects(struct mst_db *db, struct mst_db_count *c,
			 unsigned step)
{
	sqlite3_stmt *st = NULL;
	unsigned got = 0;
	int s, rc = 0;

	if (c->done)
		return 0;
	if (sqlite3_prepare_v2(db->h,
			       "SELECT key FROM objects WHERE key > ?1 "
			       "ORDER BY key LIMIT ?2",
			       -1, &st, NULL) != SQLITE_OK)
		return db_fail(db, "count objects");
	/* A copy: c->last changes as rows are counted. */
	sqlite3_bind_blob(st, 1, c->last ? c->last : "", (int)c->last_len,
			  SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 2, step);
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		const void *k = sqlite3_column_blob(st, 0);
		size_t kl = (size_t)sqlite3_column_bytes(st, 0);

		/* A row's columns last only until the next step. */
		rc = room(&c->last, &c->last_cap, kl);
		if (rc)
			break;
		memcpy(c->last, k, kl);
		c->last_len = kl;
		got++;
	}
	if (!rc && s != SQLITE_ROW && s != SQLITE_DONE)
		rc = db_fail(db, "count objects");
	c->n += got;
	c->done = !rc && got < step;
	sqlite3_finalize(st);
	return rc;
}

void mst_db_count_free(struct mst_db_count *c)
{
	free(c->last);
	memset(c, 0, sizeof(*c));
}

int mst_db_subdirs(struct mst_db *db, const char *prefix, size_t plen,
		   uint32_t *n)
{
	sqlite3_stmt *st = db->dir_seek;
	size_t cap = plen + 64, clen = plen + 1;
	char *cur = malloc(cap);
	const char *k;
	size_t kl;
	int rc = 0;

	*n = 0;
	if (!cur)
		return MC_STORE_INTERNAL_ERROR;
	memcpy(cur, prefix, plen);
	cur[plen] = 0; /* past prefix's own record */
	for (;;) {
		k = seek_row(db, st, cur, clen, &kl, &rc);
		if (rc || !k || !has_prefix(k, kl, prefix, plen))
			break;
		/* k is prefix + "a/..." : count "a/" once, go past "a/". */
		const char *slash = memchr(k + plen, '/', kl - plen);
		size_t cl = slash ? (size_t)(slash - k) + 1 : kl;
		rc = room(&cur, &cap, cl + 1);
		if (rc)
			break;
		memcpy(cur, k, cl);
		if (slash) {
			(*n)++;
			cur[cl - 1] = '/' + 1; /* after every path under it */
		} else {
			cur[cl] = 0; /* a record without '/': just after it */
		}
		clen = slash ? cl : cl + 1;
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	free(cur);
	return rc;
}

int mst_db_each_under(struct mst_db *db, bool dirs, const char *prefix,
		      size_t plen,
		      int (*fn)(void *arg, const char *name, size_t len,
				const mst_attr_t *a),
		      void *arg)
{
	sqlite3_stmt *st = dirs ? db->dir_seek : db->seek;
	int acol = dirs ? 1 : 3;
	size_t cap = plen + 64;
	char *cur = malloc(cap);
	const char *k;
	size_t kl, clen = plen;
	int rc = 0;

	if (!cur)
		return MC_STORE_INTERNAL_ERROR;
	memcpy(cur, prefix, plen);
	for (;;) {
		mst_attr_t a;
		k = seek_row(db, st, cur, clen, &kl, &rc);
		if (rc || !k || !has_prefix(k, kl, prefix, plen))
			break;
		rc = room(&cur, &cap, kl + 1);
		if (rc)
			break;
		memcpy(cur, k, kl);
		cur[kl] = 0;
		clen = kl + 1;
		rc = fn(arg, k, kl, column_attr(st, acol, &a) ? &a : NULL);
		if (rc)
			break;
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	free(cur);
	return rc;
}

/* ---- checkpoints (schema 5) --------------------------------------------- */

/* Step and finalize a statement prepared for one call (checkpoint
 * changes are rare next to puts). */
static int run_sql(struct mst_db *db, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st);

	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : db_fail(db, what);
}

int mst_db_ckpt_put(struct mst_db *db, uint64_t id, const char *name,
		    const void *rec, size_t len, int64_t created_ns)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db->h,
			       "INSERT OR REPLACE INTO checkpoints "
			       "VALUES(?1,?2,?3,?4)",
			       -1, &st, NULL))
		return db_fail(db, "put checkpoint");
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	sqlite3_bind_blob(st, 2, name, (int)strlen(name), SQLITE_STATIC);
	sqlite3_bind_blob(st, 3, rec, (int)len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, created_ns);
	rc = run_sql(db, st, "put checkpoint");
	if (rc)
		return rc;
	if (sqlite3_prepare_v2(db->h,
			       "INSERT OR REPLACE INTO meta "
			       "VALUES('ckpt_id', ?1)",
			       -1, &st, NULL))
		return db_fail(db, "put checkpoint id");
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	return run_sql(db, st, "put checkpoint id");
}

int mst_db_ckpt_del(struct mst_db *db, uint64_t id)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db->h, "DELETE FROM checkpoints WHERE id=?1", -1,
			       &st, NULL))
		return db_fail(db, "delete checkpoint");
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	rc = run_sql(db, st, "delete checkpoint");
	return rc ? rc : mst_db_holder_del(db, id, NULL);
}

int mst_db_holder_put(struct mst_db *db, uint64_t ckpt, const uint8_t *client,
		      const char *endpoint, bool publisher,
		      const uint8_t *bitmap, size_t len)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(db->h,
			       "INSERT OR REPLACE INTO ckpt_holders "
			       "VALUES(?1,?2,?3,?4,?5)",
			       -1, &st, NULL))
		return db_fail(db, "put checkpoint holder");
	sqlite3_bind_int64(st, 1, (sqlite3_int64)ckpt);
	sqlite3_bind_blob(st, 2, client, MST_ID_LEN, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, endpoint, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 4, publisher);
	sqlite3_bind_blob(st, 5, len ? (const void *)bitmap : "", (int)len,
			  SQLITE_STATIC);
	return run_sql(db, st, "put checkpoint holder");
}

int mst_db_holder_del(struct mst_db *db, uint64_t ckpt, const uint8_t *client)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(db->h,
			       client ? "DELETE FROM ckpt_holders WHERE "
					"ckpt=?1 AND client=?2" :
					"DELETE FROM ckpt_holders WHERE "
					"ckpt=?1",
			       -1, &st, NULL))
		return db_fail(db, "delete checkpoint holder");
	sqlite3_bind_int64(st, 1, (sqlite3_int64)ckpt);
	if (client)
		sqlite3_bind_blob(st, 2, client, MST_ID_LEN, SQLITE_STATIC);
	return run_sql(db, st, "delete checkpoint holder");
}

int mst_db_ckpt_load(struct mst_db *db, uint64_t *last_id,
		     int (*on_ckpt)(void *arg, uint64_t id, const void *rec,
				    size_t len),
		     int (*on_holder)(void *arg, const struct mst_db_holder *h),
		     void *arg)
{
	sqlite3_stmt *st;
	int rc = 0, step = SQLITE_DONE;

	*last_id = 0;
	if (prep(db,
		 "SELECT max(coalesce((SELECT v FROM meta WHERE k='ckpt_id'),"
		 "0), coalesce((SELECT max(id) FROM checkpoints),0))",
		 &st))
		return db_fail(db, "load checkpoint id");
	if (sqlite3_step(st) == SQLITE_ROW)
		*last_id = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (prep(db, "SELECT id,rec FROM checkpoints ORDER BY id", &st))
		return db_fail(db, "load checkpoints");
	while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW)
		rc = on_ckpt(arg, (uint64_t)sqlite3_column_int64(st, 0),
			     sqlite3_column_blob(st, 1),
			     (size_t)sqlite3_column_bytes(st, 1));
	if (!rc && step != SQLITE_DONE)
		rc = db_fail(db, "load checkpoints");
	sqlite3_finalize(st);
	if (rc)
		return rc;
	if (prep(db,
		 "SELECT ckpt,client,endpoint,publisher,bitmap FROM "
		 "ckpt_holders",
		 &st))
		return db_fail(db, "load checkpoint holders");
	while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
		struct mst_db_holder h = {
			.ckpt = (uint64_t)sqlite3_column_int64(st, 0),
			.client = sqlite3_column_blob(st, 1),
			.endpoint = (const char *)sqlite3_column_text(st, 2),
			.publisher = sqlite3_column_int(st, 3) != 0,
			.bitmap = sqlite3_column_blob(st, 4),
			.len = (size_t)sqlite3_column_bytes(st, 4),
		};
		if (sqlite3_column_bytes(st, 1) != MST_ID_LEN || !h.endpoint)
			continue;
		rc = on_holder(arg, &h);
	}
	if (!rc && step != SQLITE_DONE)
		rc = db_fail(db, "load checkpoint holders");
	sqlite3_finalize(st);
	return rc;
}
