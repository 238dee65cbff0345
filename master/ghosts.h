/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file ghosts.h
 * The ranges of puts in flight on a segment that was dropped (ghosts.c;
 * docs/design.md "Writes into placed space"). A segment is dropped when
 * its owner is silent past client_ttl (or mounts it again as new
 * memory); puts placed there are forgotten with it, but their writers
 * go on writing (the master's run is the same, so their check passes).
 * When the owner mounts the segment again, new objects would be placed
 * where those writes still land. So the master keeps each such put's
 * range (the segment's endpoint and the absolute addresses written,
 * which is how writers address it) and reserves it in any segment of
 * that endpoint mounted later, until the put's writer ends it (its
 * PutEnd or PutRevoke, answered REPLICA_IS_GONE: the client puts again),
 * the writer's client goes away, or the put's release timeout passes.
 * Locking and time as master.h says.
 */
#ifndef MST_GHOSTS_H
#define MST_GHOSTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct master;
struct mst_object;
struct mst_segment;

/** s is being dropped with o, an unfinished put, on it: keep the range
 *  of each of o's replicas in s (before o or s is freed). */
void mst_ghosts_note(struct master *m, const struct mst_segment *s,
		     const struct mst_object *o);
/** s is being dropped: ranges reserved in it lose their blocks (its
 *  allocator goes) and wait for the next segment of its endpoint. */
void mst_ghosts_segment_gone(struct master *m, const struct mst_segment *s);
/** s was mounted as new memory: reserve in it every kept range of its
 *  endpoint that falls inside it. */
void mst_ghosts_reserve(struct master *m, struct mst_segment *s);
/** writer ends its put of key (PutEnd or PutRevoke of a key the master
 *  does not know as in flight): its ranges go back to the free space.
 *  True when there were any. */
bool mst_ghosts_end(struct master *m, const uint8_t *writer, const char *key,
		    size_t key_len);
/** Ranges whose release timeout passed by now, or whose writer is
 *  writer (a client that went away; NULL: none), go back. */
void mst_ghosts_expire(struct master *m, uint64_t now, const uint8_t *writer);
/** How many ranges are kept, and their bytes (reserved or not). */
void mst_ghosts_count(const struct master *m, uint64_t *n, uint64_t *bytes);
void mst_ghosts_free_all(struct master *m);

#endif
