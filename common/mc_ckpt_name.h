/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_ckpt_name.h
 * The rules of a checkpoint's names, paths and shards (docs/design.md,
 * "Checkpoints"), one definition for the master that records them and
 * the clients that write files under them.
 */
#ifndef MC_CKPT_NAME_H
#define MC_CKPT_NAME_H

#include <stdbool.h>
#include <stdint.h>

#define MC_CKPT_NAME_MAX 255
#define MC_CKPT_PATH_MAX 4096

/** A checkpoint name: 1-255 bytes, no '/', not "." or "..". */
bool mc_ckpt_name_ok(const char *name);
/** A relative path: '/'-separated components, none empty, "." or "..",
 *  at most MC_CKPT_PATH_MAX bytes. */
bool mc_ckpt_path_ok(const char *path);
/** The number of shards of size bytes (0 for 0); shard_size > 0. */
uint64_t mc_ckpt_nshards(uint64_t size, uint64_t shard_size);

#endif
