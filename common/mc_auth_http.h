/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_auth_http.h
 * Signed HTTP requests (docs/wire-protocol.md, "HTTP authentication"): the
 * token never crosses the wire; each request carries
 *
 *   Authorization: MC-HMAC ts=<unix s>,nonce=<32 hex>,mac=<64 hex>
 *
 * mac = HMAC-SHA-512-256(key, "mooncake-http-v1\n" method "\n" path "\n"
 * query "\n" ts "\n" nonce "\n" hex(SHA-256(body))), with path and query
 * exactly as sent (query "" when none) and key as in mc_auth.h. A server
 * accepts ts within MC_AUTH_HTTP_WINDOW_S of its clock and each nonce once
 * while its ts is in that window (a replay cache starts with room for
 * MC_AUTH_HTTP_NONCES and grows to a million nonces in the window; past
 * that, signed requests are refused until the oldest age out).
 *
 * Thread safety: signing is pure; a replay cache has its own lock.
 */
#ifndef MC_AUTH_HTTP_H
#define MC_AUTH_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "mc_auth.h"
#include "mc_compiler.h"
#include "mc_http.h"

#define MC_AUTH_HTTP_SCHEME "MC-HMAC"
#define MC_AUTH_HTTP_WINDOW_S 60
#define MC_AUTH_HTTP_NONCES 4096
#define MC_AUTH_HTTP_HDR_LEN 192 /* room for the header's value */

/**
 * The Authorization value of a request into out[MC_AUTH_HTTP_HDR_LEN]
 * (query NULL: none; now_s: the Unix time).
 */
void mc_auth_http_sign(const struct mc_auth_key *key, const char *method,
		       const char *path, const char *query, const void *body,
		       size_t len, uint64_t now_s, char *out);

struct mc_auth_replay;

int mc_auth_replay_create(struct mc_auth_replay **out) MC_MUST_CHECK;
void mc_auth_replay_destroy(struct mc_auth_replay *r);

/**
 * Check req's signature at Unix time now_s: 0, or -EACCES with *why
 * (static text) saying what is wrong: missing, malformed, outside the
 * window, replayed, or not made with key.
 */
int mc_auth_http_check(const struct mc_auth_key *key, struct mc_auth_replay *r,
		       const struct mc_http_request *req, uint64_t now_s,
		       const char **why) MC_MUST_CHECK;

#endif
