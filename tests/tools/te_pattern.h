/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The deterministic byte pattern shared by the transfer-engine test tools
 * (te_peer fills its buffer with it, te_conformance and te_client check
 * what they read against it), and a small xorshift generator for the
 * random data the tools write.
 *
 * Byte i of a buffer filled with seed s is
 *
 *   x = (i + 1) * 0x9E3779B97F4A7C15 + s * 0xBF58476D1CE4E5B9  (mod 2^64)
 *   byte = (uint8_t)((x >> 56) ^ (x >> 23))
 *
 * where i is the offset from the start of the peer's registered buffer.
 * The multiplier is odd, so the pattern does not repeat inside any buffer
 * a test uses and a read from a shifted offset does not match by chance;
 * a different seed gives a different buffer. Cheap: a multiply per byte.
 */
#ifndef TE_PATTERN_H
#define TE_PATTERN_H

#include <stddef.h>
#include <stdint.h>

static inline uint8_t te_pattern_byte(uint64_t seed, uint64_t i)
{
	uint64_t x =
		(i + 1) * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;

	return (uint8_t)((x >> 56) ^ (x >> 23));
}

/* Fill buf with the pattern bytes [off, off + len). */
static inline void te_pattern_fill(uint8_t *buf, size_t len, uint64_t seed,
				   uint64_t off)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = te_pattern_byte(seed, off + i);
}

/*
 * Index of the first byte of buf that differs from the pattern bytes
 * [off, off + len), or len when all match.
 */
static inline size_t te_pattern_check(const uint8_t *buf, size_t len,
				      uint64_t seed, uint64_t off)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != te_pattern_byte(seed, off + i))
			return i;
	return len;
}

/* xorshift64: the tools' reproducible random data. *s must not be 0. */
static inline uint64_t te_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static inline void te_rand_fill(uint8_t *buf, size_t len, uint64_t *s)
{
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t v = te_rand(s);
		for (int k = 0; k < 8; k++)
			buf[i + k] = (uint8_t)(v >> (8 * k));
	}
	if (i < len) {
		uint64_t v = te_rand(s);
		for (; i < len; i++, v >>= 8)
			buf[i] = (uint8_t)v;
	}
}

#endif
