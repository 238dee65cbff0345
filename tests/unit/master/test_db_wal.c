/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record's WAL checkpoints (master/db_wal.c): a thread of the record's
 * own copies the WAL into the database file while commits go on, so the
 * WAL starts over instead of growing with every commit, and the record
 * reads back whole after a reopen. A hook that stopped the commits'
 * checkpoints with no thread doing them would let the WAL grow by a page
 * per commit, and a thread whose passes never left the rest to a commit
 * would have it start over only by luck (only a checkpoint that ends
 * between two transactions lets the next one start it over); both fail
 * here.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"

#define COMMITS 20000

static unsigned wal_restarts(const char *path)
{
	unsigned char h[16];
	FILE *f = fopen(path, "rb");
	size_t n = f ? fread(h, 1, sizeof(h), f) : 0;

	if (f)
		fclose(f);
	cr_assert_eq(n, sizeof(h), "no WAL header in %s", path);
	return (unsigned)h[12] << 24 | (unsigned)h[13] << 16 |
	       (unsigned)h[14] << 8 | h[15];
}

Test(db_wal, a_thread_checkpoints_and_the_wal_starts_over)
{
	char dir[64], path[128], wal[140], shm[140], err[256];
	struct mst_db_wal_stats st;
	struct mst_db *db = NULL;

	snprintf(dir, sizeof(dir), "/tmp/test_db_wal.XXXXXX");
	cr_assert(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/master.db", dir);
	snprintf(wal, sizeof(wal), "%s-wal", path);
	cr_assert_eq(mst_db_open(path, MST_DB_CKPT_THREAD, &db, err,
				 sizeof(err)),
		     0, "%s", err);
	cr_assert(mst_db_wal_stats(db, &st), "no checkpoint thread");
	/* Through unix-excl: the WAL index in memory, no -shm file. */
	snprintf(shm, sizeof(shm), "%s-shm", path);
	cr_assert_eq(access(shm, F_OK), -1, "a -shm file");

	/* Each call is one transaction that rewrites one row of meta. */
	for (uint64_t i = 1; i <= COMMITS; i++) {
		cr_assert_eq(mst_db_set_ha_led(db, i), 0);
	}
	/* Then slower, as a quiet master commits: the thread's passes end
	 * and commits take their tails. */
	for (uint64_t i = COMMITS + 1; i <= COMMITS + 100; i++) {
		cr_assert_eq(mst_db_set_ha_led(db, i), 0);
		usleep(5 * 1000);
	}
	(void)mst_db_wal_stats(db, &st);
	cr_assert_gt(st.runs, 0, "the thread never checkpointed");
	cr_assert_gt(st.tail_runs, 0, "no commit took a tail");
	cr_assert_eq(st.failures, 0);
	/* The WAL header's checkpoint sequence number (bytes 12-15, big
	 * endian) counts the times the WAL started over. */
	cr_assert_gt(wal_restarts(wal), 0, "the WAL never started over");
	mst_db_close(db);

	db = NULL;
	cr_assert_eq(mst_db_open(path, MST_DB_CKPT_THREAD, &db, err,
				 sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(mst_db_ha_led(db), COMMITS + 100);
	mst_db_close(db);
	cr_assert_eq(access(wal, F_OK), -1, "a closed record keeps no WAL");

	unlink(path);
	rmdir(dir);
}

Test(db_wal, no_thread_in_memory_mode_or_unasked)
{
	struct mst_db_wal_stats st;
	struct mst_db *db = NULL;
	char dir[64], path[128], err[256];

	cr_assert_eq(mst_db_open("memory", MST_DB_CKPT_THREAD, &db, err,
				 sizeof(err)),
		     0, "%s", err);
	cr_assert_not(mst_db_wal_stats(db, &st));
	cr_assert_eq(st.runs, 0);
	mst_db_close(db);

	snprintf(dir, sizeof(dir), "/tmp/test_db_wal.XXXXXX");
	cr_assert(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/master.db", dir);
	db = NULL;
	cr_assert_eq(mst_db_open(path, 0, &db, err, sizeof(err)), 0, "%s", err);
	cr_assert_not(mst_db_wal_stats(db, &st), "a thread unasked");
	cr_assert_eq(mst_db_set_ha_led(db, 7), 0);
	mst_db_close(db);
	unlink(path);
	rmdir(dir);
}
