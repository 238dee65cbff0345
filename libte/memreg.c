/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Registered memory: a table of non-overlapping buffers sorted by address
 * (binary search on every request and every served peer access), and
 * shareable memory from te_mem_alloc() (named shm, pre-faulted).
 *
 * Lifetimes: a registration is freed by te_unregister() only when no
 * request of this engine uses it (busy == 0); peers' accesses are checked
 * against the table under reg_lock, held by the serving transport for the
 * duration of the copy, so unregistering waits for them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "te_int.h"
#include "mc_log.h"
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

bool te__reg_check_remote(struct te_engine *eng, uint64_t addr, uint64_t len)
{
	struct te_memreg *r = find_locked(eng, (uintptr_t)addr, len);

	return r && r->remote && addr + len >= addr;
}

/* The location tag names device memory we cannot move yet. */
static bool is_device_location(const char *loc)
{
	return loc && (!strncmp(loc, "cuda:", 5) || !strncmp(loc, "gpu:", 4));
}

/* Shareable allocations made by te_mem_alloc(), to find their file. */
struct shm_alloc {
	struct shm_alloc *next;
	uintptr_t addr;
	size_t len;
	char *path;
	bool persistent;
	bool unlinked; /* te_mem_unlink() removed the name */
	int fd; /* holds a shared flock: peers test it to see we are alive */
};

static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shm_alloc *allocs;

static char *shm_path_of(uintptr_t addr, size_t len, uint64_t *offset)
{
	char *path = NULL;

	pthread_mutex_lock(&alloc_lock);
	for (struct shm_alloc *a = allocs; a; a = a->next) {
		if (addr >= a->addr && addr + len <= a->addr + a->len) {
			path = strdup(a->path);
			*offset = addr - a->addr;
			break;
		}
	}
	pthread_mutex_unlock(&alloc_lock);
	return path;
}

int te_register(struct te_engine *eng, void *addr, size_t len,
		const char *location, bool remote_accessible)
{
	uintptr_t a = (uintptr_t)addr;
	struct te_memreg *r;
	uint64_t off = 0;
	unsigned i;
	int rc = 0;

	if (!addr || !len || a + len < a)
		return -EINVAL;
	if (is_device_location(location) || te__is_device_ptr(addr))
		return MC_ENOTSUPPORTED;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->addr = a;
	r->len = len;
	r->remote = remote_accessible;
	snprintf(r->location, sizeof(r->location), "%s",
		 location && *location ? location : "*");
	r->shm_path = shm_path_of(a, len, &off);
	r->shm_offset = off;

	pthread_rwlock_wrlock(&eng->reg_lock);
	i = upper_bound(eng, a);
	if ((i > 0 && eng->regs[i - 1]->addr + eng->regs[i - 1]->len > a) ||
	    (i < eng->n_regs && eng->regs[i]->addr < a + len)) {
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
	if (rc) {
		free(r->shm_path);
		free(r);
		return rc;
	}
	return remote_accessible ? te__publish(eng) : 0;
}

int te_unregister(struct te_engine *eng, void *addr)
{
	struct te_memreg *r = NULL;
	unsigned i;
	int rc = 0;

	pthread_rwlock_wrlock(&eng->reg_lock);
	i = upper_bound(eng, (uintptr_t)addr);
	if (i == 0 || eng->regs[i - 1]->addr != (uintptr_t)addr) {
		rc = -ENOENT;
	} else if (atomic_load(&eng->regs[i - 1]->busy)) {
		rc = -EBUSY;
	} else {
		r = eng->regs[i - 1];
		memmove(&eng->regs[i - 1], &eng->regs[i],
			(eng->n_regs - i) * sizeof(*eng->regs));
		eng->n_regs--;
	}
	pthread_rwlock_unlock(&eng->reg_lock);
	if (!r)
		return rc;
	rc = r->remote ? te__publish(eng) : 0;
	free(r->shm_path);
	free(r);
	return rc;
}

void te__regs_free(struct te_engine *eng)
{
	for (unsigned i = 0; i < eng->n_regs; i++) {
		free(eng->regs[i]->shm_path);
		free(eng->regs[i]);
	}
	free(eng->regs);
	eng->regs = NULL;
	eng->n_regs = eng->cap_regs = 0;
}

/* Populate writable pages; touch them one by one on kernels < 5.14. */
static void prefault(void *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
	if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
		return;
#endif
	long page = sysconf(_SC_PAGESIZE);

	for (size_t off = 0; off < len; off += (size_t)page)
		((volatile char *)p)[off] = ((volatile char *)p)[off];
}

#define ANON "mooncake.anon."

/*
 * Unnamed allocations are /dev/shm/mooncake.anon.<pid>.<n> and die with their
 * process, but a process killed with -9 leaves its files behind. The
 * first unnamed allocation of a process removes those whose process is
 * gone (no such pid) and whose lock nobody holds (an owner holds a shared
 * flock for as long as the memory is its).
 */
static void sweep_dead_unnamed(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[300], *end;
		long pid;
		int fd;

		const char *num = e->d_name + strlen(ANON);

		if (strncmp(e->d_name, ANON, strlen(ANON)))
			continue;
		pid = strtol(num, &end, 10);
		if (end == num || *end != '.' || pid <= 0 ||
		    pid == (long)getpid())
			continue;
		(void)strtoul(end + 1, &end, 10);
		if (*end || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && !unlink(path))
			mc_log_info("te",
				    "removed %s, left by dead process %ld",
				    path, pid);
		close(fd);
	}
	closedir(d);
}

int te_mem_alloc(struct te_engine *eng, size_t len, const char *name,
		 void **out)
{
	static _Atomic unsigned seq;
	static pthread_once_t swept = PTHREAD_ONCE_INIT;
	struct shm_alloc *a;
	char path[TE_NAME_MAX + 64];
	void *p;
	int fd, rc;

	if (!len)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	if (name) {
		snprintf(path, sizeof(path), "/mooncake.%s", name);
	} else {
		(void)pthread_once(&swept, sweep_dead_unnamed);
		snprintf(path, sizeof(path), "/" ANON "%d.%u", (int)getpid(),
			 atomic_fetch_add(&seq, 1));
	}
	for (char *c = path + 1; *c; c++)
		if (*c == '/')
			*c = '_';
	fd = shm_open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		free(a);
		return rc;
	}
	/*
	 * Liveness for same-host peers (and the sweep above): we hold a
	 * shared lock for as long as the memory is ours; a peer that can
	 * take an exclusive one knows we are gone (the kernel drops the lock
	 * when we die). Taken at once, before the file is sized.
	 */
	(void)flock(fd, LOCK_SH);
	if (ftruncate(fd, (off_t)len)) {
		rc = -errno;
		goto err_close;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		goto err_close;
	}
	/*
	 * Ask for huge pages before the pages exist (where shmem THP is
	 * enabled), then pre-fault now: first-touch faults are slow on VMs.
	 */
	(void)madvise(p, len, MADV_HUGEPAGE);
	prefault(p, len);
	a->fd = fd;
	a->addr = (uintptr_t)p;
	a->len = len;
	a->persistent = name != NULL;
	a->path = malloc(strlen(path) + 9);
	if (!a->path) {
		munmap(p, len);
		close(fd);
		shm_unlink(path);
		free(a);
		return -ENOMEM;
	}
	snprintf(a->path, strlen(path) + 9, "/dev/shm%s", path);
	pthread_mutex_lock(&alloc_lock);
	a->next = allocs;
	allocs = a;
	pthread_mutex_unlock(&alloc_lock);
	(void)eng;
	*out = p;
	return 0;

err_close:
	close(fd);
	shm_unlink(path);
	free(a);
	return rc;
}

int te_mem_unlink(struct te_engine *eng, void *addr)
{
	int rc = -ENOENT;

	(void)eng;
	pthread_mutex_lock(&alloc_lock);
	for (struct shm_alloc *a = allocs; a; a = a->next) {
		if (a->addr != (uintptr_t)addr)
			continue;
		rc = 0;
		if (!a->unlinked && unlink(a->path) && errno != ENOENT)
			rc = -errno;
		/* Never unlink again: the name may be someone else's now. */
		a->unlinked = true;
		break;
	}
	pthread_mutex_unlock(&alloc_lock);
	return rc;
}

void te_mem_free(struct te_engine *eng, void *addr)
{
	struct shm_alloc **pp, *a = NULL;

	(void)eng;
	pthread_mutex_lock(&alloc_lock);
	for (pp = &allocs; *pp; pp = &(*pp)->next) {
		if ((*pp)->addr == (uintptr_t)addr) {
			a = *pp;
			*pp = a->next;
			break;
		}
	}
	pthread_mutex_unlock(&alloc_lock);
	if (!a)
		return;
	munmap(addr, a->len);
	if (!a->persistent && !a->unlinked)
		unlink(a->path);
	close(a->fd);
	free(a->path);
	free(a);
}
