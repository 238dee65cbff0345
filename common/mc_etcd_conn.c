/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd connection strings: endpoints, credentials and TLS files (see
 * mc_etcd_conn.h for the syntax). A password given inline is never copied
 * into an error message: messages name endpoints by what follows '@'.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mc_etcd_conn.h"
#include "mc_parse.h"

MC_PRINTF(3, 4)
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* volatile: the stores are not dropped as dead before free(). */
static void wipe(char *s, size_t n)
{
	for (volatile char *p = s; p < s + n; p++)
		*p = '\0';
}

static void wipe_free(char *s)
{
	if (!s)
		return;
	wipe(s, strlen(s));
	free(s);
}

void mc_etcd_conn_free(struct mc_etcd_conn *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < c->n_eps; i++)
		free(c->eps[i]);
	free(c->user);
	wipe_free(c->password);
	free(c->password_file);
	free(c->cacert);
	free(c->cert);
	free(c->key);
	memset(c, 0, sizeof(*c));
}

/*
 * s[0..n) with %XX decoded into a new string in *out. -EINVAL for a bad
 * escape or one that decodes to NUL; -ENOMEM.
 */
static int pct_decode(const char *s, size_t n, char **out)
{
	char *d = malloc(n + 1), *w = d;

	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			*w++ = s[i];
			continue;
		}
		if (i + 2 >= n || mc_parse_hexdigit(s[i + 1]) < 0 ||
		    mc_parse_hexdigit(s[i + 2]) < 0 ||
		    (s[i + 1] == '0' && s[i + 2] == '0')) {
			wipe(d, n + 1);
			free(d);
			return -EINVAL;
		}
		*w++ = (char)(mc_parse_hexdigit(s[i + 1]) * 16 +
			      mc_parse_hexdigit(s[i + 2]));
		i += 2;
	}
	*w = '\0';
	*out = d;
	return 0;
}

static bool has_prefix(const char *s, size_t n, const char *p)
{
	size_t l = strlen(p);

	return n >= l && !strncasecmp(s, p, l);
}

/* ---- OPTIONS after '?' ---- */

static const struct {
	const char *name;
	size_t off;
	const char *env;
} opts[] = {
	{ "user", offsetof(struct mc_etcd_conn, user), MC_ETCD_ENV_USER },
	{ "password_file", offsetof(struct mc_etcd_conn, password_file),
	  MC_ETCD_ENV_PASSWORD_FILE },
	{ "cacert", offsetof(struct mc_etcd_conn, cacert), MC_ETCD_ENV_CACERT },
	{ "cert", offsetof(struct mc_etcd_conn, cert), MC_ETCD_ENV_CERT },
	{ "key", offsetof(struct mc_etcd_conn, key), MC_ETCD_ENV_KEY },
};

static char **opt_field(struct mc_etcd_conn *c, size_t i)
{
	return (char **)((char *)c + opts[i].off);
}

static int parse_option(struct mc_etcd_conn *c, const char *s, size_t n,
			char *err, size_t errlen)
{
	const char *eq = memchr(s, '=', n);
	size_t klen = eq ? (size_t)(eq - s) : n;
	char **f;
	int rc;

	if (klen == 8 && !strncmp(s, "password", 8))
		return fail(err, errlen,
			    "etcd option 'password' is not taken: put the "
			    "password in a file (mode 0600) and name it with "
			    "password_file= or " MC_ETCD_ENV_PASSWORD_FILE);
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		if (strlen(opts[i].name) != klen ||
		    strncmp(s, opts[i].name, klen))
			continue;
		f = opt_field(c, i);
		if (!eq || eq + 1 == s + n)
			return fail(err, errlen,
				    "etcd option '%s' has no value",
				    opts[i].name);
		if (*f)
			return fail(err, errlen, "etcd option '%s' given twice",
				    opts[i].name);
		rc = pct_decode(eq + 1, n - klen - 1, f);
		if (rc == -EINVAL)
			return fail(err, errlen,
				    "etcd option '%s': bad %%-escape",
				    opts[i].name);
		return rc;
	}
	return fail(err, errlen,
		    "unknown etcd option '%.*s' (use user, password_file, "
		    "cacert, cert, key)",
		    (int)(klen > 64 ? 64 : klen), s);
}

static int parse_options(struct mc_etcd_conn *c, const char *q, char *err,
			 size_t errlen)
{
	while (*q) {
		size_t n = strcspn(q, "&");
		int rc;

		if (n) {
			rc = parse_option(c, q, n, err, errlen);
			if (rc)
				return rc;
		}
		q += n + (q[n] != '\0');
	}
	return 0;
}

/* ---- endpoints ---- */

/* USER[:PASSWORD] of the first endpoint, s[0..n). */
static int parse_userinfo(struct mc_etcd_conn *c, const char *s, size_t n,
			  char *err, size_t errlen)
{
	const char *colon = memchr(s, ':', n);
	size_t ulen = colon ? (size_t)(colon - s) : n;
	int rc;

	if (!ulen)
		return fail(err, errlen,
			    "etcd endpoint: empty user name before '@'");
	rc = pct_decode(s, ulen, &c->user);
	if (!rc && colon)
		rc = pct_decode(colon + 1, n - ulen - 1, &c->password);
	if (rc == -EINVAL)
		return fail(err, errlen,
			    "etcd endpoint: bad %%-escape in the user or "
			    "password before '@'");
	if (!rc && c->password && !*c->password)
		return fail(err, errlen,
			    "etcd endpoint: empty password after '%s:'",
			    c->user);
	return rc;
}

/*
 * HOST[:PORT] up to the first '/' of host[0..hlen), as a URL has it: an
 * IPv6 address in brackets, a port in 0..65535. Caught here, a bad one
 * is a configuration error at start; curl refused it only at the first
 * request ("URL using bad/illegal format"), an HA master retrying so.
 */
static int check_authority(const char *host, size_t hlen, const char *scheme,
			   char *err, size_t errlen)
{
	size_t alen = strcspn(host, "/");
	char auth[300], h[256];
	int port;

	if (alen > hlen)
		alen = hlen;
	if (alen >= sizeof(auth))
		return fail(err, errlen, "etcd endpoint '%.64s...': too long",
			    host);
	memcpy(auth, host, alen);
	auth[alen] = '\0';
	if (mc_parse_hostport(auth, h, sizeof(h), 0, &port) ||
	    (auth[0] != '[' && strchr(h, ':')))
		return fail(err, errlen,
			    "etcd endpoint '%s%s': expected HOST:PORT, an IPv6 "
			    "address in brackets ([::1]:2379), a port in "
			    "0..65535",
			    scheme ? scheme : "", auth);
	return 0;
}

/* One endpoint s[0..n), trimmed; first: the only one that may hold '@'. */
static int add_endpoint(struct mc_etcd_conn *c, const char *s, size_t n,
			bool first, char *err, size_t errlen)
{
	const char *sep = n >= 3 ? strstr(s, "://") : NULL;
	const char *scheme = NULL, *host, *at;
	size_t hlen, len;
	char *ep;
	int rc;

	if (sep && sep + 3 > s + n)
		sep = NULL;
	if (sep && strspn(s, "abcdefghijklmnopqrstuvwxyz"
			     "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.") !=
			   (size_t)(sep - s))
		/* Not echoed: it may hold a user and password. */
		return fail(err, errlen,
			    "etcd endpoint: '://' after something that is "
			    "not a scheme (a user goes after the scheme: "
			    "http://USER@HOST:PORT)");
	if (sep) {
		if (has_prefix(s, n, "http://"))
			scheme = "http://";
		else if (has_prefix(s, n, "https://"))
			scheme = "https://";
		else
			return fail(err, errlen,
				    "etcd endpoint with scheme '%.*s://': only "
				    "http:// and https:// are supported",
				    (int)(sep - s > 32 ? 32 : sep - s), s);
		host = sep + 3;
	} else {
		host = s;
	}
	hlen = n - (size_t)(host - s);
	/* userinfo ends at the last '@' before any '/'. */
	at = NULL;
	for (size_t i = 0; i < hlen && host[i] != '/'; i++)
		if (host[i] == '@')
			at = host + i;
	if (at) {
		if (!first)
			return fail(err, errlen,
				    "etcd endpoint '%.*s': a user may be given "
				    "on the first endpoint only",
				    (int)(hlen - (size_t)(at + 1 - host)),
				    at + 1);
		rc = parse_userinfo(c, host, (size_t)(at - host), err, errlen);
		if (rc)
			return rc;
		hlen -= (size_t)(at + 1 - host);
		host = at + 1;
	}
	while (hlen && host[hlen - 1] == '/')
		hlen--;
	if (!hlen || host[0] == '/' || memchr(host, ' ', hlen) ||
	    memchr(host, '\t', hlen))
		return fail(err, errlen, "etcd endpoint '%s%.*s': no host",
			    scheme ? scheme : "", (int)hlen, host);
	rc = check_authority(host, hlen, scheme, err, errlen);
	if (rc)
		return rc;
	if (c->n_eps == MC_ETCD_MAX_ENDPOINTS)
		return fail(err, errlen, "etcd: more than %d endpoints",
			    MC_ETCD_MAX_ENDPOINTS);
	/* No scheme: decided once the options are known (finish()). */
	len = (scheme ? strlen(scheme) : 0) + hlen + 1;
	ep = malloc(len);
	if (!ep)
		return -ENOMEM;
	snprintf(ep, len, "%s%.*s", scheme ? scheme : "", (int)hlen, host);
	c->eps[c->n_eps++] = ep;
	return 0;
}

static int parse_endpoints(struct mc_etcd_conn *c, const char *p,
			   const char *end, char *err, size_t errlen)
{
	while (p < end) {
		size_t n = strcspn(p, ",;");
		const char *s = p;
		int rc;

		if (p + n > end)
			n = (size_t)(end - p);
		p += n + (p + n < end);
		while (n && (*s == ' ' || *s == '\t')) {
			s++;
			n--;
		}
		while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
			n--;
		if (n) {
			rc = add_endpoint(c, s, n, c->n_eps == 0, err, errlen);
			if (rc)
				return rc;
		}
	}
	if (!c->n_eps)
		return fail(err, errlen,
			    "etcd: no endpoint in the connection "
			    "string");
	return 0;
}

/* ---- the whole string ---- */

static int from_env(struct mc_etcd_conn *c)
{
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		char **f = opt_field(c, i);
		const char *v = getenv(opts[i].env);

		if (*f || !v || !*v)
			continue;
		if (i == 1 && c->password)
			continue; /* USER:PASSWORD@ brings its own */
		*f = strdup(v);
		if (!*f)
			return -ENOMEM;
	}
	return 0;
}

/* Cross-field rules, and the scheme of endpoints given without one. */
static int finish(struct mc_etcd_conn *c, char *err, size_t errlen)
{
	bool tls = c->cacert || c->cert || c->key;

	if (c->password && c->password_file)
		return fail(err, errlen,
			    "etcd: a password is given both before '@' and "
			    "by password_file: keep one");
	if (!c->user && (c->password || c->password_file))
		return fail(err, errlen,
			    "etcd: a password without a user: set user= or "
			    "%s",
			    MC_ETCD_ENV_USER);
	if (c->user && !c->password && !c->password_file)
		return fail(err, errlen,
			    "etcd user '%.64s' has no password: set "
			    "password_file= or %s",
			    c->user, MC_ETCD_ENV_PASSWORD_FILE);
	if (!c->cert != !c->key)
		return fail(err, errlen,
			    "etcd: %s without %s: a client certificate needs "
			    "both cert= (%s) and key= (%s)",
			    c->cert ? "cert" : "key", c->cert ? "key" : "cert",
			    MC_ETCD_ENV_CERT, MC_ETCD_ENV_KEY);
	for (unsigned i = 0; i < c->n_eps; i++) {
		char *ep = c->eps[i], *full;
		size_t len;

		if (strstr(ep, "://")) {
			if (tls && !strncasecmp(ep, "http://", 7))
				return fail(err, errlen,
					    "etcd endpoint '%.200s' is plain "
					    "HTTP but TLS files (cacert, "
					    "cert, key) are given: use "
					    "https://",
					    ep);
		} else {
			len = strlen(ep) + 9;
			full = malloc(len);
			if (!full)
				return -ENOMEM;
			snprintf(full, len, "%s%s",
				 tls ? "https://" : "http://", ep);
			free(ep);
			c->eps[i] = full;
		}
		len = strlen(c->eps[i]) + 1;
		if (len > c->max_ep_len)
			c->max_ep_len = len;
	}
	return 0;
}

int mc_etcd_conn_parse(const char *spec, bool use_env, struct mc_etcd_conn *c,
		       char *err, size_t errlen)
{
	const char *q;
	int rc;

	if (!c)
		return -EINVAL;
	memset(c, 0, sizeof(*c));
	if (!spec)
		return fail(err, errlen, "etcd: no endpoints given");
	if (has_prefix(spec, strlen(spec), "etcd://"))
		spec += 7;
	q = strchr(spec, '?');
	rc = parse_endpoints(c, spec, q ? q : spec + strlen(spec), err, errlen);
	if (!rc && q)
		rc = parse_options(c, q + 1, err, errlen);
	if (!rc && use_env)
		rc = from_env(c);
	if (!rc)
		rc = finish(c, err, errlen);
	return rc;
}

int mc_etcd_conn_first_host(const char *spec, char *host, size_t host_len,
			    int *port)
{
	struct mc_etcd_conn c;
	char err[256];
	const char *ep;
	int rc = mc_etcd_conn_parse(spec, false, &c, err, sizeof(err));

	if (!rc) {
		ep = strstr(c.eps[0], "://"); /* always has a scheme */
		rc = mc_parse_hostport(ep ? ep + 3 : c.eps[0], host, host_len,
				       0, port);
	}
	mc_etcd_conn_free(&c);
	return rc;
}
