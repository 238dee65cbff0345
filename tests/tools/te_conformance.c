/* SPDX-License-Identifier: Apache-2.0 */
/*
 * te_conformance: the initiator side of the transfer-engine conformance
 * tests. It creates an engine pinned to one transport, registers a local
 * buffer, opens the target segment (a te_peer, or with --transport local
 * this engine's own second buffer) and runs the cases of include/mooncake/
 * te.h's contract against it, printing one line per case:
 *
 *   ok CASE details...        or        FAIL CASE reason
 *
 *   te_conformance --metadata CONN [--target NAME --target_addr ADDR]
 *                  [--target_size N] [--seed S]
 *                  [--transport tcp|shm|local|rdma|auto] [--name NAME]
 *                  [--case NAME[,NAME...]|all] [--timeout_ms N]
 *                  [--report_counters]
 *
 * --transport auto leaves the choice to the engine (counters are then
 * checked summed over all transports); --report_counters prints, after
 * the cases, one line per transport: counters NAME {"read_bytes": N, ...}.
 *
 * The target's buffer holds te_pattern.h's pattern for --seed; every case
 * that writes restores the pattern, so cases run alone or in any order.
 * After each case the pinned transport's counters must have grown by
 * exactly the bytes and requests the case moved, the other transports'
 * byte counters must not have moved, and the failed-request counters
 * (summed over transports) by exactly the refused requests.
 *
 * Exit status: 0 all cases passed, 1 a case failed, 2 usage or setup.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mc_compiler.h"
#include "mc_parse.h"
#include "mooncake/mc_err.h"
#include "mooncake/te.h"
#include "te_pattern.h"

#define MiB (1ull << 20)
#define N_TPS 4
#define GUARD 64
#define GUARD_BYTE 0xEE
#define N_THREADS 4

static const char *const tp_names[N_TPS] = { "tcp", "shm", "local", "rdma" };

/* Counter growth a case expects of the pinned transport. */
struct expect {
	uint64_t rb, wb, rr, wr, failed;
};

/* Outcome of one thread of work: expectations and the first failure. */
struct res {
	struct expect e;
	char why[512];
	bool failed;
	bool wedged; /* a batch never ended: its memory cannot be freed */
};

struct ctx {
	struct te_engine *eng;
	struct te_segment *seg;
	const char *tp;
	int tp_idx;
	bool self; /* --transport local: the target is our own buffer */
	uint64_t taddr, tsize, seed;
	uint8_t *local; /* registered (not remote), local_len bytes */
	size_t local_len;
	uint8_t *tail; /* 4096 unregistered bytes right after local */
	uint8_t *area_a, *area_b;
	size_t area; /* bytes in each of area_a, area_b */
	uint8_t *self_target; /* --transport local */
	unsigned timeout_ms;
	bool in_call; /* --wait_in_call: te_batch_transfer */
	uint64_t rng;
	struct te_counters base[N_TPS];
};

static bool wedged;

struct ctx;
static void selected_now(struct ctx *c, struct te_counters *out);

static int failf(struct res *r, const char *fmt, ...) MC_PRINTF(2, 3);

static int failf(struct res *r, const char *fmt, ...)
{
	va_list ap;

	if (!r->failed) {
		va_start(ap, fmt);
		vsnprintf(r->why, sizeof(r->why), fmt, ap);
		va_end(ap);
		r->failed = true;
	}
	return -1;
}

static const char *status_name(int s)
{
	switch (s) {
	case TE_WAITING:
		return "WAITING";
	case TE_COMPLETED:
		return "COMPLETED";
	case TE_TIMEOUT:
		return "TIMEOUT";
	case TE_FAILED:
		return "FAILED";
	default:
		return "?";
	}
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Longest a batch may take before the tool gives up on the engine. */
static int wait_bound_ms(const struct ctx *c)
{
	return (int)c->timeout_ms + 30000;
}

static struct te_request rq(const struct ctx *c, enum te_opcode op, void *local,
			    uint64_t toff, uint64_t len)
{
	struct te_request r = {
		.opcode = op,
		.local = local,
		.target = c->seg,
		.target_addr = c->taddr + toff,
		.length = len,
	};
	return r;
}

static void account(struct expect *e, const struct te_request *r)
{
	if (r->opcode == TE_READ) {
		e->rb += r->length;
		e->rr++;
	} else {
		e->wb += r->length;
		e->wr++;
	}
}

/*
 * Wait for b's requests; -1 (and res->wedged) if they never end within the
 * bound, after which the batch and its memory must be leaked.
 */
static int wait_all(const struct ctx *c, struct te_batch *b, struct res *r)
{
	int rc = te_batch_wait(b, wait_bound_ms(c));

	if (rc == -ETIMEDOUT) {
		r->wedged = true;
		return failf(r,
			     "te_batch_wait: requests still in flight after "
			     "%d ms (per-request timeout %u ms)",
			     wait_bound_ms(c), c->timeout_ms);
	}
	if (rc)
		return failf(r, "te_batch_wait: %s", mc_strerror(rc));
	return 0;
}

/*
 * Run n requests on b (reset first) and require every one COMPLETED with
 * transferred == length; counts them in r->e.
 */
static int xfer_on(const struct ctx *c, struct te_batch *b,
		   const struct te_request *reqs, unsigned n, struct res *r)
{
	int rc = te_batch_reset(b);

	if (rc)
		return failf(r, "te_batch_reset: %s", mc_strerror(rc));
	if (c->in_call) {
		/* Submit and wait in one call: the engine may move the bytes
		 * on this thread (tcp: an idle lane, one write). */
		rc = te_batch_transfer(b, reqs, n, wait_bound_ms(c));
		if (rc == -ETIMEDOUT) {
			r->wedged = true;
			return failf(r,
				     "te_batch_transfer: requests still in "
				     "flight after %d ms",
				     wait_bound_ms(c));
		}
		if (rc)
			return failf(r,
				     "te_batch_transfer(%u requests): %s (%s)",
				     n, mc_strerror(rc), mc_err_name(rc));
	} else {
		rc = te_batch_submit(b, reqs, n);
		if (rc)
			return failf(r, "te_batch_submit(%u requests): %s (%s)",
				     n, mc_strerror(rc), mc_err_name(rc));
		if (wait_all(c, b, r))
			return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		struct te_status st;

		rc = te_batch_status(b, i, &st);
		if (rc)
			return failf(r, "te_batch_status(%u): %s", i,
				     mc_strerror(rc));
		if (st.status != TE_COMPLETED ||
		    st.transferred != reqs[i].length)
			return failf(r,
				     "request %u/%u (%s %llu bytes at target "
				     "offset %llu) ended %s, transferred "
				     "%llu, error %d (%s)",
				     i, n,
				     reqs[i].opcode == TE_READ ? "READ" :
								 "WRITE",
				     (unsigned long long)reqs[i].length,
				     (unsigned long long)(reqs[i].target_addr -
							  c->taddr),
				     status_name(st.status),
				     (unsigned long long)st.transferred,
				     st.error, mc_err_name(st.error));
		account(&r->e, &reqs[i]);
	}
	return 0;
}

static int xfer(const struct ctx *c, const struct te_request *reqs, unsigned n,
		struct res *r)
{
	struct te_batch *b;
	int rc = te_batch_create(c->eng, n, &b);

	if (rc)
		return failf(r, "te_batch_create(%u): %s", n, mc_strerror(rc));
	rc = xfer_on(c, b, reqs, n, r);
	if (r->wedged)
		return -1;
	if (te_batch_destroy(b))
		return failf(r, "te_batch_destroy after completion failed");
	return rc;
}

static int xfer1(const struct ctx *c, enum te_opcode op, void *local,
		 uint64_t toff, uint64_t len, struct res *r)
{
	struct te_request q = rq(c, op, local, toff, len);

	return xfer(c, &q, 1, r);
}

/* buf must hold the pattern bytes of target offsets [toff, toff+len). */
static int expect_pattern(const struct ctx *c, const uint8_t *buf,
			  uint64_t toff, uint64_t len, struct res *r,
			  const char *what)
{
	size_t i = te_pattern_check(buf, len, c->seed, toff);

	if (i == len)
		return 0;
	return failf(r,
		     "%s: byte %zu of %llu (target offset %llu) is 0x%02x, "
		     "pattern says 0x%02x",
		     what, i, (unsigned long long)len,
		     (unsigned long long)(toff + i), buf[i],
		     te_pattern_byte(c->seed, toff + i));
}

static int expect_same(const uint8_t *got, const uint8_t *want, size_t len,
		       struct res *r, const char *what)
{
	for (size_t i = 0; i < len; i++)
		if (got[i] != want[i])
			return failf(r,
				     "%s: byte %zu of %zu is 0x%02x, wrote "
				     "0x%02x",
				     what, i, len, got[i], want[i]);
	return 0;
}

static int expect_guard(const uint8_t *p, size_t len, struct res *r,
			const char *what)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != GUARD_BYTE)
			return failf(r, "%s: guard byte %zu overwritten", what,
				     i);
	return 0;
}

/* Write the pattern back over target [toff, toff+len) from scratch. */
static int restore(const struct ctx *c, uint8_t *scratch, uint64_t toff,
		   uint64_t len, struct res *r)
{
	te_pattern_fill(scratch, len, c->seed, toff);
	return xfer1(c, TE_WRITE, scratch, toff, len, r);
}

/* An unaligned target offset for a len-byte request, spread by k. */
static uint64_t pick_offset(const struct ctx *c, unsigned k, uint64_t len)
{
	uint64_t span = c->tsize - len;
	uint64_t off = ((uint64_t)k + 1) * 2654435761ull % (span + 1);

	if (!(off & 1) && off + 1 <= span)
		off++;
	return off;
}

static const uint64_t sizes[] = { 1,	    2,	     3,	      7,     4095,
				  4096,	    4097,    65535,   65536, 65537,
				  MiB + 13, 8 * MiB, 64 * MiB };

static bool size_fits(const struct ctx *c, uint64_t len)
{
	return len + 2 * GUARD + 8 <= c->area && len + 8 <= c->tsize;
}

/* READ of every size at unaligned offsets, byte for byte, with guards. */
static int case_sizes(struct ctx *c, struct res *r, char *info, size_t ilen)
{
	struct {
		uint64_t toff, len;
	} edges[] = { { 0, 1 },
		      { c->tsize - 1, 1 },
		      { c->tsize - 4097, 4097 },
		      { 0, 4096 } };
	unsigned done = 0, skipped = 0;
	uint64_t bytes = 0;

	for (unsigned k = 0; k < MC_ARRAY_SIZE(sizes); k++) {
		uint64_t len = sizes[k], toff = pick_offset(c, k, len);
		size_t lo = GUARD + 1 + k % 7;
		uint8_t *dst = c->area_a + lo;
		char what[64];

		if (!size_fits(c, len)) {
			skipped++;
			continue;
		}
		memset(c->area_a, GUARD_BYTE, lo + len + GUARD);
		if (xfer1(c, TE_READ, dst, toff, len, r))
			return -1;
		snprintf(what, sizeof(what), "READ %llu bytes",
			 (unsigned long long)len);
		if (expect_pattern(c, dst, toff, len, r, what) ||
		    expect_guard(c->area_a, lo, r, what) ||
		    expect_guard(dst + len, GUARD, r, what))
			return -1;
		done++;
		bytes += len;
	}
	for (unsigned k = 0; k < MC_ARRAY_SIZE(edges); k++) {
		uint8_t *dst = c->area_b + GUARD + 3;

		if (edges[k].len > c->tsize)
			continue;
		memset(c->area_b, GUARD_BYTE, GUARD + 3 + edges[k].len + GUARD);
		if (xfer1(c, TE_READ, dst, edges[k].toff, edges[k].len, r) ||
		    expect_pattern(c, dst, edges[k].toff, edges[k].len, r,
				   "READ at a buffer edge") ||
		    expect_guard(dst + edges[k].len, GUARD, r,
				 "READ at a buffer edge"))
			return -1;
	}
	snprintf(info, ilen, "sizes=%u skipped=%u bytes=%llu", done, skipped,
		 (unsigned long long)bytes);
	return 0;
}

/* WRITE random data of every size, READ it back elsewhere, restore. */
static int case_write_read(struct ctx *c, struct res *r, char *info,
			   size_t ilen)
{
	unsigned done = 0;

	for (unsigned k = 0; k < MC_ARRAY_SIZE(sizes); k++) {
		uint64_t len = sizes[k], toff = pick_offset(c, k + 100, len);
		uint8_t *src = c->area_a + 3 + k % 5;
		uint8_t *dst = c->area_b + GUARD + 5 + k % 3;
		char what[64];

		if (!size_fits(c, len))
			continue;
		snprintf(what, sizeof(what), "WRITE+READ %llu bytes",
			 (unsigned long long)len);
		te_rand_fill(src, len, &c->rng);
		memset(c->area_b, GUARD_BYTE,
		       (size_t)(dst - c->area_b) + len + GUARD);
		if (xfer1(c, TE_WRITE, src, toff, len, r) ||
		    xfer1(c, TE_READ, dst, toff, len, r) ||
		    expect_same(dst, src, len, r, what) ||
		    expect_guard(dst + len, GUARD, r, what) ||
		    restore(c, src, toff, len, r) ||
		    xfer1(c, TE_READ, dst, toff, len, r) ||
		    expect_pattern(c, dst, toff, len, r, "READ after restore"))
			return -1;
		done++;
	}
	snprintf(info, ilen, "sizes=%u", done);
	return 0;
}

/*
 * Batches of 1..1024 requests, READs and WRITEs alternating over disjoint
 * target ranges; WRITEs read back and restored.
 */
static int case_batches(struct ctx *c, struct res *r, char *info, size_t ilen)
{
	static const unsigned ns[] = { 1, 2, 16, 128, 1024 };
	uint64_t cap = 16 * MiB;
	struct te_request *reqs, *back;
	uint64_t *toffs;
	int rc = -1;

	if (cap > c->tsize / 2)
		cap = c->tsize / 2;
	if (cap > c->area / 2)
		cap = c->area / 2;
	reqs = calloc(1024, sizeof(*reqs));
	back = calloc(1024, sizeof(*back));
	toffs = calloc(1024, sizeof(*toffs));
	if (!reqs || !back || !toffs) {
		failf(r, "out of memory");
		goto out;
	}
	for (unsigned k = 0; k < MC_ARRAY_SIZE(ns); k++) {
		unsigned n = ns[k], nw = 0;
		uint64_t per = cap / n > MiB ? MiB : cap / n;
		uint64_t toff = 5, loff = 1, boff = 1;

		if (per < 16) {
			failf(r, "target too small for %u requests", n);
			goto out;
		}
		for (unsigned i = 0; i < n; i++) {
			uint64_t len = per - i % 13;
			enum te_opcode op = i % 2 ? TE_WRITE : TE_READ;

			reqs[i] = rq(c, op, c->area_a + loff, toff, len);
			toffs[i] = toff;
			if (op == TE_WRITE) {
				te_rand_fill(c->area_a + loff, len, &c->rng);
				back[nw++] = rq(c, TE_READ, c->area_b + boff,
						toff, len);
				boff += len + 1;
			} else {
				memset(c->area_a + loff, 0, len);
			}
			toff += len + 3;
			loff += len + 1;
		}
		if (xfer(c, reqs, n, r))
			goto out;
		for (unsigned i = 0; i < n; i += 2)
			if (expect_pattern(c, reqs[i].local, toffs[i],
					   reqs[i].length, r, "batched READ"))
				goto out;
		if (nw && xfer(c, back, nw, r))
			goto out;
		for (unsigned i = 1, j = 0; i < n; i += 2, j++)
			if (expect_same(back[j].local, reqs[i].local,
					reqs[i].length, r,
					"batched WRITE read back"))
				goto out;
		/* Restore: the pattern from area_b over the written ranges. */
		for (unsigned j = 0; j < nw; j++) {
			te_pattern_fill(back[j].local, back[j].length, c->seed,
					back[j].target_addr - c->taddr);
			back[j].opcode = TE_WRITE;
		}
		if (nw && xfer(c, back, nw, r))
			goto out;
	}
	snprintf(info, ilen, "batch_sizes=1,2,16,128,1024 cap=%llu",
		 (unsigned long long)cap);
	rc = 0;
out:
	free(reqs);
	free(back);
	free(toffs);
	return rc;
}

struct worker {
	struct ctx *c;
	unsigned id;
	uint64_t toff, tlen; /* this thread's target range */
	uint8_t *a, *b; /* its local ranges, tlen bytes each */
	uint64_t rng;
	struct res r;
};

#define THREAD_ITERS 6
#define THREAD_REQS 4

/* One thread: its own batch, reads and writes inside its own range. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct ctx *c = w->c;
	struct te_request reqs[2 * THREAD_REQS];
	struct te_batch *b;
	uint64_t half = w->tlen / 2, len = half / THREAD_REQS - 7;
	int rc = te_batch_create(c->eng, 2 * THREAD_REQS, &b);

	if (rc) {
		failf(&w->r, "te_batch_create: %s", mc_strerror(rc));
		return NULL;
	}
	for (unsigned it = 0; it < THREAD_ITERS; it++) {
		/* READs of the pattern in the first half, WRITEs of random
		 * data in the second, in one batch. */
		for (unsigned i = 0; i < THREAD_REQS; i++) {
			uint64_t o = i * (half / THREAD_REQS) + (it + i) % 5;
			uint8_t *src = w->a + half + i * (half / THREAD_REQS);

			reqs[i] = rq(c, TE_READ, w->a + o, w->toff + o, len);
			te_rand_fill(src, len, &w->rng);
			reqs[THREAD_REQS + i] =
				rq(c, TE_WRITE, src, w->toff + half + o, len);
		}
		if (xfer_on(c, b, reqs, 2 * THREAD_REQS, &w->r))
			break;
		for (unsigned i = 0; i < THREAD_REQS; i++)
			if (expect_pattern(c, reqs[i].local,
					   reqs[i].target_addr - c->taddr, len,
					   &w->r, "concurrent READ"))
				goto out;
		/* Read the writes back, then restore the pattern. */
		for (unsigned i = 0; i < THREAD_REQS; i++)
			reqs[i] =
				rq(c, TE_READ, w->b + i * (half / THREAD_REQS),
				   reqs[THREAD_REQS + i].target_addr - c->taddr,
				   len);
		if (xfer_on(c, b, reqs, THREAD_REQS, &w->r))
			break;
		for (unsigned i = 0; i < THREAD_REQS; i++)
			if (expect_same(reqs[i].local,
					reqs[THREAD_REQS + i].local, len, &w->r,
					"concurrent WRITE read back"))
				goto out;
		for (unsigned i = 0; i < THREAD_REQS; i++) {
			te_pattern_fill(reqs[i].local, len, c->seed,
					reqs[i].target_addr - c->taddr);
			reqs[i].opcode = TE_WRITE;
		}
		if (xfer_on(c, b, reqs, THREAD_REQS, &w->r))
			break;
	}
out:
	if (!w->r.wedged && te_batch_destroy(b))
		failf(&w->r, "te_batch_destroy failed");
	return NULL;
}

static int case_threads(struct ctx *c, struct res *r, char *info, size_t ilen)
{
	struct worker w[N_THREADS];
	pthread_t th[N_THREADS];
	uint64_t span = c->tsize < c->area ? c->tsize : c->area;
	uint64_t q;
	unsigned started = 0;

	if (span > 16 * MiB)
		span = 16 * MiB;
	q = span / N_THREADS;
	if (q < 4096)
		return failf(r, "target too small for %d threads", N_THREADS);
	for (unsigned i = 0; i < N_THREADS; i++) {
		w[i] = (struct worker){ .c = c,
					.id = i,
					.toff = i * q,
					.tlen = q,
					.a = c->area_a + i * q,
					.b = c->area_b + i * q,
					.rng = c->seed * 31 + i + 1 };
		if (pthread_create(&th[i], NULL, worker_main, &w[i])) {
			failf(r, "pthread_create failed");
			break;
		}
		started++;
	}
	for (unsigned i = 0; i < started; i++) {
		pthread_join(th[i], NULL);
		r->e.rb += w[i].r.e.rb;
		r->e.wb += w[i].r.e.wb;
		r->e.rr += w[i].r.e.rr;
		r->e.wr += w[i].r.e.wr;
		r->wedged |= w[i].r.wedged;
		if (w[i].r.failed)
			failf(r, "thread %u: %s", i, w[i].r.why);
	}
	if (r->failed)
		return -1;
	snprintf(info, ilen, "threads=%d iterations=%d range=%llu", N_THREADS,
		 THREAD_ITERS, (unsigned long long)q);
	return 0;
}

/*
 * Requests outside the target's registered memory end FAILED (others in
 * the same batch complete), nothing is written, and the target still
 * serves valid requests afterwards.
 */
static int case_refusals(struct ctx *c, struct res *r, char *info, size_t ilen)
{
	uint8_t *a = c->area_a, *src = c->area_b;
	struct te_request reqs[5];
	struct te_batch *b;
	int rc;

	te_rand_fill(src, 4096, &c->rng);
	reqs[0] = rq(c, TE_READ, a + 1, 100, 1000);
	/* Straddles the end, wholly past the end, before the start. */
	reqs[1] = rq(c, TE_READ, a + 2000, c->tsize - 10, 100);
	reqs[2] = rq(c, TE_READ, a + 3000, c->tsize, 1);
	reqs[3] = rq(c, TE_READ, a + 4000, 0, 16);
	reqs[3].target_addr = c->taddr - 4096;
	reqs[4] = rq(c, TE_WRITE, src, c->tsize - 10, 100);
	rc = te_batch_create(c->eng, 5, &b);
	if (rc)
		return failf(r, "te_batch_create: %s", mc_strerror(rc));
	rc = te_batch_submit(b, reqs, 5);
	if (rc) {
		failf(r,
		      "te_batch_submit: %s (a refusal belongs in the "
		      "request's status)",
		      mc_strerror(rc));
		goto out;
	}
	if (wait_all(c, b, r))
		goto out;
	for (unsigned i = 0; i < 5; i++) {
		struct te_status st;

		if (te_batch_status(b, i, &st)) {
			failf(r, "te_batch_status(%u) failed", i);
			goto out;
		}
		if (i == 0) {
			if (st.status != TE_COMPLETED ||
			    st.transferred != 1000) {
				failf(r,
				      "the valid request beside the "
				      "refused ones ended %s",
				      status_name(st.status));
				goto out;
			}
			account(&r->e, &reqs[0]);
			continue;
		}
		if (st.status != TE_FAILED || !st.error ||
		    st.transferred >= reqs[i].length) {
			failf(r,
			      "request %u outside the target's registered "
			      "memory ended %s, error %d, transferred %llu "
			      "(want FAILED)",
			      i, status_name(st.status), st.error,
			      (unsigned long long)st.transferred);
			goto out;
		}
		r->e.failed++;
	}
	if (expect_pattern(c, a + 1, 100, 1000, r,
			   "valid READ beside refusals"))
		goto out;
	/* Nothing of the refused WRITE landed; the target still serves. */
	if (xfer1(c, TE_READ, a, c->tsize - 4096, 4096, r) ||
	    expect_pattern(c, a, c->tsize - 4096, 4096, r,
			   "end of target after a refused WRITE") ||
	    xfer1(c, TE_READ, a + 7, 12345, MiB, r) ||
	    expect_pattern(c, a + 7, 12345, MiB, r, "READ after refusals"))
		goto out;
	snprintf(info, ilen, "refused=4");
out:
	if (!r->wedged && te_batch_destroy(b))
		failf(r, "te_batch_destroy failed");
	return r->failed ? -1 : 0;
}

/* A local address outside registered memory: MC_ENOTREG, nothing runs. */
static int case_enotreg(struct ctx *c, struct res *r, char *info, size_t ilen)
{
	uint8_t *heap = malloc(8192);
	struct te_request reqs[2];
	struct te_status st;
	struct te_batch *b;
	int rc;

	if (!heap)
		return failf(r, "out of memory");
	rc = te_batch_create(c->eng, 4, &b);
	if (rc) {
		free(heap);
		return failf(r, "te_batch_create: %s", mc_strerror(rc));
	}
	reqs[0] = rq(c, TE_READ, heap, 0, 100);
	rc = te_batch_submit(b, reqs, 1);
	if (rc != MC_ENOTREG) {
		failf(r,
		      "READ into unregistered heap memory: %d (%s), want "
		      "MC_ENOTREG",
		      rc, mc_err_name(rc));
		goto out;
	}
	reqs[0] = rq(c, TE_WRITE, heap + 100, 0, 100);
	rc = te_batch_submit(b, reqs, 1);
	if (rc != MC_ENOTREG) {
		failf(r, "WRITE from unregistered memory: %d (%s)", rc,
		      mc_err_name(rc));
		goto out;
	}
	/* Straddling the end of the registration. */
	reqs[0] = rq(c, TE_READ, c->local + c->local_len - 50, 0, 100);
	rc = te_batch_submit(b, reqs, 1);
	if (rc != MC_ENOTREG) {
		failf(r,
		      "local range straddling the registration's end: %d "
		      "(%s)",
		      rc, mc_err_name(rc));
		goto out;
	}
	/* A valid request before an invalid one: nothing starts. */
	reqs[0] = rq(c, TE_READ, c->area_a + 1, 0, 100);
	reqs[1] = rq(c, TE_READ, c->tail, 0, 100);
	rc = te_batch_submit(b, reqs, 2);
	if (rc != MC_ENOTREG) {
		failf(r, "second request unregistered: %d (%s)", rc,
		      mc_err_name(rc));
		goto out;
	}
	if (te_batch_status(b, 0, &st) != -EINVAL) {
		failf(r, "a refused submission left request 0 in the batch");
		goto out;
	}
	/* The batch and the engine still work. */
	memset(c->area_a, 0, 200);
	if (xfer_on(c, b, reqs, 1, r) ||
	    expect_pattern(c, c->area_a + 1, 0, 100, r, "READ after refusal"))
		goto out;
	snprintf(info, ilen, "refused=4");
out:
	if (!r->wedged && te_batch_destroy(b))
		failf(r, "te_batch_destroy failed");
	free(heap);
	return r->failed ? -1 : 0;
}

/* Capacity: more than fits is -E2BIG with nothing started. */
static int case_e2big(struct ctx *c, struct res *r, char *info, size_t ilen)
{
	struct te_request reqs[5];
	struct te_status st;
	struct te_batch *b;
	int rc;

	if (te_batch_create(c->eng, 0, &b) != -EINVAL)
		return failf(r, "te_batch_create(capacity 0) did not fail "
				"with -EINVAL");
	rc = te_batch_create(c->eng, 4, &b);
	if (rc)
		return failf(r, "te_batch_create: %s", mc_strerror(rc));
	for (unsigned i = 0; i < 5; i++)
		reqs[i] = rq(c, TE_READ, c->area_a + 1 + i * 4096, 7 + i * 4096,
			     4000 + i);
	rc = te_batch_submit(b, reqs, 5);
	if (rc != -E2BIG) {
		failf(r, "5 requests into capacity 4: %d (%s), want -E2BIG", rc,
		      mc_err_name(rc));
		goto out;
	}
	if (te_batch_status(b, 0, &st) != -EINVAL) {
		failf(r, "-E2BIG left requests in the batch");
		goto out;
	}
	rc = te_batch_submit(b, reqs, 3);
	if (rc) {
		failf(r, "3 requests into capacity 4: %s", mc_strerror(rc));
		goto out;
	}
	rc = te_batch_submit(b, reqs + 3, 2);
	if (rc != -E2BIG) {
		failf(r,
		      "3 + 2 requests into capacity 4: %d (%s), want "
		      "-E2BIG",
		      rc, mc_err_name(rc));
		if (!rc)
			(void)wait_all(c, b, r);
		goto out;
	}
	rc = te_batch_submit(b, reqs + 3, 1);
	if (rc) {
		failf(r, "3 + 1 requests into capacity 4: %s", mc_strerror(rc));
		goto out;
	}
	if (wait_all(c, b, r))
		goto out;
	for (unsigned i = 0; i < 4; i++) {
		if (te_batch_status(b, i, &st) || st.status != TE_COMPLETED ||
		    st.transferred != reqs[i].length) {
			failf(r, "request %u ended %s", i,
			      status_name(st.status));
			goto out;
		}
		account(&r->e, &reqs[i]);
		if (expect_pattern(c, reqs[i].local, 7 + i * 4096,
				   reqs[i].length, r, "READ"))
			goto out;
	}
	if (te_batch_status(b, 4, &st) != -EINVAL) {
		failf(r, "te_batch_status past the submitted requests did "
			 "not fail with -EINVAL");
		goto out;
	}
	/* Reset makes the whole capacity available again. */
	if (xfer_on(c, b, reqs, 4, r))
		goto out;
	/* Malformed requests are -EINVAL. */
	reqs[0].target = NULL;
	if ((rc = te_batch_reset(b)) ||
	    te_batch_submit(b, reqs, 1) != -EINVAL) {
		failf(r, "a request without a target segment was not -EINVAL");
		goto out;
	}
	reqs[0] = rq(c, (enum te_opcode)7, c->area_a, 0, 10);
	if (te_batch_submit(b, reqs, 1) != -EINVAL) {
		failf(r, "a request with opcode 7 was not -EINVAL");
		goto out;
	}
	snprintf(info, ilen, "capacity=4");
out:
	if (!r->wedged && te_batch_destroy(b))
		failf(r, "te_batch_destroy failed");
	return r->failed ? -1 : 0;
}

/*
 * While requests are in flight: te_batch_reset, te_batch_destroy and
 * te_unregister of the local buffer are -EBUSY. Transports that finish a
 * request inside te_batch_submit (local, shm) never leave one in flight;
 * for them the case only checks that nothing is refused afterwards.
 */
static int case_busy(struct ctx *c, struct res *r, char *info, size_t ilen)
{
	unsigned n = 64, attempts = 0, raced = 0;
	uint64_t len = MiB;
	struct te_request reqs[64];
	bool seen = false;

	if (len * n > c->area - 16)
		len = (c->area - 16) / n;
	if (len * n > c->tsize)
		len = c->tsize / n;
	for (unsigned i = 0; i < n; i++)
		reqs[i] = rq(c, TE_READ, c->area_a + i * len, i * len, len);
	while (!seen && attempts < 5) {
		struct te_batch *b;
		int rr, rd, ru, rc = te_batch_create(c->eng, n, &b);

		attempts++;
		if (rc)
			return failf(r, "te_batch_create: %s", mc_strerror(rc));
		rc = te_batch_submit(b, reqs, n);
		if (rc) {
			te_batch_destroy(b);
			return failf(r, "te_batch_submit: %s", mc_strerror(rc));
		}
		rr = te_batch_reset(b);
		if (rr == 0) {
			raced++; /* all done already; the batch is empty */
			if (te_batch_destroy(b))
				return failf(r, "te_batch_destroy failed");
			for (unsigned i = 0; i < n; i++)
				account(&r->e, &reqs[i]);
			continue;
		}
		rd = te_batch_destroy(b);
		if (rd == 0) {
			raced++; /* finished between the calls: freed */
			for (unsigned i = 0; i < n; i++)
				account(&r->e, &reqs[i]);
			continue;
		}
		ru = te_unregister(c->eng, c->local);
		if (ru == 0) {
			/* Finished meanwhile (else it is an engine bug the
			 * waits below catch): register again. */
			rc = te_register(c->eng, c->local, c->local_len,
					 "cpu:0", false);
			if (rc)
				return failf(r, "re-registering: %s",
					     mc_strerror(rc));
			raced++;
		}
		if (rr != -EBUSY || rd != -EBUSY || (ru && ru != -EBUSY)) {
			(void)wait_all(c, b, r);
			return failf(r,
				     "in flight: te_batch_reset %d, "
				     "te_batch_destroy %d, te_unregister %d "
				     "(want -EBUSY)",
				     rr, rd, ru);
		}
		seen = ru == -EBUSY;
		if (wait_all(c, b, r))
			return -1;
		for (unsigned i = 0; i < n; i++) {
			struct te_status st;

			if (te_batch_status(b, i, &st) ||
			    st.status != TE_COMPLETED || st.transferred != len)
				return failf(r, "request %u ended %s", i,
					     status_name(st.status));
			account(&r->e, &reqs[i]);
		}
		if (te_batch_destroy(b))
			return failf(r, "te_batch_destroy after completion "
					"failed");
		for (unsigned i = 0; i < n; i += 13)
			if (expect_pattern(c, reqs[i].local, i * len, len, r,
					   "READ"))
				return -1;
	}
	if (!seen && strcmp(c->tp, "tcp") == 0)
		return failf(r,
			     "%u attempts of %u x %llu bytes all finished "
			     "inside te_batch_submit",
			     attempts, n, (unsigned long long)len);
	snprintf(info, ilen, "%s attempts=%u raced=%u",
		 seen ? "busy_seen" : "skipped=synchronous", attempts, raced);
	return 0;
}

/* te_batch_wait: timeouts, empty batches, zero-length requests. */
static int case_wait(struct ctx *c, struct res *r, char *info, size_t ilen)
{
	unsigned n = 16;
	uint64_t len = 4 * MiB;
	struct te_request reqs[16];
	struct te_counters before, after;
	struct te_status st;
	struct te_batch *b;
	double t0, t;
	int rc, r0, r50;

	if (len * n > c->area - 16)
		len = (c->area - 16) / n;
	if (len * n > c->tsize)
		len = c->tsize / n;
	rc = te_batch_create(c->eng, n, &b);
	if (rc)
		return failf(r, "te_batch_create: %s", mc_strerror(rc));
	t0 = now_ms();
	if (te_batch_wait(b, 0) || te_batch_wait(b, -1) ||
	    te_batch_wait(b, 1000)) {
		failf(r, "te_batch_wait on an empty batch did not return 0");
		goto out;
	}
	if (now_ms() - t0 > 500) {
		failf(r, "te_batch_wait on an empty batch blocked %.0f ms",
		      now_ms() - t0);
		goto out;
	}
	if (te_batch_status(b, 0, &st) != -EINVAL) {
		failf(r, "te_batch_status on an empty batch did not fail");
		goto out;
	}
	for (unsigned i = 0; i < n; i++)
		reqs[i] = rq(c, TE_READ, c->area_a + i * len, i * len, len);
	rc = te_batch_submit(b, reqs, n);
	if (rc) {
		failf(r, "te_batch_submit: %s", mc_strerror(rc));
		goto out;
	}
	t0 = now_ms();
	r0 = te_batch_wait(b, 0);
	t = now_ms() - t0;
	if ((r0 != 0 && r0 != -ETIMEDOUT) || t > 1000) {
		failf(r, "te_batch_wait(0) returned %d after %.0f ms", r0, t);
		(void)wait_all(c, b, r);
		goto out;
	}
	t0 = now_ms();
	r50 = te_batch_wait(b, 50);
	t = now_ms() - t0;
	if ((r50 != 0 && r50 != -ETIMEDOUT) || t > 2050) {
		failf(r, "te_batch_wait(50) returned %d after %.0f ms", r50, t);
		(void)wait_all(c, b, r);
		goto out;
	}
	if (wait_all(c, b, r))
		goto out;
	if (te_batch_wait(b, 0)) {
		failf(r, "te_batch_wait(0) after completion did not return 0");
		goto out;
	}
	for (unsigned i = 0; i < n; i++) {
		if (te_batch_status(b, i, &st) || st.status != TE_COMPLETED ||
		    st.transferred != len) {
			failf(r,
			      "after te_batch_wait returned 0, request %u "
			      "is %s",
			      i, status_name(st.status));
			goto out;
		}
		account(&r->e, &reqs[i]);
	}
	/*
	 * A zero-length request completes, moving nothing. Which transport
	 * counts it as a request is not part of the contract: take what the
	 * pinned one counted (0 or 1) into the expectation.
	 */
	reqs[0] = rq(c, TE_READ, NULL, 0, 0);
	selected_now(c, &before);
	if (te_batch_reset(b) || te_batch_submit(b, reqs, 1) ||
	    wait_all(c, b, r) || te_batch_status(b, 0, &st) ||
	    st.status != TE_COMPLETED || st.transferred != 0) {
		failf(r, "a zero-length request did not complete");
		goto out;
	}
	selected_now(c, &after);
	if (after.read_requests - before.read_requests > 1) {
		failf(r, "one zero-length request counted %llu times",
		      (unsigned long long)(after.read_requests -
					   before.read_requests));
		goto out;
	}
	r->e.rr += after.read_requests - before.read_requests;
	snprintf(info, ilen, "wait0=%s wait50=%s", r0 ? "ETIMEDOUT" : "done",
		 r50 ? "ETIMEDOUT" : "done");
out:
	if (!r->wedged && te_batch_destroy(b))
		failf(r, "te_batch_destroy failed");
	return r->failed ? -1 : 0;
}

struct poller {
	struct te_batch *b;
	unsigned idx;
	uint64_t new_len;
	_Atomic bool go, stop;
	bool seen; /* the request was visible to te_batch_status */
	bool stale; /* ... with a status of the batch's previous use */
	struct te_status st;
};

/*
 * Poll one request while the submitting thread re-fills the batch; the
 * bound is in iterations and wall time, and the poller stops at the first
 * answer for the new submission.
 */
static void *poller_main(void *arg)
{
	struct poller *p = arg;
	double end = now_ms() + 2000;

	while (!atomic_load(&p->go))
		sched_yield();
	for (unsigned long i = 0; !atomic_load(&p->stop); i++) {
		struct te_status st;

		if (te_batch_status(p->b, p->idx, &st) == 0) {
			p->seen = true;
			p->st = st;
			p->stale = st.status != TE_WAITING &&
				   (st.transferred > p->new_len ||
				    (st.status == TE_COMPLETED &&
				     st.transferred != p->new_len));
			break;
		}
		if (!(i & 1023) && now_ms() > end)
			break;
	}
	return NULL;
}

/*
 * te.h: "a batch may be polled from one thread while another submits to
 * it". A poller watching the last request of a reused batch while it is
 * submitted again must see it WAITING or with this submission's status,
 * never the COMPLETED status left by the batch's previous use.
 */
static int case_poll(struct ctx *c, struct res *r, char *info, size_t ilen)
{
	unsigned n = 1024, rounds = 8, seen = 0;
	uint64_t len = 60000, old_len = 3;
	struct te_request *reqs = calloc(n, sizeof(*reqs));
	struct te_batch *b = NULL;
	int rc;

	if (!reqs)
		return failf(r, "out of memory");
	if (len * n > c->area)
		len = c->area / n;
	if (len * n > c->tsize)
		len = c->tsize / n;
	rc = te_batch_create(c->eng, n, &b);
	if (rc) {
		free(reqs);
		return failf(r, "te_batch_create: %s", mc_strerror(rc));
	}
	for (unsigned round = 0; round < rounds && !r->failed; round++) {
		struct poller p = { .b = b, .idx = n - 1, .new_len = len };
		pthread_t th;

		for (unsigned i = 0; i < n; i++)
			reqs[i] = rq(c, TE_READ, c->area_a + i * old_len,
				     i * old_len, old_len);
		if (xfer_on(c, b, reqs, n, r) || te_batch_reset(b))
			break;
		for (unsigned i = 0; i < n; i++)
			reqs[i] = rq(c, TE_READ, c->area_a + i * len, i * len,
				     len);
		if (pthread_create(&th, NULL, poller_main, &p)) {
			failf(r, "pthread_create failed");
			break;
		}
		atomic_store(&p.go, true);
		rc = te_batch_submit(b, reqs, n);
		if (rc) {
			atomic_store(&p.stop, true);
			pthread_join(th, NULL);
			failf(r, "te_batch_submit: %s", mc_strerror(rc));
			break;
		}
		if (wait_all(c, b, r)) {
			atomic_store(&p.stop, true);
			pthread_join(th, NULL);
			break;
		}
		atomic_store(&p.stop, true);
		pthread_join(th, NULL);
		seen += p.seen;
		if (p.stale)
			failf(r,
			      "round %u: while the batch was being submitted "
			      "again, request %u read %s with %llu bytes "
			      "transferred: the status of the batch's previous "
			      "use (%llu-byte requests; now %llu)",
			      round, n - 1, status_name(p.st.status),
			      (unsigned long long)p.st.transferred,
			      (unsigned long long)old_len,
			      (unsigned long long)len);
		for (unsigned i = 0; i < n && !r->failed; i++) {
			struct te_status st;

			if (te_batch_status(b, i, &st) ||
			    st.status != TE_COMPLETED || st.transferred != len)
				failf(r, "request %u ended %s", i,
				      status_name(st.status));
			else
				account(&r->e, &reqs[i]);
		}
		if (!r->failed &&
		    expect_pattern(c, c->area_a, 0, len * n, r, "READ"))
			break;
	}
	if (!r->wedged && te_batch_destroy(b))
		failf(r, "te_batch_destroy failed");
	free(reqs);
	if (r->failed)
		return -1;
	snprintf(info, ilen, "rounds=%u seen_during_submit=%u", rounds, seen);
	return 0;
}

/* te_notify reaches the target (te_peer prints "notify NAME MSG"). */
static int case_notify(struct ctx *c, struct res *r, char *info, size_t ilen)
{
	char msg[128];
	char *names[4], *msgs[4];
	int rc, n;

	snprintf(msg, sizeof(msg), "hello-%llu \"quoted\" {json}",
		 (unsigned long long)c->seed);
	rc = te_notify(c->eng, c->seg, "te_conformance", msg);
	if (rc)
		return failf(r, "te_notify: %s", mc_strerror(rc));
	if (c->self) {
		n = te_notifications(c->eng, names, msgs, 4);
		if (n != 1)
			return failf(r, "%d notifications to ourselves, want 1",
				     n);
		rc = strcmp(names[0], "te_conformance") || strcmp(msgs[0], msg);
		free(names[0]);
		free(msgs[0]);
		if (rc)
			return failf(r, "the notification came back changed");
	}
	snprintf(info, ilen, "sent=%s", msg);
	return 0;
}

/* The whole target still holds exactly the pattern. */
static int case_integrity(struct ctx *c, struct res *r, char *info, size_t ilen)
{
	uint64_t chunk = 4 * MiB, off = 0;
	unsigned per = (unsigned)(c->area / chunk);
	struct te_request reqs[64];

	if (per == 0)
		chunk = c->area, per = 1;
	if (per > 64)
		per = 64;
	while (off < c->tsize) {
		unsigned n = 0;
		uint64_t start = off;

		while (n < per && off < c->tsize) {
			uint64_t len = c->tsize - off < chunk ? c->tsize - off :
								chunk;
			reqs[n] = rq(c, TE_READ, c->area_a + (off - start), off,
				     len);
			off += len;
			n++;
		}
		if (xfer(c, reqs, n, r) ||
		    expect_pattern(c, c->area_a, start, off - start, r,
				   "the target after all cases"))
			return -1;
	}
	snprintf(info, ilen, "bytes=%llu", (unsigned long long)c->tsize);
	return 0;
}

typedef int (*case_fn)(struct ctx *c, struct res *r, char *info, size_t ilen);

static const struct {
	const char *name;
	case_fn fn;
} cases[] = {
	{ "sizes", case_sizes },       { "write_read", case_write_read },
	{ "batches", case_batches },   { "threads", case_threads },
	{ "refusals", case_refusals }, { "enotreg", case_enotreg },
	{ "e2big", case_e2big },       { "busy", case_busy },
	{ "wait", case_wait },	       { "poll", case_poll },
	{ "notify", case_notify },     { "integrity", case_integrity },
};

static void snapshot(struct ctx *c, struct te_counters *out)
{
	for (int i = 0; i < N_TPS; i++)
		if (te_counters(c->eng, tp_names[i], &out[i]))
			memset(&out[i], 0, sizeof(out[i]));
}

/* The pinned transport's counters, or with "auto" the sum of all. */
static void selected(const struct ctx *c, const struct te_counters *all,
		     struct te_counters *out)
{
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < N_TPS; i++) {
		if (c->tp_idx >= 0 && i != c->tp_idx)
			continue;
		out->read_bytes += all[i].read_bytes;
		out->write_bytes += all[i].write_bytes;
		out->read_requests += all[i].read_requests;
		out->write_requests += all[i].write_requests;
		out->failed_requests += all[i].failed_requests;
		out->served_bytes += all[i].served_bytes;
	}
}

static void selected_now(struct ctx *c, struct te_counters *out)
{
	struct te_counters all[N_TPS];

	snapshot(c, all);
	selected(c, all, out);
}

/* The counters moved exactly as the case says it moved data. */
static int check_counters(struct ctx *c, struct res *r)
{
	struct te_counters now[N_TPS], pn, pbn;
	const struct te_counters *b = c->base;
	const struct te_counters *p = &pn, *pb = &pbn;
	uint64_t failed = 0;

	snapshot(c, now);
	selected(c, now, &pn);
	selected(c, b, &pbn);
	if (p->read_bytes - pb->read_bytes != r->e.rb ||
	    p->write_bytes - pb->write_bytes != r->e.wb ||
	    p->read_requests - pb->read_requests != r->e.rr ||
	    p->write_requests - pb->write_requests != r->e.wr)
		return failf(
			r,
			"%s counters grew by read %llu B/%llu req, write "
			"%llu B/%llu req; the case moved read %llu "
			"B/%llu req, write %llu B/%llu req",
			c->tp,
			(unsigned long long)(p->read_bytes - pb->read_bytes),
			(unsigned long long)(p->read_requests -
					     pb->read_requests),
			(unsigned long long)(p->write_bytes - pb->write_bytes),
			(unsigned long long)(p->write_requests -
					     pb->write_requests),
			(unsigned long long)r->e.rb,
			(unsigned long long)r->e.rr,
			(unsigned long long)r->e.wb,
			(unsigned long long)r->e.wr);
	for (int i = 0; i < N_TPS; i++) {
		failed += now[i].failed_requests - b[i].failed_requests;
		if (c->tp_idx < 0 || i == c->tp_idx)
			continue;
		if (now[i].read_bytes != b[i].read_bytes ||
		    now[i].write_bytes != b[i].write_bytes)
			return failf(r,
				     "transport %s moved %llu/%llu bytes "
				     "although %s is pinned",
				     tp_names[i],
				     (unsigned long long)(now[i].read_bytes -
							  b[i].read_bytes),
				     (unsigned long long)(now[i].write_bytes -
							  b[i].write_bytes),
				     c->tp);
	}
	if (failed != r->e.failed)
		return failf(r,
			     "failed_requests grew by %llu, the case had "
			     "%llu refused requests",
			     (unsigned long long)failed,
			     (unsigned long long)r->e.failed);
	return 0;
}

struct args {
	const char *metadata, *target, *transport, *name, *only;
	uint64_t target_addr, target_size, seed, timeout_ms;
	bool report_counters, in_call;
};

static int usage(const char *msg)
{
	fprintf(stderr,
		"te_conformance: %s\n"
		"usage: te_conformance --metadata CONN [--target NAME "
		"--target_addr ADDR] [--target_size N] [--seed S] "
		"[--transport tcp|shm|local|rdma|auto] [--name NAME] "
		"[--case NAME,...|all] [--timeout_ms N] [--report_counters] "
		"[--wait_in_call]\n",
		msg);
	return 2;
}

static int parse_u64(const char *v, uint64_t *out)
{
	int64_t x;

	if (mc_parse_i64(v, &x) == 0 && x >= 0) {
		*out = (uint64_t)x;
		return 0;
	}
	return mc_parse_size(v, out);
}

static int parse_args(int argc, char **argv, struct args *a)
{
	for (int i = 1; i < argc; i++) {
		const char *f = argv[i], *v;

		if (!strcmp(f, "--report_counters")) {
			a->report_counters = true;
			continue;
		}
		if (!strcmp(f, "--wait_in_call")) {
			a->in_call = true;
			continue;
		}
		if (strncmp(f, "--", 2) || i + 1 >= argc)
			return usage("flags are --name VALUE pairs");
		v = argv[++i];
		f += 2;
		if (!strcmp(f, "metadata"))
			a->metadata = v;
		else if (!strcmp(f, "target"))
			a->target = v;
		else if (!strcmp(f, "transport"))
			a->transport = v;
		else if (!strcmp(f, "name"))
			a->name = v;
		else if (!strcmp(f, "case"))
			a->only = v;
		else if (!strcmp(f, "target_addr")) {
			if (parse_u64(v, &a->target_addr))
				return usage("bad --target_addr");
		} else if (!strcmp(f, "target_size")) {
			if (parse_u64(v, &a->target_size))
				return usage("bad --target_size");
		} else if (!strcmp(f, "seed")) {
			if (parse_u64(v, &a->seed))
				return usage("bad --seed");
		} else if (!strcmp(f, "timeout_ms")) {
			if (parse_u64(v, &a->timeout_ms) ||
			    a->timeout_ms > 3600000)
				return usage("bad --timeout_ms");
		} else {
			return usage("unknown flag");
		}
	}
	if (!a->metadata)
		return usage("--metadata is required");
	if (!a->transport)
		return usage("--transport is required");
	return 0;
}

static int setup(struct ctx *c, const struct args *a)
{
	struct te_engine_cfg cfg = {
		.metadata = a->metadata,
		.local_server_name = a->name,
		.transport = a->transport,
		.timeout_ms = (unsigned)a->timeout_ms,
	};
	char err[TE_ERR_LEN] = "";
	uint64_t max;
	int rc;

	c->tp = a->transport;
	c->tp_idx = -1;
	for (int i = 0; i < N_TPS; i++)
		if (!strcmp(tp_names[i], a->transport))
			c->tp_idx = i;
	if (!strcmp(a->transport, "auto"))
		cfg.transport = NULL; /* the engine picks per request */
	else if (c->tp_idx < 0)
		return usage("--transport must be tcp, shm, local, rdma or "
			     "auto");
	c->self = c->tp_idx == 2;
	c->seed = a->seed;
	c->in_call = a->in_call;
	c->rng = a->seed * 0x9E3779B97F4A7C15ull + 1;
	c->timeout_ms = a->timeout_ms ? (unsigned)a->timeout_ms : 30000;
	c->tsize = a->target_size;
	if (c->self && !c->tsize)
		c->tsize = 72 * MiB;
	if (!c->self && (!a->target || !a->target_addr || !c->tsize))
		return usage("--target, --target_addr and --target_size are "
			     "required unless --transport local");
	if (c->tsize < 64 * 1024)
		return usage("--target_size must be at least 64 KiB");

	rc = te_engine_create(&cfg, &c->eng, err, sizeof(err));
	if (rc) {
		fprintf(stderr,
			"te_conformance: te_engine_create: %s (%s): %s\n",
			mc_strerror(rc), mc_err_name(rc), err);
		return 2;
	}
	max = c->tsize < 64 * MiB ? c->tsize : 64 * MiB;
	c->area = (size_t)(max + 64 * 1024);
	c->local_len = 2 * c->area;
	c->local = aligned_alloc(4096, c->local_len + 4096);
	if (!c->local)
		return 2;
	memset(c->local, 0, c->local_len + 4096);
	c->tail = c->local + c->local_len;
	c->area_a = c->local;
	c->area_b = c->local + c->area;
	rc = te_register(c->eng, c->local, c->local_len, "cpu:0", false);
	if (rc) {
		fprintf(stderr, "te_conformance: te_register: %s\n",
			mc_strerror(rc));
		return 2;
	}
	if (c->self) {
		c->self_target =
			aligned_alloc(4096, (c->tsize + 4095) & ~4095ull);
		if (!c->self_target)
			return 2;
		te_pattern_fill(c->self_target, c->tsize, c->seed, 0);
		rc = te_register(c->eng, c->self_target, c->tsize, "cpu:0",
				 true);
		if (rc) {
			fprintf(stderr, "te_conformance: te_register: %s\n",
				mc_strerror(rc));
			return 2;
		}
		c->taddr = (uintptr_t)c->self_target;
		rc = te_segment_open(c->eng, te_engine_name(c->eng), &c->seg,
				     err, sizeof(err));
	} else {
		c->taddr = a->target_addr;
		rc = te_segment_open(c->eng, a->target, &c->seg, err,
				     sizeof(err));
	}
	if (rc) {
		fprintf(stderr, "te_conformance: te_segment_open: %s: %s\n",
			mc_strerror(rc), err);
		return 2;
	}
	return 0;
}

static void teardown(struct ctx *c)
{
	te_segment_close(c->seg);
	if (c->local && te_unregister(c->eng, c->local))
		fprintf(stderr, "te_conformance: te_unregister failed\n");
	if (c->self_target && te_unregister(c->eng, c->self_target))
		fprintf(stderr, "te_conformance: te_unregister failed\n");
	te_engine_destroy(c->eng);
	free(c->local);
	free(c->self_target);
}

static void report_counters(struct ctx *c)
{
	struct te_counters all[N_TPS];

	snapshot(c, all);
	for (int i = 0; i < N_TPS; i++)
		printf("counters %s {\"read_bytes\": %llu, \"write_bytes\": "
		       "%llu, \"read_requests\": %llu, \"write_requests\": "
		       "%llu, \"failed_requests\": %llu, \"served_bytes\": "
		       "%llu, \"caller_requests\": %llu}\n",
		       tp_names[i], (unsigned long long)all[i].read_bytes,
		       (unsigned long long)all[i].write_bytes,
		       (unsigned long long)all[i].read_requests,
		       (unsigned long long)all[i].write_requests,
		       (unsigned long long)all[i].failed_requests,
		       (unsigned long long)all[i].served_bytes,
		       (unsigned long long)all[i].caller_requests);
}

/* Is name one of the comma-separated names in list? */
static bool in_list(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; p; p = strchr(p, ',')) {
		if (*p == ',')
			p++;
		if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == '\0'))
			return true;
	}
	return false;
}

int main(int argc, char **argv)
{
	char defname[64];
	struct args a = { .only = "all" };
	struct ctx c = { 0 };
	unsigned ran = 0, failed = 0;
	int rc;

	snprintf(defname, sizeof(defname), "127.0.0.1:%d",
		 20000 + (int)(getpid() % 40000));
	a.name = defname;
	rc = parse_args(argc, argv, &a);
	if (rc)
		return rc;
	rc = setup(&c, &a);
	if (rc) {
		if (c.eng)
			teardown(&c);
		return rc;
	}
	for (unsigned i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		struct res r = { 0 };
		char info[256] = "";

		if (strcmp(a.only, "all") && !in_list(a.only, cases[i].name))
			continue;
		ran++;
		if (wedged) {
			printf("FAIL %s not run: an earlier batch never "
			       "ended\n",
			       cases[i].name);
			failed++;
			continue;
		}
		snapshot(&c, c.base);
		rc = cases[i].fn(&c, &r, info, sizeof(info));
		if (!rc && !r.failed)
			rc = check_counters(&c, &r);
		wedged |= r.wedged;
		if (r.failed) {
			printf("FAIL %s %s\n", cases[i].name, r.why);
			failed++;
		} else {
			printf("ok %s %s\n", cases[i].name, info);
		}
		fflush(stdout);
	}
	if (!ran) {
		fprintf(stderr, "te_conformance: no case named '%s'\n", a.only);
		teardown(&c);
		return 2;
	}
	if (a.report_counters)
		report_counters(&c);
	printf("%s: %u cases, %u failed (transport %s)\n",
	       failed ? "FAILED" : "PASSED", ran, failed, c.tp);
	fflush(stdout);
	/* A batch still in flight owns memory we would free: just leave. */
	if (wedged)
		_exit(1);
	teardown(&c);
	return failed ? 1 : 0;
}
