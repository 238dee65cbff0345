/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MC_HANDSHAKE_MAX_LENGTH as upstream reads it: bytes, 1 MiB to 128 MiB.
 * A real engine (P2PHANDSHAKE, no metadata service) is created under each
 * setting and its handshake listener is sent Probe frames over loopback:
 * a frame under the limit is answered, one over it is not.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_net.h"
#include "mooncake/te.h"

static struct te_engine *engine_with(const char *limit, int *rc, char *err,
				     size_t errlen)
{
	struct te_engine_cfg cfg = { .metadata = "P2PHANDSHAKE",
				     .local_server_name = "127.0.0.1" };
	struct te_engine *eng = NULL;

	if (limit)
		cr_assert_eq(setenv("MC_HANDSHAKE_MAX_LENGTH", limit, 1), 0);
	else
		unsetenv("MC_HANDSHAKE_MAX_LENGTH");
	err[0] = '\0';
	*rc = te_engine_create(&cfg, &eng, err, errlen);
	return eng;
}

/* Send a Probe frame whose JSON is padded to json_len bytes; true when the
 * engine answers it. */
static bool probe_answered(struct te_engine *eng, size_t json_len)
{
	char host[64];
	const char *addr = te_engine_rpc_address(eng);
	const char *colon = strrchr(addr, ':');
	uint64_t n = json_len + 1;
	uint8_t type = 3, reply[9];
	char *json = malloc(json_len);
	int fd;
	bool ok;

	cr_assert_not_null(colon);
	snprintf(host, sizeof(host), "%.*s", (int)(colon - addr), addr);
	cr_assert_not_null(json);
	memset(json, ' ', json_len);
	json[0] = '{';
	json[json_len - 1] = '}';
	cr_assert_eq(mc_net_connect(host, atoi(colon + 1), 2000, &fd), 0);
	cr_assert_eq(mc_net_set_timeouts(fd, 5000), 0);
	/* A refused frame may close the connection while we still send. */
	ok = mc_net_write_all(fd, &n, 8) == 0 &&
	     mc_net_write_all(fd, &type, 1) == 0 &&
	     mc_net_write_all(fd, json, json_len) == 0;
	ok = ok && mc_net_read_all(fd, reply, sizeof(reply)) == 0 &&
	     reply[8] == 3;
	close(fd);
	free(json);
	return ok;
}

Test(handshake, default_is_one_mib)
{
	char err[256];
	int rc;
	struct te_engine *eng = engine_with(NULL, &rc, err, sizeof(err));

	cr_assert_eq(rc, 0, "%s", err);
	cr_expect(probe_answered(eng, 2));
	cr_expect(probe_answered(eng, (1u << 20) - 1));
	cr_expect_not(probe_answered(eng, 2u << 20));
	te_engine_destroy(eng);
}

Test(handshake, upstream_byte_count_is_honoured)
{
	char err[256];
	int rc;
	struct te_engine *eng = engine_with("16777216", &rc, err, sizeof(err));

	cr_assert_eq(rc, 0, "%s", err);
	cr_expect(probe_answered(eng, 2u << 20));
	cr_expect(probe_answered(eng, (16u << 20) - 1));
	cr_expect_not(probe_answered(eng, 17u << 20));
	te_engine_destroy(eng);
}

Test(handshake, bounds_are_inclusive)
{
	char err[256];
	int rc;
	struct te_engine *eng;

	eng = engine_with("1048576", &rc, err, sizeof(err));
	cr_assert_eq(rc, 0, "%s", err);
	te_engine_destroy(eng);
	eng = engine_with("134217728", &rc, err, sizeof(err));
	cr_assert_eq(rc, 0, "%s", err);
	te_engine_destroy(eng);
}

Test(handshake, other_values_are_refused_naming_the_range)
{
	static const char *const bad[] = { "16",
					   "128",
					   "1048575",
					   "134217729",
					   "16M",
					   "1 MiB",
					   "-1048576",
					   "0x100000",
					   "abc",
					   " 1048576",
					   "99999999999999999999" };
	char err[256];
	int rc;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct te_engine *eng =
			engine_with(bad[i], &rc, err, sizeof(err));

		cr_expect_eq(rc, -EINVAL, "'%s' accepted", bad[i]);
		cr_expect_null(eng);
		cr_expect(strstr(err, "MC_HANDSHAKE_MAX_LENGTH") &&
				  strstr(err, "1048576") &&
				  strstr(err, "134217728"),
			  "'%s': %s", bad[i], err);
		if (eng)
			te_engine_destroy(eng);
	}
}

/* Set but empty is unset (a shell's VAR= prefix). */
Test(handshake, empty_means_default)
{
	char err[256];
	int rc;
	struct te_engine *eng = engine_with("", &rc, err, sizeof(err));

	cr_assert_eq(rc, 0, "%s", err);
	cr_expect_not(probe_answered(eng, 2u << 20));
	te_engine_destroy(eng);
}
