/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The op log's change capture (db.h, "The op log"): while a logged
 * transaction is open, sqlite's pre-update hook hands every row change of
 * the record's tables to rec_hook, which writes it straight into a
 * patchset, sqlite's own format (the session extension's documentation,
 * "Changeset Format"; a standby applies it with sqlite3changeset_apply and
 * merges runs of them with a changegroup), one buffer per table.
 *
 * Why not the session extension: a session per transaction costs a PRAGMA
 * table_xinfo per table it touches, a SELECT per table when the changeset
 * is made and a hashed copy of every changed row; that was ~60% of the
 * leader's CPU per change, all under the master's lock. Here a change costs
 * its values' bytes.
 *
 * What is written, per row:
 * - INSERT: the new row (every column);
 * - DELETE: the primary key's columns;
 * - a DELETE followed at once by an INSERT of the same key (what INSERT OR
 *   REPLACE does to an existing row), and an UPDATE: an UPDATE that sets
 *   every column. A changegroup merges INSERT then UPDATE into one INSERT,
 *   and ignores an INSERT of a key it already holds: so a replaced row must
 *   not be written as an INSERT.
 * - an UPDATE that changes the key: DELETE of the old, INSERT of the new.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"

/* Record field types (sqlite's changeset format). */
enum { F_UNDEF = 0, F_INT = 1, F_REAL = 2, F_TEXT = 3, F_BLOB = 4, F_NULL = 5 };

static int room(struct mst_db_rbuf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 256;
	uint8_t *p;

	if (b->len + more <= b->cap)
		return 0;
	while (cap < b->len + more)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

/* sqlite's varint: big-endian groups of 7 bits (lengths: < 2^35). */
static void put_varint(struct mst_db_rbuf *b, uint64_t v)
{
	uint8_t tmp[10];
	int n = 0;

	do {
		tmp[n++] = (uint8_t)(v & 0x7f);
		v >>= 7;
	} while (v);
	while (n > 1)
		b->p[b->len++] = tmp[--n] | 0x80;
	b->p[b->len++] = tmp[0];
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static int put_value(struct mst_db_rbuf *b, sqlite3_value *v)
{
	int t = v ? sqlite3_value_type(v) : SQLITE_NULL;
	size_t n;

	switch (t) {
	case SQLITE_INTEGER:
	case SQLITE_FLOAT: {
		uint64_t u;
		if (t == SQLITE_INTEGER) {
			u = (uint64_t)sqlite3_value_int64(v);
		} else {
			double d = sqlite3_value_double(v);
			memcpy(&u, &d, sizeof(u));
		}
		if (room(b, 9))
			return -ENOMEM;
		b->p[b->len++] = t == SQLITE_INTEGER ? F_INT : F_REAL;
		put_be64(b->p + b->len, u);
		b->len += 8;
		return 0;
	}
	case SQLITE_TEXT:
	case SQLITE_BLOB: {
		const void *p = t == SQLITE_TEXT ?
					(const void *)sqlite3_value_text(v) :
					sqlite3_value_blob(v);
		n = (size_t)sqlite3_value_bytes(v);
		if (room(b, 11 + n))
			return -ENOMEM;
		b->p[b->len++] = t == SQLITE_TEXT ? F_TEXT : F_BLOB;
		put_varint(b, n);
		if (n)
			memcpy(b->p + b->len, p, n);
		b->len += n;
		return 0;
	}
	default:
		if (room(b, 1))
			return -ENOMEM;
		b->p[b->len++] = F_NULL;
		return 0;
	}
}

typedef int (*value_fn)(sqlite3 *, int, sqlite3_value **);

/* The row's columns (every one, or the key's only) through get. */
static int put_row(struct mst_db *db, struct mst_db_rbuf *b, int tab,
		   value_fn get, bool key_only)
{
	for (int i = 0; i < db->ncols[tab]; i++) {
		sqlite3_value *v = NULL;

		if (key_only && !db->pk[tab][i])
			continue;
		if (get(db->h, i, &v) != SQLITE_OK)
			return -EIO;
		if (put_value(b, v))
			return -ENOMEM;
	}
	return 0;
}

static int put_change(struct mst_db_rbuf *b, int op)
{
	if (room(b, 2))
		return -ENOMEM;
	b->p[b->len++] = (uint8_t)op;
	b->p[b->len++] = 0; /* not indirect */
	return 0;
}

/* The held DELETE goes into its table's buffer. */
static int flush_delete(struct mst_db *db)
{
	struct mst_db_rbuf *b;
	int rc;

	if (db->rec_del_tab < 0)
		return 0;
	b = &db->rec[db->rec_del_tab];
	db->rec_del_tab = -1;
	rc = put_change(b, SQLITE_DELETE);
	if (!rc && room(b, db->rec_del.len))
		rc = -ENOMEM;
	if (!rc) {
		memcpy(b->p + b->len, db->rec_del.p, db->rec_del.len);
		b->len += db->rec_del.len;
	}
	return rc;
}

/* The key of the row being written (new values, or old) into k. */
static int key_of(struct mst_db *db, int tab, value_fn get,
		  struct mst_db_rbuf *k)
{
	k->len = 0;
	return put_row(db, k, tab, get, true);
}

static bool same_key(const struct mst_db_rbuf *a, const struct mst_db_rbuf *b)
{
	return a->len == b->len && !memcmp(a->p, b->p, a->len);
}

static int on_change(struct mst_db *db, int op, int tab)
{
	struct mst_db_rbuf *b = &db->rec[tab], *k = &db->rec_key;
	int rc = 0;

	if (op == SQLITE_DELETE) {
		/* Held: an INSERT of the same key may follow (REPLACE). */
		rc = flush_delete(db);
		if (!rc)
			rc = key_of(db, tab, sqlite3_preupdate_old,
				    &db->rec_del);
		if (!rc)
			db->rec_del_tab = tab;
		return rc;
	}
	if (op == SQLITE_INSERT) {
		rc = key_of(db, tab, sqlite3_preupdate_new, k);
		if (!rc && db->rec_del_tab == tab &&
		    same_key(k, &db->rec_del)) {
			db->rec_del_tab = -1; /* replaced: one UPDATE */
			op = SQLITE_UPDATE;
		} else if (!rc) {
			rc = flush_delete(db);
		}
	} else if (op == SQLITE_UPDATE) {
		rc = flush_delete(db);
		if (!rc)
			rc = key_of(db, tab, sqlite3_preupdate_new, k);
		if (!rc)
			rc = key_of(db, tab, sqlite3_preupdate_old,
				    &db->rec_del);
		if (!rc && !same_key(k, &db->rec_del)) {
			/* The key changed: the old row goes, a new one comes. */
			db->rec_del_tab = tab;
			rc = flush_delete(db);
			op = SQLITE_INSERT;
		}
	} else {
		return 0;
	}
	if (!rc)
		rc = put_change(b, op);
	if (!rc)
		rc = put_row(db, b, tab, sqlite3_preupdate_new, false);
	return rc;
}

static void rec_hook(void *arg, sqlite3 *h, int op, const char *zdb,
		     const char *table, sqlite3_int64 k1, sqlite3_int64 k2)
{
	struct mst_db *db = arg;
	int tab = -1;

	(void)h;
	(void)k1;
	(void)k2;
	if (db->rec_err || strcmp(zdb, "main"))
		return;
	for (int i = 0; i < MST_DB_TABLES; i++)
		if (!strcmp(table, mst_db_tables[i])) {
			tab = i;
			break;
		}
	if (tab < 0)
		return; /* not the record's (none other are written) */
	if (sqlite3_preupdate_count(db->h) != db->ncols[tab])
		db->rec_err = -EIO;
	else
		db->rec_err = on_change(db, op, tab);
}

void mst_db_rec_begin(struct mst_db *db)
{
	for (int i = 0; i < MST_DB_TABLES; i++)
		db->rec[i].len = 0;
	db->rec_del_tab = -1;
	db->rec_err = 0;
	db->rec_on = true;
	sqlite3_preupdate_hook(db->h, rec_hook, db);
}

void mst_db_rec_end(struct mst_db *db)
{
	if (!db->rec_on)
		return;
	sqlite3_preupdate_hook(db->h, NULL, NULL);
	db->rec_on = false;
}

int mst_db_rec_empty(struct mst_db *db)
{
	if (db->rec_err)
		return db->rec_err;
	if (db->rec_del_tab >= 0)
		return 0;
	for (int i = 0; i < MST_DB_TABLES; i++)
		if (db->rec[i].len)
			return 0;
	return 1;
}

int mst_db_rec_take(struct mst_db *db, uint8_t **out, size_t *len)
{
	struct mst_db_rbuf e = { 0 };
	int rc = db->rec_err ? db->rec_err : flush_delete(db);

	for (int i = 0; !rc && i < MST_DB_TABLES; i++) {
		size_t nl = strlen(mst_db_tables[i]) + 1;
		const struct mst_db_rbuf *b = &db->rec[i];

		if (!b->len)
			continue;
		/* The table's header: 'P', columns, key flags, name. */
		if (room(&e, 11 + (size_t)db->ncols[i] + nl + b->len)) {
			rc = -ENOMEM;
			break;
		}
		e.p[e.len++] = 'P';
		put_varint(&e, (uint64_t)db->ncols[i]);
		memcpy(e.p + e.len, db->pk[i], (size_t)db->ncols[i]);
		e.len += (size_t)db->ncols[i];
		memcpy(e.p + e.len, mst_db_tables[i], nl);
		e.len += nl;
		memcpy(e.p + e.len, b->p, b->len);
		e.len += b->len;
	}
	/* Room for the entry's CRC, which the caller appends. */
	if (!rc && room(&e, 4))
		rc = -ENOMEM;
	if (rc) {
		free(e.p);
		return rc;
	}
	*out = e.p;
	*len = e.len;
	return 0;
}

void mst_db_rec_free(struct mst_db *db)
{
	mst_db_rec_end(db);
	for (int i = 0; i < MST_DB_TABLES; i++)
		free(db->rec[i].p);
	free(db->rec_del.p);
	free(db->rec_key.p);
	memset(db->rec, 0, sizeof(db->rec));
	memset(&db->rec_del, 0, sizeof(db->rec_del));
	memset(&db->rec_key, 0, sizeof(db->rec_key));
}
