/* SPDX-License-Identifier: Apache-2.0 */
/* etcd ranges, leases and transactions over the JSON gateway
 * (etcd_kv.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_json.h"
#include "mc_compiler.h"
#include "etcd_kv.h"

/* Send req (a new reference, consumed; NULL: out of memory). */
static int call(struct etcd_client *c, const char *path, json_t *req,
		json_t **resp, char *err, size_t errlen)
{
	const char *ep = NULL;
	int rc;

	if (!req)
		return -ENOMEM;
	rc = mc_etcd_call(c, path, req, resp, &ep, err, errlen);
	json_decref(req);
	return rc;
}

static int bad(const char *what, char *err, size_t errlen)
{
	mc_etcd_errf(err, errlen, "etcd: malformed %s answer", what);
	return -EBADMSG;
}

void mc_etcd_kv_clear(struct mc_etcd_kv *kv)
{
	free(kv->key);
	free(kv->val);
	memset(kv, 0, sizeof(*kv));
}

void mc_etcd_kvs_free(struct mc_etcd_kv *kvs, size_t n)
{
	for (size_t i = 0; kvs && i < n; i++)
		mc_etcd_kv_clear(&kvs[i]);
	free(kvs);
}

static int kv_of(json_t *j, struct mc_etcd_kv *kv)
{
	json_t *k = json_object_get(j, "key");
	size_t klen;
	int rc;

	memset(kv, 0, sizeof(*kv));
	if (!json_is_object(j) || !json_is_string(k))
		return -EBADMSG;
	/* The key goes through the value decoder: {"value": key}. */
	{
		json_t *tmp = json_pack("{s:O}", "value", k);

		if (!tmp)
			return -ENOMEM;
		rc = mc_etcd_json_value(tmp, &kv->key, &klen);
		json_decref(tmp);
	}
	if (!rc && memchr(kv->key, '\0', klen))
		rc = -EBADMSG;
	if (!rc)
		rc = mc_etcd_json_value(j, &kv->val, &kv->len);
	if (!rc)
		rc = mc_etcd_json_int(j, "create_revision", &kv->create_rev);
	if (!rc)
		rc = mc_etcd_json_int(j, "mod_revision", &kv->mod_rev);
	if (!rc)
		rc = mc_etcd_json_int(j, "lease", &kv->lease);
	if (rc)
		mc_etcd_kv_clear(kv);
	return rc;
}

static int set_b64(json_t *o, const char *name, const char *s)
{
	return json_object_set_new(o, name, mc_etcd_json_b64(s, strlen(s)));
}

/* "range_end" for end: "" means every key from key on ("\0" in etcd). */
static int set_end(json_t *o, const char *end)
{
	static const char zero = '\0';

	if (!end)
		return 0;
	return json_object_set_new(o, "range_end",
				   *end ? mc_etcd_json_b64(end, strlen(end)) :
					  mc_etcd_json_b64(&zero, 1));
}

int mc_etcd_range_parse(json_t *resp, struct mc_etcd_kv **kvs, size_t *n,
			bool *more, long long *rev)
{
	json_t *arr;
	long long r = 0;
	size_t cnt;
	int rc;

	*kvs = NULL;
	*n = 0;
	*more = false;
	if (!json_is_object(resp) ||
	    mc_etcd_json_int(json_object_get(resp, "header"), "revision", &r))
		return -EBADMSG;
	if (rev)
		*rev = r;
	*more = json_is_true(json_object_get(resp, "more"));
	arr = json_object_get(resp, "kvs");
	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return -EBADMSG;
	cnt = json_array_size(arr);
	if (!cnt)
		return 0;
	*kvs = calloc(cnt, sizeof(**kvs));
	if (!*kvs)
		return -ENOMEM;
	for (size_t i = 0; i < cnt; i++) {
		rc = kv_of(json_array_get(arr, i), &(*kvs)[i]);
		if (rc) {
			mc_etcd_kvs_free(*kvs, i);
			*kvs = NULL;
			return rc == -ENOMEM ? rc : -EBADMSG;
		}
	}
	*n = cnt;
	return 0;
}

int mc_etcd_range(struct etcd_client *c, const char *key, const char *end,
		  unsigned limit, struct mc_etcd_kv **kvs, size_t *n,
		  bool *more, long long *rev, char *err, size_t errlen)
{
	json_t *req = json_object(), *resp = NULL;
	int rc;

	*kvs = NULL;
	*n = 0;
	*more = false;
	if (req && (set_b64(req, "key", key) || set_end(req, end) ||
		    (limit &&
		     json_object_set_new(req, "limit", json_integer(limit))))) {
		json_decref(req);
		req = NULL;
	}
	rc = call(c, "/v3/kv/range", req, &resp, err, errlen);
	if (rc)
		return rc;
	rc = mc_etcd_range_parse(resp, kvs, n, more, rev);
	json_decref(resp);
	return rc == -EBADMSG ? bad("range", err, errlen) : rc;
}

int mc_etcd_get(struct etcd_client *c, const char *key, struct mc_etcd_kv *kv,
		char *err, size_t errlen)
{
	struct mc_etcd_kv *kvs;
	size_t n;
	bool more;
	int rc = mc_etcd_range(c, key, NULL, 1, &kvs, &n, &more, NULL, err,
			       errlen);

	memset(kv, 0, sizeof(*kv));
	if (rc || !n) {
		free(kvs);
		return rc;
	}
	*kv = kvs[0];
	memset(&kvs[0], 0, sizeof(kvs[0]));
	mc_etcd_kvs_free(kvs, n);
	return 1;
}

int mc_etcd_prefix_end(const char *prefix, char *out, size_t outlen)
{
	size_t len = strlen(prefix);

	while (len && (unsigned char)prefix[len - 1] == 0xff)
		len--;
	if (!len || len + 1 > outlen)
		return -ENAMETOOLONG;
	memcpy(out, prefix, len);
	out[len - 1] = (char)((unsigned char)out[len - 1] + 1);
	out[len] = '\0';
	return 0;
}

int mc_etcd_lease_grant(struct etcd_client *c, unsigned ttl_s, long long *id,
			char *err, size_t errlen)
{
	json_t *resp = NULL;
	int rc = call(c, "/v3/lease/grant",
		      json_pack("{s:I,s:I}", "TTL", (json_int_t)ttl_s, "ID",
				(json_int_t)0),
		      &resp, err, errlen);

	if (rc)
		return rc;
	rc = mc_etcd_json_int(resp, "ID", id);
	json_decref(resp);
	if (rc || *id <= 0)
		return bad("lease grant", err, errlen);
	return 0;
}

int mc_etcd_lease_keepalive(struct etcd_client *c, long long id, long long *ttl,
			    char *err, size_t errlen)
{
	json_t *resp = NULL, *res;
	int rc = call(c, "/v3/lease/keepalive",
		      json_pack("{s:I}", "ID", (json_int_t)id), &resp, err,
		      errlen);

	if (rc)
		return rc;
	/* A stream on the gateway: {"result": {...}} per request. */
	res = json_object_get(resp, "result");
	rc = mc_etcd_json_int(res ? res : resp, "TTL", ttl);
	json_decref(resp);
	return rc ? bad("lease keepalive", err, errlen) : 0;
}

int mc_etcd_lease_revoke(struct etcd_client *c, long long id, char *err,
			 size_t errlen)
{
	json_t *resp = NULL;
	char e2[256] = "";
	int rc = call(c, "/v3/lease/revoke",
		      json_pack("{s:I}", "ID", (json_int_t)id), &resp, e2,
		      sizeof(e2));

	if (rc && strstr(e2, "lease not found"))
		return 0;
	if (rc)
		mc_etcd_errf(err, errlen, "%s", e2);
	json_decref(resp);
	return rc;
}

static json_t *op_json(const struct mc_etcd_op *op)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (set_b64(o, "key", op->key))
		goto fail;
	if (op->kind == MC_ETCD_OP_PUT) {
		if (json_object_set_new(o, "value",
					mc_etcd_json_b64(op->val, op->len)) ||
		    (op->lease &&
		     json_object_set_new(o, "lease", json_integer(op->lease))))
			goto fail;
		return json_pack("{s:o}", "request_put", o);
	}
	if (set_end(o, op->end))
		goto fail;
	return json_pack("{s:o}", "request_delete_range", o);
fail:
	json_decref(o);
	return NULL;
}

static json_t *txn_json(const struct mc_etcd_cmp *cmp, size_t ncmp,
			const struct mc_etcd_op *ops, size_t nops)
{
	json_t *req = json_object(), *ca = json_array(), *sa = json_array();
	char rev[32];

	if (!req || !ca || !sa)
		goto fail;
	for (size_t i = 0; i < ncmp; i++) {
		json_t *k = mc_etcd_json_b64(cmp[i].key, strlen(cmp[i].key));

		snprintf(rev, sizeof(rev), "%lld", cmp[i].create_rev);
		if (!k ||
		    json_array_append_new(
			    ca, json_pack("{s:o,s:s,s:s,s:s}", "key", k,
					  "target", "CREATE", "create_revision",
					  rev, "result", "EQUAL")))
			goto fail;
	}
	for (size_t i = 0; i < nops; i++)
		if (json_array_append_new(sa, op_json(&ops[i])))
			goto fail;
	/* json_object_set_new() takes the value even when it fails. */
	if (json_object_set_new(req, "compare", ca)) {
		json_decref(sa);
		json_decref(req);
		return NULL;
	}
	if (json_object_set_new(req, "success", sa)) {
		json_decref(req);
		return NULL;
	}
	return req;
fail:
	json_decref(ca);
	json_decref(sa);
	json_decref(req);
	return NULL;
}

int mc_etcd_txn(struct etcd_client *c, const struct mc_etcd_cmp *cmp,
		size_t ncmp, const struct mc_etcd_op *ops, size_t nops,
		long long *rev, char *err, size_t errlen)
{
	json_t *resp = NULL;
	long long r = 0;
	int rc = call(c, "/v3/kv/txn", txn_json(cmp, ncmp, ops, nops), &resp,
		      err, errlen);

	if (rc)
		return rc;
	if (mc_etcd_json_int(json_object_get(resp, "header"), "revision", &r)) {
		json_decref(resp);
		return bad("txn", err, errlen);
	}
	if (rev)
		*rev = r;
	rc = json_is_true(json_object_get(resp, "succeeded")) ? 1 : 0;
	json_decref(resp);
	return rc;
}
