/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The public put and get calls: argument checks, then the engines of
 * store_put.c and store_get.c; internal codes become store codes here.
 */
#include <errno.h>
#include <stdlib.h>

#include "store_int.h"

static int64_t get_result(int64_t r)
{
	return r >= 0 ? r : mc_err_to_store((int)r);
}

MOONCAKE_API int mooncake_store_put(mooncake_store_t s, const char *key,
				    const void *value, size_t size,
				    const mooncake_replicate_config_t *config)
{
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	rc = mcs_replicate_config_check(config);
	if (!rc)
		rc = mcs_put_staged(s, key, value, size, config);
	mcs_leave(s);
	return mc_err_to_store(rc);
}

MOONCAKE_API int
mooncake_store_put_from(mooncake_store_t s, const char *key, const void *buffer,
			size_t size, const mooncake_replicate_config_t *config)
{
	void *part = (void *)buffer;
	struct mcs_put_key k = {
		.key = key, .parts = &part, .part_sizes = &size, .n_parts = 1
	};
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	k.result = mcs_replicate_config_check(config);
	if (!k.result)
		(void)mcs_put_keys(s, &k, 1, config, false);
	mcs_leave(s);
	return mc_err_to_store(k.result);
}

MOONCAKE_API int64_t mooncake_store_get_into(mooncake_store_t s,
					     const char *key, void *buffer,
					     size_t size)
{
	struct mcs_get_key k = {
		.key = key, .parts = &buffer, .part_sizes = &size, .n_parts = 1
	};
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	(void)mcs_get_keys(s, &k, 1, false);
	mcs_leave(s);
	return get_result(k.result);
}

MOONCAKE_API int64_t mooncake_store_get(mooncake_store_t s, const char *key,
					void *buffer, size_t size)
{
	int64_t r;
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	r = mcs_get_staged(s, key, buffer, size);
	mcs_leave(s);
	return get_result(r);
}

/* Shared by the batch forms: parts of key i start at first[i]. */
static int part_index(const size_t *n_parts, size_t count, size_t **first)
{
	size_t sum = 0;

	*first = calloc(count ? count : 1, sizeof(**first));
	if (!*first)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++) {
		(*first)[i] = sum;
		sum += n_parts ? n_parts[i] : 1;
	}
	return 0;
}

static int batch_put(mooncake_store_t s, const char **keys, size_t count,
		     void **buffers, const size_t *sizes, const size_t *n_parts,
		     const mooncake_replicate_config_t *config, int *results)
{
	struct mcs_put_key *k;
	size_t *first;
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	if (!count) {
		mcs_leave(s);
		return 0;
	}
	if (!keys || !buffers || !sizes || !results ||
	    mcs_replicate_config_check(config)) {
		mcs_leave(s);
		for (size_t i = 0; results && i < count; i++)
			results[i] = MC_STORE_INVALID_PARAMS;
		return MC_STORE_INVALID_PARAMS;
	}
	k = calloc(count, sizeof(*k));
	if (!k || part_index(n_parts, count, &first)) {
		free(k);
		mcs_leave(s);
		return MC_STORE_INTERNAL_ERROR;
	}
	for (size_t i = 0; i < count; i++)
		k[i] = (struct mcs_put_key){
			.key = keys[i],
			.parts = &buffers[first[i]],
			.part_sizes = &sizes[first[i]],
			.n_parts = n_parts ? n_parts[i] : 1,
		};
	(void)mcs_put_keys(s, k, count, config, true);
	mcs_leave(s);
	for (size_t i = 0; i < count; i++)
		results[i] = mc_err_to_store(k[i].result);
	free(first);
	free(k);
	return 0;
}

static int batch_get(mooncake_store_t s, const char **keys, size_t count,
		     void **buffers, const size_t *sizes, const size_t *n_parts,
		     int64_t *results)
{
	struct mcs_get_key *k;
	size_t *first;
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	if (!count) {
		mcs_leave(s);
		return 0;
	}
	if (!keys || !buffers || !sizes || !results) {
		mcs_leave(s);
		return MC_STORE_INVALID_PARAMS;
	}
	k = calloc(count, sizeof(*k));
	if (!k || part_index(n_parts, count, &first)) {
		free(k);
		mcs_leave(s);
		return MC_STORE_INTERNAL_ERROR;
	}
	for (size_t i = 0; i < count; i++)
		k[i] = (struct mcs_get_key){
			.key = keys[i],
			.parts = &buffers[first[i]],
			.part_sizes = &sizes[first[i]],
			.n_parts = n_parts ? n_parts[i] : 1,
		};
	(void)mcs_get_keys(s, k, count, true);
	mcs_leave(s);
	for (size_t i = 0; i < count; i++)
		results[i] = get_result(k[i].result);
	free(first);
	free(k);
	return 0;
}

MOONCAKE_API int
mooncake_store_batch_put_from(mooncake_store_t s, const char **keys,
			      void **buffers, const size_t *sizes, size_t count,
			      const mooncake_replicate_config_t *config,
			      int *results)
{
	return batch_put(s, keys, count, buffers, sizes, NULL, config, results);
}

MOONCAKE_API int mooncake_store_batch_get_into(mooncake_store_t s,
					       const char **keys,
					       void **buffers,
					       const size_t *sizes,
					       size_t count, int64_t *results)
{
	return batch_get(s, keys, count, buffers, sizes, NULL, results);
}

MOONCAKE_API int mooncake_store_batch_put_from_multi(
	mooncake_store_t s, const char **keys, size_t count, void **buffers,
	const size_t *sizes, const size_t *n_parts,
	const mooncake_replicate_config_t *config, int *results)
{
	if (count && !n_parts)
		return MC_STORE_INVALID_PARAMS;
	return batch_put(s, keys, count, buffers, sizes, n_parts, config,
			 results);
}

MOONCAKE_API int mooncake_store_batch_get_into_multi(
	mooncake_store_t s, const char **keys, size_t count, void **buffers,
	const size_t *sizes, const size_t *n_parts, int64_t *results)
{
	if (count && !n_parts)
		return MC_STORE_INVALID_PARAMS;
	return batch_get(s, keys, count, buffers, sizes, n_parts, results);
}
