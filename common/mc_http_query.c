/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Strict query-string decoding. libmicrohttpd's own unescaping silently
 * keeps malformed escapes; clients deserve a 400 instead, so servers parse
 * the raw query with these functions (fuzzed by fuzz_http_query).
 */
#include <errno.h>
#include <string.h>

#include "mc_http.h"
#include "mc_parse.h"
#include "mc_sbuf.h"

void mc_http_escape(const char *in, size_t len, struct mc_sbuf *b)
{
	static const char hex[] = "0123456789ABCDEF";

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		char e[3] = { '%', hex[c >> 4], hex[c & 15] };

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || (c && strchr("-._~/", c)))
			mc_sbuf_put(b, (const char *)&in[i], 1);
		else
			mc_sbuf_put(b, e, 3);
	}
}

int mc_http_unescape(const char *in, size_t len, char *out, size_t out_len,
		     size_t *n_out)
{
	size_t n = 0;

	if (out_len == 0)
		return -E2BIG;
	for (size_t i = 0; i < len; i++) {
		char c = in[i];

		if (c == '%') {
			int hi, lo;
			if (i + 2 >= len)
				return -EINVAL;
			hi = mc_parse_hexdigit(in[i + 1]);
			lo = mc_parse_hexdigit(in[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = (char)(hi * 16 + lo);
			i += 2;
		} else if (c == '+') {
			c = ' ';
		}
		if (c == '\0')
			return -EINVAL;
		if (n + 1 >= out_len)
			return -E2BIG;
		out[n++] = c;
	}
	out[n] = '\0';
	if (n_out)
		*n_out = n;
	return 0;
}

int mc_http_query_get(const char *query, const char *name, char *out,
		      size_t out_len, size_t *n_out)
{
	size_t name_len = strlen(name);
	const char *p = query, *found = NULL;
	size_t found_len = 0;

	if (!query)
		return -ENOENT;
	while (*p) {
		const char *end = strchr(p, '&');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len > name_len && !memcmp(p, name, name_len) &&
		    p[name_len] == '=') {
			if (found)
				return -EEXIST;
			found = p + name_len + 1;
			found_len = len - name_len - 1;
		} else if (len == name_len && !memcmp(p, name, name_len)) {
			if (found)
				return -EEXIST;
			found = p + len; /* "key" with no '=' is empty */
			found_len = 0;
		}
		p += len;
		if (*p == '&')
			p++;
	}
	if (!found)
		return -ENOENT;
	return mc_http_unescape(found, found_len, out, out_len, n_out);
}
