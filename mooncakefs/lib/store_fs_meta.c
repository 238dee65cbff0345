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

#include "locs.h"
#include "store_int.h"

#include "mooncake/store_fs.h"

/* Stat of key (dir: or of the directory key/); 0 or a store code. The
 * directory "" ("/": the keys starting with '/') has the empty key. */
static int stat_key(mooncake_store_t s, const char *key, bool dir,
		    Mcrpc__StatResponse **out)
{
	int rc = mcs_enter(s);

	*out = NULL;
	if (rc)
		return rc;
	rc = mcs_key_ok(key) || (dir && key) ?
		     mcs_master_stat(s->master, key, dir, out) :
		     -EINVAL;
	mcs_leave(s);
	return mc_err_to_store(rc);
}

static int stat_any(mooncake_store_t s, const char *key, bool dir,
		    mooncake_obj_stat_t *out)
{
	Mcrpc__StatResponse *r;
	int rc;

	if (!out)
		return MC_STORE_INVALID_PARAMS;
	rc = stat_key(s, key, dir, &r);
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
		.attr = mc_rpc_attr_of(r->attr),
		.is_dir = r->is_dir,
		.subdirs = r->subdirs,
	};
	mcs_master_free(r);
	return 0;
}

MOONCAKE_API int mooncake_store_stat(mooncake_store_t s, const char *key,
				     mooncake_obj_stat_t *out)
{
	return stat_any(s, key, false, out);
}

MOONCAKE_API int mooncake_store_stat_dir(mooncake_store_t s, const char *key,
					 mooncake_obj_stat_t *out)
{
	return stat_any(s, key, true, out);
}

/* A directory path: a prefix of at least one byte and its '/'. */
static bool dir_path_ok(const char *path)
{
	size_t n = path ? strlen(path) : 0;

	return n >= 2 && path[n - 1] == '/' && mcs_key_ok(path);
}

MOONCAKE_API int mooncake_store_setattr(mooncake_store_t s, const char *key,
					bool dir, unsigned mask,
					const mooncake_fs_attr_t *attr,
					mooncake_fs_attr_t *out)
{
	Mcrpc__Attr am = MCRPC__ATTR__INIT;
	Mcrpc__StatResponse *r = NULL;
	int rc;

	if (!attr || !(dir ? dir_path_ok(key) : mcs_key_ok(key)))
		return MC_STORE_INVALID_PARAMS;
	rc = mcs_enter(s);
	if (rc)
		return rc;
	mc_rpc_attr_msg(attr, &am);
	rc = mcs_master_setattr(s->master, key, dir, mask, &am, &r);
	mcs_leave(s);
	if (!rc && out)
		*out = mc_rpc_attr_of(r->attr);
	mcs_master_free(r);
	return mc_err_to_store(rc);
}

MOONCAKE_API int mooncake_store_mkdir(mooncake_store_t s, const char *path,
				      const mooncake_fs_attr_t *attr)
{
	Mcrpc__Attr am = MCRPC__ATTR__INIT;
	int rc;

	if (!dir_path_ok(path))
		return MC_STORE_INVALID_PARAMS;
	rc = mcs_enter(s);
	if (rc)
		return rc;
	if (attr)
		mc_rpc_attr_msg(attr, &am);
	rc = mcs_master_mkdir(s->master, path, attr ? &am : NULL);
	mcs_leave(s);
	return mc_err_to_store(rc);
}

MOONCAKE_API int mooncake_store_rmdir(mooncake_store_t s, const char *path)
{
	int rc;

	if (!dir_path_ok(path))
		return MC_STORE_INVALID_PARAMS;
	rc = mcs_enter(s);
	if (rc)
		return rc;
	rc = mcs_master_rmdir(s->master, path);
	mcs_leave(s);
	return mc_err_to_store(rc);
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
	rc = stat_key(s, key, false, &r);
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

static int list_any(mooncake_store_t s, const char *prefix,
		    const char *delimiter, const char *start_after,
		    unsigned limit, bool dirs,
		    void (*fn)(void *arg, const mooncake_list_entry_t *e),
		    void *arg, bool *truncated)
{
	Mcrpc__ListResponse *r = NULL;
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	rc = mcs_master_list(s->master, prefix, delimiter, start_after, limit,
			     dirs, &r);
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
			.attr = mc_rpc_attr_of(x->attr),
		};

		fn(arg, &e);
	}
	if (truncated)
		*truncated = r->truncated;
	rc = r->n_entries > INT_MAX ? INT_MAX : (int)r->n_entries;
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
	return list_any(s, prefix, delimiter, start_after, limit, false, fn,
			arg, truncated);
}

MOONCAKE_API int
mooncake_store_list_dirs(mooncake_store_t s, const char *prefix,
			 const char *delimiter, const char *start_after,
			 unsigned limit,
			 void (*fn)(void *arg, const mooncake_list_entry_t *e),
			 void *arg, bool *truncated)
{
	return list_any(s, prefix, delimiter, start_after, limit, true, fn, arg,
			truncated);
}

static int rename_any(mooncake_store_t s, const char *from, const char *to,
		      bool no_replace, bool prefix, bool version)
{
	int rc = mcs_enter(s);
	bool ok = prefix ? dir_path_ok(from) && dir_path_ok(to) :
			   mcs_key_ok(from) && mcs_key_ok(to);

	if (rc)
		return rc;
	if (ok && prefix) {
		mcs_locs_clear(s->locs);
	} else if (ok) {
		mcs_locs_forget(s->locs, from);
		mcs_locs_forget(s->locs, to);
	}
	rc = ok ? mcs_master_rename(s->master, from, to, no_replace, prefix,
				    version) :
		  -EINVAL;
	mcs_leave(s);
	return mc_err_to_store(rc);
}

MOONCAKE_API int mooncake_store_rename(mooncake_store_t s, const char *from,
				       const char *to, bool no_replace)
{
	return rename_any(s, from, to, no_replace, false, false);
}

MOONCAKE_API int mooncake_store_rename_version(mooncake_store_t s,
					       const char *from, const char *to,
					       bool no_replace)
{
	return rename_any(s, from, to, no_replace, false, true);
}

MOONCAKE_API int mooncake_store_rename_dir(mooncake_store_t s, const char *from,
					   const char *to)
{
	return rename_any(s, from, to, false, true, false);
}

MOONCAKE_API int mooncake_store_pool_stat(mooncake_store_t s,
					  mooncake_pool_stat_t *out)
{
	Mcrpc__GetStatusResponse *r = NULL;
	uint64_t largest = 0;
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
	for (size_t i = 0; i < r->n_segments; i++) {
		const Mcrpc__SegmentStatus *st = r->segments[i];

		if (!st)
			continue;
		mounted += st->mounted;
		/* Restored ones too, as capacity counts them: their owners
		 * re-mount within a ping of a restart. */
		if (st->segment && st->segment->size > largest)
			largest = st->segment->size;
	}
	*out = (mooncake_pool_stat_t){
		.capacity = r->capacity,
		.allocated = r->allocated,
		.keys = r->keys,
		.clients = r->clients,
		.segments = mounted,
		.largest_segment = largest,
	};
	mcs_master_free(r);
	return 0;
}

MOONCAKE_API int mooncake_store_largest_segment(mooncake_store_t s,
						uint64_t *out)
{
	mooncake_pool_stat_t ps;
	uint64_t view;
	int rc;

	if (!out)
		return MC_STORE_INVALID_PARAMS;
	rc = mcs_enter(s);
	if (rc)
		return rc;
	view = mcs_master_view(s->master) + 1;
	mcs_leave(s);
	if (atomic_load(&s->largest_view) == view) {
		*out = atomic_load(&s->largest);
		return 0;
	}
	/* The view moved (or was never asked about): GetStatus, once. A
	 * failed ask is not repeated in this view either (the master away:
	 * no call waits for its timeout): the last size stands. */
	rc = mooncake_store_pool_stat(s, &ps);
	if (!rc)
		atomic_store(&s->largest, ps.largest_segment);
	atomic_store(&s->largest_view, view);
	*out = atomic_load(&s->largest);
	return rc;
}
