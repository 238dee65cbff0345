/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file etcd_json.h
 * The pieces of etcd's v3 JSON gateway messages every user builds or
 * reads: keys and values travel in base64, int64 fields as strings.
 * Functions return 0 or a negative code (-ENOMEM, -EBADMSG for an answer
 * that is not what the gateway sends).
 */
#ifndef MC_ETCD_JSON_H
#define MC_ETCD_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "mc_compiler.h"

/** A new JSON string holding base64(p[0..n)); NULL when out of memory. */
json_t *mc_etcd_json_b64(const void *p, size_t n);

/** {"key": b64(key)} plus "value": b64(val[0..len)) when with_val. */
json_t *mc_etcd_json_kv(const char *key, const void *val, size_t len,
			bool with_val);

/** An int64 field (a string or a number; absent or null: 0). */
int mc_etcd_json_int(json_t *o, const char *name, long long *out) MC_MUST_CHECK;

/** The first kv of a range response: 0, -ENOENT (none), -EBADMSG. */
int mc_etcd_json_first_kv(json_t *range, json_t **kv) MC_MUST_CHECK;

/** A kv's value (absent: empty) decoded into a new buffer *val (free()),
 *  NUL-terminated past *len. */
int mc_etcd_json_value(json_t *kv, char **val, size_t *len) MC_MUST_CHECK;

#endif
