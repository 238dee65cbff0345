/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the scalar parsers of common/mc_parse.c: sizes with
 * binary units, durations, booleans, integers, doubles and host:port.
 * Every error case also checks that *out is left untouched.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "mc_parse.h"

#define KiB (1ULL << 10)
#define MiB (1ULL << 20)
#define GiB (1ULL << 30)
#define TiB (1ULL << 40)
#define PiB (1ULL << 50)
#define SENTINEL 0x5a5a5a5a5a5a5a5aULL

struct size_ok {
	const char *in;
	uint64_t want;
};

struct str_rc {
	const char *in;
	int rc;
};

Test(mc_parse_size, accepts_upstream_spellings)
{
	static const struct size_ok cases[] = {
		{ "3355443200", 3355443200ULL },
		{ "0", 0 },
		{ "4G", 4 * GiB },
		{ "4GB", 4 * GiB },
		{ "4gb", 4 * GiB },
		{ "4Gi", 4 * GiB },
		{ "4GiB", 4 * GiB },
		{ "4gib", 4 * GiB },
		{ "500gb", 500 * GiB },
		{ "1.5 GiB", GiB + GiB / 2 },
		{ "64k", 64 * KiB },
		{ "64K", 64 * KiB },
		{ "64KB", 64 * KiB },
		{ "1M", MiB },
		{ "1mib", MiB },
		{ "2T", 2 * TiB },
		{ "3P", 3 * PiB },
		{ "10B", 10 },
		{ "10 b", 10 },
		{ "0.5K", 512 },
		{ ".5K", 512 },
		{ "0.25 MiB", MiB / 4 },
		{ "  42  ", 42 },
		{ "\t7\t", 7 },
		{ "2 GiB ", 2 * GiB },
		{ "18446744073709551615", UINT64_MAX },
		{ "16383P", 16383ULL * PiB },
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		uint64_t v = SENTINEL;
		int rc = mc_parse_size(cases[i].in, &v);

		cr_expect_eq(rc, 0, "mc_parse_size(\"%s\") = %d", cases[i].in,
			     rc);
		cr_expect_eq(v, cases[i].want,
			     "mc_parse_size(\"%s\") gave %llu, want %llu",
			     cases[i].in, (unsigned long long)v,
			     (unsigned long long)cases[i].want);
	}
}

Test(mc_parse_size, fraction_is_rounded_down)
{
	uint64_t v = 0;

	/* 1.3 KiB = 1331.2 bytes. */
	cr_assert_eq(mc_parse_size("1.3K", &v), 0);
	cr_expect_eq(v, 1331);
	/* 0.001 KiB = 1.024 bytes. */
	cr_assert_eq(mc_parse_size("0.001K", &v), 0);
	cr_expect_eq(v, 1);
	cr_assert_eq(mc_parse_size("0.0001K", &v), 0);
	cr_expect_eq(v, 0);
}

Test(mc_parse_size, fraction_exact_beyond_nine_digits)
{
	uint64_t v = 0;

	/* 1 + 1/1024 KiB is exactly 1025 bytes; it takes 10 decimals. */
	cr_assert_eq(mc_parse_size("1.0009765625K", &v), 0);
	cr_expect_eq(v, 1025, "1.0009765625K gave %llu, want 1025",
		     (unsigned long long)v);
}

Test(mc_parse_size, rejects_garbage)
{
	static const struct str_rc cases[] = {
		{ "", -EINVAL },     { "   ", -EINVAL },  { "abc", -EINVAL },
		{ "4X", -EINVAL },   { "4GBB", -EINVAL }, { "4BB", -EINVAL },
		{ "4Bi", -EINVAL },  { "4G B", -EINVAL }, { "4iB", -EINVAL },
		{ "-1", -EINVAL },   { "- 1", -EINVAL },  { "1.5", -EINVAL },
		{ "1.5B", -EINVAL }, { "1e3", -EINVAL },  { "0x10", -EINVAL },
		{ "G", -EINVAL },    { ".", -EINVAL },	  { ".K", -EINVAL },
		{ "4G4", -EINVAL },  { "4 4", -EINVAL },  { "4KiBB", -EINVAL },
		{ "1,5G", -EINVAL }, { "4\nG", -EINVAL }, { "4Kb4", -EINVAL },
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		uint64_t v = SENTINEL;
		int rc = mc_parse_size(cases[i].in, &v);

		cr_expect_eq(rc, cases[i].rc, "mc_parse_size(\"%s\") = %d",
			     cases[i].in, rc);
		cr_expect_eq(v, SENTINEL, "out written for \"%s\"",
			     cases[i].in);
	}
}

Test(mc_parse_size, null_is_einval)
{
	uint64_t v = SENTINEL;

	cr_expect_eq(mc_parse_size(NULL, &v), -EINVAL);
	cr_expect_eq(v, SENTINEL);
}

Test(mc_parse_size, overflow_is_erange)
{
	static const char *const cases[] = {
		"18446744073709551616", /* UINT64_MAX + 1 */
		"99999999999999999999999", /* far too many digits */
		"16384P", /* 2^64 */
		"17179869184G", /* 2^64 */
		"16777216T", /* 2^64 */
		"18014398509481984K", /* 2^64 */
		"16384.5P",
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		uint64_t v = SENTINEL;
		int rc = mc_parse_size(cases[i], &v);

		cr_expect_eq(rc, -ERANGE, "mc_parse_size(\"%s\") = %d",
			     cases[i], rc);
		cr_expect_eq(v, SENTINEL);
	}
}

Test(mc_parse_size, largest_fraction_fits)
{
	uint64_t v = 0;

	/* Just below 2^64: 16383.99... PiB. */
	cr_assert_eq(mc_parse_size("16383.999999999P", &v), 0);
	cr_expect_gt(v, 16383ULL * PiB);
	cr_expect_lt(v, UINT64_MAX);
}

Test(mc_parse_duration_ms, units)
{
	static const struct {
		const char *in;
		uint64_t unit;
		uint64_t want;
	} cases[] = {
		{ "250ms", 1000, 250 },
		{ "250MS", 1000, 250 },
		{ "5s", 1, 5000 },
		{ "5S", 1, 5000 },
		{ "2m", 1, 120000 },
		{ "1h", 1, 3600000 },
		{ "1H", 1, 3600000 },
		{ "1.5s", 1, 1500 },
		{ "0.5h", 1, 1800000 },
		{ "10", 1000, 10000 },
		{ "10", 1, 10 },
		{ "10", 60000, 600000 },
		{ "1.5", 1000, 1500 },
		{ "1.0", 1, 1 },
		{ "0.001s", 1, 1 },
		{ " 3 s ", 1, 3000 },
		{ "0", 1000, 0 },
		{ "0ms", 1000, 0 },
		{ "18446744073709551615ms", 1000, UINT64_MAX },
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		uint64_t v = SENTINEL;
		int rc = mc_parse_duration_ms(cases[i].in, cases[i].unit, &v);

		cr_expect_eq(rc, 0, "duration(\"%s\") = %d", cases[i].in, rc);
		cr_expect_eq(v, cases[i].want,
			     "duration(\"%s\", unit %llu) gave %llu, want %llu",
			     cases[i].in, (unsigned long long)cases[i].unit,
			     (unsigned long long)v,
			     (unsigned long long)cases[i].want);
	}
}

Test(mc_parse_duration_ms, rejects_garbage)
{
	static const char *const cases[] = {
		"",
		"  ",
		"s",
		"ms",
		"5x",
		"5 min",
		"5sec",
		"-5s",
		"5 5",
		"1e3",
		"5mss",
		"0x10",
		".",
		"5m s",
		"5hs",
		"d",
		/* parts of a millisecond (were cut off: "0.5ms" was 0) */
		"1.5ms",
		"0.5ms",
		"0.0001s",
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		uint64_t v = SENTINEL;
		int rc = mc_parse_duration_ms(cases[i], 1000, &v);

		cr_expect_eq(rc, -EINVAL, "duration(\"%s\") = %d", cases[i],
			     rc);
		cr_expect_eq(v, SENTINEL, "out written for \"%s\"", cases[i]);
	}
	cr_expect_eq(mc_parse_duration_ms(NULL, 1, &(uint64_t){ 0 }), -EINVAL);
}

Test(mc_parse_duration_ms, overflow_is_erange)
{
	static const struct {
		const char *in;
		uint64_t unit;
	} cases[] = {
		{ "18446744073709551615s", 1 },
		{ "18446744073709551616", 1 },
		{ "5124095576030432h", 1 },
		{ "18446744073709552", 1000 },
		/* The integer part fits, the fraction carries it past 2^64. */
		{ "18446744073709551.999s", 1 },
		{ "18446744073709551.999", 1000 },
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		uint64_t v = SENTINEL;
		int rc = mc_parse_duration_ms(cases[i].in, cases[i].unit, &v);

		cr_expect_eq(rc, -ERANGE, "duration(\"%s\") = %d (value %llu)",
			     cases[i].in, rc, (unsigned long long)v);
		cr_expect_eq(v, SENTINEL, "out written for \"%s\"",
			     cases[i].in);
	}
}

Test(mc_parse_bool, accepted_spellings)
{
	static const char *const yes[] = { "true", "TRUE", "True", "1",
					   "yes",  "YES",  "on",   "On" };
	static const char *const no[] = { "false", "FALSE", "False", "0",
					  "no",	   "NO",    "off",   "oFf" };

	for (size_t i = 0; i < MC_ARRAY_SIZE(yes); i++) {
		bool b = false;

		cr_expect_eq(mc_parse_bool(yes[i], &b), 0, "\"%s\"", yes[i]);
		cr_expect(b, "\"%s\" should be true", yes[i]);
	}
	for (size_t i = 0; i < MC_ARRAY_SIZE(no); i++) {
		bool b = true;

		cr_expect_eq(mc_parse_bool(no[i], &b), 0, "\"%s\"", no[i]);
		cr_expect(!b, "\"%s\" should be false", no[i]);
	}
}

Test(mc_parse_bool, rejects_garbage)
{
	static const char *const cases[] = { "",     "2",    "truee", "tru",
					     "nope", "-1",   "yess",  "onn",
					     "01",   "true1" };

	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		bool b = true;

		cr_expect_eq(mc_parse_bool(cases[i], &b), -EINVAL, "\"%s\"",
			     cases[i]);
		cr_expect(b, "out written for \"%s\"", cases[i]);
	}
	cr_expect_eq(mc_parse_bool(NULL, &(bool){ false }), -EINVAL);
}

/* mc_parse.h: "leading and trailing blanks allowed" for every parser. */
Test(mc_parse_bool, blanks_allowed)
{
	bool b = false;

	cr_expect_eq(mc_parse_bool(" true", &b), 0);
	cr_expect(b);
	b = true;
	cr_expect_eq(mc_parse_bool("false ", &b), 0);
	cr_expect(!b);
	b = false;
	cr_expect_eq(mc_parse_bool("\tyes\t", &b), 0);
	cr_expect(b);
}

Test(mc_parse_i64, valid)
{
	static const struct {
		const char *in;
		int64_t want;
	} cases[] = {
		{ "42", 42 },
		{ "-42", -42 },
		{ "+7", 7 },
		{ " 12 ", 12 },
		{ "\t-3\t", -3 },
		{ "0", 0 },
		{ "007", 7 },
		{ "9223372036854775807", INT64_MAX },
		{ "-9223372036854775808", INT64_MIN },
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		int64_t v = 99;

		cr_expect_eq(mc_parse_i64(cases[i].in, &v), 0, "\"%s\"",
			     cases[i].in);
		cr_expect_eq(v, cases[i].want, "\"%s\" gave %lld", cases[i].in,
			     (long long)v);
	}
}

Test(mc_parse_i64, invalid)
{
	static const struct str_rc cases[] = {
		{ "", -EINVAL },
		{ "  ", -EINVAL },
		{ "-", -EINVAL },
		{ "+", -EINVAL },
		{ "12a", -EINVAL },
		{ "0x10", -EINVAL },
		{ "1.5", -EINVAL },
		{ "1 2", -EINVAL },
		{ "--1", -EINVAL },
		{ "+-1", -EINVAL },
		{ "- 1", -EINVAL },
		{ "1e3", -EINVAL },
		{ "9223372036854775808", -ERANGE },
		{ "-9223372036854775809", -ERANGE },
		{ "99999999999999999999999", -ERANGE },
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		int64_t v = 99;
		int rc = mc_parse_i64(cases[i].in, &v);

		cr_expect_eq(rc, cases[i].rc, "mc_parse_i64(\"%s\") = %d",
			     cases[i].in, rc);
		cr_expect_eq(v, 99, "out written for \"%s\"", cases[i].in);
	}
	cr_expect_eq(mc_parse_i64(NULL, &(int64_t){ 0 }), -EINVAL);
}

Test(mc_parse_double, valid)
{
	double d = 0;

	cr_assert_eq(mc_parse_double("1.5", &d), 0);
	cr_expect_float_eq(d, 1.5, 1e-12);
	cr_assert_eq(mc_parse_double("-2.25e3", &d), 0);
	cr_expect_float_eq(d, -2250.0, 1e-9);
	cr_assert_eq(mc_parse_double(" 3 ", &d), 0);
	cr_expect_float_eq(d, 3.0, 1e-12);
	cr_assert_eq(mc_parse_double("0", &d), 0);
	cr_expect_float_eq(d, 0.0, 1e-12);
	cr_assert_eq(mc_parse_double(".25", &d), 0);
	cr_expect_float_eq(d, 0.25, 1e-12);
}

Test(mc_parse_double, invalid)
{
	static const char *const einval[] = { "",     "  ",  "abc",
					      "1.5x", "1 2", "." };
	static const char *const nonfinite[] = {
		"nan", "inf", "-inf", "infinity", "1e999", "-1e999"
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(einval); i++) {
		double d = 42;

		cr_expect_eq(mc_parse_double(einval[i], &d), -EINVAL, "\"%s\"",
			     einval[i]);
		cr_expect_float_eq(d, 42.0, 0, "out written for \"%s\"",
				   einval[i]);
	}
	for (size_t i = 0; i < MC_ARRAY_SIZE(nonfinite); i++) {
		double d = 42;

		cr_expect_lt(mc_parse_double(nonfinite[i], &d), 0, "\"%s\"",
			     nonfinite[i]);
		cr_expect_float_eq(d, 42.0, 0, "out written for \"%s\"",
				   nonfinite[i]);
	}
	cr_expect_eq(mc_parse_double("1e999", &(double){ 0 }), -ERANGE);
	cr_expect_eq(mc_parse_double(NULL, &(double){ 0 }), -EINVAL);
}

Test(mc_parse_hostport, valid)
{
	static const struct {
		const char *in;
		int def;
		const char *host;
		int port;
	} cases[] = {
		{ "localhost:8080", -1, "localhost", 8080 },
		{ "10.0.0.1:0", -1, "10.0.0.1", 0 },
		{ "h:65535", -1, "h", 65535 },
		{ "example.com", 80, "example.com", 80 },
		{ "[::1]:443", -1, "::1", 443 },
		{ "[fe80::1%eth0]:1", -1, "fe80::1%eth0", 1 },
		{ "[::1]", 50051, "::1", 50051 },
		{ "0.0.0.0", 0, "0.0.0.0", 0 },
		/* A bare IPv6 address is a host, as upstream takes it. */
		{ "::1", 80, "::1", 80 },
		{ "::", 0, "::", 0 },
		{ "2001:db8::1", 12300, "2001:db8::1", 12300 },
		{ "fe80::1%eth0", 1, "fe80::1%eth0", 1 },
		{ "::ffff:10.0.0.1", 2, "::ffff:10.0.0.1", 2 },
		{ "1:2:3:4:5:6:7:8", 3, "1:2:3:4:5:6:7:8", 3 },
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		char host[64];
		int port = -7;
		int rc = mc_parse_hostport(cases[i].in, host, sizeof(host),
					   cases[i].def, &port);

		cr_expect_eq(rc, 0, "hostport(\"%s\") = %d", cases[i].in, rc);
		if (rc)
			continue;
		cr_expect_str_eq(host, cases[i].host, "\"%s\"", cases[i].in);
		cr_expect_eq(port, cases[i].port, "\"%s\"", cases[i].in);
	}
}

Test(mc_fmt_hostport, parses_back)
{
	static const char *const hosts[] = { "10.0.0.1", "localhost", "::1",
					     "fe80::1%eth0", "::" };

	for (size_t i = 0; i < MC_ARRAY_SIZE(hosts); i++) {
		char buf[80], host[64];
		int port = -1;

		cr_assert_eq(mc_fmt_hostport(buf, sizeof(buf), hosts[i], 65535),
			     0);
		cr_expect_eq(strchr(hosts[i], ':') != NULL, buf[0] == '[', "%s",
			     buf);
		cr_assert_eq(mc_parse_hostport(buf, host, sizeof(host), -1,
					       &port),
			     0, "%s", buf);
		cr_expect_str_eq(host, hosts[i]);
		cr_expect_eq(port, 65535);
	}
}

Test(mc_fmt_hostport, too_long)
{
	char buf[11];

	cr_expect_eq(mc_fmt_hostport(buf, sizeof(buf), "::1", 12345),
		     -ENAMETOOLONG);
	cr_expect_eq(mc_fmt_hostport(buf, sizeof(buf), "::1", 1234), 0);
	cr_expect_str_eq(buf, "[::1]:1234");
}

Test(mc_parse_port_range, ends)
{
	int lo = 15000, hi = 17000;

	cr_expect_eq(mc_parse_port_range(NULL, "", &lo, &hi), 0);
	cr_expect(lo == 15000 && hi == 17000);
	cr_expect_eq(mc_parse_port_range("1", " 65535 ", &lo, &hi), 0);
	cr_expect(lo == 1 && hi == 65535);
	cr_expect_eq(mc_parse_port_range("16000", NULL, &lo, &hi), 0);
	cr_expect(lo == 16000 && hi == 65535);
	lo = 15000, hi = 17000;
	static const char *const bad[][2] = {
		{ "abc", NULL },  { NULL, "70000" },  { "0", NULL },
		{ "-1", NULL },	  { "16000x", NULL }, { "17001", NULL },
		{ "200", "100" }, { NULL, "65536" },
	};
	for (size_t i = 0; i < MC_ARRAY_SIZE(bad); i++) {
		cr_expect_eq(mc_parse_port_range(bad[i][0], bad[i][1], &lo,
						 &hi),
			     -EINVAL, "%zu", i);
		cr_expect(lo == 15000 && hi == 17000, "%zu", i);
	}
}

Test(mc_parse_hostport, invalid)
{
	static const struct {
		const char *in;
		int def;
	} cases[] = {
		{ "", 80 },
		{ NULL, 80 },
		{ "host", -1 },
		{ "host:", 80 },
		{ "host:65536", 80 },
		{ "host:-1", 80 },
		{ "host:x", 80 },
		{ "host:8o", 80 },
		{ ":80", 80 },
		{ "::1", -1 }, /* a host alone, the port mandatory */
		{ "::1:80", 80 }, /* ::1 port 80, or the address ::1:80 */
		{ "2001:db8::1:443", 80 }, /* the same */
		{ "::1:12345", 80 }, /* not an address: brackets */
		{ ":::1", 80 },
		{ "[::1", 80 },
		{ "[::1]x", 80 },
		{ "[::1]:", 80 },
		{ "[]:80", 80 },
		{ "[::1]", -1 },
		{ "a:1:2", 80 },
		{ "host: 80", 80 },
		{ "host:99999999999999999999", 80 },
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		char host[64] = "untouched";
		int port = -7;
		int rc = mc_parse_hostport(cases[i].in, host, sizeof(host),
					   cases[i].def, &port);

		cr_expect_eq(rc, -EINVAL, "hostport(\"%s\") = %d",
			     cases[i].in ? cases[i].in : "(null)", rc);
		cr_expect_str_eq(host, "untouched");
		cr_expect_eq(port, -7);
	}
}

Test(mc_parse_hostport, host_buffer_limit)
{
	char host[6] = "xxxxx";
	int port = 0;

	/* Five bytes and the NUL fit exactly. */
	cr_assert_eq(
		mc_parse_hostport("abcde:1", host, sizeof(host), -1, &port), 0);
	cr_expect_str_eq(host, "abcde");
	cr_expect_eq(port, 1);

	memcpy(host, "xxxxx", 6);
	port = 0;
	cr_expect_eq(mc_parse_hostport("abcdef:1", host, sizeof(host), -1,
				       &port),
		     -ENAMETOOLONG);
	cr_expect_eq(mc_parse_hostport("[abcdef]:1", host, sizeof(host), -1,
				       &port),
		     -ENAMETOOLONG);
	cr_expect_str_eq(host, "xxxxx");
	cr_expect_eq(port, 0);
}

Test(mc_parse, hexdigit)
{
	cr_assert_eq(mc_parse_hexdigit('0'), 0);
	cr_assert_eq(mc_parse_hexdigit('9'), 9);
	cr_assert_eq(mc_parse_hexdigit('a'), 10);
	cr_assert_eq(mc_parse_hexdigit('F'), 15);
	cr_assert_eq(mc_parse_hexdigit('g'), -1);
	cr_assert_eq(mc_parse_hexdigit('%'), -1);
	cr_assert_eq(mc_parse_hexdigit('\0'), -1);
}

Test(mc_parse, hex)
{
	const uint8_t b[] = { 0x00, 0x9f, 0xa0, 0xff };
	char out[2 * sizeof(b) + 1];

	memset(out, 'x', sizeof(out));
	mc_hex(b, sizeof(b), out);
	cr_assert_str_eq(out, "009fa0ff");
	mc_hex(b, 0, out);
	cr_assert_str_eq(out, "");
}

Test(mc_parse_env_ms, unset_empty_units_and_refusals)
{
	char err[256] = "";
	uint64_t v = 1;

	unsetenv("MC_TEST_X_MS");
	cr_assert_eq(mc_parse_env_ms("MC_TEST_X_MS", 7, 0, 100000, &v, err,
				     sizeof(err)),
		     0);
	cr_assert_eq(v, 7);
	setenv("MC_TEST_X_MS", "", 1);
	cr_assert_eq(mc_parse_env_ms("MC_TEST_X_MS", 7, 0, 100000, &v, err,
				     sizeof(err)),
		     0);
	cr_assert_eq(v, 7);
	setenv("MC_TEST_X_MS", "10s", 1); /* strtol read 10 */
	cr_assert_eq(mc_parse_env_ms("MC_TEST_X_MS", 7, 0, 100000, &v, err,
				     sizeof(err)),
		     0);
	cr_assert_eq(v, 10000);
	v = 1;
	setenv("MC_TEST_X_MS", "-5", 1); /* strtoull read 2^64 - 5 */
	cr_assert_eq(mc_parse_env_ms("MC_TEST_X_MS", 7, 0, 100000, &v, err,
				     sizeof(err)),
		     -EINVAL);
	cr_assert_eq(v, 1, "untouched on error");
	cr_assert_str_eq(err, "MC_TEST_X_MS='-5': must be a duration from 0 "
			      "to 100000 ms (bare numbers are ms; or with s, "
			      "m, h)");
	setenv("MC_TEST_X_MS", "2m", 1);
	cr_assert_eq(mc_parse_env_ms("MC_TEST_X_MS", 7, 0, 100000, &v, err,
				     sizeof(err)),
		     -ERANGE);
	setenv("MC_TEST_X_MS", "0", 1);
	cr_assert_eq(mc_parse_env_ms("MC_TEST_X_MS", 7, 1, 100000, &v, err,
				     sizeof(err)),
		     -ERANGE);
	unsetenv("MC_TEST_X_MS");
}
