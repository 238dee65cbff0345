/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_http.h
 * HTTP serving over libmicrohttpd, and strict parsing of query strings.
 *
 * The server hands each complete request to one handler callback with the
 * raw path and query (as the client sent them) and the whole body. It
 * enforces a body limit (413 before reading a body whose Content-Length is
 * too big; a chunked body that grows past it gets 413 or a closed
 * connection), refuses with 400 (and closes) a request whose framing is
 * ambiguous: more than one Content-Length header, or one that is not a
 * plain decimal number (RFC 9112, 6.3), keeps bodies' buffers to what
 * arrived (never the declared length) and all of them within max_inflight
 * (a connection whose body would exceed it is closed), frees per-request
 * state when a client disconnects mid-body, and binds exactly the host it
 * is given. At max_connections (1024 when 0) a new connection closes the
 * one that has waited longest for a request, never one being answered
 * (mc_http_deadline.h); the descriptor limit is raised to fit, or the
 * limit lowered with a warning. The query is never parsed by the library
 * (any number of parameters).
 * libmicrohttpd itself answers malformed request lines and headers with
 * 400/414/431.
 *
 * Threads: the handler runs on one of cfg->threads internal threads, many
 * at once; it must be thread-safe and must not block for long.
 */
#ifndef MC_HTTP_H
#define MC_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "mc_compiler.h"

struct mc_http_request {
	const char *method; /* "GET", "PUT", ... */
	const char *path; /* raw path, NUL-terminated, without the query */
	const char *query; /* raw query after '?', or NULL */
	const char *body; /* NUL-terminated for convenience; may hold NULs */
	size_t body_len;
	const char *authorization; /* the Authorization header, or NULL */
};

struct mc_http_response {
	int status;
	const char *content_type; /* static string, or NULL */
	const char *allow; /* "Allow" header for 405, or NULL */
	char *body; /* heap, freed by the server */
	size_t body_len;
	bool close; /* send "Connection: close" (always for 413) */
	/* Instead of body: fd_len bytes of the open file fd (closed by the
	 * server), for bodies too big to hold in memory. */
	bool has_fd;
	int fd;
	size_t fd_len;
};

/** Set a copied text body; returns -ENOMEM on failure (status kept). */
int mc_http_reply(struct mc_http_response *resp, int status,
		  const char *content_type, const void *body, size_t len);
/** printf-style text/plain body. */
int mc_http_replyf(struct mc_http_response *resp, int status, const char *fmt,
		   ...) MC_PRINTF(3, 4);

typedef void (*mc_http_handler_fn)(void *arg, const struct mc_http_request *req,
				   struct mc_http_response *resp);

struct mc_http_server_cfg {
	const char *host; /* bound exactly, e.g. "127.0.0.1" */
	int port; /* 0 = ephemeral */
	unsigned threads; /* worker threads, >= 1 */
	size_t max_body; /* bytes; larger bodies get 413 */
	size_t max_inflight; /* body bytes of all requests being received
				together (0: 64 MiB); over it, closed */
	unsigned idle_timeout_s; /* close idle keep-alive connections */
	unsigned max_connections; /* 0 = 1024; beyond, the longest-waiting
				     connection is closed */
	mc_http_handler_fn handler;
	void *arg;
	const char *name; /* for log lines */
};

struct mc_http_server;

/**
 * Bind, listen and start serving.
 * @return 0, or a negative errno with a message in err naming host:port.
 */
int mc_http_server_start(const struct mc_http_server_cfg *cfg,
			 struct mc_http_server **out, char *err,
			 size_t errlen) MC_MUST_CHECK;

/** The port actually bound (useful with port 0). */
int mc_http_server_port(const struct mc_http_server *s);

/** Stop accepting, finish in-flight requests, free everything. */
void mc_http_server_stop(struct mc_http_server *s);

/**
 * Find parameter `name` in a raw query string and decode it strictly:
 * "%XX" must be two hex digits, "+" is a space, "%00" is refused.
 * @param out      receives the decoded value, NUL-terminated
 * @param out_len  capacity of out
 * @param n_out    decoded length (may be NULL)
 * @return 0; -ENOENT when absent; -EINVAL for a malformed escape or a NUL;
 *         -E2BIG when the value does not fit; -EEXIST when it is repeated.
 */
int mc_http_query_get(const char *query, const char *name, char *out,
		      size_t out_len, size_t *n_out) MC_MUST_CHECK;

/** Decode a %-escaped string of len bytes, same rules as above. */
int mc_http_unescape(const char *in, size_t len, char *out, size_t out_len,
		     size_t *n_out) MC_MUST_CHECK;

struct mc_sbuf;
/**
 * Append len bytes to b %-escaped for a query string: every byte but
 * A-Z a-z 0-9 - . _ ~ / as %XX (upper case). mc_http_unescape (and
 * Python's urllib.parse.unquote_to_bytes) gives the bytes back.
 */
void mc_http_escape(const char *in, size_t len, struct mc_sbuf *b);

#endif
