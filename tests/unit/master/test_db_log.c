/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The op log's capture (master/db_rec.c) against the record it copies:
 * random transactions through the record's own API (objects with and
 * without attributes, replaced, removed and put again; directories made,
 * touched and removed; segments, orphans, checkpoints and their holders,
 * request ids and their pruning; transactions rolled back) on a leader with log ops set; every
 * entry applied one at a time to one standby and in runs of random length
 * (merged with a changegroup) to another. All three records must end
 * equal, table by table, row by row. A capture that wrote a replaced row
 * as an INSERT (which a changegroup ignores), lost a REPLACE's delete or
 * an UPDATE, or encoded a value wrongly fails here.
 */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"
#include "master.h"

#define MAX_ENTRIES 4096

static struct entry {
	void *p;
	size_t len;
} entries[MAX_ENTRIES];
static size_t n_entries;
static uint64_t first_seq;
static char dir[64];

static int may_commit(void *arg)
{
	(void)arg;
	return 0;
}

static void append(void *arg, uint64_t seq, void *e, size_t len)
{
	(void)arg;
	if (!n_entries)
		first_seq = seq;
	cr_assert_eq(seq, first_seq + n_entries, "entries in sequence");
	cr_assert_lt(n_entries, MAX_ENTRIES);
	entries[n_entries++] = (struct entry){ e, len };
}

static int wait_none(void *arg, uint64_t seq)
{
	(void)arg;
	(void)seq;
	return 0;
}

static const struct mst_db_log_ops ops = {
	.may_commit = may_commit,
	.append = append,
	.wait = wait_none,
	.wait_logged = wait_none,
};

static struct mst_db *open_db(const char *name)
{
	char path[128], err[256];
	struct mst_db *db = NULL;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	cr_assert_eq(mst_db_open(path, 0, &db, err, sizeof(err)), 0, "%s", err);
	return db;
}

/* Every row of every table of the file at path, as text, in key order. */
static char *dump(const char *name)
{
	static const char *const q[] = {
		"SELECT * FROM meta ORDER BY k",
		"SELECT * FROM segments ORDER BY id",
		"SELECT * FROM objects ORDER BY key",
		"SELECT * FROM attrs ORDER BY key",
		"SELECT * FROM dirs ORDER BY path",
		"SELECT * FROM orphans ORDER BY id",
		"SELECT * FROM checkpoints ORDER BY id",
		"SELECT * FROM ckpt_holders ORDER BY ckpt, client",
		"SELECT * FROM ops ORDER BY id",
	};
	char path[128], *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	sqlite3 *h;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	cr_assert_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL),
		     SQLITE_OK);
	for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
		sqlite3_stmt *st;
		cr_assert_eq(sqlite3_prepare_v2(h, q[i], -1, &st, NULL),
			     SQLITE_OK);
		fprintf(f, "%s\n", q[i]);
		while (sqlite3_step(st) == SQLITE_ROW) {
			for (int c = 0; c < sqlite3_column_count(st); c++) {
				int t = sqlite3_column_type(st, c);
				fprintf(f, " %d:", t);
				if (t == SQLITE_BLOB || t == SQLITE_TEXT) {
					const unsigned char *b =
						sqlite3_column_blob(st, c);
					for (int k = 0;
					     k < sqlite3_column_bytes(st, c);
					     k++)
						fprintf(f, "%02x", b[k]);
				} else if (t != SQLITE_NULL) {
					fprintf(f, "%lld",
						sqlite3_column_int64(st, c));
				}
			}
			fprintf(f, "\n");
		}
		sqlite3_finalize(st);
	}
	sqlite3_close(h);
	fclose(f);
	return out;
}

static struct mst_object *object(unsigned k, uint64_t v, bool attr)
{
	struct mst_object *o = calloc(1, sizeof(*o) + 16);
	mst_attr_t *at = attr ? calloc(1, sizeof(*at)) : NULL;

	o->key_len = (size_t)snprintf(o->key, 16, "key%u", k);
	o->size = v * 7;
	o->hard_pin = v & 1;
	o->soft_pin_until = v & 2 ? v : 0;
	o->version = v;
	o->orphan_id = v;
	if (at) {
		at->mode = 0100644;
		at->uid = (uint32_t)v;
		at->mtime_ns = (int64_t)v;
	}
	o->attr = at;
	return o;
}

static void free_object(struct mst_object *o)
{
	free(o->attr);
	free(o);
}

/* One random change through the record's API. */
static void change(struct mst_db *db, uint64_t v)
{
	unsigned k = (unsigned)(rand() % 12), r = (unsigned)(rand() % 13);
	char path[16];
	size_t pl = (size_t)snprintf(path, sizeof(path), "d%u/", k % 5);
	uint8_t id[MST_ID_LEN] = { (uint8_t)(k % 4) };
	struct mst_object *o = object(k, v, r & 1);
	mst_attr_t a = { .mode = 040755, .uid = (uint32_t)v };

	switch (r) {
	case 0:
	case 1:
	case 2:
	case 3: /* a put: new, or over the key's row (REPLACE) */
		cr_assert_eq(mst_db_put_object(db, o), 0);
		break;
	case 4:
	case 5:
		cr_assert_eq(mst_db_del_object(db, o->key, o->key_len, r & 1),
			     0);
		break;
	case 6:
		cr_assert_eq(mst_db_dir_put(db, path, pl, &a), 0);
		break;
	case 7: /* an UPDATE (of a row that may not exist) */
		cr_assert_eq(mst_db_dir_touch(db, path, pl, (int64_t)v), 0);
		break;
	case 8:
		cr_assert_eq(mst_db_dir_del(db, path, pl), 0);
		break;
	case 9: {
		struct mst_segment s = { .name = "seg",
					 .endpoint = "h:1",
					 .protocol = "tcp",
					 .host_id = "h",
					 .size = v };
		memcpy(s.id, id, sizeof(id));
		cr_assert_eq(k & 1 ? mst_db_put_segment(db, &s) :
				     mst_db_del_segment(db, id),
			     0);
		break;
	}
	case 10:
		o->orphan_id = k;
		cr_assert_eq(k & 1 ? mst_db_put_orphan(db, o) :
				     mst_db_del_orphan(db, k),
			     0);
		break;
	case 11: {
		char name[16];
		snprintf(name, sizeof(name), "ck%u", k % 3);
		cr_assert_eq(k & 1 ? mst_db_ckpt_put(db, k % 4, name, "rec", 3,
						     (int64_t)v) :
				     mst_db_ckpt_del(db, k % 4),
			     0);
		break;
	}
	default:
		cr_assert_eq(k & 1 ? mst_db_holder_put(db, k % 3, id, "h:2",
						       k & 2, id, 2) :
				     mst_db_holder_del(db, k % 3,
						       k & 2 ? id : NULL),
			     0);
		break;
	}
	free_object(o);
}

Test(db_log, capture_copies_the_record_one_at_a_time_and_merged)
{
	struct mst_db *lead, *one, *many;
	char *want, *got1, *gotn;
	uint64_t v = 1000;

	snprintf(dir, sizeof(dir), "/tmp/test_db_log.XXXXXX");
	cr_assert(mkdtemp(dir));
	srand(7);
	lead = open_db("lead.db");
	one = open_db("one.db");
	many = open_db("many.db");
	mst_db_set_log(lead, &ops, NULL);
	for (int t = 0; t < 1500; t++) {
		int n = 1 + rand() % 4;

		if (t % 200 == 199) /* request ids pruned: a bulk DELETE */
			cr_assert_eq(mst_db_ops_prune(lead, INT64_MAX), 0);
		/* A request id now and then (the ops table, pruned). */
		mst_db_set_op(lead, rand() % 3 ? 0 : (uint64_t)(t + 1));
		cr_assert_eq(mst_db_begin(lead), 0);
		for (int i = 0; i < n; i++)
			change(lead, v++);
		if (rand() % 10 == 0) {
			mst_db_rollback(lead); /* nothing of it logged */
			continue;
		}
		cr_assert_eq(mst_db_commit(lead), 0);
	}
	cr_assert_gt(n_entries, 1000, "most transactions change something");
	for (size_t i = 0; i < n_entries; i++)
		cr_assert_eq(mst_db_log_apply(one, first_seq + i, entries[i].p,
					      entries[i].len),
			     0, "entry %zu applied alone", i);
	for (size_t i = 0; i < n_entries;) {
		size_t run = 1 + (size_t)(rand() % 300), j;
		struct mst_db_log_ref refs[300];

		if (run > n_entries - i)
			run = n_entries - i;
		for (j = 0; j < run; j++)
			refs[j] = (struct mst_db_log_ref){ entries[i + j].p,
							   entries[i + j].len };
		cr_assert_eq(mst_db_log_apply_many(many, first_seq + i, refs,
						   run),
			     0, "run from %zu", i);
		i += run;
	}
	mst_db_close(lead);
	mst_db_close(one);
	mst_db_close(many);
	want = dump("lead.db");
	got1 = dump("one.db");
	gotn = dump("many.db");
	cr_assert_str_eq(got1, want, "applied one at a time");
	cr_assert_str_eq(gotn, want, "applied in merged runs");
	free(want);
	free(got1);
	free(gotn);
	for (size_t i = 0; i < n_entries; i++)
		free(entries[i].p);
	for (const char *f = "lead.db\0one.db\0many.db\0"; *f;
	     f += strlen(f) + 1) {
		char p[128];
		snprintf(p, sizeof(p), "%s/%s", dir, f);
		unlink(p);
		snprintf(p, sizeof(p), "%s/%s-wal", dir, f);
		unlink(p);
		snprintf(p, sizeof(p), "%s/%s-shm", dir, f);
		unlink(p);
	}
	rmdir(dir);
}
