/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin pages that name keys (docs/operations.md, "Admin HTTP"):
 * /query_key, /batch_query_keys and /get_all_keys, in upstream's shapes.
 * Keys are bytes. A key (or a segment's name) that is not UTF-8 cannot be
 * a JSON string: it is written %-escaped (mc_http_escape) where upstream's
 * readers would not take it for another key, never left out.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "admin_int.h"
#include "master.h"
#include "mooncake/mc_err.h"
#include "objects.h"
#include "segments.h"

json_t *mst_admin_json_bytes(const char *s, size_t len, bool *escaped)
{
	json_t *j = json_stringn(s, len);
	struct mc_sbuf b = { 0 };

	if (escaped)
		*escaped = !j;
	if (j)
		return j;
	mc_http_escape(s, len, &b);
	j = b.oom ? NULL : json_stringn(b.p ? b.p : "", b.len);
	free(b.p);
	return j;
}

json_t *mst_admin_json_str(const char *s)
{
	return mst_admin_json_bytes(s ? s : "", s ? strlen(s) : 0, NULL);
}

static json_t *replicas_json(const struct mst_object *o)
{
	json_t *a = json_array();

	for (unsigned i = 0; a && i < o->n_repl; i++) {
		const struct mst_replica *r = &o->repl[i];
		if (!mst_replica_live(r))
			continue;
		/* "o" takes NULL as failure: the whole answer is then 500,
		 * never a list short of a replica. */
		if (json_array_append_new(
			    a,
			    json_pack("{s:I,s:I,s:o,s:o}", "size_",
				      (json_int_t)o->size, "buffer_address_",
				      (json_int_t)mst_replica_addr(r),
				      "protocol_",
				      mst_admin_json_str(r->seg->protocol),
				      "transport_endpoint_",
				      mst_admin_json_str(r->seg->endpoint)))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static void bad_request(struct mc_http_response *resp, const char *why)
{
	mst_admin_reply_json(resp, 400,
			     json_pack("{s:b,s:i,s:s}", "success", 0,
				       "error_code", MC_STORE_INVALID_PARAMS,
				       "error", why));
}

void mst_admin_query_key(struct master *m, const char *query,
			 struct mc_http_response *resp)
{
	char key[4097];
	size_t n;
	struct mst_object *o;

	if (mc_http_query_get(query, "key", key, sizeof(key), &n) || !n) {
		bad_request(resp, "missing or bad ?key=");
		return;
	}
	pthread_mutex_lock(&m->lock);
	if (mst_stat(m, key, n, &o)) {
		pthread_mutex_unlock(&m->lock);
		mst_admin_reply_json(resp, 404,
				     json_pack("{s:b,s:i,s:s}", "success", 0,
					       "error_code",
					       MC_STORE_OBJECT_NOT_FOUND,
					       "error", "object not found"));
		return;
	}
	json_t *j =
		json_pack("{s:b,s:o}", "success", 1, "data", replicas_json(o));
	pthread_mutex_unlock(&m->lock);
	mst_admin_reply_json(resp, j ? 200 : 500, j);
}

/* One key's answer into data (UTF-8 keys, upstream's) or escaped (the
 * others, named %-escaped): 0, or -1 out of memory. */
static int batch_one(struct master *m, const char *k, json_t *data,
		     json_t *escaped)
{
	struct mst_object *o;
	json_t *v, *name;
	bool esc;
	int rc;

	if (mst_stat(m, k, strlen(k), &o))
		v = json_pack("{s:b,s:i}", "ok", 0, "error_code",
			      MC_STORE_OBJECT_NOT_FOUND);
	else
		v = json_pack("{s:b,s:o}", "ok", 1, "values", replicas_json(o));
	name = mst_admin_json_bytes(k, strlen(k), &esc);
	rc = v && name ? json_object_set_new(esc ? escaped : data,
					     json_string_value(name), v) :
			 (json_decref(v), -1);
	json_decref(name);
	return rc ? -1 : 0;
}

void mst_admin_batch_query(struct master *m, const char *query,
			   struct mc_http_response *resp)
{
	size_t cap = 1 << 20, n;
	char *keys = malloc(cap);
	json_t *data = json_object(), *escaped = json_object();
	int rc = 0;

	if (!keys || !data || !escaped ||
	    mc_http_query_get(query, "keys", keys, cap, &n)) {
		free(keys);
		json_decref(data);
		json_decref(escaped);
		bad_request(resp, "missing or bad ?keys=a,b");
		return;
	}
	pthread_mutex_lock(&m->lock);
	for (char *k = keys, *end; !rc && k && *k; k = end ? end + 1 : NULL) {
		end = strchr(k, ',');
		if (end)
			*end = 0;
		if (*k)
			rc = batch_one(m, k, data, escaped);
	}
	pthread_mutex_unlock(&m->lock);
	free(keys);
	if (rc) {
		json_decref(data);
		json_decref(escaped);
		mst_admin_reply_json(resp, 500, NULL);
		return;
	}
	/* Ours: keys that are not UTF-8, apart, so that no name of data
	 * is ever an escaped form of another key. */
	mst_admin_reply_json(
		resp, 200,
		json_object_size(escaped) ?
			json_pack("{s:b,s:o,s:o}", "success", 1, "data", data,
				  "data_escaped", escaped) :
			(json_decref(escaped),
			 json_pack("{s:b,s:o}", "success", 1, "data", data)));
}

void mst_admin_all_keys(struct master *m, const char *query,
			struct mc_http_response *resp)
{
	struct mc_sbuf b = { 0 };
	char v[8];
	int rc = mc_http_query_get(query, "escaped", v, sizeof(v), NULL);
	bool esc = !rc && !strcmp(v, "1");

	/* ?escaped=1: every key %-escaped, one a line, none ambiguous (a
	 * key may hold a newline); without it upstream's bytes as they are. */
	if (rc != -ENOENT && !esc) {
		(void)mc_http_replyf(resp, 400, "?escaped= takes only 1\n");
		return;
	}
	pthread_mutex_lock(&m->lock);
	for (struct mst_object *o = m->lru_head; o; o = o->lru_next) {
		if (esc)
			mc_http_escape(o->key, o->key_len, &b);
		else
			mc_sbuf_put(&b, o->key, o->key_len);
		mc_sbuf_put(&b, "\n", 1);
	}
	pthread_mutex_unlock(&m->lock);
	mst_admin_reply_sb(resp, &b, "text/plain");
}
