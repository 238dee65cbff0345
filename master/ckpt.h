/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file ckpt.h
 * Checkpoints (ckpt.c; master.proto, "checkpoints"): sealed named sets of
 * files, their holders and which shards each holds, and the choice of a
 * source for a shard. Kept in memory and in sqlite (checkpoints and
 * ckpt_holders). The request handlers of the CKPT_* methods fill their
 * responses here (strings and bitmaps point into the master's state or
 * into the arena; packed before the lock is released).
 * Locking, time and codes as master.h says.
 */
#ifndef MST_CKPT_H
#define MST_CKPT_H

#include "arena.h"
#include "master.h"
#include "master.pb-c.h"

/** Holders restored from the record wait restore_grace for their client
 *  (mst_ckpt_tick). 0 or a code. */
int mst_ckpt_restore(struct master *m);
void mst_ckpt_free(struct master *m);
/** After the restore grace: restored holders whose client never showed
 *  up go (persisted). */
void mst_ckpt_tick(struct master *m, uint64_t now);
/** A client the master forgets loses its holder records (persisted). */
void mst_ckpt_client_gone(struct master *m, const uint8_t *client);
/** Whether client holds shards by a record restored after a restart and
 *  is not known yet (its Ping registers it). */
bool mst_ckpt_restored_client(struct master *m, const uint8_t *client);

int mst_ckpt_create(struct master *m, const Mcrpc__CkptCreateRequest *q,
		    uint64_t *id);
int mst_ckpt_list(struct master *m, struct arena *a,
		  const Mcrpc__CkptListRequest *q, Mcrpc__CkptListResponse *r);
int mst_ckpt_info(struct master *m, struct arena *a,
		  const Mcrpc__CkptInfoRequest *q, Mcrpc__CkptInfoResponse *r);
int mst_ckpt_remove(struct master *m, const char *name);
int mst_ckpt_hold(struct master *m, const Mcrpc__CkptHoldRequest *q);
int mst_ckpt_source(struct master *m, const Mcrpc__CkptSourceRequest *q,
		    Mcrpc__CkptSourceResponse *r);
int mst_ckpt_done(struct master *m, const Mcrpc__CkptDoneRequest *q);

#endif
