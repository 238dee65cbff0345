/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file etcd_client.h
 * One etcd cluster as the etcd metadata backend (meta_etcd.c) talks to
 * it: POST a JSON request to a v3 gateway path on the endpoints in turn,
 * authenticated (etcd's v3 RBAC token) and over TLS as the connection
 * string says (mc_etcd_conn.h).
 *
 * Endpoints are tried in order starting at the last one that answered; a
 * connection failure, a timeout or a 503 moves on to the next. Each attempt
 * has the whole per-op timeout (5 s, upstream's etcd timeout) and a 1.5 s
 * connect timeout. A retried write may already have been applied by the
 * endpoint that timed out.
 *
 * With a user, the first request authenticates (POST /v3/auth/authenticate)
 * and every request carries the token in "Authorization"; a request that
 * etcd answers "invalid auth token" (the token expired or was revoked)
 * authenticates once more and is sent again, once. An etcd with its
 * authentication off is asked without a token, as etcd's own client does.
 *
 * Locking: pool_lock guards only the idle handle stack; requests run
 * unlocked on a handle owned by the calling thread. auth_lock guards the
 * token and is held while authenticating, so one thread does it while the
 * others wait for its token. cur (the endpoint that last answered) is an
 * atomic hint; conn never changes after init.
 */
#ifndef MC_ETCD_CLIENT_H
#define MC_ETCD_CLIENT_H

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "mc_compiler.h"
#include "mc_etcd_conn.h"

#define MC_ETCD_MAX_IDLE 16

struct etcd_client {
	struct mc_etcd_conn conn; /* endpoints, user, TLS files */
	char *password; /* NULL without a user */
	atomic_uint cur;
	struct curl_slist *hdrs; /* without a token; read-only after init */
	pthread_mutex_t pool_lock;
	CURL *idle[MC_ETCD_MAX_IDLE];
	unsigned n_idle;
	pthread_mutex_t auth_lock;
	char *token; /* NULL: not authenticated (yet, or any more) */
	unsigned long token_gen; /* bumped by each new token */
	bool auth_off; /* etcd said it does not authenticate */
	/* Optional: the ms an attempt may take now (at most the 5 s
	 * default, at least 50 ms); set before the first call. The master's
	 * HA bounds its calls by its lease this way. */
	long (*time_left)(void *arg);
	void *time_arg;
};

/**
 * Parse spec (with MC_ETCD_* filling what it leaves unset), check that
 * the TLS files can be read and read the password file. Nothing is
 * contacted. 0 or a negative code with err saying why; call
 * mc_etcd_client_fini() either way.
 */
int mc_etcd_client_init(struct etcd_client *c, const char *spec, char *err,
			size_t errlen) MC_MUST_CHECK;

void mc_etcd_client_fini(struct etcd_client *c);

/** printf into err[errlen] (nothing when err is NULL or errlen 0): the
 *  error texts of this folder and its users. */
void mc_etcd_errf(char *err, size_t errlen, const char *fmt, ...)
	MC_PRINTF(3, 4);

/**
 * POST req to path. On success (HTTP 200 with a JSON object) 0 with the
 * object in *resp and the endpoint that answered in *ep; otherwise a
 * negative code (-EACCES for etcd's authentication refusals, MC_EHTTP,
 * the mapped curl errors) with err naming the URL and what to set.
 */
int mc_etcd_call(struct etcd_client *c, const char *path, json_t *req,
		 json_t **resp, const char **ep, char *err,
		 size_t errlen) MC_MUST_CHECK;

#endif
