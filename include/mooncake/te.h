/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file te.h
 * The transfer engine: batched reads and writes between registered memory
 * of processes on one host or many.
 *
 * Concepts (upstream Mooncake's, with our conventions):
 * - An engine is one process's endpoint, named by its local server name and
 *   found by peers through a metadata service (`http://host:port/metadata`,
 *   `etcd://h1:2379,h2:2379` or a scheme-less etcd list, with etcd's user,
 *   password file and TLS files as `?user=...&password_file=...` options
 *   or MC_ETCD_* variables (docs/config.md, "etcd metadata"), or
 *   `P2PHANDSHAKE` for no service: peers ask each other directly).
 * - Local memory is registered with a location tag ("cpu:0", "cuda:1", "*")
 *   and a remote-accessible flag; remote-accessible buffers are published
 *   in the engine's segment descriptor so peers may target them.
 * - A segment is a peer (or this engine itself) opened by name. Target
 *   addresses are the peer's virtual addresses, as upstream's.
 * - A batch holds up to `capacity` requests; requests run asynchronously
 *   and each has a status (WAITING, COMPLETED, FAILED, TIMEOUT) and a count
 *   of bytes transferred. te_batch_wait() blocks without spinning.
 *
 * Transports: "tcp" (upstream's TCP framing, version 2) between any two
 * engines, "shm" between engines on one host and network namespace for
 * memory allocated with te_mem_alloc(), and "local" (memcpy) when the
 * target is this engine. The engine picks the best one per request unless
 * te_engine_cfg.transport pins one. This build has no RDMA transport:
 * "rdma" is refused with MC_ENOTSUPPORTED.
 *
 * Errors: 0 or a negative code (include/mooncake/mc_err.h): -EINVAL,
 * -ENOMEM, -EBUSY, -E2BIG, -ENOENT, -ETIMEDOUT, MC_ENOTREG (an address
 * outside registered memory), MC_EMETACONFLICT (the name is held by a live
 * peer), MC_ENOTSUPPORTED (a CUDA pointer, a transport not built). Where a
 * function takes `err`, a message naming the cause is written there.
 *
 * Ownership: strings and arrays passed in are borrowed for the call.
 * Registered memory stays owned by the caller and must outlive every
 * request that uses it. Handles are freed only by their destroy/close.
 *
 * Thread safety: every function may be called from any thread; a batch may
 * be polled from one thread while another submits to it.
 *
 * fork(): an engine made before a fork is its parent's in the child (its
 * threads are not there; its sockets and memory are shared). Every call on
 * it, its batches and segments answers MC_EFORKED there, and
 * te_engine_destroy(), te_segment_close() and te_mem_free() only forget
 * it: the parent's engine, connections and metadata entry go on. An
 * engine made in the child works.
 */
#ifndef MOONCAKE_TE_H
#define MOONCAKE_TE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct te_engine;
struct te_segment;
struct te_batch;

#define TE_ERR_LEN 512

struct te_engine_cfg {
	/* Metadata connection string (see above). Required. */
	const char *metadata;
	/*
	 * This engine's name, unique in the cluster: "host" or "host:port".
	 * With P2PHANDSHAKE the name becomes "host:rpcport".
	 */
	const char *local_server_name;
	/* Address to bind and advertise; NULL: the host part of the name. */
	const char *ip_or_host_name;
	/* RPC (handshake) port; 0: a free one in MC_MIN/MAX_RPC_PORT. */
	int rpc_port;
	/* NULL or "" (auto), "tcp", "shm", "local" or "rdma". */
	const char *transport;
	/* Per-request timeout in ms; 0: MC_TRANSFER_TIMEOUT_MS or 30000. */
	unsigned timeout_ms;
	/* TCP connections per peer; 0: MC_TCP_LANES_PER_PEER or 4. */
	unsigned tcp_lanes;
	/*
	 * The pool's token file (mode 0600): requests to an HTTP metadata
	 * service are signed with it (docs/wire-protocol.md). NULL: the
	 * MOONCAKE_AUTH_TOKEN_FILE environment variable; "": none.
	 */
	const char *auth_token_file;
	/*
	 * With transport "rdma": upstream's device_name, a comma list of the
	 * RDMA devices to use; NULL or "": every device found.
	 */
	const char *rdma_devices;
};

enum te_opcode {
	TE_READ = 0, /* copy target -> local */
	TE_WRITE = 1, /* copy local -> target */
};

enum te_status_code {
	TE_WAITING = 0,
	TE_COMPLETED = 4,
	TE_TIMEOUT = 5,
	TE_FAILED = 6,
};

struct te_request {
	enum te_opcode opcode;
	void *local; /* inside registered local memory */
	struct te_segment *target; /* from te_segment_open() */
	uint64_t target_addr; /* the target's virtual address */
	uint64_t length;
	/* NULL: any memory the target registered. Else an owner tag
	 * (te_register_owned), read during the submitting call only: the
	 * request ends TE_FAILED with MC_ESEGMOVED, moving nothing, when
	 * its range lies in a buffer the target registered for another
	 * owner (the engine name now belongs to another process than the
	 * one that placed the address). */
	const char *owner;
};

struct te_status {
	enum te_status_code status;
	uint64_t transferred;
	int error; /* 0, or the code that failed it */
};

/* Counters of one transport; monotonic since the engine started. */
struct te_counters {
	uint64_t read_bytes, write_bytes;
	uint64_t read_requests, write_requests;
	uint64_t failed_requests;
	uint64_t served_bytes; /* bytes this engine served to peers */
	/* Resources the transport holds now (0 where it keeps none): rdma's
	 * queue pairs, memory regions and work requests posted and not yet
	 * completed; tcp's connections peers have open to this engine (its
	 * own to peers not counted); for leak checks. */
	uint64_t connections, registrations, inflight;
	/* Requests moved on the thread that submitted them (tcp, through
	 * te_batch_transfer), not by the transport's own threads. */
	uint64_t caller_requests;
};

/**
 * Create an engine: bind its RPC and data listeners, publish
 * mooncake/rpc_meta/<name> and mooncake/ram/<name>. A name whose rpc_meta
 * entry belongs to a peer that no longer answers is taken over; a live
 * holder makes this fail with MC_EMETACONFLICT.
 */
int te_engine_create(const struct te_engine_cfg *cfg, struct te_engine **out,
		     char *err, size_t errlen);

/**
 * Whether te_engine_create() would understand the metadata connection
 * string (its scheme and form), without contacting the service: 0, or a
 * code with the reason in err.
 */
int te_metadata_check(const char *metadata, char *err, size_t errlen);

/** Remove this engine's metadata entries and free it. Every batch must
 *  have been destroyed first (so no request is in flight), and every
 *  segment closed. */
void te_engine_destroy(struct te_engine *eng);

/** The engine's segment name (with P2PHANDSHAKE, "host:rpcport"). */
const char *te_engine_name(const struct te_engine *eng);

/** "ip:port" of the RPC listener. */
const char *te_engine_rpc_address(const struct te_engine *eng);

/**
 * Register [addr, addr+len) under a location tag. Overlapping an existing
 * registration is -EEXIST. CUDA device memory (the driver, loaded at run
 * time, says which pointers are; the tag then becomes "cuda:N") is
 * registered too: requests from it and peers' requests for it are staged
 * through pinned host memory (docs/design.md, "GPU memory"). A "cuda:"
 * or "gpu:" tag where no CUDA driver can be loaded is MC_ENOTSUPPORTED.
 * With remote_accessible, the buffer is published and peers may target it.
 */
int te_register(struct te_engine *eng, void *addr, size_t len,
		const char *location, bool remote_accessible);

/** The longest owner tag (te_register_owned), with its NUL. */
#define TE_OWNER_LEN 64

/**
 * te_register() with an owner tag on the buffer (1 to TE_OWNER_LEN - 1
 * bytes, else -EINVAL; NULL or "": none), published with it as
 * "mc_owner". A request naming an owner (te_request.owner) does not
 * reach buffers of another tag: a store tags its segment's memory with
 * the segment's id, so that an address the master placed in one
 * process's segment is never read or written in the memory of another
 * process that took the same engine name after it (docs/design.md, "The
 * owner of an address"). For a peer the check is against its descriptor
 * (buffers without a tag, from engines before tags, are not held to it;
 * a descriptor fetched over a second before is fetched again once before
 * a refusal); this engine's own memory needs a covering buffer of that
 * tag.
 */
int te_register_owned(struct te_engine *eng, void *addr, size_t len,
		      const char *location, bool remote_accessible,
		      const char *owner);

/** Unregister the buffer starting at addr: -ENOENT, or -EBUSY while
 *  requests of this engine use it. */
int te_unregister(struct te_engine *eng, void *addr);

/**
 * Write this engine's two metadata entries again (its RPC address under
 * its name, and its segment descriptor): for a metadata service that may
 * have lost them, e.g. one that restarted keeping nothing (the master's
 * embedded service with `--db_path memory`), after which peers could no
 * longer find this engine. Entries still there are rewritten unchanged.
 * 0; MC_EMETACONFLICT when a live engine at another address holds the
 * name meanwhile (nothing is changed then); or the metadata backend's
 * error. Nothing to do with P2PHANDSHAKE. Thread-safe.
 */
int te_publish_again(struct te_engine *eng);

/**
 * End every data connection peers opened to this engine before the call,
 * and return once none of them can move more bytes into our memory: a
 * WRITE a peer sent on one lands before it returns or never (bytes held
 * up in the network and sent again later find the connection gone; the
 * listener is replaced by a new socket on the same port, so connections
 * not accepted or not fully made yet are gone too). A peer's next request may meet its connection ended
 * and fail with the connection's error; later ones reconnect. For a pool
 * member whose master forgot what it placed (a restart, a takeover):
 * called before it re-mounts, so a dead run's late bytes cannot land on
 * objects placed afresh (docs/design.md "Writes into placed space").
 * Covers the tcp transport; same-host peers (shm) copy into our memory
 * themselves and rdma writes land through the NIC: neither is stopped.
 * 0, or -ETIMEDOUT when a connection's thread was still inside a request
 * after timeout_ms (it ends at its own deadline, the engine's timeout)
 * or no listener could be made again (the engine keeps trying; a
 * listener that had to take another port is published again).
 * Thread-safe.
 */
int te_fence_inbound(struct te_engine *eng, int timeout_ms);

/**
 * The CUDA device whose memory p points into, or -1 (host memory, managed
 * memory, or no CUDA driver in this process: see te_register). Thread-safe.
 */
int te_mem_device(const void *p);

/**
 * Copy len bytes between any two addresses, either of which may be CUDA
 * device memory (then the driver copies, on the device's primary context,
 * and the call returns once the bytes are there); memcpy otherwise. The
 * ranges must not overlap. 0, or a negative code (-EIO: the driver
 * failed, logged). Thread-safe.
 */
int te_mem_copy(void *dst, const void *src, size_t len);

/** What a te_mem_alloc() file holds past the memory (its tag page). */
#define TE_MEM_EXTRA 4096u

/**
 * Allocate len bytes of zeroed memory a peer on the same host can map, so
 * transfers to it use the "shm" transport. Register it with te_register()
 * like any memory.
 *
 * Unnamed (name NULL): a memfd, in no filesystem, gone with the last
 * process that maps it (kill -9 included); peers of the same user (or
 * root) in our pid namespace open it through /proc/<pid>/fd/<n>. Where
 * memfd_create is refused, private memory that peers read over tcp.
 *
 * Named: /dev/shm/mooncake.<name> ('/' becomes '_'), kept after the
 * process so the next one of that name finds its bytes. Its blocks are
 * reserved before it is mapped: -ENOSPC when /dev/shm cannot hold
 * len + TE_MEM_EXTRA more bytes (a file of another size is resized),
 * -ENOMEM when the process's memory cgroup (a container's limit) has not
 * that much room left below its limit (the blocks are charged to it as
 * they are reserved: past the limit the process would be killed). An
 * existing file of another user (or with several names) is -EPERM.
 *
 * Either file is TE_MEM_EXTRA bytes longer than the memory: that page
 * holds a tag drawn for the allocation, which same-host peers check
 * before they map the file (docs/design.md).
 *
 * Returns once the memory is reserved; its pages are faulted in by
 * background threads meanwhile (te_mem_wait()). No fault can fail with a
 * signal, before or after. Thread-safe.
 * @param name  persistent name to re-adopt after a restart, or NULL
 */
int te_mem_alloc(struct te_engine *eng, size_t len, const char *name,
		 void **out);
void te_mem_free(struct te_engine *eng, void *addr);

/** Wait until the background fault-in of the allocation starting at addr
 *  is done: 0, or -ENOENT when addr does not start one. */
int te_mem_wait(struct te_engine *eng, void *addr);

/**
 * Remove the /dev/shm name of the allocation starting at addr, so that a
 * persistent allocation is not re-adopted by a later process and its memory
 * is freed once unmapped (te_mem_free) by everyone. -ENOENT when addr is not
 * the start of a te_mem_alloc() allocation.
 */
int te_mem_unlink(struct te_engine *eng, void *addr);

/** Resolve a peer (or this engine) by segment name. */
int te_segment_open(struct te_engine *eng, const char *name,
		    struct te_segment **out, char *err, size_t errlen);

void te_segment_close(struct te_segment *seg);

/* A buffer a segment publishes. */
struct te_buffer_info {
	uint64_t addr, length;
	char location[64];
	bool shareable; /* mappable by engines on the same host (shm) */
};

/** Copy up to max of the segment's published buffers; returns how many
 *  it has (which may exceed max). */
int te_segment_buffers(struct te_segment *seg, struct te_buffer_info *out,
		       unsigned max);

/**
 * Topology as JSON: {"numa_nodes": [0, ...], "nics": [{"name": "eth0",
 * "numa_node": -1, "speed_mbps": N}, ...]} from sysfs, and where RDMA
 * devices exist "rdma": {"devices": [{"name", "numa_node", "port",
 * "active", "link_layer", "gid_index", "gid"}], "priority_matrix":
 * upstream's {"cpu:0": [[preferred], [available]], ...}}. malloc'd; the
 * caller frees it. NULL when out of memory.
 */
char *te_topology_json(void);

/** te_rdma_check(): tcp serves a request for rdma, as the user allows. */
#define TE_RDMA_FALLBACK 1

/**
 * Can the rdma transport serve here? 0 when it can: this build has it
 * and discovery finds a device (devices: upstream's device_name list,
 * NULL or "" for any; MC_TE_FILTERS and friends apply). Otherwise
 * TE_RDMA_FALLBACK when tcp is to serve instead because the user allows
 * it (MC_FORCE_TCP, upstream's, or MC_RDMA_FALLBACK_TCP=1; a warning says
 * so), or MC_ENOTSUPPORTED with err saying what is missing (no RDMA
 * device on this host, a device named in devices that is not there, or
 * no rdma transport in this build) and how to fall back. MC_FORCE_TCP
 * always means the fallback (upstream's meaning).
 */
int te_rdma_check(const char *devices, char *err, size_t errlen);

/** NUMA node holding the page at addr (-1 when unknown). */
int te_mem_numa_node(const void *addr);

/** Create a batch that holds up to capacity requests. */
int te_batch_create(struct te_engine *eng, unsigned capacity,
		    struct te_batch **out);

/**
 * Writes submitted through b from now on start only within window_ms of
 * their submission: a piece of a WRITE (a tcp slice, a GPU buffer's
 * staged chunk) that has not started by then, that would go again on
 * another connection after its own broke, or whose connection is still
 * being made, ends FAILED with -ECONNABORTED instead (what started is not
 * undone, and a piece that started may still be sending). For writes
 * into memory that may be given to others a while after the writer
 * stopped being allowed there (the store's puts, docs/design.md "Writes
 * into placed space"), so that no piece starts late. 0 (the default):
 * until the engine's timeout. Reads are not affected. Applies to tcp;
 * shm copies at once, rdma does not look at it. Not thread-safe against
 * submissions to b.
 */
void te_batch_set_write_window(struct te_batch *b, unsigned window_ms);

/**
 * Start n requests. More than the batch has room for is -E2BIG (nothing
 * started); a local address outside registered memory is MC_ENOTREG.
 * A request the transport refuses later ends FAILED with its error.
 */
int te_batch_submit(struct te_batch *b, const struct te_request *reqs,
		    unsigned n);

/**
 * te_batch_submit() then te_batch_wait(b, timeout_ms), for a caller that
 * waits at once: the engine may then move the bytes on the calling
 * thread (over TCP, requests to one peer on an idle connection: no
 * hand-off to the engine's threads, the small requests in one write).
 * Same results and errors as the two calls.
 */
int te_batch_transfer(struct te_batch *b, const struct te_request *reqs,
		      unsigned n, int timeout_ms);

/** Status of request idx (in submission order). */
int te_batch_status(struct te_batch *b, unsigned idx, struct te_status *st);

/** Block until every submitted request ended or timeout_ms passed (-1:
 *  forever); 0 or -ETIMEDOUT. */
int te_batch_wait(struct te_batch *b, int timeout_ms);

/** Forget all requests so the batch can be reused; -EBUSY while any is
 *  in flight. */
int te_batch_reset(struct te_batch *b);

/** Free the batch; -EBUSY (and nothing freed) while requests are in
 *  flight. */
int te_batch_destroy(struct te_batch *b);

/**
 * Read [addr, addr+len) of target's memory into a pipe: its write end
 * pipe_fd, which must have room for len bytes (F_SETPIPE_SZ; a pipe
 * that fills up ends the call with -ENOBUFS rather than a wait). The
 * bytes go from the socket into the pipe without a copy (splice(2)), so a
 * FUSE daemon can hand them to the kernel with one copy fewer than a read
 * into memory. Runs on the calling thread, synchronously, within the
 * engine's timeout (or timeout_ms when smaller and >= 0); never retried.
 * 0: exactly len bytes were added to the pipe. MC_ENOTSUPPORTED: the
 * transport that reaches target cannot (only tcp can: same-host shm, the
 * engine's own memory and rdma answer this); -EAGAIN: not now (every
 * connection to the peer is busy); -EHOSTUNREACH: target unresolvable.
 * In those three cases nothing was added; read into memory instead. Any
 * other error (-ETIMEDOUT, -ECONNRESET, MC_ENOTREG when the peer refused
 * the range, -ENOBUFS when the pipe filled up: the payload came in more
 * fragments than it has slots) may leave part of the range in the pipe:
 * the caller discards what the pipe holds. owner: as te_request.owner
 * (MC_ESEGMOVED, nothing added). Thread-safe.
 */
int te_read_pipe(struct te_engine *eng, struct te_segment *target,
		 uint64_t addr, uint64_t len, const char *owner, int pipe_fd,
		 int timeout_ms);

/** Send a notification {name, msg} to a peer's engine. */
int te_notify(struct te_engine *eng, struct te_segment *target,
	      const char *name, const char *msg);

/**
 * Take up to max received notifications; returns how many. Strings are
 * malloc'd and owned by the caller (free name and msg).
 */
int te_notifications(struct te_engine *eng, char **names, char **msgs, int max);

/** Counters of one transport ("tcp", "shm", "local"). */
int te_counters(struct te_engine *eng, const char *transport,
		struct te_counters *out);

#ifdef __cplusplus
}
#endif
#endif
