/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file lifecycle.h
 * The master's state created, ticked and destroyed (master.c).
 * Locking, time and codes as master.h says.
 */
#ifndef MST_LIFECYCLE_H
#define MST_LIFECYCLE_H

#include "master.h"

/** Create the state; db_path NULL or "memory": nothing durable; db_flags:
 *  MST_DB_* (db.h). */
int mst_create(const struct mst_config *cfg, const char *db_path,
	       unsigned db_flags, struct master **out, char *err,
	       size_t errlen);
void mst_destroy(struct master *m);
/** Housekeeping, called every ~10 ms by the background thread: client
 *  liveness, restore grace, holds, orphans, abandoned puts, eviction. */
void mst_tick(struct master *m);

#endif
