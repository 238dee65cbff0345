/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/mc_auth.c: a token file loads only with mode 0600
 * (group- or other-readable files are refused, ssh-style) and a token of
 * sensible length; trailing newlines do not change the key; proofs verify
 * only for the same key, role and nonces.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mc_auth.h"

static char path[64];

static void write_token(const char *text, mode_t mode)
{
	int fd;

	snprintf(path, sizeof(path), "/tmp/mc_auth_test.XXXXXX");
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	cr_assert_eq(fchmod(fd, mode), 0);
	close(fd);
}

static void cleanup(void)
{
	unlink(path);
}

static void setup(void)
{
	cr_assert_eq(mc_auth_init(), 0);
}

TestSuite(mc_auth, .init = setup, .fini = cleanup);

Test(mc_auth, loads_a_private_token_ignoring_its_newline)
{
	struct mc_auth_key a, b;
	char err[256] = "";

	write_token("0123456789abcdef0123\n", 0600);
	cr_assert_eq(mc_auth_key_load(path, &a, err, sizeof(err)), 0, "%s",
		     err);
	mc_auth_key_of("0123456789abcdef0123", 20, &b);
	cr_assert_eq(memcmp(a.k, b.k, sizeof(a.k)), 0);
}

Test(mc_auth, refuses_a_token_readable_by_others)
{
	struct mc_auth_key k;
	char err[256] = "";

	write_token("0123456789abcdef0123\n", 0644);
	cr_assert_eq(mc_auth_key_load(path, &k, err, sizeof(err)), -EACCES);
	cr_assert_not_null(strstr(err, "too open"), "%s", err);
}

Test(mc_auth, refuses_a_short_token)
{
	struct mc_auth_key k;
	char err[256] = "";

	write_token("short\n", 0600);
	cr_assert_eq(mc_auth_key_load(path, &k, err, sizeof(err)), -EINVAL);
	cr_assert_not_null(strstr(err, "too short"), "%s", err);
}

Test(mc_auth, no_path_means_no_key)
{
	struct mc_auth_key k;
	char err[256] = "";
	bool have = true;

	cr_assert_eq(mc_auth_key_load_opt("", &have, &k, err, sizeof(err)), 0);
	cr_assert_not(have);
	cr_assert_eq(mc_auth_key_load_opt("/nonexistent/token", &have, &k, err,
					  sizeof(err)),
		     -ENOENT);
	cr_assert_not(have);
}

Test(mc_auth, proofs_verify_only_for_the_same_key_role_and_nonces)
{
	uint8_t nc[MC_AUTH_NONCE_LEN], ns[MC_AUTH_NONCE_LEN];
	uint8_t mac[MC_AUTH_MAC_LEN];
	struct mc_auth_key a, b;

	mc_auth_key_of("token-number-one", 16, &a);
	mc_auth_key_of("token-number-two", 16, &b);
	mc_auth_nonce(nc);
	mc_auth_nonce(ns);
	cr_assert_neq(memcmp(nc, ns, sizeof(nc)), 0);
	mc_auth_proof(&a, MC_AUTH_CLIENT, nc, ns, mac);
	cr_assert(mc_auth_proof_ok(&a, MC_AUTH_CLIENT, nc, ns, mac));
	cr_assert_not(mc_auth_proof_ok(&b, MC_AUTH_CLIENT, nc, ns, mac));
	cr_assert_not(mc_auth_proof_ok(&a, MC_AUTH_SERVER, nc, ns, mac));
	cr_assert_not(mc_auth_proof_ok(&a, MC_AUTH_CLIENT, ns, nc, mac));
}
