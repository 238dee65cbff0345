/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pool's shared secret: loading the token file with ssh's care about
 * who may read it, and the proofs of the challenge-response (mc_auth.h).
 * All cryptography is libsodium's: BLAKE2b for the key, crypto_auth
 * (HMAC-SHA-512-256) for proofs, crypto_verify_32 to compare them, its
 * CSPRNG for nonces.
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mc_auth.h"
#include "mooncake/mc_err.h"

_Static_assert(MC_AUTH_KEY_LEN == crypto_auth_KEYBYTES, "key length");
_Static_assert(MC_AUTH_MAC_LEN == crypto_auth_BYTES, "proof length");

/* BLAKE2b's key: separates this use of the token from any other. */
static const uint8_t key_label[16] = "mooncake-auth-v1";

static const char *const role_label[] = {
	[MC_AUTH_CLIENT] = "mooncake-auth-v1 client proof",
	[MC_AUTH_SERVER] = "mooncake-auth-v1 server proof",
};

int mc_auth_init(void)
{
	return sodium_init() < 0 ? -EIO : 0;
}

void mc_auth_key_of(const void *token, size_t len, struct mc_auth_key *key)
{
	crypto_generichash(key->k, sizeof(key->k), token, len, key_label,
			   sizeof(key_label));
}

void mc_auth_key_clear(struct mc_auth_key *key)
{
	sodium_memzero(key, sizeof(*key));
}

/* Refuse what ssh refuses for a private key: not a regular file, open to
 * group or others, owned by someone else. */
static int check_mode(const char *path, const char *what, const struct stat *st,
		      char *err, size_t errlen)
{
	if (!S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "%s %s is not a regular file", what,
			 path);
		return -EINVAL;
	}
	if (st->st_mode & 077) {
		snprintf(err, errlen,
			 "permissions 0%03o for %s %s are too open: "
			 "it must not be accessible by group or others "
			 "(chmod 600 %s)",
			 (unsigned)(st->st_mode & 0777), what, path, path);
		return -EACCES;
	}
	if (st->st_uid != geteuid() && st->st_uid != 0) {
		snprintf(err, errlen,
			 "%s %s is owned by uid %u, neither this user "
			 "(uid %u) nor root",
			 what, path, (unsigned)st->st_uid, (unsigned)geteuid());
		return -EACCES;
	}
	return 0;
}

int mc_secret_file_read(const char *path, const char *what, void *buf,
			size_t cap, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	size_t got = 0;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open %s %s: %s", what, path,
			 mc_strerror(rc));
		return rc;
	}
	rc = fstat(fd, &st) ? -errno : 0;
	if (rc)
		snprintf(err, errlen, "cannot stat %s %s: %s", what, path,
			 mc_strerror(rc));
	else
		rc = check_mode(path, what, &st, err, errlen);
	while (!rc && got < cap) {
		ssize_t n = read(fd, (char *)buf + got, cap - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			snprintf(err, errlen, "cannot read %s %s: %s", what,
				 path, mc_strerror(rc));
		}
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	*len = got;
	return rc;
}

int mc_auth_key_load(const char *path, struct mc_auth_key *key, char *err,
		     size_t errlen)
{
	uint8_t buf[MC_AUTH_TOKEN_MAX + 1];
	size_t len = 0;
	int rc;

	rc = mc_secret_file_read(path, "token file", buf, sizeof(buf), &len,
				 err, errlen);
	if (rc)
		goto out_wipe;
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' ||
		       buf[len - 1] == ' ' || buf[len - 1] == '\t'))
		len--;
	if (len < MC_AUTH_TOKEN_MIN || len > MC_AUTH_TOKEN_MAX) {
		snprintf(err, errlen,
			 "token in %s is %s: it must hold %d to %d bytes "
			 "(e.g. openssl rand -hex 32 > %s)",
			 path,
			 len < MC_AUTH_TOKEN_MIN ? "too short" : "too long",
			 MC_AUTH_TOKEN_MIN, MC_AUTH_TOKEN_MAX, path);
		rc = -EINVAL;
		goto out_wipe;
	}
	mc_auth_key_of(buf, len, key);
out_wipe:
	sodium_memzero(buf, sizeof(buf));
	return rc;
}

int mc_auth_key_load_opt(const char *path, bool *have, struct mc_auth_key *key,
			 char *err, size_t errlen)
{
	int rc;

	*have = false;
	if (!path || !*path)
		return 0;
	rc = mc_auth_init();
	if (rc) {
		snprintf(err, errlen, "libsodium failed to initialize");
		return rc;
	}
	rc = mc_auth_key_load(path, key, err, errlen);
	*have = !rc;
	return rc;
}

void mc_auth_nonce(uint8_t out[MC_AUTH_NONCE_LEN])
{
	randombytes_buf(out, MC_AUTH_NONCE_LEN);
}

void mc_auth_proof(const struct mc_auth_key *key, enum mc_auth_role role,
		   const uint8_t nc[MC_AUTH_NONCE_LEN],
		   const uint8_t ns[MC_AUTH_NONCE_LEN],
		   uint8_t out[MC_AUTH_MAC_LEN])
{
	const char *label = role_label[role];
	size_t ll = strlen(label) + 1; /* with its NUL: labels stay apart */
	uint8_t msg[64 + 2 * MC_AUTH_NONCE_LEN];

	_Static_assert(sizeof("mooncake-auth-v1 client proof") <= 64, "label");
	memcpy(msg, label, ll);
	memcpy(msg + ll, nc, MC_AUTH_NONCE_LEN);
	memcpy(msg + ll + MC_AUTH_NONCE_LEN, ns, MC_AUTH_NONCE_LEN);
	crypto_auth(out, msg, ll + 2 * MC_AUTH_NONCE_LEN, key->k);
}

bool mc_auth_proof_ok(const struct mc_auth_key *key, enum mc_auth_role role,
		      const uint8_t nc[MC_AUTH_NONCE_LEN],
		      const uint8_t ns[MC_AUTH_NONCE_LEN],
		      const uint8_t mac[MC_AUTH_MAC_LEN])
{
	uint8_t want[MC_AUTH_MAC_LEN];
	bool ok;

	mc_auth_proof(key, role, nc, ns, want);
	ok = crypto_verify_32(want, mac) == 0;
	sodium_memzero(want, sizeof(want));
	return ok;
}
