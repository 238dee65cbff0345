/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for the strict query-string decoder (common/mc_http_query.c).
 *
 * Input: "NAME\nQUERY" looks up parameter NAME in the raw QUERY; without a
 * newline the whole input is the query and NAME is "key". The whole input
 * is also decoded with mc_http_unescape() and compared with a reference
 * decoder. Checks: only documented return codes; on success the value fits
 * (length < out_len), is NUL-terminated and holds no NUL; a smaller buffer
 * gives the same value or -E2BIG; re-escaping the value decodes back to the
 * same bytes. Buffers are allocated to their exact size for ASan.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz_common.h"
#include "mc_http.h"

static const size_t small_lens[] = { 1, 2, 3, 8, 64 };

static bool is_query_rc(int rc)
{
	return rc == 0 || rc == -ENOENT || rc == -EINVAL || rc == -E2BIG ||
	       rc == -EEXIST;
}

static void check_value(int rc, const char *out, size_t out_len, size_t n)
{
	FUZZ_CHECK(is_query_rc(rc));
	if (rc)
		return;
	FUZZ_CHECK(n < out_len);
	FUZZ_CHECK(out[n] == '\0');
	FUZZ_CHECK(memchr(out, '\0', n) == NULL);
}

static int hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
		return (c | 0x20) - 'a' + 10;
	return -1;
}

/* An independent decoder: 0 or -EINVAL; out holds at least len + 1. */
static int ref_unescape(const uint8_t *in, size_t len, char *out, size_t *n)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		int c = in[i];

		if (c == '%') {
			if (len - i < 3 || hexval(in[i + 1]) < 0 ||
			    hexval(in[i + 2]) < 0)
				return -EINVAL;
			c = hexval(in[i + 1]) * 16 + hexval(in[i + 2]);
			i += 2;
		} else if (c == '+') {
			c = ' ';
		}
		if (c == 0)
			return -EINVAL;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	*n = o;
	return 0;
}

/* Escape every byte as %XX (mixed case), or keep plain alphanumerics. */
static size_t escape(const char *in, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef0123456789ABCDEF";
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		int upper = (i & 1) ? 16 : 0;

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
			out[o++] = (char)c;
			continue;
		}
		out[o++] = '%';
		out[o++] = hex[upper + (c >> 4)];
		out[o++] = hex[upper + (c & 15)];
	}
	out[o] = '\0';
	return o;
}

static void check_roundtrip(const char *name, const char *val, size_t n)
{
	size_t name_len = strlen(name), enc_len, q_len, n2 = 0;
	char *enc = malloc(3 * n + 1);
	char *query = malloc(name_len + 1 + 3 * n + 1);
	char *out = malloc(n + 1);
	int rc;

	FUZZ_CHECK(enc && query && out);
	enc_len = escape(val, n, enc);
	rc = mc_http_unescape(enc, enc_len, out, n + 1, &n2);
	FUZZ_CHECK(rc == 0 && n2 == n && !memcmp(out, val, n));

	/* As the only parameter, under a name that has no '&' or '='. */
	if (!strpbrk(name, "&=")) {
		q_len = (size_t)snprintf(query, name_len + 1 + 3 * n + 1,
					 "%s=%s", name, enc);
		FUZZ_CHECK(q_len == name_len + 1 + enc_len);
		n2 = 0;
		rc = mc_http_query_get(query, name, out, n + 1, &n2);
		FUZZ_CHECK(rc == 0 && n2 == n && !memcmp(out, val, n));
	}
	free(enc);
	free(query);
	free(out);
}

static void fuzz_query(const char *query, const char *name)
{
	size_t qlen = strlen(query), n_full = 0;
	char *full = malloc(qlen + 1);
	int rc_full;

	FUZZ_CHECK(full);
	/* A value never decodes longer than the raw query: no -E2BIG. */
	rc_full = mc_http_query_get(query, name, full, qlen + 1, &n_full);
	check_value(rc_full, full, qlen + 1, n_full);
	FUZZ_CHECK(rc_full != -E2BIG);

	for (size_t i = 0; i < sizeof(small_lens) / sizeof(small_lens[0]);
	     i++) {
		size_t len = small_lens[i], n = 0;
		char *out = malloc(len);
		int rc;

		FUZZ_CHECK(out);
		rc = mc_http_query_get(query, name, out, len, &n);
		check_value(rc, out, len, n);
		if (rc_full == 0 && n_full < len)
			FUZZ_CHECK(rc == 0 && n == n_full &&
				   !memcmp(out, full, n + 1));
		else if (rc_full == 0)
			FUZZ_CHECK(rc == -E2BIG);
		else if (rc_full == -EINVAL)
			FUZZ_CHECK(rc == -EINVAL || rc == -E2BIG);
		else
			FUZZ_CHECK(rc == rc_full);
		free(out);
	}
	/* A NULL n_out is allowed; a NULL query is "absent". */
	if (rc_full == 0)
		FUZZ_CHECK(mc_http_query_get(query, name, full, qlen + 1,
					     NULL) == 0);
	FUZZ_CHECK(mc_http_query_get(NULL, name, full, qlen + 1, NULL) ==
		   -ENOENT);
	if (rc_full == 0)
		check_roundtrip(name, full, n_full);
	free(full);
}

static void fuzz_unescape(const uint8_t *data, size_t size)
{
	char *out = malloc(size + 1), *ref = malloc(size + 1);
	size_t n = 0, n_ref = 0;
	int rc, rc_ref;

	FUZZ_CHECK(out && ref);
	rc = mc_http_unescape((const char *)data, size, out, size + 1, &n);
	rc_ref = ref_unescape(data, size, ref, &n_ref);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL);
	FUZZ_CHECK(rc == rc_ref);
	if (rc == 0) {
		check_value(rc, out, size + 1, n);
		FUZZ_CHECK(n == n_ref && !memcmp(out, ref, n + 1));
	}
	/* No room even for the terminator. */
	FUZZ_CHECK(mc_http_unescape((const char *)data, size, out, 0, &n) ==
		   -E2BIG);
	free(out);
	free(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1);
	const char *name = "key", *query = buf;
	const uint8_t *nl;

	FUZZ_CHECK(buf);
	if (size)
		memcpy(buf, data, size);
	buf[size] = '\0';
	nl = memchr(data, '\n', size);
	if (nl) {
		buf[nl - data] = '\0';
		name = buf;
		query = buf + (nl - data) + 1;
	}
	fuzz_query(query, name);
	fuzz_unescape(data, size);
	free(buf);
	return 0;
}
