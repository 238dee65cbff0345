/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file util.h
 * Clocks and random bytes for the store library.
 */
#ifndef MCS_UTIL_H
#define MCS_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "mc_compiler.h"

/** Monotonic milliseconds. */
uint64_t mcs_now_ms(void);
/** Wall-clock milliseconds since the epoch. */
uint64_t mcs_wall_ms(void);
/** Fill buf from getrandom(2); 0 or -errno. */
int mcs_random(void *buf, size_t len) MC_MUST_CHECK;

#endif
