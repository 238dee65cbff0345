/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP metadata service as a te_meta backend: a thin adaptor over the
 * pooled libcurl client in meta_http.c. put_new relies on the server's
 * rule that an existing rpc_meta key refuses other bytes (400), which is
 * what upstream's servers and ours do; for other keys it checks first.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "meta.h"
#include "meta_http.h"
#include "mooncake/mc_err.h"

struct meta_http_backend {
	struct te_meta base;
	struct te_meta_http *c;
};

static struct te_meta_http *client(struct te_meta *m)
{
	return mc_container_of(m, struct meta_http_backend, base)->c;
}

static int hb_get(struct te_meta *m, const char *key, char **val, size_t *len,
		  char *err, size_t errlen)
{
	return te_meta_http_get(client(m), key, val, len, err, errlen);
}

static int hb_put(struct te_meta *m, const char *key, const void *val,
		  size_t len, char *err, size_t errlen)
{
	return te_meta_http_put(client(m), key, val, len, err, errlen);
}

static int hb_put_new(struct te_meta *m, const char *key, const void *val,
		      size_t len, char *err, size_t errlen)
{
	char *cur;
	size_t cur_len;
	int rc;

	if (strstr(key, "rpc_meta"))
		return te_meta_http_put(client(m), key, val, len, err, errlen);
	rc = te_meta_http_get(client(m), key, &cur, &cur_len, err, errlen);
	if (rc == 0) {
		bool same = cur_len == len && !memcmp(cur, val, len);
		free(cur);
		return same ? 0 : MC_EMETACONFLICT;
	}
	if (rc != -ENOENT)
		return rc;
	return te_meta_http_put(client(m), key, val, len, err, errlen);
}

static int hb_del(struct te_meta *m, const char *key, char *err, size_t errlen)
{
	return te_meta_http_del(client(m), key, err, errlen);
}

static void hb_destroy(struct te_meta *m)
{
	struct meta_http_backend *b =
		mc_container_of(m, struct meta_http_backend, base);

	te_meta_http_destroy(b->c);
	free(b);
}

static const struct te_meta_ops meta_http_ops = {
	.scheme = "http",
	.get = hb_get,
	.put = hb_put,
	.put_new = hb_put_new,
	.del = hb_del,
	.destroy = hb_destroy,
};

int te_meta_http_open(const char *url, const struct mc_auth_key *auth,
		      struct te_meta **out, char *err, size_t errlen)
{
	struct te_meta_http_cfg cfg = { .base_url = url, .auth = auth };
	struct meta_http_backend *b = calloc(1, sizeof(*b));
	int rc;

	if (!b)
		return -ENOMEM;
	rc = te_meta_http_check_url(url, err, errlen);
	if (rc) {
		free(b);
		return rc;
	}
	rc = te_meta_http_create(&cfg, &b->c);
	if (rc) {
		snprintf(err, errlen, "metadata URL '%s': %s", url,
			 mc_strerror(rc));
		free(b);
		return rc;
	}
	b->base.ops = &meta_http_ops;
	*out = &b->base;
	return 0;
}
