/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd metadata backend over etcd's v3 HTTP/JSON gateway (etcd >= 3.4:
 * POST /v3/kv/{range,put,deleterange,txn}, keys and values in base64).
 * Requests go through etcd_client.c (endpoints in turn, TLS, etcd's
 * authentication; the connection string is mc_etcd_conn.c's). A retried
 * write may already have been applied by the endpoint that timed out;
 * every op here tolerates that except del, which may then report -ENOENT
 * for a key it did delete.
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "etcd_client.h"
#include "etcd_json.h"
#include "meta.h"
#include "mooncake/mc_err.h"

struct etcd_meta {
	struct te_meta base;
	struct etcd_client cli;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static struct etcd_meta *to_etcd(struct te_meta *m)
{
	return mc_container_of(m, struct etcd_meta, base);
}

static int check_args(const char *key, const void *val, size_t len, char *err,
		      size_t errlen)
{
	if (!key || !*key || (!val && len)) {
		mc_etcd_errf(err, errlen, "etcd: %s",
			     !key || !*key ? "empty key" : "NULL value");
		return -EINVAL;
	}
	return 0;
}

/* ---- ops ---- */

static int etcd_get(struct te_meta *tm, const char *key, char **val,
		    size_t *len, char *err, size_t errlen)
{
	struct etcd_meta *m = to_etcd(tm);
	json_t *req, *resp, *kv = NULL;
	const char *ep = NULL;
	int rc = check_args(key, NULL, 0, err, errlen);

	if (rc)
		return rc;
	req = mc_etcd_json_kv(key, NULL, 0, false);
	rc = mc_etcd_call(&m->cli, "/v3/kv/range", req, &resp, &ep, err,
			  errlen);
	json_decref(req);
	if (rc)
		return rc;
	rc = mc_etcd_json_first_kv(resp, &kv);
	if (!rc)
		rc = mc_etcd_json_value(kv, val, len);
	if (rc == -ENOENT)
		mc_etcd_errf(err, errlen, "etcd %s: no key '%.200s'", ep, key);
	else if (rc == -EBADMSG)
		mc_etcd_errf(err, errlen,
			     "etcd %s: malformed range response for "
			     "'%.200s'",
			     ep, key);
	json_decref(resp);
	return rc;
}

static int etcd_put(struct te_meta *tm, const char *key, const void *val,
		    size_t len, char *err, size_t errlen)
{
	struct etcd_meta *m = to_etcd(tm);
	json_t *req, *resp;
	const char *ep = NULL;
	int rc = check_args(key, val, len, err, errlen);

	if (rc)
		return rc;
	req = mc_etcd_json_kv(key, val, len, true);
	rc = mc_etcd_call(&m->cli, "/v3/kv/put", req, &resp, &ep, err, errlen);
	json_decref(req);
	json_decref(resp);
	return rc;
}

/*
 * One txn: if the key was never created, put it; else read it back in the
 * same revision and compare the bytes.
 */
static int etcd_put_new(struct te_meta *tm, const char *key, const void *val,
			size_t len, char *err, size_t errlen)
{
	struct etcd_meta *m = to_etcd(tm);
	json_t *req, *resp, *kv = NULL, *range, *kb, *put, *get;
	const char *ep = NULL;
	char *cur = NULL;
	size_t cur_len = 0;
	int rc = check_args(key, val, len, err, errlen);

	if (rc)
		return rc;
	kb = mc_etcd_json_b64(key, strlen(key));
	put = mc_etcd_json_kv(key, val, len, true);
	get = mc_etcd_json_kv(key, NULL, 0, false);
	req = NULL;
	if (kb && put && get)
		req = json_pack("{s:[{s:O,s:s,s:s,s:s}],s:[{s:O}],s:[{s:O}]}",
				"compare", "key", kb, "target", "CREATE",
				"create_revision", "0", "result", "EQUAL",
				"success", "request_put", put, "failure",
				"request_range", get);
	json_decref(kb);
	json_decref(put);
	json_decref(get);
	rc = mc_etcd_call(&m->cli, "/v3/kv/txn", req, &resp, &ep, err, errlen);
	json_decref(req);
	if (rc)
		return rc;
	if (json_is_true(json_object_get(resp, "succeeded"))) {
		json_decref(resp);
		return 0;
	}
	range = json_object_get(
		json_array_get(json_object_get(resp, "responses"), 0),
		"response_range");
	rc = mc_etcd_json_first_kv(range, &kv);
	if (!rc)
		rc = mc_etcd_json_value(kv, &cur, &cur_len);
	json_decref(resp);
	if (rc) {
		/* The compare failed, so the range must have found the key. */
		mc_etcd_errf(err, errlen,
			     "etcd %s: malformed txn response for "
			     "'%.200s'",
			     ep, key);
		return rc == -ENOMEM ? rc : -EBADMSG;
	}
	if (cur_len != len || (len && memcmp(cur, val, len))) {
		mc_etcd_errf(err, errlen,
			     "etcd %s: key '%.200s' already holds other bytes "
			     "(%zu bytes there, %zu offered)",
			     ep, key, cur_len, len);
		rc = MC_EMETACONFLICT;
	}
	free(cur);
	return rc;
}

static int etcd_del(struct te_meta *tm, const char *key, char *err,
		    size_t errlen)
{
	struct etcd_meta *m = to_etcd(tm);
	json_t *req, *resp;
	const char *ep = NULL;
	long long deleted = 0;
	int rc = check_args(key, NULL, 0, err, errlen);

	if (rc)
		return rc;
	req = mc_etcd_json_kv(key, NULL, 0, false);
	rc = mc_etcd_call(&m->cli, "/v3/kv/deleterange", req, &resp, &ep, err,
			  errlen);
	json_decref(req);
	if (rc)
		return rc;
	rc = mc_etcd_json_int(resp, "deleted", &deleted);
	json_decref(resp);
	if (rc)
		mc_etcd_errf(err, errlen,
			     "etcd %s: malformed deleterange response", ep);
	else if (deleted <= 0)
		rc = -ENOENT;
	if (rc == -ENOENT)
		mc_etcd_errf(err, errlen, "etcd %s: no key '%.200s'", ep, key);
	return rc;
}

static void etcd_destroy(struct te_meta *tm)
{
	struct etcd_meta *m = to_etcd(tm);

	mc_etcd_client_fini(&m->cli);
	free(m);
}

static const struct te_meta_ops etcd_ops = {
	.scheme = "etcd",
	.get = etcd_get,
	.put = etcd_put,
	.put_new = etcd_put_new,
	.del = etcd_del,
	.destroy = etcd_destroy,
};

int te_meta_etcd_open(const char *endpoints, struct te_meta **out, char *err,
		      size_t errlen)
{
	struct etcd_meta *m;
	int rc;

	if (!endpoints || !out) {
		mc_etcd_errf(err, errlen, "etcd: no endpoints given");
		return -EINVAL;
	}
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK) {
		mc_etcd_errf(err, errlen, "etcd: curl_global_init failed");
		return -ENOMEM;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->base.ops = &etcd_ops;
	rc = mc_etcd_client_init(&m->cli, endpoints, err, errlen);
	if (rc) {
		etcd_destroy(&m->base);
		return rc;
	}
	*out = &m->base;
	return 0;
}
