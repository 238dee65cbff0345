/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file admin.h
 * The master's admin HTTP on --metrics_port, as upstream's: /metrics
 * (Prometheus text, master_* names), /metrics/summary, /health,
 * /get_all_segments, /query_key?key=, /batch_query_keys?keys=a,b,
 * /get_all_keys; with HA, /ha/snapshot (a copy of the record, the sqlite
 * file, for a standby the op log no longer reaches). Read-only; none of
 * them grants a lease. With the pool's
 * token, all but /health and /metrics require signed requests.
 */
#ifndef MASTER_ADMIN_H
#define MASTER_ADMIN_H

#include <stdint.h>

#include "mc_http.h"

struct master;

struct mc_auth_key;
struct mc_auth_replay;

/* What the handler serves, and whom. */
struct mst_ha;

struct mst_admin {
	/* NULL while an HA master does not serve (a standby, or elected and
	 * loading): its pages then come from ha (mst_ha_status). */
	_Atomic(struct master *) m;
	uint64_t started; /* mono ms the daemon started */
	/* With a key, every path but /health and /metrics (which show no
	 * keys) requires a signed request (common/mc_auth_http.h); 401
	 * otherwise. NULL: open, as upstream. */
	const struct mc_auth_key *key;
	struct mc_auth_replay *replay;
	/* The record's file, for GET /ha/snapshot (NULL: not served). */
	const char *db_path;
	/* HA: this master and the address clients reach it at once it leads
	 * (/leader); NULL without HA. */
	struct mst_ha *ha;
	const char *leader_addr;
};

/** An mc_http_handler_fn with arg = struct mst_admin *. */
void mst_admin_handle(void *admin, const struct mc_http_request *req,
		      struct mc_http_response *resp);

/** One line of figures for the periodic log summary (malloc'd). */
char *mst_admin_summary(struct master *m);

#endif
