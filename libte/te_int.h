/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file te_int.h
 * Internals of the transfer engine shared by its files and transports.
 * Nothing outside libte/ includes this header.
 *
 * Object graph and lifetimes:
 * - struct te_engine owns the registration table, the transports, the
 *   metadata backend, the handshake listener and the peer cache.
 * - struct te_peer is a parsed segment descriptor of a peer (or of this
 *   engine), refcounted (te__peer_get/put). The cache holds one reference;
 *   every te_segment and every in-flight task hold one each. A stale peer
 *   (its connection failed) is dropped from the cache and re-fetched by the
 *   next te_segment_open() or submit.
 * - struct te_task is one request; it lives in its batch's array and ends
 *   exactly once in task.c, when te__slice_done() ends its last slice.
 *
 * Layering: each file calls only files of lower rows (docs/design.md,
 * "libte layering", has the picture):
 *   1 engine.c (lifetime)
 *   2 register.c, batch.c, hs_server.c (the handshake listener)
 *   3 notify.c
 *   4 peer.c (peer cache, resolution), publish.c (our metadata entries)
 *   5 desc.c (descriptor codec), hs_client.c (handshake wire client)
 *   6 transport.c (registry) -> transport/<name>/, through ops only
 *   7 task.c (slices, task ends), memreg.c (table), copy.c, handshake.c
 *     (frame codec), mem.c (then populate.c), cuda.c; common/ below all
 * Transports call only row 7; the core reaches them only through struct
 * te_transport_ops, and each keeps its own per-peer state (tp_desc[]
 * from its descriptor fields, tp_priv[] at run time). Holders drop peers
 * with te__peer_put(), which frees through p->destroy (peer.c).
 *
 * Locking: eng->reg_lock (rwlock) guards the registration table;
 * eng->peer_lock guards the peer cache; batch->lock guards the batch's
 * condition variable. Counters and task progress are atomics.
 */
#ifndef TE_INT_H
#define TE_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "mc_auth.h"
#include "mc_compiler.h"
#include "mc_fork.h"
#include "mc_host.h"
#include "meta/meta.h"
#include "transport/registry.h"
#include "mooncake/te.h"

/* The tag page at the end of a te_mem_alloc() file (mem.c). */
#define TE_SHM_TAG_PAGE TE_MEM_EXTRA
#define TE_SHM_TAG_BYTES 32u
#define TE_SHM_TAG_HEX (2 * TE_SHM_TAG_BYTES)
#define TE_SHM_MAGIC "MCSHMTAG"
#define TE_MAX_TRANSPORTS 5
#define TE_MAX_BUFFERS 4096 /* per descriptor */
#define TE_LOCATION_LEN 64
#define TE_NAME_MAX 256
#define TE_HOST_ID_LEN MC_HOST_ID_LEN

/* Transports by index: their order in transport/registry.h. */
/* clang-format off */
enum te_transport_id {
#define TE_TP_ID(id, name) TE_TP_##id,
	TE_TRANSPORTS(TE_TP_ID)
#undef TE_TP_ID
	TE_TP_COUNT
};
/* clang-format on */
_Static_assert(TE_TP_COUNT <= TE_MAX_TRANSPORTS,
	       "more transports in registry.h than TE_MAX_TRANSPORTS");

/* A registered local buffer. */
struct te_memreg {
	uintptr_t addr;
	size_t len;
	char location[TE_LOCATION_LEN];
	bool remote;
	int gpu; /* 0: host memory; else the CUDA device ordinal + 1 */
	char *shm_path; /* file peers open (te_mem_alloc) or NULL */
	uint64_t shm_offset; /* of addr inside that file */
	uint64_t shm_ino; /* that file's inode number */
	char shm_tag[TE_SHM_TAG_HEX + 1]; /* that file's tag (mem.c) */
	char owner[TE_OWNER_LEN]; /* te_register_owned(); "" none */
	_Atomic int busy; /* requests of this engine using it */
	/* Each transport's state for it (reg_add op), e.g. rdma's MRs. */
	void *tp_priv[TE_MAX_TRANSPORTS];
};

/* One buffer in a descriptor. */
struct te_buffer_desc {
	uint64_t addr, length;
	char location[TE_LOCATION_LEN];
	char *shm_path; /* our extension: mappable by same-host peers */
	uint64_t shm_offset;
	uint64_t shm_ino; /* 0: not published (then not checked) */
	/* The tag the file must hold (mem.c): without it, not mapped. */
	char shm_tag[TE_SHM_TAG_HEX + 1];
	char owner[TE_OWNER_LEN]; /* "mc_owner"; "" none */
};

/* A peer's parsed segment descriptor plus per-transport state. */
struct te_peer {
	_Atomic int refs;
	char name[TE_NAME_MAX];
	char ip[TE_NAME_MAX]; /* rpc_meta ip_or_host_name */
	int rpc_port;
	char host_id[TE_HOST_ID_LEN]; /* "" when the peer is not ours */
	bool is_self;
	_Atomic bool stale;
	uint64_t fetched_ns; /* mono time its descriptor was fetched */
	unsigned n_buffers;
	struct te_buffer_desc *buffers;
	/* Each transport's part of the descriptor (its desc_decode op),
	 * read-only once decoded; NULL when the peer offers it nothing. */
	void *tp_desc[TE_MAX_TRANSPORTS];
	void *tp_priv[TE_MAX_TRANSPORTS]; /* owned by each transport */
	struct te_engine *eng;
	/* Frees it at the last te__peer_put(): its transports' state, its
	 * descriptor, itself (peer.c). */
	void (*destroy)(struct te_peer *p);
};

struct te_segment {
	struct te_engine *eng;
	struct te_peer *peer; /* under eng->peer_lock; replaced if stale */
	char name[TE_NAME_MAX];
};

struct te_task {
	struct te_batch *batch;
	struct te_request req;
	struct te_peer *peer; /* reference held until the task ends */
	int tp; /* transport index */
	_Atomic int status;
	_Atomic uint64_t transferred;
	_Atomic int pending; /* slices not finished */
	_Atomic int error; /* first error */
	_Atomic bool timed_out;
	uint64_t deadline_ns; /* CLOCK_MONOTONIC */
	uint64_t send_by_ns; /* WRITE: no piece starts after (0: deadline) */
	struct te_memreg *local_reg;
	bool ready; /* resolved at submission, not handed over yet */
	/* A sub-task of GPU staging (stage.c): batch is NULL and this is
	 * called when it ends, instead of the batch's bookkeeping. */
	void (*on_done)(struct te_task *t);
};

struct te_batch {
	struct te_engine *eng;
	unsigned capacity;
	unsigned write_window_ms; /* te_batch_set_write_window */
	_Atomic unsigned n;
	_Atomic unsigned inflight;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct te_task *tasks;
};

struct te_transport;

/**
 * A transport. Ops are called by the core only; missing optional ops are
 * simply not called. Append new members at the end (version).
 */
struct te_transport_ops {
	const char *name;
	unsigned version;
	/**
	 * Start listeners/threads; fill *out (embedding struct
	 * te_transport). cfg is the engine's configuration, for this
	 * transport's own settings (borrowed for the call only).
	 */
	int (*init)(struct te_engine *eng, const struct te_engine_cfg *cfg,
		    struct te_transport **out, char *err, size_t errlen);
	void (*fini)(struct te_transport *tp);
	/**
	 * Add this transport's fields to our segment descriptor (upstream's
	 * JSON, desc.c). Optional; desc_decode reads them back.
	 */
	int (*describe)(struct te_transport *tp, json_t *desc);
	/** Can this transport carry req to peer? */
	bool (*reachable)(struct te_transport *tp, struct te_peer *peer,
			  const struct te_request *req);
	/**
	 * Start a task (task->pending already counts one slice); the
	 * transport ends every slice with te__slice_done(). Must not block
	 * on the network.
	 */
	int (*submit)(struct te_transport *tp, struct te_task *task);
	/**
	 * Carry n tasks, all to one peer, whose submitter waits for them
	 * next (te_batch_transfer): the transport may move them on the
	 * calling thread, without handing them to its own threads. 0: it
	 * took every task (each ends through te__slice_done, here or
	 * later); anything else: it started none, and they go through
	 * submit. Optional.
	 */
	int (*run)(struct te_transport *tp, struct te_task *tasks, unsigned n);
	/** Free per-peer state in peer->tp_priv[tp->index]. Optional. */
	void (*peer_release)(struct te_transport *tp, struct te_peer *peer);
	/**
	 * Read this transport's fields of a peer's segment descriptor into a
	 * new blob at *out, which desc.c keeps in peer->tp_desc[index] and
	 * frees with desc_free. Leave *out NULL when the peer offers this
	 * transport nothing. The JSON came from the network: bound every
	 * value; a malformed field is ignored as upstream readers do. Called
	 * by the codec without an engine (it is fuzzed). 0 or -ENOMEM.
	 * Optional (then the transport reads nothing from descriptors).
	 */
	int (*desc_decode)(json_t *desc, void **out);
	void (*desc_free)(void *blob);
	/** Moves GPU memory itself (the driver copies): requests from our
	 *  device memory are not staged through host buffers (stage.c). */
	bool gpu_direct;
	/**
	 * A buffer is being registered (before it enters the table) or was
	 * unregistered (after it left it, no request of ours using it): keep
	 * per-buffer state in r->tp_priv[index] (rdma: memory regions). A
	 * failing reg_add fails the registration. Optional.
	 */
	int (*reg_add)(struct te_transport *tp, struct te_memreg *r);
	void (*reg_remove)(struct te_transport *tp, struct te_memreg *r);
	/**
	 * Answer a handshake request of a type the core does not serve
	 * (TE_HS_CONNECTION: rdma's QP exchange): *reply is the body to send
	 * (malloc'd). MC_ENOTSUPPORTED: not this transport's. Called on a
	 * connection's thread of the listener, after authentication, one
	 * call at a time. Optional.
	 */
	int (*serve_handshake)(struct te_transport *tp, uint8_t type,
			       const char *json, size_t len, char **reply);
	/**
	 * te_fence_inbound(): end the connections peers opened to us and
	 * wait, until deadline_ns, until none of them can move more bytes
	 * into our memory. 0; 1: done, and our descriptor changed (fence.c
	 * publishes it again); or an error. Optional (a transport whose
	 * peers do not write through us has nothing to end).
	 */
	int (*fence_inbound)(struct te_transport *tp, uint64_t deadline_ns);
	/** Fill the resource fields of te_counters (connections,
	 *  registrations, inflight). Optional. */
	void (*stats)(struct te_transport *tp, struct te_counters *out);
	/**
	 * te_read_pipe(): read [addr, addr+len) of peer's memory into the
	 * pipe pipe_fd on the calling thread, by the deadline. -EAGAIN when
	 * it cannot start now (no idle connection; nothing sent). Optional
	 * (then te_read_pipe answers MC_ENOTSUPPORTED).
	 */
	int (*read_pipe)(struct te_transport *tp, struct te_peer *peer,
			 uint64_t addr, uint64_t len, int pipe_fd,
			 uint64_t deadline_ns);
};

struct te_transport {
	const struct te_transport_ops *ops;
	struct te_engine *eng;
	int index;
	_Atomic uint64_t read_bytes, write_bytes;
	_Atomic uint64_t read_requests, write_requests;
	_Atomic uint64_t failed_requests, served_bytes;
	_Atomic uint64_t caller_requests; /* moved by the run op's caller */
};

struct te_notif {
	struct te_notif *next;
	char *name, *msg;
};

struct te_engine {
	char name[TE_NAME_MAX];
	char ip[TE_NAME_MAX];
	char rpc_address[TE_NAME_MAX + 8];
	int rpc_port;
	char host_id[TE_HOST_ID_LEN];
	unsigned timeout_ms;
	int forced_tp; /* -1: automatic */
	bool p2p;
	/* Transport "rdma" asked for and available: the rdma transport
	 * opens its NICs (otherwise it stays idle; engine.c decides). */
	bool rdma_on;
	/* mc_fork_count() when made: in a child of a later fork() the
	 * engine is its parent's (threads absent, connections shared), and
	 * every call answers MC_EFORKED; destroying it there only forgets
	 * it (te__forked). */
	unsigned forks;

	/* The pool's key (auth_token_file): with it, every handshake and
	 * data connection, both ways, proves the key before anything else
	 * (hs_auth.c, transport/tcp/tcp_auth.c). Read-only after create. */
	const struct mc_auth_key *auth; /* NULL: authentication off */
	struct mc_auth_key auth_key;

	struct te_meta *meta; /* NULL with P2PHANDSHAKE */
	char meta_conn[1024];

	pthread_rwlock_t reg_lock;
	struct te_memreg **regs; /* sorted by addr */
	unsigned n_regs, cap_regs;

	struct te_transport *tps[TE_TP_COUNT];

	pthread_mutex_t peer_lock;
	struct te_peer **peers; /* cache, by name */
	unsigned n_peers, cap_peers;
	struct te_peer *self;

	pthread_mutex_t notif_lock;
	struct te_notif *notif_head, *notif_tail;

	/* Handshake (RPC) listener: its accept thread, and the connections
	 * being served, each on its own thread (hs_server.c). */
	int rpc_fd;
	pthread_t rpc_thread;
	struct te_hs_server *hs;
	_Atomic bool stopping;

	pthread_mutex_t publish_lock;
	/* The keeper (publish.c): checks that the metadata service still
	 * has our entries. */
	pthread_mutex_t keep_lock;
	pthread_cond_t keep_cv;
	pthread_t keep_thread;
	bool keeping, keep_quit;
	unsigned keep_ms;

	struct te_copier *copier; /* parallel copies of same-host transports */

	pthread_mutex_t stage_lock;
	struct te_stager *stager; /* GPU staging, started on first use */
};

/* publish.c: our metadata entries (nothing with P2PHANDSHAKE). */
/** Re-publish our descriptor (after registration changes). */
int te__publish(struct te_engine *eng);
/** Create our rpc_meta entry, taking it over from a dead owner. */
int te__claim_name(struct te_engine *eng, char *err, size_t errlen);
/** Remove both entries (engine teardown). */
void te__unpublish(struct te_engine *eng);
/** Every ms, look our rpc_meta entry up and publish both again when the
 *  metadata service no longer has it (it restarted keeping nothing);
 *  0: never. Stop it before te__unpublish(). */
int te__keeper_start(struct te_engine *eng, unsigned ms);
void te__keeper_stop(struct te_engine *eng);

/* memreg.c: find the registration holding [addr, addr+len). */
struct te_memreg *te__reg_find(struct te_engine *eng, uintptr_t addr,
			       uint64_t len, bool remote_only);
/** Is [addr, addr+len) inside one remote-accessible registered buffer?
 *  Caller holds reg_lock for reading for as long as it touches the bytes. */
bool te__reg_check_remote(struct te_engine *eng, uint64_t addr, uint64_t len);
/** The same check, returning the registration (NULL: refused); same
 *  locking rule. */
struct te_memreg *te__reg_find_remote(struct te_engine *eng, uint64_t addr,
				      uint64_t len);
/** Whether eng is its parent's: made before a fork() of which this
 *  process is the child (te_engine.forks). */
static inline bool te__forked(const struct te_engine *eng)
{
	return eng && mc_forked_since(eng->forks);
}
/** Drop a reference taken by te__reg_find(). */
static inline void te__reg_put(struct te_memreg *r)
{
	atomic_fetch_sub(&r->busy, 1);
}
/** Add r to the table: 0, -EEXIST (overlap) or -ENOMEM. */
int te__reg_insert(struct te_engine *eng, struct te_memreg *r);
/** Take the registration starting at addr out of the table (*out):
 *  0, -ENOENT, or -EBUSY while a request of ours uses it. */
int te__reg_remove(struct te_engine *eng, uintptr_t addr,
		   struct te_memreg **out);
void te__reg_free(struct te_memreg *r);
void te__regs_free(struct te_engine *eng);

/*
 * mem.c: the file behind te_mem_alloc() memory holding [addr, addr+len)
 * (malloc'd; NULL when none or private), its offset and inode there, and
 * its tag (hex). The file ends with a page past the memory holding
 * TE_SHM_MAGIC and a random secret of this allocation: a same-host peer
 * maps the file only when it holds the tag the descriptor names, so a
 * descriptor naming another file (a peer's lie: another pool's segment,
 * another program's memory) is not mapped with the reader's rights.
 */
char *te__mem_shm_path(uintptr_t addr, size_t len, uint64_t *offset,
		       uint64_t *ino, char tag[TE_SHM_TAG_HEX + 1]);

/* shm_tag.c: write a fresh tag into the page after len bytes of fd (its
 * hex into tag); does the file of size bytes end with tag? */
int te__shm_tag_write(int fd, uint64_t len,
		      char tag[TE_SHM_TAG_HEX + 1]) MC_MUST_CHECK;
bool te__shm_tag_ok(int fd, uint64_t size, const char *tag);

/* populate.c: fault [base, base+len) in from background threads. */
struct te_populate;
int te__populate_start(void *base, size_t len,
		       struct te_populate **out) MC_MUST_CHECK;
/** Wait until every page is faulted in (NULL: nothing to wait for). */
void te__populate_wait(struct te_populate *job);
/** Stop between chunks, join the threads and free the job. */
void te__populate_stop(struct te_populate *job);
/* register.c: transports' reg_add/reg_remove ops for a registration
 * (also the stager's pinned buffers, which stay out of the table). */
int te__tps_reg_add(struct te_engine *eng, struct te_memreg *r) MC_MUST_CHECK;
void te__tps_reg_remove(struct te_engine *eng, struct te_memreg *r);

/* stage.c: requests whose local buffer is GPU memory (local_reg->gpu),
 * cut into chunks staged through pinned host buffers; t->tp chosen. */
int te__stage_submit(struct te_engine *eng, struct te_task *t) MC_MUST_CHECK;
/** Stop the stager (engine teardown, no request in flight). */
void te__stage_stop(struct te_engine *eng);

/* gpu.c: the CUDA driver API, loaded at run time (libcuda.so.1 or
 * MC_CUDA_LIBRARY). Every function but te__gpu_available() and
 * te__gpu_device_of() wants te__gpu_use() on the calling thread first. */
/** Whether a driver with a device was loaded; *reason says why not. */
bool te__gpu_available(const char **reason);
/** The device ordinal of device memory at p, or -1 for anything else
 *  (host memory, managed memory, no driver). */
int te__gpu_device_of(const void *p);
/** Make dev's primary context current on this thread: 0, MC_ENOTSUPPORTED
 *  (no such device) or -EIO. */
int te__gpu_use(int dev) MC_MUST_CHECK;
int te__gpu_stream_create(void **out) MC_MUST_CHECK;
void te__gpu_stream_destroy(void *stream);
/** Copy len bytes between any two addresses (host or device) on stream;
 *  te__gpu_sync() waits for the stream. 0 or -EIO (logged). */
int te__gpu_copy_async(void *dst, const void *src, size_t len,
		       void *stream) MC_MUST_CHECK;
int te__gpu_sync(void *stream) MC_MUST_CHECK;
/** te__gpu_copy_async() then te__gpu_sync(). */
int te__gpu_copy(void *dst, const void *src, size_t len,
		 void *stream) MC_MUST_CHECK;
/** CUDA IPC (the cuda_ipc transport): the handle of the allocation
 *  holding p, its base and size; MC_ENOTSUPPORTED without IPC. */
#define TE_GPU_IPC_HANDLE_LEN 64
int te__gpu_ipc_export(const void *p, uint8_t handle[TE_GPU_IPC_HANDLE_LEN],
		       uintptr_t *base, size_t *size) MC_MUST_CHECK;
/** Map another process's allocation (its base) into ours. */
int te__gpu_ipc_open(const uint8_t handle[TE_GPU_IPC_HANDLE_LEN],
		     void **out) MC_MUST_CHECK;
void te__gpu_ipc_close(void *p);
/** Pinned host memory (fast copies to and from every device). */
int te__gpu_host_alloc(size_t len, void **out) MC_MUST_CHECK;
void te__gpu_host_free(void *p);

/* peer.c */
static inline struct te_peer *te__peer_get(struct te_peer *p)
{
	atomic_fetch_add(&p->refs, 1);
	return p;
}

/** Drop a reference; the last one frees the peer through p->destroy,
 *  so a holder (a task, a transport) depends on no code of peer.c. */
static inline void te__peer_put(struct te_peer *p)
{
	if (p && atomic_fetch_sub(&p->refs, 1) == 1)
		p->destroy(p);
}
/** A new peer of eng with one reference (its descriptor still empty). */
struct te_peer *te__peer_new(struct te_engine *eng);
/** Resolve a peer by name (cache, metadata or handshake). */
int te__peer_lookup(struct te_engine *eng, const char *name,
		    struct te_peer **out, char *err, size_t errlen);
/** Mark a peer stale: the next lookup fetches its descriptor again. */
static inline void te__peer_invalidate(struct te_peer *p)
{
	atomic_store(&p->stale, true);
}
/** The segment's current peer, refreshed if stale; a new reference, or
 *  NULL when it cannot be resolved. */
struct te_peer *te__segment_peer(struct te_segment *seg);
/** te__segment_peer() for a request on [addr, addr + len) for owner
 *  (te_request.owner; NULL: any): NULL with *err -EHOSTUNREACH
 *  (unresolvable) or MC_ESEGMOVED (a buffer of another owner there). */
struct te_peer *te__segment_peer_at(struct te_segment *seg, uint64_t addr,
				    uint64_t len, const char *owner, int *err);
/* batch.c: the transport that carries req to peer (index), or -1. */
int te__pick_transport(struct te_engine *eng, struct te_peer *peer,
		       const struct te_request *req);
void te__peers_free(struct te_engine *eng);

/* desc.c: the one codec of segment descriptors (fuzzed). p is zeroed;
 * te__desc_release() frees what decoding left in it, even on failure. */
int te__desc_decode(const char *json, size_t len, struct te_peer *p, char *err,
		    size_t errlen) MC_MUST_CHECK;
void te__desc_release(struct te_peer *p);
int te__rpc_meta_decode(const char *json, size_t len, char *ip, size_t iplen,
			int *port) MC_MUST_CHECK;
/** Our descriptor as JSON text (malloc'd). */
char *te__describe(struct te_engine *eng);
/** "mooncake/[cluster id/]<kind>/<name>" (MC_METADATA_CLUSTER_ID). */
int te__meta_key(struct te_engine *eng, char *buf, size_t len, const char *kind,
		 const char *name);

/* task.c: slice bookkeeping for transports. */
/** One slice of task ended: bytes moved, or rc < 0. */
void te__slice_done(struct te_task *task, uint64_t bytes, int rc);
/** Add slices before submitting them (the initial one is counted). */
void te__task_add_slices(struct te_task *task, int n);

/* copy.c: memcpy split over helper threads for large lengths
 * (MC_TE_COPY_THREADS helpers, started on first use). */
struct te_copier;
int te__copier_create(struct te_copier **out) MC_MUST_CHECK;
void te__copier_destroy(struct te_copier *cp);
/** Copy len bytes; returns once all are copied. dst and src must not
 *  overlap. cp may be NULL (a plain memcpy). */
void te__copy(struct te_copier *cp, void *dst, const void *src, size_t len);

/* transport.c: the registry of built-in transports. */
#define TE_TP_OPS(id, name) \
	extern const struct te_transport_ops te_##name##_ops;
TE_TRANSPORTS(TE_TP_OPS)
#undef TE_TP_OPS
/** The ops of transport i (0 <= i < TE_TP_COUNT), engine or not. */
const struct te_transport_ops *te__transport_ops(int i);
int te__transports_init(struct te_engine *eng, const struct te_engine_cfg *cfg,
			char *err, size_t errlen);
void te__transports_fini(struct te_engine *eng);
int te__transport_index(const char *name);
/** The RDMA devices and priority matrix (transport/rdma/topo.h) as
 *  {"devices": [...], "priority_matrix": {...}}, with the MC_ variables
 *  that steer discovery; NULL where there is no RDMA device. */
json_t *te__rdma_topology(void);

/* handshake.c: the codec of handshake frames; types are upstream's. */
enum {
	TE_HS_CONNECTION = 0,
	TE_HS_METADATA = 1,
	TE_HS_NOTIFY = 2,
	TE_HS_PROBE = 3,
	/* Ours: the authentication steps (hs_auth.c). Not '{', so never
	 * mistaken for upstream's legacy untyped frames. */
	TE_HS_AUTH = 16,
};
size_t te__hs_max_length(void);
/** 0, or -EINVAL with a message when MC_HANDSHAKE_MAX_LENGTH is set to
 *  anything but a byte count from 1 MiB to 128 MiB. */
int te__hs_check_env(char *err, size_t errlen) MC_MUST_CHECK;
/** Decode one whole frame (header included) of len bytes. */
int te__hs_decode(const uint8_t *buf, size_t len, size_t max, uint8_t *type,
		  const char **json, size_t *json_len) MC_MUST_CHECK;
/** Write one frame of len bytes of JSON. */
int te__hs_send(int fd, uint8_t type, const char *json, size_t len);
/** Read one frame of at most max bytes into a malloc'd buffer (header
 *  included); -ETIMEDOUT past the thread's te__hs_recv_deadline(). */
int te__hs_recv(int fd, size_t max, uint8_t **buf, size_t *len);
/** The calling thread's te__hs_recv() end all frames together (mono ms;
 *  0: none, each read then ends after the socket's timeout). */
void te__hs_recv_deadline(uint64_t deadline_ms);
int te__hs_parse_notify(const char *json, size_t len, char **name,
			char **msg) MC_MUST_CHECK;
/*
 * The body of an AUTH frame, or of a refusal of any type:
 *   {"nonce": hex, "proof": hex, "reply_msg": text, "mc_error": code}
 * every field optional. A refusal carries reply_msg (upstream's field for
 * a refused handshake) and mc_error (MC_EAUTH*).
 */
struct te_hs_auth_msg {
	bool has_nonce, has_proof;
	uint8_t nonce[MC_AUTH_NONCE_LEN];
	uint8_t proof[MC_AUTH_MAC_LEN];
	int mc_error; /* 0: not a refusal */
	char reply_msg[256];
};
/** Parse one body: 0, or -EBADMSG (not an object, a field of the wrong
 *  type or size, an mc_error that is not one of MC_EAUTH*). */
int te__hs_parse_auth(const char *json, size_t len,
		      struct te_hs_auth_msg *m) MC_MUST_CHECK;
/** A body with the given nonce and/or proof (NULL: left out); malloc'd. */
char *te__hs_auth_body(const uint8_t *nonce, const uint8_t *proof);
/** A refusal body; malloc'd. */
char *te__hs_refusal(int mc_error, const char *msg);

/* hs_auth.c: the authentication steps on a handshake connection. */
/** Client side, before the request: prove key and check the peer's proof.
 *  0, MC_EAUTHFAILED, MC_EAUTHOFF or an I/O error; err says why. */
int te__hs_auth_client(int fd, const struct mc_auth_key *key, char *err,
		       size_t errlen);
/**
 * Server side, given the connection's first frame (type, json): with a
 * key, run the exchange and return 0 once the client proved it (the
 * request follows); otherwise answer the refusal and return it
 * (MC_EAUTHREQUIRED, MC_EAUTHFAILED). Without a key, an AUTH frame is
 * answered MC_EAUTHOFF; any other frame returns 0 (it is the request).
 */
int te__hs_auth_server(int fd, const struct mc_auth_key *key, uint8_t type,
		       const char *json, size_t len);

/* hs_client.c: requests to a peer's handshake listener (no engine). key:
 * the pool's key (NULL: authentication off); a peer's refusal returns its
 * MC_EAUTH* code. */
/** Probe a peer's RPC address; 0 when an engine answered (a refusal to
 *  authenticate is an answer too). */
int te__rpc_probe(const char *ip, int port, int timeout_ms,
		  const struct mc_auth_key *key);
/** P2PHANDSHAKE: send our descriptor (mine) to ip:port and receive the
 *  peer's (*json, malloc'd, NUL-terminated). */
int te__rpc_fetch_desc(const char *ip, int port, const char *mine,
		       const struct mc_auth_key *key, char **json, size_t *len,
		       char *err, size_t errlen);
/** A Connection (rdma QP exchange) request: body json, the peer's reply
 *  body in *reply (malloc'd, NUL-terminated). */
int te__rpc_connect(const char *ip, int port, int timeout_ms,
		    const struct mc_auth_key *key, const char *json,
		    char **reply, size_t *len);
int te__rpc_notify(const char *ip, int port, int timeout_ms,
		   const struct mc_auth_key *key, const char *name,
		   const char *msg);

/* hs_server.c: our handshake listener. */
int te__rpc_start(struct te_engine *eng, int port, char *err, size_t errlen);
void te__rpc_stop(struct te_engine *eng);

/* notify.c */
/** Queue a notification for te_notifications(); takes name and msg. */
void te__notif_push(struct te_engine *eng, char *name, char *msg);
void te__notifications_free(struct te_engine *eng);

#endif
