/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The public calls that only talk to the master: existence, sizes,
 * removal and replica descriptors.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "locs.h"
#include "store_int.h"

/* The master says key is not there (removed or replaced by another
 * client, within the rest of a read lease): a get of this client's no
 * longer reads it from the location cache either, so that this client's
 * answers agree. */
static void gone(struct mooncake_store *s, const char *key)
{
	mcs_locs_forget(s->locs, key); /* and lists asked for before */
}

/* The master's answer to a size question: a missing key is gone(), and a
 * cached object of another size was replaced (a get sized by this answer
 * reads the new object, not the cached one). */
static void sized(struct mooncake_store *s, const char *key, int64_t size)
{
	if (size >= 0)
		mcs_locs_sized(s->locs, key, (uint64_t)size);
	else if (mc_err_to_store((int)size) == MC_STORE_OBJECT_NOT_FOUND)
		gone(s, key);
}

MOONCAKE_API int mooncake_store_is_exist(mooncake_store_t s, const char *key)
{
	int res = 0, rc = mcs_enter(s);

	if (rc)
		return rc;
	rc = mcs_key_ok(key) ?
		     mcs_master_exist(s->master, false, &key, 1, &res) :
		     -EINVAL;
	if (!rc && !res)
		gone(s, key);
	mcs_leave(s);
	return rc ? mc_err_to_store(rc) : res < 0 ? mc_err_to_store(res) : res;
}

/*
 * A batch call's keys: the valid ones go to the master in one RPC
 * (names[j] is keys[live[j]]; res has room for one answer each), the
 * others answer -600 without one. batch_begin() returns a store code
 * (nothing entered), 0 (an empty batch: nothing to do) or 1 (entered:
 * finish with batch_end()).
 */
struct key_batch {
	const char **names;
	size_t *live, n;
	void *res;
};

static int batch_begin(mooncake_store_t s, const char **keys, size_t count,
		       bool out_ok, size_t res_size, struct key_batch *b)
{
	int rc = mcs_enter(s);

	*b = (struct key_batch){ 0 };
	if (rc)
		return rc;
	if (!count || !keys || !out_ok) {
		mcs_leave(s);
		return count ? MC_STORE_INVALID_PARAMS : 0;
	}
	b->names = calloc(count, sizeof(*b->names));
	b->live = calloc(count, sizeof(*b->live));
	b->res = calloc(count, res_size);
	if (!b->names || !b->live || !b->res) {
		mcs_leave(s);
		free(b->names);
		free(b->live);
		free(b->res);
		return MC_STORE_INTERNAL_ERROR;
	}
	for (size_t i = 0; i < count; i++) {
		if (mcs_key_ok(keys[i])) {
			b->names[b->n] = keys[i];
			b->live[b->n++] = i;
		}
	}
	return 1;
}

static void batch_end(mooncake_store_t s, struct key_batch *b)
{
	mcs_leave(s);
	free(b->names);
	free(b->live);
	free(b->res);
}

MOONCAKE_API int mooncake_store_batch_is_exist(mooncake_store_t s,
					       const char **keys, size_t count,
					       int *results)
{
	struct key_batch b;
	int rc = batch_begin(s, keys, count, results, sizeof(int), &b);
	const int *res = b.res;

	if (rc <= 0)
		return rc;
	for (size_t i = 0; i < count; i++)
		results[i] = MC_STORE_INVALID_PARAMS;
	rc = b.n ? mcs_master_exist(s->master, true, b.names, b.n, b.res) : 0;
	for (size_t j = 0; j < b.n; j++) {
		int r = rc ? rc : res[j];
		results[b.live[j]] = r < 0 ? mc_err_to_store(r) : r;
		if (!rc && !r)
			gone(s, b.names[j]);
	}
	batch_end(s, &b);
	return 0;
}

MOONCAKE_API int64_t mooncake_store_get_size(mooncake_store_t s,
					     const char *key)
{
	int64_t size = 0;
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	rc = mcs_key_ok(key) ? mcs_master_get_size(s->master, &key, 1, &size) :
			       -EINVAL;
	if (!rc)
		sized(s, key, size);
	mcs_leave(s);
	if (rc)
		return mc_err_to_store(rc);
	return size < 0 ? mc_err_to_store((int)size) : size;
}

MOONCAKE_API int mooncake_store_batch_get_size(mooncake_store_t s,
					       const char **keys, size_t count,
					       int64_t *sizes)
{
	struct key_batch b;
	int rc = batch_begin(s, keys, count, sizes, sizeof(int64_t), &b);
	const int64_t *got = b.res;

	if (rc <= 0)
		return rc;
	for (size_t i = 0; i < count; i++)
		sizes[i] = MC_STORE_INVALID_PARAMS;
	rc = b.n ? mcs_master_get_size(s->master, b.names, b.n, b.res) : 0;
	for (size_t j = 0; !rc && j < b.n; j++) {
		sizes[b.live[j]] = got[j] < 0 ? mc_err_to_store((int)got[j]) :
						got[j];
		sized(s, b.names[j], got[j]);
	}
	batch_end(s, &b);
	return rc ? mc_err_to_store(rc) : 0;
}

MOONCAKE_API int mooncake_store_remove(mooncake_store_t s, const char *key,
				       bool force)
{
	int res = 0, rc = mcs_enter(s);

	if (rc)
		return rc;
	rc = -EINVAL;
	if (mcs_key_ok(key)) {
		mcs_locs_forget(s->locs, key);
		rc = mcs_master_remove(s->master, false, &key, 1, force, &res);
	}
	mcs_leave(s);
	return mc_err_to_store(rc ? rc : res);
}

MOONCAKE_API int mooncake_store_batch_remove(mooncake_store_t s,
					     const char **keys, size_t count,
					     bool force, int *results)
{
	struct key_batch b;
	int rc = batch_begin(s, keys, count, results, sizeof(int), &b);
	const int *res = b.res;

	if (rc <= 0)
		return rc;
	for (size_t i = 0; i < count; i++)
		results[i] = MC_STORE_INVALID_PARAMS;
	for (size_t j = 0; j < b.n; j++)
		mcs_locs_forget(s->locs, b.names[j]);
	rc = b.n ? mcs_master_remove(s->master, true, b.names, b.n, force,
				     b.res) :
		   0;
	for (size_t j = 0; j < b.n; j++)
		results[b.live[j]] = mc_err_to_store(rc ? rc : res[j]);
	batch_end(s, &b);
	return 0;
}

static int64_t count_result(int rc, uint64_t count)
{
	if (rc)
		return mc_err_to_store(rc);
	return count > INT64_MAX ? INT64_MAX : (int64_t)count;
}

MOONCAKE_API int64_t mooncake_store_remove_by_regex(mooncake_store_t s,
						    const char *pattern,
						    bool force)
{
	uint64_t count = 0;
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	mcs_locs_clear(s->locs);
	rc = pattern ? mcs_master_remove_by_regex(s->master, pattern, force,
						  &count) :
		       -EINVAL;
	mcs_leave(s);
	return count_result(rc, count);
}

MOONCAKE_API int64_t mooncake_store_remove_all(mooncake_store_t s, bool force)
{
	uint64_t count = 0;
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	mcs_locs_clear(s->locs);
	rc = mcs_master_remove_all(s->master, force, &count);
	mcs_leave(s);
	return count_result(rc, count);
}

MOONCAKE_API int mooncake_store_get_replica_desc(mooncake_store_t s,
						 const char *key,
						 mooncake_replica_desc_t *out,
						 size_t max)
{
	Mcrpc__GetReplicaListResponse *resp = NULL;
	const Mcrpc__ReplicaList *rl;
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	if (!mcs_key_ok(key) || (max && !out)) {
		mcs_leave(s);
		return MC_STORE_INVALID_PARAMS;
	}
	rc = mcs_master_get_replicas(s->master, false, &key, 1, false, &resp);
	if (!rc) {
		rl = resp->results[0];
		rc = rl->code;
	}
	if (!rc) {
		for (size_t i = 0; i < rl->n_replicas && i < max; i++) {
			const Mcrpc__Replica *r = rl->replicas[i];
			mooncake_replica_desc_t *d = &out[i];

			memset(d, 0, sizeof(*d));
			snprintf(d->endpoint, sizeof(d->endpoint), "%s",
				 r->endpoint ? r->endpoint : "");
			d->address = r->address;
			d->size = r->size ? r->size : rl->size;
			d->is_memory = true;
			d->same_host = s->host_id[0] && r->host_id &&
				       !strcmp(r->host_id, s->host_id);
		}
		rc = rl->n_replicas > INT32_MAX ? INT32_MAX :
						  (int)rl->n_replicas;
	}
	mcs_leave(s);
	mcs_master_free(resp);
	return rc < 0 ? mc_err_to_store(rc) : rc;
}
