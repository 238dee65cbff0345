/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file objects.h
 * Object rules: puts, gets, leases, holds, removes, renames, attributes (objects.c).
 * Locking, time and codes as master.h says.
 */
#ifndef MST_OBJECTS_H
#define MST_OBJECTS_H

#include "master.h"

struct mst_put_cfg {
	unsigned replicas;
	bool hard_pin, soft_pin;
	uint64_t soft_pin_ttl_ms;
	const char *const *preferred;
	size_t n_preferred;
	const mst_attr_t *attr; /* NULL: none (an API object) */
	const char *group; /* group id (group_len bytes), or none */
	size_t group_len;
	/* Its writer renames it right after the PutEnd (the mount's
	 * publish): a publish lease keeps it from eviction until then. */
	bool publish;
	/* Endpoints its writer could not reach: never placed there. */
	const char *const *avoid;
	size_t n_avoid;
};
/** Allocate replicas for key (state PROCESSING); *out for the reply.
 *  OBJECT_ALREADY_EXISTS with *out the object there (complete, or a put
 *  in progress). */
int mst_put_start(struct master *m, const uint8_t *client, const char *key,
		  size_t key_len, uint64_t size, const struct mst_put_cfg *pc,
		  struct mst_object **out);
/** As mst_put_start, with the replicas of slot (taken from the client's
 *  slots, written already; slots.h): on 0 the slot is consumed and *out
 *  the new PROCESSING object, for mst_put_end_prepare in the caller's
 *  transaction; on a code the slot is untouched (OBJECT_ALREADY_EXISTS:
 *  *out the object there). */
int mst_put_commit(struct master *m, const uint8_t *client, const char *key,
		   size_t key_len, struct mst_object *slot,
		   struct mst_object **out);
/** Stage the completion of key in the open transaction; applied by
 *  mst_put_end_apply() once the transaction commits. */
int mst_put_end_prepare(struct master *m, const uint8_t *client,
			const char *key, size_t key_len,
			struct mst_object **out);
void mst_put_end_apply(struct master *m, struct mst_object *o);
/** The transaction failed: the put is given up (its memory freed, its
 *  key free for the next put), as its writer is told. */
void mst_put_end_fail(struct master *m, struct mst_object *o);
int mst_put_revoke(struct master *m, const uint8_t *client, const char *key,
		   size_t key_len);
/** The client's unfinished puts give way now, as past the discard
 *  timeout (their memory is released after the release timeout: a write
 *  of theirs may still be landing): it expired or left, no PutEnd comes. */
void mst_puts_writer_gone(struct master *m, const uint8_t *client);
/** HA: within the settle window after a takeover (segments' owners are
 *  re-mounting; master.h ha_settle_until). */
bool mst_ha_settling(const struct master *m);
/** COMPLETE object or code (-704 missing, -703 processing or no readable
 *  replica). Grants a read lease, refreshes recency; hold: *hold_id.
 *  age_ms: the read was made that long ago (from a cached location): the
 *  lease runs from then, never shortened, none once age_ms >= the TTL;
 *  *lease_ms: what is left of the lease granted (0: none). */
int mst_get(struct master *m, const char *key, size_t key_len, bool hold,
	    uint64_t age_ms, struct mst_object **out, uint64_t *hold_id,
	    uint64_t *lease_ms);
/** As mst_get, for a read a client made from a location it cached under
 *  an earlier lease: refreshes recency only (no lease, no hold). */
int mst_touch(struct master *m, const char *key, size_t key_len,
	      struct mst_object **out);
/** 1, 0 or a code; grants an existence lease. */
int mst_exist(struct master *m, const char *key, size_t key_len);
/** COMPLETE object without any lease, or a code. */
int mst_stat(struct master *m, const char *key, size_t key_len,
	     struct mst_object **out);
/** Remove (db row first; caller commits), then mst_remove_apply(). */
int mst_remove_prepare(struct master *m, const char *key, size_t key_len,
		       bool force, struct mst_object **out);
void mst_remove_apply(struct master *m, struct mst_object *o, int ev_type);
void mst_remove_undo(struct master *m, struct mst_object *o);
/**
 * In the caller's transaction, before o leaves the namespace (remove,
 * eviction, rename over it): delete its row and, when a reader may still
 * copy from its memory, mark it an orphan and record its replicas, so
 * that the memory stays reserved, across a restart too, until no reader
 * can be left. mst_unlink_undo() when the transaction fails.
 */
int mst_unlink_prepare(struct master *m, struct mst_object *o);
void mst_unlink_undo(struct mst_object *o);
/** version: from is the next version of to (RenameRequest.version): the
 *  directories' records are touched only for a new name. */
int mst_rename(struct master *m, const char *from, size_t from_len,
	       const char *to, size_t to_len, bool no_replace, bool version);
/** Remove objects v[0..n) (complete, in the namespace) in one
 *  transaction, emitting ev_type for each; 0, or a code with nothing
 *  removed. */
int mst_drop_objects(struct master *m, struct mst_object **v, size_t n,
		     int ev_type);
/** Move every key and directory record under the prefix from (ending in
 *  '/') under to, in one transaction (RenameRequest.prefix). */
int mst_rename_dir(struct master *m, const char *from, size_t from_len,
		   const char *to, size_t to_len);
/** Set the fields of mask (MOONCAKE_SET_*) of a COMPLETE object's
 *  attributes from a; *out the result. */
int mst_setattr(struct master *m, const char *key, size_t key_len,
		unsigned mask, const mst_attr_t *a, mst_attr_t *out);
int mst_hold_renew(struct master *m, uint64_t id);
/** Forget hold h (expired, released or its object freed) and free it. */
void mst_hold_drop(struct master *m, struct mst_hold *h);
int mst_hold_release(struct master *m, uint64_t id);
/** Replica i readable now (its segment mounted). */
bool mst_replica_live(const struct mst_replica *r);
uint64_t mst_replica_addr(const struct mst_replica *r);
/** A zeroed object with its key (NULL with key_len 0: none) and room for
 *  n_repl replicas (<= MST_MAX_REPLICAS), one allocation; NULL: ENOMEM. */
struct mst_object *mst_object_new(const char *key, size_t key_len,
				  unsigned n_repl);
/** Free every replica of o and o itself (o must be out of every list). */
void mst_object_free(struct master *m, struct mst_object *o);
bool mst_object_leased(const struct mst_object *o, uint64_t now);

#endif
