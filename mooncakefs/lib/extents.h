/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file extents.h
 * A set of byte ranges [start, end) kept sorted, disjoint and merged
 * (touching ranges become one): what a writer has written so far, so that
 * close() can find the bytes never written. Writes in order or in reverse
 * order keep it at one range. Not thread-safe: the caller locks.
 */
#ifndef MCS_EXTENTS_H
#define MCS_EXTENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mc_compiler.h"

struct mcs_extent {
	uint64_t start, end;
};

struct mcs_extents {
	struct mcs_extent *v;
	size_t n, cap;
};

/* A zeroed struct mcs_extents is an empty set. */
void mcs_extents_free(struct mcs_extents *x);

/** Add [start, end) (start < end); 0 or -ENOMEM (the set is unchanged). */
int mcs_extents_add(struct mcs_extents *x, uint64_t start,
		    uint64_t end) MC_MUST_CHECK;

/**
 * The first gap of [from, limit) not covered by the set: true with
 * [*gs, *ge), or false when everything there is covered.
 */
bool mcs_extents_gap(const struct mcs_extents *x, uint64_t from, uint64_t limit,
		     uint64_t *gs, uint64_t *ge);

#endif
