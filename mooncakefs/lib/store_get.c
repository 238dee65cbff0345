/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Get: one (Batch)GetReplicaList for all keys, then rounds of reads: round
 * r reads every key that is still missing from its r-th replica (replicas
 * on this host first: the engine then copies through shared memory), all
 * keys' reads in as few transfer batches as possible. A key whose read
 * finished after its lease ran out is LEASE_EXPIRED: the object may have
 * been removed and its memory reused while we read. Such keys are read
 * once more under a hold (holds.h: renewed in the background for as long
 * as the read takes), so an object too large to move within one lease TTL
 * is still read, and still safely. Keys in the location cache (locs.h)
 * skip the master: their reads go first, under the cached lease, and only
 * those that fail ask the master.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "holds.h"
#include "locs.h"
#include "mc_log.h"
#include "staging.h"
#include "store_int.h"
#include "util.h"
#include "xfer.h"
#include "mooncake/te.h"

struct gk {
	const Mcrpc__ReplicaList *rl;
	const Mcrpc__Replica **order; /* usable replicas, preferred first */
	size_t n_order, next;
	size_t op_first, op_n;
	bool pending;
};

static int validate(struct mooncake_store *s, const struct mcs_get_key *k,
		    uint64_t *cap)
{
	uint64_t sum = 0;

	if (!mcs_key_ok(k->key) || !k->n_parts || !k->parts || !k->part_sizes)
		return -EINVAL;
	for (size_t p = 0; p < k->n_parts; p++) {
		if (sum + k->part_sizes[p] < sum)
			return -EINVAL;
		sum += k->part_sizes[p];
		if (!k->part_sizes[p])
			continue;
		if (!k->parts[p])
			return -EINVAL;
		if (!k->trusted && !mcs_regs_contains(&s->regs, k->parts[p],
						      k->part_sizes[p])) {
			mc_log_debug("store",
				     "get %s: buffer %p (%zu bytes) is not "
				     "registered",
				     k->key, k->parts[p], k->part_sizes[p]);
			return -EINVAL;
		}
	}
	*cap = sum;
	return 0;
}

static uint64_t capacity(const struct mcs_get_key *k)
{
	uint64_t sum = 0;

	for (size_t p = 0; p < k->n_parts; p++)
		sum += k->part_sizes[p];
	return sum;
}

/* Replicas on this host first, otherwise in the master's order. */
static int order_replicas(struct mooncake_store *s, struct gk *g)
{
	const Mcrpc__ReplicaList *rl = g->rl;

	g->order =
		calloc(rl->n_replicas ? rl->n_replicas : 1, sizeof(*g->order));
	if (!g->order)
		return -ENOMEM;
	g->n_order = mcs_replicas_order(s, rl, g->order);
	return 0;
}

/* Ops reading size bytes of replica rep into the key's parts. */
static size_t add_ops(struct mcs_xfer_op *ops, const struct mcs_get_key *k,
		      const Mcrpc__Replica *rep, uint64_t size)
{
	uint64_t off = 0;
	size_t n = 0;

	for (size_t p = 0; p < k->n_parts && off < size; p++) {
		uint64_t len = k->part_sizes[p];

		if (len > size - off)
			len = size - off;
		if (!len)
			continue;
		ops[n++] = (struct mcs_xfer_op){ .opcode = TE_READ,
						 .local = k->parts[p],
						 .endpoint = rep->endpoint,
						 .seg_id = mcs_rep_seg_id(rep),
						 .remote = rep->address + off,
						 .len = len };
		off += len;
	}
	return n;
}

/* Read the keys live[] from their lists; t0: when the leases started.
 * holds (NULL: none): key j's read is safe while holds[j] is valid, not
 * only within its lease. */
static void read_lists(struct mooncake_store *s, struct mcs_get_key *keys,
		       const size_t *live, Mcrpc__ReplicaList *const *lists,
		       size_t n_live, uint64_t t0,
		       struct mcs_hold *const *holds)
{
	struct mcs_xfer_op *ops = NULL;
	struct gk *g = calloc(n_live, sizeof(*g));
	size_t max_ops = 0;

	/* Every key below ends with its own result; until then, this. */
	for (size_t j = 0; j < n_live; j++)
		keys[live[j]].result = -ENOMEM;
	if (!g)
		goto out;
	for (size_t j = 0; j < n_live; j++) {
		struct mcs_get_key *k = &keys[live[j]];

		g[j].rl = lists[j];
		if (lists[j]->code) {
			k->result = lists[j]->code;
			continue;
		}
		if (lists[j]->size > capacity(k)) {
			mc_log_debug("store",
				     "get %s: object of %llu bytes, buffer "
				     "of %llu",
				     k->key, (unsigned long long)lists[j]->size,
				     (unsigned long long)capacity(k));
			k->result = -EINVAL;
			continue;
		}
		if (!lists[j]->size) {
			k->result = 0;
			continue;
		}
		if (order_replicas(s, &g[j]))
			goto out;
		if (!g[j].n_order) {
			k->result = MC_ENOTREADY;
			continue;
		}
		g[j].pending = true;
		max_ops += k->n_parts;
	}
	ops = calloc(max_ops ? max_ops : 1, sizeof(*ops));
	if (!ops)
		goto out;

	for (;;) {
		size_t n_ops = 0;

		for (size_t j = 0; j < n_live; j++) {
			if (!g[j].pending)
				continue;
			g[j].op_first = n_ops;
			n_ops += add_ops(&ops[n_ops], &keys[live[j]],
					 g[j].order[g[j].next], g[j].rl->size);
			g[j].op_n = n_ops - g[j].op_first;
		}
		if (!n_ops)
			break;
		(void)mcs_xfer_run(s->xfer, ops, n_ops,
				   atomic_load(&s->transfer_ms));
		for (size_t j = 0; j < n_live; j++) {
			struct mcs_get_key *k = &keys[live[j]];
			int bad = 0;

			if (!g[j].pending)
				continue;
			for (size_t o = g[j].op_first;
			     o < g[j].op_first + g[j].op_n && !bad; o++)
				bad = ops[o].result;
			if (!bad) {
				g[j].pending = false;
				k->result = (int64_t)g[j].rl->size;
				continue;
			}
			mc_log_debug("store", "get %s: read from %s: %s%s",
				     k->key, g[j].order[g[j].next]->endpoint,
				     mc_strerror(bad),
				     g[j].next + 1 < g[j].n_order ?
					     "; trying the next replica" :
					     "");
			mcs_note_own_limit(bad);
			mcs_note_transfer(s, g[j].order[g[j].next]->endpoint,
					  bad);
			if (++g[j].next == g[j].n_order) {
				g[j].pending = false;
				k->result = MC_ETRANSFER;
			}
		}
	}
	for (size_t j = 0; j < n_live; j++) {
		struct mcs_get_key *k = &keys[live[j]];
		uint64_t ttl = g[j].rl->lease_ttl_ms;
		uint64_t now = mcs_now_ms(), took = now - t0;

		if (k->result <= 0)
			continue;
		if (holds && holds[j]) {
			if (!mcs_hold_valid(holds[j], now)) {
				mc_log_debug("store",
					     "get %s: its hold was not "
					     "renewed in time",
					     k->key);
				k->result = MC_ELEASEEXPIRED;
			}
		} else if (ttl && took > ttl) {
			mc_log_debug("store",
				     "get %s: took %llu ms, lease was %llu ms",
				     k->key, (unsigned long long)took,
				     (unsigned long long)ttl);
			k->result = MC_ELEASEEXPIRED;
		}
	}
out:
	if (g)
		for (size_t j = 0; j < n_live; j++)
			free(g[j].order);
	free(g);
	free(ops);
}

/* A hit that may work through the master: its read failed or outlasted
 * the lease (the object may have moved), or the cached object does not
 * fit the buffer (-EINVAL: the caller may have sized it for a newer
 * object, e.g. by get_size, which asks the master); the rest is the
 * answer. */
static bool hit_failed(int64_t r)
{
	return r == MC_ETRANSFER || r == MC_ELEASEEXPIRED ||
	       r == MC_ENOTREADY || r == -EINVAL;
}

/* Keys of live[] in the location cache: read from their holders at once
 * (one round trip). live[] keeps the rest, the failed hits at its end, for
 * the master. */
static void read_cached(struct mooncake_store *s, struct mcs_get_key *keys,
			size_t *live, size_t *n_live)
{
	size_t n = *n_live, n_hit = 0, n_miss = 0;
	struct mcs_loc_hit one, *hits = n == 1 ? &one : NULL;
	Mcrpc__ReplicaList *one_list, **lists = n == 1 ? &one_list : NULL;
	size_t one_idx, *idx = n == 1 ? &one_idx : NULL;
	uint64_t now = mcs_now_ms();

	if (n > 1) {
		hits = malloc(n * sizeof(*hits));
		lists = malloc(n * sizeof(*lists));
		idx = malloc(n * sizeof(*idx));
	}
	if (!hits || !lists || !idx)
		goto out; /* all go to the master */
	for (size_t j = 0; j < n; j++) {
		if (mcs_locs_get(s->locs, keys[live[j]].key, now,
				 &hits[n_hit])) {
			idx[n_hit] = live[j];
			lists[n_hit] = &hits[n_hit].rl;
			n_hit++;
		} else {
			live[n_miss++] = live[j];
		}
	}
	if (!n_hit)
		goto out;
	read_lists(s, keys, idx, lists, n_hit, now, NULL);
	for (size_t j = 0; j < n_hit; j++) {
		struct mcs_get_key *k = &keys[idx[j]];

		if (!hit_failed(k->result))
			continue;
		mc_log_debug("store", "get %s: cached location: %s", k->key,
			     mc_strerror((int)k->result));
		mcs_locs_stale(s->locs, k->key);
		live[n_miss++] = idx[j];
	}
	*n_live = n_miss;
out:
	if (n > 1) {
		free(hits);
		free(lists);
		free(idx);
	}
}

/* Hold each key of keys[] (GetReplicaList with holds, t0 before it);
 * holds[j] stays NULL where the master gave none (or it could not be
 * kept: the key is read under its lease alone). */
static int take_holds(struct mooncake_store *s, const char *const *keys,
		      size_t n, struct mcs_hold **holds,
		      Mcrpc__GetReplicaListResponse **resp, uint64_t *t0)
{
	int rc;

	*t0 = mcs_now_ms();
	rc = mcs_master_get_replicas(s->master, n > 1, keys, n, true, resp);
	for (size_t j = 0; !rc && j < n; j++) {
		const Mcrpc__ReplicaList *rl = (*resp)->results[j];

		if (!rl->code && rl->hold_id &&
		    mcs_holds_add(s->holds, keys[j], rl, *t0, &holds[j]))
			holds[j] = NULL;
	}
	return rc;
}

static void drop_holds(struct mooncake_store *s, struct mcs_hold **holds,
		       size_t n)
{
	for (size_t j = 0; j < n; j++)
		if (holds[j])
			(void)mcs_holds_release(s->holds, holds[j]);
}

/* The keys of live[] whose reads outlasted their leases: read once more,
 * each under a hold. */
static void reread_held(struct mooncake_store *s, struct mcs_get_key *keys,
			const size_t *live, size_t n_live)
{
	Mcrpc__GetReplicaListResponse *resp = NULL;
	struct mcs_hold **holds = NULL;
	const char **names = NULL;
	size_t *idx = NULL, n = 0;
	uint64_t t0;

	for (size_t j = 0; j < n_live; j++)
		n += keys[live[j]].result == MC_ELEASEEXPIRED;
	if (!n)
		return;
	names = calloc(n, sizeof(*names));
	idx = calloc(n, sizeof(*idx));
	holds = calloc(n, sizeof(*holds));
	if (!names || !idx || !holds)
		goto out; /* they stay LEASE_EXPIRED */
	n = 0;
	for (size_t j = 0; j < n_live; j++) {
		if (keys[live[j]].result != MC_ELEASEEXPIRED)
			continue;
		idx[n] = live[j];
		names[n++] = keys[live[j]].key;
	}
	mc_log_debug("store",
		     "get: %zu key(s) outlasted the lease (%s, ...); "
		     "once more under holds",
		     n, names[0]);
	if (!take_holds(s, names, n, holds, &resp, &t0))
		read_lists(s, keys, idx, resp->results, n, t0, holds);
	drop_holds(s, holds, n);
out:
	mcs_master_free(resp);
	free(names);
	free(idx);
	free(holds);
}

int mcs_get_keys(struct mooncake_store *s, struct mcs_get_key *keys, size_t n,
		 bool batch)
{
	Mcrpc__GetReplicaListResponse *resp = NULL;
	const char **names = calloc(n, sizeof(*names));
	size_t *live = calloc(n, sizeof(*live));
	size_t n_live = 0;
	uint64_t t0, cap, gen;
	int rc = 0;

	if (!names || !live) {
		for (size_t i = 0; i < n; i++)
			keys[i].result = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		keys[i].result = validate(s, &keys[i], &cap);
		if (!keys[i].result)
			live[n_live++] = i;
	}
	if (s->locs && n_live)
		read_cached(s, keys, live, &n_live);
	if (!n_live)
		goto out;
	for (size_t j = 0; j < n_live; j++)
		names[j] = keys[live[j]].key;
	gen = mcs_locs_gen(s->locs);
	/* The master starts the leases between now and its answer. */
	t0 = mcs_now_ms();
	rc = mcs_master_get_replicas(s->master, batch, names, n_live, false,
				     &resp);
	if (rc) {
		for (size_t j = 0; j < n_live; j++)
			keys[live[j]].result = rc;
		goto out;
	}
	read_lists(s, keys, live, resp->results, n_live, t0, NULL);
	for (size_t j = 0; s->locs && j < n_live; j++)
		if (keys[live[j]].result > 0)
			mcs_locs_put(s->locs, keys[live[j]].key,
				     resp->results[j], t0, gen);
	reread_held(s, keys, live, n_live);
out:
	mcs_master_free(resp);
	free(names);
	free(live);
	return 0;
}

/* Read rl's object (leased from t0, held by hold if not NULL) into buf
 * through the staging buffer. */
static int64_t read_staged(struct mooncake_store *s, const char *key,
			   Mcrpc__ReplicaList *rl, uint64_t t0,
			   struct mcs_hold *hold, void *buf, size_t size)
{
	struct mcs_get_key k = { .key = key, .n_parts = 1, .trusted = true };
	uint64_t osize = rl->size;
	size_t live = 0, psize;
	void *tmp;
	int rc;

	if (rl->code || !osize || osize > size)
		return rl->code ? rl->code : osize ? -EINVAL : 0;
	rc = mcs_staging_take(s, "get", key, osize, &tmp);
	if (rc)
		return rc;
	psize = (size_t)osize;
	k.parts = &tmp;
	k.part_sizes = &psize;
	read_lists(s, &k, &live, &rl, 1, t0, &hold);
	/* buf may be CUDA device memory: te_mem_copy reaches it. */
	if (k.result > 0 && te_mem_copy(buf, tmp, (size_t)k.result))
		k.result = -EIO;
	mcs_staging_free(s->staging, tmp, (size_t)osize);
	return k.result;
}

int64_t mcs_get_staged(struct mooncake_store *s, const char *key, void *buf,
		       size_t size)
{
	Mcrpc__GetReplicaListResponse *resp = NULL;
	struct mcs_loc_hit hit;
	uint64_t t0 = mcs_now_ms(), gen;
	int64_t r;
	int rc;

	if (!mcs_key_ok(key) || !buf)
		return -EINVAL;
	if (mcs_locs_get(s->locs, key, t0, &hit)) {
		r = read_staged(s, key, &hit.rl, t0, NULL, buf, size);
		if (!hit_failed(r))
			return r;
		mcs_locs_stale(s->locs, key);
		t0 = mcs_now_ms();
	}
	gen = mcs_locs_gen(s->locs);
	rc = mcs_master_get_replicas(s->master, false, &key, 1, false, &resp);
	if (rc)
		return rc;
	r = read_staged(s, key, resp->results[0], t0, NULL, buf, size);
	if (r > 0)
		mcs_locs_put(s->locs, key, resp->results[0], t0, gen);
	mcs_master_free(resp);
	if (r == MC_ELEASEEXPIRED) { /* once more, under a hold */
		struct mcs_hold *hold = NULL;

		resp = NULL;
		if (!take_holds(s, &key, 1, &hold, &resp, &t0))
			r = read_staged(s, key, resp->results[0], t0, hold, buf,
					size);
		drop_holds(s, &hold, 1);
		mcs_master_free(resp);
	}
	return r;
}
