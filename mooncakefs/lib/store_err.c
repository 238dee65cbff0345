/* SPDX-License-Identifier: Apache-2.0 */
/* Store codes from the wire to internal codes (see store_err.h). */
#include <errno.h>

#include "mc_log.h"
#include "mooncake/mc_err.h"
#include "store_err.h"

int mcs_err_from_store(int code)
{
	switch (code) {
	case MC_STORE_OK:
		return 0;
	case MC_STORE_BUFFER_OVERFLOW:
		return -ENOBUFS;
	case MC_STORE_SEGMENT_NOT_FOUND:
		return MC_ENOSEGMENT;
	case MC_STORE_SEGMENT_ALREADY_EXISTS:
		return MC_ESEGEXISTS;
	case MC_STORE_CLIENT_NOT_FOUND:
		return MC_ENOCLIENT;
	case MC_STORE_NO_AVAILABLE_HANDLE:
		return MC_EPOOLFULL;
	case MC_STORE_INVALID_KEY:
		return MC_EBADKEY;
	case MC_STORE_INVALID_PARAMS:
		return -EINVAL;
	case MC_STORE_ILLEGAL_CLIENT:
		return -EPERM;
	case MC_STORE_REPLICA_IS_NOT_READY:
		return MC_ENOTREADY;
	case MC_STORE_OBJECT_NOT_FOUND:
		return -ENOENT;
	case MC_STORE_OBJECT_ALREADY_EXISTS:
		return -EEXIST;
	case MC_STORE_OBJECT_HAS_LEASE:
		return MC_EHASLEASE;
	case MC_STORE_LEASE_EXPIRED:
		return MC_ELEASEEXPIRED;
	case MC_STORE_OBJECT_REPLICA_BUSY:
		return -EBUSY;
	case MC_STORE_INVALID_WRITE: /* also: a directory has entries */
		return -ENOTEMPTY;
	case MC_STORE_TRANSFER_FAIL:
		return MC_ETRANSFER;
	case MC_STORE_CHECKSUM_MISMATCH:
		return MC_ECHECKSUM;
	case MC_STORE_REPLICA_NOT_FOUND: /* a checkpoint shard without holder */
		return -ENODATA;
	case MC_STORE_RPC_FAIL:
		return MC_ERPC;
	case MC_STORE_RPC_TIMEOUT:
		return -ETIMEDOUT;
	case MC_STORE_UNAVAILABLE_IN_CURRENT_STATUS:
		return MC_ENEEDREMOUNT;
	case MC_STORE_NOT_SUPPORTED:
		return MC_ENOTSUPPORTED;
	case MC_STORE_INTERNAL_ERROR:
		return -EIO;
	case MC_STORE_UNAVAILABLE_IN_CURRENT_MODE:
		return MC_ENOLEADER;
	case MC_STORE_ETCD_OPERATION_ERROR:
		return MC_EETCD;
	case MC_STORE_REPLICA_IS_GONE:
		return MC_EREPLICAGONE;
	}
	mc_log_debug("store",
		     "master answered store code %d (%s): reported "
		     "as INTERNAL_ERROR",
		     code, mc_store_err_name(code));
	return -EIO;
}
