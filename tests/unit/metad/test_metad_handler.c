/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for metad/metad.c: metad_handle() is called directly with
 * struct mc_http_request values, one test per row of the protocol table
 * in metad.h (status, body, content type, Allow header), plus the limits
 * on key and body size and metad_create() errors.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <time.h>

#include "mc_auth_http.h"
#include "metad.h"
#include "metad_options.h"
#include "mooncake/mc_err.h"

#define MAX_KEY 16
#define MAX_BODY 64

static struct metad *md;
static char err[512];

static void md_setup(void)
{
	struct metad_options o = {
		.store = "memory",
		.max_body = MAX_BODY,
		.max_key = MAX_KEY,
	};

	cr_assert_eq(metad_create(&o, &md, err, sizeof(err)), 0, "%s", err);
}

static void md_teardown(void)
{
	metad_destroy(md);
	md = NULL;
}

TestSuite(metad, .init = md_setup, .fini = md_teardown);

struct reply {
	int status;
	const char *content_type;
	const char *allow;
	char body[256];
	size_t body_len;
};

/*
 * Run one request; the response body is copied out and freed here.
 * Returns false when the body was not NUL-terminated. No assertions, so
 * that client threads can use it too.
 */
static bool call_raw(struct metad *m, const char *method, const char *path,
		     const char *query, const char *body, size_t body_len,
		     struct reply *r)
{
	struct mc_http_request req = {
		.method = method,
		.path = path,
		.query = query,
		.body = body ? body : "",
		.body_len = body_len,
	};
	struct mc_http_response resp = { 0 };
	bool nul_ok = true;

	memset(r, 0, sizeof(*r));
	metad_handle(m, &req, &resp);
	r->status = resp.status;
	r->content_type = resp.content_type;
	r->allow = resp.allow;
	r->body_len = resp.body_len;
	if (resp.body) {
		size_t n = resp.body_len < sizeof(r->body) - 1 ?
				   resp.body_len :
				   sizeof(r->body) - 1;

		memcpy(r->body, resp.body, n);
		r->body[n] = '\0';
		nul_ok = resp.body[resp.body_len] == '\0';
	}
	free(resp.body);
	return nul_ok;
}

static struct reply call_body(struct metad *m, const char *method,
			      const char *path, const char *query,
			      const char *body, size_t body_len)
{
	struct reply r;

	cr_expect(call_raw(m, method, path, query, body, body_len, &r),
		  "%s %s?%s: response body not NUL-terminated", method, path,
		  query ? query : "");
	return r;
}

static struct reply call(const char *method, const char *path,
			 const char *query, const char *body)
{
	return call_body(md, method, path, query, body,
			 body ? strlen(body) : 0);
}

static struct reply get(const char *query)
{
	return call("GET", "/metadata", query, NULL);
}

static struct reply put(const char *query, const char *body)
{
	return call("PUT", "/metadata", query, body);
}

static struct reply del(const char *query)
{
	return call("DELETE", "/metadata", query, NULL);
}

Test(metad, get_miss_is_404)
{
	struct reply r = get("key=absent");

	cr_expect_eq(r.status, 404);
	cr_expect_str_eq(r.body, "metadata not found");
}

Test(metad, put_then_get)
{
	static const char body[] = "{\"segment\": \"node1\", \"size\": 42}";
	struct reply r = put("key=mooncake/seg1", body);

	cr_expect_eq(r.status, 200);
	cr_expect_str_eq(r.body, "metadata updated");
	cr_expect_eq(metad_count(md), 1);

	r = get("key=mooncake/seg1");
	cr_expect_eq(r.status, 200);
	cr_assert_not_null(r.content_type);
	cr_expect_str_eq(r.content_type, "application/json");
	cr_expect_eq(r.body_len, strlen(body));
	cr_expect_str_eq(r.body, body);
}

Test(metad, put_replaces)
{
	struct reply r;

	cr_expect_eq(put("key=k", "{\"v\": 1}").status, 200);
	r = put("key=k", "{\"v\": 2}");
	cr_expect_eq(r.status, 200);
	cr_expect_str_eq(r.body, "metadata updated");
	r = get("key=k");
	cr_expect_eq(r.status, 200);
	cr_expect_str_eq(r.body, "{\"v\": 2}");
	cr_expect_eq(metad_count(md), 1);

	/* The same body again is fine too. */
	cr_expect_eq(put("key=k", "{\"v\": 2}").status, 200);
}

Test(metad, head_is_like_get)
{
	struct reply r;

	cr_expect_eq(call("HEAD", "/metadata", "key=h", NULL).status, 404);
	cr_assert_eq(put("key=h", "{}").status, 200);
	r = call("HEAD", "/metadata", "key=h", NULL);
	cr_expect_eq(r.status, 200);
	cr_expect_eq(r.body_len, 2);
}

Test(metad, rpc_meta_is_exclusive)
{
	struct reply r;

	r = put("key=m/rpc_meta/n1", "{\"port\": 1}");
	cr_expect_eq(r.status, 200);
	/* The same body: an idempotent re-registration. */
	r = put("key=m/rpc_meta/n1", "{\"port\": 1}");
	cr_expect_eq(r.status, 200);
	/* Another body: a port clash, refused, the first kept. */
	r = put("key=m/rpc_meta/n1", "{\"port\": 2}");
	cr_expect_eq(r.status, 400);
	cr_expect(strstr(r.body, "rpc_meta") != NULL, "'%s'", r.body);
	r = get("key=m/rpc_meta/n1");
	cr_expect_eq(r.status, 200);
	cr_expect_str_eq(r.body, "{\"port\": 1}");

	/* After a delete the key is free again. */
	cr_expect_eq(del("key=m/rpc_meta/n1").status, 200);
	cr_expect_eq(put("key=m/rpc_meta/n1", "{\"port\": 2}").status, 200);
	r = get("key=m/rpc_meta/n1");
	cr_expect_str_eq(r.body, "{\"port\": 2}");
}

Test(metad, other_keys_are_not_exclusive)
{
	cr_expect_eq(put("key=mooncake/ram/x", "a").status, 200);
	cr_expect_eq(put("key=mooncake/ram/x", "b").status, 200);
	/* "rpc_meta" must appear in the decoded key, anywhere. */
	cr_expect_eq(put("key=rpc%5Fmeta", "a").status, 200);
	cr_expect_eq(put("key=rpc_meta", "b").status, 400);
}

Test(metad, delete)
{
	struct reply r;

	cr_assert_eq(put("key=d", "x").status, 200);
	r = del("key=d");
	cr_expect_eq(r.status, 200);
	cr_expect_eq(metad_count(md), 0);
	cr_expect_eq(get("key=d").status, 404);
	r = del("key=d");
	cr_expect_eq(r.status, 404);
	cr_expect_eq(del("key=never").status, 404);
}

Test(metad, missing_key_is_400)
{
	static const char *const queries[] = { NULL, "", "other=1", "keys=1",
					       "KEY=1" };

	for (size_t i = 0; i < MC_ARRAY_SIZE(queries); i++) {
		const char *q = queries[i];

		cr_expect_eq(get(q).status, 400, "GET ?%s", q ? q : "(none)");
		cr_expect_eq(put(q, "x").status, 400, "PUT ?%s",
			     q ? q : "(none)");
		cr_expect_eq(del(q).status, 400, "DELETE ?%s",
			     q ? q : "(none)");
	}
	cr_expect_eq(metad_count(md), 0);
}

Test(metad, empty_key_is_400)
{
	static const char *const queries[] = { "key=", "key", "a=1&key=&b=2" };

	for (size_t i = 0; i < MC_ARRAY_SIZE(queries); i++) {
		cr_expect_eq(put(queries[i], "x").status, 400, "?%s",
			     queries[i]);
		cr_expect_eq(get(queries[i]).status, 400, "?%s", queries[i]);
		cr_expect_eq(del(queries[i]).status, 400, "?%s", queries[i]);
	}
	cr_expect_eq(metad_count(md), 0);
}

Test(metad, malformed_escape_is_400)
{
	static const char *const queries[] = { "key=%zz", "key=a%4", "key=%",
					       "key=a%00b", "key=%G0" };

	for (size_t i = 0; i < MC_ARRAY_SIZE(queries); i++) {
		struct reply r = put(queries[i], "x");

		cr_expect_eq(r.status, 400, "?%s", queries[i]);
		cr_expect_eq(get(queries[i]).status, 400, "?%s", queries[i]);
		cr_expect_eq(del(queries[i]).status, 400, "?%s", queries[i]);
	}
	cr_expect_eq(metad_count(md), 0);
}

Test(metad, repeated_key_is_400)
{
	struct reply r = put("key=a&key=b", "x");

	cr_expect_eq(r.status, 400);
	cr_expect_eq(get("key=a&key=a").status, 400);
	cr_expect_eq(del("key=a&x=1&key=a").status, 400);
	cr_expect_eq(metad_count(md), 0);
}

Test(metad, escaped_keys_decode)
{
	struct reply r;

	cr_assert_eq(put("key=a%2Fb", "slash").status, 200);
	r = get("key=a/b");
	cr_expect_eq(r.status, 200);
	cr_expect_str_eq(r.body, "slash");

	cr_assert_eq(put("key=with+space", "sp").status, 200);
	r = get("key=with%20space");
	cr_expect_eq(r.status, 200);
	cr_expect_str_eq(r.body, "sp");

	/* Other parameters are ignored. */
	r = get("x=1&key=a%2fb&y=2");
	cr_expect_eq(r.status, 200);
	cr_expect_str_eq(r.body, "slash");
}

Test(metad, key_length_limit)
{
	char q[128];

	/* Exactly max_key bytes is allowed. */
	snprintf(q, sizeof(q), "key=%.*s", MAX_KEY, "0123456789abcdefXYZ");
	cr_expect_eq(put(q, "ok").status, 200, "?%s", q);
	cr_expect_eq(get(q).status, 200);

	snprintf(q, sizeof(q), "key=%.*s", MAX_KEY + 1, "0123456789abcdefXYZ");
	cr_expect_eq(put(q, "x").status, 400, "?%s", q);
	cr_expect_eq(get(q).status, 400, "?%s", q);
	cr_expect_eq(del(q).status, 400, "?%s", q);

	/* The limit is on the decoded key: 16 escapes are 16 bytes. */
	cr_expect_eq(put("key=%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41",
			 "ok")
			     .status,
		     200);
	cr_expect_eq(
		put("key=%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41",
		    "x")
			.status,
		400);
	cr_expect_eq(metad_count(md), 2);
}

Test(metad, body_size_limit)
{
	char body[MAX_BODY + 2];
	struct reply r;

	memset(body, 'b', sizeof(body));
	/* Exactly max_body is allowed. */
	r = call_body(md, "PUT", "/metadata", "key=big", body, MAX_BODY);
	cr_expect_eq(r.status, 200);
	r = call_body(md, "PUT", "/metadata", "key=big2", body, MAX_BODY + 1);
	cr_expect_eq(r.status, 413);
	cr_expect_eq(get("key=big2").status, 404, "oversized body stored");
	/* A too-large replacement keeps the old value. */
	r = call_body(md, "PUT", "/metadata", "key=big", body, MAX_BODY + 2);
	cr_expect_eq(r.status, 413);
	r = get("key=big");
	cr_expect_eq(r.body_len, MAX_BODY);
}

Test(metad, binary_and_empty_bodies)
{
	static const char bin[] = { '{', '\0', '}', '\n', '\xff' };
	struct reply r;

	r = call_body(md, "PUT", "/metadata", "key=bin", bin, sizeof(bin));
	cr_expect_eq(r.status, 200);
	r = get("key=bin");
	cr_expect_eq(r.status, 200);
	cr_expect_eq(r.body_len, sizeof(bin));
	cr_expect_eq(memcmp(r.body, bin, sizeof(bin)), 0);

	cr_expect_eq(put("key=empty", "").status, 200);
	r = get("key=empty");
	cr_expect_eq(r.status, 200);
	cr_expect_eq(r.body_len, 0);
}

Test(metad, other_methods_are_405)
{
	static const char *const methods[] = { "POST", "PATCH", "OPTIONS",
					       "TRACE", "get" };

	for (size_t i = 0; i < MC_ARRAY_SIZE(methods); i++) {
		struct reply r = call(methods[i], "/metadata", "key=k", "x");

		cr_expect_eq(r.status, 405, "%s", methods[i]);
		cr_assert_not_null(r.allow, "%s: no Allow header", methods[i]);
		cr_expect(strstr(r.allow, "GET") != NULL, "Allow: %s", r.allow);
		cr_expect(strstr(r.allow, "PUT") != NULL, "Allow: %s", r.allow);
		cr_expect(strstr(r.allow, "DELETE") != NULL, "Allow: %s",
			  r.allow);
		cr_expect(strstr(r.allow, "POST") == NULL, "Allow: %s",
			  r.allow);
	}
	cr_expect_eq(metad_count(md), 0);
	/* Even without a key, the method is refused first. */
	cr_expect_eq(call("POST", "/metadata", NULL, "x").status, 405);
}

Test(metad, health)
{
	struct reply r = call("GET", "/health", NULL, NULL);

	cr_expect_eq(r.status, 200);
	cr_expect_str_eq(r.body, "OK");
	cr_expect_eq(call("HEAD", "/health", NULL, NULL).status, 200);
	r = call("POST", "/health", NULL, "x");
	cr_expect_eq(r.status, 405);
	cr_assert_not_null(r.allow);
	cr_expect(strstr(r.allow, "GET") != NULL);
}

/* One request with an Authorization header. */
static int call_auth(struct metad *m, const char *method, const char *query,
		     const char *body, const char *authz, char *out,
		     size_t outlen)
{
	struct mc_http_request req = {
		.method = method,
		.path = "/metadata",
		.query = query,
		.body = body ? body : "",
		.body_len = body ? strlen(body) : 0,
		.authorization = authz,
	};
	struct mc_http_response resp = { 0 };
	int st;

	metad_handle(m, &req, &resp);
	snprintf(out, outlen, "%.*s", (int)resp.body_len,
		 resp.body ? resp.body : "");
	st = resp.status;
	free(resp.body);
	return st;
}

Test(metad_auth, signed_requests_only)
{
	struct mc_auth_key key, other;
	struct metad_options o = { .store = "memory", .auth = &key };
	const char *q = "key=mooncake%2Frpc_meta%2Fa", *v = "{\"ip\":\"x\"}";
	uint64_t now = (uint64_t)time(NULL);
	char h[MC_AUTH_HTTP_HDR_LEN], body[512];
	struct metad *m;

	cr_assert_eq(mc_auth_init(), 0);
	mc_auth_key_of("0123456789abcdef0123", 20, &key);
	mc_auth_key_of("fedcba9876543210fedc", 20, &other);
	cr_assert_eq(metad_create(&o, &m, err, sizeof(err)), 0, "%s", err);
	/* Unsigned: refused, with the reason, for every method. */
	cr_expect_eq(call_auth(m, "PUT", q, v, NULL, body, sizeof(body)), 401);
	cr_expect(strstr(body, "authentication required") != NULL, "%s", body);
	cr_expect_eq(call_auth(m, "GET", q, NULL, NULL, body, sizeof(body)),
		     401);
	cr_expect_eq(call_auth(m, "DELETE", q, NULL, NULL, body, sizeof(body)),
		     401);
	cr_expect_eq(metad_count(m), 0);
	/* Signed: served. */
	mc_auth_http_sign(&key, "PUT", "/metadata", q, v, strlen(v), now, h);
	cr_expect_eq(call_auth(m, "PUT", q, v, h, body, sizeof(body)), 200);
	/* The same header again: replayed. */
	cr_expect_eq(call_auth(m, "PUT", q, v, h, body, sizeof(body)), 401);
	cr_expect(strstr(body, "replayed") != NULL, "%s", body);
	/* Another body under that signature, another key, a stale time. */
	mc_auth_http_sign(&key, "PUT", "/metadata", q, v, strlen(v), now, h);
	cr_expect_eq(call_auth(m, "PUT", q, "{}", h, body, sizeof(body)), 401);
	cr_expect(strstr(body, "authentication failed") != NULL, "%s", body);
	mc_auth_http_sign(&other, "GET", "/metadata", q, NULL, 0, now, h);
	cr_expect_eq(call_auth(m, "GET", q, NULL, h, body, sizeof(body)), 401);
	mc_auth_http_sign(&key, "GET", "/metadata", q, NULL, 0, now - 600, h);
	cr_expect_eq(call_auth(m, "GET", q, NULL, h, body, sizeof(body)), 401);
	cr_expect(strstr(body, "window") != NULL, "%s", body);
	cr_expect_eq(call_auth(m, "GET", q, NULL, "Bearer x", body,
			       sizeof(body)),
		     401);
	cr_expect(strstr(body, "malformed") != NULL, "%s", body);
	mc_auth_http_sign(&key, "GET", "/metadata", q, NULL, 0, now, h);
	cr_expect_eq(call_auth(m, "GET", q, NULL, h, body, sizeof(body)), 200);
	cr_expect_str_eq(body, v);
	mc_auth_http_sign(&key, "DELETE", "/metadata", q, NULL, 0, now, h);
	cr_expect_eq(call_auth(m, "DELETE", q, NULL, h, body, sizeof(body)),
		     200);
	/* /health stays open. */
	cr_expect_eq(call_body(m, "GET", "/health", NULL, NULL, 0).status, 200);
	metad_destroy(m);
}

Test(metad, unknown_path_is_404)
{
	static const char *const paths[] = { "/",	   "/metadata/",
					     "/metadatax", "/Metadata",
					     "/health/x",  "" };

	for (size_t i = 0; i < MC_ARRAY_SIZE(paths); i++) {
		cr_expect_eq(call("GET", paths[i], "key=k", NULL).status, 404,
			     "'%s'", paths[i]);
		cr_expect_eq(call("PUT", paths[i], "key=k", "x").status, 404,
			     "'%s'", paths[i]);
	}
	cr_expect_eq(metad_count(md), 0);
}

Test(metad_options, defaults_apply)
{
	struct metad_options o = { 0 };
	struct metad *m = NULL;
	char key[METAD_DEFAULT_MAX_KEY + 8];
	struct reply r;

	cr_assert_eq(metad_create(&o, &m, err, sizeof(err)), 0, "%s", err);
	memcpy(key, "key=", 4);
	memset(key + 4, 'k', METAD_DEFAULT_MAX_KEY);
	key[4 + METAD_DEFAULT_MAX_KEY] = '\0';
	r = call_body(m, "PUT", "/metadata", key, "v", 1);
	cr_expect_eq(r.status, 200);
	key[4 + METAD_DEFAULT_MAX_KEY] = 'k';
	key[5 + METAD_DEFAULT_MAX_KEY] = '\0';
	r = call_body(m, "PUT", "/metadata", key, "v", 1);
	cr_expect_eq(r.status, 400);

	{
		size_t n = METAD_DEFAULT_MAX_BODY + 1;
		char *big = malloc(n);

		cr_assert_not_null(big);
		memset(big, 'x', n);
		r = call_body(m, "PUT", "/metadata", "key=big", big, n - 1);
		cr_expect_eq(r.status, 200);
		r = call_body(m, "PUT", "/metadata", "key=big2", big, n);
		cr_expect_eq(r.status, 413);
		free(big);
	}
	metad_destroy(m);
}

Test(metad_options, bad_store_refused)
{
	struct metad_options o = { .store = "etcd:127.0.0.1:2379" };
	struct metad *m = NULL;

	err[0] = '\0';
	cr_expect_eq(metad_create(&o, &m, err, sizeof(err)), MC_EBADCONFIG);
	cr_expect_null(m);
	cr_expect(strstr(err, "etcd:127.0.0.1:2379") != NULL, "'%s'", err);
	metad_destroy(NULL);
}

Test(metad_options, sqlite_store_survives_restart)
{
	char dir[64], store[128], p[160];
	struct metad_options o = { 0 };
	struct metad *m = NULL;
	struct reply r;

	snprintf(dir, sizeof(dir), "/tmp/metad_handler_test.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(store, sizeof(store), "sqlite:%s/m.db", dir);
	o.store = store;

	cr_assert_eq(metad_create(&o, &m, err, sizeof(err)), 0, "%s", err);
	r = call_body(m, "PUT", "/metadata", "key=p", "{\"x\":1}", 7);
	cr_expect_eq(r.status, 200);
	metad_destroy(m);

	m = NULL;
	cr_assert_eq(metad_create(&o, &m, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(metad_count(m), 1);
	r = call_body(m, "GET", "/metadata", "key=p", NULL, 0);
	cr_expect_eq(r.status, 200);
	cr_expect_str_eq(r.body, "{\"x\":1}");
	metad_destroy(m);

	snprintf(p, sizeof(p), "%s/m.db", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/m.db-wal", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/m.db-shm", dir);
	unlink(p);
	rmdir(dir);
}

/* ---- the daemon's option table (metad_options.c) ---- */

Test(metad_cfg, defaults_are_valid)
{
	struct metad_cfg c = { 0 };

	cr_assert_eq(mc_cfg_defaults(&metad_cfg_spec, &c, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_str_eq(c.host, "0.0.0.0");
	cr_expect_eq(c.port, 8080);
	cr_expect_str_eq(c.store, "memory");
	cr_expect_eq(c.max_body_size, METAD_DEFAULT_MAX_BODY);
	cr_expect_eq(c.max_key_length, METAD_DEFAULT_MAX_KEY);
	cr_expect(!c.store_full_sync);
	cr_expect_eq(c.v, 0);
	cr_expect_null(c.config_path);
	mc_cfg_release(&metad_cfg_spec, &c);
}

Test(metad_cfg, upstream_flags)
{
	struct metad_cfg c = { 0 };
	struct mc_cfg_result res;
	char *argv[] = {
		"mooncake_metad", "--port=9090",      "-host", "127.0.0.1",
		"--store",	  "sqlite:/tmp/x.db", "-v",    NULL
	};

	cr_assert_eq(mc_cfg_load(&metad_cfg_spec, &c, 7, argv, &res, err,
				 sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(res.action, MC_CFG_RUN);
	cr_expect_eq(c.port, 9090);
	cr_expect_str_eq(c.host, "127.0.0.1");
	cr_expect_str_eq(c.store, "sqlite:/tmp/x.db");
	cr_expect_eq(c.v, 1);
	mc_cfg_release(&metad_cfg_spec, &c);
}

Test(metad_cfg, env_prefix)
{
	struct metad_cfg c = { 0 };
	struct mc_cfg_result res;
	char *argv[] = { "mooncake_metad", NULL };

	cr_assert_eq(setenv("MOONCAKE_METAD_MAX_KEY_LENGTH", "128", 1), 0);
	cr_assert_eq(mc_cfg_load(&metad_cfg_spec, &c, 1, argv, &res, err,
				 sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(c.max_key_length, 128);
	mc_cfg_release(&metad_cfg_spec, &c);
}

/* ---- concurrency: metad_handle() may run on many threads ---- */

struct client {
	int id;
	int failures;
};

static int client_call(const char *method, const char *query, const char *body,
		       struct reply *r)
{
	if (!call_raw(md, method, "/metadata", query, body,
		      body ? strlen(body) : 0, r))
		return -1;
	return r->status;
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	char q[32], body[32];
	struct reply r;

	for (int i = 0; i < 200; i++) {
		snprintf(q, sizeof(q), "key=c%d/%d", c->id, i);
		snprintf(body, sizeof(body), "{\"i\":%d}", i);
		if (client_call("PUT", q, body, &r) != 200)
			c->failures++;
		if (client_call("GET", q, NULL, &r) != 200 ||
		    strcmp(r.body, body))
			c->failures++;
		if (i % 2 && client_call("DELETE", q, NULL, &r) != 200)
			c->failures++;
		if (client_call("PUT", "key=x/rpc_meta", "{}", &r) != 200)
			c->failures++;
	}
	return NULL;
}

Test(metad, concurrent_clients)
{
	struct client c[4];
	pthread_t t[4];

	for (int i = 0; i < 4; i++) {
		c[i] = (struct client){ .id = i };
		cr_assert_eq(pthread_create(&t[i], NULL, client_main, &c[i]),
			     0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		cr_expect_eq(c[i].failures, 0, "client %d", i);
	}
	cr_expect_eq(metad_count(md), 4 * 100 + 1);
}

/* ---- metad_drop_engine(): the master's removal of dead engines ------ */

static int drop_call(struct metad *m, const char *method, const char *key,
		     const char *body)
{
	char q[128];
	struct reply r;

	snprintf(q, sizeof(q), "key=%s", key);
	return call_raw(m, method, "/metadata", q, body,
			body ? strlen(body) : 0, &r) ?
		       r.status :
		       -1;
}

static struct metad *drop_setup(void)
{
	struct metad_options o = { .store = "memory" };
	struct metad *m;

	cr_assert_eq(metad_create(&o, &m, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(drop_call(m, "PUT", "mooncake/ram/a:1", "{\"a\":1}"), 200);
	cr_assert_eq(drop_call(m, "PUT", "mooncake/rpc_meta/a:1", "{}"), 200);
	cr_assert_eq(drop_call(m, "PUT", "mooncake/ram/b:2", "{\"b\":2}"), 200);
	cr_assert_eq(drop_call(m, "PUT", "mooncake/rpc_meta/b:2", "{}"), 200);
	return m;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

Test(metad_drop, removes_only_that_engines_entries)
{
	struct metad *m = drop_setup();

	usleep(5000);
	cr_expect_eq(metad_drop_engine(m, "a:1", now_ms()), 2);
	cr_expect_eq(drop_call(m, "GET", "mooncake/ram/a:1", NULL), 404);
	cr_expect_eq(drop_call(m, "GET", "mooncake/rpc_meta/a:1", NULL), 404);
	cr_expect_eq(drop_call(m, "GET", "mooncake/ram/b:2", NULL), 200);
	cr_expect_eq(drop_call(m, "GET", "mooncake/rpc_meta/b:2", NULL), 200);
	cr_expect_eq(metad_drop_engine(m, "a:1", now_ms()), 0);
	cr_expect_eq(metad_drop_engine(m, "", now_ms()), 0);
	/* Published again afterwards: the name is free to take. */
	cr_expect_eq(drop_call(m, "PUT", "mooncake/rpc_meta/a:1", "{}"), 200);
	metad_destroy(m);
}

Test(metad_drop, keeps_entries_published_after_the_client_was_last_seen)
{
	struct metad *m = drop_setup();
	uint64_t seen;

	usleep(5000);
	seen = now_ms();
	usleep(5000);
	/* Its descriptor PUT again, unchanged (as a returning engine does
	 * while its rpc_meta entry is still there): both entries stay. */
	cr_assert_eq(drop_call(m, "PUT", "mooncake/ram/a:1", "{\"a\":1}"), 200);
	cr_expect_eq(metad_drop_engine(m, "a:1", seen), 0);
	cr_expect_eq(drop_call(m, "GET", "mooncake/ram/a:1", NULL), 200);
	cr_expect_eq(drop_call(m, "GET", "mooncake/rpc_meta/a:1", NULL), 200);
	/* A refused claim of the name is no sign of its owner's life. */
	usleep(5000);
	seen = now_ms();
	cr_assert_eq(drop_call(m, "PUT", "mooncake/rpc_meta/b:2", "{\"x\":1}"),
		     400);
	cr_expect_eq(metad_drop_engine(m, "b:2", seen), 2);
	metad_destroy(m);
}
