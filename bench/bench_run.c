/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The closed-loop load generator (see bench_run.h). Each thread keeps its
 * own histogram and counters; they are merged after every thread joined,
 * so the timed loop touches no shared state. A gate holds the threads
 * after their warm-up until all are ready (or tells them to quit when one
 * could not be started).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench_run.h"

struct gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned ready;
	int state; /* 0 hold, 1 go, -1 quit */
};

struct worker {
	const struct bench_spec *spec;
	struct gate *gate;
	pthread_t tid;
	unsigned idx;
	uint64_t ops, errors, t0, t1;
	int first_error;
	struct bench_hist hist;
};

static int gate_pass(struct gate *g)
{
	int state;

	pthread_mutex_lock(&g->mu);
	g->ready++;
	pthread_cond_broadcast(&g->cv);
	while (!g->state)
		pthread_cond_wait(&g->cv, &g->mu);
	state = g->state;
	pthread_mutex_unlock(&g->mu);
	return state;
}

static void gate_open(struct gate *g, unsigned wait_for, int state)
{
	pthread_mutex_lock(&g->mu);
	while (g->ready < wait_for)
		pthread_cond_wait(&g->cv, &g->mu);
	g->state = state;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const struct bench_spec *s = w->spec;
	uint64_t seq = 0, deadline = 0, t, end;
	int rc;

	(void)bench_pin_self(s->cpu); /* the CPU was checked up front */
	for (; seq < s->warmup; seq++)
		(void)s->op(s->arg, w->idx, seq);
	if (gate_pass(w->gate) < 0)
		return NULL;
	w->t0 = t = bench_now_ns();
	if (!s->ops)
		deadline = w->t0 + (uint64_t)(s->seconds * 1e9);
	while (s->ops ? w->ops + w->errors < s->ops : t < deadline) {
		rc = s->op(s->arg, w->idx, seq++);
		end = bench_now_ns();
		if (rc) {
			if (!w->errors++)
				w->first_error = rc;
		} else {
			bench_hist_add(&w->hist, end - t);
			w->ops++;
		}
		t = end;
	}
	w->t1 = t;
	return NULL;
}

int bench_run(const struct bench_spec *spec, struct bench_result *out)
{
	struct gate gate = { .mu = PTHREAD_MUTEX_INITIALIZER,
			     .cv = PTHREAD_COND_INITIALIZER };
	struct worker *w = calloc(spec->threads, sizeof(*w));
	uint64_t t0 = UINT64_MAX, t1 = 0;
	unsigned n;
	int rc = 0;

	if (!w)
		return -ENOMEM;
	for (n = 0; n < spec->threads; n++) {
		w[n] = (struct worker){ .spec = spec, .gate = &gate, .idx = n };
		rc = -pthread_create(&w[n].tid, NULL, worker_main, &w[n]);
		if (rc)
			break;
	}
	gate_open(&gate, n, rc ? -1 : 1);
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < n; i++) {
		pthread_join(w[i].tid, NULL);
		bench_hist_merge(&out->hist, &w[i].hist);
		out->ops += w[i].ops;
		if (w[i].errors && !out->errors)
			out->first_error = w[i].first_error;
		out->errors += w[i].errors;
		if (w[i].t0 < t0)
			t0 = w[i].t0;
		if (w[i].t1 > t1)
			t1 = w[i].t1;
	}
	if (!rc && t1 > t0)
		out->secs = (double)(t1 - t0) / 1e9;
	free(w);
	return rc;
}
