/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transfer_engine_bench --mode initiator: one engine; per thread its own
 * registered, pre-faulted local buffer (batch_size x block_size) and
 * batch. Each thread submits batch_size requests of block_size at
 * distinct target offsets (wrapping inside the target's buffer), waits
 * with te_batch_wait(-1) (never spins), requires every request COMPLETED
 * with all its bytes (failing loudly otherwise), records the batch's
 * latency, and repeats for --duration seconds. Before that, a short
 * pre-run checks the data both ways (te_bench.h, the pattern).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "mooncake/mc_err.h"
#include "mooncake/te.h"
#include "te_bench.h"

struct run {
	const struct teb_cfg *c;
	struct te_engine *eng;
	struct te_segment *seg;
	enum te_opcode op;
	uint64_t base, stride, nslots; /* target buffer, as slots */
	pthread_barrier_t start;
	_Atomic bool failed;
};

struct worker {
	struct run *r;
	unsigned id;
	pthread_t tid;
	char *local;
	size_t local_len;
	struct te_batch *batch;
	struct te_request *reqs;
	struct bench_hist hist;
	uint64_t bytes, batches, start_ns, end_ns;
	int rc;
};

static void fail(struct run *r, const char *what, int rc)
{
	atomic_store(&r->failed, true);
	fprintf(stderr, "transfer_engine_bench: %s: %s (%s)\n", what,
		mc_strerror(rc), mc_err_name(rc));
}

/* Check every request of b ended COMPLETED with len bytes. */
static int check_batch(struct run *r, struct te_batch *b, unsigned n,
		       uint64_t len)
{
	for (unsigned i = 0; i < n; i++) {
		struct te_status st;
		int rc = te_batch_status(b, i, &st);

		if (!rc && st.status == TE_COMPLETED && st.transferred == len)
			continue;
		if (!rc)
			rc = st.error ? st.error : -EIO;
		atomic_store(&r->failed, true);
		fprintf(stderr,
			"transfer_engine_bench: request %u of %u ended with "
			"status %d, %" PRIu64 " of %" PRIu64
			" bytes: %s (%s)\n",
			i, n, (int)st.status, st.transferred, len,
			mc_strerror(rc), mc_err_name(rc));
		return rc;
	}
	return 0;
}

/* Submit n requests, wait, check, reset. */
static int run_batch(struct run *r, struct te_batch *b,
		     const struct te_request *reqs, unsigned n, uint64_t len)
{
	int rc = te_batch_submit(b, reqs, n);

	if (rc) {
		fail(r, "te_batch_submit", rc);
		return rc;
	}
	rc = te_batch_wait(b, -1);
	if (!rc)
		rc = check_batch(r, b, n, len);
	else
		fail(r, "te_batch_wait", rc);
	if (te_batch_reset(b) && !rc)
		rc = -EBUSY;
	return rc;
}

static void plan_batch(struct worker *w, uint64_t k)
{
	struct run *r = w->r;
	uint64_t n = (uint64_t)r->c->batch_size, t = (uint64_t)r->c->threads;

	for (uint64_t i = 0; i < n; i++) {
		uint64_t slot = ((k * n + i) * t + w->id) % r->nslots;

		w->reqs[i].target_addr = r->base + slot * r->stride;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->r;
	unsigned n = (unsigned)r->c->batch_size;
	uint64_t len = r->c->block_size, deadline, k = 0;

	/* One unrecorded batch first: lanes connect, peers map. */
	plan_batch(w, k++);
	w->rc = run_batch(r, w->batch, w->reqs, n, len);
	pthread_barrier_wait(&r->start);
	w->start_ns = bench_now_ns();
	deadline = w->start_ns + (uint64_t)r->c->duration * 1000000000ull;
	while (!w->rc && !atomic_load(&r->failed)) {
		uint64_t t0 = bench_now_ns();

		if (t0 >= deadline)
			break;
		plan_batch(w, k++);
		w->rc = run_batch(r, w->batch, w->reqs, n, len);
		if (w->rc)
			break;
		bench_hist_add(&w->hist, bench_now_ns() - t0);
		w->bytes += (uint64_t)n * len;
		w->batches++;
	}
	w->end_ns = bench_now_ns();
	return NULL;
}

/* Pre-run: read three blocks and compare them with the pattern; write a
 * block of the inverted pattern, read it back, restore it. */
static int verify(struct run *r)
{
	uint64_t len = r->c->block_size,
		 slots[3] = { 0, r->nslots / 2, r->nslots - 1 };
	char *buf = teb_alloc(2 * len), *in = buf, *out = buf + len;
	struct te_request q = { .target = r->seg, .length = len };
	struct te_batch *b = NULL;
	int64_t bad = -1;
	int rc;

	if (!buf)
		return -ENOMEM;
	rc = te_register(r->eng, buf, 2 * len, "*", false);
	if (rc) {
		teb_free(buf, 2 * len);
		return rc;
	}
	rc = te_batch_create(r->eng, 1, &b);
	for (unsigned i = 0; !rc && i < 3 && bad < 0; i++) {
		uint64_t off = slots[i] * r->stride;

		q.opcode = TE_READ;
		q.local = in;
		q.target_addr = r->base + off;
		memset(in, 0, len);
		rc = run_batch(r, b, &q, 1, len);
		if (!rc)
			bad = teb_check_pattern(in, len, off);
	}
	if (!rc && bad < 0) {
		uint64_t off = slots[1] * r->stride;

		teb_fill_pattern(out, len, off);
		for (uint64_t i = 0; i < len; i++)
			out[i] = (char)~out[i];
		q.target_addr = r->base + off;
		q.opcode = TE_WRITE;
		q.local = out;
		rc = run_batch(r, b, &q, 1, len);
		q.opcode = TE_READ;
		q.local = in;
		if (!rc)
			rc = run_batch(r, b, &q, 1, len);
		if (!rc && memcmp(in, out, len)) {
			fprintf(stderr, "transfer_engine_bench: verify: a "
					"written block read back different\n");
			rc = -EIO;
		}
		teb_fill_pattern(out, len, off);
		q.opcode = TE_WRITE;
		q.local = out;
		if (!rc)
			rc = run_batch(r, b, &q, 1, len);
	}
	if (bad >= 0) {
		fprintf(stderr,
			"transfer_engine_bench: verify: byte %" PRId64
			" of a block read from the target differs from the "
			"pattern\n",
			bad);
		rc = -EIO;
	}
	if (b)
		te_batch_destroy(b);
	if (te_unregister(r->eng, buf))
		rc = rc ? rc : -EBUSY;
	teb_free(buf, 2 * len);
	return rc;
}

/* Find the target's buffer; fills r->base and the slots. */
static int find_target(struct run *r)
{
	struct te_buffer_info info[16];
	int n = te_segment_buffers(r->seg, info, 16);
	const struct te_buffer_info *best = NULL;

	if (n < 0) {
		fail(r, "te_segment_buffers", n);
		return n;
	}
	for (int i = 0; i < n && i < 16; i++)
		if (!best || info[i].length > best->length)
			best = &info[i];
	if (!best || best->length < r->c->block_size) {
		fprintf(stderr,
			"transfer_engine_bench: segment %s publishes no "
			"buffer of at least --block_size bytes\n",
			r->c->segment_id);
		return -ENOENT;
	}
	if (!strcmp(r->c->protocol, "shm") && !best->shareable) {
		fprintf(stderr,
			"transfer_engine_bench: the target's buffer is not "
			"shareable: start the target with --protocol shm\n");
		return -EINVAL;
	}
	r->base = best->addr;
	r->stride = (r->c->block_size + TEB_SLOT_ALIGN - 1) &
		    ~(uint64_t)(TEB_SLOT_ALIGN - 1);
	r->nslots = (best->length - r->c->block_size) / r->stride + 1;
	return 0;
}

/* Buffer, registration, batch and requests of one worker. */
static int worker_setup(struct run *r, struct worker *w, unsigned id)
{
	uint64_t len = r->c->block_size;
	unsigned n = (unsigned)r->c->batch_size;
	char loc[32];
	int rc;

	w->r = r;
	w->id = id;
	w->local_len = (size_t)(len * n);
	w->local = teb_alloc(w->local_len);
	w->reqs = calloc(n, sizeof(*w->reqs));
	if (!w->local || !w->reqs)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		/* Slots start at multiples of 256: the pattern of offset 0. */
		teb_fill_pattern(w->local + i * len, len, 0);
		w->reqs[i] = (struct te_request){ .opcode = r->op,
						  .local = w->local + i * len,
						  .target = r->seg,
						  .length = len };
	}
	teb_location(w->local, loc, sizeof(loc));
	rc = te_register(r->eng, w->local, w->local_len, loc, false);
	if (rc) {
		teb_free(w->local, w->local_len);
		w->local = NULL;
		return rc;
	}
	return te_batch_create(r->eng, n, &w->batch);
}

static void worker_cleanup(struct run *r, struct worker *w)
{
	if (w->batch)
		te_batch_destroy(w->batch);
	if (w->local) {
		te_unregister(r->eng, w->local);
		teb_free(w->local, w->local_len);
	}
	free(w->reqs);
}

static void report(const struct run *r, const struct worker *ws)
{
	const struct teb_cfg *c = r->c;
	uint64_t bytes = 0, batches = 0, t0 = UINT64_MAX, t1 = 0;
	struct bench_hist *h = calloc(1, sizeof(*h));
	double secs, bps;

	for (int i = 0; i < c->threads; i++) {
		bytes += ws[i].bytes;
		batches += ws[i].batches;
		t0 = ws[i].start_ns < t0 ? ws[i].start_ns : t0;
		t1 = ws[i].end_ns > t1 ? ws[i].end_ns : t1;
		if (h)
			bench_hist_merge(h, &ws[i].hist);
	}
	secs = (double)(t1 - t0) / 1e9;
	bps = secs > 0 ? (double)bytes / secs : 0;
	printf("Test completed: duration %.2f, batch count %" PRIu64
	       ", throughput %.*f %s/s\n",
	       secs, batches, (int)c->report_precision,
	       teb_rate(bps, c->report_unit), c->report_unit);
	if (c->json && h)
		printf("{\"mode\": \"initiator\", \"protocol\": \"%s\", "
		       "\"operation\": \"%s\", \"block_size\": %" PRIu64
		       ", \"batch_size\": %" PRId64 ", \"threads\": %" PRId64
		       ", \"lanes\": %" PRId64 ", \"duration_s\": %.3f, "
		       "\"bytes\": %" PRIu64 ", \"gbps\": %.4f, "
		       "\"p50_batch_us\": %.1f, \"p99_batch_us\": %.1f}\n",
		       c->protocol, c->operation, c->block_size, c->batch_size,
		       c->threads, c->lanes, secs, bytes, bps / 1e9,
		       (double)bench_hist_quantile(h, 0.5) / 1e3,
		       (double)bench_hist_quantile(h, 0.99) / 1e3);
	fflush(stdout);
	free(h);
}

int teb_run_initiator(const struct teb_cfg *c)
{
	struct te_engine_cfg ecfg = {
		.metadata = c->metadata_server,
		.local_server_name = c->local_server_name,
		.transport = c->protocol,
		.tcp_lanes = (unsigned)c->lanes,
	};
	struct run r = { .c = c };
	struct worker *ws = calloc((size_t)c->threads, sizeof(*ws));
	char err[TE_ERR_LEN] = "";
	int rc, started = 0;

	if (!ws)
		return -ENOMEM;
	r.op = !strcmp(c->operation, "read") ? TE_READ : TE_WRITE;
	rc = te_engine_create(&ecfg, &r.eng, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "transfer_engine_bench: engine: %s (%s)\n",
			err[0] ? err : mc_strerror(rc), mc_err_name(rc));
		free(ws);
		return rc;
	}
	rc = te_segment_open(r.eng, c->segment_id, &r.seg, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "transfer_engine_bench: segment %s: %s\n",
			c->segment_id, err[0] ? err : mc_strerror(rc));
		goto out_engine;
	}
	rc = find_target(&r);
	if (!rc && c->verify) {
		rc = verify(&r);
		if (rc)
			fprintf(stderr, "transfer_engine_bench: verification "
					"failed; no timed run\n");
	}
	for (int i = 0; !rc && i < c->threads; i++) {
		rc = worker_setup(&r, &ws[i], (unsigned)i);
		if (rc)
			fail(&r, "thread setup", rc);
	}
	if (rc)
		goto out_workers;
	if (c->print_topology) {
		char *topo = te_topology_json();

		printf("topology: %s\nbuffer numa node: %d\n",
		       topo ? topo : "null", te_mem_numa_node(ws[0].local));
		free(topo);
	}
	pthread_barrier_init(&r.start, NULL, (unsigned)c->threads);
	for (; started < c->threads; started++)
		if (pthread_create(&ws[started].tid, NULL, worker_main,
				   &ws[started]))
			break;
	if (started < c->threads) {
		/* The barrier would never open: nothing can be measured. */
		fprintf(stderr,
			"transfer_engine_bench: cannot start thread "
			"%d\n",
			started);
		abort();
	}
	for (int i = 0; i < started; i++) {
		pthread_join(ws[i].tid, NULL);
		if (ws[i].rc && !rc)
			rc = ws[i].rc;
	}
	pthread_barrier_destroy(&r.start);
	if (!rc && !atomic_load(&r.failed))
		report(&r, ws);
	else if (!rc)
		rc = -EIO;
out_workers:
	for (int i = 0; i < c->threads; i++)
		worker_cleanup(&r, &ws[i]);
	te_segment_close(r.seg);
out_engine:
	te_engine_destroy(r.eng);
	free(ws);
	return rc;
}
