/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NIC choice from a priority matrix (rdma_path.h), upstream's algorithm.
 */
#include <string.h>

#include "rdma_path.h"

#define PATH_MAX_CAND 64

static int index_of(const char *name, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], name))
			return (int)i;
	return -1;
}

/* The NICs of one list (preferred or available) that are in names, in
 * the matrix's order, appended to out. */
static size_t collect(const json_t *list, const char *const *names, size_t n,
		      int *out, size_t have)
{
	size_t i;
	json_t *v;

	if (!json_is_array(list))
		return have;
	json_array_foreach(list, i, v) {
		int k;

		if (have >= PATH_MAX_CAND || !json_is_string(v))
			continue;
		k = index_of(json_string_value(v), names, n);
		if (k >= 0)
			out[have++] = k;
	}
	return have;
}

int rdma_path_pick(const json_t *matrix, const char *location,
		   const char *const *names, size_t n, unsigned retry,
		   unsigned spread)
{
	const json_t *entry = NULL;
	int cand[PATH_MAX_CAND];
	size_t n_pref, n_all;

	if (!n)
		return -1;
	if (json_is_object(matrix) && location)
		entry = json_object_get(matrix, location);
	if (!json_is_array(entry)) /* unknown location: every NIC */
		return (int)((spread + retry) % n);
	n_pref = collect(json_array_get(entry, 0), names, n, cand, 0);
	n_all = collect(json_array_get(entry, 1), names, n, cand, n_pref);
	if (!n_all)
		return (int)((spread + retry) % n);
	if (retry)
		return cand[(retry - 1) % n_all];
	if (n_pref)
		return cand[spread % n_pref];
	return cand[n_pref + spread % (n_all - n_pref)];
}
