/* SPDX-License-Identifier: Apache-2.0 */
/* Registered user buffers: a sorted range table (see regs.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "regs.h"

void mcs_regs_init(struct mcs_regs *g)
{
	pthread_rwlock_init(&g->lock, NULL);
	g->r = NULL;
	g->n = g->cap = 0;
}

void mcs_regs_free(struct mcs_regs *g)
{
	pthread_rwlock_destroy(&g->lock);
	free(g->r);
	g->r = NULL;
	g->n = g->cap = 0;
}

/* Index of the first range with addr > a; caller holds the lock. */
static size_t upper(const struct mcs_regs *g, uintptr_t a)
{
	size_t lo = 0, hi = g->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (g->r[mid].addr <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int mcs_regs_add(struct mcs_regs *g, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	size_t i;
	int rc = 0;

	if (!addr || !len || a + len < a)
		return -EINVAL;
	pthread_rwlock_wrlock(&g->lock);
	i = upper(g, a);
	if ((i > 0 && g->r[i - 1].addr + g->r[i - 1].len > a) ||
	    (i < g->n && g->r[i].addr < a + len)) {
		rc = -EEXIST;
		goto out;
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 8;
		struct mcs_range *n = realloc(g->r, cap * sizeof(*n));
		if (!n) {
			rc = -ENOMEM;
			goto out;
		}
		g->r = n;
		g->cap = cap;
	}
	memmove(&g->r[i + 1], &g->r[i], (g->n - i) * sizeof(*g->r));
	g->r[i] = (struct mcs_range){ .addr = a, .len = len };
	g->n++;
out:
	pthread_rwlock_unlock(&g->lock);
	return rc;
}

int mcs_regs_del(struct mcs_regs *g, const void *addr, size_t *len)
{
	uintptr_t a = (uintptr_t)addr;
	size_t i;
	int rc = -ENOENT;

	pthread_rwlock_wrlock(&g->lock);
	i = upper(g, a);
	if (i > 0 && g->r[i - 1].addr == a) {
		if (len)
			*len = g->r[i - 1].len;
		memmove(&g->r[i - 1], &g->r[i], (g->n - i) * sizeof(*g->r));
		g->n--;
		rc = 0;
	}
	pthread_rwlock_unlock(&g->lock);
	return rc;
}

bool mcs_regs_contains(struct mcs_regs *g, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	bool ok = false;
	size_t i;

	if (!addr || a + len < a)
		return false;
	pthread_rwlock_rdlock(&g->lock);
	i = upper(g, a);
	if (i > 0) {
		const struct mcs_range *r = &g->r[i - 1];
		ok = a - r->addr <= r->len && len <= r->len - (a - r->addr);
	}
	pthread_rwlock_unlock(&g->lock);
	return ok;
}

bool mcs_regs_overlap(struct mcs_regs *g, const void *addr, size_t len,
		      struct mcs_range *out)
{
	uintptr_t a = (uintptr_t)addr;
	bool found = false;
	size_t i;

	pthread_rwlock_rdlock(&g->lock);
	i = upper(g, a);
	if (i > 0 && g->r[i - 1].addr + g->r[i - 1].len > a) {
		*out = g->r[i - 1];
		found = true;
	} else if (i < g->n && g->r[i].addr - a < len) {
		*out = g->r[i];
		found = true;
	}
	pthread_rwlock_unlock(&g->lock);
	return found;
}
