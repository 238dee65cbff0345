/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_parse.h
 * Strict parsers for the scalar values found in flags, config files and
 * environment variables. Every function parses the whole string (leading
 * and trailing blanks allowed) and returns 0, -EINVAL for malformed input
 * or -ERANGE for a value out of range; *out is untouched on error.
 */
#ifndef MC_PARSE_H
#define MC_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mc_compiler.h"

/**
 * Byte sizes as upstream's configs write them: "3355443200", "0", "4G",
 * "4GB", "500gb", "1.5 GiB", "64k". Units K, M, G, T, P (powers of 1024),
 * case-insensitive, optionally followed by "i" and/or "B"; "B" alone means
 * bytes. A fraction needs a unit and is rounded down to whole bytes.
 */
int mc_parse_size(const char *s, uint64_t *out) MC_MUST_CHECK;

/**
 * Durations: a number with an optional unit "ms", "s", "m" or "h"
 * (upstream's --default_kv_lease_ttl syntax). A bare number is in
 * default_unit_ms milliseconds (1 for ms, 1000 for seconds). A value
 * that is not a whole number of milliseconds ("1.5" ms, "0.0001s") is
 * -EINVAL, as garbage is; too large, -ERANGE.
 */
int mc_parse_duration_ms(const char *s, uint64_t default_unit_ms,
			 uint64_t *out) MC_MUST_CHECK;

/**
 * The duration in environment variable name (bare numbers in ms, or
 * "10s", "5m"): def_ms when it is unset or empty. A value that is no
 * duration, or lies outside [min_ms, max_ms], is -EINVAL or -ERANGE with
 * a message in err naming the variable, its value and the range: our
 * MC_*_MS variables are refused, never read as their leading digits
 * ("10s" was 10 ms) nor silently replaced by the default.
 */
int mc_parse_env_ms(const char *name, uint64_t def_ms, uint64_t min_ms,
		    uint64_t max_ms, uint64_t *out, char *err,
		    size_t errlen) MC_MUST_CHECK;

/** true/false, 1/0, yes/no, on/off (any case). */
int mc_parse_bool(const char *s, bool *out) MC_MUST_CHECK;

/** Decimal signed integer (optional sign, no base prefix). */
int mc_parse_i64(const char *s, int64_t *out) MC_MUST_CHECK;

/** Finite floating-point number. */
int mc_parse_double(const char *s, double *out) MC_MUST_CHECK;

/**
 * Split "host:port" or "[v6]:port". host_out gets a NUL-terminated copy
 * (at most host_len - 1 bytes, else -ENAMETOOLONG). A missing port gives
 * default_port (which may be -1 to make the port mandatory). A bare IPv6
 * address ("::1", "fe80::1%eth0") is a host without a port, unless it
 * also reads as address:port ("::1:80"): that one is -EINVAL.
 */
int mc_parse_hostport(const char *s, char *host_out, size_t host_len,
		      int default_port, int *port_out) MC_MUST_CHECK;

/**
 * A range of ports to pick from, its ends as two optional strings (an
 * environment's MIN and MAX: NULL or "" keeps *lo or *hi). -EINVAL, both
 * untouched, unless each given end is a port 1..65535 and lo <= hi.
 */
int mc_parse_port_range(const char *lo_s, const char *hi_s, int *lo,
			int *hi) MC_MUST_CHECK;

/**
 * The inverse of mc_parse_hostport: "host:port", or "[v6]:port" when host
 * holds a ':' (an IPv6 address), so that what one process prints or
 * announces another parses back. 0, or -ENAMETOOLONG when it does not fit
 * (out then holds a truncated string).
 */
int mc_fmt_hostport(char *out, size_t len, const char *host, int port);

/** The value of one hex digit (either case), or -1: for %XX escapes. */
int mc_parse_hexdigit(char c);

/** n bytes as 2n lower-case hex digits and a NUL into out (2n + 1). */
void mc_hex(const uint8_t *b, size_t n, char *out);

#endif
