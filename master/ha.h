/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file ha.h
 * High availability on etcd (docs/design.md, "High availability"): one
 * leader among the masters of a cluster, elected on an etcd lease, and
 * its record replicated to the standbys through an op log in etcd.
 *
 * Keys, under P = "mooncake-store/<cluster_id>/" (upstream's layout):
 *   P master_view          "host:port" of the leader's RPC, on its lease;
 *                          the key's create revision is the leader's epoch
 *   P oplog/<seq>/<part>   one transaction's changes (an sqlite patchset,
 *                          split in parts of at most 1 MiB; byte 0 of a
 *                          part: 1 on the last one), written by the leader
 *                          only while its master_view stands (fencing: a
 *                          transaction that compares its create revision)
 *   P standby/<host:port>  the last entry a standby applied, on its lease;
 *                          the leader trims the log below the lowest
 *   P oplog_base           the first entry the log still holds
 *   P master_admin         the leader's admin HTTP "host:port": a standby
 *                          the log no longer reaches (new, or away too
 *                          long) copies the record from its /ha/snapshot
 *   P insync               the standbys that hold every entry the leader
 *                          acknowledged without etcd (ha_stream.c)
 *
 * The leader also streams each entry to its standbys (HaAppend on their
 * RPC address, ha_stream.c / ha_sbuf.c) and acknowledges a change once
 * it is in etcd or every in-sync standby holds it; only an in-sync
 * standby may win next, and it writes what it holds into the log first.
 *
 * A standby applies the log to its own sqlite record as it grows and
 * campaigns when master_view is gone; once elected it reads the log to
 * its end and starts serving from its record like any restarted master.
 * A leader that cannot renew its lease within the TTL (or finds its
 * master_view gone, or its record behind the log) stops at once and
 * starts again as a standby (execv of itself).
 */
#ifndef MST_HA_H
#define MST_HA_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"

struct mc_auth_key;

struct mst_ha_cfg {
	const char *etcd; /* connection string (mc_etcd_conn.h) */
	const char *cluster_id;
	const char *advertise; /* "host:port" clients reach the RPC on */
	/* Following, the leader's stream of entries is taken on the RPC
	 * address (listen_port 0: not taken, the etcd log only). */
	const char *listen_host;
	int listen_port;
	unsigned lease_ttl_s; /* >= 1 */
	char *const *argv; /* this process's, for the restart as standby */
	const struct mc_auth_key *key; /* the pool's (signs /ha/snapshot) */
	/* Following: make memory ready for the takeover's load as the record
	 * grows (prefault.h). */
	bool prefault;
};

struct mst_ha;

/** Check the configuration (nothing is contacted). 0 or a code with err. */
int mst_ha_open(const struct mst_ha_cfg *cfg, struct mst_ha **out, char *err,
		size_t errlen);
void mst_ha_close(struct mst_ha *ha);

/**
 * Follow the leader's log into the record at db_path until this master
 * is elected (0: the record is then complete and the caller serves from
 * it), or a signal of sigs arrives (-EINTR), or the log cannot be
 * followed (a code; err says why). Elected, the lease is renewed in the
 * background until mst_ha_lead() (or mst_ha_close()), so the caller's
 * load of the record may take longer than the lease's TTL.
 */
int mst_ha_follow(struct mst_ha *ha, const char *db_path, unsigned db_flags,
		  const sigset_t *sigs, char *err, size_t errlen);

/**
 * Lead: every change to db goes to the log first; the lease is renewed in
 * the background and *until kept at the mono ms up to which this master
 * may serve (the lease's end as last renewed, less a margin). On losing
 * leadership the process restarts as a standby; a lease that ran out
 * during the takeover restarts it here, before it serves anything. 0 or
 * a code.
 */
int mst_ha_lead(struct mst_ha *ha, struct mst_db *db, _Atomic uint64_t *until);

/** Leading: publish the admin HTTP "host:port" (P master_admin, on the
 *  lease), where standbys fetch a copy of the record. */
int mst_ha_publish_admin(struct mst_ha *ha, const char *hostport);

/** The master is shutting down: losing the lead from now on stops
 *  leading (calls are answered -1011) instead of restarting the process
 *  as a standby, so the shutdown completes. */
void mst_ha_stopping(struct mst_ha *ha);

/** The epoch (master_view's create revision) while leading, else 0. */
long long mst_ha_epoch(const struct mst_ha *ha);

/** A master before it serves, as its admin pages show it. */
struct mst_ha_status {
	/* Upstream's /ha_status words: "starting", "standby" (following
	 * the log), "recovering" (copying the leader's record),
	 * "leader_warmup" (elected, loading the record). */
	const char *state;
	bool elected;
	uint64_t applied; /* the last op log entry the record holds */
	uint64_t leader_epoch; /* of the leader in master_view, 0: none */
	char leader[200]; /* its RPC "host:port", "" when none */
};

/** Where the follow loop stands (any thread). */
void mst_ha_status(struct mst_ha *ha, struct mst_ha_status *out);

#endif
