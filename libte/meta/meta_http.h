/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file meta_http.h
 * Client of the HTTP metadata service (mooncake_metad, the master's
 * embedded server, or upstream's), used by the transfer engine.
 *
 * Requests go to <base_url>?key=<url-escaped key>, exactly as upstream's
 * client sends them. Connections are kept alive and pooled: a call takes an
 * idle libcurl handle (or makes one) and returns it afterwards, so any
 * number of threads may call concurrently.
 *
 * Environment proxies (http_proxy) are ignored: upstream honours them and
 * metadata traffic then silently fails, a documented pitfall.
 *
 * With a key (cfg.auth), every request carries a signed Authorization
 * header (mc_auth_http.h). A 401 from the service is MC_EAUTHREQUIRED
 * (no key here) or MC_EAUTHFAILED (the service refused the signature),
 * err carrying the service's reason and what to set.
 *
 * Errors: 0 on success; -ENOENT for 404; MC_EMETACONFLICT when a PUT of an
 * rpc_meta key is refused as a duplicate; -ETIMEDOUT; -ECONNREFUSED;
 * MC_EHTTP for any other status. When err is given, it receives a message
 * naming the method, the URL and the status or transport error.
 */
#ifndef TE_META_HTTP_H
#define TE_META_HTTP_H

#include <stddef.h>

#include "mc_auth.h"
#include "mc_compiler.h"

struct te_meta_http_cfg {
	const char *base_url; /* e.g. http://127.0.0.1:8080/metadata */
	long timeout_ms; /* whole request; 0 = 3000 */
	long connect_timeout_ms; /* 0 = 1500 */
	unsigned max_idle; /* pooled handles kept; 0 = 16 */
	size_t max_response; /* bytes; 0 = 64 MiB */
	const struct mc_auth_key *auth; /* copied; NULL: requests unsigned */
};

struct te_meta_http;

/** -EINVAL, err saying why in curl's words, for a URL curl would refuse
 *  at every request ("http://::1:8080/...": an IPv6 host needs brackets;
 *  a port past 65535); 0 for one it takes. */
int te_meta_http_check_url(const char *url, char *err,
			   size_t errlen) MC_MUST_CHECK;

int te_meta_http_create(const struct te_meta_http_cfg *cfg,
			struct te_meta_http **out) MC_MUST_CHECK;
/** Frees every pooled handle; no call may be in flight. */
void te_meta_http_destroy(struct te_meta_http *c);

/** On success *val is malloc'd, NUL-terminated, owned by the caller. */
int te_meta_http_get(struct te_meta_http *c, const char *key, char **val,
		     size_t *len, char *err, size_t errlen) MC_MUST_CHECK;
int te_meta_http_put(struct te_meta_http *c, const char *key, const void *val,
		     size_t len, char *err, size_t errlen) MC_MUST_CHECK;
int te_meta_http_del(struct te_meta_http *c, const char *key, char *err,
		     size_t errlen) MC_MUST_CHECK;

#endif
