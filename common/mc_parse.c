/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Scalar parsers. They are fed from the network (config pushed by tools),
 * files and argv, so they are fuzzed (tests/fuzz/fuzz_size.c) and never
 * trust a length: all arithmetic is checked for overflow.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mc_parse.h"

static const char *skip_blank(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* Parse "123" or "123.456" into an integer part and a fraction. */
static int parse_decimal(const char **sp, uint64_t *ipart, uint64_t *frac,
			 uint64_t *frac_scale)
{
	const char *s = *sp;
	uint64_t v = 0, f = 0, scale = 1;
	int digits = 0;

	while (isdigit((unsigned char)*s)) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
		s++;
		digits++;
	}
	if (*s == '.') {
		s++;
		while (isdigit((unsigned char)*s)) {
			/*
			 * Keep 19 fractional digits (scale fits in 64 bits):
			 * with units up to 2^50, 9 digits lose whole bytes.
			 */
			if (scale < 10000000000000000000ULL) {
				f = f * 10 + (uint64_t)(*s - '0');
				scale *= 10;
			}
			s++;
			digits++;
		}
	}
	if (!digits)
		return -EINVAL;
	*ipart = v;
	*frac = f;
	*frac_scale = scale;
	*sp = s;
	return 0;
}

static int size_unit_shift(const char *u, unsigned *shift)
{
	static const char units[] = "BKMGTP";
	const char *p;
	size_t len = strlen(u);

	/* Strip trailing blanks before matching the unit. */
	while (len && (u[len - 1] == ' ' || u[len - 1] == '\t'))
		len--;
	if (len == 0) {
		*shift = 0;
		return 0;
	}
	p = strchr(units, toupper((unsigned char)u[0]));
	if (!p || u[0] == '\0')
		return -EINVAL;
	*shift = (unsigned)(p - units) * 10;
	if (len == 1)
		return 0;
	if (*p == 'B')
		return -EINVAL; /* "BB", "Bi" */
	if (len == 2 &&
	    (u[1] == 'b' || u[1] == 'B' || u[1] == 'i' || u[1] == 'I'))
		return 0;
	if (len == 3 && (u[1] == 'i' || u[1] == 'I') &&
	    (u[2] == 'b' || u[2] == 'B'))
		return 0;
	return -EINVAL;
}

int mc_parse_size(const char *s, uint64_t *out)
{
	uint64_t ipart, frac, scale, mult, v;
	unsigned shift;
	int rc;

	if (!s)
		return -EINVAL;
	s = skip_blank(s);
	if (*s == '+')
		s++;
	rc = parse_decimal(&s, &ipart, &frac, &scale);
	if (rc)
		return rc;
	s = skip_blank(s);
	rc = size_unit_shift(s, &shift);
	if (rc)
		return rc;
	mult = 1ULL << shift;
	if (frac && shift == 0)
		return -EINVAL; /* "1.5" bytes */
	if (ipart > UINT64_MAX >> shift)
		return -ERANGE;
	v = ipart << shift;
	if (frac) {
		/* frac / scale * mult, exact: scale <= 1e19, mult <= 2^50. */
		unsigned __int128 add = (unsigned __int128)frac * mult / scale;
		if (add > UINT64_MAX - v)
			return -ERANGE;
		v += (uint64_t)add;
	}
	*out = v;
	return 0;
}

int mc_parse_duration_ms(const char *s, uint64_t default_unit_ms, uint64_t *out)
{
	uint64_t ipart, frac, scale, unit, fpart;
	const char *u;
	size_t len;
	int rc;

	if (!s)
		return -EINVAL;
	s = skip_blank(s);
	rc = parse_decimal(&s, &ipart, &frac, &scale);
	if (rc)
		return rc;
	u = skip_blank(s);
	len = strlen(u);
	while (len && (u[len - 1] == ' ' || u[len - 1] == '\t'))
		len--;
	if (len == 0)
		unit = default_unit_ms;
	else if (len == 2 && !strncasecmp(u, "ms", 2))
		unit = 1;
	else if (len == 1 && (*u == 's' || *u == 'S'))
		unit = 1000;
	else if (len == 1 && (*u == 'm' || *u == 'M'))
		unit = 60000;
	else if (len == 1 && (*u == 'h' || *u == 'H'))
		unit = 3600000;
	else
		return -EINVAL;
	if (unit && ipart > UINT64_MAX / unit)
		return -ERANGE;
	/* A part of a millisecond was cut off silently: "0.5" (ms) was 0,
	 * which for a lease means none. */
	if ((unsigned __int128)frac * unit % scale)
		return -EINVAL;
	fpart = (uint64_t)((unsigned __int128)frac * unit / scale);
	if (ipart * unit > UINT64_MAX - fpart)
		return -ERANGE; /* "18446744073709551.999s" */
	*out = ipart * unit + fpart;
	return 0;
}

int mc_parse_env_ms(const char *name, uint64_t def_ms, uint64_t min_ms,
		    uint64_t max_ms, uint64_t *out, char *err, size_t errlen)
{
	const char *v = getenv(name);
	uint64_t ms;
	int rc;

	if (!v || !*v) {
		*out = def_ms;
		return 0;
	}
	rc = mc_parse_duration_ms(v, 1, &ms);
	if (!rc && (ms < min_ms || ms > max_ms))
		rc = -ERANGE;
	if (rc) {
		if (err && errlen)
			snprintf(err, errlen,
				 "%s='%s': must be a duration from %" PRIu64
				 " to %" PRIu64 " ms (bare numbers are ms; "
				 "or with s, m, h)",
				 name, v, min_ms, max_ms);
		return rc;
	}
	*out = ms;
	return 0;
}

int mc_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "true", "1", "yes", "on", "y", "t" };
	static const char *const no[] = { "false", "0", "no", "off", "n", "f" };

	size_t len;

	if (!s)
		return -EINVAL;
	s = skip_blank(s);
	len = strlen(s);
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	for (size_t i = 0; i < MC_ARRAY_SIZE(yes); i++) {
		if (strlen(yes[i]) == len && !strncasecmp(s, yes[i], len)) {
			*out = true;
			return 0;
		}
		if (strlen(no[i]) == len && !strncasecmp(s, no[i], len)) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

static bool rest_is_blank(const char *end)
{
	return *skip_blank(end) == '\0';
}

int mc_parse_i64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (!s)
		return -EINVAL;
	s = skip_blank(s);
	if (!(isdigit((unsigned char)*s) ||
	      ((*s == '-' || *s == '+') && isdigit((unsigned char)s[1]))))
		return -EINVAL;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (!rest_is_blank(end))
		return -EINVAL;
	*out = v;
	return 0;
}

int mc_parse_double(const char *s, double *out)
{
	char *end;
	double v;

	if (!s)
		return -EINVAL;
	s = skip_blank(s);
	if (!*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || !rest_is_blank(end))
		return -EINVAL;
	if (errno == ERANGE || !isfinite(v))
		return -ERANGE;
	*out = v;
	return 0;
}

/* s[0..n) is an IPv6 address (with an optional %zone), as inet_pton
 * reads one. */
static bool is_ipv6(const char *s, size_t n)
{
	char buf[INET6_ADDRSTRLEN];
	struct in6_addr a;
	const char *zone = memchr(s, '%', n);

	if (zone)
		n = (size_t)(zone - s);
	if (n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return inet_pton(AF_INET6, buf, &a) == 1;
}

/*
 * An unbracketed string with several ':' is a host alone when it is an
 * IPv6 address (upstream takes "::1" so) and cannot also be read as
 * address:port: "::1:80" is both ::1 port 80 and the address ::1:80, so
 * it is refused rather than guessed.
 */
static bool is_bare_ipv6(const char *s)
{
	const char *last = strrchr(s, ':');
	size_t n = strlen(s);

	if (!is_ipv6(s, n))
		return false;
	if (last[1] && strspn(last + 1, "0123456789") == strlen(last + 1) &&
	    is_ipv6(s, (size_t)(last - s)))
		return false;
	return true;
}

int mc_parse_hostport(const char *s, char *host_out, size_t host_len,
		      int default_port, int *port_out)
{
	const char *host = s, *host_end, *port_str = NULL;
	int64_t port;
	size_t n;

	if (!s || !*s)
		return -EINVAL;
	if (*s == '[') {
		host = s + 1;
		host_end = strchr(host, ']');
		if (!host_end)
			return -EINVAL;
		if (host_end[1] == ':')
			port_str = host_end + 2;
		else if (host_end[1] != '\0')
			return -EINVAL;
	} else {
		host_end = strrchr(s, ':');
		if (host_end && strchr(s, ':') != host_end) {
			if (!is_bare_ipv6(s))
				return -EINVAL; /* else it needs brackets */
			host_end = NULL;
		}
		if (host_end)
			port_str = host_end + 1;
		else
			host_end = s + strlen(s);
	}
	n = (size_t)(host_end - host);
	if (n == 0)
		return -EINVAL;
	if (n >= host_len)
		return -ENAMETOOLONG;
	if (port_str) {
		if (!isdigit((unsigned char)*port_str) ||
		    mc_parse_i64(port_str, &port) || port < 0 || port > 65535)
			return -EINVAL;
	} else {
		if (default_port < 0)
			return -EINVAL;
		port = default_port;
	}
	memcpy(host_out, host, n);
	host_out[n] = '\0';
	*port_out = (int)port;
	return 0;
}

static int port_end(const char *s, int *v)
{
	int64_t n;

	if (!s || !*s)
		return 0;
	if (mc_parse_i64(s, &n) || n < 1 || n > 65535)
		return -EINVAL;
	*v = (int)n;
	return 0;
}

int mc_parse_port_range(const char *lo_s, const char *hi_s, int *lo, int *hi)
{
	int l = *lo, h = *hi;

	if (port_end(lo_s, &l) || port_end(hi_s, &h) || l > h)
		return -EINVAL;
	*lo = l;
	*hi = h;
	return 0;
}

int mc_fmt_hostport(char *out, size_t len, const char *host, int port)
{
	int n = snprintf(out, len, strchr(host, ':') ? "[%s]:%d" : "%s:%d",
			 host, port);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int mc_parse_hexdigit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

void mc_hex(const uint8_t *b, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * n] = '\0';
}
