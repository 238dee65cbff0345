/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mst_util.h
 * The master's clocks, object versions, random numbers and ids (util.c).
 * Locking, time and codes as master.h says.
 */
#ifndef MST_UTIL_H
#define MST_UTIL_H

#include "master.h"

uint64_t mst_now(void); /* monotonic ms */
uint64_t mst_wall(void); /* wall ms */
int64_t mst_wall_ns(void);
/** A new object version: wall ns, above every version given out so far. */
uint64_t mst_next_version(struct master *m);
/** Wall ms of a version. */
#define MST_VERSION_MS(v) ((v) / 1000000u)
uint64_t mst_rand(struct master *m);
void mst_id_hex(const uint8_t *id, char out[2 * MST_ID_LEN + 1]);

#endif
