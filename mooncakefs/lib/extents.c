/* SPDX-License-Identifier: Apache-2.0 */
/* Sorted, merged byte ranges (see extents.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "extents.h"

void mcs_extents_free(struct mcs_extents *x)
{
	free(x->v);
	x->v = NULL;
	x->n = x->cap = 0;
}

/* Index of the first range whose end >= pos (it may touch pos). */
static size_t first_reaching(const struct mcs_extents *x, uint64_t pos)
{
	size_t lo = 0, hi = x->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (x->v[mid].end < pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int mcs_extents_add(struct mcs_extents *x, uint64_t start, uint64_t end)
{
	size_t i = first_reaching(x, start), j = i;

	if (start >= end)
		return 0;
	/* Ranges i..j-1 overlap or touch [start, end): merge them. */
	while (j < x->n && x->v[j].start <= end)
		j++;
	if (j > i) {
		if (x->v[i].start < start)
			start = x->v[i].start;
		if (x->v[j - 1].end > end)
			end = x->v[j - 1].end;
		x->v[i] = (struct mcs_extent){ .start = start, .end = end };
		memmove(&x->v[i + 1], &x->v[j], (x->n - j) * sizeof(*x->v));
		x->n -= j - i - 1;
		return 0;
	}
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 4;
		struct mcs_extent *v = realloc(x->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		x->v = v;
		x->cap = cap;
	}
	memmove(&x->v[i + 1], &x->v[i], (x->n - i) * sizeof(*x->v));
	x->v[i] = (struct mcs_extent){ .start = start, .end = end };
	x->n++;
	return 0;
}

bool mcs_extents_gap(const struct mcs_extents *x, uint64_t from, uint64_t limit,
		     uint64_t *gs, uint64_t *ge)
{
	size_t i = first_reaching(x, from);

	/* A range ending exactly at from does not cover it. */
	if (i < x->n && x->v[i].end == from)
		i++;
	while (from < limit) {
		if (i == x->n || x->v[i].start > from) {
			*gs = from;
			*ge = i == x->n || x->v[i].start > limit ?
				      limit :
				      x->v[i].start;
			return true;
		}
		from = x->v[i++].end;
	}
	return false;
}
