/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file meta.h
 * Metadata backends of the transfer engine behind one ops table, chosen by
 * the connection string as upstream does:
 *   http://host:port/metadata    the HTTP metadata service (meta_http.c)
 *   etcd://h1:2379,h2:2379       etcd's v3 HTTP/JSON gateway (meta_etcd.c)
 *   h1:2379,h2:2379              no scheme: etcd
 *   P2PHANDSHAKE                 no backend; peers are asked directly
 *   redis://...                  refused (not supported), named in err
 *
 * All ops may be called from any thread concurrently. Keys and values are
 * byte strings; values returned are malloc'd, NUL-terminated, caller-owned.
 * Errors: -ENOENT (no such key), MC_EMETACONFLICT (put_new: the key holds
 * other bytes), -ETIMEDOUT, -ECONNREFUSED, MC_EHTTP; err names the backend
 * URL and the failure.
 */
#ifndef TE_META_H
#define TE_META_H

#include <stddef.h>

#include "mc_auth.h"
#include "mc_compiler.h"

struct te_meta;

struct te_meta_ops {
	const char *scheme;
	int (*get)(struct te_meta *m, const char *key, char **val, size_t *len,
		   char *err, size_t errlen);
	/** Create or replace. */
	int (*put)(struct te_meta *m, const char *key, const void *val,
		   size_t len, char *err, size_t errlen);
	/**
	 * Create only: succeed if the key is absent or already holds exactly
	 * these bytes; MC_EMETACONFLICT if it holds other bytes.
	 */
	int (*put_new)(struct te_meta *m, const char *key, const void *val,
		       size_t len, char *err, size_t errlen);
	int (*del)(struct te_meta *m, const char *key, char *err,
		   size_t errlen);
	void (*destroy)(struct te_meta *m);
};

struct te_meta {
	const struct te_meta_ops *ops;
};

/**
 * Open the backend named by conn. *out is NULL for P2PHANDSHAKE.
 * @return 0; MC_ENOTSUPPORTED for redis:// or an unknown scheme; -EINVAL.
 */
int te_meta_open(const char *conn, struct te_meta **out, char *err,
		 size_t errlen) MC_MUST_CHECK;

/**
 * te_meta_open() with the pool's key: the HTTP backend signs its requests
 * with it (meta_http.h); etcd ignores it (etcd's own user/password and
 * TLS files go in the connection string or MC_ETCD_*: mc_etcd_conn.h).
 * auth NULL: te_meta_open().
 */
int te_meta_open_key(const char *conn, const struct mc_auth_key *auth,
		     struct te_meta **out, char *err,
		     size_t errlen) MC_MUST_CHECK;

/**
 * Where the metadata backend conn names is reached: the HTTP service's
 * host and port, or the first etcd endpoint's. 0; -EINVAL for
 * P2PHANDSHAKE or a string not understood; -ENAMETOOLONG. Nothing is
 * contacted.
 */
int te_meta_host(const char *conn, char *host, size_t len,
		 int *port) MC_MUST_CHECK;

/** Backend constructors, for te_meta_open() and tests. */
int te_meta_http_open(const char *url, const struct mc_auth_key *auth,
		      struct te_meta **out, char *err,
		      size_t errlen) MC_MUST_CHECK;
/** endpoints: an etcd connection string (mc_etcd_conn.h), e.g.
 *  "h1:2379,h2:2379?user=mc&password_file=/etc/mc/etcd.pw"; MC_ETCD_*
 *  variables fill what it leaves unset. Nothing is contacted at open; TLS
 *  files must be readable and the password file is read here. */
int te_meta_etcd_open(const char *endpoints, struct te_meta **out, char *err,
		      size_t errlen) MC_MUST_CHECK;

static inline void te_meta_close(struct te_meta *m)
{
	if (m)
		m->ops->destroy(m);
}

#endif
