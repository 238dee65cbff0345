/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file holds.h
 * The holds of open objects (store_object.c) and the one background thread
 * that keeps them alive: every interval it renews all of them with one
 * batched LeaseRenew. The master expires a hold 3 lease TTLs after its
 * last renewal (30 s by default); the interval is 5 s, or one lease TTL
 * when that is shorter, so a hold survives two failed renewals.
 *
 * Each hold records when the master last confirmed it (the send time of
 * the GetReplicaList or LeaseRenew that did) and whether the master has
 * forgotten it. A read is safe while mcs_hold_valid() says so: then the
 * object's memory cannot have been freed or reused meanwhile.
 *
 * A renewal answered OBJECT_NOT_FOUND means the hold expired or the
 * master restarted (holds live in its memory only). The renewer then asks
 * for the object again with a new hold: if the old hold has not lapsed
 * and the key still names the same memory (size, and the replicas'
 * segment ids and addresses), the new hold replaces the old one and reads
 * go on; a master restarted keeps removed objects' memory for one hold
 * TTL, longer than this takes. If the key is gone or names other memory,
 * or the hold lapsed, it is lost for good. While the object's replicas
 * are not back (their owner has not re-mounted), it tries again at the
 * next renewal. Hold ids differ between master runs, so an old id is
 * never mistaken for a new one.
 *
 * The thread starts with the first hold; mcs_holds_destroy() stops it and
 * releases the holds still registered (objects left open at close()).
 *
 * Thread safety: every function may be called from any thread; a hold
 * returned by mcs_holds_add() is valid until mcs_holds_release() or
 * mcs_holds_destroy().
 */
#ifndef MCS_HOLDS_H
#define MCS_HOLDS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mc_compiler.h"
#include "mc_rpc.h"

struct mcs_master;
struct mcs_holds;

struct mcs_hold_loc {
	uint8_t segment_id[16];
	uint64_t address;
};

struct mcs_hold {
	uint64_t id; /* the master's hold id; changes under the lock */
	uint64_t ttl_ms; /* the hold's lifetime after each renewal */
	_Atomic uint64_t confirmed_ms; /* monotonic; see above */
	atomic_bool lost; /* the master no longer knows it */
	/* what the hold protects, to take it again after a restart */
	char *key;
	uint64_t size;
	size_t n_locs;
	struct mcs_hold_loc *locs;
	/* owned by the registry */
	size_t slot;
	bool dead;
	struct mcs_hold *next_dead;
};

/** A registry renewing through m (which must outlive it). */
int mcs_holds_create(struct mcs_master *m,
		     struct mcs_holds **out) MC_MUST_CHECK;
/** Stop the thread, release every hold left (one LeaseRelease), free. */
void mcs_holds_destroy(struct mcs_holds *h);

/**
 * Register the hold of rl (GetReplicaList's answer for key with a hold),
 * confirmed at t0_ms (monotonic, taken before that request); rl's lease
 * TTL (0: 10 s) sets the renewal interval. Starts the thread when needed.
 * 0 or -ENOMEM, -errno; on an error the hold is released at the master
 * (not left to expire, holding the object's memory).
 */
int mcs_holds_add(struct mcs_holds *h, const char *key,
		  const Mcrpc__ReplicaList *rl, uint64_t t0_ms,
		  struct mcs_hold **out) MC_MUST_CHECK;
/** Unregister x and LeaseRelease it; 0 or the RPC's code. */
int mcs_holds_release(struct mcs_holds *h, struct mcs_hold *x);

/** The hold is known to protect the object up to now_ms. */
bool mcs_hold_valid(struct mcs_hold *x, uint64_t now_ms);

/** Holds registered now (for tests and stats). */
size_t mcs_holds_count(struct mcs_holds *h);

#endif
