/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metadata protocol on top of the kv store. Status codes and bodies
 * follow upstream's C++ server embedded in mooncake_master (the one store
 * clients test against), with the additions documented in
 * docs/wire-protocol.md: 405 for other methods, 413 for large bodies, 400
 * for malformed, repeated or over-long keys.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv.h"
#include "mc_auth_http.h"
#include "mc_log.h"
#include "metad.h"
#include "mooncake/mc_err.h"

struct metad {
	struct metad_kv *kv;
	size_t max_body;
	size_t max_key;
	bool auth;
	struct mc_auth_key key;
	struct mc_auth_replay *replay;
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
	rc = metad_kv_open(opts->store, opts->full_sync, &m->kv, err, errlen);
	if (rc) {
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
	mc_auth_replay_destroy(m->replay);
	mc_auth_key_clear(&m->key);
	free(m);
}

size_t metad_count(struct metad *m)
{
	return metad_kv_count(m->kv);
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
	rc = metad_kv_put(m->kv, key, key_len, req->body, req->body_len,
			  exclusive, &outcome);
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
	int rc = metad_kv_del(m->kv, key, key_len);

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
