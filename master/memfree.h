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

/** What the memory cgroups named in the file cgroups (as
 *  /proc/self/cgroup) still allow, under the cgroup filesystems at sysfs
 *  (as /sys/fs/cgroup: v2 there or at sysfs/unified, v1's memory
 *  controller at sysfs/memory): the smallest limit less usage at each
 *  cgroup and its parents; UINT64_MAX where none sets a limit. */
uint64_t mst_cgroup_room(const char *cgroups, const char *sysfs);

#endif
