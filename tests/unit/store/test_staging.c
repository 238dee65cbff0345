/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the staging buffer allocator (mooncakefs/lib/staging.c):
 * fit, alignment, coalescing back to one extent, refusal of oversize
 * requests, waiting for space with a timeout, and many threads at once.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "staging.h"

Test(staging, alloc_free_coalesce)
{
	struct mcs_staging *s;
	void *p[16];

	cr_assert_eq(mcs_staging_create(NULL, 1 << 20, &s), 0);
	cr_assert_eq(mcs_staging_size(s), 1 << 20);
	for (int i = 0; i < 16; i++) {
		cr_assert_eq(mcs_staging_alloc(s, 1000 + i, 0, &p[i]), 0);
		cr_assert_eq((uintptr_t)p[i] % 64, 0);
		memset(p[i], i, 1000 + i);
	}
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 1000 + i; j++)
			cr_assert_eq(((uint8_t *)p[i])[j], i);
	/* Free odd then even: everything must coalesce again. */
	for (int i = 1; i < 16; i += 2)
		mcs_staging_free(s, p[i], 1000 + i);
	for (int i = 0; i < 16; i += 2)
		mcs_staging_free(s, p[i], 1000 + i);
	cr_assert_eq(mcs_staging_free_bytes(s), 1 << 20);
	cr_assert_eq(mcs_staging_alloc(s, 1 << 20, 0, &p[0]), 0);
	mcs_staging_free(s, p[0], 1 << 20);
	mcs_staging_destroy(s, NULL);
}

Test(staging, too_big_and_timeout)
{
	struct mcs_staging *s;
	void *a, *b;

	cr_assert_eq(mcs_staging_create(NULL, 4096, &s), 0);
	cr_assert_eq(mcs_staging_alloc(s, 4097, 0, &a), -EMSGSIZE);
	cr_assert_eq(mcs_staging_alloc(s, 0, 0, &a), -EINVAL);
	cr_assert_eq(mcs_staging_alloc(s, 4000, 0, &a), 0);
	cr_assert_eq(mcs_staging_alloc(s, 200, 50, &b), -ENOBUFS);
	mcs_staging_free(s, a, 4000);
	cr_assert_eq(mcs_staging_alloc(s, 200, 0, &b), 0);
	mcs_staging_free(s, b, 200);
	mcs_staging_destroy(s, NULL);
	cr_assert_eq(mcs_staging_create(NULL, 0, &s), -EINVAL);
}

struct waiter {
	struct mcs_staging *s;
	int rc;
};

static void *wait_for_space(void *arg)
{
	struct waiter *w = arg;
	void *p;

	w->rc = mcs_staging_alloc(w->s, 3000, 5000, &p);
	if (!w->rc)
		mcs_staging_free(w->s, p, 3000);
	return NULL;
}

Test(staging, waits_for_free)
{
	struct mcs_staging *s;
	struct waiter w;
	pthread_t t;
	void *a;

	cr_assert_eq(mcs_staging_create(NULL, 4096, &s), 0);
	cr_assert_eq(mcs_staging_alloc(s, 4096, 0, &a), 0);
	w = (struct waiter){ .s = s, .rc = 1 };
	pthread_create(&t, NULL, wait_for_space, &w);
	usleep(50000);
	mcs_staging_free(s, a, 4096);
	pthread_join(t, NULL);
	cr_assert_eq(w.rc, 0);
	cr_assert_eq(mcs_staging_free_bytes(s), 4096);
	mcs_staging_destroy(s, NULL);
}

static void *churn(void *arg)
{
	struct mcs_staging *s = arg;
	unsigned seed = (unsigned)(uintptr_t)pthread_self();

	for (int i = 0; i < 2000; i++) {
		size_t len = 1 + (size_t)(rand_r(&seed) % 20000);
		uint8_t tag = (uint8_t)rand_r(&seed);
		uint8_t *p;

		if (mcs_staging_alloc(s, len, 5000, (void **)&p))
			return (void *)1;
		memset(p, tag, len);
		for (size_t j = 0; j < len; j += 997)
			if (p[j] != tag)
				return (void *)2;
		mcs_staging_free(s, p, len);
	}
	return NULL;
}

Test(staging, threads)
{
	struct mcs_staging *s;
	pthread_t t[8];

	cr_assert_eq(mcs_staging_create(NULL, 64 << 10, &s), 0);
	for (int i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, churn, s);
	for (int i = 0; i < 8; i++) {
		void *r;
		pthread_join(t[i], &r);
		cr_assert_null(r, "thread %d: %p", i, r);
	}
	cr_assert_eq(mcs_staging_free_bytes(s), 64 << 10);
	mcs_staging_destroy(s, NULL);
}
