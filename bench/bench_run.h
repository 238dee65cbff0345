/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file bench_run.h
 * Closed-loop load: N threads each issue one operation at a time, as fast
 * as it completes, for a fixed time or a fixed count, after a short
 * unrecorded warm-up. All threads start together (a barrier).
 */
#ifndef BENCH_RUN_H
#define BENCH_RUN_H

#include <stdint.h>

#include "bench_util.h"

/** One operation by thread `thread`; seq counts that thread's calls. */
typedef int (*bench_op_fn)(void *arg, unsigned thread, uint64_t seq);

struct bench_spec {
	unsigned threads;
	double seconds; /* per thread, when ops is 0 */
	uint64_t ops; /* per thread; 0 = run for `seconds` */
	uint64_t warmup; /* unrecorded operations per thread first */
	int cpu; /* pin every thread to this CPU; -1 = don't */
	bench_op_fn op;
	void *arg;
};

struct bench_result {
	uint64_t ops, errors;
	int first_error; /* the first nonzero return of op */
	double secs; /* from the common start to the last finish */
	struct bench_hist hist; /* successful operations only */
};

/** 0, or a negative errno when threads could not be started. */
int bench_run(const struct bench_spec *spec, struct bench_result *out);

#endif
