/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file place.h
 * Replica placement on segments (place.c).
 * Locking, time and codes as master.h says.
 */
#ifndef MST_PLACE_H
#define MST_PLACE_H

#include "master.h"
#include "objects.h"

/** Place up to n replicas of size bytes on distinct segments. Returns the
 *  number placed (0: pool full). */
unsigned mst_place(struct master *m, const uint8_t *client, uint64_t size,
		   unsigned n, const struct mst_put_cfg *pc,
		   struct mst_replica *out);
void mst_replica_free(struct master *m, struct mst_replica *r);
/** s may take new replicas now: it has an owner and no fence
 *  (master.h, mst_segment.fenced_until). */
bool mst_seg_placeable(const struct mst_segment *s);
/** A writer could not write to the segment named (or with the
 *  transport endpoint) endpoint: its owner's segments take new replicas
 *  only where nothing else has room, until mst_note_reachable(). */
void mst_note_unreachable(struct master *m, const char *endpoint);
/** c pinged: its segments are placeable again. */
void mst_note_reachable(struct master *m, struct mst_client *c);
/** Free placement's cache of segments (mst_destroy). */
void mst_place_cache_free(struct master *m);

#endif
