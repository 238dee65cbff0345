/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file restore.h
 * The master's state rebuilt from its record (restore.c): segments (they
 * then wait for their owners), complete objects with their replicas
 * reserved in the segments' allocators, orphans. Called by mst_create()
 * on a fresh master, before anything else sees it.
 */
#ifndef MST_RESTORE_H
#define MST_RESTORE_H

#include "master.h"

struct mst_restore_counts {
	uint64_t segments, objects, orphans;
	/* On segments the record lacks, or overlapping another replica:
	 * only a damaged record holds such. An object left with no replica
	 * is dropped too (one of size 0 stays). */
	uint64_t dropped_replicas;
	/* The record's count of objects, read before them (0 until then). */
	uint64_t in_record;
};

/** 0, or a negative errno / store code: m is then half built and only
 *  good for mst_destroy(). */
int mst_restore(struct master *m, struct mst_restore_counts *c);

#endif
