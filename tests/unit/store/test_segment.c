/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the persistent segment (mooncakefs/lib/segment.c) with a
 * real transfer engine (P2PHANDSHAKE on loopback, no master): a new
 * segment gets a fresh header; reopening after a "crash" (freed without
 * unlink) keeps its id and bytes; a size change or an unlink starts over;
 * a name held by a live mapping is refused; sizes under 1 MiB refused.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mc_cfg.h"
#include "mc_log.h"
#include "mooncake/mc_err.h"
#include "mooncake/te.h"
#include "segment.h"

static struct te_engine *eng;
static char name[64];

static void start(void)
{
	struct te_engine_cfg c = { .metadata = "P2PHANDSHAKE",
				   .local_server_name = "127.0.0.1" };
	char err[TE_ERR_LEN];

	mc_log_set_level(MC_LOG_ERROR);
	cr_assert_eq(te_engine_create(&c, &eng, err, sizeof(err)), 0, "%s",
		     err);
	snprintf(name, sizeof(name), "unit_%d", (int)getpid());
}

static void stop(void)
{
	char path[128];

	te_engine_destroy(eng);
	snprintf(path, sizeof(path), "/dev/shm/mooncake.seg.%s", name);
	unlink(path);
}

TestSuite(segment, .init = start, .fini = stop);

Test(segment, name_from_engine)
{
	char out[MCS_SEG_NAME_MAX + 1];

	cr_assert_eq(mcs_segment_name("10.0.0.1:15000", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "10.0.0.1_15000");
	cr_assert_eq(mcs_segment_name("a/b:c", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "a_b_c");
	cr_assert_eq(mcs_segment_name("", out, sizeof(out)), -ENAMETOOLONG);
}

Test(segment, readopt_after_crash)
{
	struct mcs_segment *a, *b;
	char err[MC_ERR_LEN] = "";
	uint8_t id[16];

	cr_assert_eq(mcs_segment_open(eng, name, 1 << 20, true, &a, err,
				      sizeof(err)),
		     0, "%s", err);
	cr_assert_not(a->reused);
	cr_assert_eq((uint8_t *)a->pool - (uint8_t *)a->map, 4096);
	cr_assert_eq(memcmp(a->map, "MCSEG001", 8), 0);
	memcpy(id, a->id, sizeof(id));
	memset(a->pool, 0x5a, 1 << 20);

	/* A second owner while the first lives is refused. */
	cr_assert_eq(mcs_segment_open(eng, name, 1 << 20, true, &b, err,
				      sizeof(err)),
		     MC_ESEGEXISTS);
	cr_assert(strstr(err, "in use"), "%s", err);

	/* "Crash": unmap without removing the name. */
	mcs_segment_free(a, eng, false);
	cr_assert_eq(mcs_segment_open(eng, name, 1 << 20, true, &b, err,
				      sizeof(err)),
		     0, "%s", err);
	cr_assert(b->reused);
	cr_assert_eq(memcmp(b->id, id, sizeof(id)), 0);
	cr_assert_eq(((uint8_t *)b->pool)[12345], 0x5a);
	mcs_segment_free(b, eng, false);

	/* A different size keeps the id, so that the master, told of it
	 * at the re-mount, drops what it held there at once. */
	cr_assert_eq(mcs_segment_open(eng, name, 2 << 20, true, &b, err,
				      sizeof(err)),
		     0, "%s", err);
	cr_assert(b->reused);
	cr_assert_eq(memcmp(b->id, id, sizeof(id)), 0);
	cr_assert_eq(b->size, 2u << 20);

	/* A clean leave removes the name: nothing to re-adopt. */
	mcs_segment_free(b, eng, true);
	{
		char path[128];
		snprintf(path, sizeof(path), "/dev/shm/mooncake.seg.%s", name);
		cr_assert_neq(access(path, F_OK), 0);
	}
	cr_assert_eq(mcs_segment_open(eng, name, 2 << 20, true, &b, err,
				      sizeof(err)),
		     0, "%s", err);
	cr_assert_not(b->reused);
	mcs_segment_free(b, eng, true);
}

Test(segment, refusals)
{
	struct mcs_segment *a;
	char err[MC_ERR_LEN] = "";

	cr_assert_eq(mcs_segment_open(eng, name, (1 << 20) - 1, true, &a, err,
				      sizeof(err)),
		     -EINVAL);
	cr_assert(strstr(err, "1 MiB"), "%s", err);
	cr_assert_eq(mcs_segment_open(eng, "a/b", 1 << 20, true, &a, err,
				      sizeof(err)),
		     -EINVAL);
}
