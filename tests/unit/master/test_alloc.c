/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for master/alloc.c, the per-segment TLSF allocator: argument
 * checks, alignment and rounding, random alloc/free against a shadow
 * bitmap, coalescing back to one block, -ENOSPC and recovery, exact fit
 * of the last block (the fallback past good fit), reserve (gaps, overlap,
 * restoring a recorded state) and 1 TiB arithmetic.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

#define A MC_ALLOC_ALIGN
#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define TiB (1ull << 40)

static struct mc_alloc *al;

static void fini(void)
{
	mc_alloc_destroy(al);
	al = NULL;
}

TestSuite(alloc, .fini = fini);

static void make(uint64_t size)
{
	cr_assert_eq(mc_alloc_create(size, &al), 0);
	cr_assert_not_null(al);
}

static void check(void)
{
	cr_assert_eq(mc_alloc_check(al), 0, "allocator invariants broken");
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static uint64_t rnd_range(uint64_t lo, uint64_t hi)
{
	return lo + rnd() % (hi - lo + 1);
}

static struct mc_alloc_block *must_alloc(uint64_t len)
{
	struct mc_alloc_block *b = NULL;
	int rc = mc_alloc_alloc(al, len, &b);

	cr_assert_eq(rc, 0, "alloc(%llu) = %d", (unsigned long long)len, rc);
	cr_assert_not_null(b);
	return b;
}

static struct mc_alloc_block *must_reserve(uint64_t off, uint64_t len)
{
	struct mc_alloc_block *b = NULL;
	int rc = mc_alloc_reserve(al, off, len, &b);

	cr_assert_eq(rc, 0, "reserve(%llu, %llu) = %d", (unsigned long long)off,
		     (unsigned long long)len, rc);
	cr_assert_not_null(b);
	cr_assert_eq(mc_alloc_block_offset(b), off);
	return b;
}

/* A shadow of which MC_ALLOC_ALIGN units are allocated. */
struct shadow {
	uint8_t *bits;
	uint64_t units;
};

static void shadow_init(struct shadow *s, uint64_t capacity)
{
	s->units = capacity / A;
	s->bits = calloc(s->units / 8 + 1, 1);
	cr_assert_not_null(s->bits);
}

static bool shadow_test(const struct shadow *s, uint64_t u)
{
	return s->bits[u / 8] & (1u << (u % 8));
}

/* Mark a block's units in use; every one must have been free. */
static void shadow_set(struct shadow *s, const struct mc_alloc_block *b)
{
	uint64_t off = mc_alloc_block_offset(b), size = mc_alloc_block_size(b);

	cr_assert_eq(off % A, 0);
	cr_assert_eq(size % A, 0);
	cr_assert_gt(size, 0);
	cr_assert_leq(off / A + size / A, s->units, "block past capacity");
	for (uint64_t u = off / A; u < (off + size) / A; u++) {
		cr_assert(!shadow_test(s, u), "overlap at offset %llu",
			  (unsigned long long)(u * A));
		s->bits[u / 8] |= (uint8_t)(1u << (u % 8));
	}
}

static void shadow_clear(struct shadow *s, const struct mc_alloc_block *b)
{
	uint64_t off = mc_alloc_block_offset(b), size = mc_alloc_block_size(b);

	for (uint64_t u = off / A; u < (off + size) / A; u++) {
		cr_assert(shadow_test(s, u));
		s->bits[u / 8] &= (uint8_t) ~(1u << (u % 8));
	}
}

/* The longest run of free units, in bytes. */
static uint64_t shadow_largest_free(const struct shadow *s)
{
	uint64_t best = 0, run = 0;

	for (uint64_t u = 0; u < s->units; u++) {
		run = shadow_test(s, u) ? 0 : run + 1;
		if (run > best)
			best = run;
	}
	return best * A;
}

Test(alloc, create_rejects_bad_sizes)
{
	cr_expect_eq(mc_alloc_create(0, &al), -EINVAL);
	cr_expect_null(al);
	cr_expect_eq(mc_alloc_create(A - 1, &al), -EINVAL);
	cr_expect_eq(mc_alloc_create(MC_ALLOC_MAX_CAPACITY + A, &al), -EINVAL);
	cr_expect_eq(mc_alloc_create(UINT64_MAX, &al), -EINVAL);
	cr_expect_null(al);
}

Test(alloc, create_rounds_capacity_down)
{
	make(1000);
	cr_expect_eq(mc_alloc_capacity(al), 960);
	cr_expect_eq(mc_alloc_largest_free(al), 960);
	cr_expect_eq(mc_alloc_used(al), 0);
	check();
	mc_alloc_destroy(al);
	make(A);
	cr_expect_eq(mc_alloc_capacity(al), A);
	(void)must_alloc(1);
	cr_expect_eq(mc_alloc_largest_free(al), 0);
	check();
}

Test(alloc, zero_length_is_invalid)
{
	struct mc_alloc_block *b = (void *)1;

	make(MiB);
	cr_expect_eq(mc_alloc_alloc(al, 0, &b), -EINVAL);
	cr_expect_null(b);
	cr_expect_eq(mc_alloc_used(al), 0);
}

Test(alloc, alignment_and_rounding)
{
	static const uint64_t lens[] = { 1,	  2,	      63,    64,
					 65,	  127,	      128,   129,
					 1000,	  2047,	      2048,  2049,
					 4095,	  4097,	      65537, MiB - 1,
					 MiB + 1, 3 * MiB + 7 };
	uint64_t used = 0;

	make(64 * MiB);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct mc_alloc_block *b = must_alloc(lens[i]);
		uint64_t want = (lens[i] + A - 1) / A * A;

		cr_expect_eq(mc_alloc_block_offset(b) % A, 0);
		cr_expect_eq(mc_alloc_block_size(b), want, "len %llu -> %llu",
			     (unsigned long long)lens[i],
			     (unsigned long long)mc_alloc_block_size(b));
		used += want;
		cr_expect_eq(mc_alloc_used(al), used);
	}
	check();
}

Test(alloc, too_large_is_enospc)
{
	struct mc_alloc_block *b;

	make(MiB);
	cr_expect_eq(mc_alloc_alloc(al, MiB + 1, &b), -ENOSPC);
	cr_expect_eq(mc_alloc_alloc(al, UINT64_MAX, &b), -ENOSPC);
	cr_expect_eq(mc_alloc_alloc(al, UINT64_MAX - 62, &b), -ENOSPC);
	b = must_alloc(MiB);
	cr_expect_eq(mc_alloc_block_offset(b), 0);
	cr_expect_eq(mc_alloc_block_size(b), MiB);
}

/*
 * Thousands of random allocs and frees of mixed sizes, every block checked
 * against the shadow bitmap; then everything freed in random order must
 * coalesce back to a single free block.
 */
static void random_churn(uint64_t capacity, uint64_t max_len, int ops,
			 uint64_t seed, int *n_ok_out, int *n_enospc_out)
{
	enum { SLOTS = 512 };
	struct mc_alloc_block *live[SLOTS] = { 0 };
	struct shadow sh;
	uint64_t used = 0;
	int n_enospc = 0, n_ok = 0;

	rng_state = seed;
	make(capacity);
	shadow_init(&sh, capacity);
	for (int i = 0; i < ops; i++) {
		unsigned k = (unsigned)(rnd() % SLOTS);

		if (live[k]) {
			used -= mc_alloc_block_size(live[k]);
			shadow_clear(&sh, live[k]);
			mc_alloc_free(al, live[k]);
			live[k] = NULL;
		} else {
			/* Mostly small, sometimes large: log-uniform. */
			uint64_t len = rnd_range(1, 1ull << rnd_range(0, 63));
			int rc;

			len = len % max_len + 1;
			rc = mc_alloc_alloc(al, len, &live[k]);
			if (rc == -ENOSPC) {
				cr_assert_null(live[k]);
				/* It fails only when nothing fits. */
				cr_assert_lt(mc_alloc_largest_free(al),
					     (len + A - 1) / A * A);
				n_enospc++;
				continue;
			}
			cr_assert_eq(rc, 0);
			cr_assert_geq(mc_alloc_block_size(live[k]), len);
			cr_assert_lt(mc_alloc_block_size(live[k]) - len, A);
			shadow_set(&sh, live[k]);
			used += mc_alloc_block_size(live[k]);
			n_ok++;
		}
		cr_assert_eq(mc_alloc_used(al), used);
		if (i % 512 == 0) {
			check();
			cr_assert_eq(mc_alloc_largest_free(al),
				     shadow_largest_free(&sh));
		}
	}
	check();
	for (unsigned k = 0; k < SLOTS; k++) {
		unsigned j = (unsigned)(rnd() % SLOTS);
		struct mc_alloc_block *t = live[k];

		live[k] = live[j];
		live[j] = t;
	}
	for (unsigned k = 0; k < SLOTS; k++) {
		if (live[k]) {
			shadow_clear(&sh, live[k]);
			mc_alloc_free(al, live[k]);
		}
	}
	check();
	cr_expect_eq(mc_alloc_used(al), 0);
	cr_expect_eq(mc_alloc_largest_free(al), mc_alloc_capacity(al));
	/* One free block: the whole capacity allocates at offset 0. */
	live[0] = must_alloc(mc_alloc_capacity(al));
	cr_expect_eq(mc_alloc_block_offset(live[0]), 0);
	free(sh.bits);
	*n_ok_out = n_ok;
	*n_enospc_out = n_enospc;
}

Test(alloc, random_churn_roomy)
{
	int ok, enospc;

	random_churn(256 * MiB, 2 * MiB, 20000, 1, &ok, &enospc);
	cr_expect_gt(ok, 8000);
	cr_expect_eq(enospc, 0);
}

/* Small pool: many -ENOSPC, the fallback path and exact fits get used. */
Test(alloc, random_churn_tight)
{
	int ok, enospc;

	random_churn(8 * MiB, 256 * KiB, 20000, 2, &ok, &enospc);
	cr_expect_gt(ok, 4000);
	cr_expect_gt(enospc, 100);
}

Test(alloc, random_churn_odd_capacity)
{
	int ok, enospc;

	random_churn(3 * MiB + 5 * 64 + 17, 64 * KiB, 10000, 3, &ok, &enospc);
	cr_expect_gt(ok, 2000);
	cr_expect_gt(enospc, 0);
}

Test(alloc, coalesce_in_every_order)
{
	static const int orders[6][3] = {
		{ 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 },
		{ 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 }
	};

	make(MiB);
	for (int o = 0; o < 6; o++) {
		struct mc_alloc_block *b[3];

		for (int i = 0; i < 3; i++)
			b[i] = must_alloc(MiB / 4);
		for (int i = 0; i < 3; i++) {
			mc_alloc_free(al, b[orders[o][i]]);
			check();
		}
		cr_expect_eq(mc_alloc_used(al), 0);
		cr_expect_eq(mc_alloc_largest_free(al), MiB);
	}
}

Test(alloc, enospc_when_full_then_success_after_free)
{
	struct mc_alloc_block *b[16], *x = (void *)1;

	make(MiB);
	for (int i = 0; i < 16; i++)
		b[i] = must_alloc(64 * KiB);
	cr_expect_eq(mc_alloc_used(al), MiB);
	cr_expect_eq(mc_alloc_largest_free(al), 0);
	cr_expect_eq(mc_alloc_alloc(al, 1, &x), -ENOSPC);
	cr_expect_null(x);
	cr_expect_eq(mc_alloc_used(al), MiB);
	check();

	mc_alloc_free(al, b[7]);
	cr_expect_eq(mc_alloc_largest_free(al), 64 * KiB);
	cr_expect_eq(mc_alloc_alloc(al, 64 * KiB + 1, &x), -ENOSPC);
	x = must_alloc(64 * KiB);
	cr_expect_eq(mc_alloc_block_offset(x), 7 * 64 * KiB);
	cr_expect_eq(mc_alloc_alloc(al, 1, &x), -ENOSPC);
	check();
}

/*
 * The last free block's size is not a class boundary: good fit rounds the
 * request up past it, so only the fallback scan of the request's own class
 * can hand it out.
 */
Test(alloc, exact_fit_of_last_block)
{
	const uint64_t s = 3001 * A; /* 192064: inside [128 KiB, 256 KiB) */
	struct mc_alloc_block *big, *last, *x;

	make(4 * MiB);
	big = must_alloc(4 * MiB - s);
	cr_expect_eq(mc_alloc_largest_free(al), s);
	last = must_alloc(s);
	cr_expect_eq(mc_alloc_block_offset(last), 4 * MiB - s);
	cr_expect_eq(mc_alloc_block_size(last), s);
	cr_expect_eq(mc_alloc_used(al), 4 * MiB);
	cr_expect_eq(mc_alloc_alloc(al, 1, &x), -ENOSPC);
	check();

	/* A request just under the block, rounded to the same size. */
	mc_alloc_free(al, last);
	last = must_alloc(s - A + 1);
	cr_expect_eq(mc_alloc_block_size(last), s);
	mc_alloc_free(al, last);
	/* One a unit smaller leaves a one-unit remainder. */
	last = must_alloc(s - A);
	cr_expect_eq(mc_alloc_largest_free(al), A);
	x = must_alloc(A);
	cr_expect_eq(mc_alloc_block_offset(x), 4 * MiB - A);
	mc_alloc_free(al, x);
	mc_alloc_free(al, last);
	mc_alloc_free(al, big);
	cr_expect_eq(mc_alloc_largest_free(al), 4 * MiB);
	check();
}

/*
 * Several free blocks of one class, only one of them big enough: the
 * fallback scan must skip the small ones and take it.
 */
Test(alloc, fallback_scan_skips_too_small_blocks)
{
	const uint64_t c = 128 * KiB; /* class width here is 4 KiB */
	const uint64_t sizes[4] = { c + 64, c + 3 * 64, c + 1024, c + 128 };
	struct mc_alloc_block *hole[4], *sep[4], *x;
	uint64_t total = 0;

	for (int i = 0; i < 4; i++)
		total += sizes[i] + A;
	make(total);
	for (int i = 0; i < 4; i++) {
		hole[i] = must_alloc(sizes[i]);
		sep[i] = must_alloc(A);
	}
	cr_expect_eq(mc_alloc_used(al), total);
	for (int i = 0; i < 4; i++)
		mc_alloc_free(al, hole[i]);
	check();
	cr_expect_eq(mc_alloc_largest_free(al), c + 1024);
	x = must_alloc(c + 1000);
	cr_expect_eq(mc_alloc_block_offset(x),
		     mc_alloc_block_offset(sep[1]) + A);
	cr_expect_eq(mc_alloc_block_size(x), c + 1024);
	cr_expect_eq(mc_alloc_alloc(al, c + 1000, &x), -ENOSPC);
	cr_expect_eq(mc_alloc_largest_free(al), c + 3 * 64);
	x = must_alloc(c + 129);
	cr_expect_eq(mc_alloc_block_size(x), c + 3 * 64);
	check();
}

Test(alloc, reserve_then_alloc_fills_gaps)
{
	static const uint64_t rs[][2] = { { 0, 4 * KiB },
					  { 64 * KiB, 64 * KiB },
					  { 256 * KiB, 60 * KiB + 1 },
					  { 1020 * KiB, 4 * KiB } };
	struct shadow sh;
	uint64_t reserved = 0, n = 0;
	struct mc_alloc_block *b;
	int rc;

	make(MiB);
	shadow_init(&sh, MiB);
	for (size_t i = 0; i < 4; i++) {
		b = must_reserve(rs[i][0], rs[i][1]);
		cr_expect_eq(mc_alloc_block_size(b),
			     (rs[i][1] + A - 1) / A * A);
		shadow_set(&sh, b);
		reserved += mc_alloc_block_size(b);
		check();
	}
	cr_expect_eq(mc_alloc_used(al), reserved);
	cr_expect_eq(reserved, 132 * KiB + 64);
	/* 4 KiB blocks fill everything but the 64 bytes left next to the
	 * odd reservation; none overlaps a reserved range. */
	while ((rc = mc_alloc_alloc(al, 4 * KiB, &b)) == 0) {
		shadow_set(&sh, b);
		n++;
	}
	cr_expect_eq(rc, -ENOSPC);
	cr_expect_eq(n, (MiB - 132 * KiB) / (4 * KiB) - 1);
	cr_expect_eq(mc_alloc_largest_free(al), 4 * KiB - 64);
	b = must_alloc(4 * KiB - 64);
	shadow_set(&sh, b);
	cr_expect_eq(mc_alloc_used(al), MiB);
	cr_expect_eq(shadow_largest_free(&sh), 0);
	check();
	free(sh.bits);
}

Test(alloc, reserve_overlap_is_eexist)
{
	struct mc_alloc_block *r, *x = (void *)1;
	const uint64_t o = 64 * KiB, l = 64 * KiB;

	make(MiB);
	r = must_reserve(o, l);
	/* Same, inside, straddling either end, spanning, touching none. */
	cr_expect_eq(mc_alloc_reserve(al, o, l, &x), -EEXIST);
	cr_expect_null(x);
	cr_expect_eq(mc_alloc_reserve(al, o + A, A, &x), -EEXIST);
	cr_expect_eq(mc_alloc_reserve(al, o - A, 2 * A, &x), -EEXIST);
	cr_expect_eq(mc_alloc_reserve(al, o - A, A + 1, &x), -EEXIST);
	cr_expect_eq(mc_alloc_reserve(al, o + l - A, 2 * A, &x), -EEXIST);
	cr_expect_eq(mc_alloc_reserve(al, 0, MiB, &x), -EEXIST);
	cr_expect_eq(mc_alloc_reserve(al, o + l - A, 1, &x), -EEXIST);
	cr_expect_eq(mc_alloc_used(al), l);
	check();
	/* Directly adjacent on both sides is fine. */
	(void)must_reserve(o - A, A);
	(void)must_reserve(o + l, A);
	/* An allocated (not reserved) block conflicts the same way. */
	x = must_alloc(A);
	cr_expect_eq(mc_alloc_block_offset(x), 0);
	cr_expect_eq(mc_alloc_reserve(al, 0, A, &x), -EEXIST);
	cr_expect_eq(mc_alloc_used(al), l + 3 * A);
	mc_alloc_free(al, r);
	(void)must_reserve(o + A, A);
	check();
}

Test(alloc, reserve_invalid)
{
	struct mc_alloc_block *x = (void *)1;

	make(MiB);
	cr_expect_eq(mc_alloc_reserve(al, 0, 0, &x), -EINVAL);
	cr_expect_null(x);
	cr_expect_eq(mc_alloc_reserve(al, 1, A, &x), -EINVAL);
	cr_expect_eq(mc_alloc_reserve(al, A + 32, A, &x), -EINVAL);
	cr_expect_eq(mc_alloc_reserve(al, MiB, A, &x), -EINVAL);
	cr_expect_eq(mc_alloc_reserve(al, MiB - A, A + 1, &x), -EINVAL);
	cr_expect_eq(mc_alloc_reserve(al, 0, MiB + 1, &x), -EINVAL);
	cr_expect_eq(mc_alloc_reserve(al, MiB - A, UINT64_MAX, &x), -EINVAL);
	cr_expect_eq(mc_alloc_reserve(al, UINT64_MAX - 63, A, &x), -EINVAL);
	cr_expect_eq(mc_alloc_used(al), 0);
	(void)must_reserve(MiB - A, A);
	(void)must_reserve(0, MiB - A);
	cr_expect_eq(mc_alloc_used(al), MiB);
	check();
}

/*
 * A restart: record a random allocation state, rebuild it with reserve in
 * shuffled and in ascending order, and get the same picture back.
 */
static void restore(bool ascending)
{
	enum { N = 3000 };
	static uint64_t rec[N][2];
	struct mc_alloc_block *blocks[N], *dup;
	uint64_t used, largest, n = 0;
	struct shadow sh;
	int rc;

	rng_state = 42;
	make(64 * MiB);
	for (int i = 0; i < N; i++) {
		rc = mc_alloc_alloc(al, rnd_range(1, 30 * KiB), &blocks[i]);
		cr_assert_eq(rc, 0);
	}
	for (int i = 0; i < N; i++) {
		if (rnd() % 3 == 0) {
			mc_alloc_free(al, blocks[i]);
		} else {
			rec[n][0] = mc_alloc_block_offset(blocks[i]);
			rec[n][1] = mc_alloc_block_size(blocks[i]);
			n++;
		}
	}
	used = mc_alloc_used(al);
	largest = mc_alloc_largest_free(al);
	mc_alloc_destroy(al);

	if (ascending) {
		/* rec is in allocation order, which is offset order here. */
		for (uint64_t i = 1; i < n; i++)
			cr_assert_gt(rec[i][0], rec[i - 1][0]);
	} else {
		for (uint64_t i = 0; i < n; i++) {
			uint64_t j = rnd() % n, t0 = rec[i][0], t1 = rec[i][1];

			rec[i][0] = rec[j][0];
			rec[i][1] = rec[j][1];
			rec[j][0] = t0;
			rec[j][1] = t1;
		}
	}
	make(64 * MiB);
	shadow_init(&sh, 64 * MiB);
	for (uint64_t i = 0; i < n; i++) {
		blocks[i] = must_reserve(rec[i][0], rec[i][1]);
		shadow_set(&sh, blocks[i]);
		cr_assert_eq(mc_alloc_reserve(al, rec[i][0], rec[i][1], &dup),
			     -EEXIST);
	}
	check();
	cr_expect_eq(mc_alloc_used(al), used);
	cr_expect_eq(mc_alloc_largest_free(al), largest);
	cr_expect_eq(shadow_largest_free(&sh), largest);
	/* New allocations land only in the gaps. */
	for (;;) {
		struct mc_alloc_block *b;

		rc = mc_alloc_alloc(al, rnd_range(1, 8 * KiB), &b);
		if (rc)
			break;
		shadow_set(&sh, b);
	}
	cr_expect_eq(rc, -ENOSPC);
	check();
	free(sh.bits);
}

Test(alloc, reserve_restores_state_shuffled)
{
	restore(false);
}

Test(alloc, reserve_restores_state_ascending)
{
	restore(true);
}

/* A reservation freed again coalesces with the free space around it. */
Test(alloc, reserve_then_free_coalesces)
{
	struct mc_alloc_block *b[8];

	make(MiB);
	for (int i = 0; i < 8; i++)
		b[i] = must_reserve((uint64_t)(7 - i) * 128 * KiB + 4 * KiB,
				    64 * KiB);
	check();
	for (int i = 0; i < 8; i += 2)
		mc_alloc_free(al, b[i]);
	check();
	for (int i = 1; i < 8; i += 2)
		mc_alloc_free(al, b[i]);
	check();
	cr_expect_eq(mc_alloc_used(al), 0);
	cr_expect_eq(mc_alloc_largest_free(al), MiB);
}

Test(alloc, one_tib)
{
	struct mc_alloc_block *b[1024], *x;

	make(TiB);
	cr_expect_eq(mc_alloc_capacity(al), TiB);
	cr_expect_eq(mc_alloc_largest_free(al), TiB);
	x = must_alloc(TiB);
	cr_expect_eq(mc_alloc_block_size(x), TiB);
	cr_expect_eq(mc_alloc_used(al), TiB);
	mc_alloc_free(al, x);
	cr_expect_eq(mc_alloc_alloc(al, TiB + 1, &x), -ENOSPC);

	/* 1024 x 1 GiB fill it exactly, at the offsets expected. */
	for (int i = 0; i < 1024; i++) {
		b[i] = must_alloc(GiB);
		cr_expect_eq(mc_alloc_block_offset(b[i]), (uint64_t)i * GiB);
	}
	cr_expect_eq(mc_alloc_used(al), TiB);
	cr_expect_eq(mc_alloc_alloc(al, A, &x), -ENOSPC);
	mc_alloc_free(al, b[1023]);
	cr_expect_eq(mc_alloc_largest_free(al), GiB);
	/* Odd sizes near the top: the last unit, then the rest. */
	(void)must_reserve(TiB - A, 1);
	x = must_alloc(GiB - A);
	cr_expect_eq(mc_alloc_block_offset(x), TiB - GiB);
	cr_expect_eq(mc_alloc_used(al), TiB);
	mc_alloc_free(al, x);
	for (int i = 0; i < 1023; i += 2)
		mc_alloc_free(al, b[i]);
	cr_expect_eq(mc_alloc_used(al), 511 * GiB + A);
	/* b[1022] merged with the range above it. */
	cr_expect_eq(mc_alloc_largest_free(al), 2 * GiB - A);
	for (int i = 1; i < 1023; i += 2)
		mc_alloc_free(al, b[i]);
	cr_expect_eq(mc_alloc_used(al), A);
	cr_expect_eq(mc_alloc_largest_free(al), TiB - A);
	/* 700 GiB + 300 GiB + the rest, and sizes above 2^32 round right. */
	x = must_alloc(700 * GiB + 1);
	cr_expect_eq(mc_alloc_block_size(x), 700 * GiB + A);
	x = must_alloc(300 * GiB);
	cr_expect_eq(mc_alloc_block_offset(x), 700 * GiB + A);
	cr_expect_eq(mc_alloc_largest_free(al), 24 * GiB - 2 * A);
	x = must_alloc(24 * GiB - 2 * A);
	cr_expect_eq(mc_alloc_used(al), TiB);
	check();
}

/* The largest capacity accepted works at its edges too. */
Test(alloc, max_capacity)
{
	struct mc_alloc_block *x;

	make(MC_ALLOC_MAX_CAPACITY);
	cr_expect_eq(mc_alloc_capacity(al), MC_ALLOC_MAX_CAPACITY);
	x = must_alloc(MC_ALLOC_MAX_CAPACITY - A);
	cr_expect_eq(mc_alloc_largest_free(al), A);
	mc_alloc_free(al, x);
	x = must_alloc(MC_ALLOC_MAX_CAPACITY);
	cr_expect_eq(mc_alloc_block_size(x), MC_ALLOC_MAX_CAPACITY);
	mc_alloc_free(al, x);
	(void)must_reserve(MC_ALLOC_MAX_CAPACITY - A, A);
	cr_expect_eq(mc_alloc_alloc(al, MC_ALLOC_MAX_CAPACITY, &x), -ENOSPC);
	check();
}

Test(alloc, free_null_is_noop)
{
	make(MiB);
	mc_alloc_free(al, NULL);
	cr_expect_eq(mc_alloc_used(al), 0);
	check();
}

/* Freeing a block twice is caught while its node is still around. */
Test(alloc, double_free_aborts, .signal = SIGABRT)
{
	struct mc_alloc_block *b;

	make(MiB);
	(void)must_alloc(A);
	b = must_alloc(A);
	(void)must_alloc(A);
	mc_alloc_free(al, b);
	mc_alloc_free(al, b);
}
