/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file metad.h
 * The HTTP metadata service as a library: `mooncake_metad` is a thin main
 * around it and `mooncake_master --enable_http_metadata_server` embeds it.
 *
 * Protocol (upstream-compatible, docs/wire-protocol.md):
 *   GET    /metadata?key=K   200 + stored body (application/json) | 404
 *   PUT    /metadata?key=K   200; 400 when K contains "rpc_meta", exists
 *                            and the body differs; 413 over max_body
 *   DELETE /metadata?key=K   200 | 404
 *   GET    /health           200 "OK"
 * With a key (metad_options.auth), every /metadata request must carry a
 * valid signed Authorization header (mc_auth_http.h), else 401 with a
 * one-line reason; /health stays open. Without one: no authentication,
 * as upstream.
 * A missing, empty, repeated or malformed key parameter is 400; other
 * methods on /metadata are 405.
 *
 * Thread safety: metad_handle() may run on many threads at once.
 */
#ifndef METAD_H
#define METAD_H

#include <stdbool.h>
#include <stddef.h>

#include "mc_auth.h"
#include "mc_compiler.h"
#include "mc_http.h"

#define METAD_DEFAULT_MAX_BODY (1u << 20)
#define METAD_DEFAULT_MAX_KEY 4096

struct metad_options {
	/* NULL/"" or "memory": in memory only; "sqlite:PATH": durable. */
	const char *store;
	bool full_sync; /* fsync every commit (survives power loss) */
	size_t max_body; /* bytes */
	size_t max_key; /* bytes, after unescaping */
	/* The pool's key (copied); NULL: requests are not authenticated. */
	const struct mc_auth_key *auth;
};

struct metad;

/** Open the store and load its entries. */
int metad_create(const struct metad_options *opts, struct metad **out,
		 char *err, size_t errlen) MC_MUST_CHECK;
void metad_destroy(struct metad *m);

/** The request handler; an mc_http_handler_fn with arg = struct metad *. */
void metad_handle(void *metad, const struct mc_http_request *req,
		  struct mc_http_response *resp);

/** Serve m over HTTP on host:port (0 = ephemeral). */
int metad_serve(struct metad *m, const char *host, int port, unsigned threads,
		struct mc_http_server **out, char *err,
		size_t errlen) MC_MUST_CHECK;

size_t metad_count(struct metad *m);

#define METAD_ENGINE_KEY_MAX 1024

/**
 * Remove the two entries of transfer engine `name`, mooncake/ram/<name>
 * and mooncake/rpc_meta/<name> (under $MC_METADATA_CLUSTER_ID as engines
 * name them), unless either was PUT after since_ms (monotonic ms, this
 * process's clock): then an engine of that name is alive and keeps both.
 * The master calls it for the engines of the clients it dropped for good.
 * Returns how many entries went, or a negative error.
 */
int metad_drop_engine(struct metad *m, const char *name, uint64_t since_ms);

#endif
