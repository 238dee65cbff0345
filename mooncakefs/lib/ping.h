/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file ping.h
 * The heartbeat thread: Ping every interval (upstream: 1 s) so the master
 * keeps this client alive; when the master answers NEED_REMOUNT (it
 * restarted or expired us), or the caller says a mount is still owed, run
 * the remount callback. Failed pings are retried every interval; an outage
 * is logged once at warn level and its end once at notice level.
 */
#ifndef MCS_PING_H
#define MCS_PING_H

#include <stdbool.h>
#include <stdint.h>

#include "mc_compiler.h"

struct mcs_master;
struct mcs_ping;

/* Re-register with the master; 0 when nothing more is owed. fence_ms:
 * how long the master still holds puts back (PingResponse.fence_ms). */
typedef int (*mcs_remount_fn)(void *arg, uint64_t fence_ms);
/* True while a (re)mount is owed even though the master did not ask. */
typedef bool (*mcs_owed_fn)(void *arg);
/* The caller's housekeeping, after every ping the master answered. */
typedef void (*mcs_tick_fn)(void *arg);

int mcs_ping_start(struct mcs_master *m, unsigned interval_ms,
		   mcs_remount_fn remount, mcs_owed_fn owed, mcs_tick_fn tick,
		   void *arg, struct mcs_ping **out) MC_MUST_CHECK;
/** Stop and join the thread (waits for an RPC in progress). */
void mcs_ping_stop(struct mcs_ping *p);

#endif
