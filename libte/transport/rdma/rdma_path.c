/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NIC choice from a priority matrix (rdma_path.h), upstream's algorithm.
 */
#include <stdbool.h>
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

/* Side's candidates in the order retries take them, each once. */
static size_t side_candidates(const struct rdma_path_side *sd, unsigned retry,
			      unsigned spread, int *out)
{
	size_t k = 0;

	for (unsigned t = 0; t <= sd->n && k < PATH_MAX_CAND; t++) {
		int c = rdma_path_pick(sd->matrix, sd->location, sd->names,
				       sd->n, retry + t, spread);
		bool seen = false;

		for (size_t j = 0; j < k; j++)
			seen = seen || out[j] == c;
		if (c >= 0 && !seen)
			out[k++] = c;
	}
	return k;
}

int rdma_path_pick_pair(const struct rdma_path_side *l,
			const struct rdma_path_side *r, unsigned retry,
			unsigned spread, rdma_path_score_fn score, void *arg,
			int *li, int *ri)
{
	int lcand[PATH_MAX_CAND], rcand[PATH_MAX_CAND];
	size_t nl, nr;
	int spare_l = -1, spare_r = -1;

	*li = rdma_path_pick(l->matrix, l->location, l->names, l->n, retry,
			     spread);
	*ri = rdma_path_pick(r->matrix, r->location, r->names, r->n, retry,
			     spread);
	if (*li < 0 || *ri < 0)
		return -1;
	if (!score || score(arg, *li, *ri) == 2)
		return 0;
	nl = side_candidates(l, retry, spread, lcand);
	nr = side_candidates(r, retry, spread, rcand);
	for (size_t i = 0; i < nl; i++)
		for (size_t j = 0; j < nr; j++) {
			int v = score(arg, lcand[i], rcand[j]);

			if (v == 2) {
				*li = lcand[i];
				*ri = rcand[j];
				return 0;
			}
			if (v == 1 && spare_l < 0) {
				spare_l = lcand[i];
				spare_r = rcand[j];
			}
		}
	if (spare_l >= 0 && score(arg, *li, *ri) != 1) {
		*li = spare_l;
		*ri = spare_r;
	}
	return 0;
}

bool rdma_path_paused(uint64_t until, uint64_t pause_ms, uint64_t up_at,
		      uint64_t now)
{
	return until > now && (until < pause_ms || until - pause_ms >= up_at);
}
