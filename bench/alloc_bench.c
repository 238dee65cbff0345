/* SPDX-License-Identifier: Apache-2.0 */
/*
 * alloc_bench: the master's per-segment allocator (master/alloc.c) on its
 * own. It times --n alloc/free pairs of mixed sizes (log-uniform between
 * --min_size and --max_size, any byte count) against a working set of
 * --live blocks in a --capacity segment: each round frees --batch random
 * live blocks, then allocates as many new ones, each loop timed as a
 * whole so the clock stays out of the per-operation figure. Then it fills
 * fresh segments until the first -ENOSPC, with uniform 1 MiB blocks and
 * with random sizes, and, from the random fill, frees a random tenth and
 * refills until -ENOSPC --churn_rounds times, printing used/capacity at
 * each first -ENOSPC. Nothing is asserted.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench_util.h"
#include "mc_daemon.h"

struct ab_cfg {
	int64_t n;
	uint64_t capacity;
	uint64_t min_size;
	uint64_t max_size;
	int64_t live;
	int64_t batch;
	int64_t churn_rounds;
	int64_t seed;
};

#define OPT(nm, t, f, d, lo, hi, h)                                          \
	{                                                                    \
		.name = nm, .type = t, .offset = offsetof(struct ab_cfg, f), \
		.def = d, .min = lo, .max = hi, .help = h                    \
	}

static const struct mc_opt ab_opts[] = {
	OPT("n", MC_OPT_INT, n, "1000000", 1, 1e12,
	    "Alloc/free pairs to time."),
	OPT("capacity", MC_OPT_SIZE, capacity, "256GiB", 1048576,
	    (double)MC_ALLOC_MAX_CAPACITY, "Segment size (virtual)."),
	OPT("min_size", MC_OPT_SIZE, min_size, "4KiB", 1, 1099511627776.0,
	    "Smallest request."),
	OPT("max_size", MC_OPT_SIZE, max_size, "16MiB", 1, 1099511627776.0,
	    "Largest request."),
	OPT("live", MC_OPT_INT, live, "16384", 1, 1e8,
	    "Blocks kept allocated while timing."),
	OPT("batch", MC_OPT_INT, batch, "1024", 1, 1e8,
	    "Frees, then allocs, per timed loop (at most --live)."),
	OPT("churn_rounds", MC_OPT_INT, churn_rounds, "20", 0, 1e6,
	    "Free-a-tenth-and-refill rounds after the random fill."),
	OPT("seed", MC_OPT_INT, seed, "1", 0, 9e18, "Random seed."),
};

static const struct mc_cfg_spec ab_spec = {
	.prog = "alloc_bench",
	.summary = "Time the master's segment allocator (TLSF) and measure "
		   "the utilisation it reaches before the first ENOSPC.",
	.opts = ab_opts,
	.n_opts = sizeof(ab_opts) / sizeof(ab_opts[0]),
	.strict = true,
};

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned log2_floor(uint64_t x)
{
	return 63u - (unsigned)__builtin_clzll(x);
}

/* Log-uniform in [lo, hi]: a random power of two, then uniform in it. */
static uint64_t rnd_size(uint64_t lo, uint64_t hi)
{
	unsigned e0 = log2_floor(lo), e1 = log2_floor(hi);
	unsigned e = e0 + (unsigned)(rnd() % (e1 - e0 + 1));
	uint64_t a = 1ull << e, b = e < 63 ? (1ull << (e + 1)) - 1 : UINT64_MAX;

	if (a < lo)
		a = lo;
	if (b > hi)
		b = hi;
	return a + rnd() % (b - a + 1);
}

/* A growable array of live blocks. */
struct blocks {
	struct mc_alloc_block **v;
	size_t n, cap;
};

static int blocks_push(struct blocks *bs, struct mc_alloc_block *b)
{
	if (bs->n == bs->cap) {
		size_t cap = bs->cap ? bs->cap * 2 : 4096;
		void *v = realloc(bs->v, cap * sizeof(*bs->v));

		if (!v)
			return -ENOMEM;
		bs->v = v;
		bs->cap = cap;
	}
	bs->v[bs->n++] = b;
	return 0;
}

/* Allocate until the first error; returns it (-ENOSPC normally). */
static int fill(struct mc_alloc *a, struct blocks *bs, uint64_t lo, uint64_t hi,
		uint64_t *ns)
{
	struct mc_alloc_block *b;
	uint64_t t0 = bench_now_ns();
	int rc;

	for (;;) {
		rc = mc_alloc_alloc(a, lo == hi ? lo : rnd_size(lo, hi), &b);
		if (rc)
			break;
		rc = blocks_push(bs, b);
		if (rc) {
			mc_alloc_free(a, b);
			break;
		}
	}
	if (ns)
		*ns = bench_now_ns() - t0;
	return rc;
}

static double util(const struct mc_alloc *a)
{
	return 100.0 * (double)mc_alloc_used(a) / (double)mc_alloc_capacity(a);
}

/* The timed alloc/free pairs. */
static int run_pairs(const struct ab_cfg *c)
{
	size_t live = (size_t)c->live, batch = (size_t)c->batch, done = 0;
	uint64_t t_alloc = 0, t_free = 0, t0, n_fail = 0, n_empty = 0;
	struct mc_alloc_block **slot = calloc(live, sizeof(*slot));
	uint64_t *sizes = calloc(batch, sizeof(*sizes));
	size_t *perm = calloc(live, sizeof(*perm));
	struct mc_alloc *a = NULL;
	int rc = -ENOMEM;

	if (!slot || !sizes || !perm)
		goto out;
	rc = mc_alloc_create(c->capacity, &a);
	if (rc)
		goto out;
	for (size_t i = 0; i < live; i++) {
		perm[i] = i;
		rc = mc_alloc_alloc(a, rnd_size(c->min_size, c->max_size),
				    &slot[i]);
		if (rc) {
			fprintf(stderr, "alloc_bench: --live blocks do not "
					"fit in --capacity\n");
			goto out;
		}
	}
	while (done < (size_t)c->n) {
		size_t k = batch < (size_t)c->n - done ? batch :
							 (size_t)c->n - done;

		/* The first k of perm: k distinct random slots. */
		for (size_t i = 0; i < k; i++) {
			size_t j = i + (size_t)(rnd() % (live - i));
			size_t t = perm[i];

			perm[i] = perm[j];
			perm[j] = t;
			sizes[i] = rnd_size(c->min_size, c->max_size);
		}
		t0 = bench_now_ns();
		for (size_t i = 0; i < k; i++)
			mc_alloc_free(a, slot[perm[i]]);
		t_free += bench_now_ns() - t0;
		t0 = bench_now_ns();
		for (size_t i = 0; i < k; i++)
			if (mc_alloc_alloc(a, sizes[i], &slot[perm[i]]))
				n_fail++;
		t_alloc += bench_now_ns() - t0;
		/* A failed slot gets a block again untimed, or stays out. */
		for (size_t i = 0; i < k; i++)
			if (!slot[perm[i]] &&
			    mc_alloc_alloc(a, c->min_size, &slot[perm[i]]))
				n_empty++;
		done += k;
	}
	printf("pairs: %zu alloc/free of %" PRIu64 "..%" PRIu64
	       " bytes, %zu live, capacity %" PRIu64 "\n",
	       done, c->min_size, c->max_size, live, c->capacity);
	printf("alloc ns/op: %.1f\n", (double)t_alloc / (double)done);
	printf("free ns/op: %.1f\n", (double)t_free / (double)done);
	printf("alloc ENOSPC while timing: %" PRIu64 " (%" PRIu64
	       " slots left empty)\n",
	       n_fail, n_empty);
	printf("utilisation while timing: %.3f%%\n", util(a));
	rc = 0;
out:
	if (a)
		for (size_t i = 0; i < live; i++)
			mc_alloc_free(a, slot[i]);
	mc_alloc_destroy(a);
	free(slot);
	free(sizes);
	free(perm);
	return rc;
}

static int run_fills(const struct ab_cfg *c)
{
	struct blocks bs = { 0 };
	struct mc_alloc *a = NULL;
	double worst = 100.0, u = 0;
	uint64_t ns;
	int rc;

	rc = mc_alloc_create(c->capacity, &a);
	if (rc)
		return rc;
	rc = fill(a, &bs, 1ull << 20, 1ull << 20, &ns);
	if (rc != -ENOSPC)
		goto out;
	printf("fill 1MiB utilisation: %.4f%% (%zu blocks, %.1f ns/alloc)\n",
	       util(a), bs.n, (double)ns / (double)(bs.n ? bs.n : 1));
	mc_alloc_destroy(a);
	a = NULL;
	bs.n = 0;

	rc = mc_alloc_create(c->capacity, &a);
	if (rc)
		goto out;
	rc = fill(a, &bs, c->min_size, c->max_size, &ns);
	if (rc != -ENOSPC)
		goto out;
	printf("fill random utilisation: %.4f%% (%zu blocks, %.1f ns/alloc)\n",
	       util(a), bs.n, (double)ns / (double)(bs.n ? bs.n : 1));

	for (int64_t r = 0; r < c->churn_rounds; r++) {
		size_t keep = 0;

		/* Free a random tenth, compacting the array of the rest. */
		for (size_t i = 0; i < bs.n; i++) {
			if (rnd() % 10 == 0)
				mc_alloc_free(a, bs.v[i]);
			else
				bs.v[keep++] = bs.v[i];
		}
		bs.n = keep;
		rc = fill(a, &bs, c->min_size, c->max_size, NULL);
		if (rc != -ENOSPC)
			goto out;
		u = util(a);
		if (u < worst)
			worst = u;
	}
	if (c->churn_rounds) {
		printf("churn utilisation at first ENOSPC, last round: %.4f%% "
		       "(%zu blocks, largest free %" PRIu64 ")\n",
		       u, bs.n, mc_alloc_largest_free(a));
		printf("churn utilisation at first ENOSPC, worst of %" PRId64
		       " rounds: %.4f%%\n",
		       c->churn_rounds, worst);
	}
	rc = 0;
out:
	mc_alloc_destroy(a);
	free(bs.v);
	return rc;
}

int main(int argc, char **argv)
{
	struct ab_cfg c = { 0 };
	int code, rc;

	if (mc_daemon_load_config(&ab_spec, &c, argc, argv, &code))
		return code;
	if (c.min_size > c.max_size || c.max_size > c.capacity ||
	    c.batch > c.live) {
		fprintf(stderr, "alloc_bench: need --min_size <= --max_size "
				"<= --capacity and --batch <= --live\n");
		mc_cfg_release(&ab_spec, &c);
		return MC_EXIT_USAGE;
	}
	rng_state = (uint64_t)c.seed;
	rc = run_pairs(&c);
	if (!rc)
		rc = run_fills(&c);
	mc_cfg_release(&ab_spec, &c);
	if (rc) {
		fprintf(stderr, "alloc_bench: %s\n", strerror(-rc));
		return MC_EXIT_FAILURE;
	}
	return MC_EXIT_OK;
}
