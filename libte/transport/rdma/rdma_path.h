/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file rdma_path.h
 * Which NIC serves a slice (rdma_path.c): upstream's choice from a
 * priority matrix ({"<location>": [[preferred], [available]]}), on either
 * side of a transfer. Pure: no verbs, no state, so the unit tests drive it
 * with topologies one soft-RoCE device cannot show (several NICs, NUMA
 * nodes, GPUs) and check striping and failover.
 *
 * Threads: any.
 */
#ifndef TE_RDMA_PATH_H
#define TE_RDMA_PATH_H

#include <jansson.h>
#include <stddef.h>

/**
 * The index in names[0..n) of the NIC to use for memory at location.
 *  - retry 0: among the location's preferred NICs that are in names, the
 *    one spread selects (spread % count: a random number, or a counter
 *    with MC_PATH_ROUNDROBIN); none preferred: the same among available.
 *  - retry k >= 1: entry (k - 1) mod (preferred + available), walking the
 *    preferred list and then the available one, so every retry moves to
 *    another NIC while there is one.
 *  - a location the matrix lacks ("*", unknown), or no matrix: every NIC
 *    in names is usable, spread % n (retry k: (spread + k) % n).
 * Names in the matrix that are not in names are skipped. Returns -1 only
 * when n is 0.
 */
int rdma_path_pick(const json_t *matrix, const char *location,
		   const char *const *names, size_t n, unsigned retry,
		   unsigned spread);

#endif
