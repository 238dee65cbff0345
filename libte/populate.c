/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Background fault-in of a fresh allocation (see te_int.h). First-touch
 * faults are slow on VMs (0.24 to 2 GB/s here), so a 4 GiB segment faulted
 * in by the caller holds up setup() for seconds. Instead up to 4 threads
 * take 16 MiB chunks from one atomic counter and fault them in with
 * MADV_POPULATE_WRITE (Linux 5.14+; older kernels: an atomic no-op add per
 * page, which never loses a concurrent writer's byte), while the caller
 * goes on. Only memory whose faults cannot fail is handed over: a memfd
 * or private memory (no filesystem limit) or a file whose blocks are
 * reserved with fallocate, so the owner and its peers may touch any page
 * at any time, populated or not.
 *
 * Faulting in ahead stops while the machine has less memory available
 * than a reserve (MemAvailable in /proc/meminfo; MC_POPULATE_RESERVE_MB,
 * by default 1/16 of RAM and at least 256 MiB), or the process's memory
 * cgroup less room below its limit than a reserve (common/mc_memcg.c; the same
 * variable, by default 1/16 of the limit and at least 64 MiB): a segment
 * larger than what is free then fills as it is used, as upstream's, instead of
 * taking every page at once and getting its process killed for memory
 * before it stored anything. Logged once per allocation.
 *
 * Lifetime: te__populate_stop() stops the threads between chunks and
 * joins them; it must run before the memory is unmapped.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mc_log.h"
#include "mc_memcg.h"
#include "te_int.h"

#define CHUNK (16u << 20)
#define MAX_THREADS 4

struct te_populate {
	char *base;
	size_t len;
	_Atomic size_t next; /* offset of the next chunk to take */
	_Atomic bool stop;
	unsigned n_threads;
	pthread_t threads[MAX_THREADS];
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	unsigned done; /* threads finished */
	uint64_t reserve; /* bytes left available to the machine */
	_Atomic bool held; /* stopped for the reserve (logged) */
};

/* /proc/meminfo's MemAvailable in bytes, or UINT64_MAX when unknown. */
static uint64_t mem_available(void)
{
	uint64_t kb = UINT64_MAX;
	char line[128];
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return UINT64_MAX;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %" SCNu64 " kB", &kb) == 1)
			break;
	fclose(f);
	return kb == UINT64_MAX ? kb : kb << 10;
}

/* MC_POPULATE_RESERVE_MB, else 1/16 of RAM and at least 256 MiB. */
static uint64_t reserve_bytes(void)
{
	const char *s = getenv("MC_POPULATE_RESERVE_MB");
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t r =
		pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz / 16 : 0;

	if (s && *s) {
		char *end;
		unsigned long long mb = strtoull(s, &end, 10);

		if (!*end && mb < (UINT64_MAX >> 20))
			return (uint64_t)mb << 20;
	}
	return r < (256ull << 20) ? 256ull << 20 : r;
}

/* The reserve kept below a memory cgroup's limit: MC_POPULATE_RESERVE_MB,
 * else 1/16 of the limit and at least 64 MiB. */
static uint64_t cgroup_reserve(uint64_t limit)
{
	const char *s = getenv("MC_POPULATE_RESERVE_MB");
	uint64_t r = limit / 16;

	if (s && *s)
		return reserve_bytes();
	return r < (64ull << 20) ? 64ull << 20 : r;
}

static bool fits(uint64_t avail, uint64_t reserve)
{
	return avail == UINT64_MAX ||
	       (avail >= reserve && avail - reserve >= CHUNK);
}

/* Whether a chunk may be faulted in now: false once (and logged) when
 * the machine, or the process's memory cgroup (a container's limit),
 * would keep less than its reserve. */
static bool room_for_chunk(struct te_populate *job, size_t off)
{
	uint64_t avail = mem_available(), limit = UINT64_MAX;
	uint64_t cg = mc_memcg_room(&limit);

	if (fits(avail, job->reserve) && fits(cg, cgroup_reserve(limit)))
		return true;
	if (atomic_exchange(&job->held, true))
		return false;
	if (!fits(avail, job->reserve))
		mc_log_warn("te",
			    "memory of %zu MiB: stopped faulting it in ahead "
			    "at %zu MiB, the machine has %" PRIu64
			    " MiB available (MC_POPULATE_RESERVE_MB %" PRIu64
			    "): the rest is taken as it is used",
			    job->len >> 20, off >> 20, avail >> 20,
			    job->reserve >> 20);
	else
		mc_log_warn(
			"te",
			"memory of %zu MiB: stopped faulting it in ahead "
			"at %zu MiB, the process's memory cgroup (limit %" PRIu64
			" MiB) has %" PRIu64 " MiB left (reserve %" PRIu64
			" MiB): the rest is taken as it is used; a segment "
			"larger than the limit allows gets the process killed "
			"for memory once it fills",
			job->len >> 20, off >> 20, limit >> 20, cg >> 20,
			cgroup_reserve(limit) >> 20);
	return false;
}

static void touch(char *p, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);

#ifdef MADV_POPULATE_WRITE
	if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
		return;
#endif
	for (size_t off = 0; off < len; off += (size_t)page)
		__atomic_fetch_add(p + off, 0, __ATOMIC_RELAXED);
}

static void *populate_thread(void *arg)
{
	struct te_populate *job = arg;

	while (!atomic_load(&job->stop)) {
		size_t off = atomic_fetch_add(&job->next, CHUNK);

		if (off >= job->len || !room_for_chunk(job, off))
			break;
		touch(job->base + off,
		      job->len - off < CHUNK ? job->len - off : CHUNK);
	}
	pthread_mutex_lock(&job->lock);
	job->done++;
	pthread_cond_broadcast(&job->done_cond);
	pthread_mutex_unlock(&job->lock);
	return NULL;
}

static unsigned thread_count(size_t len)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t chunks = (len + CHUNK - 1) / CHUNK;
	unsigned n = cpus < 1		? 1 :
		     cpus > MAX_THREADS ? MAX_THREADS :
					  (unsigned)cpus;

	return chunks < n ? (unsigned)chunks : n;
}

int te__populate_start(void *base, size_t len, struct te_populate **out)
{
	struct te_populate *job = calloc(1, sizeof(*job));
	unsigned want = thread_count(len);

	if (!job)
		return -ENOMEM;
	job->base = base;
	job->len = len;
	job->reserve = reserve_bytes();
	pthread_mutex_init(&job->lock, NULL);
	pthread_cond_init(&job->done_cond, NULL);
	for (unsigned i = 0; i < want; i++) {
		if (pthread_create(&job->threads[i], NULL, populate_thread,
				   job))
			break;
		job->n_threads++;
	}
	if (!job->n_threads) {
		/* No thread to spare: fault in here, as before, while there
		 * is room. */
		for (size_t off = 0; off < len && room_for_chunk(job, off);
		     off += CHUNK)
			touch(job->base + off,
			      len - off < CHUNK ? len - off : CHUNK);
	}
	*out = job;
	return 0;
}

void te__populate_wait(struct te_populate *job)
{
	if (!job)
		return;
	pthread_mutex_lock(&job->lock);
	while (job->done < job->n_threads)
		pthread_cond_wait(&job->done_cond, &job->lock);
	pthread_mutex_unlock(&job->lock);
}

void te__populate_stop(struct te_populate *job)
{
	if (!job)
		return;
	atomic_store(&job->stop, true);
	for (unsigned i = 0; i < job->n_threads; i++)
		pthread_join(job->threads[i], NULL);
	pthread_cond_destroy(&job->done_cond);
	pthread_mutex_destroy(&job->lock);
	free(job);
}
