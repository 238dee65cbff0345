/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd metadata backend over etcd's v3 HTTP/JSON gateway (etcd >= 3.4:
 * POST /v3/kv/{range,put,deleterange,txn}, keys and values in base64).
 *
 * Endpoints are tried in order starting at the last one that answered; a
 * connection failure, a timeout or a 503 moves on to the next. Each attempt
 * has the whole per-op timeout (5 s, upstream's etcd timeout) and a 1.5 s
 * connect timeout. A retried write may already have been applied by the
 * endpoint that timed out; every op here tolerates that except del, which
 * may then report -ENOENT for a key it did delete.
 *
 * Locking: pool_lock guards only the idle handle stack; requests run
 * unlocked on a handle owned by the calling thread. cur (the endpoint that
 * last answered) is an atomic hint; the endpoint list never changes.
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base64.h"
#include "curl_body.h"
#include "meta.h"
#include "mooncake/mc_err.h"

#define ETCD_TIMEOUT_MS 5000L
#define ETCD_CONNECT_TIMEOUT_MS 1500L
#define ETCD_MAX_RESPONSE (32u << 20) /* upstream's etcd max message */
#define ETCD_MAX_IDLE 16
#define ETCD_MAX_ENDPOINTS 64

struct etcd_meta {
	struct te_meta base;
	char **eps; /* "http://host:port", no trailing '/' */
	unsigned n_eps;
	size_t max_ep_len;
	atomic_uint cur;
	struct curl_slist *hdrs; /* shared, read-only after open */
	pthread_mutex_t pool_lock;
	CURL *idle[ETCD_MAX_IDLE];
	unsigned n_idle;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

MC_PRINTF(3, 4)
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static struct etcd_meta *to_etcd(struct te_meta *m)
{
	return mc_container_of(m, struct etcd_meta, base);
}

/* ---- handle pool ---- */

static CURL *take_handle(struct etcd_meta *m)
{
	CURL *h = NULL;

	pthread_mutex_lock(&m->pool_lock);
	if (m->n_idle)
		h = m->idle[--m->n_idle];
	pthread_mutex_unlock(&m->pool_lock);
	return h ? h : curl_easy_init();
}

static void give_handle(struct etcd_meta *m, CURL *h)
{
	pthread_mutex_lock(&m->pool_lock);
	if (m->n_idle < ETCD_MAX_IDLE) {
		m->idle[m->n_idle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&m->pool_lock);
	if (h)
		curl_easy_cleanup(h);
}

/* ---- one HTTP exchange ---- */

/* Worth trying the next endpoint after this outcome of an attempt. */
static bool failover(int rc)
{
	return rc == -ECONNREFUSED || rc == -ETIMEDOUT || rc == -EHOSTUNREACH ||
	       rc == -ECONNRESET || rc == 503;
}

/*
 * POST json to url once. Returns the HTTP status (>= 100), with the body
 * in *b, or a negative code with err naming the URL.
 */
static int post_once(struct etcd_meta *m, CURL *h, const char *url,
		     const char *json, size_t json_len, struct body_buf *b,
		     char *err, size_t errlen)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	long status = 0;
	CURLcode cc;
	int rc;

	b->len = 0;
	b->overflow = false;
	if (b->data)
		b->data[0] = '\0';
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ETCD_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ETCD_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, te_curl_on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, m->hdrs);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)json_len);
	cc = curl_easy_perform(h);
	if (cc == CURLE_OK) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		rc = (int)status;
		if (rc == 503)
			seterr(err, errlen, "etcd POST %s: HTTP 503 (%.200s)",
			       url, b->data ? b->data : "");
	} else if (b->overflow) {
		rc = -EMSGSIZE;
		seterr(err, errlen,
		       "etcd POST %s: response larger than %zu bytes", url,
		       b->max);
	} else {
		rc = te_curl_err(cc, b);
		seterr(err, errlen, "etcd POST %s: %s", url,
		       errbuf[0] ? errbuf : curl_easy_strerror(cc));
	}
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	return rc;
}

/* The gateway's error text: {"error": ..., "message": ..., "code": n}. */
static const char *error_text(json_t *j, const char *raw)
{
	const char *s = json_string_value(json_object_get(j, "message"));

	if (!s)
		s = json_string_value(json_object_get(j, "error"));
	return s ? s : raw;
}

/*
 * POST req to path on the endpoints in turn. On success (HTTP 200 with a
 * JSON object) returns 0 with the object in *resp and the endpoint that
 * answered in *ep; otherwise a negative code with err naming the URL.
 */
static int call(struct etcd_meta *m, const char *path, json_t *req,
		json_t **resp, const char **ep, char *err, size_t errlen)
{
	struct body_buf b = { .max = ETCD_MAX_RESPONSE };
	size_t url_len = m->max_ep_len + strlen(path) + 1, json_len;
	unsigned start, i, e = 0;
	char *json, *url;
	json_error_t jerr;
	json_t *j;
	CURL *h;
	int rc = -ECONNREFUSED;

	*resp = NULL;
	if (!req) {
		seterr(err, errlen, "etcd: out of memory building %s", path);
		return -ENOMEM;
	}
	json = json_dumps(req, JSON_COMPACT);
	url = malloc(url_len);
	h = take_handle(m);
	if (!json || !url || !h) {
		free(json);
		free(url);
		if (h)
			give_handle(m, h);
		return -ENOMEM;
	}
	json_len = strlen(json);

	start = atomic_load_explicit(&m->cur, memory_order_relaxed);
	for (i = 0; i < m->n_eps; i++) {
		e = (start + i) % m->n_eps;
		snprintf(url, url_len, "%s%s", m->eps[e], path);
		rc = post_once(m, h, url, json, json_len, &b, err, errlen);
		if (!failover(rc))
			break;
	}
	give_handle(m, h);
	free(json);

	if (failover(rc)) {
		/* err names the last endpoint tried; say how many failed. */
		if (m->n_eps > 1 && err && errlen) {
			size_t l = strlen(err);

			snprintf(err + l, errlen - l,
				 " (all %u etcd endpoints failed)", m->n_eps);
		}
		if (rc == 503)
			rc = MC_EHTTP;
		goto out;
	}
	if (rc < 0)
		goto out;
	atomic_store_explicit(&m->cur, e, memory_order_relaxed);
	*ep = m->eps[e];

	j = json_loadb(b.data ? b.data : "", b.len, 0, &jerr);
	if (rc != 200) {
		if (rc == 404)
			seterr(err, errlen,
			       "etcd POST %s: HTTP 404: no v3 JSON gateway "
			       "there (etcd >= 3.4 is needed)",
			       url);
		else
			seterr(err, errlen, "etcd POST %s: HTTP %d (%.300s)",
			       url, rc,
			       error_text(j, b.data ? b.data : "no body"));
		json_decref(j);
		rc = MC_EHTTP;
		goto out;
	}
	if (!json_is_object(j)) {
		seterr(err, errlen, "etcd POST %s: bad JSON response: %s", url,
		       j ? "not an object" : jerr.text);
		json_decref(j);
		rc = -EBADMSG;
		goto out;
	}
	*resp = j;
	rc = 0;
out:
	free(url);
	free(b.data);
	return rc;
}

/* ---- JSON helpers ---- */

static json_t *b64_string(const void *p, size_t n)
{
	size_t len = te_b64_encoded_len(n), out_n = 0;
	char *s;
	json_t *j;

	if (len == SIZE_MAX)
		return NULL;
	s = malloc(len + 1);
	if (!s)
		return NULL;
	if (te_b64_encode(p, n, s, len + 1, &out_n)) {
		free(s);
		return NULL;
	}
	j = json_stringn_nocheck(s, out_n);
	free(s);
	return j;
}

/* {"key": b64(key)} plus "value": b64(val) when val is given. */
static json_t *kv_req(const char *key, const void *val, size_t len,
		      bool with_val)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (json_object_set_new(o, "key", b64_string(key, strlen(key))) ||
	    (with_val &&
	     json_object_set_new(o, "value", b64_string(val, len)))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* An int64 field: the gateway sends them as strings; absent means 0. */
static int int_field(json_t *o, const char *name, long long *out)
{
	json_t *v = json_object_get(o, name);
	const char *s;
	char *end;

	*out = 0;
	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	s = json_string_value(v);
	if (!s || !*s)
		return -EBADMSG;
	errno = 0;
	*out = strtoll(s, &end, 10);
	return (errno || *end) ? -EBADMSG : 0;
}

/*
 * The first kv of a range response: 0 with it in *kv, -ENOENT when the
 * response holds none, -EBADMSG when "kvs" is not an array.
 */
static int first_kv(json_t *range, json_t **kv)
{
	json_t *kvs = json_object_get(range, "kvs");

	if (!kvs || json_is_null(kvs))
		return -ENOENT;
	if (!json_is_array(kvs))
		return -EBADMSG;
	if (!json_array_size(kvs))
		return -ENOENT;
	*kv = json_array_get(kvs, 0);
	return json_is_object(*kv) ? 0 : -EBADMSG;
}

/* Decode a kv's value (absent means empty) into a malloc'd buffer. */
static int kv_value(json_t *kv, char **val, size_t *len)
{
	json_t *v = json_object_get(kv, "value");
	const char *s = "";
	size_t slen = 0, max;
	char *buf;
	int rc;

	if (v && !json_is_null(v)) {
		if (!json_is_string(v))
			return -EBADMSG;
		s = json_string_value(v);
		slen = json_string_length(v);
	}
	max = te_b64_decoded_max(slen) + 1;
	buf = malloc(max);
	if (!buf)
		return -ENOMEM;
	rc = te_b64_decode(s, slen, buf, max, len);
	if (rc) {
		free(buf);
		return rc == -EINVAL ? -EBADMSG : rc;
	}
	*val = buf;
	return 0;
}

static int check_args(const char *key, const void *val, size_t len, char *err,
		      size_t errlen)
{
	if (!key || !*key || (!val && len)) {
		seterr(err, errlen, "etcd: %s",
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
	req = kv_req(key, NULL, 0, false);
	rc = call(m, "/v3/kv/range", req, &resp, &ep, err, errlen);
	json_decref(req);
	if (rc)
		return rc;
	rc = first_kv(resp, &kv);
	if (!rc)
		rc = kv_value(kv, val, len);
	if (rc == -ENOENT)
		seterr(err, errlen, "etcd %s: no key '%.200s'", ep, key);
	else if (rc == -EBADMSG)
		seterr(err, errlen,
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
	req = kv_req(key, val, len, true);
	rc = call(m, "/v3/kv/put", req, &resp, &ep, err, errlen);
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
	kb = b64_string(key, strlen(key));
	put = kv_req(key, val, len, true);
	get = kv_req(key, NULL, 0, false);
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
	rc = call(m, "/v3/kv/txn", req, &resp, &ep, err, errlen);
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
	rc = first_kv(range, &kv);
	if (!rc)
		rc = kv_value(kv, &cur, &cur_len);
	json_decref(resp);
	if (rc) {
		/* The compare failed, so the range must have found the key. */
		seterr(err, errlen,
		       "etcd %s: malformed txn response for "
		       "'%.200s'",
		       ep, key);
		return rc == -ENOMEM ? rc : -EBADMSG;
	}
	if (cur_len != len || (len && memcmp(cur, val, len))) {
		seterr(err, errlen,
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
	req = kv_req(key, NULL, 0, false);
	rc = call(m, "/v3/kv/deleterange", req, &resp, &ep, err, errlen);
	json_decref(req);
	if (rc)
		return rc;
	rc = int_field(resp, "deleted", &deleted);
	json_decref(resp);
	if (rc)
		seterr(err, errlen, "etcd %s: malformed deleterange response",
		       ep);
	else if (deleted <= 0)
		rc = -ENOENT;
	if (rc == -ENOENT)
		seterr(err, errlen, "etcd %s: no key '%.200s'", ep, key);
	return rc;
}

static void etcd_destroy(struct te_meta *tm)
{
	struct etcd_meta *m = to_etcd(tm);

	for (unsigned i = 0; i < m->n_idle; i++)
		curl_easy_cleanup(m->idle[i]);
	for (unsigned i = 0; i < m->n_eps; i++)
		free(m->eps[i]);
	free(m->eps);
	curl_slist_free_all(m->hdrs);
	pthread_mutex_destroy(&m->pool_lock);
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

/* ---- endpoints ---- */

/* One endpoint, s[0..n) trimmed: "http://host:port" into a new string. */
static int add_endpoint(struct etcd_meta *m, const char *s, size_t n, char *err,
			size_t errlen)
{
	const char *sep = memmem(s, n, "://", 3);
	const char *prefix = "";
	size_t len, host;
	char *ep;

	if (sep && !(sep - s == 4 && !strncasecmp(s, "http", 4)) &&
	    !(sep - s == 5 && !strncasecmp(s, "https", 5))) {
		seterr(err, errlen,
		       "etcd endpoint '%.*s': only http:// and https:// are "
		       "supported",
		       (int)n, s);
		return -EINVAL;
	}
	if (!sep)
		prefix = "http://";
	host = sep ? (size_t)(sep - s) + 3 : 0;
	while (n > host && s[n - 1] == '/')
		n--;
	if (n == host || memchr(s, ' ', n) || memchr(s, '\t', n)) {
		seterr(err, errlen, "etcd endpoint '%.*s': no host", (int)n, s);
		return -EINVAL;
	}
	if (m->n_eps == ETCD_MAX_ENDPOINTS) {
		seterr(err, errlen, "etcd: more than %d endpoints",
		       ETCD_MAX_ENDPOINTS);
		return -EINVAL;
	}
	len = strlen(prefix) + n + 1;
	ep = malloc(len);
	if (!ep)
		return -ENOMEM;
	snprintf(ep, len, "%s%.*s", prefix, (int)n, s);
	m->eps[m->n_eps++] = ep;
	if (len > m->max_ep_len)
		m->max_ep_len = len;
	return 0;
}

static int parse_endpoints(struct etcd_meta *m, const char *spec, char *err,
			   size_t errlen)
{
	const char *p = spec;

	m->eps = calloc(ETCD_MAX_ENDPOINTS, sizeof(*m->eps));
	if (!m->eps)
		return -ENOMEM;
	while (*p) {
		size_t n = strcspn(p, ",;");
		const char *s = p, *next = p + n + (p[n] != '\0');
		int rc;

		while (n && (*s == ' ' || *s == '\t')) {
			s++;
			n--;
		}
		while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
			n--;
		if (n) {
			rc = add_endpoint(m, s, n, err, errlen);
			if (rc)
				return rc;
		}
		p = next;
	}
	if (!m->n_eps) {
		seterr(err, errlen, "etcd: no endpoint in '%.200s'", spec);
		return -EINVAL;
	}
	return 0;
}

int te_meta_etcd_open(const char *endpoints, struct te_meta **out, char *err,
		      size_t errlen)
{
	struct etcd_meta *m;
	int rc;

	if (!endpoints || !out) {
		seterr(err, errlen, "etcd: no endpoints given");
		return -EINVAL;
	}
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK) {
		seterr(err, errlen, "etcd: curl_global_init failed");
		return -ENOMEM;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->base.ops = &etcd_ops;
	pthread_mutex_init(&m->pool_lock, NULL);
	atomic_init(&m->cur, 0);
	rc = parse_endpoints(m, endpoints, err, errlen);
	if (!rc) {
		m->hdrs = curl_slist_append(NULL,
					    "Content-Type: application/json");
		/* No "Expect: 100-continue" round trip for big bodies. */
		if (m->hdrs && !curl_slist_append(m->hdrs, "Expect:"))
			rc = -ENOMEM;
		if (!m->hdrs)
			rc = -ENOMEM;
	}
	if (rc) {
		etcd_destroy(&m->base);
		return rc;
	}
	*out = &m->base;
	return 0;
}
