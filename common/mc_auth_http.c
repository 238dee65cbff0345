/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Signed HTTP requests (mc_auth_http.h). The replay cache holds every
 * nonce accepted while its timestamp could still pass the window check
 * (an open-addressing table; a slot whose time is over is free again),
 * so a request cannot be replayed inside the window however many came
 * after it. It held the last 4096 before: after 4096 other requests a
 * captured one was accepted again.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_auth_http.h"

#define NONCE_HEX 32 /* 16 random bytes */
#define MAC_HEX (2 * MC_AUTH_MAC_LEN)

struct seen {
	char nonce[NONCE_HEX];
	uint64_t until; /* unix s past which the nonce cannot pass; 0: free */
};

struct mc_auth_replay {
	pthread_mutex_t lock;
	struct seen *t;
	size_t cap, used; /* slots; slots with a nonce (live or over) */
};

/* At most this many nonces in the window (a signed request each). */
#define REPLAY_MAX (1u << 20)

static void mac_of(const struct mc_auth_key *key, const char *method,
		   const char *path, const char *query, const void *body,
		   size_t len, uint64_t ts, const char *nonce,
		   uint8_t out[MC_AUTH_MAC_LEN])
{
	uint8_t bh[crypto_hash_sha256_BYTES];
	char bhex[2 * sizeof(bh) + 1], ts_s[24];
	crypto_auth_hmacsha512256_state st;
	const char *parts[7];

	crypto_hash_sha256(bh, body, len);
	sodium_bin2hex(bhex, sizeof(bhex), bh, sizeof(bh));
	snprintf(ts_s, sizeof(ts_s), "%" PRIu64, ts);
	parts[0] = method;
	parts[1] = path;
	parts[2] = query ? query : "";
	parts[3] = ts_s;
	parts[4] = nonce;
	parts[5] = bhex;
	parts[6] = NULL;
	crypto_auth_hmacsha512256_init(&st, key->k, sizeof(key->k));
	crypto_auth_hmacsha512256_update(
		&st, (const uint8_t *)"mooncake-http-v1\n", 17);
	for (int i = 0; parts[i]; i++) {
		crypto_auth_hmacsha512256_update(&st, (const uint8_t *)parts[i],
						 strlen(parts[i]));
		if (parts[i + 1])
			crypto_auth_hmacsha512256_update(
				&st, (const uint8_t *)"\n", 1);
	}
	crypto_auth_hmacsha512256_final(&st, out);
}

void mc_auth_http_sign(const struct mc_auth_key *key, const char *method,
		       const char *path, const char *query, const void *body,
		       size_t len, uint64_t now_s, char *out)
{
	uint8_t n[NONCE_HEX / 2], mac[MC_AUTH_MAC_LEN];
	char nonce[NONCE_HEX + 1], mhex[MAC_HEX + 1];

	randombytes_buf(n, sizeof(n));
	sodium_bin2hex(nonce, sizeof(nonce), n, sizeof(n));
	mac_of(key, method, path, query, body, len, now_s, nonce, mac);
	sodium_bin2hex(mhex, sizeof(mhex), mac, sizeof(mac));
	snprintf(out, MC_AUTH_HTTP_HDR_LEN,
		 MC_AUTH_HTTP_SCHEME " ts=%" PRIu64 ",nonce=%s,mac=%s", now_s,
		 nonce, mhex);
}

int mc_auth_replay_create(struct mc_auth_replay **out)
{
	struct mc_auth_replay *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->cap = MC_AUTH_HTTP_NONCES;
	r->t = calloc(r->cap, sizeof(*r->t));
	if (!r->t) {
		free(r);
		return -ENOMEM;
	}
	pthread_mutex_init(&r->lock, NULL);
	*out = r;
	return 0;
}

void mc_auth_replay_destroy(struct mc_auth_replay *r)
{
	if (!r)
		return;
	pthread_mutex_destroy(&r->lock);
	free(r->t);
	free(r);
}

/* The nonce is random hex: its first 16 digits are hash enough. */
static size_t slot_of(const char *nonce, size_t cap)
{
	uint64_t h = 0;

	for (int i = 0; i < 16; i++)
		h = h << 4 | (uint64_t)(nonce[i] <= '9' ? nonce[i] - '0' :
							  nonce[i] - 'a' + 10);
	return (size_t)(h & (cap - 1));
}

/* Under the lock: the table again with only the nonces still live, in
 * cap slots (a power of two, more than twice those). */
static int rebuild(struct mc_auth_replay *r, uint64_t now, size_t cap)
{
	struct seen *t = calloc(cap, sizeof(*t));
	size_t used = 0;

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < r->cap; i++) {
		size_t j;

		if (r->t[i].until < now)
			continue;
		for (j = slot_of(r->t[i].nonce, cap); t[j].until;
		     j = (j + 1) & (cap - 1))
			;
		t[j] = r->t[i];
		used++;
	}
	free(r->t);
	r->t = t;
	r->cap = cap;
	r->used = used;
	return 0;
}

/* Record nonce, signed at ts; false when it was seen in its window (or
 * the table cannot take it: refused rather than let through). */
static bool replay_first(struct mc_auth_replay *r, const char *nonce,
			 uint64_t ts, uint64_t now)
{
	bool first = false;
	size_t j, live = 0;

	pthread_mutex_lock(&r->lock);
	if (2 * (r->used + 1) > r->cap) {
		size_t cap = r->cap;

		for (size_t i = 0; i < r->cap; i++)
			live += r->t[i].until >= now;
		while (cap < 4 * (live + 1) && cap < 2 * REPLAY_MAX)
			cap *= 2;
		if (live >= REPLAY_MAX || rebuild(r, now, cap))
			goto out;
	}
	for (j = slot_of(nonce, r->cap); r->t[j].until;
	     j = (j + 1) & (r->cap - 1))
		if (!memcmp(r->t[j].nonce, nonce, NONCE_HEX) &&
		    r->t[j].until >= now)
			goto out;
	memcpy(r->t[j].nonce, nonce, NONCE_HEX);
	r->t[j].until = ts + MC_AUTH_HTTP_WINDOW_S + 1;
	r->used++;
	first = true;
out:
	pthread_mutex_unlock(&r->lock);
	return first;
}

static bool all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* Split "MC-HMAC ts=T,nonce=N,mac=M" (fixed order and widths). */
static bool parse(const char *h, uint64_t *ts, char *nonce, char *mac)
{
	static const char pre[] = MC_AUTH_HTTP_SCHEME " ts=";
	char *end;

	if (strncmp(h, pre, sizeof(pre) - 1))
		return false;
	h += sizeof(pre) - 1;
	if (*h < '0' || *h > '9')
		return false;
	errno = 0;
	*ts = strtoull(h, &end, 10);
	if (errno || strncmp(end, ",nonce=", 7))
		return false;
	h = end + 7;
	if (!all_hex(h, NONCE_HEX) || strncmp(h + NONCE_HEX, ",mac=", 5))
		return false;
	memcpy(nonce, h, NONCE_HEX);
	nonce[NONCE_HEX] = 0;
	h += NONCE_HEX + 5;
	if (!all_hex(h, MAC_HEX) || h[MAC_HEX])
		return false;
	memcpy(mac, h, MAC_HEX + 1);
	return true;
}

int mc_auth_http_check(const struct mc_auth_key *key, struct mc_auth_replay *r,
		       const struct mc_http_request *req, uint64_t now_s,
		       const char **why)
{
	char nonce[NONCE_HEX + 1], mhex[MAC_HEX + 1];
	uint8_t got[MC_AUTH_MAC_LEN], want[MC_AUTH_MAC_LEN];
	uint64_t ts;

	if (!req->authorization) {
		*why = "authentication required: sign requests with the "
		       "pool's token (" MC_AUTH_HINT "; docs/wire-protocol.md)";
		return -EACCES;
	}
	if (!parse(req->authorization, &ts, nonce, mhex) ||
	    sodium_hex2bin(got, sizeof(got), mhex, MAC_HEX, NULL, NULL, NULL)) {
		*why = "malformed Authorization header (want " MC_AUTH_HTTP_SCHEME
		       " ts=,nonce=,mac=)";
		return -EACCES;
	}
	if (ts + MC_AUTH_HTTP_WINDOW_S < now_s ||
	    ts > now_s + MC_AUTH_HTTP_WINDOW_S) {
		*why = "signature timestamp outside the 60 s window (check "
		       "the clocks)";
		return -EACCES;
	}
	mac_of(key, req->method, req->path, req->query, req->body,
	       req->body_len, ts, nonce, want);
	if (crypto_verify_32(got, want)) {
		*why = "authentication failed: the signature was not made "
		       "with this pool's token";
		return -EACCES;
	}
	if (r && !replay_first(r, nonce, ts, now_s)) {
		*why = "replayed request (nonce seen before)";
		return -EACCES;
	}
	return 0;
}
