/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file master_client.h
 * Typed wrappers of every master RPC (common/rpc/master.proto) for the
 * store library, the `mooncake` CLI and the FUSE daemon.
 *
 * Codes: every function returns 0 or an internal code (-errno, MC_E*):
 * the RPC client's transport errors as they are (-ETIMEDOUT for no answer
 * in time, -ECONNREFUSED, -ECONNRESET, -EPROTO ...), or the response's
 * top-level `code` translated with mcs_err_from_store(). Per-key outcomes
 * are translated too, whether they come back in an array (results[i]) or
 * inside a returned message: no upstream store code ever leaves this file.
 * A response whose per-key arrays do not match the request is -EPROTO.
 *
 * Single-key methods (batch == false) send one key; the master may report
 * that key's outcome either as the top-level code or as results[0], so a
 * caller takes `rc ? rc : results[0]` and never needs to know which.
 *
 * Messages returned through `out` are the unpacked protobuf responses
 * (types in build/generated/rpc/master.pb-c.h), owned by the caller: free
 * them with mcs_master_free(). On error *out is NULL.
 *
 * Thread safety: any number of threads may call at once (the RPC client
 * is a connection pool).
 */
#ifndef MCS_MASTER_CLIENT_H
#define MCS_MASTER_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mc_auth.h"
#include "mc_compiler.h"
#include "mc_rpc.h"

#define MCS_CLIENT_ID_LEN 16

/* PingResponse.client_status */
enum mcs_client_status {
	MCS_CLIENT_OK = 1,
	MCS_CLIENT_NEED_REMOUNT = 2,
};

/* ReplicaList / Replica status: upstream ReplicaStatus COMPLETE. */
#define MCS_REPLICA_COMPLETE 3

struct mcs_master;

/**
 * addr "host:port"; timeout_ms per call (0: 5000); client_id is copied
 * (NULL: an all-zero id, for tools that use no per-client method).
 */
int mcs_master_create(const char *addr, unsigned timeout_ms,
		      const uint8_t *client_id,
		      struct mcs_master **out) MC_MUST_CHECK;
void mcs_master_destroy(struct mcs_master *m);
/** Authenticate every connection with key (copied); before the first call. */
void mcs_master_set_auth(struct mcs_master *m, const struct mc_auth_key *key);
/*
 * Tenants (docs/design.md "Tenants"): a non-default tenant T's keys are
 * the master's keys under ".tenants/T/". This file is the one place that
 * maps them: every key sent gets the prefix, every key received (List
 * entries, Watch events) loses it, and what lies outside it is dropped;
 * RemoveAll/RemoveByRegex touch only T's keys (the default tenant's skip
 * ".tenants/"). The default tenant's keys travel as they are.
 */
#define MCS_TENANT_ROOT ".tenants/"
#define MCS_TENANT_MAX 64
/** NULL, "" and "default" name the default tenant. */
bool mcs_tenant_default(const char *tenant_id);
/** NULL for a valid tenant name (1-64 of [A-Za-z0-9_.-], not "." or "..",
 *  or the default tenant), else why it is not one. */
const char *mcs_tenant_invalid(const char *tenant_id);
/** This client's tenant (before the first call); -EINVAL for a bad name. */
int mcs_master_set_tenant(struct mcs_master *m,
			  const char *tenant_id) MC_MUST_CHECK;
void mcs_master_set_timeout(struct mcs_master *m, unsigned timeout_ms);
/** Busy-poll window for answers (us, 0: off; mc_busy_poll.h); set before
 *  the first call. Watch long polls never busy-poll. */
void mcs_master_set_busy_poll(struct mcs_master *m, unsigned max_us);
unsigned mcs_master_timeout(const struct mcs_master *m);
const uint8_t *mcs_master_client_id(const struct mcs_master *m);

/** Free a message returned by any function below (NULL is fine). */
void mcs_master_free(void *msg);
/** One call of method with req (its request message); *resp_out (a
 *  pointer to the response message type's pointer) gets the answer when 0
 *  is returned; the answer's non-zero code comes back translated
 *  (mcs_err_from_store), with *resp_out NULL. For typed wrappers in other
 *  files (ckpt_master.c). */
int mcs_master_call(struct mcs_master *m, uint16_t method, const void *req,
		    void *resp_out) MC_MUST_CHECK;

/* ---- liveness and segments --------------------------------------------- */

/** out (may be NULL) gets the version strings. */
int mcs_master_service_ready(struct mcs_master *m,
			     Mcrpc__ServiceReadyResponse **out);
/** *client_status: enum mcs_client_status; fence_ms (how long the master
 *  still holds puts back after its restore or election: PingResponse.
 *  fence_ms, 0 from a master without) and run (the master's run:
 *  PingResponse.run, 0 from a master without) may be NULL. */
int mcs_master_ping(struct mcs_master *m, int *client_status,
		    uint64_t *fence_ms, uint64_t *run);
/** The segments' view (PingResponse.view_version) as of the last ping the
 *  master answered, 0 before any: it moves with every segment that joins,
 *  leaves or is re-adopted, and with a new master. */
uint64_t mcs_master_view(struct mcs_master *m);
/** Tell the master this client is closing (after its unmounts): it then
 *  stops counting it among the active clients at once. */
int mcs_master_leave(struct mcs_master *m);
int mcs_master_mount(struct mcs_master *m, const Mcrpc__Segment *seg);
/**
 * ReMountSegment with n segments (n == 0 registers the client). out gets
 * results[i] (0 re-adopted, 1 mounted as new, < 0 internal code) and
 * objects[i], both with exactly n entries.
 */
int mcs_master_remount(struct mcs_master *m, Mcrpc__Segment *const *segs,
		       size_t n, Mcrpc__ReMountSegmentResponse **out);
int mcs_master_unmount(struct mcs_master *m, const uint8_t *segment_id);
int mcs_master_get_status(struct mcs_master *m, Mcrpc__GetStatusResponse **out);

/* ---- objects ----------------------------------------------------------- */

/**
 * This client could not reach endpoint (a replica's transport
 * endpoint): its PutStarts for the next seconds name it to the master,
 * which places their replicas elsewhere (PutStartRequest.unreachable).
 * Thread-safe.
 */
void mcs_master_note_unreachable(struct mcs_master *m, const char *endpoint);
/** Was endpoint noted so within the last seconds? Thread-safe. */
bool mcs_master_unreachable(struct mcs_master *m, const char *endpoint);

/**
 * PutStart (batch false, n == 1) or BatchPutStart: (*out)->results[i] has
 * the key's code and, when 0, the replicas to write. cfg and attr (every
 * key's attributes) may be NULL; groups NULL (none) or n group ids ("":
 * that key in none). publish: each object is renamed right after its
 * PutEnd (PutStartRequest.publish: kept from eviction until then).
 */
int mcs_master_put_start(struct mcs_master *m, bool batch,
			 const char *const *keys, const uint64_t *sizes,
			 size_t n, const Mcrpc__ReplicateConfig *cfg,
			 const Mcrpc__Attr *attr, const char *const *groups,
			 uint32_t reserve, bool publish,
			 Mcrpc__PutStartResponse **out);
/**
 * PutCommit (put_slots.h): bind key to slot, reserve more of its size,
 * give back release[0..n_release). key NULL: only give back. 0 with *out
 * the answer (its code is the key's: the caller reads code and
 * in_progress; mcs_master_free() it), or a transport error.
 */
int mcs_master_put_commit(struct mcs_master *m, const char *key, uint64_t slot,
			  uint32_t reserve, const uint64_t *release,
			  size_t n_release, Mcrpc__PutCommitResponse **out);
/** PutEnd / BatchPutEnd; results[i] per key, and versions[i] (unless
 *  versions is NULL) the object's version or 0 when not said. */
int mcs_master_put_end(struct mcs_master *m, bool batch,
		       const char *const *keys, size_t n, int *results,
		       uint64_t *versions);
int mcs_master_put_revoke(struct mcs_master *m, bool batch,
			  const char *const *keys, size_t n, int *results);

/**
 * GetReplicaList / BatchGetReplicaList: (*out)->results[i] has the code,
 * COMPLETE replicas, size and lease_ttl_ms (hold_id with hold).
 */
int mcs_master_get_replicas(struct mcs_master *m, bool batch,
			    const char *const *keys, size_t n, bool hold,
			    Mcrpc__GetReplicaListResponse **out);
/**
 * BatchGetReplicaList for reads this client made from locations it cached
 * (the location cache, locs.h): key i was last read ages_ms[i] ago; its
 * lease is renewed from then (read_age_ms, docs/wire-protocol.md), and
 * results[i].lease_ttl_ms is what is left of it (0: none renewed).
 */
int mcs_master_renew_reads(struct mcs_master *m, const char *const *keys,
			   const uint32_t *ages_ms, size_t n,
			   Mcrpc__GetReplicaListResponse **out);
/** ExistKey / BatchExistKey: results[i] 1, 0 or < 0. */
int mcs_master_exist(struct mcs_master *m, bool batch, const char *const *keys,
		     size_t n, int *results);
/** GetSize: sizes[i] the size or < 0. */
int mcs_master_get_size(struct mcs_master *m, const char *const *keys, size_t n,
			int64_t *sizes);
/** Remove / BatchRemove; results[i] per key. */
int mcs_master_remove(struct mcs_master *m, bool batch, const char *const *keys,
		      size_t n, bool force, int *results);
int mcs_master_remove_all(struct mcs_master *m, bool force, uint64_t *count);
int mcs_master_remove_by_regex(struct mcs_master *m, const char *regex,
			       bool force, uint64_t *count);

/* ---- filesystem support ------------------------------------------------ */

/** Stat: no lease taken; replica_list describes every replica. dir: when
 *  key is no object, stat the directory key/ (is_dir). */
int mcs_master_stat(struct mcs_master *m, const char *key, bool dir,
		    Mcrpc__StatResponse **out);
/** List one page (limit 0: the master's 1000); strings may be NULL;
 *  dirs: directory records too. */
int mcs_master_list(struct mcs_master *m, const char *prefix,
		    const char *delimiter, const char *start_after,
		    unsigned limit, bool dirs, Mcrpc__ListResponse **out);
/** SetAttr (mask: MOONCAKE_SET_*); (*out)->attr the stored attributes. */
int mcs_master_setattr(struct mcs_master *m, const char *key, bool dir,
		       unsigned mask, const Mcrpc__Attr *attr,
		       Mcrpc__StatResponse **out);
/** Mkdir of path (ending in '/'); attr may be NULL. */
int mcs_master_mkdir(struct mcs_master *m, const char *path,
		     const Mcrpc__Attr *attr);
/** Rmdir of path; -ENOTEMPTY (the master's -700) when entries are under it. */
int mcs_master_rmdir(struct mcs_master *m, const char *path);
/** LeaseRenew / LeaseRelease of holds; results[i] per hold id. */
int mcs_master_lease_renew(struct mcs_master *m, const uint64_t *hold_ids,
			   size_t n, int *results);
int mcs_master_lease_release(struct mcs_master *m, const uint64_t *hold_ids,
			     size_t n, int *results);
/** Rename; no_replace: -EEXIST when `to` exists; prefix: a directory
 *  rename (RenameRequest.prefix); version: from is to's next version
 *  (RenameRequest.version). */
int mcs_master_rename(struct mcs_master *m, const char *from, const char *to,
		      bool no_replace, bool prefix, bool version);
/**
 * Watch the change feed from (epoch, after); long-polls up to wait_ms
 * (at most 30000) on a connection whose timeout covers the wait.
 */
int mcs_master_watch(struct mcs_master *m, uint64_t epoch, uint64_t after,
		     unsigned wait_ms, unsigned max,
		     Mcrpc__WatchResponse **out);
/** Ends long polls under way now and refuses later ones (-ECANCELED). */
void mcs_master_watch_stop(struct mcs_master *m);

#endif
