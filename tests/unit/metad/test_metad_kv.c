/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for metad/kv.c: the in-memory and sqlite-backed stores, put
 * outcomes (stored, unchanged, conflict), delete, binary keys and values,
 * persistence across reopen, store-spec errors and the one-process lock.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv.h"
#include "mooncake/mc_err.h"

static char tmpdir[64];
static char spec[160]; /* "sqlite:<tmpdir>/meta.db" */
static char err[512];

static void tmp_setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/metad_kv_test.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
	snprintf(spec, sizeof(spec), "sqlite:%s/meta.db", tmpdir);
	err[0] = '\0';
}

static void tmp_teardown(void)
{
	static const char *const files[] = { "meta.db",	    "meta.db-wal",
					     "meta.db-shm", "meta.db-journal",
					     "junk.db",	    "old.db",
					     "old.db-wal",  "old.db-shm" };
	char p[160];

	for (size_t i = 0; i < MC_ARRAY_SIZE(files); i++) {
		snprintf(p, sizeof(p), "%s/%s", tmpdir, files[i]);
		unlink(p);
	}
	rmdir(tmpdir);
}

static int put_str(struct metad_kv *kv, const char *k, const char *v, bool excl,
		   enum metad_put_outcome *o)
{
	return metad_kv_put(kv, k, strlen(k), v, strlen(v), excl, o);
}

/* Expect key k to hold exactly len bytes v. */
static void expect_val(struct metad_kv *kv, const char *k, size_t klen,
		       const char *v, size_t len)
{
	char *val = NULL;
	size_t vlen = 12345;
	int rc = metad_kv_get(kv, k, klen, &val, &vlen);

	cr_assert_eq(rc, 0, "get: %d", rc);
	cr_assert_not_null(val);
	cr_expect_eq(vlen, len);
	cr_expect_eq(memcmp(val, v, len), 0);
	cr_expect_eq(val[len], '\0', "value not NUL-terminated");
	free(val);
}

static void expect_absent(struct metad_kv *kv, const char *k, size_t klen)
{
	char *val = NULL;
	size_t vlen = 0;

	cr_expect_eq(metad_kv_get(kv, k, klen, &val, &vlen), -ENOENT);
	cr_expect_null(val);
}

/* The behaviour every store must share. */
static void exercise(struct metad_kv *kv)
{
	enum metad_put_outcome o = -1;

	cr_expect_eq(metad_kv_count(kv), 0);
	expect_absent(kv, "k", 1);

	cr_assert_eq(put_str(kv, "k", "v1", false, &o), 0);
	cr_expect_eq(o, METAD_PUT_STORED);
	expect_val(kv, "k", 1, "v1", 2);
	cr_expect_eq(metad_kv_count(kv), 1);

	cr_assert_eq(put_str(kv, "k", "v1", false, &o), 0);
	cr_expect_eq(o, METAD_PUT_UNCHANGED);

	cr_assert_eq(put_str(kv, "k", "v2-longer", false, &o), 0);
	cr_expect_eq(o, METAD_PUT_STORED);
	expect_val(kv, "k", 1, "v2-longer", 9);
	cr_expect_eq(metad_kv_count(kv), 1);

	cr_assert_eq(put_str(kv, "other", "x", false, &o), 0);
	cr_expect_eq(metad_kv_count(kv), 2);

	cr_expect_eq(metad_kv_del(kv, "k", 1), 0);
	expect_absent(kv, "k", 1);
	cr_expect_eq(metad_kv_del(kv, "k", 1), -ENOENT);
	cr_expect_eq(metad_kv_count(kv), 1);
	expect_val(kv, "other", 5, "x", 1);
}

Test(metad_kv, memory_store_specs)
{
	static const char *const specs[] = { "memory", "" };
	struct metad_kv *kv = NULL;

	cr_assert_eq(metad_kv_open(NULL, false, &kv, err, sizeof(err)), 0, "%s",
		     err);
	exercise(kv);
	metad_kv_close(kv);
	for (size_t i = 0; i < 2; i++) {
		kv = NULL;
		cr_assert_eq(metad_kv_open(specs[i], false, &kv, err,
					   sizeof(err)),
			     0, "'%s': %s", specs[i], err);
		exercise(kv);
		metad_kv_close(kv);
	}
	metad_kv_close(NULL);
}

Test(metad_kv, sqlite_store, .init = tmp_setup, .fini = tmp_teardown)
{
	struct metad_kv *kv = NULL;

	cr_assert_eq(metad_kv_open(spec, false, &kv, err, sizeof(err)), 0, "%s",
		     err);
	exercise(kv);
	metad_kv_close(kv);
}

Test(metad_kv, sqlite_full_sync, .init = tmp_setup, .fini = tmp_teardown)
{
	struct metad_kv *kv = NULL;

	cr_assert_eq(metad_kv_open(spec, true, &kv, err, sizeof(err)), 0, "%s",
		     err);
	exercise(kv);
	metad_kv_close(kv);
}

static void exclusive_rules(struct metad_kv *kv)
{
	enum metad_put_outcome o = -1;

	cr_assert_eq(put_str(kv, "rpc_meta/a", "A", true, &o), 0);
	cr_expect_eq(o, METAD_PUT_STORED);
	cr_assert_eq(put_str(kv, "rpc_meta/a", "A", true, &o), 0);
	cr_expect_eq(o, METAD_PUT_UNCHANGED);
	cr_assert_eq(put_str(kv, "rpc_meta/a", "B", true, &o), 0);
	cr_expect_eq(o, METAD_PUT_CONFLICT);
	expect_val(kv, "rpc_meta/a", 10, "A", 1);
	/* A non-exclusive put replaces. */
	cr_assert_eq(put_str(kv, "rpc_meta/a", "B", false, &o), 0);
	cr_expect_eq(o, METAD_PUT_STORED);
	expect_val(kv, "rpc_meta/a", 10, "B", 1);
	/* Deleting frees an exclusive key for someone else. */
	cr_assert_eq(metad_kv_del(kv, "rpc_meta/a", 10), 0);
	cr_assert_eq(put_str(kv, "rpc_meta/a", "C", true, &o), 0);
	cr_expect_eq(o, METAD_PUT_STORED);
	expect_val(kv, "rpc_meta/a", 10, "C", 1);
	cr_expect_eq(metad_kv_count(kv), 1);
}

Test(metad_kv, exclusive_memory)
{
	struct metad_kv *kv = NULL;

	cr_assert_eq(metad_kv_open("memory", false, &kv, err, sizeof(err)), 0);
	exclusive_rules(kv);
	metad_kv_close(kv);
}

Test(metad_kv, exclusive_sqlite, .init = tmp_setup, .fini = tmp_teardown)
{
	struct metad_kv *kv = NULL;

	cr_assert_eq(metad_kv_open(spec, false, &kv, err, sizeof(err)), 0, "%s",
		     err);
	exclusive_rules(kv);
	metad_kv_close(kv);
	/* The conflicting value never reached the disk either. */
	cr_assert_eq(metad_kv_open(spec, false, &kv, err, sizeof(err)), 0, "%s",
		     err);
	expect_val(kv, "rpc_meta/a", 10, "C", 1);
	metad_kv_close(kv);
}

static const char bin_key[] = { 'k', '\0', 'e', '\0', 'y' };
static const char bin_val[] = { '\0', '{', '\0', '}', '\xff' };

static void put_binary(struct metad_kv *kv)
{
	enum metad_put_outcome o;

	cr_assert_eq(metad_kv_put(kv, bin_key, sizeof(bin_key), bin_val,
				  sizeof(bin_val), false, &o),
		     0);
	cr_expect_eq(o, METAD_PUT_STORED);
	/* "k" alone is another key. */
	cr_assert_eq(metad_kv_put(kv, "k", 1, "short", 5, false, &o), 0);
	cr_assert_eq(metad_kv_put(kv, "empty", 5, "", 0, false, &o), 0);
	cr_expect_eq(o, METAD_PUT_STORED);
}

static void expect_binary(struct metad_kv *kv)
{
	expect_val(kv, bin_key, sizeof(bin_key), bin_val, sizeof(bin_val));
	expect_val(kv, "k", 1, "short", 5);
	expect_val(kv, "empty", 5, "", 0);
	cr_expect_eq(metad_kv_count(kv), 3);
}

Test(metad_kv, binary_memory)
{
	struct metad_kv *kv = NULL;

	cr_assert_eq(metad_kv_open(NULL, false, &kv, err, sizeof(err)), 0);
	put_binary(kv);
	expect_binary(kv);
	metad_kv_close(kv);
}

Test(metad_kv, reopen_keeps_entries, .init = tmp_setup, .fini = tmp_teardown)
{
	struct metad_kv *kv = NULL;
	enum metad_put_outcome o;

	cr_assert_eq(metad_kv_open(spec, false, &kv, err, sizeof(err)), 0, "%s",
		     err);
	put_binary(kv);
	cr_assert_eq(put_str(kv, "gone", "soon", false, &o), 0);
	cr_assert_eq(put_str(kv, "k", "replaced", false, &o), 0);
	cr_assert_eq(metad_kv_del(kv, "gone", 4), 0);
	metad_kv_close(kv);

	kv = NULL;
	cr_assert_eq(metad_kv_open(spec, false, &kv, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_eq(metad_kv_count(kv), 3);
	expect_val(kv, bin_key, sizeof(bin_key), bin_val, sizeof(bin_val));
	expect_val(kv, "k", 1, "replaced", 8);
	expect_val(kv, "empty", 5, "", 0);
	expect_absent(kv, "gone", 4);
	/* Unchanged is detected against what was loaded. */
	cr_assert_eq(put_str(kv, "k", "replaced", true, &o), 0);
	cr_expect_eq(o, METAD_PUT_UNCHANGED);
	metad_kv_close(kv);
}

Test(metad_kv, many_entries_survive_reopen, .init = tmp_setup,
     .fini = tmp_teardown)
{
	struct metad_kv *kv = NULL;
	enum metad_put_outcome o;
	char k[32], v[32];
	size_t bad = 0;

	cr_assert_eq(metad_kv_open(spec, false, &kv, err, sizeof(err)), 0, "%s",
		     err);
	for (int i = 0; i < 500; i++) {
		snprintf(k, sizeof(k), "key-%d", i);
		snprintf(v, sizeof(v), "{\"i\": %d}", i);
		if (put_str(kv, k, v, false, &o) || o != METAD_PUT_STORED)
			bad++;
	}
	cr_assert_eq(bad, 0);
	metad_kv_close(kv);

	cr_assert_eq(metad_kv_open(spec, false, &kv, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_eq(metad_kv_count(kv), 500);
	for (int i = 0; i < 500; i++) {
		char *val = NULL;
		size_t len;

		snprintf(k, sizeof(k), "key-%d", i);
		snprintf(v, sizeof(v), "{\"i\": %d}", i);
		if (metad_kv_get(kv, k, strlen(k), &val, &len) ||
		    len != strlen(v) || memcmp(val, v, len))
			bad++;
		free(val);
	}
	cr_expect_eq(bad, 0, "%zu entries lost or changed", bad);
	metad_kv_close(kv);
}

Test(metad_kv, bad_store_spec)
{
	static const char *const specs[] = { "redis:localhost", "sqlite:",
					     "sqlite",		"mem",
					     "Memory",		"file:/tmp/x" };

	for (size_t i = 0; i < MC_ARRAY_SIZE(specs); i++) {
		struct metad_kv *kv = NULL;

		err[0] = '\0';
		cr_expect_eq(metad_kv_open(specs[i], false, &kv, err,
					   sizeof(err)),
			     MC_EBADCONFIG, "'%s'", specs[i]);
		cr_expect_null(kv);
		cr_expect(strstr(err, specs[i]) != NULL,
			  "error '%s' does not name '%s'", err, specs[i]);
	}
}

Test(metad_kv, second_open_is_busy, .init = tmp_setup, .fini = tmp_teardown)
{
	struct metad_kv *a = NULL, *b = NULL;
	enum metad_put_outcome o;

	cr_assert_eq(metad_kv_open(spec, false, &a, err, sizeof(err)), 0, "%s",
		     err);
	err[0] = '\0';
	cr_expect_eq(metad_kv_open(spec, false, &b, err, sizeof(err)), -EBUSY);
	cr_expect_null(b);
	cr_expect(strstr(err, spec + 7) != NULL, "error '%s' lacks the path",
		  err);

	/* The first store is unharmed and still durable. */
	cr_assert_eq(put_str(a, "after", "busy", false, &o), 0);
	cr_expect_eq(o, METAD_PUT_STORED);
	metad_kv_close(a);

	/* Once closed, the store opens again. */
	cr_assert_eq(metad_kv_open(spec, false, &b, err, sizeof(err)), 0, "%s",
		     err);
	expect_val(b, "after", 5, "busy", 4);
	metad_kv_close(b);
}

Test(metad_kv, missing_directory, .init = tmp_setup, .fini = tmp_teardown)
{
	struct metad_kv *kv = NULL;
	char s[200];

	snprintf(s, sizeof(s), "sqlite:%s/no/such/dir.db", tmpdir);
	cr_expect_eq(metad_kv_open(s, false, &kv, err, sizeof(err)), -ENOENT);
	cr_expect_null(kv);
	cr_expect(strstr(err, "dir.db") != NULL, "'%s'", err);
}

Test(metad_kv, not_an_sqlite_file, .init = tmp_setup, .fini = tmp_teardown)
{
	struct metad_kv *kv = NULL;
	char path[160], s[200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/junk.db", tmpdir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	for (int i = 0; i < 200; i++)
		fputs("this is not an sqlite database file\n", f);
	fclose(f);
	snprintf(s, sizeof(s), "sqlite:%s", path);
	cr_expect_eq(metad_kv_open(s, false, &kv, err, sizeof(err)), MC_EDB);
	cr_expect_null(kv);
	cr_expect_neq(err[0], '\0');
}

Test(metad_kv, other_schema_version_refused, .init = tmp_setup,
     .fini = tmp_teardown)
{
	struct metad_kv *kv = NULL;
	char path[160], s[200];
	sqlite3 *db;

	snprintf(path, sizeof(path), "%s/old.db", tmpdir);
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db,
				  "CREATE TABLE metad_schema(id INTEGER "
				  "PRIMARY KEY, version INTEGER NOT NULL);"
				  "INSERT INTO metad_schema VALUES (1, 99);",
				  NULL, NULL, NULL),
		     SQLITE_OK);
	sqlite3_close(db);
	snprintf(s, sizeof(s), "sqlite:%s", path);
	cr_expect_eq(metad_kv_open(s, false, &kv, err, sizeof(err)), MC_EDB);
	cr_expect_null(kv);
	cr_expect(strstr(err, "99") != NULL, "'%s'", err);
}

struct writer {
	struct metad_kv *kv;
	int id;
	int failures;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	enum metad_put_outcome o;
	char k[32], v[32];

	for (int i = 0; i < 200; i++) {
		snprintf(k, sizeof(k), "w%d-%d", w->id, i);
		snprintf(v, sizeof(v), "%d", i);
		if (put_str(w->kv, k, v, false, &o) || o != METAD_PUT_STORED)
			w->failures++;
		if (put_str(w->kv, "shared/rpc_meta", "same", true, &o) ||
		    o == METAD_PUT_CONFLICT)
			w->failures++;
	}
	return NULL;
}

Test(metad_kv, concurrent_writers, .init = tmp_setup, .fini = tmp_teardown)
{
	struct metad_kv *kv = NULL;
	struct writer w[4];
	pthread_t t[4];

	cr_assert_eq(metad_kv_open(spec, false, &kv, err, sizeof(err)), 0, "%s",
		     err);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct writer){ .kv = kv, .id = i };
		cr_assert_eq(pthread_create(&t[i], NULL, writer_main, &w[i]),
			     0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		cr_expect_eq(w[i].failures, 0, "writer %d", i);
	}
	cr_expect_eq(metad_kv_count(kv), 4 * 200 + 1);
	metad_kv_close(kv);
}
