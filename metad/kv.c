/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Metadata entries: mc_map in memory, written through to sqlite when the
 * store is durable. A write commits to sqlite first and changes the map
 * only after the commit succeeded, so memory never shows what disk lacks,
 * with one exception: a write sqlite refuses (a full disk, an I/O error)
 * still changes memory, and its key is kept in `pending` and logged once.
 * The entries are the transfer engines' addresses and segment
 * descriptors, which their owners hold anyway and upstream keeps in
 * memory only; refusing them would keep new clients out of a pool whose
 * reads all work, for the sake of a record that only serves a restart.
 * Every later write first tries to write the pending keys' current state
 * (one transaction); once that commits, the store is durable again.
 *
 * Locking: write_mu serializes writers for the whole change (check, commit,
 * map update); `lock` guards the map and is held for writing only while the
 * map itself changes, so readers never wait for a commit or an fsync.
 * Lock order: write_mu, then lock.
 *
 * sqlite's automatic WAL checkpoint runs inside the commit that crosses
 * its threshold, so it delays other writers, never readers. (A background
 * PASSIVE checkpointer was tried: under steady writes it never caught up,
 * the WAL only grew, and fsynced commits got twice as slow.)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "kv.h"
#include "mc_log.h"
#include "mc_map.h"
#include "mooncake/mc_err.h"

#define SCHEMA_VERSION 1

struct metad_kv {
	pthread_mutex_t write_mu;
	pthread_rwlock_t lock;
	struct mc_map *map;
	sqlite3 *db; /* NULL: memory only */
	sqlite3_stmt *put_stmt, *del_stmt;
	int lock_fd; /* flock()ed: one process per store file */
	/* Under write_mu: the keys whose state sqlite lacks, and whether
	 * writing them failed (flush_pending). */
	struct mc_map *pending;
	bool pending_failed;
};

static int db_fail(struct metad_kv *kv, const char *what, char *err,
		   size_t errlen)
{
	if (err)
		snprintf(err, errlen, "metadata store: %s: %s", what,
			 kv->db ? sqlite3_errmsg(kv->db) : "cannot open");
	return MC_EDB;
}

static int db_exec(sqlite3 *db, const char *sql)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 :
								      MC_EDB;
}

static int load_entries(struct metad_kv *kv, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	int rc = 0, step;

	if (sqlite3_prepare_v2(kv->db, "SELECT key, value FROM metad_entries",
			       -1, &st, NULL) != SQLITE_OK)
		return db_fail(kv, "prepare load", err, errlen);
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		const void *k = sqlite3_column_blob(st, 0);
		size_t kl = (size_t)sqlite3_column_bytes(st, 0);
		const void *v = sqlite3_column_blob(st, 1);
		size_t vl = (size_t)sqlite3_column_bytes(st, 1);

		rc = mc_map_put(kv->map, k ? k : "", kl, v ? v : "", vl);
		if (rc)
			break;
	}
	if (!rc && step != SQLITE_DONE)
		rc = db_fail(kv, "load entries", err, errlen);
	sqlite3_finalize(st);
	return rc;
}

static int check_schema(struct metad_kv *kv, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	int rc = 0, version = -1;

	if (db_exec(kv->db, "CREATE TABLE IF NOT EXISTS metad_schema("
			    " id INTEGER PRIMARY KEY CHECK (id = 1),"
			    " version INTEGER NOT NULL);"
			    "INSERT OR IGNORE INTO metad_schema VALUES (1, 1);"
			    "CREATE TABLE IF NOT EXISTS metad_entries("
			    " key BLOB PRIMARY KEY, value BLOB NOT NULL)"
			    " WITHOUT ROWID;"))
		return db_fail(kv, "create schema", err, errlen);
	if (sqlite3_prepare_v2(kv->db, "SELECT version FROM metad_schema", -1,
			       &st, NULL) != SQLITE_OK)
		return db_fail(kv, "read schema", err, errlen);
	if (sqlite3_step(st) == SQLITE_ROW)
		version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (version != SCHEMA_VERSION) {
		snprintf(err, errlen,
			 "metadata store: schema version %d, this build "
			 "reads version %d",
			 version, SCHEMA_VERSION);
		rc = MC_EDB;
	}
	return rc;
}

static int open_sqlite(struct metad_kv *kv, const char *path, bool full_sync,
		       char *err, size_t errlen)
{
	int rc;

	/* 0600: it holds the engines' shared-memory tags (mc_shm_tag). */
	kv->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (kv->lock_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "metadata store %s: %s", path,
			 mc_strerror(rc));
		return rc;
	}
	if (flock(kv->lock_fd, LOCK_EX | LOCK_NB)) {
		snprintf(err, errlen,
			 "metadata store %s is in use by another process",
			 path);
		return -EBUSY;
	}
	if (sqlite3_open_v2(path, &kv->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				    SQLITE_OPEN_FULLMUTEX,
			    NULL) != SQLITE_OK)
		return db_fail(kv, path, err, errlen);
	sqlite3_busy_timeout(kv->db, 5000);
	if (db_exec(kv->db, "PRAGMA journal_mode=WAL") ||
	    db_exec(kv->db, full_sync ? "PRAGMA synchronous=FULL" :
					"PRAGMA synchronous=NORMAL")) {
		snprintf(err, errlen,
			 "metadata store %s: set WAL mode (is it an sqlite "
			 "file?): %s",
			 path, sqlite3_errmsg(kv->db));
		return MC_EDB;
	}
	rc = check_schema(kv, err, errlen);
	if (rc)
		return rc;
	if (sqlite3_prepare_v2(kv->db,
			       "INSERT OR REPLACE INTO metad_entries(key, value)"
			       " VALUES (?1, ?2)",
			       -1, &kv->put_stmt, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(kv->db,
			       "DELETE FROM metad_entries WHERE key = ?1", -1,
			       &kv->del_stmt, NULL) != SQLITE_OK)
		return db_fail(kv, "prepare statements", err, errlen);
	return load_entries(kv, err, errlen);
}

int metad_kv_open(const char *store, bool full_sync, struct metad_kv **out,
		  char *err, size_t errlen)
{
	struct metad_kv *kv = calloc(1, sizeof(*kv));
	int rc;

	if (!kv)
		return -ENOMEM;
	kv->lock_fd = -1;
	pthread_mutex_init(&kv->write_mu, NULL);
	pthread_rwlock_init(&kv->lock, NULL);
	rc = mc_map_create(&kv->map);
	if (!rc)
		rc = mc_map_create(&kv->pending);
	if (rc)
		goto err_close;
	if (store && *store && strcmp(store, "memory") != 0) {
		if (strncmp(store, "sqlite:", 7) != 0 || !store[7]) {
			snprintf(err, errlen,
				 "store '%s': expected 'memory' or "
				 "'sqlite:PATH'",
				 store);
			rc = MC_EBADCONFIG;
			goto err_close;
		}
		rc = open_sqlite(kv, store + 7, full_sync, err, errlen);
		if (rc)
			goto err_close;
	}
	*out = kv;
	return 0;

err_close:
	metad_kv_close(kv);
	return rc;
}

void metad_kv_close(struct metad_kv *kv)
{
	if (!kv)
		return;
	if (kv->pending && mc_map_count(kv->pending))
		mc_log_warn("metad",
			    "%zu metadata entries were never written to the "
			    "store: they are lost",
			    mc_map_count(kv->pending));
	mc_map_destroy(kv->pending);
	sqlite3_finalize(kv->put_stmt);
	sqlite3_finalize(kv->del_stmt);
	if (kv->db)
		sqlite3_close(kv->db);
	if (kv->lock_fd >= 0)
		close(kv->lock_fd);
	mc_map_destroy(kv->map);
	pthread_rwlock_destroy(&kv->lock);
	pthread_mutex_destroy(&kv->write_mu);
	free(kv);
}

int metad_kv_get(struct metad_kv *kv, const char *key, size_t key_len,
		 char **val, size_t *val_len)
{
	const struct mc_map_entry *e;
	int rc = -ENOENT;

	pthread_rwlock_rdlock(&kv->lock);
	e = mc_map_get(kv->map, key, key_len);
	if (e) {
		*val = malloc(e->val_len + 1);
		if (*val) {
			memcpy(*val, e->val, e->val_len + 1);
			*val_len = e->val_len;
			rc = 0;
		} else {
			rc = -ENOMEM;
		}
	}
	pthread_rwlock_unlock(&kv->lock);
	return rc;
}

static int db_put(struct metad_kv *kv, const char *key, size_t key_len,
		  const char *val, size_t val_len)
{
	int rc;

	if (!kv->db)
		return 0;
	sqlite3_bind_blob(kv->put_stmt, 1, key, (int)key_len, SQLITE_STATIC);
	sqlite3_bind_blob(kv->put_stmt, 2, val_len ? val : "", (int)val_len,
			  SQLITE_STATIC);
	rc = sqlite3_step(kv->put_stmt) == SQLITE_DONE ? 0 : MC_EDB;
	sqlite3_reset(kv->put_stmt);
	sqlite3_clear_bindings(kv->put_stmt);
	return rc;
}

static int db_del(struct metad_kv *kv, const char *key, size_t key_len)
{
	int rc;

	if (!kv->db)
		return 0;
	sqlite3_bind_blob(kv->del_stmt, 1, key, (int)key_len, SQLITE_STATIC);
	rc = sqlite3_step(kv->del_stmt) == SQLITE_DONE ? 0 : MC_EDB;
	sqlite3_reset(kv->del_stmt);
	sqlite3_clear_bindings(kv->del_stmt);
	return rc;
}

/* Write one pending key's state: its value in the map, or its absence. */
static void flush_one(const struct mc_map_entry *p, void *arg)
{
	struct metad_kv *kv = arg;
	const struct mc_map_entry *e;

	if (kv->pending_failed)
		return;
	e = mc_map_get(kv->map, p->key, p->key_len);
	if (e ? db_put(kv, p->key, p->key_len, e->val, e->val_len) :
		db_del(kv, p->key, p->key_len))
		kv->pending_failed = true;
}

/* Under write_mu: write every pending key in one transaction; 0 when
 * nothing is pending any more. */
static int flush_pending(struct metad_kv *kv)
{
	size_t n = mc_map_count(kv->pending);
	struct mc_map *empty;

	if (!n)
		return 0;
	if (mc_map_create(&empty))
		return -ENOMEM;
	kv->pending_failed = db_exec(kv->db, "BEGIN IMMEDIATE") != 0;
	mc_map_foreach(kv->pending, flush_one, kv);
	if (kv->pending_failed || db_exec(kv->db, "COMMIT")) {
		(void)db_exec(kv->db, "ROLLBACK");
		mc_map_destroy(empty);
		return MC_EDB;
	}
	mc_map_destroy(kv->pending);
	kv->pending = empty;
	mc_log_info("metad",
		    "metadata store writable again: %zu entries kept in "
		    "memory meanwhile are written",
		    n);
	return 0;
}

/*
 * Under write_mu: write a change of key (a new value, or its removal)
 * through to sqlite. When sqlite refuses it, or still refuses the pending
 * keys, the key joins them and the caller changes memory only: 0, or
 * -ENOMEM when even that cannot be recorded.
 */
static int write_through(struct metad_kv *kv, const char *key, size_t key_len,
			 const char *val, size_t val_len, bool remove)
{
	int rc;

	if (!kv->db)
		return 0;
	rc = flush_pending(kv);
	if (!rc)
		rc = remove ? db_del(kv, key, key_len) :
			      db_put(kv, key, key_len, val, val_len);
	if (!rc || rc == -ENOMEM)
		return rc;
	if (!mc_map_count(kv->pending)) /* this failure starts it */
		mc_log_warn(
			"metad",
			"metadata store cannot be written (%s): keeping "
			"entries in memory, where they are served but would "
			"not survive a restart, until it can",
			sqlite3_errmsg(kv->db));
	return mc_map_put(kv->pending, key, key_len, "", 0);
}

int metad_kv_put(struct metad_kv *kv, const char *key, size_t key_len,
		 const char *val, size_t val_len, bool exclusive,
		 enum metad_put_outcome *outcome)
{
	const struct mc_map_entry *e;
	int rc = 0;

	/* Only writers change the map, so under write_mu it reads safely. */
	pthread_mutex_lock(&kv->write_mu);
	e = mc_map_get(kv->map, key, key_len);
	if (e && e->val_len == val_len && !memcmp(e->val, val, val_len)) {
		*outcome = METAD_PUT_UNCHANGED;
		goto out;
	}
	if (e && exclusive) {
		*outcome = METAD_PUT_CONFLICT;
		goto out;
	}
	rc = write_through(kv, key, key_len, val, val_len, false);
	if (rc)
		goto out;
	pthread_rwlock_wrlock(&kv->lock);
	rc = mc_map_put(kv->map, key, key_len, val, val_len);
	pthread_rwlock_unlock(&kv->lock);
	if (rc && kv->db) {
		/* Memory failed after disk took it: put disk back (or leave
		 * the key pending, which writes what memory holds). */
		(void)write_through(kv, key, key_len, e ? e->val : NULL,
				    e ? e->val_len : 0, !e);
	}
	*outcome = METAD_PUT_STORED;
out:
	pthread_mutex_unlock(&kv->write_mu);
	return rc;
}

int metad_kv_del(struct metad_kv *kv, const char *key, size_t key_len)
{
	int rc;

	pthread_mutex_lock(&kv->write_mu);
	if (!mc_map_get(kv->map, key, key_len)) {
		rc = -ENOENT;
		goto out;
	}
	rc = write_through(kv, key, key_len, NULL, 0, true);
	if (rc)
		goto out;
	pthread_rwlock_wrlock(&kv->lock);
	rc = mc_map_del(kv->map, key, key_len);
	pthread_rwlock_unlock(&kv->lock);
out:
	pthread_mutex_unlock(&kv->write_mu);
	return rc;
}

size_t metad_kv_count(struct metad_kv *kv)
{
	size_t n;

	pthread_rwlock_rdlock(&kv->lock);
	n = mc_map_count(kv->map);
	pthread_rwlock_unlock(&kv->lock);
	return n;
}
