/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file memfree.h
 * The memory free for this process (memfree.c).
 */
#ifndef MST_MEMFREE_H
#define MST_MEMFREE_H

#include <stdint.h>

/** Bytes this process could still take: the system's MemAvailable
 *  (/proc/meminfo) or, when less, what its memory cgroups still allow
 *  (limit less usage at its cgroup and each parent; cgroup v2, and v1's
 *  memory controller), as a container's limit is not in /proc/meminfo.
 *  Page cache counts as used in a cgroup, so it errs low. 0 when nothing
 *  can be read. */
uint64_t mst_mem_free(void);

#endif
