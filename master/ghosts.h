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
 * PutEnd or PutRevoke when it has no put of that key in flight any more,
 * answered REPLICA_IS_GONE: the client puts again; the PutEnd of that
 * very put when it kept replicas elsewhere), or, as for any unfinished
 * put, once the release timeout has passed and its writer's client is
 * gone. Locking and time as master.h says.
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
/** writer ends its put of key that started at put_start (mono ms; 0:
 *  any of its puts of key: a PutEnd or PutRevoke for which the master
 *  has no put of writer's in flight): its ranges go back to the free
 *  space. True when there were any. writer NULL: none. */
bool mst_ghosts_end(struct master *m, const uint8_t *writer, const char *key,
		    size_t key_len, uint64_t put_start);
/** Ranges whose release timeout passed by now and whose writer's client
 *  the master no longer knows go back. */
void mst_ghosts_expire(struct master *m, uint64_t now);
/** How many ranges are kept, and their bytes (reserved or not). */
void mst_ghosts_count(const struct master *m, uint64_t *n, uint64_t *bytes);
void mst_ghosts_free_all(struct master *m);

#endif
