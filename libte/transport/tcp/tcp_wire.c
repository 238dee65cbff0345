/* SPDX-License-Identifier: Apache-2.0 */
/* Upstream's TCP data framing: see tcp_wire.h. Fuzzed (fuzz_te_tcp_wire). */
#include <errno.h>
#include <string.h>

#include "tcp_wire.h"
#include "mc_le.h"

void tcp_hdr_encode(const struct tcp_hdr *h, uint8_t out[TCP_HDR_LEN])
{
	memset(out, 0, TCP_HDR_LEN);
	mc_put_le64(out, h->size);
	mc_put_le64(out + 8, h->addr);
	out[16] = (uint8_t)(h->op | (h->v2 ? TCP_OP_V2 : 0));
}

int tcp_hdr_decode(const uint8_t in[TCP_HDR_LEN], struct tcp_hdr *h)
{
	uint8_t op = in[16] & (uint8_t)~TCP_OP_V2;

	if (op != TCP_OP_READ && op != TCP_OP_WRITE &&
	    !(op == TCP_OP_AUTH && (in[16] & TCP_OP_V2)))
		return -EPROTO;
	h->size = mc_get_le64(in);
	h->addr = mc_get_le64(in + 8);
	h->op = op;
	h->v2 = (in[16] & TCP_OP_V2) != 0;
	return 0;
}

void tcp_status_encode(uint32_t code, uint8_t out[TCP_STATUS_LEN])
{
	mc_put_le64(out, (uint64_t)TCP_STATUS_MAGIC << 32 | code);
}

int tcp_status_decode(const uint8_t in[TCP_STATUS_LEN], uint32_t *code)
{
	uint64_t v = mc_get_le64(in);

	if ((uint32_t)(v >> 32) != TCP_STATUS_MAGIC)
		return -EPROTO;
	*code = (uint32_t)v;
	return 0;
}
