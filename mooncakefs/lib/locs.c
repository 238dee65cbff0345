/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The location cache (see locs.h): an mc_map from key to its replicas and
 * lease under one mutex, interned endpoint and host strings (a pool has
 * few), and the thread that tells the master of cached reads (the
 * toucher), started with the first key.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "locs.h"
#include "master_client.h"
#include "mc_log.h"
#include "mc_map.h"
#include "mc_time.h"
#include "mooncake/mc_err.h"
#include "util.h"

#define TOUCH_CHUNK 1024u /* keys per BatchGetReplicaList */
#define STRS_MAX 4096u /* distinct endpoints and host ids kept */
#define PERIOD_MIN_MS 10u
#define PERIOD_MAX_MS 5000u

struct loc_rep {
	const char *endpoint, *host_id; /* interned */
	uint64_t address, size;
	int32_t status;
	bool has_seg_id;
	uint8_t seg_id[16];
};

/* An mc_map value: the header, then n loc_rep. */
struct loc {
	uint64_t until, ttl, size, version;
	uint64_t read_at; /* the last hit's time (mcs_now_ms) */
	bool read; /* since the toucher's last round */
	uint32_t n;
	struct loc_rep r[];
};

struct mcs_locs {
	struct mcs_master *m;
	size_t max_keys;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct mc_map *map;
	char **strs;
	size_t n_strs, cap_strs;
	uint64_t gen; /* bumped by forget and clear */
	uint64_t ttl_ms; /* the latest lease seen: sets the period */
	bool started, stop;
	bool off; /* a clear that could not empty the map */
	pthread_t thread;
	struct mcs_locs_stats st;
};

int mcs_locs_create(struct mcs_master *m, size_t max_keys,
		    struct mcs_locs **out)
{
	struct mcs_locs *c = calloc(1, sizeof(*c));

	if (!c || mc_map_create(&c->map)) {
		free(c);
		return -ENOMEM;
	}
	c->m = m;
	c->max_keys = max_keys;
	pthread_mutex_init(&c->lock, NULL);
	mc_cond_init_mono(&c->cond);
	*out = c;
	return 0;
}

void mcs_locs_destroy(struct mcs_locs *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	if (c->started)
		pthread_join(c->thread, NULL);
	mc_map_destroy(c->map);
	for (size_t i = 0; i < c->n_strs; i++)
		free(c->strs[i]);
	free(c->strs);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* ---- lookups ------------------------------------------------------------ */

static struct loc *find(struct mcs_locs *c, const char *key)
{
	const struct mc_map_entry *e = mc_map_get(c->map, key, strlen(key));

	return e ? (struct loc *)(void *)e->val : NULL;
}

bool mcs_locs_get(struct mcs_locs *c, const char *key, uint64_t now,
		  struct mcs_loc_hit *hit)
{
	struct loc *l;

	if (!c)
		return false;
	pthread_mutex_lock(&c->lock);
	l = find(c, key);
	if (!l || c->off || l->until <= now + l->ttl / 8) {
		c->st.misses++;
		pthread_mutex_unlock(&c->lock);
		return false;
	}
	l->read = true;
	l->read_at = now;
	c->st.hits++;
	hit->rl = (Mcrpc__ReplicaList)MCRPC__REPLICA_LIST__INIT;
	hit->rl.size = l->size;
	hit->rl.version = l->version;
	hit->rl.lease_ttl_ms = l->until - now;
	hit->rl.n_replicas = l->n;
	hit->rl.replicas = hit->reps;
	hit->until = l->until;
	for (uint32_t i = 0; i < l->n; i++) {
		hit->rep[i] = (Mcrpc__Replica)MCRPC__REPLICA__INIT;
		hit->rep[i].endpoint = (char *)l->r[i].endpoint;
		hit->rep[i].host_id = (char *)l->r[i].host_id;
		hit->rep[i].address = l->r[i].address;
		hit->rep[i].size = l->r[i].size;
		hit->rep[i].status = l->r[i].status;
		if (l->r[i].has_seg_id) {
			memcpy(hit->seg_ids[i], l->r[i].seg_id,
			       sizeof(hit->seg_ids[i]));
			hit->rep[i].segment_id = (ProtobufCBinaryData){
				.len = sizeof(hit->seg_ids[i]),
				.data = hit->seg_ids[i]
			};
		}
		hit->reps[i] = &hit->rep[i];
	}
	pthread_mutex_unlock(&c->lock);
	return true;
}

/* ---- changes ------------------------------------------------------------ */

uint64_t mcs_locs_gen(struct mcs_locs *c)
{
	uint64_t g;

	if (!c)
		return 0;
	pthread_mutex_lock(&c->lock);
	g = c->gen;
	pthread_mutex_unlock(&c->lock);
	return g;
}

/* The kept copy of s ("" for NULL); NULL when the table is full. */
static const char *intern(struct mcs_locs *c, const char *s)
{
	char *copy;

	if (!s)
		s = "";
	for (size_t i = 0; i < c->n_strs; i++)
		if (!strcmp(c->strs[i], s))
			return c->strs[i];
	if (c->n_strs == STRS_MAX)
		return NULL;
	if (c->n_strs == c->cap_strs) {
		size_t cap = c->cap_strs ? 2 * c->cap_strs : 16;
		char **v = realloc(c->strs, cap * sizeof(*v));

		if (!v)
			return NULL;
		c->strs = v;
		c->cap_strs = cap;
	}
	copy = strdup(s);
	if (copy)
		c->strs[c->n_strs++] = copy;
	return copy;
}

static void *toucher(void *arg);

/* Under the lock: start the toucher with the first key. */
static void start_toucher(struct mcs_locs *c)
{
	char buf[160];
	int rc;

	if (c->started || c->stop)
		return;
	rc = mcs_thread_start(&c->thread, toucher, c);
	if (rc) {
		const char *hint = mcs_limit_hint(rc, buf, sizeof(buf));

		mc_log_warn("store",
			    "location cache: no thread to count cached reads "
			    "at the master (its eviction does not see them): "
			    "%s%s%s%s",
			    mc_strerror(rc), hint ? " (" : "", hint ? hint : "",
			    hint ? ")" : "");
		c->stop = true; /* do not try again */
		return;
	}
	c->started = true;
}

/* A list the cache can serve reads from: found, leased, with replicas. */
static bool cacheable(const Mcrpc__ReplicaList *rl)
{
	return !rl->code && rl->size && rl->lease_ttl_ms && rl->n_replicas &&
	       rl->n_replicas <= MOONCAKE_MAX_REPLICAS;
}

/* Under the lock: key's replicas as rl lists them, served until until
 * (mcs_now_ms time), under leases of ttl ms. */
static void put_locked(struct mcs_locs *c, const char *key,
		       const Mcrpc__ReplicaList *rl, uint64_t until,
		       uint64_t ttl)
{
	size_t n = rl->n_replicas, len = strlen(key);
	union {
		struct loc l;
		char b[sizeof(struct loc) +
		       MOONCAKE_MAX_REPLICAS * sizeof(struct loc_rep)];
	} u;
	struct loc *old = find(c, key), *l = &u.l;

	if (c->off || (!old && mc_map_count(c->map) >= c->max_keys))
		return;
	*l = (struct loc){ .until = until,
			   .ttl = ttl,
			   .size = rl->size,
			   .version = rl->version,
			   .read_at = old ? old->read_at : 0,
			   .read = old && old->read,
			   .n = (uint32_t)n };
	for (size_t i = 0; i < n; i++) {
		const Mcrpc__Replica *r = rl->replicas[i];

		l->r[i] = (struct loc_rep){ .endpoint = intern(c, r->endpoint),
					    .host_id = intern(c, r->host_id),
					    .address = r->address,
					    .size = r->size,
					    .status = r->status };
		if (r->segment_id.len == sizeof(l->r[i].seg_id)) {
			memcpy(l->r[i].seg_id, r->segment_id.data,
			       sizeof(l->r[i].seg_id));
			l->r[i].has_seg_id = true;
		}
		if (!l->r[i].endpoint || !l->r[i].host_id)
			return;
	}
	if (mc_map_put(c->map, key, len, l, sizeof(*l) + n * sizeof(l->r[0])))
		return;
	c->ttl_ms = ttl;
	start_toucher(c);
}

void mcs_locs_put(struct mcs_locs *c, const char *key,
		  const Mcrpc__ReplicaList *rl, uint64_t t0, uint64_t gen)
{
	if (!c || !cacheable(rl))
		return;
	pthread_mutex_lock(&c->lock);
	if (gen == c->gen)
		put_locked(c, key, rl, t0 + rl->lease_ttl_ms, rl->lease_ttl_ms);
	pthread_mutex_unlock(&c->lock);
}

/* Drop key; gen: bump the generation too; stale: count a stale hit. */
static void del(struct mcs_locs *c, const char *key, bool gen, bool stale)
{
	if (!c || !key)
		return;
	pthread_mutex_lock(&c->lock);
	c->gen += gen;
	c->st.stale += stale;
	(void)mc_map_del(c->map, key, strlen(key));
	pthread_mutex_unlock(&c->lock);
}

void mcs_locs_drop(struct mcs_locs *c, const char *key)
{
	del(c, key, false, false);
}

void mcs_locs_stale(struct mcs_locs *c, const char *key)
{
	del(c, key, false, true);
}

void mcs_locs_forget(struct mcs_locs *c, const char *key)
{
	del(c, key, true, false);
}

void mcs_locs_sized(struct mcs_locs *c, const char *key, uint64_t size)
{
	struct loc *l;

	if (!c || !key)
		return;
	pthread_mutex_lock(&c->lock);
	l = find(c, key);
	if (l && l->size != size) {
		c->gen++;
		(void)mc_map_del(c->map, key, strlen(key));
	}
	pthread_mutex_unlock(&c->lock);
}

void mcs_locs_clear(struct mcs_locs *c)
{
	struct mc_map *fresh = NULL, *old = NULL;

	if (!c)
		return;
	if (mc_map_create(&fresh))
		fresh = NULL;
	pthread_mutex_lock(&c->lock);
	c->gen++;
	if (fresh) {
		old = c->map;
		c->map = fresh;
	} else {
		/* No memory for an empty map: what is cached may be gone,
		 * so the cache serves nothing from now on. */
		c->off = true;
	}
	pthread_mutex_unlock(&c->lock);
	mc_map_destroy(old);
}

void mcs_locs_stats(struct mcs_locs *c, struct mcs_locs_stats *out)
{
	*out = (struct mcs_locs_stats){ 0 };
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	*out = c->st;
	out->keys = mc_map_count(c->map);
	pthread_mutex_unlock(&c->lock);
}

/* ---- the toucher -------------------------------------------------------- */

struct round {
	uint64_t now;
	char **read, **lapsed; /* copies of keys */
	uint64_t *read_at; /* of read[i] */
	size_t n_read, n_lapsed, cap;
	bool nomem;
};

static void collect(const struct mc_map_entry *e, void *arg)
{
	struct round *r = arg;
	struct loc *l = (struct loc *)(void *)e->val;
	bool read = l->read;
	char *key;

	if (!read && l->until > r->now)
		return;
	key = strdup(e->key);
	if (!key) {
		r->nomem = true;
		return;
	}
	l->read = false;
	if (read) {
		r->read_at[r->n_read] = l->read_at;
		r->read[r->n_read++] = key;
	} else
		r->lapsed[r->n_lapsed++] = key;
}

static void free_keys(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
}

/*
 * Tell the master of one chunk of keys read from the cache since the last
 * round, each with how long ago it was last read (one BatchGetReplicaList
 * with read_age_ms): the reads count for eviction, and the lease of each
 * is renewed as a get at the time of that read would have (never longer:
 * upstream's "removable a lease after the last get" holds). A key still
 * the same object is cached on under the renewed lease (its end counted
 * from before the call), so a key read again and again keeps being
 * served from the cache. A key gone or replaced leaves the cache. Lock
 * not held.
 */
static void touch_chunk(struct mcs_locs *c, char **keys,
			const uint64_t *read_at, size_t n)
{
	Mcrpc__GetReplicaListResponse *resp = NULL;
	uint32_t ages[TOUCH_CHUNK];
	uint64_t gen, t0;
	int rc;

	pthread_mutex_lock(&c->lock);
	gen = c->gen;
	pthread_mutex_unlock(&c->lock);
	t0 = mcs_now_ms();
	for (size_t i = 0; i < n; i++) {
		uint64_t age = t0 > read_at[i] ? t0 - read_at[i] : 0;
		ages[i] = age > UINT32_MAX ? UINT32_MAX : (uint32_t)age;
	}
	rc = mcs_master_renew_reads(c->m, (const char *const *)keys, ages, n,
				    &resp);
	if (rc) {
		/* Those reads go uncounted; the leases lapse as they would. */
		mc_log_debug("store", "location cache: renew %zu keys: %s", n,
			     mc_strerror(rc));
		return;
	}
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < n && i < resp->n_results; i++) {
		const Mcrpc__ReplicaList *rl = resp->results[i];
		struct loc *l = find(c, keys[i]);

		if (!l)
			continue; /* dropped or forgotten meanwhile */
		if (!rl->code && rl->version == l->version) {
			uint64_t until = t0 + rl->lease_ttl_ms;

			c->st.touched++;
			/* Not after a forget or clear of this client's: the
			 * answer may predate its own remove or rename. */
			if (gen == c->gen && cacheable(rl))
				put_locked(c, keys[i], rl,
					   until > l->until ? until : l->until,
					   l->ttl);
			continue;
		}
		/* Removed, or replaced by another object (a put in progress
		 * included): its lease still keeps the old memory, but a get
		 * should see what the key is now. */
		(void)mc_map_del(c->map, keys[i], strlen(keys[i]));
		c->st.dropped++;
	}
	pthread_mutex_unlock(&c->lock);
	mcs_master_free(resp);
}

/* One round: called and returns with the lock held. */
static void round_once(struct mcs_locs *c)
{
	size_t n = mc_map_count(c->map);
	struct round r = { .now = mcs_now_ms(), .cap = n };

	if (!n)
		return;
	r.read = calloc(n, sizeof(*r.read));
	r.read_at = calloc(n, sizeof(*r.read_at));
	r.lapsed = calloc(n, sizeof(*r.lapsed));
	if (r.read && r.read_at && r.lapsed) {
		mc_map_foreach(c->map, collect, &r);
		for (size_t i = 0; i < r.n_lapsed; i++)
			(void)mc_map_del(c->map, r.lapsed[i],
					 strlen(r.lapsed[i]));
		pthread_mutex_unlock(&c->lock);
		for (size_t i = 0; i < r.n_read; i += TOUCH_CHUNK)
			touch_chunk(c, &r.read[i], &r.read_at[i],
				    r.n_read - i < TOUCH_CHUNK ? r.n_read - i :
								 TOUCH_CHUNK);
		pthread_mutex_lock(&c->lock);
	}
	if (r.nomem || !r.read || !r.read_at || !r.lapsed)
		mc_log_debug("store", "location cache: touch round: out of "
				      "memory");
	if (r.read)
		free_keys(r.read, r.n_read);
	if (r.lapsed)
		free_keys(r.lapsed, r.n_lapsed);
	free(r.read);
	free(r.read_at);
	free(r.lapsed);
}

static unsigned period_ms(const struct mcs_locs *c)
{
	uint64_t p = c->ttl_ms / 4;

	if (p < PERIOD_MIN_MS)
		p = PERIOD_MIN_MS;
	if (p > PERIOD_MAX_MS)
		p = PERIOD_MAX_MS;
	return (unsigned)p;
}

static void *toucher(void *arg)
{
	struct mcs_locs *c = arg;
	uint64_t last = mcs_now_ms();
	struct timespec ts;

	pthread_mutex_lock(&c->lock);
	while (!c->stop) {
		/* Recomputed on every wake: the lease may have changed. */
		uint64_t now = mcs_now_ms(), due = last + period_ms(c);

		if (now >= due) {
			last = now;
			round_once(c);
			continue;
		}
		ts = mc_mono_deadline(due - now);
		(void)pthread_cond_timedwait(&c->cond, &c->lock, &ts);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}
