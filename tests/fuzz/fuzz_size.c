/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for the scalar parsers of common/mc_parse.c: sizes,
 * durations, booleans, integers, doubles and host:port, each given the
 * input as one NUL-terminated string.
 *
 * Checks: only documented return codes; *out untouched on error; a plain
 * decimal size equals strtoull(); a successful size or duration is within
 * rounding of the number times its unit (computed in long double), and
 * -ERANGE only for values that really exceed 64 bits; integers agree with
 * strtoll(); doubles are finite; host:port fits its buffer, is the same
 * with a larger buffer and names a port in 0..65535.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "fuzz_common.h"
#include "mc_parse.h"

#define SENTINEL 0x5a5a5a5a5a5a5a5aULL
#define TWO64 18446744073709551616.0L

static const char *skip_blank(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* Blanks, an optional '+', digits, blanks: what strtoull() also takes. */
static bool plain_decimal(const char *s)
{
	s = skip_blank(s);
	if (*s == '+')
		s++;
	if (!isdigit((unsigned char)*s))
		return false;
	while (isdigit((unsigned char)*s))
		s++;
	return *skip_blank(s) == '\0';
}

/*
 * The decimal number ("12", "1.5", ".5", "7.") at the start of s, exactly,
 * and where its unit starts. Only the digits the parsers read are given to
 * strtold(): it would also take exponents and hex.
 */
static long double number(const char *s, const char **unit)
{
	size_t n = strspn(s, "0123456789");
	char *copy;
	long double v;

	if (s[n] == '.')
		n += 1 + strspn(s + n + 1, "0123456789");
	copy = malloc(n + 2);
	FUZZ_CHECK(copy);
	copy[0] = '0'; /* "." alone is refused by the parsers anyway */
	memcpy(copy + 1, s, n);
	copy[n + 1] = '\0';
	v = strtold(copy, NULL);
	free(copy);
	*unit = skip_blank(s + n);
	return v;
}

/* Compare v with the exact value `want`, allowing `slack` units. */
static void check_close(uint64_t v, long double want, long double slack)
{
	long double got = (long double)v;

	FUZZ_CHECK(got <= want * (1 + 1e-15L) + 1);
	FUZZ_CHECK(got >= want * (1 - 1e-15L) - slack - 2);
}

static void fuzz_size(const char *s)
{
	uint64_t v = SENTINEL, mult = 1;
	const char *p = skip_blank(s), *unit;
	long double want;
	int rc = mc_parse_size(s, &v);

	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ERANGE);
	if (rc)
		FUZZ_CHECK(v == SENTINEL);
	if (plain_decimal(s)) {
		char *end;
		unsigned long long r;

		errno = 0;
		r = strtoull(s, &end, 10);
		if (errno == ERANGE)
			FUZZ_CHECK(rc == -ERANGE);
		else
			FUZZ_CHECK(rc == 0 && v == r);
	}
	if (rc == -EINVAL)
		return;
	if (*p == '+')
		p++;
	want = number(p, &unit);
	if (*unit) {
		static const char units[] = "BKMGTP";
		const char *u = strchr(units, toupper((unsigned char)*unit));

		/* -ERANGE may come before the unit is looked at. */
		if (u && *u)
			mult = 1ULL << ((u - units) * 10);
		else
			FUZZ_CHECK(rc == -ERANGE);
	}
	if (rc == -ERANGE) {
		FUZZ_CHECK(want * mult >= TWO64 * (1 - 1e-15L));
		return;
	}
	/* Nine fractional digits are kept: the error is below mult / 1e9. */
	check_close(v, want * mult, (long double)mult / 1e9L);
}

static void fuzz_duration(const char *s, uint64_t unit_ms)
{
	uint64_t v = SENTINEL, unit = unit_ms;
	const char *u;
	long double want;
	size_t len;
	int rc = mc_parse_duration_ms(s, unit_ms, &v);

	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ERANGE);
	if (rc)
		FUZZ_CHECK(v == SENTINEL);
	if (rc == -EINVAL)
		return;
	want = number(skip_blank(s), &u);
	len = strlen(u);
	while (len && (u[len - 1] == ' ' || u[len - 1] == '\t'))
		len--;
	if (len == 2 && !strncasecmp(u, "ms", 2))
		unit = 1;
	else if (len == 1 && (*u | 0x20) == 's')
		unit = 1000;
	else if (len == 1 && (*u | 0x20) == 'm')
		unit = 60000;
	else if (len == 1 && (*u | 0x20) == 'h')
		unit = 3600000;
	else if (len)
		FUZZ_CHECK(rc == -ERANGE);
	if (rc == -ERANGE) {
		FUZZ_CHECK(want * unit >= TWO64 * (1 - 1e-15L));
		return;
	}
	check_close(v, want * unit, (long double)unit / 1e9L);
}

static void fuzz_bool(const char *s)
{
	static const char *const words[] = { "true", "1",   "yes",   "on",
					     "y",    "t",   "false", "0",
					     "no",   "off", "n",     "f" };
	bool b = false, known = false, want = false;
	int rc = mc_parse_bool(s, &b);
	size_t len;

	/* Blanks (space, tab) around the word are allowed, as everywhere. */
	while (*s == ' ' || *s == '\t')
		s++;
	len = strlen(s);
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		if (strlen(words[i]) == len && !strncasecmp(s, words[i], len)) {
			known = true;
			want = i < 6;
		}
	}
	if (known)
		FUZZ_CHECK(rc == 0 && b == want);
	else
		FUZZ_CHECK(rc == -EINVAL && !b);
}

static void fuzz_i64(const char *s)
{
	int64_t v = (int64_t)SENTINEL;
	int rc = mc_parse_i64(s, &v);

	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ERANGE);
	if (rc) {
		FUZZ_CHECK(v == (int64_t)SENTINEL);
	} else {
		char *end;
		long long r;

		errno = 0;
		r = strtoll(s, &end, 10);
		FUZZ_CHECK(errno == 0 && r == v);
	}
}

static void fuzz_double(const char *s)
{
	double v = -1234.5;
	int rc = mc_parse_double(s, &v);

	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ERANGE);
	if (rc)
		FUZZ_CHECK(v == -1234.5);
	else
		FUZZ_CHECK(isfinite(v));
}

static int hostport(const char *s, size_t host_len, int def, char **host,
		    int *port)
{
	int rc;

	*host = malloc(host_len);
	FUZZ_CHECK(*host);
	memset(*host, 'Z', host_len);
	*port = -77;
	rc = mc_parse_hostport(s, *host, host_len, def, port);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENAMETOOLONG);
	if (rc) {
		FUZZ_CHECK(*port == -77);
		return rc;
	}
	FUZZ_CHECK(memchr(*host, '\0', host_len) != NULL);
	FUZZ_CHECK((*host)[0] != '\0');
	FUZZ_CHECK(*port >= 0 && *port <= 65535);
	if (s[0] == '[')
		FUZZ_CHECK(!strchr(*host, ']'));
	else if (strchr(*host, ':'))
		/* A bare IPv6 address: all of it, with the default port. */
		FUZZ_CHECK(def >= 0 && *port == def && !strcmp(*host, s));
	return 0;
}

static void fuzz_hostport(const char *s)
{
	static const int defaults[] = { -1, 0, 11211 };
	size_t big = strlen(s) + 1;

	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
		char *small_host, *big_host;
		int small_port, big_port;
		int rc_small =
			hostport(s, 4, defaults[i], &small_host, &small_port);
		int rc_big =
			hostport(s, big, defaults[i], &big_host, &big_port);

		/* The whole string always fits: never -ENAMETOOLONG. */
		FUZZ_CHECK(rc_big != -ENAMETOOLONG);
		if (rc_small == 0)
			FUZZ_CHECK(rc_big == 0 && small_port == big_port &&
				   !strcmp(small_host, big_host));
		if (rc_big == 0 && strlen(big_host) < 4)
			FUZZ_CHECK(rc_small == 0);
		if (rc_big == 0 && defaults[i] < 0)
			FUZZ_CHECK(strchr(s, ':') != NULL);
		free(small_host);
		free(big_host);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	FUZZ_CHECK(s);
	if (size)
		memcpy(s, data, size);
	s[size] = '\0';
	fuzz_size(s);
	fuzz_duration(s, 1);
	fuzz_duration(s, 1000);
	fuzz_bool(s);
	fuzz_i64(s);
	fuzz_double(s);
	fuzz_hostport(s);
	free(s);
	return 0;
}
