/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the strict query-string decoding of
 * common/mc_http_query.c (mc_http_query_get, mc_http_unescape): escapes,
 * '+', refused NULs, buffer limits, repeated and missing parameters;
 * and mc_http_escape, whose output it decodes back.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_http.h"
#include "mc_sbuf.h"

static int unescape_str(const char *in, char *out, size_t out_len, size_t *n)
{
	return mc_http_unescape(in, strlen(in), out, out_len, n);
}

Test(mc_http_unescape, plain_and_escapes)
{
	static const struct {
		const char *in;
		const char *want;
	} cases[] = {
		{ "", "" },
		{ "abc", "abc" },
		{ "a+b", "a b" },
		{ "%20", " " },
		{ "%41%42%43", "ABC" },
		{ "%2f%2F", "//" },
		{ "%e2%82%ac", "\xe2\x82\xac" },
		{ "100%25", "100%" },
		{ "%2B", "+" },
		{ "a%3Db%26c", "a=b&c" },
		{ "%ff", "\xff" },
		{ "++", "  " },
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		char out[64];
		size_t n = 999;
		int rc = unescape_str(cases[i].in, out, sizeof(out), &n);

		cr_expect_eq(rc, 0, "unescape(\"%s\") = %d", cases[i].in, rc);
		if (rc)
			continue;
		cr_expect_str_eq(out, cases[i].want, "\"%s\"", cases[i].in);
		cr_expect_eq(n, strlen(cases[i].want), "\"%s\"", cases[i].in);
	}
}

Test(mc_http_unescape, malformed_is_einval)
{
	static const char *const cases[] = {
		"%",  "%4",   "a%",  "a%4", "%zz",   "%4g", "%g4",
		"%%", "%%41", "% 1", "%00", "a%00b", "%-1", "%+1",
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		char out[64];

		cr_expect_eq(unescape_str(cases[i], out, sizeof(out), NULL),
			     -EINVAL, "unescape(\"%s\")", cases[i]);
	}
}

Test(mc_http_unescape, raw_nul_refused)
{
	static const char in[] = { 'a', '\0', 'b' };
	char out[8];

	cr_expect_eq(mc_http_unescape(in, sizeof(in), out, sizeof(out), NULL),
		     -EINVAL);
}

Test(mc_http_unescape, length_bounds_input)
{
	char out[8];
	size_t n = 0;

	/* Only the first len bytes are decoded; a cut escape is malformed. */
	cr_assert_eq(mc_http_unescape("abcdef", 3, out, sizeof(out), &n), 0);
	cr_expect_str_eq(out, "abc");
	cr_expect_eq(n, 3);
	cr_expect_eq(mc_http_unescape("a%41", 3, out, sizeof(out), &n),
		     -EINVAL);
	cr_expect_eq(mc_http_unescape("a%41", 2, out, sizeof(out), &n),
		     -EINVAL);
}

Test(mc_http_unescape, output_capacity)
{
	char out[4];
	size_t n = 0;

	/* Three bytes and the NUL fit. */
	cr_assert_eq(unescape_str("abc", out, sizeof(out), &n), 0);
	cr_expect_str_eq(out, "abc");
	cr_expect_eq(n, 3);
	cr_assert_eq(unescape_str("%41%42%43", out, sizeof(out), &n), 0);
	cr_expect_str_eq(out, "ABC");
	cr_expect_eq(unescape_str("abcd", out, sizeof(out), NULL), -E2BIG);
	cr_expect_eq(unescape_str("%41%42%43%44", out, sizeof(out), NULL),
		     -E2BIG);
	cr_expect_eq(unescape_str("", out, 0, NULL), -E2BIG);
	cr_assert_eq(unescape_str("", out, 1, &n), 0);
	cr_expect_str_eq(out, "");
	cr_expect_eq(n, 0);
}

Test(mc_http_query_get, finds_parameter)
{
	char out[64];
	size_t n = 0;

	cr_assert_eq(mc_http_query_get("key=abc", "key", out, sizeof(out), &n),
		     0);
	cr_expect_str_eq(out, "abc");
	cr_expect_eq(n, 3);

	cr_assert_eq(mc_http_query_get("a=1&key=x%2Fy+z&b=2", "key", out,
				       sizeof(out), &n),
		     0);
	cr_expect_str_eq(out, "x/y z");
	cr_expect_eq(n, 5);

	cr_assert_eq(mc_http_query_get("a=1&b=2", "b", out, sizeof(out), NULL),
		     0);
	cr_expect_str_eq(out, "2");

	/* Empty segments are skipped. */
	cr_assert_eq(mc_http_query_get("&&key=v&&", "key", out, sizeof(out),
				       NULL),
		     0);
	cr_expect_str_eq(out, "v");

	/* '=' inside the value is kept. */
	cr_assert_eq(
		mc_http_query_get("key=a=b", "key", out, sizeof(out), NULL), 0);
	cr_expect_str_eq(out, "a=b");
}

Test(mc_http_query_get, empty_values)
{
	char out[8] = "junk";
	size_t n = 99;

	cr_assert_eq(mc_http_query_get("key=", "key", out, sizeof(out), &n), 0);
	cr_expect_str_eq(out, "");
	cr_expect_eq(n, 0);

	memcpy(out, "junk", 5);
	n = 99;
	cr_assert_eq(mc_http_query_get("key", "key", out, sizeof(out), &n), 0);
	cr_expect_str_eq(out, "");
	cr_expect_eq(n, 0);

	memcpy(out, "junk", 5);
	cr_assert_eq(mc_http_query_get("a=1&key&b=2", "key", out, sizeof(out),
				       NULL),
		     0);
	cr_expect_str_eq(out, "");
}

Test(mc_http_query_get, missing_is_enoent)
{
	char out[16];

	cr_expect_eq(mc_http_query_get(NULL, "key", out, sizeof(out), NULL),
		     -ENOENT);
	cr_expect_eq(mc_http_query_get("", "key", out, sizeof(out), NULL),
		     -ENOENT);
	cr_expect_eq(mc_http_query_get("other=1", "key", out, sizeof(out),
				       NULL),
		     -ENOENT);
	/* Names match whole: neither prefixes nor extensions. */
	cr_expect_eq(mc_http_query_get("keys=1&ke=2&mykey=3", "key", out,
				       sizeof(out), NULL),
		     -ENOENT);
	cr_expect_eq(mc_http_query_get("KEY=1", "key", out, sizeof(out), NULL),
		     -ENOENT);
	/* Parameter names are not unescaped. */
	cr_expect_eq(mc_http_query_get("k%65y=1", "key", out, sizeof(out),
				       NULL),
		     -ENOENT);
}

Test(mc_http_query_get, repeated_is_eexist)
{
	char out[16];

	cr_expect_eq(mc_http_query_get("key=a&key=b", "key", out, sizeof(out),
				       NULL),
		     -EEXIST);
	cr_expect_eq(mc_http_query_get("key=a&key=a", "key", out, sizeof(out),
				       NULL),
		     -EEXIST);
	cr_expect_eq(mc_http_query_get("key&key=b", "key", out, sizeof(out),
				       NULL),
		     -EEXIST);
	cr_expect_eq(mc_http_query_get("key=a&x=1&key", "key", out, sizeof(out),
				       NULL),
		     -EEXIST);
	cr_expect_eq(mc_http_query_get("key=&key=", "key", out, sizeof(out),
				       NULL),
		     -EEXIST);
	/* Repeating another parameter is not our business. */
	cr_expect_eq(mc_http_query_get("x=1&key=a&x=2", "key", out, sizeof(out),
				       NULL),
		     0);
	cr_expect_str_eq(out, "a");
}

Test(mc_http_query_get, strict_decoding)
{
	char out[16];

	cr_expect_eq(mc_http_query_get("key=%zz", "key", out, sizeof(out),
				       NULL),
		     -EINVAL);
	cr_expect_eq(mc_http_query_get("key=%4", "key", out, sizeof(out), NULL),
		     -EINVAL);
	/* A truncated escape must not borrow the '&' that follows. */
	cr_expect_eq(mc_http_query_get("key=%4&x=1", "key", out, sizeof(out),
				       NULL),
		     -EINVAL);
	cr_expect_eq(mc_http_query_get("key=a%00b", "key", out, sizeof(out),
				       NULL),
		     -EINVAL);
	cr_expect_eq(mc_http_query_get("key=a%", "key", out, sizeof(out), NULL),
		     -EINVAL);
}

Test(mc_http_query_get, too_big)
{
	char out[4];

	cr_expect_eq(mc_http_query_get("key=abcd", "key", out, sizeof(out),
				       NULL),
		     -E2BIG);
	cr_assert_eq(
		mc_http_query_get("key=abc", "key", out, sizeof(out), NULL), 0);
	cr_expect_str_eq(out, "abc");
	/* The limit applies after decoding. */
	cr_assert_eq(mc_http_query_get("key=%41%42%43", "key", out, sizeof(out),
				       NULL),
		     0);
	cr_expect_str_eq(out, "ABC");
}

Test(mc_http_escape, round_trip)
{
	/* Every byte but NUL (refused by the decoder) through and back. */
	char in[255], out[1024];
	struct mc_sbuf b = { 0 };
	size_t n;

	for (int i = 0; i < 255; i++)
		in[i] = (char)(i + 1);
	mc_http_escape(in, sizeof(in), &b);
	cr_assert(!b.oom && b.p);
	cr_assert_eq(mc_http_unescape(b.p, b.len, out, sizeof(out), &n), 0);
	cr_assert_eq(n, sizeof(in));
	cr_expect_eq(memcmp(in, out, n), 0);
	free(b.p);
	b = (struct mc_sbuf){ 0 };
	mc_http_escape("a/b c,d%\xff+\x7f", 11, &b);
	cr_expect_str_eq(b.p, "a/b%20c%2Cd%25%FF%2B%7F");
	free(b.p);
}
