/* SPDX-License-Identifier: Apache-2.0 */
/*
 * segment_setup_bench: what a client's segment costs setup(), against the
 * baseline of private memory faulted in by the caller (mmap + memset,
 * what a process allocating its pool itself pays) and the old way (a
 * /dev/shm file pre-faulted with MADV_POPULATE_WRITE before returning),
 * all measured in the same run, interleaved, medians of --runs:
 *
 *   baseline   mmap(MAP_PRIVATE|MAP_ANONYMOUS) + memset
 *   old        shm_open + ftruncate + mmap + MADV_POPULATE_WRITE
 *   unnamed    te_mem_alloc(NULL): returns (ret), every page in (all)
 *   named      te_mem_alloc("bench..."): fallocate in /dev/shm, then same
 *
 * Usage: segment_setup_bench [runs [MiB ...]] (default 5 runs, 1024 and
 * 4096 MiB). Needs 2 x the largest size of free memory and /dev/shm.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench_util.h"
#include "mooncake/te.h"

enum { BASELINE, OLD, UNNAMED_RET, UNNAMED_ALL, NAMED_RET, NAMED_ALL, N_COL };
static const char *const col_name[N_COL] = {
	"baseline",    "old",	    "unnamed ret",
	"unnamed all", "named ret", "named all",
};

static double secs(uint64_t t0)
{
	return (double)(bench_now_ns() - t0) / 1e9;
}

static int run_baseline(size_t len, double *out)
{
	uint64_t t0 = bench_now_ns();
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -1;
	memset(p, 1, len);
	out[BASELINE] = secs(t0);
	munmap(p, len);
	return 0;
}

static int run_old(size_t len, double *out)
{
	char name[64];
	uint64_t t0 = bench_now_ns();
	void *p;
	int fd;

	snprintf(name, sizeof(name), "/mooncake.bench.old.%d", (int)getpid());
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	shm_unlink(name);
	if (ftruncate(fd, (off_t)len)) {
		close(fd);
		return -1;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -1;
	(void)madvise(p, len, MADV_POPULATE_WRITE);
	out[OLD] = secs(t0);
	munmap(p, len);
	return 0;
}

static int run_te(size_t len, const char *name, double *ret, double *all)
{
	uint64_t t0 = bench_now_ns();
	void *p;
	int rc = te_mem_alloc(NULL, len, name, &p);

	if (rc) {
		fprintf(stderr, "te_mem_alloc: %d\n", rc);
		return rc;
	}
	*ret = secs(t0);
	(void)te_mem_wait(NULL, p);
	*all = secs(t0);
	if (name)
		(void)te_mem_unlink(NULL, p);
	te_mem_free(NULL, p);
	return 0;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 5;
	size_t def[] = { 1024, 4096 }, n_sizes = 2;
	char named[64];

	if (runs < 1 || runs > 100) {
		fprintf(stderr, "usage: %s [runs [MiB ...]]\n", argv[0]);
		return 2;
	}
	snprintf(named, sizeof(named), "bench.%d", (int)getpid());
	if (argc > 2)
		n_sizes = (size_t)argc - 2;
	for (size_t s = 0; s < n_sizes; s++) {
		size_t mib = argc > 2 ? strtoull(argv[s + 2], NULL, 10) :
					def[s];
		size_t len = mib << 20;
		double *v = calloc((size_t)runs * N_COL, sizeof(*v));

		if (!v || !len)
			return 1;
		/* Interleaved: one of each per round. */
		for (int r = 0; r < runs; r++) {
			double *row = v + (size_t)r * N_COL;

			if (run_baseline(len, row) || run_old(len, row) ||
			    run_te(len, NULL, &row[UNNAMED_RET],
				   &row[UNNAMED_ALL]) ||
			    run_te(len, named, &row[NAMED_RET],
				   &row[NAMED_ALL]))
				return 1;
		}
		printf("%zu MiB, median of %d interleaved runs (s):", mib,
		       runs);
		for (int c = 0; c < N_COL; c++) {
			double col[100];

			for (int r = 0; r < runs; r++)
				col[r] = v[(size_t)r * N_COL + c];
			qsort(col, (size_t)runs, sizeof(double), cmp);
			printf("  %s %.3f", col_name[c], col[runs / 2]);
		}
		printf("\n");
		free(v);
	}
	return 0;
}
