/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A process's room below its memory cgroup's limit (mc_memcg.c): what it
 * may still take before the kernel reclaims from it or kills it for
 * memory, as a container's --memory or a systemd unit's MemoryMax sets.
 */
#ifndef MC_MEMCG_H
#define MC_MEMCG_H

#include <stdint.h>

/**
 * Bytes this process may still take before its memory cgroup (v2 or v1,
 * its own or an ancestor's limit) reclaims or kills it: the least over
 * the limited levels of the limit less the usage that cannot be
 * reclaimed (usage less inactive file pages). UINT64_MAX when no cgroup
 * limits it or none can be read. *limit (may be NULL) gets the limit of
 * the level that bounds it (UINT64_MAX with none). Reads a few small
 * files under /proc and /sys; thread-safe.
 */
uint64_t mc_memcg_room(uint64_t *limit);

/** The same over the given files (tests): the /proc/self/cgroup file,
 *  the v2 mount's root and v1's memory controller's root. */
uint64_t mc_memcg_room_at(const char *proc_cgroup, const char *v2_root,
			  const char *v1_root, uint64_t *limit);

#endif
