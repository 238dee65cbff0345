/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_ratelimit.h
 * At most one event per interval, counting the ones let go: for log lines
 * that a peer can cause at will (a flood of refused connections must not
 * become a flood of log lines).
 *
 *   static struct mc_ratelimit rl;
 *   unsigned dropped;
 *   if (mc_ratelimit_ok(&rl, 10000, &dropped))
 *           mc_log_warn("rpc", "refused a connection (%u more)", dropped);
 *
 * Thread-safe; a zero-initialized struct is ready.
 */
#ifndef MC_RATELIMIT_H
#define MC_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

struct mc_ratelimit {
	_Atomic uint64_t next_ms; /* CLOCK_MONOTONIC, ms */
	_Atomic unsigned dropped;
};

/**
 * True at most once per interval_ms; then *dropped (may be NULL) receives
 * the number of false answers since the last true one.
 */
bool mc_ratelimit_ok(struct mc_ratelimit *rl, unsigned interval_ms,
		     unsigned *dropped);

#endif
