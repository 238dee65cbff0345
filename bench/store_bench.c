/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store_bench: puts and gets through the Mooncake Store C API
 * (include/mooncake/store.h) against a running master and pool member,
 * and the same operations against Redis (hiredis) in the same run.
 *
 * Cases: values of --sizes (4 KiB, 64 KiB, 1 MiB, 16 MiB), put and get,
 * single calls (put_from / get_into) and batches (batch_put_from /
 * batch_get_into; Redis: MSET / MGET of the same keys), from each of
 * --procs client processes (fork), each in a closed loop of one call at a
 * time for --seconds. Three clients run every case, one right after the
 * other:
 *
 *   Redis        hiredis, one connection per process
 *   same host    our client; the replica is on this host, so the transfer
 *                engine copies through shared memory
 *   TCP          our client with MC_FORCE_TCP=1: every byte crosses a
 *                loopback TCP connection to the pool member
 *
 * Memory: every buffer is registered (register_buffer) and pre-faulted;
 * the member's segment is pre-faulted by the member, and one unreported
 * pass of puts and gets over most of the pool warms each client's mapping
 * of it before the first case. Working sets: each process keeps at most
 * half the pool (--pool_size) divided by the number of processes; a batch
 * is clamped to that as well (16 MiB x 16 would not fit a 256 MiB pool).
 * Objects are immutable, so every put writes a fresh key; when a process
 * has put its working set, it removes it and starts again, and the time
 * spent removing is left out of its rate. Redis overwrites the same
 * number of keys in turn. The master keeps the memory of an object removed
 * under a read lease until the lease ends, so after a case of ours the
 * bench waits (GetStatus) until the pool is as empty as before it; a
 * short --default_kv_lease_ttl on the master keeps that wait short.
 *
 * Figures: ops/s counts keys (a batch of 16 is 16 ops), summed over the
 * processes; GB/s is ops/s x value size; latency is per call, so per key
 * for single calls and per batch for batches.
 *
 * Loopback only by intent; nothing here asserts a timing.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef SB_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

#include "bench_util.h"
#include "mc_daemon.h"
#include "mc_parse.h"
#include "mc_rpc_client.h"
#include "mooncake/mc_err.h"
#include "mooncake/store.h"

#define SB_MAX_PROCS 64
#define SB_MAX_LIST 16
#define SB_MAX_WS 16384u /* keys per process in a working set */
#define SB_KEY_LEN 96
#define SB_REMOVE_CHUNK 512u

struct sb_cfg {
	char *master_server_address;
	char *metadata_server;
	char *redis;
	char *procs;
	char *sizes;
	char *ops;
	char *forms;
	int64_t batch;
	double seconds;
	int64_t warmup;
	uint64_t pool_size;
	bool same_host;
	bool tcp;
	bool warm_pass;
	int v;
	char *auth_token_file;
};

#define OPT(n, t, f, d, lo, hi, h)                                          \
	{                                                                   \
		.name = n, .type = t, .offset = offsetof(struct sb_cfg, f), \
		.def = d, .min = lo, .max = hi, .help = h                   \
	}

static const struct mc_opt sb_opts[] = {
	OPT("master_server_address", MC_OPT_STRING, master_server_address,
	    "127.0.0.1:50051", 0, 0, "host:port of mooncake_master."),
	OPT("metadata_server", MC_OPT_STRING, metadata_server,
	    "http://127.0.0.1:8080/metadata", 0, 0,
	    "Transfer-engine metadata of the pool (the member's)."),
	OPT("redis", MC_OPT_STRING, redis, "", 0, 0,
	    "host:port of a redis-server to measure as the baseline; empty: "
	    "no baseline (and no ratios)."),
	OPT("procs", MC_OPT_STRING, procs, "1,4", 0, 0,
	    "Client process counts, comma-separated."),
	OPT("sizes", MC_OPT_STRING, sizes, "4KiB,64KiB,1MiB,16MiB", 0, 0,
	    "Value sizes, comma-separated."),
	OPT("ops", MC_OPT_STRING, ops, "put,get", 0, 0,
	    "Operations: put, get or both."),
	OPT("forms", MC_OPT_STRING, forms, "single,batch", 0, 0,
	    "single (put_from / get_into), batch (batch_put_from / "
	    "batch_get_into) or both."),
	OPT("batch", MC_OPT_INT, batch, "16", 1, 4096,
	    "Keys per batch call (clamped so that a process's batch fits its "
	    "share of the pool)."),
	OPT("seconds", MC_OPT_DOUBLE, seconds, "2", 0.1, 3600,
	    "Measured time per case."),
	OPT("warmup", MC_OPT_INT, warmup, "20", 0, 1000000,
	    "Unrecorded calls per process before each case."),
	OPT("pool_size", MC_OPT_SIZE, pool_size, "256MiB", 1048576.0,
	    1099511627776.0,
	    "The pool's capacity (the member's --global_segment_size): "
	    "working sets use at most half of it."),
	OPT("same_host", MC_OPT_BOOL, same_host, "false", 0, 0,
	    "Run our client reading through shared memory (the default is "
	    "both modes when neither --same_host nor --tcp is given)."),
	OPT("tcp", MC_OPT_BOOL, tcp, "false", 0, 0,
	    "Run our client with MC_FORCE_TCP=1 (loopback TCP)."),
	OPT("warm_pass", MC_OPT_BOOL, warm_pass, "true", 0, 0,
	    "Before the first case, put and get most of the pool once "
	    "(unreported) so each client has mapped and touched it."),
	OPT("v", MC_OPT_VERBOSITY, v, "0", 0, 9,
	    "Verbosity: -v or -v=1 debug, -v=2 trace (MC_LOG_LEVEL also)."),
	{ .name = "auth_token_file",
	  .env = "MOONCAKE_AUTH_TOKEN_FILE",
	  .type = MC_OPT_STRING,
	  .offset = offsetof(struct sb_cfg, auth_token_file),
	  .def = "",
	  .help = "The pool's token when the master has one, for the "
		  "bench's own GetStatus connection (the clients' libmooncake "
		  "reads MOONCAKE_AUTH_TOKEN_FILE through its config chain)." },
};

static const struct mc_cfg_spec sb_spec = {
	.prog = "store_bench",
	.summary = "Mooncake Store put/get throughput and latency through "
		   "the C API, with Redis measured in the same run.",
	.opts = sb_opts,
	.n_opts = sizeof(sb_opts) / sizeof(sb_opts[0]),
	.strict = true,
};

enum sb_kind { K_REDIS, K_SAME, K_TCP, N_KINDS };
static const char *const kind_name[N_KINDS] = { "Redis", "ours, same host",
						"ours, TCP" };

enum sb_op { OP_PUT, OP_GET };

struct sb_case {
	enum sb_op op;
	bool batch;
	bool silent; /* the warm-up pass: not reported */
	uint64_t size;
	unsigned n; /* keys per call */
	unsigned prep_n; /* keys per call when preparing and removing */
	unsigned ws; /* keys per process */
	unsigned id;
	uint64_t warmup;
	uint64_t dur_ns;
};

struct sb_res {
	uint64_t ops, calls, errors, t0, t1, paused_ns;
	int first_error;
	char msg[256];
	struct bench_hist hist;
};

/* Shared by the parent and one group's processes (MAP_SHARED). */
struct sb_shared {
	struct sb_case c;
	struct sb_res res[SB_MAX_PROCS];
};

struct sb_group {
	enum sb_kind kind;
	unsigned procs;
	pid_t pid[SB_MAX_PROCS];
	int cmd[SB_MAX_PROCS]; /* parent -> worker */
	int ack[SB_MAX_PROCS]; /* worker -> parent */
	struct sb_shared *sh;
};

/* What one worker process holds. */
struct sb_worker {
	const struct sb_cfg *cfg;
	enum sb_kind kind;
	unsigned idx;
	struct sb_shared *sh;
	int tag; /* the parent's pid: keeps our keys apart from other runs' */
	char *mem; /* src then dst, both buf_len */
	size_t buf_len;
	char *src, *dst;
	mooncake_store_t st;
#ifdef SB_HAVE_HIREDIS
	redisContext *rc;
#endif
	/* the current case */
	const struct sb_case *c;
	unsigned gen, used; /* keys of generation gen put so far */
	uint64_t cursor;
	char (*keys)[SB_KEY_LEN];
	const char **kp;
	void **bufs;
	size_t *sizes;
	const char **argv; /* Redis: command, then key (and value) pairs */
	size_t *argl;
	int *pres;
	int64_t *gres;
	char err[256];
};

/* ---- lists --------------------------------------------------------------- */

struct sb_lists {
	unsigned procs[SB_MAX_LIST], n_procs;
	uint64_t sizes[SB_MAX_LIST];
	unsigned n_sizes;
	bool op[2];
	bool form[2]; /* single, batch */
};

/* Split list at commas; fn(item) for each item. */
static int each_item(const char *list,
		     int (*fn)(struct sb_lists *, const char *),
		     struct sb_lists *l)
{
	char item[64];

	while (*list) {
		const char *end = strchr(list, ',');
		size_t n = end ? (size_t)(end - list) : strlen(list);

		if (n == 0 || n >= sizeof(item))
			return -EINVAL;
		memcpy(item, list, n);
		item[n] = '\0';
		if (fn(l, item))
			return -EINVAL;
		list += n + (end != NULL);
	}
	return 0;
}

static int add_procs(struct sb_lists *l, const char *s)
{
	int64_t v;

	if (l->n_procs == SB_MAX_LIST || mc_parse_i64(s, &v) || v < 1 ||
	    v > SB_MAX_PROCS)
		return -EINVAL;
	l->procs[l->n_procs++] = (unsigned)v;
	return 0;
}

static int add_size(struct sb_lists *l, const char *s)
{
	uint64_t v;

	if (l->n_sizes == SB_MAX_LIST || mc_parse_size(s, &v) || !v ||
	    v > (1ull << 30))
		return -EINVAL;
	l->sizes[l->n_sizes++] = v;
	return 0;
}

static int add_op(struct sb_lists *l, const char *s)
{
	if (!strcmp(s, "put"))
		l->op[OP_PUT] = true;
	else if (!strcmp(s, "get"))
		l->op[OP_GET] = true;
	else
		return -EINVAL;
	return 0;
}

static int add_form(struct sb_lists *l, const char *s)
{
	if (!strcmp(s, "single"))
		l->form[0] = true;
	else if (!strcmp(s, "batch"))
		l->form[1] = true;
	else
		return -EINVAL;
	return 0;
}

static int parse_lists(const struct sb_cfg *c, struct sb_lists *l)
{
	memset(l, 0, sizeof(*l));
	if (each_item(c->procs, add_procs, l) || !l->n_procs) {
		fprintf(stderr, "store_bench: --procs: a list of 1..%d\n",
			SB_MAX_PROCS);
		return -EINVAL;
	}
	if (each_item(c->sizes, add_size, l) || !l->n_sizes) {
		fprintf(stderr, "store_bench: --sizes: a list of sizes up to "
				"1GiB\n");
		return -EINVAL;
	}
	if (each_item(c->ops, add_op, l) || !(l->op[0] || l->op[1])) {
		fprintf(stderr, "store_bench: --ops: put, get\n");
		return -EINVAL;
	}
	if (each_item(c->forms, add_form, l) || !(l->form[0] || l->form[1])) {
		fprintf(stderr, "store_bench: --forms: single, batch\n");
		return -EINVAL;
	}
	return 0;
}

/* ---- sizing -------------------------------------------------------------- */

/* Keys one process may hold at once: half the pool, shared out. */
static unsigned ws_max(const struct sb_cfg *cfg, unsigned procs, uint64_t size)
{
	uint64_t n = cfg->pool_size / 2 / procs / size;

	if (n < 1)
		n = 1;
	return n > SB_MAX_WS ? SB_MAX_WS : (unsigned)n;
}

static unsigned batch_for(const struct sb_cfg *cfg, unsigned procs,
			  uint64_t size)
{
	unsigned w = ws_max(cfg, procs, size);

	return (uint64_t)cfg->batch < w ? (unsigned)cfg->batch : w;
}

static void case_init(struct sb_case *c, const struct sb_cfg *cfg,
		      unsigned procs, uint64_t size, enum sb_op op, bool batch)
{
	static unsigned next_id;
	unsigned b = batch_for(cfg, procs, size);

	*c = (struct sb_case){ .op = op,
			       .batch = batch,
			       .size = size,
			       .n = batch ? b : 1,
			       .prep_n = b,
			       .id = next_id++,
			       .warmup = (uint64_t)cfg->warmup,
			       .dur_ns = (uint64_t)(cfg->seconds * 1e9) };
	c->ws = ws_max(cfg, procs, size) / b * b;
}

static size_t buf_len_for(const struct sb_cfg *cfg, const struct sb_lists *l,
			  unsigned procs)
{
	size_t len = 1u << 20; /* the warm pass's 1 MiB x batch */
	size_t w = (size_t)batch_for(cfg, procs, 1u << 20) << 20;

	if (w > len)
		len = w;
	for (unsigned i = 0; i < l->n_sizes; i++) {
		size_t b = (size_t)batch_for(cfg, procs, l->sizes[i]) *
			   (size_t)l->sizes[i];
		if (b > len)
			len = b;
	}
	return len;
}

/* ---- worker: keys, values, errors ---------------------------------------- */

static const char *key_name(struct sb_worker *w, unsigned gen, unsigned i,
			    unsigned slot)
{
	snprintf(w->keys[slot], SB_KEY_LEN, "sb/%d/%u/%s/%u/%u/%u", w->tag,
		 w->c->id, w->kind == K_REDIS ? "r" : "o", w->idx, gen, i);
	return w->keys[slot];
}

/* Slot j of src holds a pattern of its own, different in every case. */
static void fill_src(struct sb_worker *w)
{
	const struct sb_case *c = w->c;

	for (unsigned j = 0; j < c->prep_n; j++) {
		uint8_t *p = (uint8_t *)w->src + (size_t)j * c->size;
		uint8_t seed = (uint8_t)(c->id * 31 + j * 7 + w->idx);
		uint64_t done = c->size < 256 ? c->size : 256;

		/* i * 131 + seed repeats every 256 bytes: double it up. */
		for (uint64_t i = 0; i < done; i++)
			p[i] = (uint8_t)(i * 131 + seed);
		while (done < c->size) {
			uint64_t n = done < c->size - done ? done :
							     c->size - done;
			memcpy(p + done, p, (size_t)n);
			done += n;
		}
	}
}

static void set_err(struct sb_worker *w, const char *fmt, ...) MC_PRINTF(2, 3);

static void set_err(struct sb_worker *w, const char *fmt, ...)
{
	va_list ap;

	if (w->err[0])
		return;
	va_start(ap, fmt);
	vsnprintf(w->err, sizeof(w->err), fmt, ap);
	va_end(ap);
}

/* ---- worker: our client -------------------------------------------------- */

/* Put keys [first, first + n) of generation gen from src slots. */
static int ours_put(struct sb_worker *w, unsigned gen, unsigned first,
		    unsigned n, bool batch)
{
	const struct sb_case *c = w->c;
	int rc;

	for (unsigned j = 0; j < n; j++) {
		w->kp[j] = key_name(w, gen, first + j, j);
		w->bufs[j] =
			w->src + (size_t)((first + j) % c->prep_n) * c->size;
		w->sizes[j] = c->size;
	}
	if (!batch) {
		rc = mooncake_store_put_from(w->st, w->kp[0], w->bufs[0],
					     c->size, NULL);
		if (rc)
			set_err(w, "put_from %s: %s", w->kp[0],
				mooncake_store_strerror(rc));
		return rc;
	}
	rc = mooncake_store_batch_put_from(w->st, w->kp, w->bufs, w->sizes, n,
					   NULL, w->pres);
	if (rc) {
		set_err(w, "batch_put_from: %s", mooncake_store_strerror(rc));
		return rc;
	}
	for (unsigned j = 0; j < n; j++) {
		if (w->pres[j]) {
			set_err(w, "batch_put_from %s: %s", w->kp[j],
				mooncake_store_strerror(w->pres[j]));
			return w->pres[j];
		}
	}
	return 0;
}

static int ours_get(struct sb_worker *w, unsigned first, unsigned n, bool batch)
{
	const struct sb_case *c = w->c;
	int64_t got;
	int rc;

	for (unsigned j = 0; j < n; j++) {
		w->kp[j] = key_name(w, 0, (first + j) % c->ws, j);
		w->bufs[j] = w->dst + (size_t)j * c->size;
		w->sizes[j] = c->size;
	}
	if (!batch) {
		got = mooncake_store_get_into(w->st, w->kp[0], w->bufs[0],
					      c->size);
		if (got == (int64_t)c->size)
			return 0;
		set_err(w, "get_into %s: %s", w->kp[0],
			got < 0 ? mooncake_store_strerror((int)got) :
				  "short read");
		return got < 0 ? (int)got : -EIO;
	}
	rc = mooncake_store_batch_get_into(w->st, w->kp, w->bufs, w->sizes, n,
					   w->gres);
	if (rc) {
		set_err(w, "batch_get_into: %s", mooncake_store_strerror(rc));
		return rc;
	}
	for (unsigned j = 0; j < n; j++) {
		if (w->gres[j] != (int64_t)c->size) {
			set_err(w, "batch_get_into %s: %s", w->kp[j],
				w->gres[j] < 0 ? mooncake_store_strerror(
							 (int)w->gres[j]) :
						 "short read");
			return w->gres[j] < 0 ? (int)w->gres[j] : -EIO;
		}
	}
	return 0;
}

/* Remove keys [0, count) of generation gen (force: gets leased them). */
static int ours_remove(struct sb_worker *w, unsigned gen, unsigned count)
{
	for (unsigned off = 0; off < count;) {
		unsigned n = count - off < w->c->prep_n ? count - off :
							  w->c->prep_n;
		int rc;

		for (unsigned j = 0; j < n; j++)
			w->kp[j] = key_name(w, gen, off + j, j);
		rc = mooncake_store_batch_remove(w->st, w->kp, n, true,
						 w->pres);
		if (rc) {
			set_err(w, "batch_remove: %s",
				mooncake_store_strerror(rc));
			return rc;
		}
		for (unsigned j = 0; j < n; j++) {
			/* A prepare that failed half-way left fewer keys. */
			if (w->pres[j] &&
			    w->pres[j] != MC_STORE_OBJECT_NOT_FOUND) {
				set_err(w, "remove %s: %s", w->kp[j],
					mooncake_store_strerror(w->pres[j]));
				return w->pres[j];
			}
		}
		off += n;
	}
	return 0;
}

static int ours_setup(struct sb_worker *w)
{
	const struct sb_cfg *cfg = w->cfg;
	int rc;

	if (w->kind == K_TCP)
		setenv("MC_FORCE_TCP", "1", 1);
	else
		unsetenv("MC_FORCE_TCP");
	w->st = mooncake_store_create();
	if (!w->st) {
		set_err(w, "mooncake_store_create: out of memory");
		return -ENOMEM;
	}
	rc = mooncake_store_setup(w->st, "127.0.0.1", cfg->metadata_server, 0,
				  0, "tcp", "", cfg->master_server_address);
	if (rc) {
		set_err(w, "mooncake_store_setup (master %s, metadata %s): %s",
			cfg->master_server_address, cfg->metadata_server,
			mooncake_store_strerror(rc));
		return rc;
	}
	rc = mooncake_store_register_buffer(w->st, w->mem, 2 * w->buf_len);
	if (rc) {
		set_err(w, "register_buffer: %s", mooncake_store_strerror(rc));
		return rc;
	}
	return 0;
}

/* ---- worker: Redis -------------------------------------------------------- */

#ifdef SB_HAVE_HIREDIS
static int redis_setup(struct sb_worker *w)
{
	struct timeval tv = { .tv_sec = 5 };
	char host[256];
	int port;

	if (mc_parse_hostport(w->cfg->redis, host, sizeof(host), 6379, &port)) {
		set_err(w, "--redis %s: expected host:port", w->cfg->redis);
		return -EINVAL;
	}
	w->rc = redisConnectWithTimeout(host, port, tv);
	if (!w->rc || w->rc->err) {
		set_err(w, "redis %s: %s", w->cfg->redis,
			w->rc ? w->rc->errstr : "out of memory");
		return -ECONNREFUSED;
	}
	tv.tv_sec = 60;
	if (redisSetTimeout(w->rc, tv) != REDIS_OK) {
		set_err(w, "redis: setting the timeout failed");
		return -EIO;
	}
	return 0;
}

/* Send argv; check the reply's shape: status for SET/MSET/DEL, n bulk
 * strings of size bytes for GET/MGET. */
static int redis_call(struct sb_worker *w, int argc, const char **argv,
		      const size_t *argl, int want, unsigned n, uint64_t size)
{
	redisReply *r = redisCommandArgv(w->rc, argc, argv, argl);
	int rc = 0;

	if (!r) {
		set_err(w, "redis %s: %s", argv[0], w->rc->errstr);
		return -EIO;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		set_err(w, "redis %s: %s", argv[0], r->str);
		rc = -EIO;
	} else if (want == REDIS_REPLY_STRING) {
		if (r->type != REDIS_REPLY_STRING || r->len != size)
			rc = -EIO;
	} else if (want == REDIS_REPLY_ARRAY) {
		if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
			rc = -EIO;
		for (size_t i = 0; !rc && i < n; i++)
			if (r->element[i]->type != REDIS_REPLY_STRING ||
			    r->element[i]->len != size)
				rc = -EIO;
	} else if (r->type == REDIS_REPLY_ARRAY ||
		   r->type == REDIS_REPLY_STRING) {
		rc = -EIO;
	}
	if (rc && !w->err[0])
		set_err(w, "redis %s: unexpected reply (missing key?)",
			argv[0]);
	freeReplyObject(r);
	return rc;
}

/* SET/MSET keys [first, first + n) of generation gen from src slots
 * (GET/MGET from generation 0 when get). */
static int redis_keys(struct sb_worker *w, unsigned gen, unsigned first,
		      unsigned n, bool batch, bool get, const char *cmd)
{
	const struct sb_case *c = w->c;
	const char **argv = w->argv;
	size_t *argl = w->argl;
	int argc = 1;

	argv[0] = cmd;
	argl[0] = strlen(cmd);
	for (unsigned j = 0; j < n; j++) {
		unsigned k = first + j;

		argv[argc] = key_name(w, gen, get ? k % c->ws : k, j);
		argl[argc] = strlen(argv[argc]);
		argc++;
		if (get || !strcmp(cmd, "DEL"))
			continue;
		argv[argc] = w->src + (size_t)(k % c->prep_n) * c->size;
		argl[argc] = c->size;
		argc++;
	}
	if (!strcmp(cmd, "DEL"))
		return redis_call(w, argc, argv, argl, REDIS_REPLY_INTEGER, n,
				  0);
	if (!get)
		return redis_call(w, argc, argv, argl, REDIS_REPLY_STATUS, n,
				  0);
	return redis_call(w, argc, argv, argl,
			  batch ? REDIS_REPLY_ARRAY : REDIS_REPLY_STRING, n,
			  c->size);
}
#endif

/* ---- worker: one case ------------------------------------------------------ */

static int do_put(struct sb_worker *w, unsigned gen, unsigned first, unsigned n,
		  bool batch)
{
#ifdef SB_HAVE_HIREDIS
	if (w->kind == K_REDIS)
		return redis_keys(w, gen, first, n, batch, false,
				  batch ? "MSET" : "SET");
#endif
	return ours_put(w, gen, first, n, batch);
}

static int do_get(struct sb_worker *w, unsigned first, unsigned n, bool batch)
{
#ifdef SB_HAVE_HIREDIS
	if (w->kind == K_REDIS)
		return redis_keys(w, 0, first, n, batch, true,
				  batch ? "MGET" : "GET");
#endif
	return ours_get(w, first, n, batch);
}

static int do_remove(struct sb_worker *w, unsigned gen, unsigned count)
{
#ifdef SB_HAVE_HIREDIS
	if (w->kind == K_REDIS) {
		for (unsigned off = 0; off < count; off += w->c->prep_n) {
			unsigned n = count - off < w->c->prep_n ? count - off :
								  w->c->prep_n;
			int rc = redis_keys(w, gen, off, n, true, false, "DEL");
			if (rc)
				return rc;
		}
		return 0;
	}
#endif
	return ours_remove(w, gen, count);
}

/* The next call of the case; *paused gets the time spent removing. */
static int case_call(struct sb_worker *w, uint64_t *paused)
{
	const struct sb_case *c = w->c;
	int rc;

	*paused = 0;
	if (c->op == OP_GET) {
		rc = do_get(w, (unsigned)(w->cursor % c->ws), c->n, c->batch);
		w->cursor += c->n;
		return rc;
	}
	rc = do_put(w, w->gen, w->used, c->n, c->batch);
	if (rc)
		return rc;
	w->used += c->n;
	if (w->used + c->n > c->ws) {
		/* Our objects are immutable: make room for fresh keys. Redis
		 * overwrites the same keys instead. */
		uint64_t t = bench_now_ns();

		if (w->kind != K_REDIS) {
			rc = do_remove(w, w->gen, w->used);
			w->gen++;
		}
		w->used = 0;
		*paused = bench_now_ns() - t;
	}
	return rc;
}

static int case_prepare(struct sb_worker *w)
{
	const struct sb_case *c = w->c;
	uint64_t paused;
	int rc = 0;

	fill_src(w);
	w->gen = 0;
	w->used = 0;
	w->cursor = (uint64_t)w->idx * 7919u;
	if (c->op == OP_GET) {
		for (unsigned off = 0; off < c->ws && !rc; off += c->prep_n)
			rc = do_put(w, 0, off, c->prep_n, c->prep_n > 1);
		if (rc)
			return rc;
		/* Check the bytes once: key 0 came from src slot 0. */
		rc = do_get(w, 0, 1, false);
		if (!rc && w->kind != K_REDIS &&
		    memcmp(w->dst, w->src, (size_t)c->size)) {
			set_err(w, "get %s: the bytes differ from those put",
				w->kp[0]);
			rc = -EBADMSG;
		}
		if (rc)
			return rc;
	}
	for (uint64_t i = 0; i < c->warmup && !rc; i++)
		rc = case_call(w, &paused);
	return rc;
}

static void case_run(struct sb_worker *w)
{
	const struct sb_case *c = w->c;
	struct sb_res *r = &w->sh->res[w->idx];
	uint64_t t0, deadline, t, paused;
	int rc;

	memset(r, 0, sizeof(*r));
	t0 = bench_now_ns();
	deadline = t0 + c->dur_ns;
	r->t0 = t0;
	do {
		t = bench_now_ns();
		rc = case_call(w, &paused);
		r->t1 = bench_now_ns();
		r->calls++;
		if (rc) {
			r->errors++;
			if (!r->first_error)
				r->first_error = rc;
			if (r->errors > 100)
				break;
			continue;
		}
		r->paused_ns += paused;
		r->ops += c->n;
		bench_hist_add(&r->hist, r->t1 - t - paused);
	} while (r->t1 < deadline);
	if (w->err[0])
		snprintf(r->msg, sizeof(r->msg), "%s", w->err);
}

static int case_cleanup(struct sb_worker *w)
{
	const struct sb_case *c = w->c;

	if (c->op == OP_GET)
		return do_remove(w, 0, c->ws);
	if (w->kind == K_REDIS)
		return do_remove(w, 0, c->ws); /* DEL ignores missing keys */
	return do_remove(w, w->gen, w->used);
}

/* ---- worker process --------------------------------------------------------- */

static int ack(int fd, char what)
{
	return write(fd, &what, 1) == 1 ? 0 : -EIO;
}

static void say(int fd, char what)
{
	ssize_t n = write(fd, &what, 1);

	(void)n; /* a worker that is gone is found by its exit */
}

static void report_err(struct sb_worker *w, int rc)
{
	struct sb_res *r = &w->sh->res[w->idx];

	snprintf(r->msg, sizeof(r->msg), "%s",
		 w->err[0] ? w->err : strerror(rc < 0 ? -rc : rc));
	r->first_error = rc;
}

static int worker_alloc(struct sb_worker *w, unsigned max_n)
{
	w->mem = mmap(NULL, 2 * w->buf_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (w->mem == MAP_FAILED) {
		w->mem = NULL;
		return -ENOMEM;
	}
	(void)madvise(w->mem, 2 * w->buf_len, MADV_HUGEPAGE);
	memset(w->mem, 0x5a, 2 * w->buf_len); /* pre-fault */
	w->src = w->mem;
	w->dst = w->mem + w->buf_len;
	/* Redis argv needs 2 entries per key plus the command. */
	w->keys = calloc(max_n, sizeof(*w->keys));
	w->kp = calloc(max_n, sizeof(*w->kp));
	w->bufs = calloc(max_n, sizeof(*w->bufs));
	w->sizes = calloc(max_n, sizeof(*w->sizes));
	w->argv = calloc(2 * (size_t)max_n + 1, sizeof(*w->argv));
	w->argl = calloc(2 * (size_t)max_n + 1, sizeof(*w->argl));
	w->pres = calloc(max_n, sizeof(*w->pres));
	w->gres = calloc(max_n, sizeof(*w->gres));
	if (!w->keys || !w->kp || !w->bufs || !w->sizes || !w->argv ||
	    !w->argl || !w->pres || !w->gres)
		return -ENOMEM;
	return 0;
}

static MC_NORETURN void worker_main(struct sb_worker *w, int cmd_fd, int ack_fd,
				    unsigned max_n)
{
	char cmd;
	int rc;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	rc = worker_alloc(w, max_n);
	if (!rc) {
#ifdef SB_HAVE_HIREDIS
		rc = w->kind == K_REDIS ? redis_setup(w) : ours_setup(w);
#else
		rc = ours_setup(w);
#endif
	}
	if (rc) {
		report_err(w, rc);
		(void)ack(ack_fd, 'E');
		_exit(1);
	}
	(void)ack(ack_fd, 'R');
	while (read(cmd_fd, &cmd, 1) == 1) {
		w->c = &w->sh->c;
		w->err[0] = '\0';
		rc = 0;
		switch (cmd) {
		case 'P':
			rc = case_prepare(w);
			break;
		case 'G':
			case_run(w);
			break;
		case 'C':
			rc = case_cleanup(w);
			break;
		default:
			goto out;
		}
		if (rc)
			report_err(w, rc);
		if (ack(ack_fd, rc ? 'E' : 'D'))
			break;
	}
out:
	if (w->st)
		mooncake_store_destroy(w->st);
#ifdef SB_HAVE_HIREDIS
	if (w->rc)
		redisFree(w->rc);
#endif
	_exit(0);
}

/* ---- parent: groups ---------------------------------------------------------- */

/* Send cmd to every worker and wait for all answers: 0, or -1 after
 * printing the first worker's error. */
static int group_step(struct sb_group *g, char cmd)
{
	int failed = 0;

	for (unsigned i = 0; i < g->procs; i++)
		if (write(g->cmd[i], &cmd, 1) != 1)
			failed = -1;
	for (unsigned i = 0; i < g->procs; i++) {
		char a = 0;

		if (read(g->ack[i], &a, 1) != 1 || a != 'D') {
			if (!failed)
				fprintf(stderr,
					"store_bench: %s, process %u: %s\n",
					kind_name[g->kind], i,
					a == 'E' ? g->sh->res[i].msg :
						   "exited");
			failed = -1;
		}
	}
	return failed;
}

static void group_stop(struct sb_group *g)
{
	for (unsigned i = 0; i < g->procs; i++) {
		if (g->cmd[i] >= 0) {
			say(g->cmd[i], 'Q');
			close(g->cmd[i]);
		}
		if (g->ack[i] >= 0)
			close(g->ack[i]);
	}
	for (unsigned i = 0; i < g->procs; i++)
		if (g->pid[i] > 0)
			(void)waitpid(g->pid[i], NULL, 0);
	if (g->sh)
		munmap(g->sh, sizeof(*g->sh));
	memset(g, 0, sizeof(*g));
}

static int group_start(struct sb_group *g, enum sb_kind kind, unsigned procs,
		       const struct sb_cfg *cfg, size_t buf_len, unsigned max_n)
{
	int failed = 0;

	memset(g, 0, sizeof(*g));
	g->kind = kind;
	g->procs = procs;
	for (unsigned i = 0; i < SB_MAX_PROCS; i++)
		g->cmd[i] = g->ack[i] = -1;
	g->sh = mmap(NULL, sizeof(*g->sh), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (g->sh == MAP_FAILED) {
		g->sh = NULL;
		return -ENOMEM;
	}
	fflush(NULL);
	for (unsigned i = 0; i < procs; i++) {
		int c[2], a[2];

		if (pipe(c))
			return -errno;
		if (pipe(a)) {
			close(c[0]);
			close(c[1]);
			return -errno;
		}
		g->pid[i] = fork();
		if (g->pid[i] < 0) {
			close(c[0]);
			close(c[1]);
			close(a[0]);
			close(a[1]);
			return -errno;
		}
		if (g->pid[i] == 0) {
			struct sb_worker w = { .cfg = cfg,
					       .kind = kind,
					       .idx = i,
					       .sh = g->sh,
					       .tag = (int)getppid(),
					       .buf_len = buf_len };

			/* Only our own pipe ends stay open. */
			for (unsigned j = 0; j < i; j++) {
				close(g->cmd[j]);
				close(g->ack[j]);
			}
			close(c[1]);
			close(a[0]);
			worker_main(&w, c[0], a[1], max_n);
		}
		close(c[0]);
		close(a[1]);
		g->cmd[i] = c[1];
		g->ack[i] = a[0];
	}
	for (unsigned i = 0; i < procs; i++) {
		char a = 0;

		if (read(g->ack[i], &a, 1) != 1 || a != 'R') {
			if (!failed)
				fprintf(stderr,
					"store_bench: %s, process %u: %s\n",
					kind_name[kind], i,
					a == 'E' ? g->sh->res[i].msg :
						   "exited");
			failed = -1;
		}
	}
	return failed;
}

/* ---- parent: running and reporting ------------------------------------------- */

/* Bytes the master has allocated in the pool; UINT64_MAX when unknown. */
static uint64_t pool_allocated(struct mc_rpc_client *cli)
{
	Mcrpc__GetStatusRequest q = MCRPC__GET_STATUS_REQUEST__INIT;
	Mcrpc__GetStatusResponse *r = NULL;
	uint64_t v = UINT64_MAX;

	if (!mc_rpc_call(cli, MCRPC__METHOD__GET_STATUS, &q.base,
			 (ProtobufCMessage **)&r)) {
		if (!r->code)
			v = r->allocated;
		protobuf_c_message_free_unpacked(&r->base, NULL);
	}
	return v;
}

/* Wait until the memory of removed, leased objects is back (at most 60 s):
 * the next case must find the pool as the last one found it. */
static void settle(struct mc_rpc_client *cli, uint64_t base)
{
	uint64_t t0 = bench_now_ns(), v;

	while ((v = pool_allocated(cli)) != UINT64_MAX && v > base) {
		if (bench_now_ns() - t0 > 60000000000ull) {
			fprintf(stderr,
				"store_bench: warning: %" PRIu64
				" bytes still allocated in the pool after "
				"60 s (%" PRIu64 " before)\n",
				v, base);
			return;
		}
		usleep(50000);
	}
}

struct sb_row {
	bool valid;
	double ops_s, gbps;
	uint64_t p50, p99, errors;
	int first_error;
	char msg[256];
};

static int run_case(struct sb_group *g, const struct sb_case *c,
		    struct mc_rpc_client *cli, uint64_t base,
		    struct sb_row *row)
{
	struct bench_hist *h = calloc(1, sizeof(*h));
	int rc;

	memset(row, 0, sizeof(*row));
	if (!h)
		return -ENOMEM;
	g->sh->c = *c;
	rc = group_step(g, 'P');
	if (!rc)
		rc = group_step(g, 'G');
	if (!rc) {
		for (unsigned i = 0; i < g->procs; i++) {
			const struct sb_res *r = &g->sh->res[i];
			uint64_t busy = r->t1 - r->t0 - r->paused_ns;

			if (busy && r->ops)
				row->ops_s +=
					(double)r->ops * 1e9 / (double)busy;
			bench_hist_merge(h, &r->hist);
			row->errors += r->errors;
			if (r->errors && !row->first_error) {
				row->first_error = r->first_error;
				snprintf(row->msg, sizeof(row->msg), "%s",
					 r->msg);
			}
		}
		row->gbps = row->ops_s * (double)c->size / 1e9;
		row->p50 = bench_hist_quantile(h, 0.50);
		row->p99 = bench_hist_quantile(h, 0.99);
		row->valid = true;
	}
	if (group_step(g, 'C'))
		rc = -1;
	if (g->kind != K_REDIS)
		settle(cli, base);
	free(h);
	return rc;
}

static void size_text(uint64_t v, char *out, size_t len)
{
	if (v >= (1u << 20) && !(v % (1u << 20)))
		snprintf(out, len, "%" PRIu64 " MiB", v >> 20);
	else if (v >= 1024 && !(v % 1024))
		snprintf(out, len, "%" PRIu64 " KiB", v >> 10);
	else
		snprintf(out, len, "%" PRIu64 " B", v);
}

static void print_row(const struct sb_case *c, unsigned procs,
		      enum sb_kind kind, const struct sb_row *r,
		      const struct sb_row *redis)
{
	char sz[32], per[32];

	size_text(c->size, sz, sizeof(sz));
	if (c->batch)
		snprintf(per, sizeof(per), "batch of %u", c->n);
	else
		snprintf(per, sizeof(per), "op");
	printf("| %s | %s | %s | %u | %s | %.0f | %.3f | %.1f | %.1f | %s |",
	       c->op == OP_PUT ? "put" : "get", c->batch ? "batch" : "single",
	       sz, procs, kind_name[kind], r->ops_s, r->gbps,
	       (double)r->p50 / 1e3, (double)r->p99 / 1e3, per);
	if (kind == K_REDIS) {
		printf(" baseline | - |");
	} else if (redis && redis->valid && redis->ops_s > 0) {
		double ratio = r->ops_s / redis->ops_s;
		double goal = kind == K_TCP ? 1.0 : 3.0;

		printf(" %.2fx |", ratio);
		if (c->size == (1u << 20))
			printf(" >= %.0fx: %s |", goal,
			       ratio >= goal ? "met" : "MISSED");
		else
			printf(" - |");
	} else {
		printf(" - | - |");
	}
	if (r->errors)
		printf(" %" PRIu64 " errors (%s)", r->errors, r->msg);
	printf("\n");
	fflush(stdout);
}

static void print_header(const struct sb_cfg *cfg)
{
	double load[3] = { 0 };

	(void)getloadavg(load, 3);
	printf("Pool %" PRIu64 " MiB; %.1f s per case after %" PRId64
	       " warm-up calls per process; batch %" PRId64
	       " (fewer where a process's half-pool share is smaller); "
	       "%ld CPUs online; load average %.2f at the start.\n",
	       cfg->pool_size >> 20, cfg->seconds, cfg->warmup, cfg->batch,
	       sysconf(_SC_NPROCESSORS_ONLN), load[0]);
	printf("ops/s counts keys (summed over processes); GB/s = ops/s x "
	       "value size; latency is per call (\"op\" or \"batch of N\").\n");
	if (!cfg->redis[0])
		printf("No Redis baseline (--redis not given).\n");
	printf("\n| op | form | value | procs | client | ops/s | GB/s | "
	       "p50 (us) | p99 (us) | latency per | vs Redis | target |\n"
	       "|---|---|---|---:|---|---:|---:|---:|---:|---|---:|---|\n");
}

/* The unreported warm pass of one group: 1 MiB objects over ~80% of
 * the pool, put then read back, then removed. */
static int warm_pass(struct sb_group *g, const struct sb_cfg *cfg,
		     struct mc_rpc_client *cli, uint64_t base)
{
	struct sb_case c;
	struct sb_row row;
	uint64_t share = cfg->pool_size * 4 / 5 / g->procs;
	int rc;

	case_init(&c, cfg, g->procs, 1u << 20, OP_GET, true);
	c.silent = true;
	c.ws = (unsigned)(share >> 20) / c.prep_n * c.prep_n;
	if (c.ws < c.prep_n)
		c.ws = c.prep_n;
	c.dur_ns = 200000000u;
	c.warmup = 0;
	rc = run_case(g, &c, cli, base, &row);
	return rc;
}

static int run_procs(const struct sb_cfg *cfg, const struct sb_lists *l,
		     unsigned procs, const bool *kinds,
		     struct mc_rpc_client *cli, uint64_t base)
{
	struct sb_group g[N_KINDS];
	size_t buf_len = buf_len_for(cfg, l, procs);
	unsigned max_n = (unsigned)cfg->batch;
	int rc = 0;

	memset(g, 0, sizeof(g));
	for (int k = 0; k < N_KINDS && !rc; k++) {
		if (!kinds[k])
			continue;
		rc = group_start(&g[k], (enum sb_kind)k, procs, cfg, buf_len,
				 max_n);
		if (!rc && k != K_REDIS && cfg->warm_pass)
			rc = warm_pass(&g[k], cfg, cli, base);
	}
	for (unsigned s = 0; s < l->n_sizes && !rc; s++) {
		for (int f = 0; f < 2 && !rc; f++) {
			if (!l->form[f])
				continue;
			for (int op = 0; op < 2 && !rc; op++) {
				struct sb_row rows[N_KINDS];
				struct sb_case c;

				if (!l->op[op])
					continue;
				case_init(&c, cfg, procs, l->sizes[s],
					  (enum sb_op)op, f == 1);
				memset(rows, 0, sizeof(rows));
				for (int k = 0; k < N_KINDS && !rc; k++) {
					if (!kinds[k])
						continue;
					rc = run_case(&g[k], &c, cli, base,
						      &rows[k]);
					if (!rc)
						print_row(&c, procs,
							  (enum sb_kind)k,
							  &rows[k],
							  &rows[K_REDIS]);
				}
			}
		}
	}
	for (int k = 0; k < N_KINDS; k++)
		if (g[k].procs)
			group_stop(&g[k]);
	return rc;
}

int main(int argc, char **argv)
{
	struct sb_cfg cfg = { 0 };
	struct mc_rpc_client *cli = NULL;
	uint64_t base = 0;
	struct sb_lists l;
	bool kinds[N_KINDS] = { false };
	struct mc_auth_key key;
	bool auth = false;
	char err[256];
	int code, rc = 0;

	if (mc_daemon_load_config(&sb_spec, &cfg, argc, argv, &code))
		return code;
	if (parse_lists(&cfg, &l)) {
		mc_cfg_release(&sb_spec, &cfg);
		return MC_EXIT_USAGE;
	}
	rc = mc_daemon_setup_logging("store_bench", cfg.v, NULL, false);
	if (rc) {
		mc_cfg_release(&sb_spec, &cfg);
		return MC_EXIT_FAILURE;
	}
	kinds[K_SAME] = cfg.same_host || !cfg.tcp;
	kinds[K_TCP] = cfg.tcp || !cfg.same_host;
	if (cfg.redis[0]) {
#ifdef SB_HAVE_HIREDIS
		kinds[K_REDIS] = true;
#else
		fprintf(stderr, "store_bench: built without hiredis; "
				"no Redis baseline\n");
#endif
	}
	/* A worker that dies must not kill us through a broken pipe. */
	signal(SIGPIPE, SIG_IGN);
	if (mc_auth_key_load_opt(cfg.auth_token_file, &auth, &key, err,
				 sizeof(err))) {
		fprintf(stderr, "store_bench: auth_token_file: %s\n", err);
		mc_cfg_release(&sb_spec, &cfg);
		return MC_EXIT_FAILURE;
	}
	rc = mc_rpc_client_create(cfg.master_server_address, 5000, &cli);
	if (!rc && auth)
		mc_rpc_client_set_auth(cli, &key);
	if (!rc && (base = pool_allocated(cli)) == UINT64_MAX)
		rc = -ECONNREFUSED;
	if (rc) {
		fprintf(stderr, "store_bench: master %s: GetStatus failed\n",
			cfg.master_server_address);
		mc_rpc_client_destroy(cli);
		mc_cfg_release(&sb_spec, &cfg);
		return MC_EXIT_FAILURE;
	}
	print_header(&cfg);
	for (unsigned p = 0; p < l.n_procs && !rc; p++)
		rc = run_procs(&cfg, &l, l.procs[p], kinds, cli, base);
	mc_rpc_client_destroy(cli);
	if (auth)
		mc_auth_key_clear(&key);
	mc_cfg_release(&sb_spec, &cfg);
	return rc ? MC_EXIT_FAILURE : MC_EXIT_OK;
}
