/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_err.h
 * One error convention for all of mooncakefs.
 *
 * Inside the project every fallible function returns 0 on success or a
 * negative code: a negated errno (-ENOENT, -ETIMEDOUT, ...) wherever one
 * fits, otherwise a domain code from the band below MC_ERR_BASE (-4000).
 * The tables below are the single source of truth; mc_strerror(),
 * mc_err_name(), mc_err_to_store() and docs/errors.md are generated from
 * them.
 *
 * Upstream Mooncake's store error codes (-200 NO_AVAILABLE_HANDLE, -704
 * OBJECT_NOT_FOUND, ...) appear only at the public store API and in Python,
 * produced by mc_err_to_store(). They never travel inside the project.
 *
 * Thread safety: every function here is pure and may be called from any
 * thread. Returned strings are static and must not be freed.
 */
#ifndef MOONCAKE_MC_ERR_H
#define MOONCAKE_MC_ERR_H

#ifdef __cplusplus
extern "C" {
#endif

#define MC_ERR_BASE (-4000)

/*
 * Domain codes: X(name, value, upstream store code, message).
 * Append only; values are part of the wire protocols.
 */
#define MC_ERR_MAP(X)                                                          \
	X(EPOOLFULL, -4001, NO_AVAILABLE_HANDLE, "no space left in the pool")  \
	X(EHASLEASE, -4002, OBJECT_HAS_LEASE, "object is leased by a reader")  \
	X(ENOTREADY, -4003, REPLICA_IS_NOT_READY, "replica is not ready")      \
	X(ELEASEEXPIRED, -4004, LEASE_EXPIRED,                                 \
	  "lease expired before the transfer completed")                       \
	X(ENOSEGMENT, -4005, SEGMENT_NOT_FOUND, "segment not found")           \
	X(ESEGEXISTS, -4006, SEGMENT_ALREADY_EXISTS, "segment already exists") \
	X(ENOCLIENT, -4007, CLIENT_NOT_FOUND,                                  \
	  "client not known to the master")                                    \
	X(ETRANSFER, -4008, TRANSFER_FAIL, "data transfer failed")             \
	X(ECHECKSUM, -4009, CHECKSUM_MISMATCH, "checksum mismatch")            \
	X(ERPC, -4010, RPC_FAIL, "RPC to the master failed")                   \
	X(ENEEDREMOUNT, -4011, UNAVAILABLE_IN_CURRENT_STATUS,                  \
	  "client must re-mount its segments")                                 \
	X(EHTTP, -4012, INTERNAL_ERROR, "unexpected HTTP status")              \
	X(EMETACONFLICT, -4013, SEGMENT_ALREADY_EXISTS,                        \
	  "metadata entry already held by another peer")                       \
	X(ENOTREG, -4014, INVALID_PARAMS,                                      \
	  "address is not in registered memory")                               \
	X(EBADCONFIG, -4015, INVALID_PARAMS, "invalid configuration")          \
	X(EDB, -4016, INTERNAL_ERROR, "durable store (sqlite) failed")         \
	X(EBADKEY, -4017, INVALID_KEY, "invalid key")                          \
	X(ENOTSUPPORTED, -4018, NOT_SUPPORTED,                                 \
	  "not supported by this build or peer")                               \
	X(EAUTHREQUIRED, -4019, ILLEGAL_CLIENT,                                \
	  "authentication required: set --auth_token_file / "                  \
	  "MOONCAKE_AUTH_TOKEN_FILE to the pool's token (a mount: "            \
	  "-o auth_token_file=)")                                              \
	X(EAUTHFAILED, -4020, ILLEGAL_CLIENT,                                  \
	  "authentication failed: this token is not the peer's")               \
	X(EAUTHOFF, -4021, ILLEGAL_CLIENT,                                     \
	  "the peer does not authenticate (it has no token): remove "          \
	  "auth_token_file here or give the peer the token")                   \
	X(ENOLEADER, -4022, UNAVAILABLE_IN_CURRENT_MODE,                       \
	  "no master leads (HA): none named in etcd, or it stopped leading")   \
	X(EETCD, -4023, ETCD_OPERATION_ERROR,                                  \
	  "the master could not write its change to etcd (HA)")                \
	X(EMASTERGONE, -4024, TRANSFER_FAIL,                                   \
	  "the master that placed this put restarted or lost its lead: its "   \
	  "writes stopped")                                                    \
	X(EREPLICAGONE, -4025, REPLICA_IS_GONE,                                \
	  "the segment this put was written to was dropped meanwhile")         \
	X(EHOSTNAME, -4026, RPC_FAIL,                                          \
	  "host name not found (not an address, and DNS does not know it)")    \
	X(ESEGMOVED, -4027, TRANSFER_FAIL,                                     \
	  "the memory's owner is gone: another process holds its engine name") \
	X(EFORKED, -4028, UNAVAILABLE_IN_CURRENT_STATUS,                       \
	  "made before fork() and used in the child: make one in the child")

/*
 * Upstream Mooncake store codes (mooncake-store/include/types.h):
 * X(name, value, message). Values are upstream's and never change.
 */
#define MC_STORE_ERR_MAP(X)                                                   \
	X(OK, 0, "success")                                                   \
	X(INTERNAL_ERROR, -1, "internal error")                               \
	X(BUFFER_OVERFLOW, -10, "insufficient buffer space")                  \
	X(SHARD_INDEX_OUT_OF_RANGE, -100, "shard index out of range")         \
	X(SEGMENT_NOT_FOUND, -101, "no available segment found")              \
	X(SEGMENT_ALREADY_EXISTS, -102, "segment already exists")             \
	X(CLIENT_NOT_FOUND, -103, "client not found")                         \
	X(NO_AVAILABLE_HANDLE, -200,                                          \
	  "allocation failed: not enough space in the pool")                  \
	X(INVALID_VERSION, -300, "invalid version")                           \
	X(INVALID_KEY, -400, "invalid key")                                   \
	X(WRITE_FAIL, -500, "write failed")                                   \
	X(INVALID_PARAMS, -600, "invalid parameters")                         \
	X(ILLEGAL_CLIENT, -601, "client not allowed to do this operation")    \
	X(INVALID_WRITE, -700, "invalid write")                               \
	X(INVALID_READ, -701, "invalid read")                                 \
	X(INVALID_REPLICA, -702, "invalid replica")                           \
	X(REPLICA_IS_NOT_READY, -703, "replica is not ready")                 \
	X(OBJECT_NOT_FOUND, -704, "object not found")                         \
	X(OBJECT_ALREADY_EXISTS, -705, "object already exists")               \
	X(OBJECT_HAS_LEASE, -706, "object has a lease")                       \
	X(LEASE_EXPIRED, -707, "lease expired before the transfer completed") \
	X(OBJECT_HAS_REPLICATION_TASK, -708, "object has a replication task") \
	X(OBJECT_NO_REPLICATION_TASK, -709, "object has no replication task") \
	X(REPLICA_NOT_FOUND, -710, "replica not found")                       \
	X(REPLICA_ALREADY_EXISTS, -711, "replica already exists")             \
	X(REPLICA_IS_GONE, -712, "replica existed but is gone")               \
	X(REPLICA_NOT_IN_LOCAL_MEMORY, -713, "replica not in local memory")   \
	X(OBJECT_REPLICA_BUSY, -714, "object replica is busy")                \
	X(TRANSFER_FAIL, -800, "transfer failed")                             \
	X(CHECKSUM_MISMATCH, -801, "checksum mismatch")                       \
	X(RPC_FAIL, -900, "RPC failed")                                       \
	X(RPC_TIMEOUT, -901, "RPC timed out")                                 \
	X(ETCD_OPERATION_ERROR, -1000, "etcd operation failed")               \
	X(ETCD_KEY_NOT_EXIST, -1001, "key not found in etcd")                 \
	X(ETCD_TRANSACTION_FAIL, -1002, "etcd transaction failed")            \
	X(ETCD_CTX_CANCELLED, -1003, "etcd context cancelled")                \
	X(OPLOG_ENTRY_NOT_FOUND, -1004, "oplog entry not found")              \
	X(INCOMPLETE_OPLOG_CATCH_UP, -1007, "oplog catch-up incomplete")      \
	X(UNAVAILABLE_IN_CURRENT_STATUS, -1010,                               \
	  "request cannot be served in the current status")                   \
	X(UNAVAILABLE_IN_CURRENT_MODE, -1011,                                 \
	  "request cannot be served in the current mode")                     \
	X(NOT_SUPPORTED, -1012, "not supported")                              \
	X(FILE_NOT_FOUND, -1100, "file not found")                            \
	X(FILE_OPEN_FAIL, -1101, "file open failed")                          \
	X(FILE_READ_FAIL, -1102, "file read failed")                          \
	X(FILE_WRITE_FAIL, -1103, "file write failed")                        \
	X(FILE_INVALID_BUFFER, -1104, "invalid file buffer")                  \
	X(FILE_LOCK_FAIL, -1105, "file lock failed")                          \
	X(FILE_INVALID_HANDLE, -1106, "invalid file handle")                  \
	X(BUCKET_NOT_FOUND, -1200, "bucket not found")                        \
	X(BUCKET_ALREADY_EXISTS, -1201, "bucket already exists")              \
	X(KEYS_EXCEED_BUCKET_LIMIT, -1202, "keys exceed bucket limit")        \
	X(KEYS_ULTRA_LIMIT, -1203, "keys exceed the limit")                   \
	X(UNABLE_OFFLOAD, -1300, "offload is not enabled")                    \
	X(UNABLE_OFFLOADING, -1301, "unable to offload")                      \
	X(TASK_NOT_FOUND, -1400, "task not found")                            \
	X(TASK_PENDING_LIMIT_EXCEEDED, -1401, "too many pending tasks")       \
	X(JOB_NOT_FOUND, -1402, "job not found")                              \
	X(TENANT_QUOTA_EXCEEDED, -1700, "tenant quota exceeded")              \
	X(TENANT_NOT_REGISTERED, -1701, "tenant not registered")              \
	X(TENANT_NOT_EMPTY, -1702, "tenant not empty")

/*
 * Negated errno values the project returns, and the store code each becomes
 * at the public API: X(errno name, upstream store code). An errno not listed
 * becomes INTERNAL_ERROR.
 */
#define MC_ERRNO_STORE_MAP(X)            \
	X(ENOENT, OBJECT_NOT_FOUND)      \
	X(EEXIST, OBJECT_ALREADY_EXISTS) \
	X(EINVAL, INVALID_PARAMS)        \
	X(ERANGE, INVALID_PARAMS)        \
	X(ENAMETOOLONG, INVALID_KEY)     \
	X(ENOSPC, NO_AVAILABLE_HANDLE)   \
	X(EMSGSIZE, BUFFER_OVERFLOW)     \
	X(ENOBUFS, BUFFER_OVERFLOW)      \
	X(ETIMEDOUT, RPC_TIMEOUT)        \
	X(ECONNREFUSED, RPC_FAIL)        \
	X(ECONNRESET, RPC_FAIL)          \
	X(EPIPE, RPC_FAIL)               \
	X(EHOSTUNREACH, RPC_FAIL)        \
	X(EPROTO, RPC_FAIL)              \
	X(EBADMSG, RPC_FAIL)             \
	X(ENOTCONN, RPC_FAIL)            \
	X(EOPNOTSUPP, NOT_SUPPORTED)     \
	X(EBUSY, OBJECT_REPLICA_BUSY)    \
	X(EPERM, ILLEGAL_CLIENT)         \
	X(EACCES, ILLEGAL_CLIENT)        \
	X(ENOTEMPTY, INVALID_WRITE)      \
	X(ENODATA, REPLICA_NOT_FOUND)

enum mc_err {
#define MC_X_(name, value, store, msg) MC_##name = (value),
	MC_ERR_MAP(MC_X_)
#undef MC_X_
};

enum mc_store_err {
#define MC_X_(name, value, msg) MC_STORE_##name = (value),
	MC_STORE_ERR_MAP(MC_X_)
#undef MC_X_
};

/** Message for an internal code (0, -errno or a domain code). */
const char *mc_strerror(int rc);

/** Symbolic name: "OK", "ENOENT", "EPOOLFULL"; "UNKNOWN" if not known. */
const char *mc_err_name(int rc);

/** Translate an internal code to upstream's store code (0 stays 0). */
int mc_err_to_store(int rc);

/** Name of an upstream store code ("NO_AVAILABLE_HANDLE"), or "UNKNOWN". */
const char *mc_store_err_name(int code);

/** Message for an upstream store code, or "unknown error code". */
const char *mc_store_strerror(int code);

#ifdef __cplusplus
}
#endif
#endif
