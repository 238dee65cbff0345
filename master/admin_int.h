/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the admin HTTP server (admin.c): the answers' helpers, and the
 * pages of the pool's view kept apart (admin_view.c).
 */
#ifndef MST_ADMIN_INT_H
#define MST_ADMIN_INT_H

#include <jansson.h>
#include <stdbool.h>

#include "admin.h"
#include "mc_http.h"
#include "mc_sbuf.h"

struct master;

/* One Prometheus gauge into the mc_sbuf b (admin.c, admin_standby.c). */
#define GAUGE(b, name, help, v)                                 \
	mc_sbuf_printf(b,                                       \
		       "# HELP " name " " help "\n# TYPE " name \
		       " gauge\n" name " %llu\n",               \
		       (unsigned long long)(v))

/** 200 with b's text (freed by the server), 500 when b ran out. */
void mst_admin_reply_sb(struct mc_http_response *resp, struct mc_sbuf *b,
			const char *type);
/** status with j as compact JSON (j is taken), 500 when out of memory. */
void mst_admin_reply_json(struct mc_http_response *resp, int status, json_t *j);

/** Every page of an HA master that does not serve yet (admin_standby.c):
 *  what it is, or 503 naming the leader. */
void mst_admin_standby(const struct mst_admin *a,
		       const struct mc_http_request *req,
		       struct mc_http_response *resp);
/** GET /leader: upstream's {"present", "leader_address", "view_version"}. */
void mst_admin_leader(const struct mst_admin *a, struct mc_http_response *resp);
/** GET /query_segment?segment=NAME: upstream's text (used and capacity). */
void mst_admin_query_segment(struct master *m, const char *query,
			     struct mc_http_response *resp);
/** GET /get_segments_detail: upstream's JSON, one item per segment. */
void mst_admin_segments_detail(struct master *m, struct mc_http_response *resp);

/** len bytes as a JSON string: as they are when UTF-8, else %-escaped
 *  (mc_http_escape); *escaped (may be NULL) says which. NULL when out of
 *  memory. (admin_keys.c) */
json_t *mst_admin_json_bytes(const char *s, size_t len, bool *escaped);
/** The same for a string (NULL as ""): segments' names and endpoints. */
json_t *mst_admin_json_str(const char *s);
/** GET /query_key?key=K: upstream's {success, data: [replicas]}. */
void mst_admin_query_key(struct master *m, const char *query,
			 struct mc_http_response *resp);
/** GET /batch_query_keys?keys=a,b: upstream's {success, data: {key: ...}};
 *  keys that are not UTF-8 in data_escaped, named %-escaped. */
void mst_admin_batch_query(struct master *m, const char *query,
			   struct mc_http_response *resp);
/** GET /get_all_keys[?escaped=1]: one key a line (%-escaped with it). */
void mst_admin_all_keys(struct master *m, const char *query,
			struct mc_http_response *resp);

#endif
