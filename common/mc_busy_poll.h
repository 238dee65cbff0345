/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_busy_poll.h
 * Adaptive busy polling of a socket before sleeping on it.
 *
 * Why: a thread that sleeps in read(2) is woken by an inter-processor
 * interrupt when its data arrives. On a VM whose idle vCPU halts, that
 * wake-up costs 30-80 us, ten times a loopback round trip between two
 * running threads (about 5 us). A reader that expects an answer soon
 * (an RPC client after its request, a server between a client's
 * back-to-back requests) polls the socket without sleeping for a short
 * window, then sleeps as usual.
 *
 * The window adapts as the guest haltpoll cpuidle governor's does: it
 * starts at max_us; a wait that ended within max_us but after the window
 * grows it (doubles, from max_us / 4 when it was 0); a wait longer than
 * max_us halves it, and below 1 us it is 0. A remote peer or an idle
 * connection thus stops costing CPU after a few waits, and starts again
 * once answers come fast. Each poll iteration yields the CPU
 * (sched_yield) to any other runnable thread, so a spinner never delays
 * the thread it waits for on a busy machine. At most one thread per
 * online CPU spins at once *on the host*, and none while more threads are
 * runnable on the host than it has CPUs (/proc/loadavg's count, read at
 * most once per ms per process): a spinner would then only delay threads
 * with work, perhaps the one it waits for. The others sleep at once, as
 * without busy polling. The host-wide count is a table of slots in
 * /dev/shm/mc-spinners.<euid> (512 bytes, mode 0600, shared by that
 * user's processes; a slot left by a thread that died spinning is free
 * after 1 s; MC_BUSY_POLL_TABLE names another file, for tests); where it
 * cannot be used (another owner, no /dev/shm) the count is per process.
 *
 * One struct per waiter (a connection, or a client's connections to one
 * peer: updates are atomic, races only blur the window).
 */
#ifndef MC_BUSY_POLL_H
#define MC_BUSY_POLL_H

#include <stdint.h>

#include "mc_compiler.h"

struct mc_busy_poll {
	unsigned max_us; /* 0: never spin */
	_Atomic unsigned window_us;
};

/** max_us 0 turns busy polling off (a plain poll(2)). */
void mc_busy_poll_init(struct mc_busy_poll *bp, unsigned max_us);

/**
 * Wait until fd is readable, has hung up or has an error (the next read
 * reports which).
 * @param timeout_ms  sleep at most this long; -1: no limit
 * @return 0 when readable, -ETIMEDOUT, or a negative errno of poll(2)
 */
int mc_busy_poll_wait(struct mc_busy_poll *bp, int fd,
		      int timeout_ms) MC_MUST_CHECK;

/**
 * The host's table of spinner slots: its path, or NULL where the count is
 * per process; *slots: how many threads may spin at once. The table is 64
 * little-endian uint64 slots, 0 free, else the CLOCK_MONOTONIC ms at which
 * a thread took it (tests fill it to see waits refused).
 */
const char *mc_busy_poll_table(unsigned *slots);

/** This process's spins so far: taken, refused (all slots busy), and
 *  crowded out (more threads runnable than CPUs). */
void mc_busy_poll_counts(uint64_t *taken, uint64_t *refused, uint64_t *crowded);

#endif
