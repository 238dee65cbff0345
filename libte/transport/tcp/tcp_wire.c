/* SPDX-License-Identifier: Apache-2.0 */
/* Upstream's TCP data framing: see tcp_wire.h. Fuzzed (fuzz_te_tcp_wire). */
#include <errno.h>
#include <string.h>

#include "tcp_wire.h"

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

void tcp_hdr_encode(const struct tcp_hdr *h, uint8_t out[TCP_HDR_LEN])
{
	memset(out, 0, TCP_HDR_LEN);
	put_le64(out, h->size);
	put_le64(out + 8, h->addr);
	out[16] = (uint8_t)(h->op | (h->v2 ? TCP_OP_V2 : 0));
}

int tcp_hdr_decode(const uint8_t in[TCP_HDR_LEN], struct tcp_hdr *h)
{
	uint8_t op = in[16] & (uint8_t)~TCP_OP_V2;

	if (op != TCP_OP_READ && op != TCP_OP_WRITE)
		return -EPROTO;
	h->size = get_le64(in);
	h->addr = get_le64(in + 8);
	h->op = op;
	h->v2 = (in[16] & TCP_OP_V2) != 0;
	return 0;
}

void tcp_status_encode(uint32_t code, uint8_t out[TCP_STATUS_LEN])
{
	put_le64(out, (uint64_t)TCP_STATUS_MAGIC << 32 | code);
}

int tcp_status_decode(const uint8_t in[TCP_STATUS_LEN], uint32_t *code)
{
	uint64_t v = get_le64(in);

	if ((uint32_t)(v >> 32) != TCP_STATUS_MAGIC)
		return -EPROTO;
	*code = (uint32_t)v;
	return 0;
}
