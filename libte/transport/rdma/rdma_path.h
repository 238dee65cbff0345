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
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/** One side of a transfer for rdma_path_pick_pair(): its matrix (may be
 *  NULL), the buffer's location and its NICs' names. */
struct rdma_path_side {
	const json_t *matrix;
	const char *location;
	const char *const *names;
	size_t n;
};

/** How usable a (local, peer) NIC pair is: 2 good, 1 only as a last
 *  resort (a rail paused after a failure), 0 not at all (no registration
 *  or key there). */
typedef int (*rdma_path_score_fn)(void *arg, int local, int peer);

/**
 * The (local, peer) NIC pair for a slice. The pair of rdma_path_pick() on
 * both sides with retry comes first; when score() does not rate it 2,
 * the candidates of each side (the picks of retry, retry + 1, ...: every
 * NIC its matrix lists for the location, or every NIC) are tried, local
 * one first and the peer's in turn, and the first pair rated 2 is taken,
 * else the first rated 1, else the first pair itself (which the caller
 * then refuses). So a failed rail is avoided by every new slice while
 * another pair can serve, and used when none can. score may be NULL
 * (every pair good). 0, or -1 when a side has no NIC.
 */
int rdma_path_pick_pair(const struct rdma_path_side *l,
			const struct rdma_path_side *r, unsigned retry,
			unsigned spread, rdma_path_score_fn score, void *arg,
			int *li, int *ri);

/**
 * Whether a rail paused until `until` (mono ms, set pause_ms after its
 * failure) is paused at now, its local NIC's port having last come up at
 * up_at (0: never went down): a pause that began before the port came
 * back up is over, as the failure was the port's.
 */
bool rdma_path_paused(uint64_t until, uint64_t pause_ms, uint64_t up_at,
		      uint64_t now);

#endif
