/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file kv.h
 * The metadata key-value store: an in-memory map, optionally written
 * through to sqlite (WAL) so entries survive a restart.
 *
 * Durability: a mutation returns 0 only after its sqlite transaction has
 * committed, so kill -9 of the process loses no acknowledged write. With
 * full_sync off (synchronous=NORMAL) a power loss may drop the last
 * commits; full_sync (synchronous=FULL) fsyncs each one. When sqlite
 * cannot write (a full disk, an I/O error), mutations are made in memory
 * and logged, and written at the first later mutation that sqlite takes:
 * entries stay available, and only a restart in between loses them.
 *
 * Thread safety: all functions may be called concurrently; readers share
 * a lock, writers are serialized. Values are copied out.
 */
#ifndef METAD_KV_H
#define METAD_KV_H

#include <stdbool.h>
#include <stddef.h>

#include "mc_compiler.h"

struct metad_kv;

enum metad_put_outcome {
	METAD_PUT_STORED, /* created or replaced */
	METAD_PUT_UNCHANGED, /* same bytes were already there */
	METAD_PUT_CONFLICT, /* exclusive key held with other bytes */
};

int metad_kv_open(const char *store, bool full_sync, struct metad_kv **out,
		  char *err, size_t errlen) MC_MUST_CHECK;
void metad_kv_close(struct metad_kv *kv);

/** Copy the value into a malloc'd, NUL-terminated buffer; -ENOENT. */
int metad_kv_get(struct metad_kv *kv, const char *key, size_t key_len,
		 char **val, size_t *val_len) MC_MUST_CHECK;

/**
 * Store a value. With exclusive set, an existing entry with different
 * bytes is kept and the outcome is METAD_PUT_CONFLICT.
 * @return 0 (see *outcome) or -ENOMEM (nothing changed).
 */
int metad_kv_put(struct metad_kv *kv, const char *key, size_t key_len,
		 const char *val, size_t val_len, bool exclusive,
		 enum metad_put_outcome *outcome) MC_MUST_CHECK;

/** 0, -ENOENT or -ENOMEM (nothing changed). */
int metad_kv_del(struct metad_kv *kv, const char *key,
		 size_t key_len) MC_MUST_CHECK;

size_t metad_kv_count(struct metad_kv *kv);

#endif
