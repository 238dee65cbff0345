/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file groups.h
 * Object groups (groups.c): upstream's ReplicateConfig.group_ids. Objects
 * put under one group id are one unit for the pool's policy: a read or an
 * existence check of one member refreshes the leases and the recency of
 * every member, and eviction takes a group whole or leaves it whole
 * (evict.c). Removal, rename and pins stay per object. A group lives
 * while it has members; its id is stored with each member (db.c), so it
 * survives a restart. Locking, time and codes as master.h says.
 */
#ifndef MST_GROUPS_H
#define MST_GROUPS_H

#include "master.h"

/** Longest group id accepted (longer: INVALID_PARAMS at PutStart). */
#define MST_GROUP_ID_MAX 1024

struct mst_group {
	struct mst_object *head; /* members, newest first */
	size_t n;
	/* eviction's per-pass verdict: whether every member may go */
	uint64_t pass;
	bool evictable;
	size_t id_len;
	char id[]; /* id_len bytes + NUL */
};

/** Add o (in no group) to the group id (len bytes, > 0), made when new.
 *  0 or -ENOMEM (o is then in no group). */
int mst_group_join(struct master *m, struct mst_object *o, const char *id,
		   size_t len);
/** Take o out of its group (none: nothing); an empty group is freed. */
void mst_group_leave(struct master *m, struct mst_object *o);
/** n takes src's place in src's group (rename: n is src's copy). */
void mst_group_replace(struct mst_object *src, struct mst_object *n);
/** The members of o's group that are readable objects of the namespace
 *  (complete, not orphaned), o among them: visit calls fn for each. */
void mst_group_each(struct mst_object *o,
		    void (*fn)(struct mst_object *x, void *arg), void *arg);
/** A read (or existence check) of o: its group's other members get o's
 *  leases (when longer) and recency, as upstream refreshes a group's
 *  leases together. */
void mst_group_touch(struct master *m, struct mst_object *o);

#endif
