/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file ckpt.h
 * Checkpoints shared peer to peer (libmooncake; docs/design.md,
 * "Checkpoints"): upstream's P2P Store over the pool's master and our own
 * holder servers. A checkpoint is a named, immutable set of files (or
 * buffers) published whole; any client fetches it, and every client that
 * fetched a shard serves it to others until it stops serving, so one
 * publisher feeds many readers.
 *
 *   publisher: mooncake_ckpt_publish_dir(c, "/models/llama-8b", "llama-8b")
 *   reader:    mooncake_ckpt_get_dir(c, "llama-8b", "/var/lib/llama-8b")
 *
 * Serving: a mooncake_ckpt_t runs a server (CkptRead over the master
 * RPC's frames, authenticated with the pool's token) on serve_host; it
 * serves what this handle published or fetched until mooncake_ckpt_unserve()
 * or mooncake_ckpt_close(). Published files are read where they are, on
 * demand: a file changed after publishing is detected by the shards'
 * crc32c and refused, never served (readers check every shard too).
 *
 * Conventions are store.h's: functions return 0 (or a count) or a
 * negative upstream store code: -704 OBJECT_NOT_FOUND (no such
 * checkpoint), -705 OBJECT_ALREADY_EXISTS (the name is taken), -600
 * INVALID_PARAMS, -710 REPLICA_NOT_FOUND (a shard no live holder has),
 * -801 CHECKSUM_MISMATCH, -800 TRANSFER_FAIL, -900/-901 for the master.
 * A handle is thread-safe; close it before destroying its store.
 */
#ifndef MOONCAKE_CKPT_H
#define MOONCAKE_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mooncake/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mooncake_ckpt mooncake_ckpt_t;

typedef struct mooncake_ckpt_options {
	/* Where the holder server listens and is reached: NULL or "" for
	 * the host of the store's local_hostname. */
	const char *serve_host;
	int serve_port; /* 0: any free port */
	unsigned inflight; /* shards fetched at once; 0: 4 */
	uint64_t shard_size; /* publishing; 0: 64 MiB (64 KiB .. 1 GiB) */
	unsigned timeout_ms; /* per read from a holder; 0: 30000 */
	/* Where reads through mooncake_ckpt_file_*() keep what they fetched
	 * (one directory per checkpoint, served to other readers while the
	 * handle lives; emptied when it closes). NULL: those reads fail with
	 * -600. */
	const char *cache_dir;
	/* The most cache_dir holds (0: no cap). Past it, whole checkpoints
	 * that no file is open on go, least recently read first (they stop
	 * being served here); a checkpoint being read is never cut. */
	uint64_t cache_max_bytes;
	/* publish_dir: serve from a copy of the tree made in cache_dir
	 * (removed when no longer served) instead of the files themselves,
	 * so the trainer may overwrite them at once. */
	bool publish_copy;
} mooncake_ckpt_options_t;

typedef struct mooncake_ckpt_progress {
	uint64_t bytes, total; /* bytes held so far, of total */
	uint32_t shards, nshards;
	uint32_t sources; /* holders being read from right now */
	uint32_t retries; /* fetches that failed and went elsewhere */
} mooncake_ckpt_progress_t;

/* Called from the fetching threads, one call at a time per fetch. */
typedef void (*mooncake_ckpt_progress_fn)(void *arg,
					  const mooncake_ckpt_progress_t *p);

/** A checkpoint handle on a set-up store (options may be NULL). */
MOONCAKE_API int mooncake_ckpt_open(mooncake_store_t store,
				    const mooncake_ckpt_options_t *options,
				    mooncake_ckpt_t **out);
/** Stop serving everything (the master forgets this holder) and free. */
MOONCAKE_API void mooncake_ckpt_close(mooncake_ckpt_t *c);
/** "host:port" of this handle's holder server. */
MOONCAKE_API const char *mooncake_ckpt_endpoint(const mooncake_ckpt_t *c);

/**
 * Publish the tree under dir (regular files, directories, symlinks; any
 * other file type is -600) as name, sealed at the end: readers see it
 * whole or not at all. The files are read once for their checksums
 * (progress reports that pass) and then served from where they are, or
 * from a copy (options.publish_copy).
 */
MOONCAKE_API int mooncake_ckpt_publish_dir(mooncake_ckpt_t *c, const char *dir,
					   const char *name,
					   mooncake_ckpt_progress_fn progress,
					   void *arg);
/**
 * Publish n buffers as name (upstream's Register): they appear as files
 * "0", "1", ... and are served from this memory, which must stay valid
 * and unchanged until mooncake_ckpt_unserve(c, name) or close.
 */
MOONCAKE_API int mooncake_ckpt_publish_buffers(mooncake_ckpt_t *c,
					       const char *name,
					       const void *const *bufs,
					       const size_t *sizes, size_t n);
/** A top-level symlink name -> target (ckpt/latest); replace: over a
 *  link of that name (never over a checkpoint). */
MOONCAKE_API int mooncake_ckpt_link(mooncake_ckpt_t *c, const char *name,
				    const char *target, bool replace);

/**
 * Fetch checkpoint name into dir (made if missing, with its parents; it
 * must be empty), with the files' modes and times, and serve it from
 * there. A link is followed (one level).
 */
MOONCAKE_API int mooncake_ckpt_get_dir(mooncake_ckpt_t *c, const char *name,
				       const char *dir,
				       mooncake_ckpt_progress_fn progress,
				       void *arg);
/**
 * Fetch a checkpoint of n files (as publish_buffers makes) into n buffers
 * of exactly the files' sizes (else -600), and serve from them until
 * unserve (upstream's GetReplica / DeleteReplica).
 */
MOONCAKE_API int mooncake_ckpt_get_buffers(mooncake_ckpt_t *c, const char *name,
					   void *const *bufs,
					   const size_t *sizes, size_t n);

/** dir, which name is served from here (publish_dir's dir), is the
 *  handle's from now on: removed once it is no longer served (an unserve,
 *  a remove, the close; readers in flight finish first). -ENOENT (-704)
 *  when name is not served here from dir. */
MOONCAKE_API int mooncake_ckpt_hand_over(mooncake_ckpt_t *c, const char *name,
					 const char *dir);
/** Stop serving name here (the master forgets this holder of it). */
MOONCAKE_API int mooncake_ckpt_unserve(mooncake_ckpt_t *c, const char *name);
/** Unpublish name for everyone (its holders stop serving it). */
MOONCAKE_API int mooncake_ckpt_remove(mooncake_ckpt_t *c, const char *name);

typedef struct mooncake_ckpt_entry {
	const char *name;
	const char *link; /* a link's target; NULL for a checkpoint */
	uint64_t total_size;
	uint32_t files, shards, holders, lost_shards;
	int64_t created_ns;
	uint64_t id; /* names this content (mooncake_ckpt_file_open()) */
} mooncake_ckpt_entry_t;

/** Each checkpoint whose name starts with prefix (NULL: all), in name
 *  order; returns how many, or a code. */
MOONCAKE_API int64_t mooncake_ckpt_list(
	mooncake_ckpt_t *c, const char *prefix,
	void (*fn)(void *arg, const mooncake_ckpt_entry_t *e), void *arg);
/**
 * Everything about name as one JSON object (files, shards, holders with
 * the bytes each served), malloc'd in *json (free()).
 */
MOONCAKE_API int mooncake_ckpt_info(mooncake_ckpt_t *c, const char *name,
				    char **json);

/* ---- reads on demand (the mount's ckpt/) ---------------------------------- */

typedef struct mooncake_ckpt_dirent {
	const char *path; /* relative, '/'-separated */
	uint32_t mode; /* S_IF* type and permission bits */
	uint64_t size;
	int64_t mtime_ns;
	const char *link; /* symlinks: the target; else NULL */
} mooncake_ckpt_dirent_t;

/**
 * Each entry of checkpoint name (not a link: -600) in the order it was
 * published; *id (may be NULL) its id, which names this content for
 * mooncake_ckpt_file_open() even if the name is published again. Returns
 * how many, or a code.
 */
MOONCAKE_API int64_t mooncake_ckpt_files(
	mooncake_ckpt_t *c, const char *name, uint64_t *id,
	void (*fn)(void *arg, const mooncake_ckpt_dirent_t *e), void *arg);

typedef struct mooncake_ckpt_file mooncake_ckpt_file_t;

/**
 * Open the regular file path of checkpoint id for reads: shards are
 * fetched when first read (and the next one ahead of a sequential
 * reader), kept in options.cache_dir and served to other readers.
 * -704 when the checkpoint is gone (or never had that path).
 */
MOONCAKE_API int mooncake_ckpt_file_open(mooncake_ckpt_t *c, uint64_t id,
					 const char *path,
					 mooncake_ckpt_file_t **out);
/** Up to len bytes at off: how many (0 at the end), or a code. */
MOONCAKE_API int64_t mooncake_ckpt_file_pread(mooncake_ckpt_file_t *f,
					      void *buf, size_t len,
					      uint64_t off);
MOONCAKE_API void mooncake_ckpt_file_close(mooncake_ckpt_file_t *f);

#ifdef __cplusplus
}
#endif

#endif
