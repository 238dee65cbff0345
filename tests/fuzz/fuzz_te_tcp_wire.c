/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the TCP data framing and the server's range check, the two things
 * a peer's bytes reach before our memory is touched:
 *   - tcp_hdr_decode / tcp_status_decode on arbitrary bytes, with
 *     encode/decode round trips;
 *   - te__reg_check_remote: a decoded request is accepted only if
 *     [addr, addr + size) lies inside one remote-accessible buffer of a
 *     small registration table (checked independently here, including
 *     ranges that wrap around 2^64).
 * Input: 24 header bytes, 8 status bytes, then anything (ignored).
 */
#include <errno.h>
#include <string.h>

#include "fuzz_common.h"
#include "te_int.h"
#include "transport/tcp/tcp_wire.h"

static struct te_memreg regs[3] = {
	{ .addr = 0x10000, .len = 0x1000, .remote = true },
	{ .addr = 0x20000, .len = 0x10000, .remote = false },
	{ .addr = UINT64_MAX - 0xfff, .len = 0x1000, .remote = true },
};

static bool inside_remote(uint64_t addr, uint64_t size)
{
	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++) {
		struct te_memreg *r = &regs[i];
		if (r->remote && addr >= r->addr && addr - r->addr <= r->len &&
		    size <= r->len - (addr - r->addr))
			return true;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct te_memreg *table[3] = { &regs[0], &regs[1], &regs[2] };
	struct te_engine eng;
	uint8_t out[TCP_HDR_LEN];
	struct tcp_hdr h, h2;
	uint32_t code;

	if (size < TCP_HDR_LEN)
		return 0;
	if (tcp_hdr_decode(data, &h) == 0) {
		FUZZ_CHECK(h.op == TCP_OP_READ || h.op == TCP_OP_WRITE ||
			   (h.op == TCP_OP_AUTH && h.v2));
		tcp_hdr_encode(&h, out);
		FUZZ_CHECK(memcmp(out, data, 17) == 0);
		FUZZ_CHECK(tcp_hdr_decode(out, &h2) == 0);
		FUZZ_CHECK(h2.size == h.size && h2.addr == h.addr &&
			   h2.op == h.op && h2.v2 == h.v2);

		memset(&eng, 0, sizeof(eng));
		eng.regs = table;
		eng.n_regs = 3;
		FUZZ_CHECK(te__reg_check_remote(&eng, h.addr, h.size) ==
			   (inside_remote(h.addr, h.size) &&
			    h.addr + h.size >= h.addr));
	} else {
		FUZZ_CHECK((data[16] & 0x7f) > TCP_OP_AUTH ||
			   ((data[16] & 0x7f) == TCP_OP_AUTH &&
			    !(data[16] & TCP_OP_V2)));
	}
	if (size >= TCP_HDR_LEN + TCP_STATUS_LEN &&
	    tcp_status_decode(data + TCP_HDR_LEN, &code) == 0) {
		uint8_t st[TCP_STATUS_LEN];
		tcp_status_encode(code, st);
		FUZZ_CHECK(memcmp(st, data + TCP_HDR_LEN, sizeof(st)) == 0);
	}
	return 0;
}
