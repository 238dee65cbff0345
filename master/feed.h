/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file feed.h
 * The change feed (feed.c).
 * Locking, time and codes as master.h says.
 */
#ifndef MST_FEED_H
#define MST_FEED_H

#include "master.h"

int mst_feed_init(struct mst_feed *f, size_t cap);
void mst_feed_free(struct mst_feed *f);
/** An event; version: the object's, for a put or a rename of one key
 *  (0 otherwise). */
void mst_feed_emit(struct master *m, int type, const char *key, size_t key_len,
		   const char *to, size_t to_len, uint64_t version);

#endif
