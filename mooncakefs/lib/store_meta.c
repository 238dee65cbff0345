/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The public calls that only talk to the master: existence, sizes,
 * removal and replica descriptors.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

MOONCAKE_API int mooncake_store_is_exist(mooncake_store_t s, const char *key)
{
	int res = 0, rc = mcs_enter(s);

	if (rc)
		return rc;
	rc = mcs_key_ok(key) ?
		     mcs_master_exist(s->master, false, &key, 1, &res) :
		     -EINVAL;
	mcs_leave(s);
	return rc ? mc_err_to_store(rc) : res < 0 ? mc_err_to_store(res) : res;
}

MOONCAKE_API int mooncake_store_batch_is_exist(mooncake_store_t s,
					       const char **keys, size_t count,
					       int *results)
{
	const char **names;
	size_t *live, n_live = 0;
	int *res;
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	if (!count) {
		mcs_leave(s);
		return 0;
	}
	if (!keys || !results) {
		mcs_leave(s);
		return MC_STORE_INVALID_PARAMS;
	}
	names = calloc(count, sizeof(*names));
	live = calloc(count, sizeof(*live));
	res = calloc(count, sizeof(*res));
	if (!names || !live || !res) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < count; i++) {
		if (!mcs_key_ok(keys[i])) {
			results[i] = MC_STORE_INVALID_PARAMS;
			continue;
		}
		names[n_live] = keys[i];
		live[n_live++] = i;
	}
	if (n_live)
		rc = mcs_master_exist(s->master, true, names, n_live, res);
	for (size_t j = 0; j < n_live; j++) {
		int r = rc ? rc : res[j];
		results[live[j]] = r < 0 ? mc_err_to_store(r) : r;
	}
	rc = 0;
out:
	mcs_leave(s);
	free(names);
	free(live);
	free(res);
	return mc_err_to_store(rc);
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
	mcs_leave(s);
	if (rc)
		return mc_err_to_store(rc);
	return size < 0 ? mc_err_to_store((int)size) : size;
}

MOONCAKE_API int mooncake_store_batch_get_size(mooncake_store_t s,
					       const char **keys, size_t count,
					       int64_t *sizes)
{
	const char **names;
	size_t *live, n_live = 0;
	int64_t *got;
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	if (!count || !keys || !sizes) {
		mcs_leave(s);
		return count ? MC_STORE_INVALID_PARAMS : 0;
	}
	names = calloc(count, sizeof(*names));
	live = calloc(count, sizeof(*live));
	got = calloc(count, sizeof(*got));
	if (!names || !live || !got) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < count; i++) {
		if (!mcs_key_ok(keys[i])) {
			sizes[i] = MC_STORE_INVALID_PARAMS;
			continue;
		}
		names[n_live] = keys[i];
		live[n_live++] = i;
	}
	rc = n_live ? mcs_master_get_size(s->master, names, n_live, got) : 0;
	for (size_t j = 0; !rc && j < n_live; j++)
		sizes[live[j]] = got[j] < 0 ? mc_err_to_store((int)got[j]) :
					      got[j];
out:
	mcs_leave(s);
	free(names);
	free(live);
	free(got);
	return rc ? mc_err_to_store(rc) : 0;
}

MOONCAKE_API int mooncake_store_remove(mooncake_store_t s, const char *key,
				       bool force)
{
	int res = 0, rc = mcs_enter(s);

	if (rc)
		return rc;
	rc = mcs_key_ok(key) ?
		     mcs_master_remove(s->master, false, &key, 1, force, &res) :
		     -EINVAL;
	mcs_leave(s);
	return mc_err_to_store(rc ? rc : res);
}

MOONCAKE_API int mooncake_store_batch_remove(mooncake_store_t s,
					     const char **keys, size_t count,
					     bool force, int *results)
{
	const char **names;
	size_t *live, n_live = 0;
	int *res;
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	if (!count) {
		mcs_leave(s);
		return 0;
	}
	if (!keys || !results) {
		mcs_leave(s);
		return MC_STORE_INVALID_PARAMS;
	}
	names = calloc(count, sizeof(*names));
	live = calloc(count, sizeof(*live));
	res = calloc(count, sizeof(*res));
	if (!names || !live || !res) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < count; i++) {
		if (!mcs_key_ok(keys[i])) {
			results[i] = MC_STORE_INVALID_PARAMS;
			continue;
		}
		names[n_live] = keys[i];
		live[n_live++] = i;
	}
	if (n_live)
		rc = mcs_master_remove(s->master, true, names, n_live, force,
				       res);
	for (size_t j = 0; j < n_live; j++)
		results[live[j]] = mc_err_to_store(rc ? rc : res[j]);
	rc = 0;
out:
	mcs_leave(s);
	free(names);
	free(live);
	free(res);
	return mc_err_to_store(rc);
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
