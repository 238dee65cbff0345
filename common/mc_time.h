/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_time.h
 * The monotonic clock (CLOCK_MONOTONIC): deadlines, timeouts and elapsed
 * times in every part. It never jumps with the wall clock, and counts
 * from an unspecified start, so only differences mean anything.
 */
#ifndef MC_TIME_H
#define MC_TIME_H

#include <stdint.h>
#include <pthread.h>
#include <time.h>

/** CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t mc_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/** CLOCK_MONOTONIC in microseconds. */
static inline uint64_t mc_mono_us(void)
{
	return mc_mono_ns() / 1000u;
}

/** CLOCK_MONOTONIC in milliseconds. */
static inline uint64_t mc_mono_ms(void)
{
	return mc_mono_ns() / 1000000u;
}

/**
 * The CLOCK_MONOTONIC time ms milliseconds from now, as the absolute
 * deadline pthread_cond_timedwait() takes on a condition variable whose
 * clock is CLOCK_MONOTONIC (pthread_condattr_setclock).
 */
static inline struct timespec mc_mono_deadline(uint64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

/**
 * Initialise c as a condition variable of CLOCK_MONOTONIC: its
 * pthread_cond_timedwait() deadlines are mc_mono_deadline()'s, and a
 * stepped wall clock (NTP, a resumed VM) neither stretches nor cuts a
 * wait. Every condition variable waited on with a deadline is one.
 */
static inline void mc_cond_init_mono(pthread_cond_t *c)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

#endif
