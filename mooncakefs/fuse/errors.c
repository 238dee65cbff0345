/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store, seen from the daemon: its codes as errno (the one table of
 * docs/design.md, "Errors"), and waiting until the pool is joined (the
 * mount answers at once; the segment is pre-faulted in the background).
 */
#include <errno.h>
#include <time.h>

#include "mc_time.h"
#include "mcfs.h"
#include "mooncake/mc_err.h"

int mcfs_errno(int code)
{
	switch (code) {
	case MC_STORE_OK:
		return 0;
	case MC_STORE_OBJECT_NOT_FOUND:
		return -ENOENT;
	case MC_STORE_OBJECT_ALREADY_EXISTS:
		return -EEXIST;
	case MC_STORE_OBJECT_HAS_LEASE:
	case MC_STORE_REPLICA_IS_NOT_READY: /* being written */
	case MC_STORE_OBJECT_REPLICA_BUSY:
		return -EBUSY;
	case MC_STORE_NO_AVAILABLE_HANDLE: /* the pool is full */
		return -ENOSPC;
	case MC_STORE_INVALID_KEY: /* too long */
		return -ENAMETOOLONG;
	case MC_STORE_INVALID_PARAMS:
		return -EINVAL;
	case MC_STORE_NOT_SUPPORTED:
		return -EOPNOTSUPP;
	case MC_STORE_INVALID_WRITE: /* rmdir, rename: entries under it */
		return -ENOTEMPTY;
	default: /* transfer, RPC, lease expiry, internal: the I/O failed */
		return -EIO;
	}
}

int mcfs_wait_ready(struct mcfs *fs)
{
	struct timespec ts;
	int r;

	pthread_mutex_lock(&fs->ready_lock);
	/* pre-faulting a large segment takes a while */
	ts = mc_mono_deadline(60 * 1000);
	while (!fs->ready && !fs->join_failing &&
	       pthread_cond_timedwait(&fs->ready_cond, &fs->ready_lock, &ts) ==
		       0)
		;
	r = fs->ready;
	pthread_mutex_unlock(&fs->ready_lock);
	return r == 1 ? 0 : -EIO;
}
