/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file put_slots.h
 * Space the master reserved ahead for this client's next puts (docs/
 * design.md "Reserved space for puts"; the master's side is master/
 * slots.h). A single put of a size the client holds a slot for writes the
 * value into the slot and binds it to its key with one PutCommit, instead
 * of PutStart, the write and PutEnd; PutStart and PutCommit ask for more
 * slots of their size as they go.
 *
 * A slot is good only for the master's run that gave it
 * (PutStartResponse.run) and only while that run answered a call sent
 * less than MCS_SLOT_CONTACT_MS ago: a restarted master or a new leader
 * holds its placing calls back for longer than that (master/slots.h), so
 * a slot of a dead run is never written over memory given to another
 * object. A
 * slot is used only within its use_ms of its arrival (the master frees
 * unreturned slots no sooner than 4 x that); older ones are given back
 * (the heartbeat's round), all of them at close.
 *
 * Thread-safe.
 */
#ifndef MCS_PUT_SLOTS_H
#define MCS_PUT_SLOTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master.pb-c.h"

#define MCS_SLOT_CONTACT_MS 200
#define MCS_SLOTS_MAX 8 /* held at once */
#define MCS_SLOTS_PER_SIZE 2 /* asked for, per size put */
#define MCS_SLOTS_GIVE_MAX 64 /* queued for giving back */

/** One slot: one replica, the object's bytes at addr on endpoint. */
struct mcs_slot {
	uint64_t id, size, run;
	uint64_t got_ms; /* mono ms it arrived */
	uint64_t use_ms; /* usable this long after got_ms (Slot.use_ms) */
	uint64_t addr;
	char *endpoint; /* malloc'd */
	uint8_t seg_id[16]; /* the replica's segment (MCS_SEG_ID_LEN) */
	bool has_seg_id;
};

struct mcs_slots {
	pthread_mutex_t lock;
	bool off; /* the client asks for none (MC_PUT_RESERVE=0) */
	uint64_t run, contact_ms; /* the latest run, its latest answer */
	struct mcs_slot v[MCS_SLOTS_MAX];
	size_t n;
	uint64_t give[MCS_SLOTS_GIVE_MAX]; /* ids to give back */
	size_t n_give;
};

void mcs_slots_init(struct mcs_slots *sl, bool off);
/** Frees what is held (without telling the master: see drain). */
void mcs_slots_destroy(struct mcs_slots *sl);
/** How many slots of size a put should ask for (0 when off or full). */
uint32_t mcs_slots_want(struct mcs_slots *sl, uint64_t size);
/** The master's run answered a call sent at sent_ms (mono ms): slots of
 *  other runs are dropped once a new run answers. */
void mcs_slots_contact(struct mcs_slots *sl, uint64_t run, uint64_t sent_ms);
/** Keep the slots a PutStart or PutCommit of run got (those of one
 *  replica; the rest, and any beyond room, are queued to give back). */
void mcs_slots_add(struct mcs_slots *sl, uint64_t run,
		   Mcrpc__Slot *const *slots, size_t n);
/** Take a usable slot of exactly size into *out: 0, or -ENOENT. */
int mcs_slots_take(struct mcs_slots *sl, uint64_t size, struct mcs_slot *out);
/** A taken slot the put did not use (the key exists): held again. */
void mcs_slots_put_back(struct mcs_slots *sl, struct mcs_slot *s);
/** A taken slot not to be used again: freed; give: queued to give back
 *  (the master still holds it), else forgotten (the master does not). */
void mcs_slots_drop(struct mcs_slots *sl, struct mcs_slot *s, bool give);
/** Slots on endpoint (this client could not write there) leave, queued
 *  to give back. */
void mcs_slots_drop_endpoint(struct mcs_slots *sl, const char *endpoint);
/** Slots past their use_ms leave, queued to give back. */
void mcs_slots_expire(struct mcs_slots *sl);
/** Move up to max queued ids into ids; how many. */
size_t mcs_slots_drain(struct mcs_slots *sl, uint64_t *ids, size_t max);
/** Every slot of the live run queued to give back; the table emptied. */
void mcs_slots_clear(struct mcs_slots *sl);
/** Queue back ids that could not be sent. */
void mcs_slots_requeue(struct mcs_slots *sl, const uint64_t *ids, size_t n);

#endif
