/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store_fs.h calls that only talk to the master: stat and replica
 * descriptions (Stat: no lease), paged listing, rename and the pool's
 * figures. Callbacks run after the handle is left, so they may call the
 * store again.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "store_int.h"

#include "mooncake/store_fs.h"

/* Stat of key; 0 or a store code. */
static int stat_key(mooncake_store_t s, const char *key,
		    Mcrpc__StatResponse **out)
{
	int rc = mcs_enter(s);

	*out = NULL;
	if (rc)
		return rc;
	rc = mcs_key_ok(key) ? mcs_master_stat(s->master, key, out) : -EINVAL;
	mcs_leave(s);
	return mc_err_to_store(rc);
}

MOONCAKE_API int mooncake_store_stat(mooncake_store_t s, const char *key,
				     mooncake_obj_stat_t *out)
{
	Mcrpc__StatResponse *r;
	int rc;

	if (!out)
		return MC_STORE_INVALID_PARAMS;
	rc = stat_key(s, key, &r);
	if (rc)
		return rc;
	*out = (mooncake_obj_stat_t){
		.size = r->size,
		.mtime_ms = r->mtime_ms,
		.replicas = r->replicas,
		.holds = r->holds,
		.lease_ms = r->lease_ms,
		.hard_pin = r->hard_pin,
		.soft_pin_ms = r->soft_pin_ms,
		.version = r->version,
	};
	mcs_master_free(r);
	return 0;
}

MOONCAKE_API int mooncake_store_replica_text(mooncake_store_t s,
					     const char *key, char *buf,
					     size_t len)
{
	Mcrpc__StatResponse *r;
	size_t at = 0;
	int rc;

	if (!buf && len)
		return MC_STORE_INVALID_PARAMS;
	rc = stat_key(s, key, &r);
	if (rc)
		return rc;
	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < r->n_replica_list; i++) {
		const Mcrpc__Replica *rep = r->replica_list[i];
		int n;

		if (at + 1 >= len)
			break;
		n = snprintf(buf + at, len - at, "%s@0x%" PRIx64 "\n",
			     rep->endpoint ? rep->endpoint : "", rep->address);
		if (n < 0)
			break;
		at += (size_t)n < len - at ? (size_t)n : len - at - 1;
	}
	rc = r->n_replica_list > INT_MAX ? INT_MAX : (int)r->n_replica_list;
	mcs_master_free(r);
	return rc;
}

MOONCAKE_API int mooncake_store_list(mooncake_store_t s, const char *prefix,
				     const char *delimiter,
				     const char *start_after, unsigned limit,
				     void (*fn)(void *arg,
						const mooncake_list_entry_t *e),
				     void *arg, bool *truncated)
{
	Mcrpc__ListResponse *r = NULL;
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	rc = mcs_master_list(s->master, prefix, delimiter, start_after, limit,
			     &r);
	mcs_leave(s);
	if (rc)
		return mc_err_to_store(rc);
	for (size_t i = 0; fn && i < r->n_entries; i++) {
		const Mcrpc__ListEntry *x = r->entries[i];
		mooncake_list_entry_t e = {
			.name = x->name ? x->name : "",
			.size = x->size,
			.mtime_ms = x->mtime_ms,
			.is_prefix = x->is_prefix,
			.version = x->version,
		};

		fn(arg, &e);
	}
	if (truncated)
		*truncated = r->truncated;
	rc = r->n_entries > INT_MAX ? INT_MAX : (int)r->n_entries;
	mcs_master_free(r);
	return rc;
}

MOONCAKE_API int mooncake_store_rename(mooncake_store_t s, const char *from,
				       const char *to, bool no_replace)
{
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	rc = mcs_key_ok(from) && mcs_key_ok(to) ?
		     mcs_master_rename(s->master, from, to, no_replace) :
		     -EINVAL;
	mcs_leave(s);
	return mc_err_to_store(rc);
}

MOONCAKE_API int mooncake_store_pool_stat(mooncake_store_t s,
					  mooncake_pool_stat_t *out)
{
	Mcrpc__GetStatusResponse *r = NULL;
	uint32_t mounted = 0;
	int rc;

	if (!out)
		return MC_STORE_INVALID_PARAMS;
	rc = mcs_enter(s);
	if (rc)
		return rc;
	rc = mcs_master_get_status(s->master, &r);
	mcs_leave(s);
	if (rc)
		return mc_err_to_store(rc);
	for (size_t i = 0; i < r->n_segments; i++)
		mounted += r->segments[i] && r->segments[i]->mounted;
	*out = (mooncake_pool_stat_t){
		.capacity = r->capacity,
		.allocated = r->allocated,
		.keys = r->keys,
		.clients = r->clients,
		.segments = mounted,
	};
	mcs_master_free(r);
	return 0;
}
