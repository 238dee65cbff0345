/* SPDX-License-Identifier: Apache-2.0 */
/*
 * c_batch_bench: the C side of bench/python_store_bench.py. It makes the
 * calls the Python package makes, through include/mooncake/store.h, so
 * that the Python layer's overhead is the difference between the two:
 *
 *   per value size, --iters rounds (after --warmup unreported ones) of
 *     mooncake_store_batch_put_from   --count fresh keys      (timed)
 *     mooncake_store_batch_get_into   the same keys back      (timed)
 *     mooncake_store_batch_remove     force, so the pool does not fill
 *
 * from one registered buffer of 2 x count x size bytes (sources in the
 * first half, destinations in the second). The first round's bytes are
 * compared with what was put. The client contributes no segment: the
 * pool members hold the objects.
 *
 * Usage: c_batch_bench --master H:P --metadata URL [--count 32]
 *        [--sizes 65536,1048576] [--iters 200] [--warmup 20]
 *        [--prefix cbb] [--hostname 127.0.0.1] [--lockstep 1]
 *
 * --lockstep 1: before each round (warm-up ones included) wait for a line
 * on stdin, and after it print {"it":N,"put_ns":T,"get_ns":T}, so that a
 * driver can interleave this process's rounds with another's (the Python
 * side's) and compare them round by round under the same conditions.
 *
 * Output: one JSON object per (size, op) on stdout: impl, size, count,
 * op, iters, p50_us, mean_us, min_us, gbps (count x size / p50, 10^9
 * bytes/s). MC_FORCE_TCP=1 makes the transfers use loopback TCP.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "mooncake/store.h"

#define CBB_MAX_SIZES 16
#define CBB_KEY_LEN 128

struct cbb_opts {
	const char *master, *metadata, *prefix, *hostname;
	size_t count;
	size_t sizes[CBB_MAX_SIZES];
	size_t n_sizes;
	unsigned iters, warmup;
	bool lockstep;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *op, size_t size, size_t count, uint64_t *ns,
		   unsigned n)
{
	uint64_t sum = 0;
	double p50;

	qsort(ns, n, sizeof(*ns), cmp_u64);
	for (unsigned i = 0; i < n; i++)
		sum += ns[i];
	p50 = n % 2 ? (double)ns[n / 2] :
		      ((double)ns[n / 2 - 1] + (double)ns[n / 2]) / 2;
	printf("{\"impl\":\"c\",\"size\":%zu,\"count\":%zu,\"op\":\"%s\","
	       "\"iters\":%u,\"p50_us\":%.2f,\"mean_us\":%.2f,"
	       "\"min_us\":%.2f,\"gbps\":%.3f}\n",
	       size, count, op, n, p50 / 1e3, (double)sum / n / 1e3,
	       (double)ns[0] / 1e3, (double)(count * size) / p50);
	fflush(stdout);
}

static int parse_sizes(const char *s, struct cbb_opts *o)
{
	char *end;

	o->n_sizes = 0;
	while (*s) {
		unsigned long long v = strtoull(s, &end, 10);

		if (end == s || !v || o->n_sizes == CBB_MAX_SIZES)
			return -EINVAL;
		o->sizes[o->n_sizes++] = (size_t)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -EINVAL;
	}
	return o->n_sizes ? 0 : -EINVAL;
}

static int parse_args(int argc, char **argv, struct cbb_opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *name = argv[i], *val;

		if (strncmp(name, "--", 2) || i + 1 >= argc) {
			fprintf(stderr, "c_batch_bench: bad argument %s\n",
				name);
			return -EINVAL;
		}
		val = argv[++i];
		name += 2;
		if (!strcmp(name, "master"))
			o->master = val;
		else if (!strcmp(name, "metadata"))
			o->metadata = val;
		else if (!strcmp(name, "prefix"))
			o->prefix = val;
		else if (!strcmp(name, "hostname"))
			o->hostname = val;
		else if (!strcmp(name, "count"))
			o->count = strtoul(val, NULL, 10);
		else if (!strcmp(name, "iters"))
			o->iters = (unsigned)strtoul(val, NULL, 10);
		else if (!strcmp(name, "warmup"))
			o->warmup = (unsigned)strtoul(val, NULL, 10);
		else if (!strcmp(name, "lockstep"))
			o->lockstep = strtoul(val, NULL, 10) != 0;
		else if (!strcmp(name, "sizes")) {
			if (parse_sizes(val, o)) {
				fprintf(stderr, "c_batch_bench: bad --sizes\n");
				return -EINVAL;
			}
		} else {
			fprintf(stderr, "c_batch_bench: unknown --%s\n", name);
			return -EINVAL;
		}
	}
	if (!o->count || !o->iters) {
		fprintf(stderr, "c_batch_bench: --count and --iters > 0\n");
		return -EINVAL;
	}
	return 0;
}

/* One size: warmup + iters rounds; 0 or a store code. */
static int run_size(mooncake_store_t st, const struct cbb_opts *o, size_t size)
{
	size_t n = o->count, span = n * size;
	char(*names)[CBB_KEY_LEN] = calloc(n, sizeof(*names));
	char *buf;
	const char **keys = calloc(n, sizeof(*keys));
	void **src = calloc(n, sizeof(*src)), **dst = calloc(n, sizeof(*dst));
	size_t *sizes = calloc(n, sizeof(*sizes));
	int *pres = calloc(n, sizeof(*pres)), *rres = calloc(n, sizeof(*rres));
	int64_t *gres = calloc(n, sizeof(*gres));
	uint64_t *put_ns = calloc(o->iters, sizeof(uint64_t));
	uint64_t *get_ns = calloc(o->iters, sizeof(uint64_t));
	int rc = 0;

	buf = mmap(NULL, 2 * span, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (buf == MAP_FAILED)
		buf = NULL;
	if (!keys || !src || !dst || !sizes || !pres || !rres || !gres ||
	    !put_ns || !get_ns || !names || !buf) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < span; i++)
		buf[i] = (char)(i * 2654435761u >> 13);
	rc = mooncake_store_register_buffer(st, buf, 2 * span);
	if (rc)
		goto out;
	for (size_t i = 0; i < n; i++) {
		keys[i] = names[i];
		src[i] = buf + i * size;
		dst[i] = buf + span + i * size;
		sizes[i] = size;
	}
	for (unsigned it = 0; it < o->warmup + o->iters; it++) {
		bool timed = it >= o->warmup;
		uint64_t t0, t1, t2;
		char line[16];

		if (o->lockstep && !fgets(line, sizeof(line), stdin)) {
			rc = -EPIPE;
			break;
		}

		for (size_t i = 0; i < n; i++)
			snprintf(names[i], CBB_KEY_LEN, "%s/%zu/%u/%zu",
				 o->prefix, size, it, i);
		t0 = now_ns();
		rc = mooncake_store_batch_put_from(st, keys, src, sizes, n,
						   NULL, pres);
		t1 = now_ns();
		if (!rc)
			rc = mooncake_store_batch_get_into(st, keys, dst, sizes,
							   n, gres);
		t2 = now_ns();
		for (size_t i = 0; !rc && i < n; i++)
			if (pres[i] || gres[i] != (int64_t)size)
				rc = pres[i] ? pres[i] : (int)gres[i];
		if (!rc && it == 0 && memcmp(buf, buf + span, span))
			rc = -EIO;
		if (!rc)
			rc = mooncake_store_batch_remove(st, keys, n, true,
							 rres);
		if (rc) {
			fprintf(stderr,
				"c_batch_bench: size %zu round %u: %d "
				"(%s)\n",
				size, it, rc, mooncake_store_strerror(rc));
			break;
		}
		if (timed) {
			put_ns[it - o->warmup] = t1 - t0;
			get_ns[it - o->warmup] = t2 - t1;
		}
		if (o->lockstep) {
			printf("{\"it\":%u,\"put_ns\":%" PRIu64
			       ",\"get_ns\":%" PRIu64 "}\n",
			       it, t1 - t0, t2 - t1);
			fflush(stdout);
		}
	}
	(void)mooncake_store_unregister_buffer(st, buf);
	if (!rc) {
		report("batch_put_from", size, n, put_ns, o->iters);
		report("batch_get_into", size, n, get_ns, o->iters);
	}
out:
	if (buf)
		munmap(buf, 2 * span);
	free(names);
	free(keys);
	free(src);
	free(dst);
	free(sizes);
	free(pres);
	free(rres);
	free(gres);
	free(put_ns);
	free(get_ns);
	return rc;
}

int main(int argc, char **argv)
{
	struct cbb_opts o = {
		.master = "127.0.0.1:50051",
		.metadata = "P2PHANDSHAKE",
		.prefix = "cbb",
		.hostname = "127.0.0.1",
		.count = 32,
		.sizes = { 65536, 1048576 },
		.n_sizes = 2,
		.iters = 200,
		.warmup = 20,
	};
	mooncake_store_t st;
	int rc;

	if (parse_args(argc, argv, &o))
		return 2;
	st = mooncake_store_create();
	if (!st)
		return 1;
	rc = mooncake_store_setup(st, o.hostname, o.metadata, 0, 0, "tcp", "",
				  o.master);
	if (rc) {
		fprintf(stderr, "c_batch_bench: setup: %s\n",
			mooncake_store_strerror(rc));
		mooncake_store_destroy(st);
		return 1;
	}
	for (size_t i = 0; !rc && i < o.n_sizes; i++)
		rc = run_size(st, &o, o.sizes[i]);
	mooncake_store_destroy(st);
	return rc ? 1 : 0;
}
