/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file txn.h
 * One sqlite transaction over many changes (txn.c).
 * Locking, time and codes as master.h says.
 */
#ifndef MST_TXN_H
#define MST_TXN_H

#include "master.h"

/** Prepare item i in the open transaction: 0, or a code that aborts it. */
typedef int (*mst_txn_prepare_fn)(void *ctx, size_t i);
/** After the transaction: apply item i (committed) or undo it. */
typedef void (*mst_txn_finish_fn)(void *ctx, size_t i, bool committed);
/** prepare(0..n) in one sqlite transaction (stopping at the first code),
 *  commit, then finish(i, committed) for every i < n, prepared or not.
 *  0 or the code that aborted it. */
int mst_txn_run(struct master *m, size_t n, mst_txn_prepare_fn prepare,
		mst_txn_finish_fn finish, void *ctx);

#endif
