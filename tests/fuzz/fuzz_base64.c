/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for the strict base64 codec (common/etcd/base64.c), which
 * decodes keys and values out of etcd's JSON responses.
 *
 * The input is used twice. As text: mc_b64_decode() must agree with an
 * independent bit-at-a-time reference decoder on acceptance and bytes,
 * return only 0 or -EINVAL with a buffer of mc_b64_decoded_max() + 1, and
 * anything it accepts must re-encode to the identical text (the decoder
 * is canonical). As bytes: mc_b64_encode() must write exactly
 * mc_b64_encoded_len() alphabet characters that decode back to the input.
 * Smaller output buffers give -E2BIG, never an overrun. Buffers are
 * allocated to their exact size for ASan.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "base64.h"
#include "fuzz_common.h"

static int ref_sym(uint8_t c)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				"abcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p = c ? memchr(a, c, 64) : NULL;

	return p ? (int)(p - a) : -1;
}

/* RFC 4648 by the letter, one bit at a time: 0 or -EINVAL. */
static int ref_decode(const uint8_t *in, size_t len, uint8_t *out, size_t *n)
{
	size_t pad = 0, o = 0, bits = 0;
	uint32_t acc = 0;

	if (len % 4)
		return -EINVAL;
	while (pad < 2 && pad < len && in[len - 1 - pad] == '=')
		pad++;
	for (size_t i = 0; i < len - pad; i++) {
		int v = ref_sym(in[i]);

		if (v < 0)
			return -EINVAL;
		for (int b = 5; b >= 0; b--) {
			acc = (acc << 1) | ((uint32_t)(v >> b) & 1);
			if (++bits == 8) {
				out[o++] = (uint8_t)acc;
				acc = 0;
				bits = 0;
			}
		}
	}
	/* Leftover bits must be zero padding, and '=' must fill the group. */
	if (acc != 0 || (pad && bits != (pad == 1 ? 2 : 4)))
		return -EINVAL;
	*n = o;
	return 0;
}

static void fuzz_decode(const uint8_t *data, size_t size)
{
	size_t max = mc_b64_decoded_max(size), n = 0, n_ref = 0, n_enc = 0;
	uint8_t *out = malloc(max + 1), *ref = malloc(max + 1);
	char *enc;
	int rc, rc_ref;

	FUZZ_CHECK(out && ref);
	rc = mc_b64_decode((const char *)data, size, out, max + 1, &n);
	rc_ref = ref_decode(data, size, ref, &n_ref);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL);
	FUZZ_CHECK(rc == rc_ref);
	if (rc == 0) {
		FUZZ_CHECK(n <= max && n == n_ref);
		FUZZ_CHECK(out[n] == '\0');
		FUZZ_CHECK(!memcmp(out, ref, n));
		/* Canonical: the text is exactly what encoding gives. */
		enc = malloc(size + 1);
		FUZZ_CHECK(enc);
		FUZZ_CHECK(mc_b64_encode(out, n, enc, size + 1, &n_enc) == 0);
		FUZZ_CHECK(n_enc == size && !memcmp(enc, data, size));
		free(enc);
		/* One byte short (no room for the NUL) is -E2BIG. */
		FUZZ_CHECK(mc_b64_decode((const char *)data, size, out, n,
					 NULL) == -E2BIG);
	}
	free(out);
	free(ref);
}

static void fuzz_encode(const uint8_t *data, size_t size)
{
	size_t len = mc_b64_encoded_len(size), n = 0, n_dec = 0;
	char *enc;
	uint8_t *dec;

	FUZZ_CHECK(len != SIZE_MAX && len % 4 == 0 && len / 4 * 3 >= size);
	enc = malloc(len + 1);
	dec = malloc(mc_b64_decoded_max(len) + 1);
	FUZZ_CHECK(enc && dec);
	FUZZ_CHECK(mc_b64_encode(size ? data : NULL, size, enc, len + 1, &n) ==
		   0);
	FUZZ_CHECK(n == len && enc[len] == '\0');
	for (size_t i = 0; i < len; i++)
		FUZZ_CHECK(ref_sym((uint8_t)enc[i]) >= 0 ||
			   (enc[i] == '=' && i + 2 >= len));
	FUZZ_CHECK(mc_b64_decode(enc, len, dec, mc_b64_decoded_max(len) + 1,
				 &n_dec) == 0);
	FUZZ_CHECK(n_dec == size && !memcmp(dec, data, size));
	/* No room for the NUL. */
	FUZZ_CHECK(mc_b64_encode(data, size, enc, len, NULL) == -E2BIG);
	free(enc);
	free(dec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_decode(data, size);
	fuzz_encode(data, size);
	return 0;
}
