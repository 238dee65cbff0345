/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Latency histogram, clock and CPU pinning for the benchmarks (see
 * bench_util.h).
 * Bucket i < 32 holds exactly i ns; above, bucket (k << 5) + s holds
 * [(32 + s) << (k - 1), (33 + s) << (k - 1)).
 */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "bench_util.h"

#define SUB (1u << BENCH_HIST_SUB_BITS)

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int bench_pin_self(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return 0;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return -pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static unsigned bucket_of(uint64_t v)
{
	unsigned msb, shift;

	if (v < SUB)
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v);
	shift = msb - BENCH_HIST_SUB_BITS;
	return ((shift + 1) << BENCH_HIST_SUB_BITS) +
	       (unsigned)((v >> shift) & (SUB - 1));
}

/* The midpoint of bucket i. */
static uint64_t value_of(unsigned i)
{
	unsigned shift;
	uint64_t low;

	if (i < SUB)
		return i;
	shift = (i >> BENCH_HIST_SUB_BITS) - 1;
	low = (uint64_t)(SUB + (i & (SUB - 1))) << shift;
	return low + ((1ull << shift) >> 1);
}

void bench_hist_add(struct bench_hist *h, uint64_t ns)
{
	h->bucket[bucket_of(ns)]++;
	h->count++;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

void bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src)
{
	for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++)
		dst->bucket[i] += src->bucket[i];
	dst->count += src->count;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
}

uint64_t bench_hist_quantile(const struct bench_hist *h, double q)
{
	uint64_t rank, seen = 0;

	if (!h->count)
		return 0;
	rank = (uint64_t)ceil(q * (double)h->count);
	if (rank < 1)
		rank = 1;
	for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= rank) {
			uint64_t v = value_of(i);
			return v < h->max_ns ? v : h->max_ns;
		}
	}
	return h->max_ns;
}
