/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file evict.h
 * Eviction, the policy the service applies under memory pressure (evict.c).
 * Locking, time and codes as master.h says.
 */
#ifndef MST_EVICT_H
#define MST_EVICT_H

#include "master.h"

/** A put of size bytes found no room: evict from the segment that can
 *  hold it once its evictable objects are gone, as few as that takes.
 *  true when some segment now has room; false (nothing evicted) when no
 *  segment could hold it, or during a restart's quarantine. */
bool mst_evict_for_put(struct master *m, uint64_t size);
/** Watermark check: evict down to watermark - ratio; logs evictions. */
void mst_evict_tick(struct master *m);

#endif
