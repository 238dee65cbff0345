/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Requests whose local buffer is GPU memory (docs/design.md, "GPU
 * memory"): the transports move host bytes only, so such a request is cut
 * into chunks that go through pinned host buffers, pipelined:
 *
 *   WRITE: device -> pinned buffer (copy on a stream), then the chunk is
 *          a host request to the chosen transport;
 *   READ:  the transport reads into a pinned buffer, then -> device.
 *
 * With MC_GPU_STAGE_BUFFERS buffers (8) of MC_GPU_STAGE_CHUNK bytes
 * (4 MiB), the copy of one chunk overlaps the transfer of the others; a
 * request is cut in quarters of at least 256 KiB (chunk_for), so one of
 * 1 MiB overlaps too.
 * Each chunk is a sub-task of its own (batch NULL, on_done set), ended by
 * the transport like any task; the parent task counts one slice per
 * chunk, so its status, bytes and first error come out as for any
 * request.
 *
 * Threads: one stager thread per engine (started with the first GPU
 * request) does every copy, with the buffer's device's primary context
 * current, and submits the chunks; transports' threads only hand chunks
 * back (never a copy on their threads: a copy waits on the device).
 *
 * Calls down only: gpu.c, task.c, the transports' submit op.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_log.h"
#include "mc_time.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

#define STAGE_CHUNK_DEFAULT (4u << 20)
#define STAGE_CHUNK_MIN (256u << 10)
#define STAGE_BUFS_DEFAULT 8
#define STAGE_BUFS_MAX 64

enum chunk_phase { CHUNK_START, CHUNK_TO_DEVICE };

struct stage_chunk {
	struct te_task sub; /* first: on_done gets &sub */
	struct te_task *parent;
	struct te_stager *st;
	uint64_t off;
	int buf; /* staging buffer index, -1: none yet */
	enum chunk_phase phase;
	struct stage_chunk *next;
};

struct te_stager {
	struct te_engine *eng;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool stopping;
	size_t chunk;
	unsigned n_bufs;
	void *bufs[STAGE_BUFS_MAX];
	/* Each buffer as a local registration, kept out of the table, that
	 * transports saw (reg_add: rdma's memory regions): a chunk's
	 * sub-task carries it as its local_reg. */
	struct te_memreg regs[STAGE_BUFS_MAX];
	unsigned n_regs;
	unsigned free[STAGE_BUFS_MAX], n_free;
	struct stage_chunk *head, *tail; /* jobs, FIFO */
	void *streams[64]; /* per device, created on first use */
};

static size_t env_size(const char *name, size_t def, size_t lo, size_t hi)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (!s || !*s)
		return def;
	v = strtoull(s, &end, 10);
	return *end || v < lo || v > hi ? def : (size_t)v;
}

/* Caller holds st->lock. */
static void push(struct te_stager *st, struct stage_chunk *c, bool front)
{
	c->next = NULL;
	if (front) {
		c->next = st->head;
		st->head = c;
		if (!st->tail)
			st->tail = c;
	} else if (st->tail) {
		st->tail->next = c;
		st->tail = c;
	} else {
		st->head = st->tail = c;
	}
	pthread_cond_broadcast(&st->cond);
}

/* End a chunk: its buffer back to the pool, its slice of the parent. */
static void chunk_end(struct stage_chunk *c, uint64_t bytes, int rc)
{
	struct te_stager *st = c->st;
	struct te_task *parent = c->parent;

	if (c->buf >= 0) {
		pthread_mutex_lock(&st->lock);
		st->free[st->n_free++] = (unsigned)c->buf;
		pthread_cond_broadcast(&st->cond);
		pthread_mutex_unlock(&st->lock);
	}
	free(c);
	te__slice_done(parent, bytes, rc);
}

/* A chunk's transfer ended (a transport's thread). */
static void chunk_transferred(struct te_task *sub)
{
	struct stage_chunk *c = (struct stage_chunk *)sub;
	int err = atomic_load(&sub->error);

	if (err || sub->req.opcode == TE_WRITE) {
		if (err && atomic_load(&sub->timed_out))
			err = -ETIMEDOUT;
		chunk_end(c, err ? 0 : sub->req.length, err);
		return;
	}
	/* READ: the bytes are in the pinned buffer; the stager copies them
	 * to the device, ahead of chunks that have not started. */
	c->phase = CHUNK_TO_DEVICE;
	pthread_mutex_lock(&c->st->lock);
	push(c->st, c, true);
	pthread_mutex_unlock(&c->st->lock);
}

static void *device_addr(struct stage_chunk *c)
{
	return (char *)c->parent->req.local + c->off;
}

static int use_device(struct te_stager *st, int dev, void **stream)
{
	int rc = te__gpu_use(dev);

	if (!rc && !st->streams[dev])
		rc = te__gpu_stream_create(&st->streams[dev]);
	*stream = st->streams[dev];
	return rc;
}

/* Start a chunk: copy out (WRITE) and hand it to the transport. A chunk
 * that fails before the transport has it ends through its sub-task all
 * the same (te__slice_done), which drops the peer reference the sub-task
 * holds: ending it with chunk_end() alone leaked that reference, and the
 * engine's destroy then waited forever for the peer's lanes. */
static void chunk_start(struct te_stager *st, struct stage_chunk *c)
{
	struct te_task *p = c->parent;
	struct te_transport *tp = st->eng->tps[p->tp];
	int dev = p->local_reg->gpu - 1;
	void *stream;
	int rc;

	if (mc_mono_ns() >= p->deadline_ns) {
		te__slice_done(&c->sub, 0, -ETIMEDOUT);
		return;
	}
	/* A write with a window (te_batch_set_write_window) that waited for
	 * a staging buffer past it does not go. */
	if (p->send_by_ns && mc_mono_ns() >= p->send_by_ns) {
		te__slice_done(&c->sub, 0, -ECONNABORTED);
		return;
	}
	if (p->req.opcode == TE_WRITE) {
		rc = use_device(st, dev, &stream);
		if (!rc)
			rc = te__gpu_copy(st->bufs[c->buf], device_addr(c),
					  c->sub.req.length, stream);
		if (rc) {
			te__slice_done(&c->sub, 0, rc);
			return;
		}
	}
	rc = tp->ops->submit(tp, &c->sub);
	if (rc)
		te__slice_done(&c->sub, 0, rc);
}

static void chunk_to_device(struct te_stager *st, struct stage_chunk *c)
{
	int dev = c->parent->local_reg->gpu - 1;
	void *stream;
	int rc = use_device(st, dev, &stream);

	if (!rc)
		rc = te__gpu_copy(device_addr(c), st->bufs[c->buf],
				  c->sub.req.length, stream);
	chunk_end(c, rc ? 0 : c->sub.req.length, rc);
}

static void *stager_main(void *arg)
{
	struct te_stager *st = arg;

	pthread_mutex_lock(&st->lock);
	for (;;) {
		struct stage_chunk *c;

		/* A new chunk waits for a buffer; a READ's second half
		 * already holds one. */
		while (!st->stopping &&
		       (!st->head ||
			(st->head->phase == CHUNK_START && !st->n_free)))
			pthread_cond_wait(&st->cond, &st->lock);
		if (st->stopping && !st->head)
			break;
		c = st->head;
		st->head = c->next;
		if (!st->head)
			st->tail = NULL;
		if (c->phase == CHUNK_START)
			c->buf = (int)st->free[--st->n_free];
		pthread_mutex_unlock(&st->lock);
		if (c->phase == CHUNK_START) {
			c->sub.req.local = st->bufs[c->buf];
			c->sub.local_reg = &st->regs[c->buf];
			chunk_start(st, c);
		} else {
			chunk_to_device(st, c);
		}
		pthread_mutex_lock(&st->lock);
	}
	pthread_mutex_unlock(&st->lock);
	return NULL;
}

static void stager_free(struct te_stager *st)
{
	for (unsigned i = 0; i < st->n_regs; i++)
		te__tps_reg_remove(st->eng, &st->regs[i]);
	for (unsigned i = 0; i < st->n_bufs; i++)
		te__gpu_host_free(st->bufs[i]);
	for (unsigned i = 0; i < 64; i++)
		te__gpu_stream_destroy(st->streams[i]);
	pthread_cond_destroy(&st->cond);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

static int stager_create(struct te_engine *eng, int dev, struct te_stager **out)
{
	struct te_stager *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return -ENOMEM;
	st->eng = eng;
	st->chunk = env_size("MC_GPU_STAGE_CHUNK", STAGE_CHUNK_DEFAULT, 4096,
			     1ull << 30);
	st->n_bufs = (unsigned)env_size("MC_GPU_STAGE_BUFFERS",
					STAGE_BUFS_DEFAULT, 1, STAGE_BUFS_MAX);
	pthread_mutex_init(&st->lock, NULL);
	pthread_cond_init(&st->cond, NULL);
	/* Pinned memory is allocated under a context (any device's
	 * portable allocation serves all). */
	rc = te__gpu_use(dev);
	for (unsigned i = 0; !rc && i < st->n_bufs; i++) {
		rc = te__gpu_host_alloc(st->chunk, &st->bufs[i]);
		if (!rc)
			st->free[st->n_free++] = i;
	}
	st->n_bufs = st->n_free;
	for (unsigned i = 0; !rc && i < st->n_bufs; i++) {
		struct te_memreg *r = &st->regs[i];

		r->addr = (uintptr_t)st->bufs[i];
		r->len = st->chunk;
		snprintf(r->location, sizeof(r->location), "*");
		rc = te__tps_reg_add(eng, r);
		if (!rc)
			st->n_regs++;
	}
	if (!rc)
		rc = -pthread_create(&st->thread, NULL, stager_main, st);
	if (rc) {
		stager_free(st);
		return rc;
	}
	*out = st;
	return 0;
}

/*
 * The chunk size for a request of len bytes: a quarter of it (at least
 * 256 KiB, at most the buffers' size), so a request of a few MiB is
 * still cut in pieces whose copies overlap the others' transfers.
 */
static uint64_t chunk_for(const struct te_stager *st, uint64_t len)
{
	uint64_t c = (len / 4 + 4095) & ~(uint64_t)4095;

	if (c < STAGE_CHUNK_MIN)
		c = STAGE_CHUNK_MIN;
	return c < st->chunk ? c : st->chunk;
}

int te__stage_submit(struct te_engine *eng, struct te_task *t)
{
	struct te_stager *st;
	struct stage_chunk **cs;
	uint64_t n, chunk, len = t->req.length;
	int rc = 0;

	pthread_mutex_lock(&eng->stage_lock);
	if (!eng->stager)
		rc = stager_create(eng, t->local_reg->gpu - 1, &eng->stager);
	st = eng->stager;
	pthread_mutex_unlock(&eng->stage_lock);
	if (rc) {
		mc_log_warn("te", "gpu staging: cannot start: %s",
			    mc_strerror(rc));
		return rc;
	}
	chunk = chunk_for(st, len);
	n = (len + chunk - 1) / chunk;
	cs = calloc(n, sizeof(*cs));
	for (uint64_t i = 0; cs && i < n; i++) {
		struct stage_chunk *c = calloc(1, sizeof(*c));

		if (!c) {
			while (i--)
				free(cs[i]);
			free(cs);
			cs = NULL;
			break;
		}
		c->parent = t;
		c->st = st;
		c->off = i * chunk;
		c->buf = -1;
		c->phase = CHUNK_START;
		c->sub.req = t->req;
		c->sub.req.target_addr = t->req.target_addr + c->off;
		c->sub.req.length = len - c->off < chunk ? len - c->off : chunk;
		c->sub.tp = t->tp;
		c->sub.deadline_ns = t->deadline_ns;
		c->sub.send_by_ns = t->send_by_ns;
		c->sub.on_done = chunk_transferred;
		atomic_store(&c->sub.status, TE_WAITING);
		atomic_store(&c->sub.pending, 1);
		cs[i] = c;
	}
	if (!cs)
		return -ENOMEM;
	te__task_add_slices(t, (int)n - 1);
	pthread_mutex_lock(&st->lock);
	for (uint64_t i = 0; i < n; i++) {
		cs[i]->sub.peer = te__peer_get(t->peer);
		push(st, cs[i], false);
	}
	pthread_mutex_unlock(&st->lock);
	free(cs);
	return 0;
}

void te__stage_stop(struct te_engine *eng)
{
	struct te_stager *st = eng->stager;

	if (!st)
		return;
	pthread_mutex_lock(&st->lock);
	st->stopping = true;
	pthread_cond_broadcast(&st->cond);
	pthread_mutex_unlock(&st->lock);
	pthread_join(st->thread, NULL);
	stager_free(st);
	eng->stager = NULL;
}
