/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file te_so.h
 * The transfer engine as libmooncake.so exports it, for bindings that load
 * the library at run time (python/mooncake/engine.py, with ctypes).
 *
 * Each mooncake_te_X is te_X of include/mooncake/te.h with the same
 * contract (errors: 0 or a negative code of mc_err.h; ownership; thread
 * safety), except that structures whose layout may grow are replaced by
 * plain arguments, so a binding never mirrors a libte structure:
 * - mooncake_te_engine_create takes the te_engine_cfg fields it needs;
 * - mooncake_te_batch_submit_arrays takes parallel arrays instead of
 *   struct te_request (one opcode and one target for the whole call);
 * - mooncake_te_batch_status and mooncake_te_segment_buffers return
 *   their fields through pointers and arrays.
 * Strings returned malloc'd (notifications, topology) are freed with
 * mooncake_te_free.
 */
#ifndef MOONCAKE_TE_SO_H
#define MOONCAKE_TE_SO_H

#include <stddef.h>
#include <stdint.h>

#include "mooncake/te.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef MOONCAKE_API
#define MOONCAKE_API __attribute__((visibility("default")))
#endif

/** te_engine_create with cfg {metadata, local_server_name,
 *  ip_or_host_name, rpc_port, transport, rdma_devices}; the other fields
 *  0 (defaults: timeout and lanes from the environment,
 *  MOONCAKE_AUTH_TOKEN_FILE). */
MOONCAKE_API int
mooncake_te_engine_create(const char *metadata, const char *local_server_name,
			  const char *ip_or_host_name, int rpc_port,
			  const char *transport, const char *rdma_devices,
			  struct te_engine **out, char *err, size_t errlen);
MOONCAKE_API void mooncake_te_engine_destroy(struct te_engine *eng);
/** te_rdma_check(): 0 when rdma can serve, TE_RDMA_FALLBACK (1) when tcp
 *  serves as the user allows, else MC_ENOTSUPPORTED with err. */
MOONCAKE_API int mooncake_te_rdma_check(const char *devices, char *err,
					size_t errlen);
/** te_metadata_check(): 0 when the metadata connection string's form is
 *  understood, else a code with err (contacts nobody). */
MOONCAKE_API int mooncake_te_metadata_check(const char *metadata, char *err,
					    size_t errlen);
MOONCAKE_API const char *mooncake_te_engine_name(const struct te_engine *eng);
MOONCAKE_API const char *
mooncake_te_engine_rpc_address(const struct te_engine *eng);

/** te_register; location NULL is "*". */
MOONCAKE_API int mooncake_te_register(struct te_engine *eng, void *addr,
				      size_t len, const char *location,
				      int remote_accessible);
MOONCAKE_API int mooncake_te_unregister(struct te_engine *eng, void *addr);
MOONCAKE_API int mooncake_te_mem_alloc(struct te_engine *eng, size_t len,
				       const char *name, void **out);
MOONCAKE_API void mooncake_te_mem_free(struct te_engine *eng, void *addr);

MOONCAKE_API int mooncake_te_segment_open(struct te_engine *eng,
					  const char *name,
					  struct te_segment **out, char *err,
					  size_t errlen);
MOONCAKE_API void mooncake_te_segment_close(struct te_segment *seg);
/** te_segment_buffers: addresses and lengths of up to max published
 *  buffers, in the segment's order; returns how many it has. */
MOONCAKE_API int mooncake_te_segment_buffers(struct te_segment *seg,
					     uint64_t *addrs, uint64_t *lens,
					     unsigned max);

MOONCAKE_API int mooncake_te_batch_create(struct te_engine *eng,
					  unsigned capacity,
					  struct te_batch **out);
/**
 * te_batch_submit of n requests {opcode, local[i], target, remote[i],
 * len[i]}, in one call: when any is refused none is started. -EINVAL for
 * an opcode other than TE_READ/TE_WRITE or n == 0, -ENOMEM.
 */
MOONCAKE_API int mooncake_te_batch_submit_arrays(struct te_batch *b, int opcode,
						 struct te_segment *target,
						 void *const *local,
						 const uint64_t *remote,
						 const uint64_t *len,
						 unsigned n);
/**
 * The same requests through te_batch_transfer: started and waited for up
 * to timeout_ms in one call, so the engine may move them on this thread
 * (tcp: one peer, an idle connection). Returns what the submission
 * returns (a refusal starts none); the outcome is then
 * mooncake_te_batch_result's (which returns at once once all ended).
 */
MOONCAKE_API int
mooncake_te_batch_transfer_arrays(struct te_batch *b, int opcode,
				  struct te_segment *target, void *const *local,
				  const uint64_t *remote, const uint64_t *len,
				  unsigned n, int timeout_ms);
/** te_batch_status, its fields through the pointers (any may be NULL). */
MOONCAKE_API int mooncake_te_batch_status(struct te_batch *b, unsigned idx,
					  int *status, uint64_t *transferred,
					  int *error);
/**
 * Wait (te_batch_wait) for the first n requests, then 0 when all of them
 * COMPLETED, else the error of the first that did not (-ETIMEDOUT for one
 * that timed out or is still WAITING at timeout_ms).
 */
MOONCAKE_API int mooncake_te_batch_result(struct te_batch *b, unsigned n,
					  int timeout_ms);
MOONCAKE_API int mooncake_te_batch_reset(struct te_batch *b);
MOONCAKE_API int mooncake_te_batch_destroy(struct te_batch *b);

MOONCAKE_API int mooncake_te_notify(struct te_engine *eng,
				    struct te_segment *target, const char *name,
				    const char *msg);
MOONCAKE_API int mooncake_te_notifications(struct te_engine *eng, char **names,
					   char **msgs, int max);
MOONCAKE_API char *mooncake_te_topology_json(void);
/** te_counters(): what the engine moved through one transport ("tcp",
 *  "rdma", "shm", "local") and the resources it holds; -ENOENT for a
 *  transport this build lacks. */
MOONCAKE_API int mooncake_te_counters(struct te_engine *eng,
				      const char *transport,
				      struct te_counters *out);
/** free() of a string the calls above returned. */
MOONCAKE_API void mooncake_te_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
