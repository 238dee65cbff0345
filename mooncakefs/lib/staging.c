/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Staging buffer allocator (see staging.h). The free list never holds more
 * than (outstanding allocations + 1) extents, so alloc reserves room for
 * one more and free never needs memory.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "mc_time.h"
#include "mooncake/te.h"
#include "staging.h"
#include "util.h"

#define ALIGN 64u

struct extent {
	size_t off, len;
};

struct mcs_staging {
	uint8_t *base;
	size_t len;
	bool registered;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct extent *free; /* sorted by off, never adjacent */
	size_t n_free, cap_free;
	size_t n_alloc;
	size_t free_bytes;
};

static size_t round_up(size_t v)
{
	return (v + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

int mcs_staging_create(struct te_engine *eng, size_t len,
		       struct mcs_staging **out)
{
	struct mcs_staging *s;
	int rc;

	if (!len || len > SIZE_MAX - ALIGN)
		return -EINVAL;
	len = round_up(len);
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->free = calloc(4, sizeof(*s->free));
	if (!s->free) {
		free(s);
		return -ENOMEM;
	}
	s->cap_free = 4;
	s->base = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->base == MAP_FAILED) {
		rc = -errno;
		free(s->free);
		free(s);
		return rc;
	}
	if (eng) {
		rc = te_register(eng, s->base, len, "cpu:0", false);
		if (rc) {
			munmap(s->base, len);
			free(s->free);
			free(s);
			return rc;
		}
		s->registered = true;
	}
	s->len = len;
	s->free[0] = (struct extent){ .off = 0, .len = len };
	s->n_free = 1;
	s->free_bytes = len;
	pthread_mutex_init(&s->lock, NULL);
	mc_cond_init_mono(&s->cond);
	*out = s;
	return 0;
}

void mcs_staging_destroy(struct mcs_staging *s, struct te_engine *eng)
{
	if (!s)
		return;
	if (s->registered && eng)
		(void)te_unregister(eng, s->base);
	munmap(s->base, s->len);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s->free);
	free(s);
}

size_t mcs_staging_size(const struct mcs_staging *s)
{
	return s->len;
}

size_t mcs_staging_free_bytes(struct mcs_staging *s)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = s->free_bytes;
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* First fit; caller holds the lock. Returns the offset or SIZE_MAX. */
static size_t take(struct mcs_staging *s, size_t len)
{
	for (size_t i = 0; i < s->n_free; i++) {
		struct extent *e = &s->free[i];
		size_t off;

		if (e->len < len)
			continue;
		off = e->off;
		e->off += len;
		e->len -= len;
		if (!e->len) {
			memmove(e, e + 1, (s->n_free - i - 1) * sizeof(*e));
			s->n_free--;
		}
		s->n_alloc++;
		s->free_bytes -= len;
		return off;
	}
	return SIZE_MAX;
}

/* Room for one more extent than free could ever need. */
static int reserve(struct mcs_staging *s)
{
	size_t need = s->n_alloc + 2;
	struct extent *n;

	if (s->cap_free >= need)
		return 0;
	n = realloc(s->free, need * 2 * sizeof(*n));
	if (!n)
		return -ENOMEM;
	s->free = n;
	s->cap_free = need * 2;
	return 0;
}

int mcs_staging_alloc(struct mcs_staging *s, size_t len, unsigned timeout_ms,
		      void **out)
{
	struct timespec dl;
	size_t off;
	int rc = 0;

	if (!len)
		return -EINVAL;
	if (len > s->len)
		return -EMSGSIZE;
	len = round_up(len);
	dl = mc_mono_deadline(timeout_ms);
	pthread_mutex_lock(&s->lock);
	for (;;) {
		rc = reserve(s);
		if (rc)
			break;
		off = take(s, len);
		if (off != SIZE_MAX) {
			*out = s->base + off;
			break;
		}
		if (pthread_cond_timedwait(&s->cond, &s->lock, &dl) ==
		    ETIMEDOUT) {
			off = take(s, len);
			if (off != SIZE_MAX)
				*out = s->base + off;
			else
				rc = -ENOBUFS;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void mcs_staging_free(struct mcs_staging *s, void *p, size_t len)
{
	size_t off = (size_t)((uint8_t *)p - s->base);
	size_t lo = 0, hi, i;
	bool left, right;

	if (!p || !len)
		return;
	len = round_up(len);
	pthread_mutex_lock(&s->lock);
	hi = s->n_free;
	/* i: the first free extent after off. */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (s->free[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	i = lo;
	left = i > 0 && s->free[i - 1].off + s->free[i - 1].len == off;
	right = i < s->n_free && off + len == s->free[i].off;
	if (left && right) {
		s->free[i - 1].len += len + s->free[i].len;
		memmove(&s->free[i], &s->free[i + 1],
			(s->n_free - i - 1) * sizeof(*s->free));
		s->n_free--;
	} else if (left) {
		s->free[i - 1].len += len;
	} else if (right) {
		s->free[i].off = off;
		s->free[i].len += len;
	} else {
		memmove(&s->free[i + 1], &s->free[i],
			(s->n_free - i) * sizeof(*s->free));
		s->free[i] = (struct extent){ .off = off, .len = len };
		s->n_free++;
	}
	s->n_alloc--;
	s->free_bytes += len;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}
