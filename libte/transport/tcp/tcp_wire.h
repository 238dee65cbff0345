/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file tcp_wire.h
 * Upstream Mooncake's TCP data framing (reference 1.7), the one codec used
 * by both our client and our server:
 *
 *   request:  u64 size (LE) | u64 addr (LE) | u8 opcode | 7 bytes padding
 *             opcode 0 READ, 1 WRITE; bit 0x80 set = protocol version 2.
 *             A WRITE's size bytes follow the header. Ours, version 2
 *             only: opcode 2 AUTH (size = nonce bytes, addr = exchange
 *             version; tcp_auth.c runs the steps that follow).
 *   status:   u64 (LE) = 0x4D435456 ("MCTV") << 32 | code;
 *             code 0 OK, 1 address rejected, 2 authentication required,
 *             3 authentication failed, 4 authentication off. Version 2
 *             only: for a READ it precedes the data, for a WRITE it
 *             follows the applied data.
 */
#ifndef TE_TCP_WIRE_H
#define TE_TCP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mc_compiler.h"

#define TCP_HDR_LEN 24
#define TCP_STATUS_LEN 8
#define TCP_OP_READ 0
#define TCP_OP_WRITE 1
#define TCP_OP_AUTH 2
#define TCP_OP_V2 0x80
#define TCP_STATUS_MAGIC 0x4D435456u
#define TCP_STATUS_OK 0
#define TCP_STATUS_REJECTED 1
#define TCP_STATUS_AUTH_REQUIRED 2
#define TCP_STATUS_AUTH_FAILED 3
#define TCP_STATUS_AUTH_OFF 4
#define TCP_AUTH_VERSION 1

struct tcp_hdr {
	uint64_t size;
	uint64_t addr;
	uint8_t op; /* TCP_OP_READ, TCP_OP_WRITE or TCP_OP_AUTH */
	bool v2;
};

void tcp_hdr_encode(const struct tcp_hdr *h, uint8_t out[TCP_HDR_LEN]);
/** -EPROTO for an unknown opcode (AUTH without the version 2 bit). */
int tcp_hdr_decode(const uint8_t in[TCP_HDR_LEN],
		   struct tcp_hdr *h) MC_MUST_CHECK;

void tcp_status_encode(uint32_t code, uint8_t out[TCP_STATUS_LEN]);
/** -EPROTO when the magic is wrong; *code receives the code. */
int tcp_status_decode(const uint8_t in[TCP_STATUS_LEN],
		      uint32_t *code) MC_MUST_CHECK;

#endif
