/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Transfer runner (see xfer.h): resolve endpoints through a cache, submit
 * every operation in batches of up to XFER_BATCH_CAP requests, then wait
 * for all of them against one deadline.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mc_log.h"
#include "mc_map.h"
#include "mc_parse.h"
#include "mooncake/mc_err.h"
#include "util.h"
#include "xfer.h"

#define XFER_BATCH_CAP 256u
#define XFER_POOL 32u /* batches kept for reuse: one per concurrent call */
#define XFER_SMALL 16u /* calls of up to this many ops allocate nothing */
#define PART_FIRST (4u << 20) /* the first write's first part */
#define PART_FIRST_MAX (16u << 20) /* any write's first part */
#define PART_SHARE_MIN (64u << 10) /* of one op, in a part */
#define PART_MIN (1u << 20)
#define PART_MAX (64u << 20)
#define ABORTS_MAX 8 /* parts in a row whose pieces could not start */
#define OWNER_HEX (2 * MCS_SEG_ID_LEN + 1) /* mcs_seg_owner() */
_Static_assert(XFER_SMALL <= XFER_BATCH_CAP, "a small call is one chunk");

struct mcs_xfer {
	struct te_engine *eng;
	pthread_mutex_t lock;
	struct mc_map *segs; /* endpoint -> struct te_segment * */
	struct te_batch *pool[XFER_POOL];
	unsigned n_pool;
	_Atomic uint64_t part; /* the last write's next part (mcs_xfer_write) */
};

int mcs_xfer_create(struct te_engine *eng, struct mcs_xfer **out)
{
	struct mcs_xfer *x = calloc(1, sizeof(*x));
	int rc;

	if (!x)
		return -ENOMEM;
	rc = mc_map_create(&x->segs);
	if (rc) {
		free(x);
		return rc;
	}
	x->eng = eng;
	atomic_init(&x->part, PART_FIRST);
	pthread_mutex_init(&x->lock, NULL);
	*out = x;
	return 0;
}

static void close_seg(const struct mc_map_entry *e, void *arg)
{
	struct te_segment *seg;

	(void)arg;
	memcpy(&seg, e->val, sizeof(seg));
	te_segment_close(seg);
}

void mcs_xfer_destroy(struct mcs_xfer *x)
{
	if (!x)
		return;
	for (unsigned i = 0; i < x->n_pool; i++)
		(void)te_batch_destroy(x->pool[i]);
	mc_map_foreach(x->segs, close_seg, NULL);
	mc_map_destroy(x->segs);
	pthread_mutex_destroy(&x->lock);
	free(x);
}

static int get_segment(struct mcs_xfer *x, const char *name,
		       struct te_segment **out)
{
	const struct mc_map_entry *e;
	struct te_segment *seg, *extra = NULL;
	char err[TE_ERR_LEN] = "";
	size_t len = strlen(name);
	int rc = 0;

	pthread_mutex_lock(&x->lock);
	e = mc_map_get(x->segs, name, len);
	if (e)
		memcpy(out, e->val, sizeof(*out));
	pthread_mutex_unlock(&x->lock);
	if (e)
		return 0;
	rc = te_segment_open(x->eng, name, &seg, err, sizeof(err));
	if (rc) {
		mc_log_debug("store", "open segment %s: %s", name, err);
		return rc;
	}
	pthread_mutex_lock(&x->lock);
	e = mc_map_get(x->segs, name, len);
	if (e) {
		/* Another thread opened it meanwhile: use theirs. */
		memcpy(out, e->val, sizeof(*out));
		extra = seg;
	} else if (!mc_map_put(x->segs, name, len, &seg, sizeof(seg))) {
		*out = seg;
	} else {
		extra = seg;
		rc = -ENOMEM;
	}
	pthread_mutex_unlock(&x->lock);
	if (extra)
		te_segment_close(extra);
	return rc;
}

static int batch_get(struct mcs_xfer *x, struct te_batch **out)
{
	pthread_mutex_lock(&x->lock);
	if (x->n_pool) {
		*out = x->pool[--x->n_pool];
		pthread_mutex_unlock(&x->lock);
		return 0;
	}
	pthread_mutex_unlock(&x->lock);
	return te_batch_create(x->eng, XFER_BATCH_CAP, out);
}

/* Only called once nothing is in flight. */
static void batch_put(struct mcs_xfer *x, struct te_batch *b)
{
	if (te_batch_reset(b)) {
		(void)te_batch_destroy(b);
		return;
	}
	pthread_mutex_lock(&x->lock);
	if (x->n_pool < XFER_POOL) {
		x->pool[x->n_pool++] = b;
		b = NULL;
	}
	pthread_mutex_unlock(&x->lock);
	if (b)
		(void)te_batch_destroy(b);
}

struct chunk {
	struct te_batch *b;
	size_t *idx; /* op index of each request */
	unsigned n;
};

static int op_result(const struct te_status *st, uint64_t len)
{
	switch (st->status) {
	case TE_COMPLETED:
		return st->transferred == len ? 0 : MC_ETRANSFER;
	case TE_TIMEOUT:
		return -ETIMEDOUT;
	case TE_WAITING:
		return -ETIMEDOUT;
	case TE_FAILED:
	default:
		return st->error ? st->error : MC_ETRANSFER;
	}
}

/* Wait for one chunk against the deadline, collect, drain, recycle. */
static void finish_chunk(struct mcs_xfer *x, struct chunk *c,
			 struct mcs_xfer_op *ops, uint64_t deadline)
{
	uint64_t now = mcs_now_ms();
	int left = now >= deadline ? 0 : (int)(deadline - now);
	bool timed_out = te_batch_wait(c->b, left) == -ETIMEDOUT;

	for (unsigned i = 0; i < c->n; i++) {
		struct mcs_xfer_op *op = &ops[c->idx[i]];
		struct te_status st;

		if (te_batch_status(c->b, i, &st))
			op->result = MC_ETRANSFER;
		else
			op->result = op_result(&st, op->len);
	}
	if (timed_out) {
		/* Our caller gives up; the engine's own timeout ends these. */
		mc_log_debug("store", "transfer batch of %u timed out", c->n);
		(void)te_batch_wait(c->b, -1);
	}
	batch_put(x, c->b);
	c->b = NULL;
}

/* te_batch_set_write_window's argument for writes that must start by
 * send_by (mono ms; 0: none, and a moment already past: 1 ms). */
static unsigned window_left(uint64_t send_by)
{
	uint64_t now = mcs_now_ms();

	if (!send_by)
		return 0;
	return send_by > now + 1 ? (unsigned)(send_by - now) : 1;
}

/* One pass over ops; writes start by send_by (mono ms; 0: no limit). */
static int run_pass(struct mcs_xfer *x, struct mcs_xfer_op *ops, size_t n,
		    uint64_t deadline, uint64_t send_by)
{
	struct te_request small_reqs[XFER_SMALL], *reqs = small_reqs;
	size_t small_idx[XFER_SMALL], *idx = small_idx;
	struct chunk small_chunk, *chunks = &small_chunk;
	size_t n_live = 0, n_chunks = 0;
	char small_owners[XFER_SMALL][OWNER_HEX],
		(*owners)[OWNER_HEX] = small_owners;
	const char *last_name = NULL;
	struct te_segment *last_seg = NULL;
	bool heap = n > XFER_SMALL;

	if (!n)
		return 0;
	/* Small calls (a ranged read or write: one op per replica) are the
	 * hot path: their arrays live on the stack. */
	if (heap) {
		reqs = calloc(n, sizeof(*reqs));
		idx = calloc(n, sizeof(*idx));
		owners = calloc(n, sizeof(*owners));
		chunks = calloc((n + XFER_BATCH_CAP - 1) / XFER_BATCH_CAP,
				sizeof(*chunks));
	}
	if (!reqs || !idx || !owners || !chunks) {
		free(reqs);
		free(idx);
		free(owners);
		free(chunks);
		for (size_t i = 0; i < n; i++)
			ops[i].result = -ENOMEM;
		return -ENOMEM;
	}
	/* Resolve endpoints; runs of one endpoint cost one lookup. */
	for (size_t i = 0; i < n; i++) {
		struct mcs_xfer_op *op = &ops[i];
		struct te_segment *seg = NULL;
		int rc = 0;

		op->result = 0;
		if (!op->len)
			continue;
		if (last_name && !strcmp(last_name, op->endpoint)) {
			seg = last_seg;
		} else {
			rc = get_segment(x, op->endpoint, &seg);
			if (!rc) {
				last_name = op->endpoint;
				last_seg = seg;
			}
		}
		if (rc) {
			op->result = rc;
			continue;
		}
		if (op->seg_id)
			mcs_seg_owner(op->seg_id, owners[n_live]);
		reqs[n_live] = (struct te_request){
			.opcode = op->opcode,
			.local = op->local,
			.target = seg,
			.target_addr = op->remote,
			.length = op->len,
			.owner = op->seg_id ? owners[n_live] : NULL
		};
		idx[n_live++] = i;
	}
	/* Submit everything before waiting for anything. */
	for (size_t off = 0; off < n_live; off += XFER_BATCH_CAP) {
		struct chunk *c = &chunks[n_chunks];
		unsigned cnt = (unsigned)(n_live - off < XFER_BATCH_CAP ?
						  n_live - off :
						  XFER_BATCH_CAP);
		int rc = send_by && mcs_now_ms() >= send_by ?
				 -ECONNABORTED :
				 batch_get(x, &c->b);

		if (!rc)
			te_batch_set_write_window(c->b, window_left(send_by));

		if (!rc && n_live <= XFER_BATCH_CAP) {
			/* One chunk: we wait for it at once, so the engine
			 * may move it on this thread (finish_chunk's wait
			 * then returns at once, or waits out a timeout). */
			uint64_t now = mcs_now_ms();
			int left = now >= deadline ? 0 : (int)(deadline - now);

			rc = te_batch_transfer(c->b, &reqs[off], cnt, left);
			if (rc == -ETIMEDOUT)
				rc = 0;
			if (rc) {
				batch_put(x, c->b);
				c->b = NULL;
			}
		} else if (!rc) {
			rc = te_batch_submit(c->b, &reqs[off], cnt);
			if (rc) {
				batch_put(x, c->b);
				c->b = NULL;
			}
		}
		if (rc) {
			for (unsigned i = 0; i < cnt; i++)
				ops[idx[off + i]].result = rc;
			continue;
		}
		c->idx = &idx[off];
		c->n = cnt;
		n_chunks++;
	}
	for (size_t i = 0; i < n_chunks; i++)
		finish_chunk(x, &chunks[i], ops, deadline);
	if (heap) {
		free(reqs);
		free(idx);
		free(owners);
		free(chunks);
	}
	return 0;
}

/* Failures that a second try may cure: the peer restarted or went away
 * and the engine has marked it stale; the retry resolves it again. A
 * write's pieces that could not start in time go again in a smaller
 * part (mcs_xfer_write), not here. */
static bool retryable(int rc)
{
	return rc && rc != -ETIMEDOUT && rc != MC_ENOTREG && rc != -EINVAL &&
	       rc != -ENOMEM && rc != -ECONNABORTED && rc != MC_ESEGMOVED;
}

/* Before a pass: 0, or the code every op still to run ends with;
 * *send_by: when the pass's writes must have started (0: no limit). */
static int guard_ok(const struct mcs_xfer_guard *g, uint64_t *send_by)
{
	*send_by = 0;
	return g ? g->check(g->arg, send_by) : 0;
}

static void fail_ops(struct mcs_xfer_op *ops, size_t n, int rc)
{
	for (size_t i = 0; i < n; i++)
		ops[i].result = rc;
}

/* mcs_xfer_run, with g checked before each pass (its refusal is every
 * op's result left, and returned); the timeout counts from when g let
 * the first pass go, *started (may be NULL). */
static int run_ops(struct mcs_xfer *x, struct mcs_xfer_op *ops, size_t n,
		   unsigned timeout_ms, const struct mcs_xfer_guard *g,
		   uint64_t *started)
{
	struct mcs_xfer_op *again;
	size_t *where, n_again = 0;
	uint64_t deadline, send_by;
	int rc = guard_ok(g, &send_by);

	if (rc) {
		fail_ops(ops, n, rc);
		return rc;
	}
	deadline = mcs_now_ms();
	if (started)
		*started = deadline;
	deadline += timeout_ms;
	rc = run_pass(x, ops, n, deadline, send_by);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		n_again += retryable(ops[i].result);
	if (!n_again || mcs_now_ms() >= deadline)
		return 0;
	again = calloc(n_again, sizeof(*again));
	where = calloc(n_again, sizeof(*where));
	if (!again || !where) {
		free(again);
		free(where);
		return 0;
	}
	n_again = 0;
	for (size_t i = 0; i < n; i++) {
		if (!retryable(ops[i].result))
			continue;
		where[n_again] = i;
		again[n_again++] = ops[i];
	}
	mc_log_debug("store", "retrying %zu of %zu transfers once", n_again, n);
	rc = guard_ok(g, &send_by);
	if (rc)
		fail_ops(again, n_again, rc);
	if (rc || !run_pass(x, again, n_again, deadline, send_by))
		for (size_t i = 0; i < n_again; i++)
			ops[where[i]].result = again[i].result;
	free(again);
	free(where);
	return rc;
}

int mcs_xfer_run(struct mcs_xfer *x, struct mcs_xfer_op *ops, size_t n,
		 unsigned timeout_ms)
{
	return run_ops(x, ops, n, timeout_ms, NULL, NULL);
}

/* The next part's bytes: what the last one moved in MCS_XFER_PART_MS at
 * its rate, within [PART_MIN, PART_MAX]. */
static uint64_t next_part(uint64_t bytes, uint64_t ms)
{
	uint64_t want = bytes * MCS_XFER_PART_MS / (ms ? ms : 1);

	return want < PART_MIN ? PART_MIN : want > PART_MAX ? PART_MAX : want;
}

/* One part: the next share of bytes of every op still to write (all
 * replicas and keys go side by side, as in one mcs_xfer_run); how many
 * bytes, the sub-ops in sub[], their ops in idx[], *m of them. */
static uint64_t take_part(const struct mcs_xfer_op *ops, size_t n,
			  uint64_t *off, uint64_t part, struct mcs_xfer_op *sub,
			  size_t *idx, size_t *m)
{
	uint64_t share, moved = 0;
	size_t active = 0;

	for (size_t k = 0; k < n; k++)
		active += !ops[k].result && off[k] < ops[k].len;
	*m = 0;
	if (!active)
		return 0;
	share = part / active;
	if (share < PART_SHARE_MIN)
		share = PART_SHARE_MIN;
	for (size_t k = 0; k < n; k++) {
		uint64_t take = ops[k].len - off[k];

		if (ops[k].result || !take)
			continue;
		if (take > share)
			take = share;
		sub[*m] = ops[k];
		sub[*m].local = (char *)ops[k].local + off[k];
		sub[*m].remote = ops[k].remote + off[k];
		sub[*m].len = take;
		idx[(*m)++] = k;
		off[k] += take;
		moved += take;
	}
	return moved;
}

static uint64_t part_bytes(const struct mcs_xfer_op *sub, size_t m)
{
	uint64_t b = 0;

	for (size_t k = 0; k < m; k++)
		b += sub[k].len;
	return b;
}

/* How many of ops ended because their pieces could not start in time. */
static size_t count_aborted(const struct mcs_xfer_op *ops, size_t n)
{
	size_t a = 0;

	for (size_t k = 0; k < n; k++)
		a += ops[k].result == -ECONNABORTED;
	return a;
}

int mcs_xfer_write(struct mcs_xfer *x, struct mcs_xfer_op *ops, size_t n,
		   unsigned timeout_ms, const struct mcs_xfer_guard *g)
{
	struct mcs_xfer_op *sub;
	size_t *idx, m;
	uint64_t *off, total = 0, part = atomic_load(&x->part), moved;
	unsigned aborts = 0;
	bool tried = false;
	int rc = 0;

	/* The first part at the last write's rate (another peer's, maybe),
	 * but no more than what most links move within the margin. */
	if (part > PART_FIRST_MAX)
		part = PART_FIRST_MAX;
	for (size_t k = 0; k < n; k++)
		total += ops[k].len;
	if (total <= part) {
		rc = run_ops(x, ops, n, timeout_ms, g, NULL);
		if (rc || !count_aborted(ops, n))
			return rc;
		/* The link is slower than the last write's rate: the rest in
		 * smaller parts. */
		tried = true;
		part = total / 4 < PART_MIN ? PART_MIN : total / 4;
		aborts = 1;
	}
	sub = calloc(n, sizeof(*sub));
	idx = calloc(n, sizeof(*idx));
	off = calloc(n, sizeof(*off));
	if (!sub || !idx || !off) {
		free(sub);
		free(idx);
		free(off);
		fail_ops(ops, n, -ENOMEM);
		return -ENOMEM;
	}
	for (size_t k = 0; k < n; k++) {
		/* After a whole try: only what it could not start goes. */
		if (tried && ops[k].result != -ECONNABORTED)
			off[k] = ops[k].len;
		else
			ops[k].result = 0;
	}
	while (!rc && (moved = take_part(ops, n, off, part, sub, idx, &m))) {
		uint64_t t0 = 0;
		size_t aborted = 0;

		rc = run_ops(x, sub, m, timeout_ms, g, &t0);
		for (size_t k = 0; k < m; k++) {
			int r = sub[k].result;

			if (r == -ECONNABORTED && !rc && aborts < ABORTS_MAX) {
				off[idx[k]] -= sub[k].len; /* goes again */
				aborted++;
			} else if (r && !ops[idx[k]].result) {
				ops[idx[k]].result = r;
			}
			if (r)
				moved -= sub[k].len;
		}
		if (aborted) {
			aborts++;
			part = part / 2 < PART_MIN ? PART_MIN : part / 2;
			continue;
		}
		aborts = 0;
		/* A small part's time is mostly fixed costs; a part that
		 * failed in places says little about the rate. */
		if (!rc && moved >= PART_MIN && moved == part_bytes(sub, m))
			part = next_part(moved, mcs_now_ms() - t0);
	}
	atomic_store(&x->part, part);
	/* Stopped (the guard, no memory): what was not written fails. */
	for (size_t k = 0; rc && k < n; k++)
		if (!ops[k].result && off[k] < ops[k].len)
			ops[k].result = rc;
	free(sub);
	free(idx);
	free(off);
	return rc;
}

int mcs_xfer_read_pipe(struct mcs_xfer *x, const char *endpoint,
		       const uint8_t *seg_id, uint64_t remote, uint64_t len,
		       int pipe_fd, unsigned timeout_ms)
{
	char owner[OWNER_HEX];
	struct te_segment *seg;
	int rc = get_segment(x, endpoint, &seg);

	if (rc)
		return rc;
	if (seg_id)
		mcs_seg_owner(seg_id, owner);
	return te_read_pipe(x->eng, seg, remote, len, seg_id ? owner : NULL,
			    pipe_fd,
			    timeout_ms > INT32_MAX ? -1 : (int)timeout_ms);
}

void mcs_seg_owner(const uint8_t id[MCS_SEG_ID_LEN],
		   char out[2 * MCS_SEG_ID_LEN + 1])
{
	mc_hex(id, MCS_SEG_ID_LEN, out);
}
