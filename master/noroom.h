/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file noroom.h
 * Why a put found no room (noroom.c): a put answered -200
 * NO_AVAILABLE_HANDLE while the pool shows free bytes has a reason an
 * operator cannot see from the usage figure alone. An object is one block
 * on one segment, so it needs one free range as long as itself; memory
 * that eviction cannot take splits the free space: unfinished puts (those
 * of writers gone wait for --put_start_release_timeout_sec), orphans (a
 * removed object's memory waits for its reads to end), reserved slots,
 * pinned, leased or held objects. The master logs, at most once a second,
 * what the failing put met: the longest free range, the free bytes, and
 * what holds memory that is not evictable. Locking as master.h says.
 */
#ifndef MST_NOROOM_H
#define MST_NOROOM_H

#include <stdint.h>

struct master;

/** The longest free range of any segment that takes new objects. */
uint64_t mst_largest_free(const struct master *m);

/** Bytes (all replicas) and count of unfinished puts given up (their
 *  writer gone or pre-empted) whose memory waits for release. */
void mst_given_up_count(const struct master *m, uint64_t *n, uint64_t *bytes);

/** A put of size found no room even after eviction: log why (rate
 *  limited, the puts in between counted into the next line). */
void mst_no_room_note(struct master *m, uint64_t size);

#endif
