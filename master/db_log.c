/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The op log over the master's record (db.h, "The op log"): each
 * transaction's changes captured as a patchset (db_rec.c) and handed to
 * the HA layer before COMMIT; a standby applies them as they come, in
 * order.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db_int.h"
#include "mc_crc32c.h"
#include "mc_le.h"
#include "mc_log.h"
#include "mooncake/mc_err.h"
#include "mst_util.h"

const char *const mst_db_tables[MST_DB_TABLES] = {
	"meta",	   "segments",	  "objects",	  "attrs", "dirs",
	"orphans", "checkpoints", "ckpt_holders", "ops",
};

int mst_db_log_load(struct mst_db *db)
{
	sqlite3_stmt *st;
	int rc;

	/* The tables' columns, which op log entries must match, and their
	 * keys (what a captured DELETE names). */
	rc = sqlite3_prepare_v2(db->h,
				"SELECT cid,pk FROM pragma_table_info(?1)", -1,
				&st, NULL);
	if (rc != SQLITE_OK)
		return rc;
	for (size_t i = 0; i < MST_DB_TABLES; i++) {
		sqlite3_bind_text(st, 1, mst_db_tables[i], -1, SQLITE_STATIC);
		db->ncols[i] = 0;
		while (sqlite3_step(st) == SQLITE_ROW) {
			int cid = sqlite3_column_int(st, 0);
			if (cid < 0 || cid >= MST_DB_MAX_COLS) {
				sqlite3_finalize(st);
				return SQLITE_ERROR;
			}
			db->pk[i][cid] = (uint8_t)sqlite3_column_int(st, 1);
			db->ncols[i]++;
		}
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);

	rc = sqlite3_prepare_v3(db->h, "SELECT v FROM meta WHERE k='ha_seq'",
				-1, 0, &st, NULL);
	if (rc != SQLITE_OK)
		return rc;
	if (sqlite3_step(st) == SQLITE_ROW)
		db->log_seq = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	/* An UPDATE of v changes one page; INSERT OR REPLACE would move the
	 * row and change meta's index too (two WAL frames a transaction). */
	if (sqlite3_prepare_v3(db->h, "UPDATE meta SET v=?1 WHERE k='ha_seq'",
			       -1, SQLITE_PREPARE_PERSISTENT, &db->log_set_seq,
			       NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(
		    db->h, "INSERT OR REPLACE INTO meta VALUES('ha_seq', ?1)",
		    -1, SQLITE_PREPARE_PERSISTENT, &db->log_ins_seq,
		    NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(db->h, "INSERT OR IGNORE INTO ops VALUES(?1,?2)",
			       -1, SQLITE_PREPARE_PERSISTENT, &db->op_put,
			       NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(db->h, "SELECT 1 FROM ops WHERE id=?1", -1,
			       SQLITE_PREPARE_PERSISTENT, &db->op_get,
			       NULL) != SQLITE_OK)
		return SQLITE_ERROR;
	return sqlite3_prepare_v3(db->h, "DELETE FROM ops WHERE t<?1", -1,
				  SQLITE_PREPARE_PERSISTENT, &db->op_prune,
				  NULL);
}

bool mst_db_logged(const struct mst_db *db)
{
	return db && db->log_ops;
}

void mst_db_set_op(struct mst_db *db, uint64_t id)
{
	db->op_id = db->log_ops ? id : 0;
}

static int step1(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc;
}

int mst_db_op_applied(struct mst_db *db, uint64_t id)
{
	int rc;

	sqlite3_bind_int64(db->op_get, 1, (sqlite3_int64)id);
	rc = step1(db->op_get);
	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0 : MC_STORE_INTERNAL_ERROR;
}

int mst_db_ops_prune(struct mst_db *db, int64_t before)
{
	int rc = mst_db_begin(db);

	if (rc)
		return rc;
	sqlite3_bind_int64(db->op_prune, 1, before);
	if (step1(db->op_prune) != SQLITE_DONE) {
		mst_db_rollback(db);
		return MC_STORE_INTERNAL_ERROR;
	}
	return mst_db_commit(db);
}

void mst_db_log_close(struct mst_db *db)
{
	mst_db_log_end(db);
	mst_db_rec_free(db);
	sqlite3_finalize(db->log_set_seq);
	sqlite3_finalize(db->log_ins_seq);
	sqlite3_finalize(db->op_put);
	sqlite3_finalize(db->op_get);
	sqlite3_finalize(db->op_prune);
	db->log_set_seq = db->log_ins_seq = NULL;
	db->op_put = db->op_get = db->op_prune = NULL;
}

void mst_db_set_log(struct mst_db *db, const struct mst_db_log_ops *ops,
		    void *arg)
{
	db->log_ops = ops;
	db->log_arg = arg;
}

int mst_db_log_wait(struct mst_db *db, uint64_t seq)
{
	return db->log_ops && seq ? db->log_ops->wait(db->log_arg, seq) : 0;
}

int mst_db_log_wait_logged(struct mst_db *db, uint64_t seq)
{
	return db->log_ops && seq ? db->log_ops->wait_logged(db->log_arg, seq) :
				    0;
}

uint64_t mst_db_meta_u64(struct mst_db *db, const char *k)
{
	sqlite3_stmt *st;
	uint64_t e = 0;

	if (sqlite3_prepare_v2(db->h, "SELECT v FROM meta WHERE k=?1", -1, &st,
			       NULL) != SQLITE_OK)
		return 0;
	sqlite3_bind_text(st, 1, k, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		e = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return e;
}

int mst_db_set_meta_u64(struct mst_db *db, const char *k, uint64_t epoch)
{
	sqlite3_stmt *st;
	int rc;

	if (db->log_ops)
		return -EBUSY; /* it would go into the log */
	rc = sqlite3_prepare_v2(db->h,
				epoch ? "INSERT OR REPLACE INTO meta "
					"VALUES(?1, ?2)" :
					"DELETE FROM meta WHERE k=?1",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		return MC_EDB;
	sqlite3_bind_text(st, 1, k, -1, SQLITE_STATIC);
	if (epoch)
		sqlite3_bind_int64(st, 2, (sqlite3_int64)epoch);
	rc = step1(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : MC_EDB;
}

uint64_t mst_db_ha_led(struct mst_db *db)
{
	return mst_db_meta_u64(db, "ha_led");
}

int mst_db_set_ha_led(struct mst_db *db, uint64_t epoch)
{
	return mst_db_set_meta_u64(db, "ha_led", epoch);
}

uint64_t mst_db_log_seq(const struct mst_db *db)
{
	return db->log_seq;
}

int mst_db_log_begin(struct mst_db *db)
{
	mst_db_log_end(db);
	mst_db_rec_begin(db);
	return 0;
}

void mst_db_log_end(struct mst_db *db)
{
	mst_db_rec_end(db);
	db->log_pending = 0;
	free(db->log_entry);
	db->log_entry = NULL;
	db->log_entry_len = 0;
}

static int set_seq(struct mst_db *db, uint64_t seq)
{
	int rc;

	sqlite3_bind_int64(db->log_set_seq, 1, (sqlite3_int64)seq);
	rc = sqlite3_step(db->log_set_seq);
	sqlite3_reset(db->log_set_seq);
	if (rc == SQLITE_DONE && !sqlite3_changes(db->h)) {
		/* The record's first entry: no row yet. */
		sqlite3_bind_int64(db->log_ins_seq, 1, (sqlite3_int64)seq);
		rc = sqlite3_step(db->log_ins_seq);
		sqlite3_reset(db->log_ins_seq);
	}
	return rc == SQLITE_DONE ? 0 : MC_STORE_INTERNAL_ERROR;
}

int mst_db_log_capture(struct mst_db *db)
{
	uint64_t seq = db->log_seq + 1;
	uint8_t *e = NULL;
	size_t n = 0;
	int rc, empty = mst_db_rec_empty(db);

	if (empty == 1) {
		mst_db_log_end(db);
		return 0;
	}
	if (empty < 0) {
		mc_log_err("master", "op log: capturing change %llu failed: %s",
			   (unsigned long long)seq, mc_strerror(empty));
		return MC_STORE_INTERNAL_ERROR;
	}
	rc = db->log_ops->may_commit(db->log_arg);
	if (rc)
		return rc;
	rc = set_seq(db, seq);
	if (!rc && db->op_id) {
		/* The request's id goes with its first change. */
		sqlite3_bind_int64(db->op_put, 1, (sqlite3_int64)db->op_id);
		sqlite3_bind_int64(db->op_put, 2, (sqlite3_int64)mst_wall());
		if (step1(db->op_put) != SQLITE_DONE)
			rc = MC_STORE_INTERNAL_ERROR;
		db->op_id = 0;
	}
	/* Nothing more to capture: the ops row and ha_seq are in. */
	mst_db_rec_end(db);
	if (!rc && (mst_db_rec_empty(db) < 0 || mst_db_rec_take(db, &e, &n)))
		rc = MC_STORE_INTERNAL_ERROR;
	if (rc) {
		mc_log_err("master", "op log: capturing change %llu failed: %s",
			   (unsigned long long)seq, sqlite3_errmsg(db->h));
		return rc;
	}
	/* The entry: the patchset and its CRC-32C (LE). */
	mc_put_le32(e + n, mc_crc32c(0, e, n));
	free(db->log_entry);
	db->log_entry = e;
	db->log_entry_len = n + 4;
	db->log_pending = seq;
	return 0;
}

void mst_db_log_committed(struct mst_db *db, bool ok)
{
	uint64_t seq = db->log_pending;

	if (seq && ok) {
		db->log_seq = seq;
		db->log_ops->append(db->log_arg, seq, db->log_entry,
				    db->log_entry_len);
		db->log_entry = NULL;
	}
	mst_db_log_end(db);
}

/* A standby's copy follows the leader's: what differs is the leader's. */
static int on_conflict(void *arg, int type, sqlite3_changeset_iter *it)
{
	(void)arg;
	(void)it;
	if (type == SQLITE_CHANGESET_DATA || type == SQLITE_CHANGESET_CONFLICT)
		return SQLITE_CHANGESET_REPLACE;
	return SQLITE_CHANGESET_OMIT;
}

/* 0 when every change of cs is to one of the record's tables with its
 * columns, -EBADMSG otherwise (what a master never writes). */
static int check_changeset(const struct mst_db *db, const void *cs, int len)
{
	sqlite3_changeset_iter *it;
	int rc;

	if (sqlite3changeset_start(&it, len, (void *)cs) != SQLITE_OK)
		return -EBADMSG;
	while ((rc = sqlite3changeset_next(it)) == SQLITE_ROW) {
		const char *tab;
		int ncol, op, ind;
		bool known = false;

		if (sqlite3changeset_op(it, &tab, &ncol, &op, &ind) !=
		    SQLITE_OK)
			break;
		for (size_t i = 0; i < MST_DB_TABLES; i++)
			if (!strcmp(tab, mst_db_tables[i]) &&
			    ncol == db->ncols[i])
				known = true;
		if (!known) {
			rc = SQLITE_ERROR;
			break;
		}
	}
	sqlite3changeset_finalize(it);
	return rc == SQLITE_DONE ? 0 : -EBADMSG;
}

/* An entry's changeset, checked: its length, or -EBADMSG / -EMSGSIZE. */
static int entry_check(struct mst_db *db, uint64_t seq, const void *cs,
		       size_t len)
{
	if (len > INT32_MAX)
		return -EMSGSIZE;
	/* sqlite's changeset reader is no parser of hostile bytes (3.40
	 * loops forever on some: fuzz_ha found one): only what a master
	 * wrote, whole, goes on. */
	if (len < 4 || mc_crc32c(0, cs, len - 4) !=
			       mc_get_le32((const uint8_t *)cs + len - 4)) {
		mc_log_err("master", "op log: entry %llu is damaged (checksum)",
			   (unsigned long long)seq);
		return -EBADMSG;
	}
	if (check_changeset(db, cs, (int)(len - 4))) {
		mc_log_err("master",
			   "op log: entry %llu is no change to this "
			   "record (a table or column this master does not "
			   "have)",
			   (unsigned long long)seq);
		return -EBADMSG;
	}
	return (int)(len - 4);
}

int mst_db_log_apply_many(struct mst_db *db, uint64_t first,
			  const struct mst_db_log_ref *e, size_t n)
{
	sqlite3_changegroup *g = NULL;
	void *cs = NULL;
	int len = 0, rc;
	uint64_t last = first + n - 1;

	if (!n)
		return 0;
	if (first != db->log_seq + 1)
		return -ESPIPE;
	if (n == 1)
		return mst_db_log_apply(db, first, e[0].cs, e[0].len);
	rc = sqlite3changegroup_new(&g) == SQLITE_OK ? 0 : -ENOMEM;
	for (size_t i = 0; !rc && i < n; i++) {
		int l = entry_check(db, first + i, e[i].cs, e[i].len);

		if (l < 0)
			rc = l;
		else if (sqlite3changegroup_add(g, l, (void *)e[i].cs) !=
			 SQLITE_OK)
			rc = -EBADMSG;
	}
	if (!rc && sqlite3changegroup_output(g, &len, &cs) != SQLITE_OK)
		rc = -EBADMSG;
	sqlite3changegroup_delete(g);
	if (!rc)
		rc = mst_db_begin(db);
	if (!rc && sqlite3changeset_apply(db->h, len, cs, NULL, on_conflict,
					  NULL) != SQLITE_OK) {
		mst_db_rollback(db);
		rc = -EBADMSG;
	} else if (!rc) {
		rc = set_seq(db, last);
		if (rc)
			mst_db_rollback(db);
		else
			rc = mst_db_commit(db);
		if (!rc)
			db->log_seq = last;
	}
	sqlite3_free(cs);
	if (rc == -EBADMSG || rc == -ENOMEM) {
		/* One at a time says which entry, and applies those before. */
		rc = 0;
		for (size_t i = 0; !rc && i < n; i++)
			rc = mst_db_log_apply(db, first + i, e[i].cs, e[i].len);
	}
	return rc;
}

int mst_db_log_apply(struct mst_db *db, uint64_t seq, const void *cs,
		     size_t len)
{
	int rc;

	if (seq != db->log_seq + 1)
		return -ESPIPE;
	rc = entry_check(db, seq, cs, len);
	if (rc < 0)
		return rc;
	len = (size_t)rc;
	rc = mst_db_begin(db);
	if (rc)
		return rc;
	rc = sqlite3changeset_apply(db->h, (int)len, (void *)cs, NULL,
				    on_conflict, NULL);
	if (rc != SQLITE_OK) {
		mc_log_err("master", "op log: applying change %llu: %s",
			   (unsigned long long)seq, sqlite3_errstr(rc));
		mst_db_rollback(db);
		return MC_EDB;
	}
	/* The change carries ha_seq; set it in case it did not. */
	rc = set_seq(db, seq);
	if (rc) {
		mst_db_rollback(db);
		return rc;
	}
	rc = mst_db_commit(db);
	if (!rc)
		db->log_seq = seq;
	return rc;
}

int mst_db_file_seq(const char *path, uint64_t *seq)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;
	int rc;

	*seq = 0;
	rc = sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(h,
					"SELECT v FROM meta WHERE k='ha_seq'",
					-1, &st, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW)
			*seq = (uint64_t)sqlite3_column_int64(st, 0);
		rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
	}
	sqlite3_finalize(st);
	sqlite3_close(h);
	return rc == SQLITE_OK ? 0 : MC_EDB;
}

int mst_db_snapshot(struct mst_db *db, pthread_mutex_t *lock, const char *path,
		    uint64_t *seq, char *err, size_t errlen)
{
	sqlite3 *dst = NULL;
	sqlite3_backup *b;
	int rc, fd;

	/* Made here, 0600 as the record: sqlite would make it 0644, and
	 * another local user could open it (every key) before it is
	 * unlinked. */
	(void)unlink(path); /* a crashed master's of the same pid */
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "snapshot %s: %s", path,
			 mc_strerror(-errno));
		return MC_EDB;
	}
	close(fd);
	rc = sqlite3_open_v2(path, &dst,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				     SQLITE_OPEN_NOMUTEX,
			     NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "snapshot %s: %s", path,
			 dst ? sqlite3_errmsg(dst) : "out of memory");
		sqlite3_close(dst);
		return MC_EDB;
	}
	pthread_mutex_lock(lock);
	b = sqlite3_backup_init(dst, "main", db->h, "main");
	pthread_mutex_unlock(lock);
	if (!b) {
		snprintf(err, errlen, "snapshot %s: %s", path,
			 sqlite3_errmsg(dst));
		sqlite3_close(dst);
		return MC_EDB;
	}
	do {
		pthread_mutex_lock(lock);
		rc = sqlite3_backup_step(b, 256);
		pthread_mutex_unlock(lock);
	} while (rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED);
	pthread_mutex_lock(lock);
	sqlite3_backup_finish(b);
	pthread_mutex_unlock(lock);
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "snapshot %s: %s", path,
			 sqlite3_errstr(rc));
		sqlite3_close(dst);
		return MC_EDB;
	}
	sqlite3_close(dst);
	return mst_db_file_seq(path, seq);
}
