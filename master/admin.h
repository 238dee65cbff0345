/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file admin.h
 * The master's admin HTTP on --metrics_port, as upstream's: /metrics
 * (Prometheus text, master_* names), /metrics/summary, /health,
 * /get_all_segments, /query_key?key=, /batch_query_keys?keys=a,b,
 * /get_all_keys. Read-only; none of them grants a lease.
 */
#ifndef MASTER_ADMIN_H
#define MASTER_ADMIN_H

#include "mc_http.h"

struct master;

/** An mc_http_handler_fn with arg = struct master *. */
void mst_admin_handle(void *master, const struct mc_http_request *req,
		      struct mc_http_response *resp);

/** One line of figures for the periodic log summary (malloc'd). */
char *mst_admin_summary(struct master *m);

#endif
