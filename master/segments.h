/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file segments.h
 * Segments, the clients that contribute them, and their liveness (segments.c).
 * Locking, time and codes as master.h says.
 */
#ifndef MST_SEGMENTS_H
#define MST_SEGMENTS_H

#include "master.h"

struct mst_seg_desc {
	const uint8_t *id;
	const char *name, *endpoint, *protocol, *host_id;
	uint64_t base, size;
};
struct mst_client *mst_client_find(struct master *m, const uint8_t *id);
struct mst_client *mst_client_touch(struct master *m, const uint8_t *id);
/** 0 mounted; MC_STORE_SEGMENT_ALREADY_EXISTS if another live client
 *  owns it. */
int mst_mount(struct master *m, const uint8_t *client,
	      const struct mst_seg_desc *d);
/** 0 re-adopted (*objects kept), 1 mounted as new, or a code. */
int mst_remount(struct master *m, const uint8_t *client,
		const struct mst_seg_desc *d, uint64_t *objects);
int mst_unmount(struct master *m, const uint8_t *client, const uint8_t *seg);
struct mst_segment *mst_segment_find(struct master *m, const uint8_t *id);
/** Drop a segment and every replica on it (objects left with none go). */
void mst_segment_drop(struct master *m, struct mst_segment *s, const char *why);
void mst_expire_clients(struct master *m, uint64_t now);
/** The master did not run for ms (up to now): its clients' silence then
 *  is not counted (their last_seen moves on by ms, at most to now),
 *  unless one was seen within those ms (calls were served). */
void mst_clients_stalled(struct master *m, uint64_t ms, uint64_t now);
/** A client closing (Ping with leaving): forgotten at once unless it still
 *  owns a segment. Its unfinished puts then have no writer. */
void mst_client_leave(struct master *m, struct mst_client *c);
size_t mst_client_count(struct master *m);
/** The queue of engines whose clients were dropped for good since the last
 *  call (newest first), handed over: free each entry. */
struct mst_gone_engine *mst_take_gone_engines(struct master *m);

#endif
