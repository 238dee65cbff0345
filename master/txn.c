/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's one shape of a change to many objects: each is prepared
 * inside one sqlite transaction (its row written or deleted, the object
 * marked), the transaction commits, and only then does memory change:
 * each prepared change is applied, or, when anything failed, undone. So
 * a failed write leaves memory as it was, and what a restart reads from
 * sqlite is what memory said.
 */
#include "master.h"
#include "txn.h"

int mst_txn_run(struct master *m, size_t n, mst_txn_prepare_fn prepare,
		mst_txn_finish_fn finish, void *ctx)
{
	int rc = n ? mst_db_begin(m->db) : 0;

	for (size_t i = 0; !rc && i < n; i++)
		rc = prepare(ctx, i);
	if (n && !rc)
		rc = mst_db_commit(m->db); /* rolls back when it fails */
	else if (n)
		mst_db_rollback(m->db);
	for (size_t i = 0; i < n; i++)
		finish(ctx, i, !rc);
	return rc;
}
