/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file contact.h
 * Which run of the master this client last heard from, and when: the
 * guard of every write into space a master placed (docs/design.md
 * "Writes into placed space").
 *
 * A master forgets the space its PutStarts placed when it restarts or
 * when another master takes the lead (a new *run*, PutStartResponse.run),
 * and places other objects there from MST_SLOT_FENCE_MS (0.75 s) after
 * its restore or election on. A write into placed space therefore starts
 * only while the run that placed it answered a call sent less than
 * MCS_WRITE_CONTACT_MS ago, and long writes go in parts that each take
 * about that long (xfer.h, mcs_xfer_write): a write of a dead run stops
 * within a part of its last answer, long before the new run places
 * anything where it was writing.
 *
 * Thread-safe.
 */
#ifndef MCS_CONTACT_H
#define MCS_CONTACT_H

#include <pthread.h>
#include <stdint.h>

#include "mc_compiler.h"

struct mcs_master;

/** A part of a write starts only within this long of sending a call its
 *  run answered; older contact is renewed with a Ping first. */
#define MCS_WRITE_CONTACT_MS 200

struct mcs_contact {
	pthread_mutex_t lock; /* of run, sent_ms */
	uint64_t run; /* the latest run heard from; 0: none yet */
	uint64_t sent_ms; /* mono ms: when its latest answered call was sent */
	pthread_mutex_t ping; /* one renewing Ping at a time */
};

void mcs_contact_init(struct mcs_contact *c);
void mcs_contact_destroy(struct mcs_contact *c);

/** run answered a call sent at sent_ms (mono ms). An answer of another
 *  run to a call sent before the latest contact is an old run's: ignored.
 *  run 0 (a master without runs) is ignored. */
void mcs_contact_note(struct mcs_contact *c, uint64_t run, uint64_t sent_ms);

/**
 * May a write into space that run placed start now? 0: yes (run answered
 * a call sent within MCS_WRITE_CONTACT_MS, or run is 0: a master that
 * does not say). Otherwise Pings m (one Ping at a time for all callers):
 * MC_EMASTERGONE when the master answers with another run (the space is
 * not this put's any more; another run noted from other answers is only
 * a reason to ask), 0 when it answers with run; while it does not answer,
 * Pings every 20 ms until deadline (mono ms), then the Ping's error.
 */
int mcs_contact_check(struct mcs_contact *c, struct mcs_master *m, uint64_t run,
		      uint64_t deadline) MC_MUST_CHECK;

/** When a write that mcs_contact_check let go must have started its
 *  pieces (mono ms): MCS_WRITE_CONTACT_MS + MCS_XFER_WRITE_WINDOW_MS
 *  after the call run last answered was sent, so never later than 600 ms
 *  after run's last answer; now when another run was noted since. */
uint64_t mcs_contact_send_by(struct mcs_contact *c, uint64_t run);

#endif
