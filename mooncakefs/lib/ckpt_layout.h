/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file ckpt_layout.h
 * A checkpoint's files and shards as a client sees them (docs/design.md,
 * "Checkpoints"): names and paths checked again here (a client writes
 * files under those paths, so it never trusts them to the master alone),
 * the shard of every byte, and shard bitmaps.
 *
 * Shards: each regular file's bytes, in the order of the files, cut every
 * shard_size bytes (the last shard of a file may be shorter; an empty
 * file has none), numbered from 0 across the files.
 */
#ifndef MCS_CKPT_LAYOUT_H
#define MCS_CKPT_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master.pb-c.h"
#include "mc_ckpt_name.h"

#define MCS_CKPT_SHARD_DEFAULT (64ull << 20)
#define MCS_CKPT_SHARD_MIN (64ull << 10)
#define MCS_CKPT_SHARD_MAX (1ull << 30)
/* The most a CkptRead answers at once. */
#define MCS_CKPT_READ_MAX (4u << 20)

struct mcs_ckpt_file {
	char *path; /* relative, checked */
	uint32_t mode; /* S_IF* and permission bits */
	uint64_t size;
	int64_t mtime_ns;
	char *link; /* symlinks */
	uint32_t first_shard, nshards; /* regular files */
};

struct mcs_ckpt_shard {
	uint32_t file; /* index in files */
	uint32_t len;
	uint64_t off; /* in the file */
};

struct mcs_ckpt_layout {
	uint64_t id, shard_size, total;
	char *name;
	char *link; /* a top-level symlink: its target (no files) */
	size_t nfiles;
	struct mcs_ckpt_file *files;
	uint32_t nshards;
	struct mcs_ckpt_shard *shards;
	uint32_t *crcs;
};

/* Names, paths and shard counts: mc_ckpt_name.h. */

/** Make the missing parents of path (mode 0755), not path itself, as
 *  `mkdir -p $(dirname path)`: 0 or -errno. */
int mcs_ckpt_mkparents(const char *path);
/** Make directory path and its missing parents (mode 0755, the last
 *  0700): 0 or -errno. */
int mcs_ckpt_mkdirs(const char *path);
/** The default directory for checkpoint files of one use (leaf: "ckpt",
 *  "ckpt-publish"): root's /var/cache/mooncakefs/<leaf>, another user's
 *  $XDG_CACHE_HOME (else ~/.cache) /mooncakefs/<leaf>. */
void mcs_ckpt_default_dir(const char *leaf, char *out, size_t n);
/** Make path as mcs_ckpt_mkdirs() and check this process may write in
 *  it: 0 or -errno. */
int mcs_ckpt_usable_dir(const char *path);
/** Remove a directory tree (not following symlinks); best effort. */
void mcs_ckpt_rm_tree(const char *path);
/** out = root/rel (out holds PATH_MAX): 0 or -ENAMETOOLONG. */
int mcs_ckpt_join(char *out, const char *root, const char *rel);

/**
 * The layout of ck (a CkptInfo answer): -EPROTO when anything in it is
 * out of bounds or inconsistent (a bad name or path, a file type other
 * than regular, directory or symlink, crcs that do not match the shards,
 * a shard size out of range), -ENOMEM.
 */
int mcs_ckpt_layout_from(const Mcrpc__Ckpt *ck, struct mcs_ckpt_layout **out);
void mcs_ckpt_layout_free(struct mcs_ckpt_layout *l);
/** The index of the file at path, or -1. */
long mcs_ckpt_layout_find(const struct mcs_ckpt_layout *l, const char *path);

static inline bool mcs_bit(const uint8_t *map, uint32_t i)
{
	return (map[i / 8] >> (i % 8)) & 1;
}
static inline void mcs_bit_set(uint8_t *map, uint32_t i)
{
	map[i / 8] |= (uint8_t)(1u << (i % 8));
}
static inline void mcs_bit_clear(uint8_t *map, uint32_t i)
{
	map[i / 8] &= (uint8_t) ~(1u << (i % 8));
}
static inline size_t mcs_bitmap_len(uint32_t n)
{
	return (n + 7u) / 8u;
}

#endif
