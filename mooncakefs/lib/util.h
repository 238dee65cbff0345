/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file util.h
 * Clocks, random bytes and thread helpers for the store library.
 */
#ifndef MCS_UTIL_H
#define MCS_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "mc_compiler.h"

/** Monotonic milliseconds. */
uint64_t mcs_now_ms(void);
/** Wall-clock milliseconds since the epoch. */
uint64_t mcs_wall_ms(void);
/** Fill buf from getrandom(2); 0 or -errno. */
int mcs_random(void *buf, size_t len) MC_MUST_CHECK;

/** pthread_create with every signal blocked in the new thread (signals
 *  belong to the application); 0 or -errno. */
int mcs_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/** When rc is one of this process's own limits (-EMFILE, -ENFILE, -ENOMEM,
 *  -EAGAIN: descriptors, memory, threads), what to look at, naming the
 *  limits that are set (ulimit -n, -v, -u) into buf; otherwise NULL. */
const char *mcs_limit_hint(int rc, char *buf, size_t len);

/** A transfer failed with rc: when that is this process's own limit
 *  (out of file descriptors, memory or threads), a warning naming it, at
 *  most every 10 s (the failures themselves are debug lines: a dead peer
 *  fails many). */
void mcs_note_own_limit(int rc);

/** rc, a transfer's result, says its peer could not be reached or went
 *  away (refused, reset, unreachable, timed out): not this process's
 *  limits, not a master's restart. */
bool mcs_peer_unreachable(int rc);

#endif
