/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Registered memory: a table of non-overlapping buffers sorted by address
 * (binary search on every request and every served peer access). The
 * public te_register()/te_unregister() (register.c) fill it and publish
 * the change; this file is the table alone and calls nothing else in
 * libte, so the transports, which check peers' accesses against it, and
 * desc.c, which describes it, depend on it and it on none of them.
 *
 * Lifetimes: a registration is freed by te_unregister() only when no
 * request of this engine uses it (busy == 0); peers' accesses are checked
 * against the table under reg_lock, held by the serving transport for the
 * duration of the copy, so unregistering waits for them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "te_int.h"
#include "mooncake/mc_err.h"

/* Index of the first registration with addr > a. */
static unsigned upper_bound(struct te_engine *eng, uintptr_t a)
{
	unsigned lo = 0, hi = eng->n_regs;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (eng->regs[mid]->addr <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Caller holds reg_lock. */
static struct te_memreg *find_locked(struct te_engine *eng, uintptr_t addr,
				     uint64_t len)
{
	unsigned i = upper_bound(eng, addr);
	struct te_memreg *r;

	if (i == 0)
		return NULL;
	r = eng->regs[i - 1];
	if (addr - r->addr > r->len || len > r->len - (addr - r->addr))
		return NULL;
	return r;
}

struct te_memreg *te__reg_find(struct te_engine *eng, uintptr_t addr,
			       uint64_t len, bool remote_only)
{
	struct te_memreg *r;

	pthread_rwlock_rdlock(&eng->reg_lock);
	r = find_locked(eng, addr, len);
	if (r && remote_only && !r->remote)
		r = NULL;
	if (r)
		atomic_fetch_add(&r->busy, 1);
	pthread_rwlock_unlock(&eng->reg_lock);
	return r;
}

struct te_memreg *te__reg_find_remote(struct te_engine *eng, uint64_t addr,
				      uint64_t len)
{
	struct te_memreg *r = find_locked(eng, (uintptr_t)addr, len);

	return r && r->remote && addr + len >= addr ? r : NULL;
}

bool te__reg_check_remote(struct te_engine *eng, uint64_t addr, uint64_t len)
{
	return te__reg_find_remote(eng, addr, len) != NULL;
}

int te__reg_insert(struct te_engine *eng, struct te_memreg *r)
{
	unsigned i;
	int rc = 0;

	pthread_rwlock_wrlock(&eng->reg_lock);
	i = upper_bound(eng, r->addr);
	if ((i > 0 &&
	     eng->regs[i - 1]->addr + eng->regs[i - 1]->len > r->addr) ||
	    (i < eng->n_regs && eng->regs[i]->addr < r->addr + r->len)) {
		rc = -EEXIST;
		goto out;
	}
	if (eng->n_regs == eng->cap_regs) {
		unsigned cap = eng->cap_regs ? eng->cap_regs * 2 : 16;
		struct te_memreg **n = realloc(eng->regs, cap * sizeof(*n));
		if (!n) {
			rc = -ENOMEM;
			goto out;
		}
		eng->regs = n;
		eng->cap_regs = cap;
	}
	memmove(&eng->regs[i + 1], &eng->regs[i],
		(eng->n_regs - i) * sizeof(*eng->regs));
	eng->regs[i] = r;
	eng->n_regs++;
out:
	pthread_rwlock_unlock(&eng->reg_lock);
	return rc;
}

int te__reg_remove(struct te_engine *eng, uintptr_t addr,
		   struct te_memreg **out)
{
	unsigned i;
	int rc = 0;

	*out = NULL;
	pthread_rwlock_wrlock(&eng->reg_lock);
	i = upper_bound(eng, addr);
	if (i == 0 || eng->regs[i - 1]->addr != addr) {
		rc = -ENOENT;
	} else if (atomic_load(&eng->regs[i - 1]->busy)) {
		rc = -EBUSY;
	} else {
		*out = eng->regs[i - 1];
		memmove(&eng->regs[i - 1], &eng->regs[i],
			(eng->n_regs - i) * sizeof(*eng->regs));
		eng->n_regs--;
	}
	pthread_rwlock_unlock(&eng->reg_lock);
	return rc;
}

void te__reg_free(struct te_memreg *r)
{
	free(r->shm_path);
	free(r);
}

void te__regs_free(struct te_engine *eng)
{
	for (unsigned i = 0; i < eng->n_regs; i++)
		te__reg_free(eng->regs[i]);
	free(eng->regs);
	eng->regs = NULL;
	eng->n_regs = eng->cap_regs = 0;
}
