/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for libte/meta/meta_http.c's signing: the client against an
 * in-process metadata service (metad_serve on 127.0.0.1, an ephemeral
 * port) that has a token. A client with the same key is served; one
 * without a key gets MC_EAUTHREQUIRED, one with another key
 * MC_EAUTHFAILED, each with an error naming what to set.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_http.h"
#include "meta/meta.h"
#include "metad.h"
#include "mooncake/mc_err.h"

static struct metad *md;
static struct mc_http_server *srv;
static struct mc_auth_key key, other;
static char url[128], err[1024];

static void setup(void)
{
	struct metad_options o = { .store = "memory", .auth = &key };

	cr_assert_eq(mc_auth_init(), 0);
	mc_auth_key_of("0123456789abcdef0123", 20, &key);
	mc_auth_key_of("fedcba9876543210fedc", 20, &other);
	cr_assert_eq(metad_create(&o, &md, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(metad_serve(md, "127.0.0.1", 0, 2, &srv, err, sizeof(err)),
		     0, "%s", err);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/metadata",
		 mc_http_server_port(srv));
}

static void teardown(void)
{
	mc_http_server_stop(srv);
	metad_destroy(md);
}

TestSuite(meta_http_auth, .init = setup, .fini = teardown);

Test(meta_http_auth, signed_client_is_served)
{
	struct te_meta *m;
	const char *k = "mooncake/rpc_meta/a b&c", *v = "{\"ip\":\"x\"}";
	char *got;
	size_t len;

	cr_assert_eq(te_meta_open_key(url, &key, &m, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_eq(m->ops->put(m, k, v, strlen(v), err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_eq(m->ops->put_new(m, "mooncake/ram/a", v, strlen(v), err,
				     sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(m->ops->get(m, k, &got, &len, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_str_eq(got, v);
	free(got);
	cr_expect_eq(m->ops->del(m, k, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(m->ops->get(m, k, &got, &len, err, sizeof(err)), -ENOENT);
	te_meta_close(m);
}

Test(meta_http_auth, unsigned_and_wrong_key_are_refused)
{
	struct te_meta *m;
	const char *v = "{}";
	char *got;
	size_t len;

	cr_assert_eq(te_meta_open(url, &m, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(m->ops->put(m, "mooncake/rpc_meta/x", v, 2, err,
				 sizeof(err)),
		     MC_EAUTHREQUIRED);
	cr_expect(strstr(err, "requires authentication") &&
			  strstr(err, "MOONCAKE_AUTH_TOKEN_FILE"),
		  "%s", err);
	cr_expect_eq(m->ops->get(m, "mooncake/rpc_meta/x", &got, &len, err,
				 sizeof(err)),
		     MC_EAUTHREQUIRED);
	te_meta_close(m);
	cr_assert_eq(te_meta_open_key(url, &other, &m, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_eq(m->ops->put(m, "mooncake/rpc_meta/x", v, 2, err,
				 sizeof(err)),
		     MC_EAUTHFAILED);
	cr_expect(strstr(err, "authentication failed") != NULL, "%s", err);
	te_meta_close(m);
	cr_expect_eq(metad_count(md), 0);
}
