/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A standby's memory for its takeover (master/prefault.c) and the count of
 * its record's objects it is sized by (mst_db_count_objects, master/db.c).
 * The count goes a part at a time from the last key counted, so a count
 * that restarted from the first key, or skipped or repeated the key at a
 * part's edge, is off here. Memory made ready is resident before the load
 * and serves the load's small allocations (with glibc's malloc: under
 * ASan its own allocator serves them, so only residence is checked), and
 * what the load left goes back after it.
 */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "db.h"
#include "prefault.h"

#define MIB (1u << 20)

/* Under ASan (gcc says so with a macro, clang with __has_feature). */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* A size of /proc/self/status ("VmRSS", "VmSize") in MiB. */
static long status_mib(const char *field)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	size_t n = strlen(field);
	long kb = -1;

	cr_assert(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && line[n] == ':') {
			kb = strtol(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return kb >> 10;
}

static long rss_mib(void)
{
	return status_mib("VmRSS");
}

/* A record with n objects (keys "k0".."k<n-1>"), made with sqlite. */
static void record(const char *path, unsigned n)
{
	struct mst_db *db = NULL;
	sqlite3 *h;
	sqlite3_stmt *st;
	char err[256], key[32];

	cr_assert_eq(mst_db_open(path, 0, &db, err, sizeof(err)), 0, "%s", err);
	mst_db_close(db);
	cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(h, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(h,
					"INSERT INTO objects(key, size, flags, "
					"soft_pin_until, mtime, replicas) "
					"VALUES (?1, 0, 0, 0, 0, x'')",
					-1, &st, NULL),
		     SQLITE_OK);
	for (unsigned i = 0; i < n; i++) {
		int len = snprintf(key, sizeof(key), "k%u", i);

		sqlite3_bind_blob(st, 1, key, len, SQLITE_STATIC);
		cr_assert_eq(sqlite3_step(st), SQLITE_DONE);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	cr_assert_eq(sqlite3_exec(h, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
}

Test(prefault, objects_counted_a_part_at_a_time)
{
	char dir[64] = "/tmp/test_prefault.XXXXXX", path[128], err[256];
	struct mst_db_count c = { 0 };
	struct mst_db *db = NULL;
	unsigned calls = 0;

	cr_assert(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/master.db", dir);
	record(path, 1000);
	cr_assert_eq(mst_db_open(path, 0, &db, err, sizeof(err)), 0, "%s", err);
	while (!c.done) {
		cr_assert_eq(mst_db_count_objects(db, &c, 7), 0);
		cr_assert_leq(c.n, 1000);
		cr_assert_lt(++calls, 1000, "the count does not end");
	}
	cr_assert_eq(c.n, 1000);
	cr_assert_eq(calls, 143, "1000 in parts of 7: %u calls", calls);
	/* Done: further calls count nothing. */
	cr_assert_eq(mst_db_count_objects(db, &c, 7), 0);
	cr_assert_eq(c.n, 1000);
	mst_db_count_free(&c);
	cr_assert_null(c.last);
	cr_assert_eq(c.n, 0);
	/* All in one part. */
	cr_assert_eq(mst_db_count_objects(db, &c, 5000), 0);
	cr_assert(c.done);
	cr_assert_eq(c.n, 1000);
	mst_db_count_free(&c);
	mst_db_close(db);
	unlink(path);
	rmdir(dir);
}

Test(prefault, memory_made_ready_serves_the_load_and_goes_back_after)
{
	enum { READY = 96, SMALL = 200, N = 300000 }; /* 60 MB of SMALL */
	long before = rss_mib(), ready_rss, loaded;
	size_t ready;
	bool capped, refused;
	void **v = malloc(N * sizeof(*v));

	cr_assert(v);
	/* A step at a time, as a standby's rounds. */
	ready = mst_prefault_grow(READY * MIB, 32 * MIB, &refused);
	cr_assert_eq(ready, 32 * MIB);
	while (ready < READY * MIB)
		ready = mst_prefault_grow(READY * MIB, 32 * MIB, &refused);
	cr_assert_eq(ready, READY * MIB);
	cr_assert_not(refused);
	cr_assert_eq(mst_prefault_grow(READY * MIB, 32 * MIB, &refused),
		     READY * MIB, "grew past what was asked");
	ready_rss = rss_mib();
	cr_assert_geq(ready_rss - before, READY - 2, "%ld MiB resident, %ld",
		      ready_rss, before);
	/* Asked for more than the system has: capped. */
	cr_assert_lt(mst_prefault_want(UINT64_MAX / 512, 0, &capped),
		     UINT64_MAX / 2);
	cr_assert(capped);
	cr_assert_eq(mst_prefault_want(1000, 4096, &capped), 1000 * 256 + 4096);
	cr_assert_not(capped);

	mst_prefault_use();
	for (size_t i = 0; i < N; i++) {
		v[i] = malloc(SMALL);
		cr_assert(v[i]);
		memset(v[i], 1, SMALL);
	}
	loaded = rss_mib();
	(void)loaded; /* only checked with glibc's malloc */
#ifndef UNDER_ASAN
	cr_assert_leq(loaded - ready_rss, 8,
		      "the load took fresh memory: %ld -> %ld MiB", ready_rss,
		      loaded);
#endif
	mst_prefault_end();
#ifndef UNDER_ASAN
	/* The ~36 MiB the load did not use went back. */
	cr_assert_leq(rss_mib(), loaded - 24, "%ld -> %ld MiB", loaded,
		      rss_mib());
#endif
	for (size_t i = 0; i < N; i++)
		free(v[i]);
	free(v);
}

/* Under an address-space limit (RLIMIT_AS, ulimit -v) malloc refuses a
 * block before the goal: the growing stops there, says so, and gives
 * 16 MiB back, so the process's own allocations still succeed. (Not under
 * ASan, whose shadow memory needs more address space than any limit.) */
Test(prefault, refused_by_an_address_space_limit_leaves_room)
{
#ifdef UNDER_ASAN
	cr_skip_test("ASan's shadow memory does not run under RLIMIT_AS");
#else
	struct rlimit lim;
	size_t ready;
	bool refused;
	void *p;

	cr_assert_eq(getrlimit(RLIMIT_AS, &lim), 0);
	lim.rlim_cur = (rlim_t)(status_mib("VmSize") + 64) * MIB;
	cr_assert_eq(setrlimit(RLIMIT_AS, &lim), 0);
	ready = mst_prefault_grow(1024 * MIB, 1024 * MIB, &refused);
	cr_assert(refused);
	cr_assert_lt(ready, 64 * MIB - 16 * MIB + 1, "%zu MiB ready",
		     ready / MIB);
	cr_assert_gt(ready, 0);
	/* What was given back serves the process. */
	p = malloc(12 * MIB);
	cr_assert(p, "no room left after a refusal");
	memset(p, 1, 12 * MIB);
	free(p);
	mst_prefault_use();
	mst_prefault_end();
#endif
}
