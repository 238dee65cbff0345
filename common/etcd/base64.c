/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Strict standard base64 with padding (see base64.h). Decoding validates
 * the whole input before writing, so a malformed tail never leaves a
 * half-written buffer that looks like success.
 */
#include <errno.h>
#include <stdint.h>

#include "base64.h"

static const char alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* 0..63, or -1 for a byte outside the alphabet ('=' included). */
static int sym(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

size_t mc_b64_encoded_len(size_t n)
{
	size_t groups = n / 3 + (n % 3 != 0);

	if (groups > SIZE_MAX / 4)
		return SIZE_MAX;
	return groups * 4;
}

size_t mc_b64_decoded_max(size_t len)
{
	return len / 4 * 3;
}

int mc_b64_encode(const void *in, size_t n, char *out, size_t out_len,
		  size_t *n_out)
{
	const unsigned char *p = in;
	size_t need = mc_b64_encoded_len(n), o = 0, i;

	if (need == SIZE_MAX || out_len <= need)
		return -E2BIG;
	for (i = 0; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 |
			     p[i + 2];

		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = alphabet[(v >> 6) & 63];
		out[o++] = alphabet[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;

		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = '=';
		out[o++] = '=';
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;

		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = alphabet[(v >> 6) & 63];
		out[o++] = '=';
	}
	out[o] = '\0';
	if (n_out)
		*n_out = o;
	return 0;
}

/*
 * Check the last group (4 characters) and return how many bytes it
 * yields: 3, 2 or 1; -EINVAL if malformed.
 */
static int last_group(const unsigned char *g)
{
	int a = sym(g[0]), b = sym(g[1]), c = sym(g[2]), d = sym(g[3]);

	if (a < 0 || b < 0)
		return -EINVAL;
	if (g[2] == '=' && g[3] == '=')
		return (b & 15) ? -EINVAL : 1; /* non-canonical tail bits */
	if (c < 0)
		return -EINVAL;
	if (g[3] == '=')
		return (c & 3) ? -EINVAL : 2;
	return d < 0 ? -EINVAL : 3;
}

int mc_b64_decode(const char *in, size_t len, void *out, size_t out_len,
		  size_t *n_out)
{
	const unsigned char *s = (const unsigned char *)in;
	unsigned char *o = out;
	size_t n, full, i, k = 0;
	int tail = 0;

	if (len % 4)
		return -EINVAL;
	full = len ? len / 4 - 1 : 0; /* groups before the last one */
	if (len) {
		tail = last_group(s + len - 4);
		if (tail < 0)
			return tail;
	}
	for (i = 0; i < full * 4; i++)
		if (sym(s[i]) < 0)
			return -EINVAL;
	n = full * 3 + (size_t)tail;
	if (out_len <= n)
		return -E2BIG;

	for (i = 0; i < full * 4; i += 4) {
		uint32_t v = (uint32_t)sym(s[i]) << 18 |
			     (uint32_t)sym(s[i + 1]) << 12 |
			     (uint32_t)sym(s[i + 2]) << 6 |
			     (uint32_t)sym(s[i + 3]);

		o[k++] = (unsigned char)(v >> 16);
		o[k++] = (unsigned char)(v >> 8);
		o[k++] = (unsigned char)v;
	}
	if (len) {
		const unsigned char *g = s + len - 4;
		uint32_t v = (uint32_t)sym(g[0]) << 18 | (uint32_t)sym(g[1])
								 << 12;

		if (tail >= 2)
			v |= (uint32_t)sym(g[2]) << 6;
		if (tail == 3)
			v |= (uint32_t)sym(g[3]);
		o[k++] = (unsigned char)(v >> 16);
		if (tail >= 2)
			o[k++] = (unsigned char)(v >> 8);
		if (tail == 3)
			o[k++] = (unsigned char)v;
	}
	o[k] = '\0';
	if (n_out)
		*n_out = k;
	return 0;
}
