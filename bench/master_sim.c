/* SPDX-License-Identifier: Apache-2.0 */
/*
 * master_sim: the master's placement, leases and eviction driven in process
 * (no RPC, no network, no bytes moved: the master only keeps metadata), to
 * see how far one master goes (docs/benchmarks.md, "Master at scale").
 *
 * One master (mst_create, --db memory or a sqlite file), S segments of
 * fake clients (one client per segment, each pinged once a second as the
 * clients do), then, each call under the master lock as the RPC service
 * (service.c) takes it:
 *   put:    N keys, PutStart (mst_put_start, evicting and retrying when no
 *           segment has room, as put_start() in service.c) then PutEnd (one
 *           transaction of one key: mst_txn_run with mst_put_end_prepare /
 *           _apply). The pool is sized so N keys fill ~85% of it.
 *   get:    G lookups of random keys with a read lease (mst_get, the
 *           replica addresses read as GetReplicaList answers them).
 *   evict:  E more puts with the daemon's housekeeping (mst_tick every
 *           10 ms: the watermark evicts eviction_ratio of the pool once it
 *           is above the high watermark).
 *   full:   the watermark off, the pool filled to the last block, then puts
 *           that each evict for themselves (mst_evict_for_put), bounded in
 *           count and time.
 *   restore (file db only): mst_destroy, then mst_create on the same file
 *           (a restart or an HA failover loading the record), timed.
 * Rates are single-threaded: the master serialises on its one lock, so
 * this is the ceiling of one master on one core, before any RPC cost.
 * Memory: resident set (/proc/self/statm) before and after the puts.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "evict.h"
#include "lifecycle.h"
#include "master.h"
#include "mc_log.h"
#include "mooncake/mc_err.h"
#include "objects.h"
#include "segments.h"
#include "txn.h"

struct opts {
	uint64_t keys, segments, segment_size, value_size, gets, evict_keys;
	uint64_t full_ops;
	double full_secs;
	unsigned key_len, replicas;
	const char *db;
	bool json, keep_db;
};

struct sim {
	struct opts o;
	struct master *m;
	uint8_t (*cid)[MST_ID_LEN];
	uint64_t next_key; /* keys put so far (key i = key_of(i)) */
	uint64_t last_tick_ns, last_ping_ns;
	uint64_t tick_ns_total, tick_ns_max, ticks;
	uint64_t put_fail, evict_calls;
	char *kbuf;
};

static void die(const char *what)
{
	fprintf(stderr, "master_sim: %s\n", what);
	exit(1);
}

static uint64_t rss_bytes(void)
{
	unsigned long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%lu %lu", &size, &res) != 2)
			res = 0;
		fclose(f);
	}
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* CPU time of this (single-threaded) process: the rates per core, apart
 * from other jobs on the machine. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t file_bytes(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : (uint64_t)st.st_size;
}

static uint64_t db_bytes(const char *db)
{
	char p[4096];
	uint64_t b = file_bytes(db);

	snprintf(p, sizeof(p), "%s-wal", db);
	return b + file_bytes(p);
}

/* Key i: "sim/" then i in hex, zero-padded to key_len bytes. */
static const char *key_of(struct sim *s, uint64_t i)
{
	unsigned w = s->o.key_len - 4;

	snprintf(s->kbuf, s->o.key_len + 1, "sim/%0*" PRIx64, (int)w, i);
	return s->kbuf;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static struct mst_config default_cfg(void)
{
	/* mooncake_master's defaults (master_options.c) */
	return (struct mst_config){
		.lease_ttl_ms = 10000,
		.soft_pin_ttl_ms = 30 * 60 * 1000,
		.max_soft_pin_ttl_ms = 24 * 3600 * 1000,
		.allow_evict_soft_pinned = true,
		.eviction_ratio = 0.05,
		.high_watermark = 0.90,
		.client_ttl_ms = 10000,
		.strategy = MST_RANDOM,
		.discard_timeout_ms = 30000,
		.release_timeout_ms = 600000,
		.restore_grace_ms = 60000,
		.exist_max_idle_ms = 20000,
		.hold_ttl_ms = 30000,
		.max_key_len = 4096,
		.ckpt_holder_slots = 4,
	};
}

/* The daemon's background thread (daemon.c): mst_tick every 10 ms; and
 * every client's ping once a second. Both take the lock, so their time
 * counts in the phase that pays for it. */
static void housekeeping(struct sim *s, bool force)
{
	uint64_t now = bench_now_ns();

	if (force || now - s->last_ping_ns >= 1000000000ull) {
		s->last_ping_ns = now;
		for (uint64_t i = 0; i < s->o.segments; i++) {
			pthread_mutex_lock(&s->m->lock);
			mst_client_touch(s->m, s->cid[i]);
			pthread_mutex_unlock(&s->m->lock);
		}
	}
	if (force || now - s->last_tick_ns >= 10000000ull) {
		uint64_t t0 = bench_now_ns(), dt;
		pthread_mutex_lock(&s->m->lock);
		mst_tick(s->m);
		pthread_mutex_unlock(&s->m->lock);
		dt = bench_now_ns() - t0;
		s->last_tick_ns = t0 + dt;
		s->tick_ns_total += dt;
		if (dt > s->tick_ns_max)
			s->tick_ns_max = dt;
		s->ticks++;
	}
}

struct end_ctx {
	struct master *m;
	const uint8_t *client;
	const char *key;
	struct mst_object *o;
	int code;
};

static int end_prepare(void *arg, size_t i)
{
	struct end_ctx *e = arg;
	int k = mst_put_end_prepare(e->m, e->client, e->key, strlen(e->key),
				    &e->o);

	(void)i;
	e->code = k;
	return k == MC_STORE_INTERNAL_ERROR ? k : 0;
}

static void end_finish(void *arg, size_t i, bool committed)
{
	struct end_ctx *e = arg;

	(void)i;
	if (e->o && e->o->state == MST_ENDING) {
		if (committed)
			mst_put_end_apply(e->m, e->o);
		else {
			mst_put_end_fail(e->m, e->o);
			e->code = MC_STORE_INTERNAL_ERROR;
		}
	}
}

/* One put as the RPC service makes it: PutStart (evict and retry when
 * there is no room, unless may_evict is off), then PutEnd. 0, or the
 * PutStart / PutEnd code. */
static int put_one(struct sim *s, uint64_t i, bool may_evict)
{
	struct mst_put_cfg pc = { .replicas = s->o.replicas };
	const uint8_t *client = s->cid[i % s->o.segments];
	const char *key = key_of(s, i);
	size_t len = strlen(key);
	struct mst_object *o = NULL;
	struct end_ctx e = { .m = s->m, .client = client, .key = key };
	int rc;

	pthread_mutex_lock(&s->m->lock);
	rc = mst_put_start(s->m, client, key, len, s->o.value_size, &pc, &o);
	if (rc == MC_STORE_NO_AVAILABLE_HANDLE && may_evict) {
		s->evict_calls++;
		if (mst_evict_for_put(s->m, s->o.value_size))
			rc = mst_put_start(s->m, client, key, len,
					   s->o.value_size, &pc, &o);
	}
	pthread_mutex_unlock(&s->m->lock);
	if (rc)
		return rc;
	/* The client writes its bytes here; then PutEnd. */
	pthread_mutex_lock(&s->m->lock);
	if (mst_txn_run(s->m, 1, end_prepare, end_finish, &e))
		e.code = MC_STORE_INTERNAL_ERROR;
	pthread_mutex_unlock(&s->m->lock);
	return e.code;
}

/* A GetReplicaList: the object with a read lease, its replicas' addresses
 * read as the reply carries them. */
static int get_one(struct sim *s, uint64_t i, uint64_t *sink)
{
	const char *key = key_of(s, i);
	struct mst_object *o;
	uint64_t hold, lease;
	int rc;

	pthread_mutex_lock(&s->m->lock);
	rc = mst_get(s->m, key, strlen(key), false, 0, &o, &hold, &lease);
	if (!rc)
		for (unsigned r = 0; r < o->n_repl; r++)
			if (mst_replica_live(&o->repl[r]))
				*sink += mst_replica_addr(&o->repl[r]) +
					 o->repl[r].seg->endpoint[0];
	pthread_mutex_unlock(&s->m->lock);
	return rc;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: master_sim [--keys N] [--segments S] "
		"[--segment-size BYTES] [--value-size BYTES]\n"
		"  [--key-len L] [--replicas R] [--gets G] [--evict-keys E]\n"
		"  [--full-evict-ops K] [--full-evict-secs T] "
		"[--db PATH|memory] [--keep-db] [--json]\n");
	exit(2);
}

static void parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "keys", required_argument, 0, 'n' },
		{ "segments", required_argument, 0, 's' },
		{ "segment-size", required_argument, 0, 'z' },
		{ "value-size", required_argument, 0, 'v' },
		{ "key-len", required_argument, 0, 'k' },
		{ "replicas", required_argument, 0, 'r' },
		{ "gets", required_argument, 0, 'g' },
		{ "evict-keys", required_argument, 0, 'e' },
		{ "full-evict-ops", required_argument, 0, 'f' },
		{ "full-evict-secs", required_argument, 0, 't' },
		{ "db", required_argument, 0, 'd' },
		{ "keep-db", no_argument, 0, 'K' },
		{ "json", no_argument, 0, 'j' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c;

	*o = (struct opts){ .keys = 1000000,
			    .segments = 1000,
			    .value_size = 1 << 20,
			    .key_len = 64,
			    .replicas = 1,
			    .gets = UINT64_MAX,
			    .evict_keys = UINT64_MAX,
			    .full_ops = 2000,
			    .full_secs = 20,
			    .db = "memory" };
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			o->keys = strtoull(optarg, NULL, 0);
			break;
		case 's':
			o->segments = strtoull(optarg, NULL, 0);
			break;
		case 'z':
			o->segment_size = strtoull(optarg, NULL, 0);
			break;
		case 'v':
			o->value_size = strtoull(optarg, NULL, 0);
			break;
		case 'k':
			o->key_len = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'r':
			o->replicas = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'g':
			o->gets = strtoull(optarg, NULL, 0);
			break;
		case 'e':
			o->evict_keys = strtoull(optarg, NULL, 0);
			break;
		case 'f':
			o->full_ops = strtoull(optarg, NULL, 0);
			break;
		case 't':
			o->full_secs = strtod(optarg, NULL);
			break;
		case 'd':
			o->db = optarg;
			break;
		case 'K':
			o->keep_db = true;
			break;
		case 'j':
			o->json = true;
			break;
		default:
			usage();
		}
	}
	if (!o->keys || !o->segments || !o->value_size || o->key_len < 12 ||
	    o->key_len > 4096 || !o->replicas ||
	    o->replicas > MST_MAX_REPLICAS || o->replicas > o->segments)
		usage();
	if (o->gets == UINT64_MAX)
		o->gets = o->keys;
	if (o->evict_keys == UINT64_MAX)
		o->evict_keys = o->keys / 4;
	if (!o->segment_size) {
		/* N keys fill ~85% of the pool, under the 90% watermark */
		double pool = (double)o->keys * (double)o->value_size *
			      o->replicas / 0.85;
		o->segment_size =
			((uint64_t)(pool / (double)o->segments) + (1 << 20)) &
			~((uint64_t)(1 << 20) - 1);
	}
}

struct result {
	double put_cpu, get_cpu, evict_cpu, full_cpu, restore_cpu;
	double put_s, get_s, evict_s, full_s, restore_s, create_s, destroy_s;
	uint64_t rss0, rss_put, rss_end, rss_restore;
	uint64_t put_ok, put_fail, gets_ok, gets_miss, evict_puts,
		evict_evicted, full_fill, full_ops, full_evicted;
	uint64_t db_after_put, db_closed, restored, complete_end;
	double put_tick_s, evict_tick_s, evict_tick_max_ms, full_max_ms;
	uint64_t evict_ticks;
	struct bench_hist full_hist;
};

int main(int argc, char **argv)
{
	struct sim s = { 0 };
	struct result r = { 0 };
	struct mst_config cfg = default_cfg();
	bool file_db;
	char err[256] = "";
	uint64_t t0, c0, sink = 0;

	parse(argc, argv, &s.o);
	file_db = strcmp(s.o.db, "memory") != 0;
	mc_log_set_level(MC_LOG_WARN); /* eviction's notices: not measured */
	s.kbuf = malloc(s.o.key_len + 1);
	s.cid = calloc(s.o.segments, sizeof(*s.cid));
	if (!s.kbuf || !s.cid)
		die("out of memory");
	if (file_db && !s.o.keep_db) {
		char p[4096];
		unlink(s.o.db);
		snprintf(p, sizeof(p), "%s-wal", s.o.db);
		unlink(p);
		snprintf(p, sizeof(p), "%s-shm", s.o.db);
		unlink(p);
	}
	r.rss0 = rss_bytes();
	t0 = bench_now_ns();
	if (mst_create(&cfg, s.o.db, 0, &s.m, err, sizeof(err)))
		die(err);
	r.create_s = (double)(bench_now_ns() - t0) / 1e9;
	for (uint64_t i = 0; i < s.o.segments; i++) {
		uint8_t sid[MST_ID_LEN] = { 0 };
		char name[64], ep[64];
		struct mst_seg_desc d = { .id = sid,
					  .name = name,
					  .endpoint = ep,
					  .protocol = "rdma",
					  .host_id = ep,
					  .base = 0x7f0000000000ull,
					  .size = s.o.segment_size };
		int rc;
		memcpy(s.cid[i], "simclient", 9);
		memcpy(&s.cid[i][8], &i, sizeof(i));
		memcpy(sid, "simsegmt", 8);
		memcpy(&sid[8], &i, sizeof(i));
		snprintf(name, sizeof(name), "seg-%" PRIu64, i);
		snprintf(ep, sizeof(ep), "10.0.%" PRIu64 ".%" PRIu64 ":17777",
			 i / 250, i % 250);
		pthread_mutex_lock(&s.m->lock);
		if (!mst_client_touch(s.m, s.cid[i]))
			die("client");
		rc = mst_mount(s.m, s.cid[i], &d);
		pthread_mutex_unlock(&s.m->lock);
		if (rc)
			die("mount failed");
	}
	housekeeping(&s, true);

	/* put: N keys into an ~85% full pool (no eviction expected) */
	r.rss_put = rss_bytes();
	s.tick_ns_total = 0;
	t0 = bench_now_ns();
	c0 = cpu_ns();
	for (uint64_t i = 0; i < s.o.keys; i++) {
		if (put_one(&s, i, true))
			r.put_fail++;
		if (!(i & 255))
			housekeeping(&s, false);
	}
	r.put_s = (double)(bench_now_ns() - t0) / 1e9;
	r.put_cpu = (double)(cpu_ns() - c0) / 1e9;
	r.put_tick_s = (double)s.tick_ns_total / 1e9;
	s.next_key = s.o.keys;
	r.put_ok = s.o.keys - r.put_fail;
	r.rss_put = rss_bytes() - r.rss_put;
	if (file_db)
		r.db_after_put = db_bytes(s.o.db);

	/* get: random keys among those put, with a read lease */
	t0 = bench_now_ns();
	c0 = cpu_ns();
	for (uint64_t i = 0; i < s.o.gets; i++) {
		if (get_one(&s, rnd() % s.o.keys, &sink))
			r.gets_miss++;
		else
			r.gets_ok++;
		if (!(i & 255))
			housekeeping(&s, false);
	}
	r.get_s = (double)(bench_now_ns() - t0) / 1e9;
	r.get_cpu = (double)(cpu_ns() - c0) / 1e9;

	/* evict: more puts, the watermark evicting in the tick */
	uint64_t ev0 = s.m->stats.evicted_keys;
	s.tick_ns_total = s.tick_ns_max = s.ticks = 0;
	t0 = bench_now_ns();
	c0 = cpu_ns();
	for (uint64_t i = 0; i < s.o.evict_keys; i++) {
		if (put_one(&s, s.next_key++, true))
			r.put_fail++;
		r.evict_puts++;
		if (!(i & 255))
			housekeeping(&s, false);
	}
	r.evict_s = (double)(bench_now_ns() - t0) / 1e9;
	r.evict_cpu = (double)(cpu_ns() - c0) / 1e9;
	r.evict_tick_s = (double)s.tick_ns_total / 1e9;
	r.evict_tick_max_ms = (double)s.tick_ns_max / 1e6;
	r.evict_ticks = s.ticks;
	r.evict_evicted = s.m->stats.evicted_keys - ev0;

	/* full: no watermark; fill to the last block, then every put evicts
	 * for itself (no tick: pings only) */
	s.m->cfg.high_watermark = 2.0;
	for (;;) {
		int rc = put_one(&s, s.next_key++, false);
		if (rc == MC_STORE_NO_AVAILABLE_HANDLE)
			break;
		r.full_fill++;
		if (!(r.full_fill & 255))
			housekeeping(&s, false);
	}
	ev0 = s.m->stats.evicted_keys;
	t0 = bench_now_ns();
	c0 = cpu_ns();
	for (uint64_t i = 0; i < s.o.full_ops; i++) {
		uint64_t a = bench_now_ns();
		if (put_one(&s, s.next_key++, true))
			r.put_fail++;
		bench_hist_add(&r.full_hist, bench_now_ns() - a);
		r.full_ops++;
		{ /* each put is slow here: check every time */
			uint64_t now = bench_now_ns();
			if (now - s.last_ping_ns >= 1000000000ull) {
				s.last_tick_ns = now; /* pings only */
				housekeeping(&s, false);
			}
			if ((double)(now - t0) / 1e9 > s.o.full_secs)
				break;
		}
	}
	r.full_s = (double)(bench_now_ns() - t0) / 1e9;
	r.full_cpu = (double)(cpu_ns() - c0) / 1e9;
	r.full_evicted = s.m->stats.evicted_keys - ev0;
	r.full_max_ms = (double)r.full_hist.max_ns / 1e6;
	r.complete_end = s.m->n_complete;
	r.rss_end = rss_bytes();

	t0 = bench_now_ns();
	mst_destroy(s.m);
	s.m = NULL;
	r.destroy_s = (double)(bench_now_ns() - t0) / 1e9;

	/* restore: a restart (or a standby taking over) loading the file */
	if (file_db) {
		uint64_t before;
		r.db_closed = db_bytes(s.o.db);
		before = rss_bytes();
		t0 = bench_now_ns();
		c0 = cpu_ns();
		if (mst_create(&cfg, s.o.db, 0, &s.m, err, sizeof(err)))
			die(err);
		r.restore_s = (double)(bench_now_ns() - t0) / 1e9;
		r.restore_cpu = (double)(cpu_ns() - c0) / 1e9;
		r.rss_restore = rss_bytes() - before;
		r.restored = s.m->n_complete;
		mst_destroy(s.m);
	}

	double ppk = (double)r.rss_put / (double)s.o.keys;
	double put_rate = (double)s.o.keys / r.put_s;
	double get_rate = (double)s.o.gets / r.get_s;
	double ev_rate = (double)r.evict_puts / r.evict_s;
	double full_rate = r.full_s > 0 ? (double)r.full_ops / r.full_s : 0;
	uint64_t p50 = bench_hist_quantile(&r.full_hist, 0.5);
	uint64_t p99 = bench_hist_quantile(&r.full_hist, 0.99);

	if (s.o.json) {
		printf("{\"keys\":%" PRIu64 ",\"segments\":%" PRIu64
		       ",\"segment_size\":%" PRIu64 ",\"value_size\":%" PRIu64
		       ",\"key_len\":%u,\"replicas\":%u,\"db\":\"%s\","
		       "\"rss_per_key\":%.1f,\"rss_put_bytes\":%" PRIu64
		       ",\"rss_end_bytes\":%" PRIu64
		       ",\"put_per_s\":%.0f,\"put_s\":%.3f,\"put_tick_s\":%.3f,"
		       "\"put_fail\":%" PRIu64 ",\"gets\":%" PRIu64
		       ",\"get_per_s\":%.0f,\"get_miss\":%" PRIu64
		       ",\"evict_puts\":%" PRIu64 ",\"evict_put_per_s\":%.0f,"
		       "\"evicted_by_watermark\":%" PRIu64
		       ",\"evict_ticks\":%" PRIu64 ",\"evict_tick_s\":%.3f,"
		       "\"evict_tick_max_ms\":%.1f,\"full_fill\":%" PRIu64
		       ",\"full_ops\":%" PRIu64 ",\"full_put_per_s\":%.1f,"
		       "\"full_evicted\":%" PRIu64 ",\"full_p50_ms\":%.3f,"
		       "\"full_p99_ms\":%.3f,\"full_max_ms\":%.3f,"
		       "\"complete_end\":%" PRIu64 ",\"destroy_s\":%.3f",
		       s.o.keys, s.o.segments, s.o.segment_size, s.o.value_size,
		       s.o.key_len, s.o.replicas, file_db ? "file" : "memory",
		       ppk, r.rss_put, r.rss_end, put_rate, r.put_s,
		       r.put_tick_s, r.put_fail, s.o.gets, get_rate,
		       r.gets_miss, r.evict_puts, ev_rate, r.evict_evicted,
		       r.evict_ticks, r.evict_tick_s, r.evict_tick_max_ms,
		       r.full_fill, r.full_ops, full_rate, r.full_evicted,
		       (double)p50 / 1e6, (double)p99 / 1e6, r.full_max_ms,
		       r.complete_end, r.destroy_s);
		if (file_db)
			printf(",\"db_bytes_after_put\":%" PRIu64
			       ",\"db_bytes_per_key\":%.1f,\"db_bytes_closed\":%" PRIu64
			       ",\"db_closed_per_key\":%.1f,\"restore_s\":%.3f,"
			       "\"restored\":%" PRIu64
			       ",\"restore_s_per_M\":%.3f,\"rss_restore_per_key\":%.1f",
			       r.db_after_put,
			       (double)r.db_after_put / (double)s.o.keys,
			       r.db_closed,
			       (double)r.db_closed / (double)r.complete_end,
			       r.restore_s, r.restored,
			       r.restore_s * 1e6 / (double)r.restored,
			       (double)r.rss_restore / (double)r.restored);
		printf(",\"put_per_cpu_s\":%.0f,\"get_per_cpu_s\":%.0f,"
		       "\"evict_put_per_cpu_s\":%.0f,\"full_put_per_cpu_s\":%.1f,"
		       "\"restore_cpu_s\":%.3f,\"wall_over_cpu\":%.2f",
		       (double)s.o.keys / r.put_cpu,
		       (double)s.o.gets / r.get_cpu,
		       (double)r.evict_puts / r.evict_cpu,
		       r.full_cpu > 0 ? (double)r.full_ops / r.full_cpu : 0,
		       r.restore_cpu, r.put_s / r.put_cpu);
		printf(",\"sink\":%" PRIu64 "}\n", sink & 1);
		return 0;
	}
	printf("master_sim: %" PRIu64 " keys, %" PRIu64 " segments of %" PRIu64
	       " B, values %" PRIu64 " B, keys %u B, %u replica(s), db %s\n",
	       s.o.keys, s.o.segments, s.o.segment_size, s.o.value_size,
	       s.o.key_len, s.o.replicas, s.o.db);
	printf("memory:  %.1f B/key resident after the puts (%.2f GiB), "
	       "%.2f GiB at the end\n",
	       ppk, (double)r.rss_put / (1 << 30),
	       (double)r.rss_end / (1 << 30));
	printf("put:     %.0f/s (%.2f s, of which tick %.2f s; %" PRIu64
	       " failed)\n",
	       put_rate, r.put_s, r.put_tick_s, r.put_fail);
	printf("per CPU second (apart from other jobs): put %.0f/s, get "
	       "%.0f/s, put with watermark eviction %.0f/s\n",
	       (double)s.o.keys / r.put_cpu, (double)s.o.gets / r.get_cpu,
	       (double)r.evict_puts / r.evict_cpu);
	printf("get:     %.0f/s (%" PRIu64 " lookups, %" PRIu64 " missed)\n",
	       get_rate, s.o.gets, r.gets_miss);
	printf("evict:   %.0f puts/s with the watermark evicting (%" PRIu64
	       " puts, %" PRIu64 " evicted in %" PRIu64
	       " ticks, tick time %.2f s, longest tick %.1f ms)\n",
	       ev_rate, r.evict_puts, r.evict_evicted, r.evict_ticks,
	       r.evict_tick_s, r.evict_tick_max_ms);
	printf("full:    %.1f puts/s each evicting for itself (%" PRIu64
	       " puts after %" PRIu64 " to fill, %" PRIu64
	       " evicted; p50 %.3f ms, p99 %.3f ms, max %.3f ms)\n",
	       full_rate, r.full_ops, r.full_fill, r.full_evicted,
	       (double)p50 / 1e6, (double)p99 / 1e6, r.full_max_ms);
	if (file_db)
		printf("sqlite:  %.1f B/key after the puts, %.1f B/key closed; "
		       "restore %.2f s for %" PRIu64 " keys (%.2f s per "
		       "million)\n",
		       (double)r.db_after_put / (double)s.o.keys,
		       (double)r.db_closed / (double)r.complete_end,
		       r.restore_s, r.restored,
		       r.restore_s * 1e6 / (double)r.restored);
	return 0;
}
