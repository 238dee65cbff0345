/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Read-ahead for remote objects (readahead.h).
 *
 * A window is a few slots, each one chunk of the object (chunk c is
 * bytes [c * CHUNK, (c + 1) * CHUNK)). A sequential read of chunk c makes
 * sure chunks c .. c + slots - 1 are in slots, queued or fetched; slots
 * behind the reader are reused for chunks ahead. Slot states:
 *
 *   FREE -> QUEUED (in the pool's queue) -> FETCHING (a fetcher reads it,
 *        or the reader that needs it before a fetcher took it) -> READY or
 *        FAILED; QUEUED -> FREE when the window closes first.
 *
 * Locks: a window's lock guards its slots (state, chunk, readers); the
 * pool's lock guards the queue, the free chunks and the counters. A
 * window's lock may be held while taking the pool's, never the reverse.
 * A fetcher reads without either. A reply is sent from a slot's chunk
 * without the lock, the slot pinned (readers > 0) so that it is not
 * reused meanwhile.
 *
 * With splice_read, a window read with large requests (O_DIRECT readers;
 * not the kernel's buffered read-ahead) has its chunks fetched over TCP
 * into a pipe of the slot instead of its memory (no copy in the daemon,
 * splice.c): a read that continues where the pipe's last reply ended is
 * answered from the pipe (fuse_reply_data), one at a time (piping); any
 * other read first moves the rest of the pipe into the chunk's memory,
 * from where it is answered as usual (bytes already sent from the pipe
 * are gone from the slot: valid_from). A slot holds at most one chunk, so
 * the pool keeps one pipe per chunk, opened on first use; a pipe that may
 * hold leftovers is closed rather than reused.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "mc_log.h"
#include "mcfs.h" /* FUSE_USE_VERSION, then readahead.h */
#include "util.h"
#include "mooncake/mc_err.h"

#define CHUNK (1u << 20)
#define MAX_SLOTS 64
#define FETCHERS 4
#define INFLIGHT_PER_FETCHER 2

enum { FREE, QUEUED, FETCHING, READY, FAILED };

struct ra_slot {
	struct mcfs_ra *ra;
	struct ra_slot *qnext; /* in the pool's queue */
	uint64_t chunk;
	int state;
	unsigned readers; /* replies being sent from it */
	char *buf; /* a pool chunk while not FREE */
	size_t len; /* bytes of the chunk in the object */
	/* READY from a pipe: bytes [pipe_at, len) are in it; piping while
	 * a reply is sent from it. Without: buf holds [valid_from, len). */
	struct mcfs_pipe *pipe;
	size_t pipe_at, valid_from;
	bool piping;
};

struct mcfs_ra {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a slot left QUEUED/FETCHING or was unpinned */
	mooncake_object_t obj;
	uint64_t size;
	uint64_t next_off; /* where the last read ended */
	bool closing;
	/* Fetch into pipes (splice_read): the reads are large, so each
	 * chunk is read whole and in order. Small ones (the kernel's
	 * read-ahead for buffered reads, several at once, out of order)
	 * would move most pipes into memory first: those use memory. */
	bool pipes;
	unsigned n_slots;
	struct ra_slot slots[];
};

struct mcfs_ra_pool {
	mooncake_store_t store;
	struct mcfs_splice *splice; /* fetch over TCP into pipes */
	unsigned slots; /* per window */
	uint64_t limit;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* work queued, or stopping */
	bool started, failed, stopping;
	char *mem;
	char **free_chunks;
	unsigned n_chunks, n_free;
	struct mcfs_pipe *pipes; /* n_chunks, opened on first use */
	struct mcfs_pipe **free_pipes;
	unsigned n_free_pipes;
	struct ra_slot *head, *tail;
	pthread_t fetchers[FETCHERS];
	unsigned n_fetchers;
	/* chunks queued or being fetched, all windows: at most
	 * INFLIGHT_PER_FETCHER per fetcher are started ahead (beyond the one
	 * a read needs now), so that with many files read at once a chunk is
	 * not fetched long before its read (out of the CPU caches by then,
	 * and fetched at the cost of the chunks needed sooner) */
	_Atomic unsigned inflight;
	_Atomic uint64_t fetched, hits, failed_fetches, starved, spliced;
};

int mcfs_ra_pool_init(struct mcfs_ra_pool **out, mooncake_store_t store,
		      uint64_t window, uint64_t limit,
		      struct mcfs_splice *splice)
{
	struct mcfs_ra_pool *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->store = store;
	p->splice = splice;
	p->slots = (unsigned)((window + CHUNK - 1) / CHUNK);
	if (p->slots > MAX_SLOTS)
		p->slots = MAX_SLOTS;
	p->limit = limit;
	if (limit < CHUNK)
		p->slots = 0; /* no room for one chunk: off */
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	*out = p;
	return 0;
}

static void *fetcher_main(void *arg);

/* The chunks and the fetchers, on first use; false if they cannot be
 * had (logged once). Pool lock held. */
static bool pool_start(struct mcfs_ra_pool *p)
{
	size_t bytes;
	int rc;

	if (p->started || p->failed)
		return p->started;
	p->n_chunks = (unsigned)(p->limit / CHUNK);
	bytes = (size_t)p->n_chunks * CHUNK;
	p->mem = aligned_alloc(4096, bytes);
	p->free_chunks = calloc(p->n_chunks, sizeof(*p->free_chunks));
	p->pipes = calloc(p->n_chunks, sizeof(*p->pipes));
	p->free_pipes = calloc(p->n_chunks, sizeof(*p->free_pipes));
	rc = p->mem && p->free_chunks && p->pipes && p->free_pipes ? 0 :
								     -ENOMEM;
	if (!rc)
		rc = mooncake_store_register_buffer(p->store, p->mem, bytes);
	for (unsigned i = 0; !rc && i < FETCHERS; i++) {
		rc = mcs_thread_start(&p->fetchers[i], fetcher_main, p);
		if (!rc)
			p->n_fetchers++;
		else if (p->n_fetchers)
			rc = 0; /* fewer fetchers will do */
	}
	if (rc) {
		mc_log_warn("mcfs",
			    "read-ahead off: %llu bytes of chunks could not "
			    "be set up (%d)",
			    (unsigned long long)bytes, rc);
		if (p->mem && p->free_chunks)
			(void)mooncake_store_unregister_buffer(p->store,
							       p->mem);
		free(p->mem);
		free(p->free_chunks);
		free(p->pipes);
		free(p->free_pipes);
		p->mem = NULL;
		p->free_chunks = NULL;
		p->pipes = NULL;
		p->free_pipes = NULL;
		p->failed = true;
		return false;
	}
	for (unsigned i = 0; i < p->n_chunks; i++) {
		p->free_chunks[p->n_free++] = p->mem + (size_t)i * CHUNK;
		p->pipes[i].fd[0] = p->pipes[i].fd[1] = -1;
		p->free_pipes[p->n_free_pipes++] = &p->pipes[i];
	}
	p->started = true;
	return true;
}

void mcfs_ra_pool_fini(struct mcfs_ra_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->n_fetchers; i++)
		pthread_join(p->fetchers[i], NULL);
	if (p->mem) {
		(void)mooncake_store_unregister_buffer(p->store, p->mem);
		free(p->mem);
	}
	free(p->free_chunks);
	for (unsigned i = 0; p->pipes && i < p->n_chunks; i++)
		mcfs_pipe_close(&p->pipes[i]);
	free(p->pipes);
	free(p->free_pipes);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static void fetch_here(struct mcfs_ra_pool *p, struct mcfs_ra *ra,
		       struct ra_slot *s);

static void *fetcher_main(void *arg)
{
	struct mcfs_ra_pool *p = arg;

	for (;;) {
		struct ra_slot *s;
		struct mcfs_ra *ra;

		pthread_mutex_lock(&p->lock);
		while (!p->head && !p->stopping)
			pthread_cond_wait(&p->cond, &p->lock);
		if (p->stopping) {
			pthread_mutex_unlock(&p->lock);
			return NULL;
		}
		s = p->head;
		p->head = s->qnext;
		if (!p->head)
			p->tail = NULL;
		s->qnext = NULL;
		pthread_mutex_unlock(&p->lock);

		/* Out of the queue and still QUEUED: the window cannot go
		 * (its close waits for QUEUED slots) and no reader takes it
		 * (a reader takes only slots it finds in the queue). */
		ra = s->ra;
		pthread_mutex_lock(&ra->lock);
		if (ra->closing) {
			atomic_fetch_sub(&p->inflight, 1);
			s->state = FREE; /* its chunk goes back at close */
			pthread_cond_broadcast(&ra->cond);
		} else {
			fetch_here(p, ra, s);
		}
		pthread_mutex_unlock(&ra->lock);
	}
}

/* A pipe for a fetch of len bytes (opened if it never was), or NULL. */
static struct mcfs_pipe *pipe_take(struct mcfs_ra_pool *p, size_t len)
{
	struct mcfs_pipe *q = NULL;

	if (!p->splice->on)
		return NULL;
	pthread_mutex_lock(&p->lock);
	if (p->n_free_pipes)
		q = p->free_pipes[--p->n_free_pipes];
	pthread_mutex_unlock(&p->lock);
	if (q && q->fd[0] < 0)
		(void)mcfs_pipe_open(p->splice, q); /* fd -1 on failure */
	if (q && !mcfs_splice_fits(p->splice, q, len)) {
		pthread_mutex_lock(&p->lock);
		p->free_pipes[p->n_free_pipes++] = q;
		pthread_mutex_unlock(&p->lock);
		q = NULL;
	}
	return q;
}

/* Back to the pool; closed if it may hold bytes (reopened on next use). */
static void pipe_give(struct mcfs_ra_pool *p, struct mcfs_pipe *q)
{
	if (mcfs_pipe_held(q) != 0)
		mcfs_pipe_close(q);
	pthread_mutex_lock(&p->lock);
	p->free_pipes[p->n_free_pipes++] = q;
	pthread_mutex_unlock(&p->lock);
}

/* The rest of s's pipe into its chunk's memory; the pipe goes back.
 * Window lock held, s not piping. */
static void settle(struct mcfs_ra_pool *p, struct ra_slot *s)
{
	s->valid_from = s->pipe_at;
	if (s->pipe_at < s->len &&
	    mcfs_pipe_drain(s->pipe, s->buf + s->pipe_at, s->len - s->pipe_at))
		s->valid_from = s->len; /* nothing of it can be trusted */
	pipe_give(p, s->pipe);
	s->pipe = NULL;
}

/* Give s's chunk back; s becomes FREE. Window lock held. */
static void slot_release(struct mcfs_ra_pool *p, struct ra_slot *s)
{
	if (s->pipe) {
		pipe_give(p, s->pipe);
		s->pipe = NULL;
	}
	if (s->buf) {
		pthread_mutex_lock(&p->lock);
		p->free_chunks[p->n_free++] = s->buf;
		pthread_mutex_unlock(&p->lock);
	}
	s->buf = NULL;
	s->state = FREE;
}

static struct ra_slot *find(struct mcfs_ra *ra, uint64_t chunk)
{
	for (unsigned i = 0; i < ra->n_slots; i++)
		if (ra->slots[i].state != FREE && ra->slots[i].chunk == chunk)
			return &ra->slots[i];
	return NULL;
}

/* A slot for a chunk ahead: a done, unpinned one outside the window
 * (behind first, or beyond it after the reader went back), keeping its
 * chunk, or else a free one with a chunk from the pool; NULL if none. */
static struct ra_slot *slot_for(struct mcfs_ra_pool *p, struct mcfs_ra *ra,
				uint64_t first)
{
	struct ra_slot *free_slot = NULL;

	for (unsigned i = 0; i < ra->n_slots; i++) {
		struct ra_slot *s = &ra->slots[i];

		if ((s->state == READY || s->state == FAILED) && !s->readers &&
		    (s->chunk < first || s->chunk >= first + ra->n_slots))
			return s;
		if (s->state == FREE && !free_slot)
			free_slot = s;
	}
	if (!free_slot)
		return NULL;
	pthread_mutex_lock(&p->lock);
	if (p->n_free)
		free_slot->buf = p->free_chunks[--p->n_free];
	pthread_mutex_unlock(&p->lock);
	if (!free_slot->buf) {
		atomic_fetch_add(&p->starved, 1);
		return NULL;
	}
	return free_slot;
}

/* Chunks first .. first + slots - 1 (within the object) in slots. Window
 * lock held. */
static void schedule(struct mcfs_ra_pool *p, struct mcfs_ra *ra, uint64_t first)
{
	uint64_t last = (ra->size - 1) / CHUNK;
	struct ra_slot *q_head = NULL, *q_tail = NULL;
	unsigned cap, n = 0, busy;
	bool started;

	pthread_mutex_lock(&p->lock);
	started = pool_start(p);
	cap = INFLIGHT_PER_FETCHER * p->n_fetchers;
	pthread_mutex_unlock(&p->lock);
	if (!started)
		return;
	busy = atomic_load(&p->inflight);

	for (uint64_t c = first; c <= last && c < first + ra->n_slots; c++) {
		struct ra_slot *s;

		if (find(ra, c))
			continue;
		if (c != first && busy + n >= cap)
			break; /* later reads top the window up */
		s = slot_for(p, ra, first);
		if (!s)
			break;
		s->chunk = c;
		s->len = c == last ? (size_t)(ra->size - c * CHUNK) : CHUNK;
		s->state = QUEUED;
		s->qnext = NULL;
		n++;
		if (q_tail)
			q_tail->qnext = s;
		else
			q_head = s;
		q_tail = s;
	}
	if (!q_head)
		return;
	atomic_fetch_add(&p->inflight, n);
	pthread_mutex_lock(&p->lock);
	if (p->tail)
		p->tail->qnext = q_head;
	else
		p->head = q_head;
	p->tail = q_tail;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* Take s out of the queue, if no fetcher took it yet. Window lock held. */
static bool unqueue(struct mcfs_ra_pool *p, struct ra_slot *s)
{
	struct ra_slot **pp, *prev = NULL;
	bool found = false;

	pthread_mutex_lock(&p->lock);
	for (pp = &p->head; *pp; prev = *pp, pp = &(*pp)->qnext) {
		if (*pp != s)
			continue;
		*pp = s->qnext;
		if (p->tail == s)
			p->tail = prev;
		s->qnext = NULL;
		found = true;
		break;
	}
	pthread_mutex_unlock(&p->lock);
	return found;
}

/* Fetch s on this thread (it was QUEUED and is ours now). Window lock
 * held; dropped during the read. */
static void fetch_here(struct mcfs_ra_pool *p, struct mcfs_ra *ra,
		       struct ra_slot *s)
{
	struct mcfs_pipe *q;
	int64_t got = MC_STORE_NOT_SUPPORTED;
	bool ok, want_pipe;

	if (s->pipe) { /* a chunk never read, its slot reused */
		pipe_give(p, s->pipe);
		s->pipe = NULL;
	}
	s->state = FETCHING;
	s->pipe_at = s->valid_from = 0;
	want_pipe = ra->pipes;
	pthread_mutex_unlock(&ra->lock);
	q = want_pipe ? pipe_take(p, s->len) : NULL;
	if (q) {
		got = mooncake_store_object_splice(ra->obj, s->chunk * CHUNK,
						   s->len, q->fd[1]);
		if (got != (int64_t)s->len) {
			if (got != MC_STORE_NOT_SUPPORTED)
				mcfs_splice_failed(p->splice, q);
			pipe_give(p, q); /* closed if it holds a part */
			q = NULL;
		}
	}
	/* Not over TCP, no pipe, or the splice failed: into memory (which
	 * tries every replica and has the answer). */
	if (!q)
		got = mooncake_store_object_read(ra->obj, s->chunk * CHUNK,
						 s->buf, s->len);
	ok = got == (int64_t)s->len;
	if (!ok)
		mc_log_debug("mcfs", "read-ahead of chunk %llu: %lld",
			     (unsigned long long)s->chunk, (long long)got);
	/* Counted before the lock: once READY the slot may be reused. */
	atomic_fetch_add(ok ? &p->fetched : &p->failed_fetches, 1);
	atomic_fetch_sub(&p->inflight, 1);
	pthread_mutex_lock(&ra->lock);
	s->pipe = q;
	s->state = ok ? READY : FAILED;
	pthread_cond_broadcast(&ra->cond);
}

static struct mcfs_ra *ra_new(struct mcfs_ra_pool *p, mooncake_object_t obj,
			      uint64_t size)
{
	struct mcfs_ra *ra;

	ra = calloc(1, sizeof(*ra) + p->slots * sizeof(ra->slots[0]));
	if (!ra)
		return NULL;
	pthread_mutex_init(&ra->lock, NULL);
	pthread_cond_init(&ra->cond, NULL);
	ra->obj = obj;
	ra->size = size;
	ra->n_slots = p->slots;
	for (unsigned i = 0; i < ra->n_slots; i++)
		ra->slots[i].ra = ra;
	return ra;
}

/* Answer req with the next size bytes of s's pipe (the read starts where
 * its last reply ended). Window lock held; released on return. */
static bool reply_from_pipe(struct mcfs_ra_pool *p, struct mcfs_ra *ra,
			    struct ra_slot *s, fuse_req_t req, size_t size)
{
	size_t left = s->len - s->pipe_at - size;
	bool clean;

	s->piping = true;
	s->readers++;
	pthread_mutex_unlock(&ra->lock);
	atomic_fetch_add(&p->hits, 1);
	atomic_fetch_add(&p->spliced, 1);
	clean = mcfs_pipe_reply(req, s->pipe, size, left);
	pthread_mutex_lock(&ra->lock);
	s->pipe_at += size;
	s->piping = false;
	s->readers--;
	if (!clean || !left) {
		/* Emptied, or it may hold anything: nothing of the chunk
		 * is left to answer from. */
		pipe_give(p, s->pipe);
		s->pipe = NULL;
		s->valid_from = s->len;
	}
	pthread_cond_broadcast(&ra->cond);
	pthread_mutex_unlock(&ra->lock);
	return true;
}

bool mcfs_ra_read(struct mcfs_ra_pool *p, struct mcfs_ra **rap,
		  mooncake_object_t obj, uint64_t obj_size, fuse_req_t req,
		  uint64_t off, size_t size, unsigned others)
{
	struct ra_slot *need[2] = { NULL, NULL };
	struct iovec iov[2];
	struct mcfs_ra *ra = __atomic_load_n(rap, __ATOMIC_ACQUIRE);
	uint64_t c0, c1;
	unsigned n_need;
	bool ok = true;

	if (!p || !p->slots || !size || off >= obj_size)
		return false;
	if (off + size > obj_size)
		size = (size_t)(obj_size - off);
	c0 = off / CHUNK;
	c1 = (off + size - 1) / CHUNK;
	if (c1 > c0 + 1)
		return false; /* larger than FUSE asks: read directly */
	if (!ra) {
		/* The window (no chunks yet) is made at the first read: a
		 * read from the start, or the next read where this one ends,
		 * starts fetching ahead. */
		struct mcfs_ra *none = NULL;

		ra = ra_new(p, obj, obj_size);
		if (!ra)
			return false;
		/* Two threads may race here (FUSE serves requests of one
		 * handle in parallel): the first one's window stays. */
		if (!__atomic_compare_exchange_n(rap, &none, ra, false,
						 __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE)) {
			mcfs_ra_close(p, ra);
			ra = none; /* the winner's */
		}
	}
	pthread_mutex_lock(&ra->lock);
	/* Sequential: where the last read ended, or inside the window (the
	 * kernel's read-ahead sends requests of one file in parallel, so
	 * they arrive a little out of order). */
	if (off != ra->next_off && !find(ra, c0) && off != 0) {
		ra->next_off = off + size;
		pthread_mutex_unlock(&ra->lock);
		return false;
	}
	if (off + size > ra->next_off)
		ra->next_off = off + size;
	ra->pipes = size >= CHUNK / 2;
	/* Large requests of other readers in flight already keep the
	 * transfers busy (4 fio jobs with O_DIRECT): fetching ahead would
	 * only add hand-offs, and chunks out of the CPU caches by the time
	 * they are read, on CPUs that have no time to spare. Measured: 10-20%
	 * slower that way (docs/benchmarks.md). Small requests (the
	 * kernel's 128 KiB read-ahead) gain from 1 MiB chunks either way. */
	if (others == 0 || size < CHUNK / 2)
		schedule(p, ra, c0);
	n_need = c1 == c0 ? 1 : 2;
	for (unsigned i = 0; i < n_need; i++) {
		need[i] = find(ra, c0 + i);
		if (!need[i])
			ok = false;
	}
	for (unsigned i = 0; ok && i < n_need; i++) {
		/* A chunk needed now that no fetcher took yet is read here:
		 * waiting for a fetcher to wake would only add a hand-off. */
		if (need[i]->state == QUEUED && unqueue(p, need[i]))
			fetch_here(p, ra, need[i]);
		while (need[i]->state == QUEUED || need[i]->state == FETCHING)
			pthread_cond_wait(&ra->cond, &ra->lock);
	}
again:
	/* Checked again without a wait in between: while this thread
	 * waited for the second chunk, another reader may have reused the
	 * first one's slot for a chunk ahead. */
	for (unsigned i = 0; ok && i < n_need; i++)
		if (need[i]->state != READY || need[i]->chunk != c0 + i)
			ok = false;
	for (unsigned i = 0; ok && i < n_need; i++) {
		if (need[i]->piping) { /* its pipe's turn is another's */
			pthread_cond_wait(&ra->cond, &ra->lock);
			goto again;
		}
	}
	if (ok && n_need == 1 && need[0]->pipe &&
	    off - c0 * CHUNK == need[0]->pipe_at)
		return reply_from_pipe(p, ra, need[0], req, size);
	for (unsigned i = 0; ok && i < n_need; i++) {
		if (need[i]->pipe)
			settle(p, need[i]);
		/* Bytes already sent from the pipe are not in memory. */
		if ((i ? 0 : off - c0 * CHUNK) < need[i]->valid_from)
			ok = false;
	}
	if (!ok) {
		/* A failed chunk is fetched again next time (or the direct
		 * read reports why it cannot be). */
		for (unsigned i = 0; i < n_need; i++)
			if (need[i] && need[i]->state == FAILED &&
			    !need[i]->readers && !need[i]->piping)
				slot_release(p, need[i]);
		pthread_mutex_unlock(&ra->lock);
		return false;
	}
	for (unsigned i = 0; i < n_need; i++) {
		uint64_t start = i ? 0 : off - c0 * CHUNK;
		uint64_t end = c0 + i == c1 ? off + size - (c0 + i) * CHUNK :
					      CHUNK;

		need[i]->readers++;
		iov[i].iov_base = need[i]->buf + start;
		iov[i].iov_len = (size_t)(end - start);
	}
	pthread_mutex_unlock(&ra->lock);
	atomic_fetch_add(&p->hits, 1);
	fuse_reply_iov(req, iov, (int)n_need);
	pthread_mutex_lock(&ra->lock);
	for (unsigned i = 0; i < n_need; i++)
		need[i]->readers--;
	pthread_cond_broadcast(&ra->cond);
	pthread_mutex_unlock(&ra->lock);
	return true;
}

void mcfs_ra_close(struct mcfs_ra_pool *p, struct mcfs_ra *ra)
{
	bool busy;

	if (!ra)
		return;
	pthread_mutex_lock(&ra->lock);
	ra->closing = true;
	do {
		busy = false;
		for (unsigned i = 0; i < ra->n_slots; i++) {
			struct ra_slot *s = &ra->slots[i];
			busy |= s->state == QUEUED || s->state == FETCHING ||
				s->readers;
		}
		if (busy)
			pthread_cond_wait(&ra->cond, &ra->lock);
	} while (busy);
	for (unsigned i = 0; i < ra->n_slots; i++)
		slot_release(p, &ra->slots[i]);
	pthread_mutex_unlock(&ra->lock);
	pthread_cond_destroy(&ra->cond);
	pthread_mutex_destroy(&ra->lock);
	free(ra);
}

void mcfs_ra_stats(struct mcfs_ra_pool *p, uint64_t *fetched, uint64_t *hits,
		   uint64_t *failed, uint64_t *starved)
{
	*fetched = p ? atomic_load(&p->fetched) : 0;
	*hits = p ? atomic_load(&p->hits) : 0;
	*failed = p ? atomic_load(&p->failed_fetches) : 0;
	*starved = p ? atomic_load(&p->starved) : 0;
}

uint64_t mcfs_ra_spliced(struct mcfs_ra_pool *p)
{
	return p ? atomic_load(&p->spliced) : 0;
}
