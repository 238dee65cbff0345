/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for mooncakefs/fuse/stage.c, the staged bytes of files being
 * written: random writes against a flat model (holes and gaps read as
 * zeros, also in chunks reused with stale bytes), truncation down and up,
 * the staging limit (ENOSPC, nothing held after release), small files
 * holding little, and the idle pool bounded.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stage.h"

#define MiB (1u << 20)

/* The stage's bytes [0, size) as one flat buffer. */
static char *flatten(const struct mcfs_stage *st)
{
	char *out = malloc(st->size ? st->size : 1);
	uint64_t off = 0;

	cr_assert_not_null(out);
	while (off < st->size) {
		const char *p;
		size_t n = mcfs_stage_span(st, off, 3 * MiB, &p);
		cr_assert(n > 0);
		if (p)
			memcpy(out + off, p, n);
		else
			memset(out + off, 0, n);
		off += n;
	}
	return out;
}

static void check(const struct mcfs_stage *st, const char *model, uint64_t size)
{
	char *flat;

	cr_assert_eq(st->size, size);
	flat = flatten(st);
	cr_assert_eq(memcmp(flat, model, size), 0);
	free(flat);
}

Test(stage, random_writes_match_a_flat_model)
{
	struct mcfs_stage_pool pool;
	struct mcfs_stage st = { 0 };
	const uint64_t max = 20 * MiB;
	char *model = calloc(1, max), *buf = malloc(3 * MiB);
	uint64_t size = 0;
	unsigned seed = 7;

	cr_assert(model && buf);
	mcfs_stage_pool_init(&pool, 1ull << 30);
	for (int round = 0; round < 3; round++) {
		/* Fill chunks with junk first: reused ones hold stale bytes. */
		memset(buf, 0xEE, 3 * MiB);
		for (int i = 0; i < 200; i++) {
			uint64_t off =
				(uint64_t)rand_r(&seed) % (max - 3 * MiB);
			size_t len = (size_t)rand_r(&seed) % (3 * MiB) + 1;
			if (i % 7 == 0)
				off = size; /* sequential append */
			if (off + len > max)
				len = (size_t)(max - off);
			for (size_t k = 0; k < len; k += 4096)
				buf[k] = (char)rand_r(&seed);
			cr_assert_eq(
				mcfs_stage_write(&pool, &st, off, buf, len), 0);
			memcpy(model + off, buf, len);
			if (off + len > size)
				size = off + len;
			if (i % 50 == 49) {
				uint64_t t = (uint64_t)rand_r(&seed) % max;
				cr_assert_eq(mcfs_stage_truncate(&pool, &st, t),
					     0);
				if (t < size)
					memset(model + t, 0, size - t);
				size = t;
			}
		}
		check(&st, model, size);
		mcfs_stage_release(&pool, &st);
		cr_assert_eq(atomic_load(&pool.held), 0);
		memset(model, 0, max);
		size = 0;
	}
	cr_assert(pool.n_free <= pool.max_free);
	mcfs_stage_pool_fini(&pool);
	free(model);
	free(buf);
}

Test(stage, truncate_up_reads_zeros_past_the_old_end)
{
	struct mcfs_stage_pool pool;
	struct mcfs_stage st = { 0 };
	char ones[100], *flat;

	mcfs_stage_pool_init(&pool, 64 * MiB);
	memset(ones, 1, sizeof(ones));
	cr_assert_eq(mcfs_stage_write(&pool, &st, 0, ones, 100), 0);
	cr_assert_eq(mcfs_stage_truncate(&pool, &st, 10), 0);
	cr_assert_eq(mcfs_stage_truncate(&pool, &st, 9 * MiB), 0);
	flat = flatten(&st);
	for (uint64_t i = 0; i < 9 * MiB; i++)
		if (flat[i] != (i < 10))
			cr_assert_fail("byte %llu is %d", (unsigned long long)i,
				       flat[i]);
	free(flat);
	mcfs_stage_release(&pool, &st);
	mcfs_stage_pool_fini(&pool);
}

Test(stage, the_limit_gives_enospc_and_small_files_hold_little)
{
	struct mcfs_stage_pool pool;
	struct mcfs_stage a = { 0 }, b = { 0 };
	char *buf = calloc(1, MCFS_STAGE_CHUNK);

	cr_assert_not_null(buf);
	mcfs_stage_pool_init(&pool, 3 * MCFS_STAGE_CHUNK);
	cr_assert_eq(mcfs_stage_write(&pool, &a, 0, "tiny", 4), 0);
	cr_assert(atomic_load(&pool.held) <= 64 * 1024 + 256,
		  "a small file holds "
		  "little");
	for (int i = 0; i < 3; i++)
		(void)mcfs_stage_write(&pool, &b,
				       (uint64_t)i * MCFS_STAGE_CHUNK, buf,
				       MCFS_STAGE_CHUNK);
	cr_assert_eq(mcfs_stage_write(&pool, &b, 3ull * MCFS_STAGE_CHUNK, buf,
				      MCFS_STAGE_CHUNK),
		     -ENOSPC);
	cr_assert(atomic_load(&pool.held) <= pool.limit);
	/* A byte far past the end would need a huge index: refused too. */
	cr_assert_eq(mcfs_stage_write(&pool, &a, 1ull << 50, "x", 1), -ENOSPC);
	cr_assert_eq(a.size, 4);
	mcfs_stage_release(&pool, &b);
	mcfs_stage_release(&pool, &a);
	cr_assert_eq(atomic_load(&pool.held), 0);
	mcfs_stage_pool_fini(&pool);
	free(buf);
}
