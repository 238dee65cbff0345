/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP metadata client over libcurl with a pool of keep-alive handles.
 * Locking: pool_lock guards only the idle stack; requests run unlocked on
 * a handle owned by the calling thread for the duration of the call.
 */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "curl_body.h"
#include "mc_auth_http.h"
#include "meta_http.h"
#include "mooncake/mc_err.h"

struct te_meta_http {
	char *base_url;
	const char *path; /* base_url's path, as signed ("/" when none) */
	bool auth;
	struct mc_auth_key key;
	long timeout_ms, connect_timeout_ms;
	size_t max_response;
	pthread_mutex_t pool_lock;
	CURL **idle;
	unsigned n_idle, max_idle;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* The path part of an http(s) URL: what the request line carries. */
static const char *url_path(const char *url)
{
	const char *p = strstr(url, "://");
	const char *slash;

	p = p ? p + 3 : url;
	slash = strchr(p, '/');
	return slash ? slash : "/";
}

int te_meta_http_check_url(const char *url, char *err, size_t errlen)
{
	const char *host = strstr(url, "://");
	size_t hlen, colons = 0;
	CURLU *u = curl_url();
	CURLUcode uc;

	if (!u)
		return -ENOMEM;
	uc = curl_url_set(u, CURLUPART_URL, url, 0);
	curl_url_cleanup(u);
	if (uc == CURLUE_OK)
		return 0;
	if (uc == CURLUE_OUT_OF_MEMORY)
		return -ENOMEM;
	host = host ? host + 3 : url;
	hlen = strcspn(host, "/?#");
	for (size_t i = 0; i < hlen; i++)
		colons += host[i] == ':';
	snprintf(err, errlen, "metadata URL '%s': %s%s", url,
		 curl_url_strerror(uc),
		 colons > 1 && !memchr(host, '[', hlen) ?
			 " (an IPv6 host goes in brackets: "
			 "http://[::1]:8080/metadata)" :
			 "");
	return -EINVAL;
}

int te_meta_http_create(const struct te_meta_http_cfg *cfg,
			struct te_meta_http **out)
{
	struct te_meta_http *c;

	if (!cfg->base_url || strncmp(cfg->base_url, "http", 4) != 0)
		return -EINVAL;
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return -ENOMEM;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->base_url = strdup(cfg->base_url);
	c->max_idle = cfg->max_idle ? cfg->max_idle : 16;
	c->idle = calloc(c->max_idle, sizeof(*c->idle));
	if (!c->base_url || !c->idle) {
		free(c->base_url);
		free(c->idle);
		free(c);
		return -ENOMEM;
	}
	c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 3000;
	c->connect_timeout_ms =
		cfg->connect_timeout_ms ? cfg->connect_timeout_ms : 1500;
	c->max_response = cfg->max_response ? cfg->max_response : (64u << 20);
	c->path = url_path(c->base_url);
	if (cfg->auth) {
		c->auth = true;
		c->key = *cfg->auth;
	}
	pthread_mutex_init(&c->pool_lock, NULL);
	*out = c;
	return 0;
}

void te_meta_http_destroy(struct te_meta_http *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < c->n_idle; i++)
		curl_easy_cleanup(c->idle[i]);
	pthread_mutex_destroy(&c->pool_lock);
	mc_auth_key_clear(&c->key);
	free(c->idle);
	free(c->base_url);
	free(c);
}

static CURL *take_handle(struct te_meta_http *c)
{
	CURL *h = NULL;

	pthread_mutex_lock(&c->pool_lock);
	if (c->n_idle)
		h = c->idle[--c->n_idle];
	pthread_mutex_unlock(&c->pool_lock);
	return h ? h : curl_easy_init();
}

static void give_handle(struct te_meta_http *c, CURL *h)
{
	pthread_mutex_lock(&c->pool_lock);
	if (c->n_idle < c->max_idle) {
		c->idle[c->n_idle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&c->pool_lock);
	if (h)
		curl_easy_cleanup(h);
}

/*
 * One request. Returns the HTTP status (>= 100) or a negative code; the
 * response body lands in *body when body is not NULL.
 */
static int request(struct te_meta_http *c, const char *method, const char *key,
		   const void *val, size_t len, struct body_buf *body,
		   char **urlp, char *err, size_t errlen)
{
	struct curl_slist *hdrs = NULL;
	struct body_buf sink = { .max = c->max_response };
	char *esc, *url_out, errbuf[CURL_ERROR_SIZE] = "";
	char authz[32 + MC_AUTH_HTTP_HDR_LEN];
	size_t url_len;
	long status = 0;
	CURLcode cc;
	CURL *h;
	int rc;

	h = take_handle(c);
	if (!h)
		return -ENOMEM;
	esc = curl_easy_escape(h, key, (int)strlen(key));
	if (!esc) {
		give_handle(c, h);
		return -ENOMEM;
	}
	url_len = strlen(c->base_url) + strlen(esc) + 6;
	url_out = malloc(url_len);
	if (!url_out) {
		curl_free(esc);
		give_handle(c, h);
		return -ENOMEM;
	}
	snprintf(url_out, url_len, "%s?key=%s", c->base_url, esc);
	if (c->auth) {
		/* Signed over the path and query exactly as sent. */
		const char *q = url_out + strlen(c->base_url) + 1;

		memcpy(authz, "Authorization: ", 15);
		mc_auth_http_sign(&c->key, method, c->path, q, val,
				  val ? len : 0, (uint64_t)time(NULL),
				  authz + 15);
		hdrs = curl_slist_append(hdrs, authz);
	}
	curl_free(esc);
	*urlp = url_out;

	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url_out);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	mc_curl_cloexec(h);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, mc_curl_on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, body ? body : &sink);
	if (!strcmp(method, "PUT")) {
		hdrs = curl_slist_append(hdrs,
					 "Content-Type: application/json");
		/* No "Expect: 100-continue" round trip for small bodies. */
		hdrs = curl_slist_append(hdrs, "Expect:");
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, val ? val : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)len);
	} else if (strcmp(method, "GET") != 0) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	}
	if (hdrs)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	cc = curl_easy_perform(h);
	if (cc == CURLE_OK) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		rc = (int)status;
	} else {
		rc = mc_curl_err(cc, body ? body : &sink);
		if (err)
			snprintf(err, errlen, "%s %s: %s", method, url_out,
				 errbuf[0] ? errbuf : curl_easy_strerror(cc));
	}
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	curl_slist_free_all(hdrs);
	free(sink.data);
	give_handle(c, h);
	return rc;
}

/*
 * One request with its outcome mapped: 0 for 200 (the body stays in *b for
 * the caller to take or free), else a negative code with err naming the
 * method, the URL and the status. The URL is freed here in every case.
 */
static int call(struct te_meta_http *c, const char *method, const char *key,
		const void *val, size_t len, struct body_buf *b, char *err,
		size_t errlen)
{
	char *url = NULL;
	int rc = request(c, method, key, val, len, b, &url, err, errlen);

	if (rc == 401 && err) {
		/* The service's one-line reason, without its newline. */
		int n = b->data ? (int)strcspn(b->data, "\n") : 0;

		snprintf(err, errlen,
			 "%s %s: HTTP 401: metadata service requires "
			 "authentication%s%.*s%s: %s",
			 method, url, n ? " (" : "", n > 200 ? 200 : n,
			 b->data ? b->data : "", n ? ")" : "",
			 c->auth ? "is --auth_token_file the pool's token?" :
				   "set --auth_token_file / "
				   "MOONCAKE_AUTH_TOKEN_FILE");
	} else if (rc > 0 && rc != 200 && err) {
		snprintf(err, errlen, "%s %s: HTTP %d%s%.200s%s", method, url,
			 rc, b->len ? " (" : "", b->data ? b->data : "",
			 b->len ? ")" : "");
	}
	if (rc > 0 && rc != 200) {
		if (rc == 404)
			rc = -ENOENT;
		else if (rc == 401)
			rc = c->auth ? MC_EAUTHFAILED : MC_EAUTHREQUIRED;
		else if (rc == 400 && b->data && strstr(b->data, "Duplicate"))
			rc = MC_EMETACONFLICT; /* an rpc_meta entry is taken */
		else
			rc = MC_EHTTP;
	} else if (rc == 200) {
		rc = 0;
	}
	free(url);
	return rc;
}

int te_meta_http_get(struct te_meta_http *c, const char *key, char **val,
		     size_t *len, char *err, size_t errlen)
{
	struct body_buf b = { .max = c->max_response };
	int rc = call(c, "GET", key, NULL, 0, &b, err, errlen);

	if (!rc && !b.data)
		b.data = calloc(1, 1);
	if (!rc && !b.data)
		rc = -ENOMEM;
	if (rc) {
		free(b.data);
		return rc;
	}
	*val = b.data;
	*len = b.len;
	return 0;
}

int te_meta_http_put(struct te_meta_http *c, const char *key, const void *val,
		     size_t len, char *err, size_t errlen)
{
	struct body_buf b = { .max = 4096 };
	int rc = call(c, "PUT", key, val, len, &b, err, errlen);

	free(b.data);
	return rc;
}

int te_meta_http_del(struct te_meta_http *c, const char *key, char *err,
		     size_t errlen)
{
	struct body_buf b = { .max = 4096 };
	int rc = call(c, "DELETE", key, NULL, 0, &b, err, errlen);

	free(b.data);
	return rc;
}
