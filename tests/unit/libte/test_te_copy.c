/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for libte/copy.c, the parallel copy of the same-host
 * transports: byte-exact results at sizes around the chunk and threshold
 * boundaries, many threads copying at once (one job at a time, the rest
 * alone), helpers turned off by the environment, and teardown with and
 * without helpers started.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "te_int.h"

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)x;
	}
}

static void check_copy(struct te_copier *cp, size_t len, unsigned seed)
{
	unsigned char *src = malloc(len + 1), *dst = malloc(len + 2);

	cr_assert(src && dst);
	fill(src, len, seed);
	memset(dst, 0xA5, len + 2);
	te__copy(cp, dst + 1, src, len);
	cr_assert_eq(memcmp(dst + 1, src, len), 0, "len %zu", len);
	cr_assert_eq(dst[0], 0xA5, "wrote before dst (len %zu)", len);
	cr_assert_eq(dst[len + 1], 0xA5, "wrote past dst (len %zu)", len);
	free(src);
	free(dst);
}

static const size_t sizes[] = {
	0,
	1,
	4095,
	65536,
	(256u << 10) - 1,
	256u << 10,
	(256u << 10) + 1,
	(1u << 20) + 7,
	3u << 20,
	16u << 20,
};

Test(te_copy, byte_exact_at_every_size)
{
	struct te_copier *cp;

	setenv("MC_TE_COPY_THREADS", "2", 1);
	cr_assert_eq(te__copier_create(&cp), 0);
	for (unsigned r = 0; r < 3; r++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			check_copy(cp, sizes[i], r * 100 + (unsigned)i);
	te__copier_destroy(cp);
}

Test(te_copy, null_copier_is_memcpy)
{
	check_copy(NULL, 1u << 20, 7);
}

Test(te_copy, helpers_off_by_environment)
{
	struct te_copier *cp;

	setenv("MC_TE_COPY_THREADS", "0", 1);
	cr_assert_eq(te__copier_create(&cp), 0);
	check_copy(cp, 4u << 20, 9);
	te__copier_destroy(cp);
}

Test(te_copy, destroy_without_use)
{
	struct te_copier *cp;

	setenv("MC_TE_COPY_THREADS", "3", 1);
	cr_assert_eq(te__copier_create(&cp), 0);
	te__copier_destroy(cp);
}

struct racer {
	struct te_copier *cp;
	unsigned seed;
};

static void *race(void *arg)
{
	struct racer *r = arg;

	for (unsigned i = 0; i < 20; i++)
		check_copy(r->cp, (1u << 20) + i * 4099, r->seed + i);
	return NULL;
}

Test(te_copy, threads_copying_at_once)
{
	struct racer r[4];
	pthread_t t[4];
	struct te_copier *cp;

	setenv("MC_TE_COPY_THREADS", "1", 1);
	setenv("MC_TE_COPY_SPIN_US", "0", 1);
	cr_assert_eq(te__copier_create(&cp), 0);
	for (unsigned i = 0; i < 4; i++) {
		r[i] = (struct racer){ cp, i * 1000 };
		cr_assert_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	te__copier_destroy(cp);
}
