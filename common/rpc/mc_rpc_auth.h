/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_rpc_auth.h
 * The master RPC's authentication frames (docs/wire-protocol.md, "Master
 * RPC authentication"): the codec both ends share, and the client's side
 * of the exchange.
 *
 * When the master has a token, a connection's first frames are AUTH
 * frames (kind 2, request id 0, method = step), before any request:
 *
 *   client -> HELLO      nc (32 bytes, a fresh nonce)
 *   master -> CHALLENGE  ns (32) | the master's proof (32)
 *   client -> PROOF      the client's proof (32)
 *   master -> OK         (empty)
 *
 * Proofs are mc_auth_proof(key, role, nc, ns). Either end that finds the
 * other's proof wrong closes the connection; the master first sends
 * DENIED with a line of text saying why. A master without a token answers
 * HELLO with DENIED; a master with one answers a request on a connection
 * that has not authenticated with a code-only ILLEGAL_CLIENT response
 * flagged MC_RPC_FLAG_AUTH_REQUIRED, then closes it.
 */
#ifndef MC_RPC_AUTH_H
#define MC_RPC_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mc_auth.h"
#include "mc_compiler.h"
#include "mc_rpc.h"

enum mc_rpc_auth_step {
	MC_RPC_AUTH_HELLO = 1,
	MC_RPC_AUTH_CHALLENGE = 2,
	MC_RPC_AUTH_PROOF = 3,
	MC_RPC_AUTH_OK = 4,
	MC_RPC_AUTH_DENIED = 5,
};

#define MC_RPC_AUTH_REASON_MAX 256
/* The largest auth frame body (CHALLENGE, or DENIED's reason). */
#define MC_RPC_AUTH_MAX_BODY MC_RPC_AUTH_REASON_MAX

/** Whether len is a valid body length for step (false: unknown step). */
bool mc_rpc_auth_len_ok(uint16_t step, uint32_t len);

/**
 * Write the AUTH frame of step with body[len] into out, which holds
 * MC_RPC_HDR_LEN + len bytes; returns the frame's length.
 */
size_t mc_rpc_auth_frame(uint16_t step, const void *body, size_t len,
			 uint8_t *out);

/**
 * Authenticate a new connection fd (blocking, its timeouts set) as a
 * client with key. 0; MC_EAUTHFAILED when the master refused our proof
 * or its own proof is wrong (a different token); MC_EAUTHOFF when the
 * master has no token; -EPROTO for a frame out of turn; -ETIMEDOUT or
 * another transport error.
 */
int mc_rpc_auth_client(int fd, const struct mc_auth_key *key) MC_MUST_CHECK;

#endif
