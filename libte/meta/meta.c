/* SPDX-License-Identifier: Apache-2.0 */
/*
 * te_meta_open(): picks the metadata backend from the connection string,
 * as upstream's transfer engine does (see meta.h for the forms).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "mc_etcd_conn.h"
#include "mc_parse.h"
#include "meta.h"
#include "mooncake/mc_err.h"
#include "mooncake/te.h"

/*
 * Length of the URI scheme conn starts with ("etcd" for "etcd://..."), or
 * 0 when conn does not start with "<scheme>://". A "://" later in the
 * string ("h1:2379,http://h2:2379") is not a scheme.
 */
static size_t scheme_len(const char *conn)
{
	size_t n = 0;

	if (!((conn[0] >= 'a' && conn[0] <= 'z') ||
	      (conn[0] >= 'A' && conn[0] <= 'Z')))
		return 0;
	n = strspn(conn, "abcdefghijklmnopqrstuvwxyz"
			 "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.");
	return strncmp(conn + n, "://", 3) ? 0 : n;
}

static bool is_scheme(const char *conn, size_t n, const char *name)
{
	return n == strlen(name) && !strncasecmp(conn, name, n);
}

int te_meta_host(const char *conn, char *host, size_t len, int *port)
{
	char auth[300];
	size_t n, a;

	if (!conn || !*conn || !strcmp(conn, "P2PHANDSHAKE"))
		return -EINVAL;
	n = scheme_len(conn);
	if (!n || is_scheme(conn, n, "etcd"))
		return mc_etcd_conn_first_host(conn, host, len, port);
	if (!is_scheme(conn, n, "http") && !is_scheme(conn, n, "https"))
		return -EINVAL;
	conn += n + 3;
	a = strcspn(conn, "/?#");
	if (a >= sizeof(auth))
		return -ENAMETOOLONG;
	memcpy(auth, conn, a);
	auth[a] = '\0';
	return mc_parse_hostport(auth, host, len, n == 5 ? 443 : 80, port);
}

int te_meta_open(const char *conn, struct te_meta **out, char *err,
		 size_t errlen)
{
	return te_meta_open_key(conn, NULL, out, err, errlen);
}

int te_metadata_check(const char *metadata, char *err, size_t errlen)
{
	struct te_meta *m = NULL;
	int rc = te_meta_open(metadata, &m, err, errlen);

	te_meta_close(m);
	return rc;
}

int te_meta_open_key(const char *conn, const struct mc_auth_key *auth,
		     struct te_meta **out, char *err, size_t errlen)
{
	size_t n;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!conn || !*conn) {
		if (err && errlen)
			snprintf(err, errlen,
				 "empty metadata connection "
				 "string");
		return -EINVAL;
	}
	if (!strcmp(conn, "P2PHANDSHAKE"))
		return 0;
	n = scheme_len(conn);
	if (!n)
		return te_meta_etcd_open(conn, out, err, errlen);
	if (is_scheme(conn, n, "http") || is_scheme(conn, n, "https"))
		return te_meta_http_open(conn, auth, out, err, errlen);
	if (is_scheme(conn, n, "etcd"))
		return te_meta_etcd_open(conn + n + 3, out, err, errlen);
	if (err && errlen) {
		if (is_scheme(conn, n, "redis"))
			snprintf(err, errlen,
				 "redis:// metadata is not supported by this "
				 "build (use http:// or etcd://)");
		else
			snprintf(err, errlen,
				 "the metadata address is not understood: "
				 "unknown metadata scheme '%.*s://' in "
				 "'%.200s' (use http://, etcd:// or "
				 "P2PHANDSHAKE)",
				 (int)n, conn, conn);
	}
	return MC_ENOTSUPPORTED;
}
