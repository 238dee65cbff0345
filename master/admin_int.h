/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the admin HTTP server (admin.c): the answers' helpers, and the
 * pages of the pool's view kept apart (admin_view.c).
 */
#ifndef MST_ADMIN_INT_H
#define MST_ADMIN_INT_H

#include <jansson.h>

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

#endif
