/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file base64.h
 * Standard base64 (RFC 4648 section 4: "A-Za-z0-9+/", '=' padding), as
 * etcd's v3 JSON gateway carries keys and values.
 *
 * Encoding always pads. Decoding is strict and accepts exactly what
 * encoding produces: the length is a multiple of 4, '=' appears only as
 * the last one or two characters, the unused bits of the last symbol are
 * zero, and no whitespace or other bytes appear. So a successful decode
 * re-encodes to the identical text. Input is untrusted (it comes from the
 * network): every byte and length is checked, nothing is read past len.
 *
 * Both functions NUL-terminate their output; decoded bytes may contain
 * NULs themselves. Pure functions, safe from any thread.
 */
#ifndef MC_BASE64_H
#define MC_BASE64_H

#include <stddef.h>

#include "mc_compiler.h"

/** Characters mc_b64_encode() writes for n bytes (without the NUL), or
 *  SIZE_MAX when that does not fit in a size_t. */
size_t mc_b64_encoded_len(size_t n);

/** Upper bound on the bytes mc_b64_decode() yields from len characters. */
size_t mc_b64_decoded_max(size_t len);

/**
 * Encode n bytes of in (in may be NULL when n is 0) into out.
 * @param out_len  size of out; needs mc_b64_encoded_len(n) + 1
 * @param n_out    characters written, without the NUL (may be NULL)
 * @return 0, or -E2BIG when out is too small (out is then unspecified).
 */
int mc_b64_encode(const void *in, size_t n, char *out, size_t out_len,
		  size_t *n_out) MC_MUST_CHECK;

/**
 * Decode len characters of in (not necessarily NUL-terminated) into out.
 * @param out_len  size of out; the decoded bytes plus a NUL must fit, and
 *                 mc_b64_decoded_max(len) + 1 always does
 * @param n_out    bytes decoded, without the NUL (may be NULL)
 * @return 0; -EINVAL for malformed input; -E2BIG when out is too small
 *         (out is then unspecified).
 */
int mc_b64_decode(const char *in, size_t len, void *out, size_t out_len,
		  size_t *n_out) MC_MUST_CHECK;

#endif
