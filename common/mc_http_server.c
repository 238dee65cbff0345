/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP serving over libmicrohttpd (see mc_http.h for the contract).
 *
 * Per request, the URI log callback captures the raw URI before the library
 * unescapes anything; the access handler then accumulates the body within
 * max_body and calls the user's handler once with the complete request.
 * The completion callback frees the request in every case, including a
 * client that disconnects mid-body.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "mc_daemon.h"
#include "mc_http.h"
#include "mc_http_deadline.h"
#include "mc_log.h"
#include "mc_net.h"
#include "mc_parse.h"
#include "mc_ratelimit.h"
#include "mooncake/mc_err.h"

struct mc_http_server {
	struct MHD_Daemon *mhd;
	struct mc_http_server_cfg cfg;
	char *host;
	char *name;
	int listen_fd;
	int port;
	_Atomic size_t inflight; /* body buffer bytes of all requests */
	struct mc_ratelimit rl_budget;
	struct mc_ratelimit rl_refused;
	struct mc_http_deadlines *deadlines; /* NULL: none (out of memory) */
	unsigned max_conns; /* ours: beyond it the longest-waiting is shut */
	unsigned long long fd_share; /* of fd_reserved (fit_fd_limit) */
};

struct req_state {
	char *uri; /* raw, as received */
	const char *uri_at; /* where libmicrohttpd parsed it (see target_whole) */
	char *body;
	size_t len, cap;
	bool headers_seen;
	bool too_big;
	size_t discarded;
};

/* After this much discarded chunked body we stop reading and close. */
#define DISCARD_LIMIT (8u << 20)
/* More than libmicrohttpd's buffer for a request's headers holds. */
#define REQUEST_LINE_MAX (1u << 20)
/* Body buffers of all requests together, when cfg->max_inflight is 0. */
#define INFLIGHT_DEFAULT (64u << 20)
/* A request must have arrived whole this long after its connection
 * opened or the request before it ended (mc_http_deadline.h). */
#define REQUEST_DEADLINE_MS 30000u
/* Connections when cfg->max_connections is 0. */
#define MAX_CONNECTIONS_DEFAULT 1024u
#define RL_MS 10000u

/* The connection's watch (NULL when it has none). */
static struct mc_http_watched *watched(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct mc_http_server *s = cls;
	const union MHD_ConnectionInfo *fd, *addr;
	char peer[64] = "?";

	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		mc_http_unwatch(s->deadlines, *socket_context);
		*socket_context = NULL;
		return;
	}
	fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	addr = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (fd && addr && addr->client_addr &&
	    addr->client_addr->sa_family == AF_INET) {
		const struct sockaddr_in *in =
			(const struct sockaddr_in *)(const void *)
				addr->client_addr;
		(void)inet_ntop(AF_INET, &in->sin_addr, peer, sizeof(peer));
	}
	*socket_context =
		fd ? mc_http_watch(s->deadlines, fd->connect_fd, peer) : NULL;
}

int mc_http_reply(struct mc_http_response *resp, int status,
		  const char *content_type, const void *body, size_t len)
{
	char *copy = malloc(len + 1);

	resp->status = status;
	resp->content_type = content_type;
	if (!copy)
		return -ENOMEM;
	if (len)
		memcpy(copy, body, len);
	copy[len] = '\0';
	free(resp->body);
	resp->body = copy;
	resp->body_len = len;
	return 0;
}

int mc_http_replyf(struct mc_http_response *resp, int status, const char *fmt,
		   ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	return mc_http_reply(resp, status, "text/plain", buf, (size_t)n);
}

/*
 * The library is called with the request line still whole in its buffer,
 * before it splits the query into parameters. We read the query raw
 * (st->uri), never the library's parameters, so it gets none to split:
 * its records of ~470 parameters filled the connection's memory, and the
 * request went unanswered until its deadline. The target stays as it was
 * up to the '?' (target_whole() measures st->uri, the copy).
 */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct req_state *st = calloc(1, sizeof(*st));
	char *q = uri ? strchr(uri, '?') : NULL;

	(void)cls;
	(void)c;
	if (st) {
		st->uri = strdup(uri ? uri : "");
		st->uri_at = uri;
	}
	if (q && q[1])
		q[1] = '\0'; /* the library's own buffer, writable */
	return st;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct mc_http_server *s = cls;
	struct req_state *st = *con_cls;

	/* The next request may begin at once: its deadline runs from here
	 * (a connection's first, from its opening); a request refused
	 * before its handler (413, 400) ends here too. */
	mc_http_watch_arm(s->deadlines, watched(c));
	if (!st)
		return;
	atomic_fetch_sub(&s->inflight, st->cap);
	free(st->uri);
	free(st->body);
	free(st);
	*con_cls = NULL;
}

static enum MHD_Result send_reply(struct MHD_Connection *c,
				  struct mc_http_response *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	if (r->has_fd) {
		free(r->body);
		r->body = NULL;
		resp = MHD_create_response_from_fd64(r->fd_len, r->fd);
		if (!resp) {
			close(r->fd);
			return MHD_NO;
		}
	} else {
		resp = MHD_create_response_from_buffer(
			r->body_len, r->body ? r->body : (char *)"",
			r->body ? MHD_RESPMEM_MUST_FREE :
				  MHD_RESPMEM_PERSISTENT);
	}
	if (!resp) {
		free(r->body);
		return MHD_NO;
	}
	r->body = NULL; /* owned by the response now */
	if (r->content_type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					r->content_type);
	if (r->allow)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
	/* A refused body may still be arriving: do not keep the connection. */
	if (r->close || r->status == 413)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION,
					"close");
	ret = MHD_queue_response(c, (unsigned)r->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* A refusal before the body is read: the connection is closed after it. */
static enum MHD_Result send_refusal(struct MHD_Connection *c, int status,
				    const char *text)
{
	struct mc_http_response r = { .close = true };

	if (mc_http_reply(&r, status, "text/plain", text, strlen(text)))
		return MHD_NO;
	return send_reply(c, &r);
}

struct cl_scan {
	unsigned n; /* Content-Length headers */
	bool bad; /* one is not 1*DIGIT */
};

static enum MHD_Result scan_content_length(void *cls, enum MHD_ValueKind kind,
					   const char *key, size_t key_size,
					   const char *value, size_t value_size)
{
	static const char name[] = "content-length";
	struct cl_scan *sc = cls;

	(void)kind;
	if (key_size != sizeof(name) - 1)
		return MHD_YES;
	for (size_t i = 0; i < key_size; i++)
		if (tolower((unsigned char)key[i]) != name[i])
			return MHD_YES;
	sc->n++;
	if (!value || !value_size || strspn(value, "0123456789") != value_size)
		sc->bad = true;
	return MHD_YES;
}

/*
 * A NUL byte sent as is in the request target. libmicrohttpd hands the
 * target over as a C string, so whatever follows the NUL would silently
 * vanish ("key=a<NUL>b" read as "key=a"). It parses the request line in
 * place, ending the target where the version begins (one space, made a
 * NUL, before it): a target whose string ends short of that space held a
 * NUL. (A version not found right after the target, as for a request
 * line without one, is left to libmicrohttpd.)
 */
static bool target_whole(const struct req_state *st, const char *version)
{
	uintptr_t end, v = (uintptr_t)version;

	if (!st->uri_at || !version || !*version)
		return true;
	/* st->uri: the target as it was (the query's '?' is a NUL now). */
	end = (uintptr_t)st->uri_at + strlen(st->uri);
	if (v <= end || v - end > REQUEST_LINE_MAX)
		return true; /* not this line's version: nothing to tell */
	return v == end + 1;
}

/*
 * RFC 9112, 6.3: a body's length must be unambiguous. libmicrohttpd takes
 * the first of several Content-Length headers, where a proxy in front may
 * take another, so any duplicate (even an equal one, which the RFC lets
 * us refuse) and any value but a decimal number is a 400.
 */
static bool framing_ok(struct MHD_Connection *c)
{
	struct cl_scan sc = { 0 };

	MHD_get_connection_values_n(c, MHD_HEADER_KIND, scan_content_length,
				    &sc);
	return sc.n <= 1 && !sc.bad;
}

static bool content_length_too_big(struct MHD_Connection *c, size_t max)
{
	const char *cl = MHD_lookup_connection_value(
		c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	char *end;
	unsigned long long v;

	if (!cl)
		return false;
	errno = 0;
	v = strtoull(cl, &end, 10);
	return errno == ERANGE || (end != cl && v > max);
}

/* Count n more bytes of body buffer against the server's budget. */
static bool budget_take(struct mc_http_server *s, size_t n)
{
	size_t cur = atomic_load_explicit(&s->inflight, memory_order_relaxed);
	unsigned dropped;

	do {
		if (n > s->cfg.max_inflight - cur) {
			if (mc_ratelimit_ok(&s->rl_budget, 10000, &dropped))
				mc_log_warn(s->name,
					    "closing a connection: request "
					    "bodies being received exceed %zu "
					    "bytes (%u more in the last 10 s)",
					    s->cfg.max_inflight, dropped);
			return false;
		}
	} while (!atomic_compare_exchange_weak(&s->inflight, &cur, cur + n));
	return true;
}

static int append_body(struct mc_http_server *s, struct req_state *st,
		       const char *data, size_t n)
{
	if (st->too_big || st->len + n > s->cfg.max_body) {
		st->too_big = true;
		st->discarded += n;
		return 0;
	}
	if (st->len + n + 1 > st->cap) {
		size_t cap = st->cap ? st->cap : 4096;
		while (cap < st->len + n + 1)
			cap *= 2;
		if (!budget_take(s, cap - st->cap))
			return -ENOBUFS;
		char *b = realloc(st->body, cap);
		if (!b) {
			atomic_fetch_sub(&s->inflight, cap - st->cap);
			return -ENOMEM;
		}
		st->body = b;
		st->cap = cap;
	}
	memcpy(st->body + st->len, data, n);
	st->len += n;
	st->body[st->len] = '\0';
	return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	struct mc_http_server *s = cls;
	struct req_state *st = *con_cls;
	struct mc_http_request req;
	struct mc_http_response resp = { .status = 500 };
	char *q;

	if (!st || !st->uri)
		return MHD_NO; /* out of memory in on_uri */
	if (upload_data && *upload_data_size) {
		if (append_body(s, st, upload_data, *upload_data_size))
			return MHD_NO;
		*upload_data_size = 0;
		return st->discarded > DISCARD_LIMIT ? MHD_NO : MHD_YES;
	}
	if (!st->headers_seen) {
		/* First call: headers only. Refuse a declared huge body. */
		st->headers_seen = true;
		if (!target_whole(st, version))
			return send_refusal(c, 400,
					    "NUL byte in the request target\n");
		if (!framing_ok(c))
			return send_refusal(
				c, 400,
				"conflicting or malformed Content-Length\n");
		if (content_length_too_big(c, s->cfg.max_body))
			return send_refusal(c, 413, "request body too large\n");
		return MHD_YES;
	}
	if (st->too_big)
		return send_refusal(c, 413, "request body too large\n");

	mc_http_watch_disarm(s->deadlines, watched(c));
	q = strchr(st->uri, '?');
	if (q)
		*q++ = '\0';
	req.method = method;
	req.path = st->uri;
	req.query = q;
	req.body = st->body ? st->body : "";
	req.body_len = st->len;
	req.authorization = MHD_lookup_connection_value(
		c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	s->cfg.handler(s->cfg.arg, &req, &resp);
	return send_reply(c, &resp);
}

/* libmicrohttpd hands us its own format strings. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct mc_http_server *s = cls;
	char buf[512];
	unsigned dropped;
	size_t n;

	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	/* A connection refused (the library's limit, out of descriptors):
	 * say so, and make room for the next one. */
	if (strstr(buf, "connection limit. Closing") ||
	    strstr(buf, "resource limit") ||
	    strstr(buf, "Error accepting connection")) {
		if (mc_ratelimit_ok(&s->rl_refused, RL_MS, &dropped))
			mc_log_warn(s->name,
				    "refusing connections: %s (%u more in the "
				    "last %u s not logged)",
				    buf, dropped, RL_MS / 1000);
		(void)mc_http_deadlines_evict(s->deadlines,
					      "a connection refused");
		return;
	}
	mc_log_debug("http", "%s", buf);
}

/*
 * The library's own limit, above ours: it refuses what it cannot take,
 * where ours closes the longest-waiting connection instead, so it is
 * reached only while those being closed are not gone yet (or when all
 * are being served). It divides its limit among its threads.
 */
static unsigned mhd_limit(unsigned max_conns, unsigned threads)
{
	unsigned room = max_conns / 4;

	return max_conns + (room > 64 ? room : 64) + threads;
}

/* Raise the descriptor limit to fit the connections (and what else the
 * process opens: the HTTP servers of a process add up), or lower our
 * limit to what fits. */
static _Atomic unsigned long long fd_reserved; /* the servers running */

static void fit_fd_limit(struct mc_http_server *s, unsigned threads)
{
	const rlim_t spare = 256; /* files, RPC, logs */
	unsigned long long mine = mhd_limit(s->max_conns, threads);
	rlim_t want =
		(rlim_t)(atomic_fetch_add(&fd_reserved, mine) + mine) + spare;

	uint64_t cur = mc_daemon_raise_fd_limit(want);
	rlim_t fit;

	s->fd_share = mine; /* given back at stop */
	if (cur >= want)
		return;
	fit = cur > want - mine + 64 ? cur - (want - mine) : 64;
	fit = fit * 4 / 5 > 16 ? fit * 4 / 5 : 16;
	if (fit > s->max_conns)
		fit = s->max_conns;
	mc_log_warn(s->name,
		    "descriptor limit %llu (ulimit -n) leaves room for %llu "
		    "of %u HTTP connections",
		    (unsigned long long)cur, (unsigned long long)fit,
		    s->max_conns);
	s->max_conns = (unsigned)fit;
}

int mc_http_server_start(const struct mc_http_server_cfg *cfg,
			 struct mc_http_server **out, char *err, size_t errlen)
{
	struct mc_http_server *s;
	uint64_t deadline_ms;
	unsigned threads;
	int rc;

	/* "10m" was 10 (out of range: the default, silently), "abc" too. */
	rc = mc_parse_env_ms("MC_HTTP_REQUEST_DEADLINE_MS", REQUEST_DEADLINE_MS,
			     1000, 3600000, &deadline_ms, err, errlen);
	if (rc)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->host = strdup(cfg->host);
	s->name = strdup(cfg->name ? cfg->name : "http");
	if (!s->host || !s->name) {
		rc = -ENOMEM;
		goto err_free;
	}
	s->cfg.host = s->host;
	s->cfg.name = s->name;
	if (!s->cfg.max_inflight)
		s->cfg.max_inflight = INFLIGHT_DEFAULT;
	threads = cfg->threads > 1 ? cfg->threads : 1;
	s->max_conns = cfg->max_connections ? cfg->max_connections :
					      MAX_CONNECTIONS_DEFAULT;
	fit_fd_limit(s, threads);
	rc = mc_net_listen(cfg->host, cfg->port, 512, 1, &s->listen_fd,
			   &s->port);
	if (rc) {
		char at[300];

		(void)mc_fmt_hostport(at, sizeof(at), cfg->host, cfg->port);
		snprintf(err, errlen, "%s: cannot listen on %s: %s", s->name,
			 at, mc_strerror(rc));
		goto err_free;
	}
	s->deadlines = mc_http_deadlines_start(s->name, (unsigned)deadline_ms,
					       s->max_conns);
	s->mhd = MHD_start_daemon(
		MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
		on_request, s, MHD_OPTION_LISTEN_SOCKET, s->listen_fd,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
		MHD_OPTION_THREAD_POOL_SIZE, threads,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
		MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
		MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned)(cfg->idle_timeout_s ? cfg->idle_timeout_s : 60),
		MHD_OPTION_CONNECTION_LIMIT, mhd_limit(s->max_conns, threads),
		MHD_OPTION_END);
	if (!s->mhd) {
		mc_http_deadlines_stop(s->deadlines);
		rc = -EIO;
		snprintf(err, errlen, "%s: cannot start HTTP server on %s:%d",
			 s->name, cfg->host, s->port);
		close(s->listen_fd);
		goto err_free;
	}
	*out = s;
	return 0;

err_free:
	atomic_fetch_sub(&fd_reserved, s->fd_share);
	free(s->host);
	free(s->name);
	free(s);
	return rc;
}

int mc_http_server_port(const struct mc_http_server *s)
{
	return s->port;
}

void mc_http_server_stop(struct mc_http_server *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->mhd);
	mc_http_deadlines_stop(s->deadlines);
	close(s->listen_fd);
	atomic_fetch_sub(&fd_reserved, s->fd_share);
	free(s->host);
	free(s->name);
	free(s);
}
