/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/mc_auth_http.c: a signed request passes once; the
 * same header again is a replay; another key, another path or body, a
 * timestamp outside the window, a missing or malformed header fail, each
 * with its reason.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "mc_auth_http.h"

#define NOW 1800000000u

static struct mc_auth_key key;
static struct mc_auth_replay *replay;

static void setup(void)
{
	cr_assert_eq(mc_auth_init(), 0);
	mc_auth_key_of("the-pool-token-0123", 19, &key);
	cr_assert_eq(mc_auth_replay_create(&replay), 0);
}

static void teardown(void)
{
	mc_auth_replay_destroy(replay);
}

TestSuite(mc_auth_http, .init = setup, .fini = teardown);

static int check(const char *path, const char *query, const char *body,
		 const char *auth, uint64_t now, const char **why)
{
	struct mc_http_request req = { .method = "GET",
				       .path = path,
				       .query = query,
				       .body = body,
				       .body_len = strlen(body),
				       .authorization = auth };

	*why = "";
	return mc_auth_http_check(&key, replay, &req, now, why);
}

Test(mc_auth_http, signed_request_passes_once)
{
	char h[MC_AUTH_HTTP_HDR_LEN];
	const char *why;

	mc_auth_http_sign(&key, "GET", "/query_key", "key=a", "", 0, NOW, h);
	cr_assert_eq(check("/query_key", "key=a", "", h, NOW + 5, &why), 0,
		     "%s", why);
	cr_assert_eq(check("/query_key", "key=a", "", h, NOW + 5, &why),
		     -EACCES);
	cr_assert_not_null(strstr(why, "replayed"), "%s", why);
}

/* The cache held the last 4096 nonces: after 4096 other requests inside
 * the window, a captured one passed again. It holds every nonce while its
 * timestamp can pass, and forgets it after. */
Test(mc_auth_http, replay_refused_however_many_came_between)
{
	char first[MC_AUTH_HTTP_HDR_LEN], h[MC_AUTH_HTTP_HDR_LEN];
	const char *why;

	mc_auth_http_sign(&key, "GET", "/x", NULL, "", 0, NOW, first);
	cr_assert_eq(check("/x", NULL, "", first, NOW, &why), 0, "%s", why);
	for (int i = 0; i < 3 * MC_AUTH_HTTP_NONCES; i++) {
		mc_auth_http_sign(&key, "GET", "/x", NULL, "", 0, NOW + 10, h);
		cr_assert_eq(check("/x", NULL, "", h, NOW + 10, &why), 0,
			     "%d: %s", i, why);
	}
	cr_assert_eq(check("/x", NULL, "", first, NOW + 20, &why), -EACCES);
	cr_assert_not_null(strstr(why, "replayed"), "%s", why);
	/* Past its window: refused for its time, and the cache lets it go
	 * (the table is rebuilt without it as others arrive). */
	cr_assert_eq(check("/x", NULL, "", first, NOW + 61, &why), -EACCES);
	cr_assert_not_null(strstr(why, "window"), "%s", why);
	for (int i = 0; i < 3 * MC_AUTH_HTTP_NONCES; i++) {
		mc_auth_http_sign(&key, "GET", "/x", NULL, "", 0, NOW + 200, h);
		cr_assert_eq(check("/x", NULL, "", h, NOW + 200, &why), 0,
			     "%d: %s", i, why);
	}
}

Test(mc_auth_http, anything_else_signed_fails_with_its_reason)
{
	struct mc_auth_key other;
	char h[MC_AUTH_HTTP_HDR_LEN];
	const char *why;

	mc_auth_http_sign(&key, "GET", "/get_all_keys", NULL, "", 0, NOW, h);
	cr_assert_eq(check("/get_all_segments", NULL, "", h, NOW, &why),
		     -EACCES);
	cr_assert_not_null(strstr(why, "authentication failed"), "%s", why);
	cr_assert_eq(check("/get_all_keys", NULL, "x", h, NOW, &why), -EACCES);
	cr_assert_eq(check("/get_all_keys", NULL, "", h, NOW + 61, &why),
		     -EACCES);
	cr_assert_not_null(strstr(why, "window"), "%s", why);
	mc_auth_key_of("another-token-0123", 18, &other);
	mc_auth_http_sign(&other, "GET", "/get_all_keys", NULL, "", 0, NOW, h);
	cr_assert_eq(check("/get_all_keys", NULL, "", h, NOW, &why), -EACCES);
	cr_assert_not_null(strstr(why, "authentication failed"), "%s", why);
	cr_assert_eq(check("/get_all_keys", NULL, "", NULL, NOW, &why),
		     -EACCES);
	cr_assert_not_null(strstr(why, "authentication required"), "%s", why);
	cr_assert_eq(check("/get_all_keys", NULL, "", "MC-HMAC ts=1", NOW,
			   &why),
		     -EACCES);
	cr_assert_not_null(strstr(why, "malformed"), "%s", why);
}
