/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_auth.h
 * The shared secret of a pool (docs/operations.md, "Authentication"): a
 * token file, and the mutual challenge-response both ends of a connection
 * run before anything else crosses it (docs/wire-protocol.md).
 *
 * The token file holds one secret line (at least MC_AUTH_TOKEN_MIN bytes
 * after trailing whitespace is cut). Like ssh with a private key, a file
 * that group or others may read, or that someone other than this user or
 * root owns, is refused. The token itself is never used on the wire: the
 * key is BLAKE2b-256 of it, and only HMAC-SHA-512-256 proofs over two
 * fresh nonces (libsodium crypto_auth) are sent, compared in constant
 * time. The two roles use different labels, so a proof cannot be
 * reflected back to its sender.
 *
 * Thread safety: a loaded key is read-only; every function may be called
 * from any thread after mc_auth_init().
 */
#ifndef MC_AUTH_H
#define MC_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mc_compiler.h"

#define MC_AUTH_KEY_LEN 32
#define MC_AUTH_NONCE_LEN 32
#define MC_AUTH_MAC_LEN 32
#define MC_AUTH_TOKEN_MIN 16
#define MC_AUTH_TOKEN_MAX 4096

/* Where a token file is named (flag / config key, environment). */
#define MC_AUTH_OPT "auth_token_file"
#define MC_AUTH_ENV "MOONCAKE_AUTH_TOKEN_FILE"

/*
 * A daemon's mc_opt row for its token file (needs mc_cfg.h, stddef.h):
 * flag and config key MC_AUTH_OPT, variable MC_AUTH_ENV, no default.
 */
#define MC_AUTH_CFG_OPT(cfg_type, field, help_text)                         \
	{                                                                   \
		.name = MC_AUTH_OPT, .env = MC_AUTH_ENV,                    \
		.type = MC_OPT_STRING, .offset = offsetof(cfg_type, field), \
		.help = help_text                                           \
	}

/* The hint every "no token" error carries. */
#define MC_AUTH_HINT \
	"set --auth_token_file / MOONCAKE_AUTH_TOKEN_FILE to the pool's token"

enum mc_auth_role { MC_AUTH_CLIENT, MC_AUTH_SERVER };

struct mc_auth_key {
	uint8_t k[MC_AUTH_KEY_LEN];
};

/** Initialize the crypto library (idempotent): 0 or -EIO. */
int mc_auth_init(void) MC_MUST_CHECK;

/**
 * Load path's token into *key. 0; -EACCES for a file readable by group or
 * others or owned by another user, -EINVAL for a token too short or too
 * long, another negative errno when it cannot be read; err says which and
 * what to do.
 */
int mc_auth_key_load(const char *path, struct mc_auth_key *key, char *err,
		     size_t errlen) MC_MUST_CHECK;

/**
 * Read a secret file (a token, a password) as ssh reads a private key: a
 * regular file without group or other permission bits, owned by this user
 * or root. At most cap bytes go into buf (*len of them). 0, or -EACCES /
 * -EINVAL for a file refused, another negative errno when it cannot be
 * read; err names the file as what ("token file") and says what to do.
 * The caller wipes buf.
 */
int mc_secret_file_read(const char *path, const char *what, void *buf,
			size_t cap, size_t *len, char *err,
			size_t errlen) MC_MUST_CHECK;

/**
 * mc_auth_init() then mc_auth_key_load() when path names a file; NULL or
 * "": no key (*have false), 0. What every user of a token calls.
 */
int mc_auth_key_load_opt(const char *path, bool *have, struct mc_auth_key *key,
			 char *err, size_t errlen) MC_MUST_CHECK;

/** The key of token bytes (tests, and tools that hold the token). */
void mc_auth_key_of(const void *token, size_t len, struct mc_auth_key *key);

/** Wipe a key. */
void mc_auth_key_clear(struct mc_auth_key *key);

/** A fresh nonce from the library's CSPRNG. */
void mc_auth_nonce(uint8_t out[MC_AUTH_NONCE_LEN]);

/**
 * The proof that role knows the key, bound to both nonces (the client's
 * first). Symmetric: the verifier recomputes it.
 */
void mc_auth_proof(const struct mc_auth_key *key, enum mc_auth_role role,
		   const uint8_t nc[MC_AUTH_NONCE_LEN],
		   const uint8_t ns[MC_AUTH_NONCE_LEN],
		   uint8_t out[MC_AUTH_MAC_LEN]);

/** Whether mac is role's proof (constant-time compare). */
bool mc_auth_proof_ok(const struct mc_auth_key *key, enum mc_auth_role role,
		      const uint8_t nc[MC_AUTH_NONCE_LEN],
		      const uint8_t ns[MC_AUTH_NONCE_LEN],
		      const uint8_t mac[MC_AUTH_MAC_LEN]);

#endif
