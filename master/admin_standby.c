/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin port of an HA master that does not serve yet: a standby
 * following the leader's log, or one elected and loading its record.
 * It answers what it is, as upstream's standbys do (/health 200 with
 * "role": "standby", /role, /ha_status, /leader, /metrics), so that a
 * liveness probe or a scrape of every master works; the pages of the
 * pool's state answer 503 and name the leader.
 */
#include <stdio.h>
#include <string.h>

#include "admin_int.h"
#include "ha.h"
#include "mst_util.h"
#include "mooncake/mc_version.h"

static void health(const struct mst_admin *a, const struct mst_ha_status *st,
		   struct mc_http_response *resp)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:I,s:I}", "status", "ok",
			      "role", st->elected ? "leader" : "standby",
			      "ha_state", st->state, "version",
			      MC_VERSION_STRING, "uptime_ms",
			      (json_int_t)(mst_now() - a->started),
			      "op_log_entry", (json_int_t)st->applied);

	if (j && *st->leader) {
		json_object_set_new(j, "leader_address",
				    json_string(st->leader));
		json_object_set_new(j, "view_version",
				    json_integer((json_int_t)st->leader_epoch));
	}
	mst_admin_reply_json(resp, 200, j);
}

void mst_admin_standby(const struct mst_admin *a,
		       const struct mc_http_request *req,
		       struct mc_http_response *resp)
{
	struct mst_ha_status st;
	struct mc_sbuf b = { 0 };

	if (!a->ha) { /* not reached: a master without HA serves at once */
		(void)mc_http_replyf(resp, 503, "starting\n");
		return;
	}
	mst_ha_status(a->ha, &st);
	if (!strcmp(req->path, "/health")) {
		health(a, &st, resp);
	} else if (!strcmp(req->path, "/role")) {
		(void)mc_http_replyf(resp, 200, "%s",
				     st.elected ? "leader" : "standby");
	} else if (!strcmp(req->path, "/ha_status")) {
		(void)mc_http_replyf(resp, 200, "%s", st.state);
	} else if (!strcmp(req->path, "/leader")) {
		mst_admin_reply_json(
			resp, 200,
			*st.leader ? json_pack("{s:b,s:s,s:I}", "present", 1,
					       "leader_address", st.leader,
					       "view_version",
					       (json_int_t)st.leader_epoch) :
				     json_pack("{s:b}", "present", 0));
	} else if (!strcmp(req->path, "/metrics")) {
		GAUGE(&b, "master_ha_is_leader",
		      "1 on the HA leader that serves, else 0.", 0);
		GAUGE(&b, "master_ha_op_log_entry",
		      "The last op log entry the record holds.", st.applied);
		mst_admin_reply_sb(resp, &b, "text/plain; version=0.0.4");
	} else if (*st.leader) {
		(void)mc_http_replyf(resp, 503,
				     "this master is a standby (%s): the "
				     "leader at %s serves the pool (GET "
				     "/leader)\n",
				     st.state, st.leader);
	} else {
		(void)mc_http_replyf(resp, 503,
				     "this master is a standby (%s) and no "
				     "leader is elected\n",
				     st.state);
	}
}
