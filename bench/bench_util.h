/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file bench_util.h
 * Latency histogram, clock and CPU pinning for the benchmarks.
 *
 * The histogram is log-linear (HdrHistogram's layout at 5 bits): exact
 * below 32 ns, then 32 buckets per power of two, so any percentile is
 * within about 3% of the true sample. It is a fixed array with no
 * allocation: one per thread, merged at the end.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stdint.h>

#define BENCH_HIST_SUB_BITS 5
#define BENCH_HIST_BUCKETS \
	((64 - BENCH_HIST_SUB_BITS + 1) << BENCH_HIST_SUB_BITS)

struct bench_hist {
	uint64_t count;
	uint64_t max_ns;
	uint64_t bucket[BENCH_HIST_BUCKETS];
};

/** CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/** Pin the calling thread to one CPU; cpu < 0 does nothing. 0 or -errno. */
int bench_pin_self(int cpu);

void bench_hist_add(struct bench_hist *h, uint64_t ns);
void bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src);

/** The value at quantile q (0 < q <= 1) in ns; 0 for an empty histogram. */
uint64_t bench_hist_quantile(const struct bench_hist *h, double q);

#endif
