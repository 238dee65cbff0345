/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file ckpt_serve.h
 * What this process serves of checkpoints, and the server that serves it
 * to other clients (CkptRead over master RPC frames, on a listener of its
 * own; docs/design.md, "Checkpoints"; docs/wire-protocol.md).
 *
 * A served checkpoint is backed per file by a file descriptor (the
 * publisher's own files, or the files a fetch wrote) or by memory (buffers
 * a process published or fetched into). `have` says which shards it holds.
 * A shard is checked against its crc before it is first served, and again
 * whenever its file's size, mtime, ctime or inode changed since: a copy
 * that no longer matches is refused (-801 to the reader), dropped from
 * `have` and from the master's record (CkptHold drop), and never served.
 *
 * Threads: the server answers from its connection threads; a fetch adds
 * shards from its workers. Everything here takes the locks it needs.
 */
#ifndef MCS_CKPT_SERVE_H
#define MCS_CKPT_SERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "ckpt_layout.h"
#include "mc_auth.h"

struct mcs_master;
struct mc_rpc_server;

/* Files kept open per served checkpoint; beyond, each read opens its file
 * and closes it after. */
#define MCS_CKPT_OPEN_FILES 64

struct mcs_ckpt_served {
	struct mcs_ckpt_layout *lay;
	char *root; /* the directory its files are in; NULL: memory */
	bool writable; /* a fetch's destination: files opened for writing */
	bool owns_root; /* root is a copy of ours: removed with the last
			 * reference */
	uint8_t **mem; /* per file: its bytes in memory, or NULL */
	pthread_mutex_t lock; /* what follows */
	int *fds; /* per file: open, or -1 */
	unsigned nopen;
	struct stat *st; /* per file: as when its shards were last checked */
	uint8_t *have, *verified; /* shard bitmaps */
	_Atomic unsigned refs;
	struct mcs_ckpt_served *next; /* the server's list */
};

/**
 * A served checkpoint of layout lay (taken over) with no shard yet, its
 * files under root (copied; NULL: memory, the caller fills mem[]),
 * opened for writing too when writable. NULL when out of memory.
 */
struct mcs_ckpt_served *mcs_ckpt_served_new(struct mcs_ckpt_layout *lay,
					    const char *root, bool writable);
void mcs_ckpt_served_put(struct mcs_ckpt_served *sv);
/** Mark shard held; verified: its bytes were just checked (a fetch). */
void mcs_ckpt_served_mark(struct mcs_ckpt_served *sv, uint32_t shard,
			  bool verified);
/**
 * Read len bytes at off of shard from the backing (for serving, and for
 * local reads of what is held). 0, -ENODATA when the shard is not held,
 * MC_ECHECKSUM when it no longer matches its crc (and is dropped),
 * -errno for a read error.
 */
int mcs_ckpt_served_read(struct mcs_ckpt_served *sv, uint32_t shard,
			 uint64_t off, uint32_t len, void *buf);
/** Write a whole shard's bytes into its file (writable) or memory. */
int mcs_ckpt_served_write(struct mcs_ckpt_served *sv, uint32_t shard,
			  const void *buf);
/** The memory shard lives in (memory backing), or NULL. */
uint8_t *mcs_ckpt_served_mem(struct mcs_ckpt_served *sv, uint32_t shard);

struct mcs_ckpt_srv;

struct mcs_ckpt_srv_cfg {
	const char *host; /* address to listen on and to be reached at */
	int port; /* 0: ephemeral */
	const struct mc_auth_key *auth; /* the pool's key, NULL: none */
	struct mcs_master *master; /* to drop shards that went bad */
};

int mcs_ckpt_srv_start(const struct mcs_ckpt_srv_cfg *cfg,
		       struct mcs_ckpt_srv **out, char *err, size_t errlen);
/** Stop serving (connections closed, threads joined) and free the list. */
void mcs_ckpt_srv_stop(struct mcs_ckpt_srv *s);
/** "host:port" as holders are named to the master. */
const char *mcs_ckpt_srv_endpoint(const struct mcs_ckpt_srv *s);
/** Serve sv (a reference is taken). -EEXIST when its id is served. */
int mcs_ckpt_srv_add(struct mcs_ckpt_srv *s, struct mcs_ckpt_served *sv);
/** The served checkpoint id with a reference, or NULL. */
struct mcs_ckpt_served *mcs_ckpt_srv_find(struct mcs_ckpt_srv *s, uint64_t id);
/** The first served checkpoint named name, with a reference, or NULL. */
struct mcs_ckpt_served *mcs_ckpt_srv_find_name(struct mcs_ckpt_srv *s,
					       const char *name);
/** Stop serving id (the reference the list held is dropped): 0, -ENOENT. */
int mcs_ckpt_srv_remove(struct mcs_ckpt_srv *s, uint64_t id);
/** Each served checkpoint (references held during fn): for close. */
void mcs_ckpt_srv_each(struct mcs_ckpt_srv *s,
		       void (*fn)(void *arg, struct mcs_ckpt_served *sv),
		       void *arg);
/** The server's answer to one frame (the mc_rpc_handler_fn its
 *  connections call; arg is the server): for tests and fuzzing. */
struct mc_rpc_hdr;
int mcs_ckpt_srv_handle(void *arg, const struct mc_rpc_hdr *h,
			const uint8_t *body, uint8_t **frame, size_t *len);

#endif
