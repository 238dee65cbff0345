/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lib_read_bench: reads objects through the store client library
 * (include/mooncake/store_fs.h, store.h) the way mooncakefs does, so that
 * scripts/bench_fs.sh can set the mount's reads next to the library's on
 * the same objects in the same run.
 *
 * For every --keys object, two ways of reading it:
 *
 *   object_read  mooncake_store_object_open (a hold), then --threads
 *                threads each read a contiguous share of the object in
 *                --chunk pieces (mooncake_store_object_read) into a
 *                registered --chunk buffer of their own, reused for
 *                every piece (as the daemon reuses its 1 MiB buffers),
 *                then mooncake_store_object_close. One pass reads the
 *                whole object once.
 *   get_into     mooncake_store_get_into of the whole object into one
 *                registered buffer of its size (one thread).
 *
 * Each case runs one unreported pass (the first pass maps and touches the
 * owner's shared memory; its rate is reported as first_gbps), then passes
 * until --seconds have gone. GB/s is 10^9 bytes per second.
 *
 * The library reads a replica on this host through shared memory unless
 * MC_FORCE_TCP=1 is in the environment (the transfer engine then reads it
 * over loopback TCP from the owner); the "path" field says which.
 *
 * --put_keys N makes N objects of --value_size bytes named
 * <--prefix><i> with batch_put_from (1000 per call), and reads nothing:
 * the filesystem benchmark lists and stats them through the mount.
 *
 * Output: one JSON object per line on stdout. Loopback only by intent;
 * nothing here asserts a timing.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench_util.h"
#include "mc_daemon.h"
#include "mooncake/store.h"
#include "mooncake/store_fs.h"

#define LRB_MAX_THREADS 64
#define LRB_PUT_BATCH 1000u
#define LRB_KEY_LEN 512

struct lrb_cfg {
	char *master_server_address;
	char *metadata_server;
	char *keys;
	char *ops;
	char *threads;
	uint64_t chunk;
	double seconds;
	int64_t put_keys;
	char *prefix;
	uint64_t value_size;
	int v;
};

#define OPT(n, t, f, d, lo, hi, h)                                           \
	{                                                                    \
		.name = n, .type = t, .offset = offsetof(struct lrb_cfg, f), \
		.def = d, .min = lo, .max = hi, .help = h                    \
	}

static const struct mc_opt lrb_opts[] = {
	OPT("master_server_address", MC_OPT_STRING, master_server_address,
	    "127.0.0.1:50051", 0, 0, "host:port of mooncake_master."),
	OPT("metadata_server", MC_OPT_STRING, metadata_server,
	    "http://127.0.0.1:8080/metadata", 0, 0,
	    "Transfer-engine metadata of the pool."),
	OPT("keys", MC_OPT_STRING, keys, "", 0, 0,
	    "Objects to read, comma-separated (existing keys)."),
	OPT("ops", MC_OPT_STRING, ops, "object_read,get_into", 0, 0,
	    "object_read, get_into or both, comma-separated."),
	OPT("threads", MC_OPT_STRING, threads, "1,4", 0, 0,
	    "Thread counts for object_read, comma-separated."),
	OPT("chunk", MC_OPT_SIZE, chunk, "1MiB", 4096, 1073741824.0,
	    "Bytes per object_read (the FUSE request size)."),
	OPT("seconds", MC_OPT_DOUBLE, seconds, "3", 0, 3600,
	    "Measured time per case (at least one pass)."),
	OPT("put_keys", MC_OPT_INT, put_keys, "0", 0, 100000000,
	    "Make this many small objects instead of reading."),
	OPT("prefix", MC_OPT_STRING, prefix, "lrb/k", 0, 0,
	    "Key prefix of --put_keys (keys are <prefix><i>)."),
	OPT("value_size", MC_OPT_SIZE, value_size, "16", 1, 1048576.0,
	    "Bytes per --put_keys object."),
	OPT("v", MC_OPT_VERBOSITY, v, "0", 0, 9,
	    "Verbosity: -v or -v=1 debug, -v=2 trace (MC_LOG_LEVEL also)."),
};

static const struct mc_cfg_spec lrb_spec = {
	.prog = "lib_read_bench",
	.summary = "Reads objects through the store client library "
		   "(object_read in chunks, get_into whole), same host or "
		   "TCP (MC_FORCE_TCP=1).",
	.opts = lrb_opts,
	.n_opts = sizeof(lrb_opts) / sizeof(lrb_opts[0]),
	.strict = true,
};

struct lrb_thread {
	pthread_t tid;
	mooncake_object_t obj;
	char *buf; /* registered, chunk bytes */
	size_t chunk;
	uint64_t start, end; /* the share of the object */
	int64_t err;
};

static void *read_share(void *arg)
{
	struct lrb_thread *t = arg;

	for (uint64_t off = t->start; off < t->end;) {
		size_t n = t->end - off < t->chunk ? (size_t)(t->end - off) :
						     t->chunk;
		int64_t got =
			mooncake_store_object_read(t->obj, off, t->buf, n);
		if (got <= 0) {
			t->err = got ? got : -1;
			break;
		}
		off += (uint64_t)got;
	}
	return NULL;
}

/* One object_read pass over key with n threads; 0 or a store code. */
static int pass_object_read(mooncake_store_t st, const char *key,
			    struct lrb_thread *th, unsigned n, uint64_t *bytes)
{
	mooncake_object_t obj;
	uint64_t size, share;
	unsigned started;
	int rc = mooncake_store_object_open(st, key, &obj);

	if (rc)
		return rc;
	size = mooncake_store_object_size(obj);
	share = (size + n - 1) / n;
	for (unsigned i = 0; i < n; i++) {
		th[i].obj = obj;
		th[i].start = (uint64_t)i * share < size ? i * share : size;
		th[i].end = th[i].start + share < size ? th[i].start + share :
							 size;
		th[i].err = 0;
	}
	for (started = 1; started < n; started++)
		if (pthread_create(&th[started].tid, NULL, read_share,
				   &th[started]))
			break;
	read_share(&th[0]);
	for (unsigned i = 1; i < started; i++)
		pthread_join(th[i].tid, NULL);
	mooncake_store_object_close(obj);
	if (started < n)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++)
		if (th[i].err)
			return (int)th[i].err;
	*bytes = size;
	return 0;
}

static int pass_get_into(mooncake_store_t st, const char *key, char *buf,
			 size_t len, uint64_t *bytes)
{
	int64_t got = mooncake_store_get_into(st, key, buf, len);

	if (got < 0)
		return (int)got;
	*bytes = (uint64_t)got;
	return 0;
}

struct lrb_case {
	const char *key;
	bool get_into;
	unsigned threads;
	struct lrb_thread *th;
	char *big;
	size_t big_len;
};

static int run_pass(mooncake_store_t st, const struct lrb_case *c,
		    uint64_t *bytes)
{
	if (c->get_into)
		return pass_get_into(st, c->key, c->big, c->big_len, bytes);
	return pass_object_read(st, c->key, c->th, c->threads, bytes);
}

static int run_case(mooncake_store_t st, const struct lrb_cfg *cfg,
		    const struct lrb_case *c, const char *path)
{
	uint64_t t0, t1, first_ns, bytes = 0, b, passes = 0, deadline;
	int rc;

	t0 = bench_now_ns();
	rc = run_pass(st, c, &b);
	first_ns = bench_now_ns() - t0;
	if (rc)
		goto fail;
	t0 = bench_now_ns();
	deadline = t0 + (uint64_t)(cfg->seconds * 1e9);
	do {
		rc = run_pass(st, c, &b);
		if (rc)
			goto fail;
		bytes += b;
		passes++;
		t1 = bench_now_ns();
	} while (t1 < deadline);
	printf("{\"tool\": \"lib_read_bench\", \"path\": \"%s\", \"key\": "
	       "\"%s\", \"op\": \"%s\", \"threads\": %u, \"chunk\": %" PRIu64
	       ", \"object_bytes\": %" PRIu64 ", \"passes\": %" PRIu64
	       ", \"seconds\": %.3f, \"gbps\": %.4f, \"first_gbps\": %.4f}\n",
	       path, c->key, c->get_into ? "get_into" : "object_read",
	       c->get_into ? 1 : c->threads, c->get_into ? b : cfg->chunk, b,
	       passes, (double)(t1 - t0) / 1e9,
	       (double)bytes / (double)(t1 - t0), (double)b / (double)first_ns);
	fflush(stdout);
	return 0;
fail:
	fprintf(stderr, "lib_read_bench: %s of %s (%u threads): %s\n",
		c->get_into ? "get_into" : "object_read", c->key, c->threads,
		mooncake_store_strerror(rc));
	return rc;
}

static int put_keys(mooncake_store_t st, const struct lrb_cfg *cfg)
{
	size_t vs = (size_t)cfg->value_size, n = LRB_PUT_BATCH;
	char *vals = NULL, (*names)[LRB_KEY_LEN] = NULL;
	const char **keys = NULL;
	void **bufs = NULL;
	size_t *sizes = NULL;
	int *res = NULL, rc = -ENOMEM;
	uint64_t t0 = bench_now_ns(), done = 0, failed = 0;

	vals = calloc(n, vs);
	names = calloc(n, sizeof(*names));
	keys = calloc(n, sizeof(*keys));
	bufs = calloc(n, sizeof(*bufs));
	sizes = calloc(n, sizeof(*sizes));
	res = calloc(n, sizeof(*res));
	if (!vals || !names || !keys || !bufs || !sizes || !res)
		goto out;
	rc = mooncake_store_register_buffer(st, vals, n * vs);
	if (rc)
		goto out;
	for (size_t i = 0; i < n; i++) {
		memset(vals + i * vs, 'a' + (int)(i % 26), vs);
		keys[i] = names[i];
		bufs[i] = vals + i * vs;
		sizes[i] = vs;
	}
	while (done < (uint64_t)cfg->put_keys) {
		size_t m = (uint64_t)cfg->put_keys - done < n ?
				   (size_t)((uint64_t)cfg->put_keys - done) :
				   n;
		for (size_t i = 0; i < m; i++)
			snprintf(names[i], LRB_KEY_LEN, "%s%" PRIu64,
				 cfg->prefix, done + i);
		rc = mooncake_store_batch_put_from(st, keys, bufs, sizes, m,
						   NULL, res);
		if (rc)
			break;
		for (size_t i = 0; i < m; i++)
			if (res[i]) {
				if (!failed)
					fprintf(stderr,
						"lib_read_bench: put %s: %s\n",
						keys[i],
						mooncake_store_strerror(
							res[i]));
				failed++;
			}
		done += m;
	}
	(void)mooncake_store_unregister_buffer(st, vals);
	if (!rc && failed)
		rc = -1;
	if (!rc) {
		double s = (double)(bench_now_ns() - t0) / 1e9;

		printf("{\"tool\": \"lib_read_bench\", \"op\": \"put_keys\", "
		       "\"keys\": %" PRIu64 ", \"value_size\": %zu, "
		       "\"seconds\": %.3f, \"keys_per_s\": %.0f}\n",
		       done, vs, s, (double)done / s);
	} else {
		fprintf(stderr,
			"lib_read_bench: put_keys: %s (%" PRIu64 " failed)\n",
			mooncake_store_strerror(rc), failed);
	}
out:
	free(vals);
	free(names);
	free(keys);
	free(bufs);
	free(sizes);
	free(res);
	return rc;
}

/* Parse "1,4" into out (at most max); the count, or -1. */
static int parse_uints(const char *s, unsigned *out, int max)
{
	int n = 0;

	while (*s) {
		char *end;
		unsigned long v = strtoul(s, &end, 10);

		if (end == s || v < 1 || v > LRB_MAX_THREADS || n == max)
			return -1;
		out[n++] = (unsigned)v;
		s = end;
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return n;
}

static void *map_prefaulted(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0, len);
	return p;
}

static int read_all(mooncake_store_t st, const struct lrb_cfg *cfg,
		    const unsigned *tcounts, int n_t, bool do_or, bool do_gi)
{
	const char *path = getenv("MC_FORCE_TCP");
	struct lrb_thread th[LRB_MAX_THREADS];
	unsigned max_t = 1;
	size_t small_len;
	char *small, *keys, *save = NULL;
	int rc = 0;

	path = path && *path && *path != '0' ? "tcp" : "same-host";
	for (int i = 0; i < n_t; i++)
		if (tcounts[i] > max_t)
			max_t = tcounts[i];
	small_len = (size_t)cfg->chunk * max_t;
	small = map_prefaulted(small_len);
	if (!small)
		return -ENOMEM;
	rc = mooncake_store_register_buffer(st, small, small_len);
	if (rc) {
		munmap(small, small_len);
		return rc;
	}
	memset(th, 0, sizeof(th));
	for (unsigned i = 0; i < max_t; i++) {
		th[i].buf = small + (size_t)i * cfg->chunk;
		th[i].chunk = (size_t)cfg->chunk;
	}
	keys = strdup(cfg->keys);
	for (char *k = keys ? strtok_r(keys, ",", &save) : NULL; k && !rc;
	     k = strtok_r(NULL, ",", &save)) {
		struct lrb_case c = { .key = k, .th = th };
		int64_t size = mooncake_store_get_size(st, k);

		if (size < 0) {
			fprintf(stderr, "lib_read_bench: %s: %s\n", k,
				mooncake_store_strerror((int)size));
			rc = (int)size;
			break;
		}
		for (int i = 0; do_or && !rc && i < n_t; i++) {
			c.threads = tcounts[i];
			rc = run_case(st, cfg, &c, path);
		}
		if (!do_gi || rc || !size)
			continue;
		c.get_into = true;
		c.threads = 1;
		c.big_len = (size_t)size;
		c.big = map_prefaulted(c.big_len);
		if (!c.big) {
			rc = -ENOMEM;
			break;
		}
		rc = mooncake_store_register_buffer(st, c.big, c.big_len);
		if (!rc) {
			rc = run_case(st, cfg, &c, path);
			(void)mooncake_store_unregister_buffer(st, c.big);
		}
		munmap(c.big, c.big_len);
	}
	if (!keys)
		rc = -ENOMEM;
	free(keys);
	(void)mooncake_store_unregister_buffer(st, small);
	munmap(small, small_len);
	return rc;
}

int main(int argc, char **argv)
{
	struct lrb_cfg cfg = { 0 };
	mooncake_store_t st = NULL;
	unsigned tcounts[LRB_MAX_THREADS];
	int n_t, code, rc;
	bool do_or, do_gi;

	if (mc_daemon_load_config(&lrb_spec, &cfg, argc, argv, &code))
		return code;
	n_t = parse_uints(cfg.threads, tcounts, LRB_MAX_THREADS);
	do_or = strstr(cfg.ops, "object_read") != NULL;
	do_gi = strstr(cfg.ops, "get_into") != NULL;
	if (n_t < 1 || (!do_or && !do_gi) || (!cfg.put_keys && !cfg.keys[0])) {
		fprintf(stderr, "lib_read_bench: give --keys (and --threads "
				"like 1,4, --ops object_read,get_into) or "
				"--put_keys N\n");
		mc_cfg_release(&lrb_spec, &cfg);
		return MC_EXIT_USAGE;
	}
	rc = mc_daemon_setup_logging("lib_read_bench", cfg.v, NULL, false);
	if (rc) {
		mc_cfg_release(&lrb_spec, &cfg);
		return MC_EXIT_FAILURE;
	}
	st = mooncake_store_create();
	rc = st ? mooncake_store_setup(st, "127.0.0.1", cfg.metadata_server, 0,
				       0, "tcp", "",
				       cfg.master_server_address) :
		  -ENOMEM;
	if (rc) {
		fprintf(stderr,
			"lib_read_bench: setup (master %s, metadata %s): %s\n",
			cfg.master_server_address, cfg.metadata_server,
			mooncake_store_strerror(rc));
	} else if (cfg.put_keys) {
		rc = put_keys(st, &cfg);
	} else {
		rc = read_all(st, &cfg, tcounts, n_t, do_or, do_gi);
	}
	mooncake_store_destroy(st);
	mc_cfg_release(&lrb_spec, &cfg);
	return rc ? MC_EXIT_FAILURE : MC_EXIT_OK;
}
