/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file rpc_leader.h
 * Where the master is when the pool runs HA masters (docs/operations.md,
 * "High availability"): a master address "etcd://h1:2379;h2:2379[?...]"
 * (upstream's form; any etcd connection string, mc_etcd_conn.h) names the
 * etcd that elects them, and the leader's "host:port" is the value of
 * mooncake-store/<cluster_id>/master_view there. cluster_id comes from
 * MOONCAKE_CLUSTER_ID (default mooncake_cluster, the master's default).
 *
 * Thread safety: any number of threads; one asks etcd at a time.
 */
#ifndef MC_RPC_LEADER_H
#define MC_RPC_LEADER_H

#include <stdbool.h>
#include <stddef.h>

#include "mc_compiler.h"

#define MC_RPC_LEADER_ENV_CLUSTER "MOONCAKE_CLUSTER_ID"
/* How long a call keeps looking for a leader before it fails, ms. */
#define MC_RPC_LEADER_ENV_WAIT "MC_RPC_FAILOVER_MS"
#define MC_RPC_LEADER_WAIT_MS 20000u

struct mc_rpc_leader;

/** true when addr is an etcd address (starts with "etcd://"). */
bool mc_rpc_leader_is(const char *addr);

/** Parse spec; nothing is contacted. 0 or a code. */
int mc_rpc_leader_create(const char *spec,
			 struct mc_rpc_leader **out) MC_MUST_CHECK;
void mc_rpc_leader_destroy(struct mc_rpc_leader *l);

/**
 * The leader's address into host/port. With refresh, etcd is asked again
 * unless someone asked less than 100 ms ago. 0; -EAGAIN when no master
 * leads right now; or etcd's error code.
 */
int mc_rpc_leader_get(struct mc_rpc_leader *l, bool refresh, char *host,
		      size_t hostlen, int *port) MC_MUST_CHECK;

/** ms a call may spend waiting for a new leader. */
unsigned mc_rpc_leader_wait_ms(const struct mc_rpc_leader *l);

#endif
