/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd metadata backend over etcd's v3 HTTP/JSON gateway (etcd >= 3.4:
 * POST /v3/kv/{range,put,deleterange,txn}, keys and values in base64).
 * The connection string is parsed by mc_etcd_conn.c (endpoints, user and
 * password file, TLS files; docs/config.md).
 *
 * Endpoints are tried in order starting at the last one that answered; a
 * connection failure, a timeout or a 503 moves on to the next. Each attempt
 * has the whole per-op timeout (5 s, upstream's etcd timeout) and a 1.5 s
 * connect timeout. A retried write may already have been applied by the
 * endpoint that timed out; every op here tolerates that except del, which
 * may then report -ENOENT for a key it did delete.
 *
 * With a user, the first request authenticates (POST /v3/auth/authenticate)
 * and every request carries the token in "Authorization"; a request that
 * etcd answers "invalid auth token" (the token expired or was revoked)
 * authenticates once more and is sent again, once.
 *
 * Locking: pool_lock guards only the idle handle stack; requests run
 * unlocked on a handle owned by the calling thread. auth_lock guards the
 * token and is held while authenticating, so one thread does it while the
 * others wait for its token. cur (the endpoint that last answered) is an
 * atomic hint; the endpoint list never changes.
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
#include <unistd.h>

#include "base64.h"
#include "curl_body.h"
#include "etcd_auth.h"
#include "mc_etcd_conn.h"
#include "meta.h"
#include "mooncake/mc_err.h"

#define ETCD_TIMEOUT_MS 5000L
#define ETCD_CONNECT_TIMEOUT_MS 1500L
#define ETCD_MAX_RESPONSE (32u << 20) /* upstream's etcd max message */
#define ETCD_MAX_IDLE 16
#define ETCD_AUTH_PATH "/v3/auth/authenticate"

/* Internal outcomes of one exchange (never returned to callers). */
#define ETCD_REAUTH (-EKEYEXPIRED) /* the token was refused: get another */
#define ETCD_AUTH_OFF (-ENOSYS) /* authenticate: etcd has auth off */

#define ETCD_CRED_HINT                                                                     \
	"set user= and password_file= in the etcd connection string, or " MC_ETCD_ENV_USER \
	" and " MC_ETCD_ENV_PASSWORD_FILE

struct etcd_meta {
	struct te_meta base;
	struct mc_etcd_conn conn; /* endpoints, user, TLS files */
	char *password; /* NULL without a user */
	atomic_uint cur;
	struct curl_slist *hdrs; /* shared, read-only after open */
	pthread_mutex_t pool_lock;
	CURL *idle[ETCD_MAX_IDLE];
	unsigned n_idle;
	pthread_mutex_t auth_lock;
	char *token; /* NULL: not authenticated (yet, or any more) */
	unsigned long token_gen; /* bumped by each new token */
	bool auth_off; /* etcd said it does not authenticate */
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

/* What to try after a TLS failure of url (cc), appended to err. */
static void tls_hint(struct etcd_meta *m, const char *url, CURLcode cc,
		     char *err, size_t errlen)
{
	const char *hint = NULL;
	size_t l;

	if (strncasecmp(url, "https://", 8) || !err || !errlen)
		return;
	if (cc == CURLE_PEER_FAILED_VERIFICATION)
		hint = "etcd's certificate is not trusted: set cacert= (or " MC_ETCD_ENV_CACERT
		       ") to the CA that signed it";
	else if (cc == CURLE_SSL_CERTPROBLEM)
		hint = "the client certificate or key (cert=, key=) could not "
		       "be used";
	else if (!m->conn.cert &&
		 (cc == CURLE_SSL_CONNECT_ERROR || cc == CURLE_RECV_ERROR ||
		  cc == CURLE_SEND_ERROR || cc == CURLE_GOT_NOTHING))
		hint = "an etcd run with --client-cert-auth needs a client "
		       "certificate: set cert= and key= (or " MC_ETCD_ENV_CERT
		       " and " MC_ETCD_ENV_KEY ")";
	if (!hint)
		return;
	l = strlen(err);
	snprintf(err + l, errlen - l, " (%s)", hint);
}

/*
 * POST json to url once, with hdrs. Returns the HTTP status (>= 100),
 * with the body in *b, or a negative code with err naming the URL.
 */
static int post_once(struct etcd_meta *m, CURL *h, const char *url,
		     struct curl_slist *hdrs, const char *json, size_t json_len,
		     struct body_buf *b, char *err, size_t errlen)
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
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)json_len);
	if (m->conn.cacert)
		curl_easy_setopt(h, CURLOPT_CAINFO, m->conn.cacert);
	if (m->conn.cert) {
		curl_easy_setopt(h, CURLOPT_SSLCERT, m->conn.cert);
		curl_easy_setopt(h, CURLOPT_SSLKEY, m->conn.key);
	}
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
		tls_hint(m, url, cc, err, errlen);
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

/* The headers of a request with token tok (NULL: the shared ones). */
static struct curl_slist *request_headers(struct etcd_meta *m, const char *tok)
{
	struct curl_slist *l, *n;
	size_t len;
	char *line;

	if (!tok)
		return m->hdrs;
	len = strlen(tok) + sizeof("Authorization: ");
	line = malloc(len);
	if (!line)
		return NULL;
	snprintf(line, len, "Authorization: %s", tok);
	l = curl_slist_append(NULL, "Content-Type: application/json");
	n = l ? curl_slist_append(l, "Expect:") : NULL;
	n = n ? curl_slist_append(l, line) : NULL;
	te_etcd_secret_free(line);
	if (!n) {
		curl_slist_free_all(l);
		return NULL;
	}
	return l;
}

/*
 * A non-200 answer (rc) of url as our error: etcd's authentication
 * refusals say what to do about them; ETCD_REAUTH when a new token may
 * help, ETCD_AUTH_OFF for authenticate with etcd's auth off.
 */
static int http_error(struct etcd_meta *m, const char *url, int rc, json_t *j,
		      const char *raw, char *err, size_t errlen)
{
	const char *text = error_text(j, raw);
	const char *user = m->conn.user;

	switch (te_etcd_auth_err_of(text)) {
	case TE_ETCD_AUTH_TOKEN_INVALID:
		seterr(err, errlen,
		       "etcd POST %s: etcd refused the token of user "
		       "'%.64s' (%.200s)",
		       url, user ? user : "", text);
		return user ? ETCD_REAUTH : -EACCES;
	case TE_ETCD_AUTH_REQUIRED:
		if (user) {
			/* etcd turned authentication on after we asked. */
			seterr(err, errlen,
			       "etcd POST %s: etcd requires authentication "
			       "(%.200s)",
			       url, text);
			return ETCD_REAUTH;
		}
		seterr(err, errlen,
		       "etcd POST %s: etcd requires authentication (%.200s): "
		       "%s",
		       url, text, ETCD_CRED_HINT);
		return -EACCES;
	case TE_ETCD_AUTH_DENIED:
		seterr(err, errlen,
		       "etcd POST %s: etcd user '%.64s' is not allowed this "
		       "(%.200s): grant its role read and write on the keys "
		       "(etcdctl role grant-permission)",
		       url, user ? user : "", text);
		return -EACCES;
	case TE_ETCD_AUTH_FAILED:
		seterr(err, errlen,
		       "etcd POST %s: etcd authentication failed for user "
		       "'%.64s' (%.200s): check the user and its password "
		       "file (user=, password_file=, or " MC_ETCD_ENV_USER
		       ", " MC_ETCD_ENV_PASSWORD_FILE ")",
		       url, user ? user : "", text);
		return -EACCES;
	case TE_ETCD_AUTH_NOT_ENABLED:
		if (strstr(url, ETCD_AUTH_PATH))
			return ETCD_AUTH_OFF;
		break;
	case TE_ETCD_AUTH_OTHER:
		break;
	}
	if (rc == 404)
		seterr(err, errlen,
		       "etcd POST %s: HTTP 404: no v3 JSON gateway "
		       "there (etcd >= 3.4 is needed)",
		       url);
	else
		seterr(err, errlen, "etcd POST %s: HTTP %d (%.300s)", url, rc,
		       text);
	return MC_EHTTP;
}

/*
 * POST json to path on the endpoints in turn, with token tok (or none).
 * On success (HTTP 200 with a JSON object) returns 0 with the object in
 * *resp and the endpoint that answered in *ep; otherwise a negative code
 * with err naming the URL.
 */
static int exchange(struct etcd_meta *m, const char *path, const char *json,
		    size_t json_len, const char *tok, json_t **resp,
		    const char **ep, char *err, size_t errlen)
{
	struct body_buf b = { .max = ETCD_MAX_RESPONSE };
	size_t url_len = m->conn.max_ep_len + strlen(path);
	struct curl_slist *hdrs;
	unsigned start, i, e = 0;
	json_error_t jerr;
	char *url;
	json_t *j;
	CURL *h;
	int rc = -ECONNREFUSED;

	*resp = NULL;
	url = malloc(url_len);
	h = take_handle(m);
	hdrs = request_headers(m, tok);
	if (!url || !h || !hdrs) {
		free(url);
		if (h)
			give_handle(m, h);
		if (hdrs && hdrs != m->hdrs)
			curl_slist_free_all(hdrs);
		seterr(err, errlen, "etcd: out of memory for %s", path);
		return -ENOMEM;
	}

	start = atomic_load_explicit(&m->cur, memory_order_relaxed);
	for (i = 0; i < m->conn.n_eps; i++) {
		e = (start + i) % m->conn.n_eps;
		snprintf(url, url_len, "%s%s", m->conn.eps[e], path);
		rc = post_once(m, h, url, hdrs, json, json_len, &b, err,
			       errlen);
		if (!failover(rc))
			break;
	}
	give_handle(m, h);
	if (hdrs != m->hdrs)
		curl_slist_free_all(hdrs);

	if (failover(rc)) {
		/* err names the last endpoint tried; say how many failed. */
		if (m->conn.n_eps > 1 && err && errlen) {
			size_t l = strlen(err);

			snprintf(err + l, errlen - l,
				 " (all %u etcd endpoints failed)",
				 m->conn.n_eps);
		}
		if (rc == 503)
			rc = MC_EHTTP;
		goto out;
	}
	if (rc < 0)
		goto out;
	atomic_store_explicit(&m->cur, e, memory_order_relaxed);
	*ep = m->conn.eps[e];

	j = json_loadb(b.data ? b.data : "", b.len, 0, &jerr);
	if (rc != 200) {
		rc = http_error(m, url, rc, j, b.data ? b.data : "no body", err,
				errlen);
		json_decref(j);
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

/* POST /v3/auth/authenticate: a new token in *tok, or ETCD_AUTH_OFF. */
static int authenticate(struct etcd_meta *m, char **tok, char *err,
			size_t errlen)
{
	json_t *req, *resp = NULL;
	const char *ep = NULL;
	char *json;
	int rc;

	req = json_pack("{s:s,s:s}", "name", m->conn.user, "password",
			m->password);
	if (!req) {
		seterr(err, errlen,
		       "etcd: user name or password is not valid UTF-8");
		return -EINVAL;
	}
	json = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (!json)
		return -ENOMEM;
	rc = exchange(m, ETCD_AUTH_PATH, json, strlen(json), NULL, &resp, &ep,
		      err, errlen);
	te_etcd_secret_free(json);
	if (rc)
		return rc;
	rc = te_etcd_token_of(resp, tok);
	json_decref(resp);
	if (rc == -EBADMSG)
		seterr(err, errlen, "etcd %s%s: no usable token in the answer",
		       ep, ETCD_AUTH_PATH);
	return rc;
}

/*
 * The token to send (a copy in *tok, NULL when etcd has auth off) and its
 * generation; authenticates when there is none.
 */
static int get_token(struct etcd_meta *m, char **tok, unsigned long *gen,
		     char *err, size_t errlen)
{
	int rc = 0;

	*tok = NULL;
	pthread_mutex_lock(&m->auth_lock);
	if (!m->token && !m->auth_off) {
		char *t = NULL;

		rc = authenticate(m, &t, err, errlen);
		if (rc == ETCD_AUTH_OFF) {
			m->auth_off = true;
			rc = 0;
		} else if (!rc) {
			m->token = t;
			m->token_gen++;
		}
	}
	if (!rc && m->token && !(*tok = strdup(m->token)))
		rc = -ENOMEM;
	*gen = m->token_gen;
	pthread_mutex_unlock(&m->auth_lock);
	return rc;
}

/* Forget token generation gen (refused by etcd); a newer one stays. */
static void drop_token(struct etcd_meta *m, unsigned long gen)
{
	pthread_mutex_lock(&m->auth_lock);
	if (m->token_gen == gen) {
		te_etcd_secret_free(m->token);
		m->token = NULL;
		m->auth_off = false;
	}
	pthread_mutex_unlock(&m->auth_lock);
}

/*
 * POST req to path (see exchange()), authenticated when there is a user:
 * a refused token is replaced and the request sent again, once.
 */
static int call(struct etcd_meta *m, const char *path, json_t *req,
		json_t **resp, const char **ep, char *err, size_t errlen)
{
	unsigned long gen = 0;
	char *json, *tok = NULL;
	int rc;

	*resp = NULL;
	if (!req) {
		seterr(err, errlen, "etcd: out of memory building %s", path);
		return -ENOMEM;
	}
	json = json_dumps(req, JSON_COMPACT);
	if (!json)
		return -ENOMEM;
	for (int attempt = 0;; attempt++) {
		if (m->conn.user) {
			rc = get_token(m, &tok, &gen, err, errlen);
			if (rc)
				break;
		}
		rc = exchange(m, path, json, strlen(json), tok, resp, ep, err,
			      errlen);
		te_etcd_secret_free(tok);
		tok = NULL;
		if (rc != ETCD_REAUTH)
			break;
		drop_token(m, gen);
		if (attempt) {
			rc = -EACCES; /* refused a fresh token too */
			break;
		}
	}
	free(json);
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
	mc_etcd_conn_free(&m->conn);
	te_etcd_secret_free(m->password);
	te_etcd_secret_free(m->token);
	curl_slist_free_all(m->hdrs);
	pthread_mutex_destroy(&m->pool_lock);
	pthread_mutex_destroy(&m->auth_lock);
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

/* ---- open ---- */

/* The TLS files named must be readable now, not at the first request. */
static int check_tls_files(const struct mc_etcd_conn *c, char *err,
			   size_t errlen)
{
	const struct {
		const char *path, *what;
	} files[] = {
		{ c->cacert, "CA file (cacert= / " MC_ETCD_ENV_CACERT ")" },
		{ c->cert,
		  "client certificate (cert= / " MC_ETCD_ENV_CERT ")" },
		{ c->key, "client key (key= / " MC_ETCD_ENV_KEY ")" },
	};

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (files[i].path && access(files[i].path, R_OK)) {
			int rc = -errno;

			seterr(err, errlen, "etcd %s %s: %s", files[i].what,
			       files[i].path, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

static int load_credentials(struct etcd_meta *m, char *err, size_t errlen)
{
	int rc = check_tls_files(&m->conn, err, errlen);

	if (rc || !m->conn.user)
		return rc;
	if (m->conn.password) {
		m->password = strdup(m->conn.password);
		return m->password ? 0 : -ENOMEM;
	}
	return te_etcd_password_read(m->conn.password_file, &m->password, err,
				     errlen);
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
	pthread_mutex_init(&m->auth_lock, NULL);
	atomic_init(&m->cur, 0);
	rc = mc_etcd_conn_parse(endpoints, true, &m->conn, err, errlen);
	if (!rc)
		rc = load_credentials(m, err, errlen);
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
