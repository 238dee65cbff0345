/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/mc_map.c: put/get/replace/delete, counts,
 * iteration, binary keys and values, NUL termination of values, growth
 * to 100k entries and the SipHash-1-3 function itself.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_map.h"

static struct mc_map *map;

static void map_setup(void)
{
	cr_assert_eq(mc_map_create(&map), 0);
	cr_assert_not_null(map);
}

static void map_teardown(void)
{
	mc_map_destroy(map);
	map = NULL;
}

TestSuite(mc_map, .init = map_setup, .fini = map_teardown);

static int put_str(const char *k, const char *v)
{
	return mc_map_put(map, k, strlen(k), v, strlen(v));
}

static const struct mc_map_entry *get_str(const char *k)
{
	return mc_map_get(map, k, strlen(k));
}

Test(mc_map, empty)
{
	cr_expect_eq(mc_map_count(map), 0);
	cr_expect_null(get_str("nothing"));
	cr_expect_eq(mc_map_del(map, "nothing", 7), -ENOENT);
	cr_expect_eq(mc_map_count(map), 0);
}

Test(mc_map, put_get)
{
	const struct mc_map_entry *e;

	cr_assert_eq(put_str("alpha", "one"), 0);
	cr_assert_eq(put_str("beta", "two"), 0);
	cr_expect_eq(mc_map_count(map), 2);

	e = get_str("alpha");
	cr_assert_not_null(e);
	cr_expect_eq(e->key_len, 5);
	cr_expect_eq(memcmp(e->key, "alpha", 5), 0);
	cr_expect_eq(e->key[5], '\0');
	cr_expect_eq(e->val_len, 3);
	cr_expect_str_eq(e->val, "one");

	e = get_str("beta");
	cr_assert_not_null(e);
	cr_expect_str_eq(e->val, "two");

	/* Prefixes and extensions of a key are other keys. */
	cr_expect_null(get_str("alph"));
	cr_expect_null(get_str("alphaa"));
	cr_expect_null(get_str(""));
}

Test(mc_map, replace_keeps_count)
{
	const struct mc_map_entry *e;

	cr_assert_eq(put_str("k", "first value"), 0);
	cr_assert_eq(put_str("k", "2nd"), 0);
	cr_expect_eq(mc_map_count(map), 1);
	e = get_str("k");
	cr_assert_not_null(e);
	cr_expect_eq(e->val_len, 3);
	cr_expect_str_eq(e->val, "2nd");

	/* Replace with a longer value too. */
	cr_assert_eq(put_str("k", "a much longer third value"), 0);
	e = get_str("k");
	cr_assert_not_null(e);
	cr_expect_str_eq(e->val, "a much longer third value");
	cr_expect_eq(mc_map_count(map), 1);
}

Test(mc_map, delete)
{
	cr_assert_eq(put_str("a", "1"), 0);
	cr_assert_eq(put_str("b", "2"), 0);
	cr_expect_eq(mc_map_del(map, "a", 1), 0);
	cr_expect_eq(mc_map_count(map), 1);
	cr_expect_null(get_str("a"));
	cr_expect_not_null(get_str("b"));
	cr_expect_eq(mc_map_del(map, "a", 1), -ENOENT);
	cr_expect_eq(mc_map_count(map), 1);

	/* A deleted key can come back. */
	cr_assert_eq(put_str("a", "again"), 0);
	cr_expect_eq(mc_map_count(map), 2);
	cr_assert_not_null(get_str("a"));
	cr_expect_str_eq(get_str("a")->val, "again");
}

Test(mc_map, binary_keys_with_nuls)
{
	static const char k1[] = { 'a', '\0', 'b' };
	static const char k2[] = { 'a', '\0', 'c' };
	static const char k3[] = { 'a' };
	static const char k4[] = { '\0' };
	static const char k5[] = { '\0', '\0' };
	const struct mc_map_entry *e;

	cr_assert_eq(mc_map_put(map, k1, sizeof(k1), "1", 1), 0);
	cr_assert_eq(mc_map_put(map, k2, sizeof(k2), "2", 1), 0);
	cr_assert_eq(mc_map_put(map, k3, sizeof(k3), "3", 1), 0);
	cr_assert_eq(mc_map_put(map, k4, sizeof(k4), "4", 1), 0);
	cr_assert_eq(mc_map_put(map, k5, sizeof(k5), "5", 1), 0);
	cr_assert_eq(mc_map_put(map, "", 0, "empty", 5), 0);
	cr_expect_eq(mc_map_count(map), 6);

	e = mc_map_get(map, k1, sizeof(k1));
	cr_assert_not_null(e);
	cr_expect_str_eq(e->val, "1");
	cr_expect_eq(e->key_len, 3);
	cr_expect_eq(memcmp(e->key, k1, 3), 0);
	e = mc_map_get(map, k2, sizeof(k2));
	cr_assert_not_null(e);
	cr_expect_str_eq(e->val, "2");
	e = mc_map_get(map, k3, sizeof(k3));
	cr_assert_not_null(e);
	cr_expect_str_eq(e->val, "3");
	e = mc_map_get(map, k4, sizeof(k4));
	cr_assert_not_null(e);
	cr_expect_str_eq(e->val, "4");
	e = mc_map_get(map, k5, sizeof(k5));
	cr_assert_not_null(e);
	cr_expect_str_eq(e->val, "5");
	e = mc_map_get(map, "", 0);
	cr_assert_not_null(e);
	cr_expect_str_eq(e->val, "empty");

	cr_expect_eq(mc_map_del(map, k1, sizeof(k1)), 0);
	cr_expect_null(mc_map_get(map, k1, sizeof(k1)));
	cr_expect_not_null(mc_map_get(map, k2, sizeof(k2)));
	cr_expect_eq(mc_map_count(map), 5);
}

Test(mc_map, values_are_nul_terminated)
{
	static const char bin[] = { 'x', '\0', 'y', '\0', 'z' };
	const struct mc_map_entry *e;
	char buf[4] = { 'a', 'b', 'c', 'd' };

	/* The source is not NUL-terminated; the stored copy must be. */
	cr_assert_eq(mc_map_put(map, "k", 1, buf, 3), 0);
	e = get_str("k");
	cr_assert_not_null(e);
	cr_expect_eq(e->val_len, 3);
	cr_expect_eq(e->val[3], '\0');
	cr_expect_str_eq(e->val, "abc");

	cr_assert_eq(mc_map_put(map, "bin", 3, bin, sizeof(bin)), 0);
	e = get_str("bin");
	cr_assert_not_null(e);
	cr_expect_eq(e->val_len, sizeof(bin));
	cr_expect_eq(memcmp(e->val, bin, sizeof(bin)), 0);
	cr_expect_eq(e->val[sizeof(bin)], '\0');

	cr_assert_eq(mc_map_put(map, "empty", 5, "", 0), 0);
	e = get_str("empty");
	cr_assert_not_null(e);
	cr_expect_eq(e->val_len, 0);
	cr_expect_eq(e->val[0], '\0');
}

Test(mc_map, inputs_are_copied)
{
	char key[8], val[8];
	const struct mc_map_entry *e;

	memcpy(key, "key1", 5);
	memcpy(val, "val1", 5);
	cr_assert_eq(mc_map_put(map, key, 4, val, 4), 0);
	memcpy(key, "XXXX", 5);
	memcpy(val, "YYYY", 5);
	cr_expect_null(mc_map_get(map, key, 4));
	e = mc_map_get(map, "key1", 4);
	cr_assert_not_null(e);
	cr_expect_str_eq(e->val, "val1");
}

struct visit {
	unsigned char *seen;
	size_t n;
	size_t calls;
	size_t bad;
};

static void visit_fn(const struct mc_map_entry *e, void *arg)
{
	struct visit *v = arg;
	unsigned idx;
	char want[32];

	v->calls++;
	if (sscanf(e->key, "key%u", &idx) != 1 || idx >= v->n) {
		v->bad++;
		return;
	}
	snprintf(want, sizeof(want), "value-%u", idx);
	if (strcmp(e->val, want) != 0 || e->val_len != strlen(want))
		v->bad++;
	v->seen[idx]++;
}

/* Insert key<i> -> value-<i>; returns the number of failed puts. */
static size_t fill(size_t n)
{
	char k[32], v[32];
	size_t failed = 0;

	for (size_t i = 0; i < n; i++) {
		int kl = snprintf(k, sizeof(k), "key%zu", i);
		int vl = snprintf(v, sizeof(v), "value-%zu", i);

		if (mc_map_put(map, k, (size_t)kl, v, (size_t)vl))
			failed++;
	}
	return failed;
}

Test(mc_map, foreach_visits_each_once)
{
	struct visit v = { .n = 1000 };

	v.seen = calloc(v.n, 1);
	cr_assert_not_null(v.seen);
	cr_assert_eq(fill(v.n), 0);
	mc_map_foreach(map, visit_fn, &v);
	cr_expect_eq(v.calls, v.n);
	cr_expect_eq(v.bad, 0);
	for (size_t i = 0; i < v.n; i++)
		cr_expect_eq(v.seen[i], 1, "key%zu seen %d times", i,
			     v.seen[i]);
	free(v.seen);
}

static void count_fn(const struct mc_map_entry *e, void *arg)
{
	(*(size_t *)arg)++;
}

Test(mc_map, foreach_on_empty_map)
{
	size_t calls = 0;

	mc_map_foreach(map, count_fn, &calls);
	cr_expect_eq(calls, 0);
}

/*
 * Bulk loops count their failures and assert once: criterion reports
 * every assertion to its runner, which is slow at this scale.
 */
Test(mc_map, grows_past_100k)
{
	const size_t n = 100000;
	size_t lost = 0, wrong = 0, del_failed = 0, missing = 0, stale = 0;
	struct visit v = { .n = n };
	size_t wrong_count = 0;
	char k[32], want[32];

	cr_assert_eq(fill(n), 0);
	cr_assert_eq(mc_map_count(map), n);
	for (size_t i = 0; i < n; i++) {
		int kl = snprintf(k, sizeof(k), "key%zu", i);
		const struct mc_map_entry *e = mc_map_get(map, k, (size_t)kl);

		snprintf(want, sizeof(want), "value-%zu", i);
		if (!e)
			lost++;
		else if (strcmp(e->val, want) || e->val_len != strlen(want))
			wrong++;
	}
	cr_expect_eq(lost, 0, "%zu keys lost after growth", lost);
	cr_expect_eq(wrong, 0, "%zu values wrong after growth", wrong);

	/* Delete the even keys; the odd ones must all remain. */
	for (size_t i = 0; i < n; i += 2) {
		int kl = snprintf(k, sizeof(k), "key%zu", i);

		if (mc_map_del(map, k, (size_t)kl))
			del_failed++;
	}
	cr_expect_eq(del_failed, 0);
	cr_assert_eq(mc_map_count(map), n / 2);
	for (size_t i = 0; i < n; i++) {
		int kl = snprintf(k, sizeof(k), "key%zu", i);
		const struct mc_map_entry *e = mc_map_get(map, k, (size_t)kl);

		if (i % 2 && !e)
			missing++;
		else if (!(i % 2) && e)
			stale++;
	}
	cr_expect_eq(missing, 0, "%zu odd keys missing", missing);
	cr_expect_eq(stale, 0, "%zu even keys not deleted", stale);

	v.seen = calloc(n, 1);
	cr_assert_not_null(v.seen);
	mc_map_foreach(map, visit_fn, &v);
	cr_expect_eq(v.calls, n / 2);
	cr_expect_eq(v.bad, 0);
	for (size_t i = 0; i < n; i++)
		if (v.seen[i] != i % 2)
			wrong_count++;
	cr_expect_eq(wrong_count, 0, "%zu keys visited a wrong number of times",
		     wrong_count);
	free(v.seen);
}

Test(mc_map, maps_are_independent)
{
	struct mc_map *other;

	cr_assert_eq(mc_map_create(&other), 0);
	cr_assert_eq(put_str("shared", "mine"), 0);
	cr_expect_null(mc_map_get(other, "shared", 6));
	cr_assert_eq(mc_map_put(other, "shared", 6, "theirs", 6), 0);
	cr_expect_str_eq(get_str("shared")->val, "mine");
	cr_expect_str_eq(mc_map_get(other, "shared", 6)->val, "theirs");
	mc_map_destroy(other);
	mc_map_destroy(NULL);
}

/*
 * Reference values: CPython 3.11 hashes bytes with SipHash-1-3 and, with
 * PYTHONHASHSEED=0, an all-zero key: hash(b"a") & (2**64 - 1).
 */
Test(mc_siphash, reference_vectors_zero_key)
{
	static const uint64_t zero[2] = { 0, 0 };

	cr_expect_eq(mc_siphash(zero, "a", 1), 0x407448d2b89b1813ULL);
	cr_expect_eq(mc_siphash(zero, "abcdefgh", 8), 0x3f7b849c0b8e35eaULL);
	cr_expect_eq(mc_siphash(zero, "hello world, mooncake!", 22),
		     0x8fa5640b5a09047dULL);
}

Test(mc_siphash, key_and_length_matter)
{
	static const uint64_t k1[2] = { 1, 2 }, k2[2] = { 1, 3 };
	static const char nul2[2] = { 0, 0 };

	cr_expect_eq(mc_siphash(k1, "data", 4), mc_siphash(k1, "data", 4));
	cr_expect_neq(mc_siphash(k1, "data", 4), mc_siphash(k2, "data", 4));
	/* Trailing NULs change the hash (the length is mixed in). */
	cr_expect_neq(mc_siphash(k1, nul2, 1), mc_siphash(k1, nul2, 2));
	cr_expect_neq(mc_siphash(k1, "", 0), mc_siphash(k1, nul2, 1));
}
