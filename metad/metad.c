/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metadata protocol on top of the kv store. Status codes and bodies
 * follow upstream's C++ server embedded in mooncake_master (the one store
 * clients test against), with the additions documented in
 * docs/wire-protocol.md: 405 for other methods, 413 for large bodies, 400
 * for malformed, repeated or over-long keys.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv.h"
#include "mc_auth_http.h"
#include "mc_log.h"
#include "mc_map.h"
#include "mc_time.h"
#include "metad.h"
#include "mooncake/mc_err.h"

struct metad {
	struct metad_kv *kv;
	size_t max_body;
	size_t max_key;
	bool auth;
	struct mc_auth_key key;
	struct mc_auth_replay *replay;
	/* Held across a PUT or DELETE and its stamp, and across
	 * metad_drop_engine()'s check and removal. */
	pthread_mutex_t stamp_mu;
	/* key -> uint64_t mono ms of its last PUT (stored or unchanged);
	 * keys loaded from the store have none (written before this run). */
	struct mc_map *stamps;
};

#define JSON_TYPE "application/json"
#define ALLOW_METADATA "GET, HEAD, PUT, DELETE"

int metad_create(const struct metad_options *opts, struct metad **out,
		 char *err, size_t errlen)
{
	struct metad *m = calloc(1, sizeof(*m));
	int rc;

	if (!m)
		return -ENOMEM;
	m->max_body = opts->max_body ? opts->max_body : METAD_DEFAULT_MAX_BODY;
	m->max_key = opts->max_key ? opts->max_key : METAD_DEFAULT_MAX_KEY;
	if (opts->auth) {
		m->auth = true;
		m->key = *opts->auth;
		rc = mc_auth_replay_create(&m->replay);
		if (rc) {
			snprintf(err, errlen, "out of memory");
			free(m);
			return rc;
		}
	}
	rc = mc_map_create(&m->stamps);
	if (rc) {
		snprintf(err, errlen, "out of memory");
		mc_auth_replay_destroy(m->replay);
		free(m);
		return rc;
	}
	pthread_mutex_init(&m->stamp_mu, NULL);
	rc = metad_kv_open(opts->store, opts->full_sync, &m->kv, err, errlen);
	if (rc) {
		mc_map_destroy(m->stamps);
		pthread_mutex_destroy(&m->stamp_mu);
		mc_auth_replay_destroy(m->replay);
		mc_auth_key_clear(&m->key);
		free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void metad_destroy(struct metad *m)
{
	if (!m)
		return;
	metad_kv_close(m->kv);
	mc_map_destroy(m->stamps);
	pthread_mutex_destroy(&m->stamp_mu);
	mc_auth_replay_destroy(m->replay);
	mc_auth_key_clear(&m->key);
	free(m);
}

size_t metad_count(struct metad *m)
{
	return metad_kv_count(m->kv);
}

/* Under stamp_mu: the mono ms of key's last PUT; 0 when none this run. */
static uint64_t stamp_of(struct metad *m, const char *key)
{
	const struct mc_map_entry *e = mc_map_get(m->stamps, key, strlen(key));
	uint64_t t = 0;

	if (e && e->val_len == sizeof(t))
		memcpy(&t, e->val, sizeof(t));
	return t;
}

int metad_drop_engine(struct metad *m, const char *name, uint64_t since_ms)
{
	static const char *const kinds[] = { "ram", "rpc_meta" };
	const char *cid = getenv("MC_METADATA_CLUSTER_ID");
	char keys[2][METAD_ENGINE_KEY_MAX];
	int dropped = 0;

	if (!name || !*name)
		return 0;
	for (size_t i = 0; i < 2; i++)
		if ((size_t)snprintf(
			    keys[i], sizeof(keys[i]), "mooncake/%s%s%s/%s",
			    cid && *cid ? cid : "", cid && *cid ? "/" : "",
			    kinds[i], name) >= sizeof(keys[i]))
			return -ENAMETOOLONG;
	pthread_mutex_lock(&m->stamp_mu);
	/* Either entry written since: an engine of that name is alive (the
	 * one that went silent came back, or its successor took the name)
	 * and keeps both. */
	for (size_t i = 0; i < 2; i++) {
		if (stamp_of(m, keys[i]) > since_ms) {
			pthread_mutex_unlock(&m->stamp_mu);
			return 0;
		}
	}
	for (size_t i = 0; i < 2; i++) {
		int rc = metad_kv_del(m->kv, keys[i], strlen(keys[i]));

		if (!rc || rc == -ENOENT)
			(void)mc_map_del(m->stamps, keys[i], strlen(keys[i]));
		if (!rc)
			dropped++;
		else if (rc != -ENOENT)
			mc_log_warn("metad", "removing %s: %s", keys[i],
				    mc_strerror(rc));
	}
	pthread_mutex_unlock(&m->stamp_mu);
	if (dropped)
		mc_log_info("metad",
			    "removed the transfer-engine entries of '%s' "
			    "(its client is gone)",
			    name);
	return dropped;
}

static void reply_text(struct mc_http_response *resp, int status,
		       const char *text)
{
	if (mc_http_reply(resp, status, "text/plain", text, strlen(text)))
		resp->status = 500;
}

/* Decode the key parameter; on failure the response is already set. */
static char *get_key(struct metad *m, const struct mc_http_request *req,
		     size_t *key_len, struct mc_http_response *resp)
{
	size_t cap = m->max_key + 1;
	char *key = malloc(cap);
	int rc;

	if (!key) {
		reply_text(resp, 500, "out of memory\n");
		return NULL;
	}
	rc = mc_http_query_get(req->query, "key", key, cap, key_len);
	if (rc == 0 && *key_len > 0)
		return key;
	free(key);
	switch (rc) {
	case 0:
	case -ENOENT:
		reply_text(resp, 400, "Missing key parameter");
		break;
	case -E2BIG:
		mc_http_replyf(resp, 400, "key too long (at most %zu bytes)",
			       m->max_key);
		break;
	case -EEXIST:
		reply_text(resp, 400, "key parameter given more than once");
		break;
	default:
		reply_text(resp, 400, "malformed key parameter (bad %-escape)");
		break;
	}
	return NULL;
}

static void handle_get(struct metad *m, const char *key, size_t key_len,
		       struct mc_http_response *resp)
{
	char *val;
	size_t len;
	int rc = metad_kv_get(m->kv, key, key_len, &val, &len);

	if (rc == -ENOENT) {
		reply_text(resp, 404, "metadata not found");
		return;
	}
	if (rc) {
		reply_text(resp, 500, "out of memory");
		return;
	}
	/* Hand the copy over to the response without another copy. */
	resp->status = 200;
	resp->content_type = JSON_TYPE;
	free(resp->body);
	resp->body = val;
	resp->body_len = len;
}

static void handle_put(struct metad *m, const char *key, size_t key_len,
		       const struct mc_http_request *req,
		       struct mc_http_response *resp)
{
	enum metad_put_outcome outcome;
	/* Upstream's port-clash detection: rpc_meta entries are exclusive. */
	bool exclusive = memmem(key, key_len, "rpc_meta", 8) != NULL;
	int rc;

	if (req->body_len > m->max_body) {
		reply_text(resp, 413, "request body too large");
		return;
	}
	pthread_mutex_lock(&m->stamp_mu);
	rc = metad_kv_put(m->kv, key, key_len, req->body, req->body_len,
			  exclusive, &outcome);
	if (!rc && outcome != METAD_PUT_CONFLICT) {
		/* Unchanged counts too: its owner is alive and says so. */
		uint64_t now = mc_mono_ms();

		/* Without memory for it the entry counts as old: removed
		 * when its engine's client is dropped, as it would be. */
		if (mc_map_put(m->stamps, key, key_len, (const char *)&now,
			       sizeof(now)))
			(void)mc_map_del(m->stamps, key, key_len);
	}
	pthread_mutex_unlock(&m->stamp_mu);
	if (rc) {
		mc_log_err("metad", "PUT failed: %s", mc_strerror(rc));
		reply_text(resp, 500, "metadata store failure");
		return;
	}
	switch (outcome) {
	case METAD_PUT_UNCHANGED:
		reply_text(resp, 200, "metadata unchanged");
		break;
	case METAD_PUT_CONFLICT:
		reply_text(resp, 400, "Duplicate rpc_meta key not allowed");
		break;
	case METAD_PUT_STORED:
		reply_text(resp, 200, "metadata updated");
		break;
	}
}

static void handle_delete(struct metad *m, const char *key, size_t key_len,
			  struct mc_http_response *resp)
{
	int rc;

	pthread_mutex_lock(&m->stamp_mu);
	rc = metad_kv_del(m->kv, key, key_len);
	if (!rc || rc == -ENOENT)
		(void)mc_map_del(m->stamps, key, key_len);
	pthread_mutex_unlock(&m->stamp_mu);
	if (rc == -ENOENT)
		reply_text(resp, 404, "metadata not found");
	else if (rc)
		reply_text(resp, 500, "metadata store failure");
	else
		reply_text(resp, 200, "metadata deleted");
}

void metad_handle(void *arg, const struct mc_http_request *req,
		  struct mc_http_response *resp)
{
	struct metad *m = arg;
	const char *meth = req->method;
	size_t key_len;
	char *key;

	if (!strcmp(req->path, "/health")) {
		if (strcmp(meth, "GET") && strcmp(meth, "HEAD")) {
			reply_text(resp, 405, "method not allowed");
			resp->allow = "GET, HEAD";
			return;
		}
		reply_text(resp, 200, "OK");
		return;
	}
	if (strcmp(req->path, "/metadata") != 0) {
		reply_text(resp, 404, "not found");
		return;
	}
	if (strcmp(meth, "GET") && strcmp(meth, "HEAD") &&
	    strcmp(meth, "PUT") && strcmp(meth, "DELETE")) {
		reply_text(resp, 405, "method not allowed");
		resp->allow = ALLOW_METADATA;
		return;
	}
	if (m->auth) {
		const char *why;

		if (mc_auth_http_check(&m->key, m->replay, req,
				       (uint64_t)time(NULL), &why)) {
			mc_log_debug("metad", "%s %s?%s: 401 %s", meth,
				     req->path, req->query ? req->query : "",
				     why);
			(void)mc_http_replyf(resp, 401, "%s\n", why);
			return;
		}
	}
	key = get_key(m, req, &key_len, resp);
	if (!key)
		return;
	if (meth[0] == 'G' || meth[0] == 'H')
		handle_get(m, key, key_len, resp);
	else if (meth[0] == 'P')
		handle_put(m, key, key_len, req, resp);
	else
		handle_delete(m, key, key_len, resp);
	mc_log_trace("metad", "%s key=%s -> %d", meth, key, resp->status);
	free(key);
}

int metad_serve(struct metad *m, const char *host, int port, unsigned threads,
		struct mc_http_server **out, char *err, size_t errlen)
{
	struct mc_http_server_cfg cfg = {
		.host = host,
		.port = port,
		.threads = threads,
		.max_body = m->max_body,
		.idle_timeout_s = 60,
		.handler = metad_handle,
		.arg = m,
		.name = "metad",
	};

	return mc_http_server_start(&cfg, out, err, errlen);
}
