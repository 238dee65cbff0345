/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file store.h
 * The Mooncake Store client (libmooncake): put and get objects in the pool
 * that the master places in the memory segments clients contribute. Every
 * node uses it: the filesystem daemon, mooncake_client, the `mooncake` CLI,
 * the Python package and connectors that link it directly (the fast path).
 *
 * The API is upstream's store_c.h (mooncake_store_*) with the same argument
 * orders and return conventions, so code written against upstream keeps
 * working:
 * - Functions return 0 or a negative *upstream store code* (-200
 *   NO_AVAILABLE_HANDLE, -704 OBJECT_NOT_FOUND, -706 OBJECT_HAS_LEASE, -800
 *   TRANSFER_FAIL, -900 RPC_FAIL, ...; see docs/errors.md), never errno.
 * - get_into returns the byte count (>= 0) or a negative code; is_exist
 *   returns 1, 0 or a negative code.
 * - A put of a key that already holds a complete object succeeds without
 *   overwriting it (objects are immutable; remove first to replace).
 * - mooncake_store_strerror() names any code in words.
 * - A NULL handle, a NULL or empty key, NULL arrays and a replicate
 *   config whose replica_num is not 1 to MOONCAKE_MAX_REPLICAS are -600
 *   INVALID_PARAMS (logged as a warning naming the value); a master that
 *   does not answer is -900 RPC_FAIL, one that answers too late -901
 *   RPC_TIMEOUT. Keys are NUL-terminated: bindings that hold keys as
 *   byte strings (Python) refuse a key with a NUL byte with -600 rather
 *   than pass its prefix.
 * - Calls before a successful setup or after close return -1010
 *   UNAVAILABLE_IN_CURRENT_STATUS (health_check: 1, get_hostname: NULL).
 *   A failed setup may be retried; a closed handle stays closed.
 *
 * Lifecycle: create -> setup (joins the pool: contributes a segment of
 * global_segment_size bytes when > 0, registers a local staging buffer of
 * local_buffer_size bytes) -> any calls -> close/destroy. A handle is
 * thread-safe: any number of threads may call into it at once.
 *
 * Memory: put/get copy through the staging buffer (values up to
 * local_buffer_size). The zero-copy forms (put_from, get_into, batch_*)
 * need memory registered with register_buffer(); unregistered memory is
 * refused with -600 INVALID_PARAMS.
 *
 * Segments: a contributed segment is unnamed shared memory (a memfd) that
 * same-host clients map through this process's descriptor; it dies with
 * the process (kill -9 included) and leaves nothing in /dev/shm. With
 * segment_name set (configuration or MOONCAKE_SEGMENT_NAME) it is kept
 * instead, as /dev/shm/mooncake.seg.<name> with a persistent id in its
 * first page: a process that restarts under the same name (after kill -9,
 * say) re-adopts it and the objects in it survive; setup fails with -200
 * when /dev/shm cannot hold it. Either way setup() returns once the
 * memory is reserved, while its pages fault in in the background. close()
 * leaves the pool cleanly: the segment is unmounted at the master and its
 * memory freed.
 *
 * Configuration: setup's arguments win; NULL or "" strings and
 * MOONCAKE_SIZE_UNSET sizes (a size of 0 means none, as upstream) fall back
 * to the JSON file named by MOONCAKE_CONFIG_PATH, then to MOONCAKE_* variables
 * (docs/config.md, "Store client"), then to the defaults: "localhost",
 * P2PHANDSHAKE, no segment, no staging buffer, "tcp", master
 * 127.0.0.1:50051. The file may hold keys of other programs (ignored).
 */
#ifndef MOONCAKE_STORE_H
#define MOONCAKE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef MOONCAKE_API
#define MOONCAKE_API __attribute__((visibility("default")))
#endif

typedef struct mooncake_store *mooncake_store_t;

/* A size argument of setup() left to the configuration file and the
 * environment (0 means none, as upstream). */
#define MOONCAKE_SIZE_UNSET UINT64_MAX

/* The most replicas of one object (the master's MST_MAX_REPLICAS). */
#define MOONCAKE_MAX_REPLICAS 8

/* Upstream's ReplicateConfig for the C API. */
typedef struct mooncake_replicate_config {
	size_t replica_num; /* 1 to MOONCAKE_MAX_REPLICAS, else -600 */
	bool with_soft_pin;
	bool with_hard_pin;
	const char **preferred_segments; /* segment names, tried first */
	size_t preferred_segments_count;
	/* Upstream's group_ids: none (count 0), one for every key of the
	 * call, or one per key (NULL or "": that key in no group); another
	 * count is -600. Objects of one group are evicted together, and a
	 * read of one refreshes the others' leases (docs/design.md,
	 * "Groups"). Ids up to 1024 bytes. */
	const char **group_ids;
	size_t group_ids_count;
} mooncake_replicate_config_t;

/** Allocate an unconnected handle; NULL when out of memory. */
MOONCAKE_API mooncake_store_t mooncake_store_create(void);

/** close() if needed, then free the handle. */
MOONCAKE_API void mooncake_store_destroy(mooncake_store_t store);

/**
 * Join the pool.
 * @param local_hostname   this node's name, "host" or "host:port" (the
 *                         transfer engine's segment name; the port is its
 *                         RPC port). Without a port, a free one in
 *                         12300..14300 is added, as upstream does; with
 *                         P2PHANDSHAKE the name becomes "ip:rpcport".
 * @param metadata_server  "http://h:p/metadata", "etcd://h:p" or
 *                         "P2PHANDSHAKE"
 * @param global_segment_size  bytes contributed to the pool (0: none;
 *                         else at least 1 MiB, smaller is -600)
 * @param local_buffer_size    staging buffer for put/get (0: none)
 * @param protocol         "tcp" ("rdma": -1012 NOT_SUPPORTED until built)
 * @param device_name      RDMA devices ("" for TCP)
 * @param master_server_addr  "host:port" of mooncake_master
 */
MOONCAKE_API int
mooncake_store_setup(mooncake_store_t store, const char *local_hostname,
		     const char *metadata_server, uint64_t global_segment_size,
		     uint64_t local_buffer_size, const char *protocol,
		     const char *device_name, const char *master_server_addr);

/**
 * This handle's tenant (upstream's tenant_id), before setup: its keys are
 * the pool's ".tenants/<tenant_id>/<key>", apart from every other
 * tenant's (docs/design.md "Tenants"). NULL leaves it to the configuration
 * (tenant_id, MOONCAKE_TENANT_ID); "" and "default" are the default
 * tenant. -600 for a bad name (1-64 of [A-Za-z0-9_.-], not "." or ".."),
 * -1010 after setup.
 */
MOONCAKE_API int mooncake_store_set_tenant(mooncake_store_t store,
					   const char *tenant_id);

/** 0 healthy, 1 not set up or closed, 2 master unreachable. */
MOONCAKE_API int mooncake_store_health_check(mooncake_store_t store);

/** Leave the pool: unmount the segment (the master drops its replicas),
 *  free memory. Waits for calls in progress. Idempotent; returns 0. */
MOONCAKE_API int mooncake_store_close(mooncake_store_t store);

/* NULL config means one replica, no pins. */
MOONCAKE_API int mooncake_store_put(mooncake_store_t store, const char *key,
				    const void *value, size_t size,
				    const mooncake_replicate_config_t *config);
MOONCAKE_API int
mooncake_store_put_from(mooncake_store_t store, const char *key,
			const void *buffer, size_t size,
			const mooncake_replicate_config_t *config);
/** Copy the object into buffer (registered); bytes copied or < 0.
 *  A buffer smaller than the object is -600 and nothing is copied. A
 *  replica that fails is retried on the object's next replica (-800 when
 *  none is left); a read that outlived its lease is -707 LEASE_EXPIRED. */
MOONCAKE_API int64_t mooncake_store_get_into(mooncake_store_t store,
					     const char *key, void *buffer,
					     size_t size);
/** Copy into any memory (through the staging buffer); as get_into. */
MOONCAKE_API int64_t mooncake_store_get(mooncake_store_t store, const char *key,
					void *buffer, size_t size);

/** results[i] = 0 or a code per key. Returns 0 when every call was made
 *  (per-key outcomes in results), < 0 when none was; count 0 is 0. */
MOONCAKE_API int
mooncake_store_batch_put_from(mooncake_store_t store, const char **keys,
			      void **buffers, const size_t *sizes, size_t count,
			      const mooncake_replicate_config_t *config,
			      int *results);
/** results[i] = bytes read or a code per key. */
MOONCAKE_API int mooncake_store_batch_get_into(mooncake_store_t store,
					       const char **keys,
					       void **buffers,
					       const size_t *sizes,
					       size_t count, int64_t *results);

/**
 * Gather/scatter forms: object i is the concatenation of n_parts[i] parts;
 * parts of all objects are flattened in key order into buffers/sizes.
 */
MOONCAKE_API int mooncake_store_batch_put_from_multi(
	mooncake_store_t store, const char **keys, size_t count, void **buffers,
	const size_t *sizes, const size_t *n_parts,
	const mooncake_replicate_config_t *config, int *results);
MOONCAKE_API int mooncake_store_batch_get_into_multi(
	mooncake_store_t store, const char **keys, size_t count, void **buffers,
	const size_t *sizes, const size_t *n_parts, int64_t *results);

/** 1 exists, 0 not, < 0 error. Grants a lease, as upstream. */
MOONCAKE_API int mooncake_store_is_exist(mooncake_store_t store,
					 const char *key);
/** results[i] = 1, 0 or a code. */
MOONCAKE_API int mooncake_store_batch_is_exist(mooncake_store_t store,
					       const char **keys, size_t count,
					       int *results);
/** sizes[i] = size or a code per key, in one RPC. Takes no lease. */
MOONCAKE_API int mooncake_store_batch_get_size(mooncake_store_t store,
					       const char **keys, size_t count,
					       int64_t *sizes);
/** Object size or a negative code. Takes no lease. */
MOONCAKE_API int64_t mooncake_store_get_size(mooncake_store_t store,
					     const char *key);

MOONCAKE_API int mooncake_store_remove(mooncake_store_t store, const char *key,
				       bool force);
/** results[i] = 0 or a code. */
MOONCAKE_API int mooncake_store_batch_remove(mooncake_store_t store,
					     const char **keys, size_t count,
					     bool force, int *results);
/** Number removed (>= 0) or a code; pattern is PCRE2 syntax. */
MOONCAKE_API int64_t mooncake_store_remove_by_regex(mooncake_store_t store,
						    const char *pattern,
						    bool force);
MOONCAKE_API int64_t mooncake_store_remove_all(mooncake_store_t store,
					       bool force);

/** Make memory usable by the zero-copy calls. A registered buffer it
 *  overlaps was freed without unregistering (live buffers never overlap):
 *  its registration is replaced, unless a transfer still uses it (-600).
 *  A range wholly inside one registration (a view of a live buffer) keeps
 *  that registration and is 0, except with rdma (replaced, as above).
 *  Unregister takes the start address: unknown is -600, in use by a
 *  transfer -714 OBJECT_REPLICA_BUSY. */
MOONCAKE_API int mooncake_store_register_buffer(mooncake_store_t store,
						void *buffer, size_t size);
MOONCAKE_API int mooncake_store_unregister_buffer(mooncake_store_t store,
						  void *buffer);

/** This client's segment name (the transfer engine's); NULL before setup
 *  and after close. The string lives until destroy. */
MOONCAKE_API const char *mooncake_store_get_hostname(mooncake_store_t store);

/** Replica descriptors of a key (no data moved; grants a lease). */
typedef struct mooncake_replica_desc {
	char endpoint[256]; /* transfer engine segment name */
	uint64_t address;
	uint64_t size;
	bool is_memory; /* always true today: memory replicas only */
	bool same_host; /* readable by memcpy from shared memory */
} mooncake_replica_desc_t;
/** Up to max descriptors into out; returns how many exist or a code. */
MOONCAKE_API int mooncake_store_get_replica_desc(mooncake_store_t store,
						 const char *key,
						 mooncake_replica_desc_t *out,
						 size_t max);

/** Words for a code returned by this API ("OBJECT_NOT_FOUND: ..."). */
MOONCAKE_API const char *mooncake_store_strerror(int code);

/* Timeouts of one handle, in ms; 0 keeps the current value. Defaults:
 * MC_RPC_TIMEOUT_MS (5000) and MC_TRANSFER_TIMEOUT_MS (30000). May be
 * called before setup (the transfer timeout then also becomes the engine's
 * per-request timeout). After setup the transfer timeout bounds how long a
 * call waits before failing a transfer with -800; the call still returns
 * only once the engine has ended its requests (its per-request timeout),
 * so no transfer touches the caller's buffer after the call returned. */
MOONCAKE_API int mooncake_store_set_timeouts(mooncake_store_t store,
					     unsigned rpc_ms,
					     unsigned transfer_ms);

/* Ours: what this client's transfer engine moved through one transport
 * since setup. Reads and writes are the transfers this client made; served
 * bytes are what peers moved through tcp from or to this client's memory
 * (a same-host peer's shm copies cost this client nothing, so it sees no
 * count of them). */
typedef struct mooncake_transfer_stats {
	uint64_t read_bytes, write_bytes;
	uint64_t read_requests, write_requests;
	uint64_t failed_requests;
	uint64_t served_bytes;
	/* Held now (rdma: queue pairs, memory regions, work requests posted
	 * and not completed; 0 for the others). */
	uint64_t connections, registrations, inflight;
	/* Requests moved on the calling thread (tcp: a get or put to one
	 * member over an idle connection), not by the engine's threads. */
	uint64_t caller_requests;
} mooncake_transfer_stats_t;

/** transport: "tcp", "rdma", "shm" or "local". 0; -600 for another name
 *  (rdma in a build without it) or a NULL argument; -1010 before setup
 *  and after close. */
MOONCAKE_API int mooncake_store_transfer_stats(mooncake_store_t store,
					       const char *transport,
					       mooncake_transfer_stats_t *out);

/* Ours: the location cache (docs/design.md, "One round trip per get"):
 * keys cached now; lookups that found a usable entry (read without asking
 * the master) and that did not; hits whose read failed or outlasted the
 * lease (then asked of the master); cached keys read and renewed at the
 * master (per key and round: the reads count for eviction and the lease
 * is extended); keys dropped because
 * the master no longer had them, or had another version. */
typedef struct mooncake_location_cache_stats {
	uint64_t keys, hits, misses, stale, touched, dropped;
} mooncake_location_cache_stats_t;

/** 0 (all zero with the cache off: location_cache_keys 0); -600 for a
 *  NULL out; -1010 before setup and after close. */
MOONCAKE_API int
mooncake_store_location_cache_stats(mooncake_store_t store,
				    mooncake_location_cache_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif
