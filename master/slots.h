/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file slots.h
 * Space reserved ahead for a client's next puts (slots.c; docs/design.md
 * "Reserved space for puts"). A slot is a PROCESSING object without a
 * key, kept in master.slots under the client's id and the slot's id: the
 * client writes a put into it, then PutCommit binds it to the key
 * (mst_put_commit, objects.h), one master call instead of PutStart +
 * PutEnd. Locking, time and codes as master.h says.
 */
#ifndef MST_SLOTS_H
#define MST_SLOTS_H

#include "master.h"

/** After a restart or takeover that restored segments, calls that place
 *  (PutStart, PutCommit) wait until this long after the restore (the
 *  master's fence_until; service.c; slots on or off): a client writes
 *  into a slot, or into space a PutStart placed (docs/design.md "Writes
 *  into placed space"), only within MCS_SLOT_CONTACT_MS (200 ms) of
 *  sending a call that the run which placed it answered
 *  (PutStartResponse.run), so the writes of the run before never land
 *  in memory placed since (the margin is for writes in flight). */
#define MST_SLOT_FENCE_MS 750

/** Up to want slots of size for client, placed as a plain put (one
 *  replica); each appended to out[]. How many: fewer when the client is
 *  unknown (it never pinged), holds its --put_reserve_slots already, size
 *  is above --put_reserve_max_size or there is no room (no eviction). */
unsigned mst_slots_grant(struct master *m, const uint8_t *client, uint64_t size,
			 unsigned want, struct mst_object **out);
/** How long after receiving a slot a client may start writing into it:
 *  5 s, or a quarter of the release timeout when that is shorter. */
uint64_t mst_slot_use_ms(const struct master *m);
/** The id the client names slot by. */
uint64_t mst_slot_id(const struct mst_object *slot);
/** Take the client's slot id out of the map; NULL: no such slot. */
struct mst_object *mst_slot_take(struct master *m, const uint8_t *client,
				 uint64_t id);
/** A taken slot the put did not use, back to its client. */
void mst_slot_put_back(struct master *m, struct mst_object *slot);
/** A taken slot whose replicas moved to an object: its shell freed. */
void mst_slot_consumed(struct master *m, struct mst_object *slot);
/** The client gives slot id back unused: freed now (unknown ids: no-op). */
void mst_slot_release(struct master *m, const uint8_t *client, uint64_t id);
/** Slots reserved longer than the release timeout ago: freed, whether
 *  their client lives or not. A client writes into a slot only within
 *  mst_slot_use_ms() of receiving it, then gives it back, so only a
 *  client that died or lost the master leaves one that long. */
void mst_slots_sweep(struct master *m, uint64_t now);
/** Segment s goes away: slots lose their replicas there, and a slot left
 *  with none is freed. If any was there, s's id is noted: a client may
 *  still write into such a slot for its use_ms, and if the same memory
 *  comes back as a new segment (mounted as new after a partition), no
 *  replica is placed on it before mst_slots_drop_fence() says. */
void mst_slots_strip(struct master *m, const struct mst_segment *s);
/** Note that segment id was dropped and its memory may be used until
 *  `until` (mono ms; now or earlier: not at all): if it comes back as a
 *  new segment, nothing is placed there before (MST_SLOT_DROPS notes are
 *  kept: when every one is live, the one that ends first is replaced). */
void mst_seg_fence_note(struct master *m, const uint8_t *id, uint64_t until);
/** Whether segment id is among the last ones this run dropped. */
bool mst_seg_dropped_here(const struct master *m, const uint8_t *id);
/** For a segment mounted as new: until when (mono ms) it takes no new
 *  replica, 0 when its id was not dropped lately with slots, or with
 *  objects whose readers may read on (mst_seg_fence_note()). */
uint64_t mst_slots_drop_fence(struct master *m, const uint8_t *id);
/** Slots held now, and their bytes (metrics). */
void mst_slots_count(const struct master *m, uint64_t *n, uint64_t *bytes);
/** Free every slot's shell (the allocators go whole): mst_destroy. */
void mst_slots_free_all(struct master *m);

#endif
