/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the writer's extent set (mooncakefs/lib/extents.c):
 * merging of overlapping and touching ranges in any order, and the gaps
 * left, checked against a byte map under random insertions.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "extents.h"

/* The gaps of [0, limit) as "s-e,s-e" into out. */
static void gaps(const struct mcs_extents *x, uint64_t limit, char *out,
		 size_t len)
{
	uint64_t from = 0, gs, ge;
	size_t at = 0;

	out[0] = '\0';
	while (mcs_extents_gap(x, from, limit, &gs, &ge)) {
		at += (size_t)snprintf(out + at, len - at, "%s%llu-%llu",
				       at ? "," : "", (unsigned long long)gs,
				       (unsigned long long)ge);
		from = ge;
	}
}

Test(extents, reverse_order_stays_one_range)
{
	struct mcs_extents x = { 0 };
	char g[256];

	for (int i = 9; i >= 0; i--)
		cr_assert_eq(mcs_extents_add(&x, i * 100, i * 100 + 100), 0);
	cr_assert_eq(x.n, 1);
	cr_assert_eq(x.v[0].start, 0);
	cr_assert_eq(x.v[0].end, 1000);
	gaps(&x, 1000, g, sizeof(g));
	cr_assert_str_eq(g, "");
	gaps(&x, 1200, g, sizeof(g));
	cr_assert_str_eq(g, "1000-1200");
	mcs_extents_free(&x);
}

Test(extents, holes_and_merges)
{
	struct mcs_extents x = { 0 };
	char g[256];

	gaps(&x, 50, g, sizeof(g));
	cr_assert_str_eq(g, "0-50");
	cr_assert_eq(mcs_extents_add(&x, 10, 20), 0);
	cr_assert_eq(mcs_extents_add(&x, 30, 40), 0);
	cr_assert_eq(mcs_extents_add(&x, 50, 60), 0);
	gaps(&x, 70, g, sizeof(g));
	cr_assert_str_eq(g, "0-10,20-30,40-50,60-70");
	/* A gap search may start inside a range or at its end. */
	uint64_t gs, ge;
	cr_assert(mcs_extents_gap(&x, 15, 70, &gs, &ge));
	cr_assert_eq(gs, 20);
	cr_assert_eq(ge, 30);
	cr_assert(mcs_extents_gap(&x, 20, 25, &gs, &ge));
	cr_assert_eq(gs, 20);
	cr_assert_eq(ge, 25);
	/* One range bridging three. */
	cr_assert_eq(mcs_extents_add(&x, 15, 55), 0);
	cr_assert_eq(x.n, 1);
	gaps(&x, 70, g, sizeof(g));
	cr_assert_str_eq(g, "0-10,60-70");
	/* Empty ranges change nothing. */
	cr_assert_eq(mcs_extents_add(&x, 5, 5), 0);
	cr_assert_eq(x.n, 1);
	mcs_extents_free(&x);
}

Test(extents, random_against_a_byte_map)
{
	enum { N = 2000 };
	static uint8_t map[N];
	struct mcs_extents x = { 0 };
	unsigned seed = 12345;

	memset(map, 0, sizeof(map));
	for (int round = 0; round < 400; round++) {
		uint64_t s = (uint64_t)(rand_r(&seed) % N);
		uint64_t len = (uint64_t)(rand_r(&seed) % 40) + 1;
		uint64_t e = s + len > N ? N : s + len;
		uint64_t from = 0, gs, ge, pos = 0;

		cr_assert_eq(mcs_extents_add(&x, s, e), 0);
		memset(map + s, 1, (size_t)(e - s));
		/* Sorted, disjoint, not touching. */
		for (size_t i = 1; i < x.n; i++)
			cr_assert_gt(x.v[i].start, x.v[i - 1].end);
		/* The gaps are exactly the unwritten bytes. */
		while (mcs_extents_gap(&x, from, N, &gs, &ge)) {
			for (; pos < gs; pos++)
				cr_assert_eq(map[pos], 1);
			for (; pos < ge; pos++)
				cr_assert_eq(map[pos], 0);
			from = ge;
		}
		for (; pos < N; pos++)
			cr_assert_eq(map[pos], 1);
	}
	mcs_extents_free(&x);
}
