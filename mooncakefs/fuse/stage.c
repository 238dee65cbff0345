/* SPDX-License-Identifier: Apache-2.0 */
/* Staged bytes of files being written: see stage.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "stage.h"

#define FIRST_CAP (64u << 10)
#define POOL_IDLE (64u << 20) /* full chunks kept faulted in, at most */

void mcfs_stage_pool_init(struct mcfs_stage_pool *p, uint64_t limit)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	p->limit = limit;
	p->max_free =
		(limit < POOL_IDLE ? limit : POOL_IDLE) / MCFS_STAGE_CHUNK;
	p->free = p->max_free ? calloc(p->max_free, sizeof(*p->free)) : NULL;
	atomic_init(&p->held, 0);
}

void mcfs_stage_pool_fini(struct mcfs_stage_pool *p)
{
	while (p->n_free)
		free(p->free[--p->n_free]);
	free(p->free);
	pthread_mutex_destroy(&p->lock);
}

/* Count bytes against the limit. */
static int charge(struct mcfs_stage_pool *p, uint64_t bytes)
{
	if (atomic_fetch_add(&p->held, bytes) + bytes > p->limit) {
		atomic_fetch_sub(&p->held, bytes);
		return -ENOSPC;
	}
	return 0;
}

/* A full chunk, from the pool when one is idle. */
static char *chunk_get(struct mcfs_stage_pool *p)
{
	char *c = NULL;

	pthread_mutex_lock(&p->lock);
	if (p->n_free)
		c = p->free[--p->n_free];
	pthread_mutex_unlock(&p->lock);
	return c ? c : malloc(MCFS_STAGE_CHUNK);
}

static void chunk_put(struct mcfs_stage_pool *p, char *c, uint32_t cap)
{
	if (cap == MCFS_STAGE_CHUNK && p->free) {
		pthread_mutex_lock(&p->lock);
		if (p->n_free < p->max_free) {
			p->free[p->n_free++] = c;
			c = NULL;
		}
		pthread_mutex_unlock(&p->lock);
	}
	free(c);
	atomic_fetch_sub(&p->held, cap);
}

#define ENTRY (sizeof(char *) + 2 * sizeof(uint32_t))

/* Could a stage ever hold need chunks within the limit? */
static bool index_fits(const struct mcfs_stage_pool *p, size_t need)
{
	return need <= p->limit / MCFS_STAGE_CHUNK + 1;
}

/* Room for `need` chunks in the index; the index counts against the
 * limit too (a write far past the end would otherwise make it huge). */
static int grow_index(struct mcfs_stage_pool *p, struct mcfs_stage *st,
		      size_t need)
{
	size_t n = st->n ? st->n : 4;
	char **c;
	uint32_t *cap, *fill;

	if (need <= st->n)
		return 0;
	if (!index_fits(p, need))
		return -ENOSPC; /* more chunks than the limit could ever hold */
	while (n < need)
		n *= 2;
	if (charge(p, (n - st->n) * ENTRY))
		return -ENOSPC;
	c = realloc(st->chunk, n * sizeof(*c));
	if (c)
		st->chunk = c;
	cap = realloc(st->cap, n * sizeof(*cap));
	if (cap)
		st->cap = cap;
	fill = realloc(st->fill, n * sizeof(*fill));
	if (fill)
		st->fill = fill;
	if (!c || !cap || !fill) {
		atomic_fetch_sub(&p->held, (n - st->n) * ENTRY);
		return -ENOMEM;
	}
	memset(c + st->n, 0, (n - st->n) * sizeof(*c));
	memset(cap + st->n, 0, (n - st->n) * sizeof(*cap));
	memset(fill + st->n, 0, (n - st->n) * sizeof(*fill));
	st->n = n;
	return 0;
}

/* Chunk i able to hold `end` bytes (end <= MCFS_STAGE_CHUNK). */
static int reserve(struct mcfs_stage_pool *p, struct mcfs_stage *st, size_t i,
		   uint32_t end)
{
	uint32_t cap = st->cap[i], want;
	char *c;
	int rc;

	if (end <= cap)
		return 0;
	want = MCFS_STAGE_CHUNK;
	if (i == 0) { /* the first chunk grows: small files stay small */
		want = cap ? cap : FIRST_CAP;
		while (want < end)
			want *= 2;
		if (want > MCFS_STAGE_CHUNK / 2)
			want = MCFS_STAGE_CHUNK;
	}
	rc = charge(p, want - cap);
	if (rc)
		return rc;
	if (want == MCFS_STAGE_CHUNK) {
		c = chunk_get(p);
		if (c && st->chunk[i])
			memcpy(c, st->chunk[i], st->fill[i]);
		if (c)
			free(st->chunk[i]);
	} else {
		c = realloc(st->chunk[i], want);
	}
	if (!c) {
		atomic_fetch_sub(&p->held, want - cap);
		return -ENOSPC; /* no memory: as full as the limit */
	}
	st->chunk[i] = c;
	st->cap[i] = want;
	return 0;
}

int mcfs_stage_fits(const struct mcfs_stage_pool *p, uint64_t off, uint64_t len)
{
	if (off + len < off)
		return -EFBIG;
	if (len &&
	    !index_fits(p, (size_t)((off + len - 1) / MCFS_STAGE_CHUNK) + 1))
		return -ENOSPC; /* as grow_index would find */
	return 0;
}

int mcfs_stage_write(struct mcfs_stage_pool *p, struct mcfs_stage *st,
		     uint64_t off, const void *buf, size_t len)
{
	const char *src = buf;
	uint64_t end = off + len, start = off;
	int rc;

	if (!len)
		return 0;
	if (end < off)
		return -EFBIG;
	rc = grow_index(p, st, (size_t)((end - 1) / MCFS_STAGE_CHUNK) + 1);
	while (!rc && off < end) {
		size_t i = (size_t)(off / MCFS_STAGE_CHUNK);
		uint32_t at = (uint32_t)(off % MCFS_STAGE_CHUNK);
		uint32_t n = end - off < MCFS_STAGE_CHUNK - at ?
				     (uint32_t)(end - off) :
				     MCFS_STAGE_CHUNK - at;

		rc = reserve(p, st, i, at + n);
		if (rc)
			break;
		if (at > st->fill[i]) /* a gap: it must read as zeros */
			memset(st->chunk[i] + st->fill[i], 0, at - st->fill[i]);
		memcpy(st->chunk[i] + at, src, n);
		if (at + n > st->fill[i])
			st->fill[i] = at + n;
		off += n;
		src += n;
	}
	if (off > start && off > st->size) /* only what was written */
		st->size = off;
	return rc;
}

int mcfs_stage_truncate(struct mcfs_stage_pool *p, struct mcfs_stage *st,
			uint64_t size)
{
	size_t keep =
		(size_t)((size + MCFS_STAGE_CHUNK - 1) / MCFS_STAGE_CHUNK);

	for (size_t i = keep; i < st->n; i++) {
		if (st->chunk[i])
			chunk_put(p, st->chunk[i], st->cap[i]);
		st->chunk[i] = NULL;
		st->cap[i] = st->fill[i] = 0;
	}
	if (keep && keep <= st->n && size % MCFS_STAGE_CHUNK) {
		uint32_t tail = (uint32_t)(size % MCFS_STAGE_CHUNK);
		if (st->fill[keep - 1] > tail)
			st->fill[keep - 1] = tail;
	}
	st->size = size;
	return 0;
}

size_t mcfs_stage_span(const struct mcfs_stage *st, uint64_t off, size_t len,
		       const char **ptr)
{
	size_t i;
	uint32_t at, n;

	*ptr = NULL;
	if (off >= st->size)
		return 0;
	if (len > st->size - off)
		len = (size_t)(st->size - off);
	i = (size_t)(off / MCFS_STAGE_CHUNK);
	at = (uint32_t)(off % MCFS_STAGE_CHUNK);
	n = len < MCFS_STAGE_CHUNK - at ? (uint32_t)len : MCFS_STAGE_CHUNK - at;
	if (i >= st->n || !st->chunk[i] || at >= st->fill[i])
		return n; /* zeros up to the chunk's end at most */
	if (n > st->fill[i] - at)
		n = st->fill[i] - at;
	*ptr = st->chunk[i] + at;
	return n;
}

void mcfs_stage_release(struct mcfs_stage_pool *p, struct mcfs_stage *st)
{
	for (size_t i = 0; i < st->n; i++)
		if (st->chunk[i])
			chunk_put(p, st->chunk[i], st->cap[i]);
	atomic_fetch_sub(&p->held, st->n * ENTRY);
	free(st->chunk);
	free(st->cap);
	free(st->fill);
	memset(st, 0, sizeof(*st));
}
