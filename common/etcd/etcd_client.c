/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Requests to one etcd cluster: endpoints in turn, TLS files, etcd's
 * authentication tokens (see etcd_client.h).
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "curl_body.h"
#include "etcd_auth.h"
#include "etcd_client.h"
#include "mooncake/mc_err.h"

#define ETCD_TIMEOUT_MS 5000L
#define ETCD_CONNECT_TIMEOUT_MS 1500L
#define ETCD_MAX_RESPONSE (32u << 20) /* upstream's etcd max message */
#define ETCD_AUTH_PATH "/v3/auth/authenticate"

/* Internal outcomes of one exchange (never returned to callers). */
#define ETCD_REAUTH (-EKEYEXPIRED) /* the token was refused: get another */
#define ETCD_AUTH_OFF (-ENOSYS) /* authenticate: etcd has auth off */

#define CRED_VARS MC_ETCD_ENV_USER " and " MC_ETCD_ENV_PASSWORD_FILE
static const char cred_hint[] = "set user= and password_file= in the etcd "
				"connection string, or " CRED_VARS;

void mc_etcd_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- handle pool ---- */

static CURL *take_handle(struct etcd_client *m)
{
	CURL *h = NULL;

	pthread_mutex_lock(&m->pool_lock);
	if (m->n_idle)
		h = m->idle[--m->n_idle];
	pthread_mutex_unlock(&m->pool_lock);
	return h ? h : curl_easy_init();
}

static void give_handle(struct etcd_client *m, CURL *h)
{
	pthread_mutex_lock(&m->pool_lock);
	if (m->n_idle < MC_ETCD_MAX_IDLE) {
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
static void tls_hint(struct etcd_client *m, const char *url, CURLcode cc,
		     char *err, size_t errlen)
{
	const char *hint = NULL;
	size_t l;

	if (strncasecmp(url, "https://", 8) || !err || !errlen)
		return;
	if (cc == CURLE_PEER_FAILED_VERIFICATION)
		hint = "etcd's certificate is not trusted: set cacert= "
		       "(or " MC_ETCD_ENV_CACERT ") to the CA that signed it";
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
static int post_once(struct etcd_client *m, CURL *h, const char *url,
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
	mc_curl_cloexec(h);
	{
		long t = m->time_left ? m->time_left(m->time_arg) :
					ETCD_TIMEOUT_MS;

		if (t > ETCD_TIMEOUT_MS)
			t = ETCD_TIMEOUT_MS;
		if (t < 50)
			t = 50;
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, t);
	}
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ETCD_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, mc_curl_on_body);
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
			mc_etcd_errf(err, errlen,
				     "etcd POST %s: HTTP 503 (%.200s)", url,
				     b->data ? b->data : "");
	} else if (b->overflow) {
		rc = -EMSGSIZE;
		mc_etcd_errf(err, errlen,
			     "etcd POST %s: response larger than %zu bytes",
			     url, b->max);
	} else {
		rc = mc_curl_err(cc, b);
		mc_etcd_errf(err, errlen, "etcd POST %s: %s", url,
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
static struct curl_slist *request_headers(struct etcd_client *m,
					  const char *tok)
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
	mc_etcd_secret_free(line);
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
static int http_error(struct etcd_client *m, const char *url, int rc, json_t *j,
		      const char *raw, char *err, size_t errlen)
{
	const char *text = error_text(j, raw);
	const char *user = m->conn.user;

	switch (mc_etcd_auth_err_of(text)) {
	case MC_ETCD_AUTH_TOKEN_INVALID:
		mc_etcd_errf(err, errlen,
			     "etcd POST %s: etcd refused the token of user "
			     "'%.64s' (%.200s)",
			     url, user ? user : "", text);
		return user ? ETCD_REAUTH : -EACCES;
	case MC_ETCD_AUTH_REQUIRED:
		if (user) {
			/* etcd turned authentication on after we asked. */
			mc_etcd_errf(
				err, errlen,
				"etcd POST %s: etcd requires authentication "
				"(%.200s)",
				url, text);
			return ETCD_REAUTH;
		}
		mc_etcd_errf(
			err, errlen,
			"etcd POST %s: etcd requires authentication (%.200s): "
			"%s",
			url, text, cred_hint);
		return -EACCES;
	case MC_ETCD_AUTH_DENIED:
		mc_etcd_errf(
			err, errlen,
			"etcd POST %s: etcd user '%.64s' is not allowed this "
			"(%.200s): grant its role read and write on the keys "
			"(etcdctl role grant-permission)",
			url, user ? user : "", text);
		return -EACCES;
	case MC_ETCD_AUTH_FAILED:
		mc_etcd_errf(
			err, errlen,
			"etcd POST %s: etcd authentication failed for user "
			"'%.64s' (%.200s): check the user and its password "
			"file (user=, password_file=, or " MC_ETCD_ENV_USER
			", " MC_ETCD_ENV_PASSWORD_FILE ")",
			url, user ? user : "", text);
		return -EACCES;
	case MC_ETCD_AUTH_NOT_ENABLED:
		if (strstr(url, ETCD_AUTH_PATH))
			return ETCD_AUTH_OFF;
		break;
	case MC_ETCD_AUTH_OTHER:
		break;
	}
	if (rc == 404)
		mc_etcd_errf(err, errlen,
			     "etcd POST %s: HTTP 404: no v3 JSON gateway "
			     "there (etcd >= 3.4 is needed)",
			     url);
	else
		mc_etcd_errf(err, errlen, "etcd POST %s: HTTP %d (%.300s)", url,
			     rc, text);
	return MC_EHTTP;
}

/*
 * POST json to path on the endpoints in turn, with token tok (or none).
 * On success (HTTP 200 with a JSON object) returns 0 with the object in
 * *resp and the endpoint that answered in *ep; otherwise a negative code
 * with err naming the URL.
 */
static int exchange(struct etcd_client *m, const char *path, const char *json,
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
		mc_etcd_errf(err, errlen, "etcd: out of memory for %s", path);
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
		mc_etcd_errf(err, errlen, "etcd POST %s: bad JSON response: %s",
			     url, j ? "not an object" : jerr.text);
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
static int authenticate(struct etcd_client *m, char **tok, char *err,
			size_t errlen)
{
	json_t *req, *resp = NULL;
	const char *ep = NULL;
	char *json;
	int rc;

	req = json_pack("{s:s,s:s}", "name", m->conn.user, "password",
			m->password);
	if (!req) {
		mc_etcd_errf(err, errlen,
			     "etcd: user name or password is not valid UTF-8");
		return -EINVAL;
	}
	json = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (!json)
		return -ENOMEM;
	rc = exchange(m, ETCD_AUTH_PATH, json, strlen(json), NULL, &resp, &ep,
		      err, errlen);
	mc_etcd_secret_free(json);
	if (rc)
		return rc;
	rc = mc_etcd_token_of(resp, tok);
	json_decref(resp);
	if (rc == -EBADMSG)
		mc_etcd_errf(err, errlen,
			     "etcd %s%s: no usable token in the answer", ep,
			     ETCD_AUTH_PATH);
	return rc;
}

/*
 * The token to send (a copy in *tok, NULL when etcd has auth off) and its
 * generation; authenticates when there is none.
 */
static int get_token(struct etcd_client *m, char **tok, unsigned long *gen,
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
static void drop_token(struct etcd_client *m, unsigned long gen)
{
	pthread_mutex_lock(&m->auth_lock);
	if (m->token_gen == gen) {
		mc_etcd_secret_free(m->token);
		m->token = NULL;
		m->auth_off = false;
	}
	pthread_mutex_unlock(&m->auth_lock);
}

/*
 * POST req to path (see exchange()), authenticated when there is a user:
 * a refused token is replaced and the request sent again, once.
 */
int mc_etcd_call(struct etcd_client *m, const char *path, json_t *req,
		 json_t **resp, const char **ep, char *err, size_t errlen)
{
	unsigned long gen = 0;
	char *json, *tok = NULL;
	int rc;

	*resp = NULL;
	if (!req) {
		mc_etcd_errf(err, errlen, "etcd: out of memory building %s",
			     path);
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
		mc_etcd_secret_free(tok);
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

			mc_etcd_errf(err, errlen, "etcd %s %s: %s",
				     files[i].what, files[i].path,
				     mc_strerror(rc));
			return rc;
		}
	}
	return 0;
}

static int load_credentials(struct etcd_client *m, char *err, size_t errlen)
{
	int rc = check_tls_files(&m->conn, err, errlen);

	if (rc || !m->conn.user)
		return rc;
	if (m->conn.password) {
		m->password = strdup(m->conn.password);
		return m->password ? 0 : -ENOMEM;
	}
	return mc_etcd_password_read(m->conn.password_file, &m->password, err,
				     errlen);
}

int mc_etcd_client_init(struct etcd_client *m, const char *spec, char *err,
			size_t errlen)
{
	int rc;

	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->pool_lock, NULL);
	pthread_mutex_init(&m->auth_lock, NULL);
	atomic_init(&m->cur, 0);
	rc = mc_etcd_conn_parse(spec, true, &m->conn, err, errlen);
	if (!rc)
		rc = load_credentials(m, err, errlen);
	if (rc)
		return rc;
	m->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	/* No "Expect: 100-continue" round trip for big bodies. */
	if (!m->hdrs || !curl_slist_append(m->hdrs, "Expect:"))
		return -ENOMEM;
	return 0;
}

void mc_etcd_client_fini(struct etcd_client *m)
{
	for (unsigned i = 0; i < m->n_idle; i++)
		curl_easy_cleanup(m->idle[i]);
	m->n_idle = 0;
	mc_etcd_conn_free(&m->conn);
	mc_etcd_secret_free(m->password);
	mc_etcd_secret_free(m->token);
	m->password = m->token = NULL;
	curl_slist_free_all(m->hdrs);
	m->hdrs = NULL;
	pthread_mutex_destroy(&m->pool_lock);
	pthread_mutex_destroy(&m->auth_lock);
}
