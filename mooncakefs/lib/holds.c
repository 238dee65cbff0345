/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hold renewer (see holds.h): a table of the holds of open objects and one
 * thread that renews them all per interval. A hold released while a
 * renewal is in flight is only unlinked then; the renewer frees it once it
 * no longer looks at its snapshot.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "holds.h"
#include "master_client.h"
#include "mc_log.h"
#include "mc_time.h"
#include "mooncake/mc_err.h"
#include "util.h"

#define RENEW_MAX_MS 5000u
#define DEFAULT_LEASE_MS 10000u
#define HOLD_TTL_LEASES 3u /* the master's hold TTL, in lease TTLs */
#define RPC_CHUNK 4096u /* hold ids per LeaseRenew/LeaseRelease */

struct mcs_holds {
	struct mcs_master *m;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct mcs_hold **v; /* registered holds; v[i]->slot == i */
	size_t n, cap;
	struct mcs_hold *dead; /* released during a renewal */
	bool renewing, started, stop, outage;
	unsigned interval_ms;
	pthread_t thread;
	/* the renewer's snapshot, reused across rounds */
	uint64_t *ids;
	struct mcs_hold **refs;
	int *res;
	size_t snap_cap;
};

int mcs_holds_create(struct mcs_master *m, struct mcs_holds **out)
{
	struct mcs_holds *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->m = m;
	h->interval_ms = RENEW_MAX_MS;
	pthread_mutex_init(&h->lock, NULL);
	mc_cond_init_mono(&h->cond);
	*out = h;
	return 0;
}

static void hold_free(struct mcs_hold *x)
{
	if (!x)
		return;
	free(x->key);
	free(x->locs);
	free(x);
}

/* Record rl's identity (size and replica locations) in x. */
static int set_identity(struct mcs_hold *x, const char *key,
			const Mcrpc__ReplicaList *rl)
{
	x->key = strdup(key);
	x->locs = calloc(rl->n_replicas ? rl->n_replicas : 1, sizeof(*x->locs));
	if (!x->key || !x->locs)
		return -ENOMEM;
	x->size = rl->size;
	for (size_t i = 0; i < rl->n_replicas; i++) {
		const Mcrpc__Replica *r = rl->replicas[i];
		struct mcs_hold_loc *l = &x->locs[x->n_locs];
		if (r->segment_id.len != sizeof(l->segment_id))
			continue;
		memcpy(l->segment_id, r->segment_id.data,
		       sizeof(l->segment_id));
		l->address = r->address;
		x->n_locs++;
	}
	return 0;
}

enum same { SAME, OTHER, NOT_YET };

/* Does rl name the memory x protects? NOT_YET: no replica readable now. */
static enum same same_memory(const struct mcs_hold *x,
			     const Mcrpc__ReplicaList *rl)
{
	size_t found = 0;

	if (rl->size != x->size)
		return OTHER;
	if (!rl->n_replicas)
		return x->size ? NOT_YET : SAME;
	for (size_t i = 0; i < rl->n_replicas; i++) {
		const Mcrpc__Replica *r = rl->replicas[i];
		bool known = false;
		for (size_t j = 0; j < x->n_locs && !known; j++)
			known = r->segment_id.len == 16 &&
				!memcmp(r->segment_id.data,
					x->locs[j].segment_id, 16) &&
				r->address == x->locs[j].address;
		if (!known)
			return OTHER;
		found++;
	}
	return found ? SAME : NOT_YET;
}

bool mcs_hold_valid(struct mcs_hold *x, uint64_t now_ms)
{
	return !atomic_load(&x->lost) &&
	       now_ms < atomic_load(&x->confirmed_ms) + x->ttl_ms;
}

size_t mcs_holds_count(struct mcs_holds *h)
{
	size_t n;

	pthread_mutex_lock(&h->lock);
	n = h->n;
	pthread_mutex_unlock(&h->lock);
	return n;
}

/* Grow the snapshot arrays to n; caller holds the lock. */
static int snap_reserve(struct mcs_holds *h, size_t n)
{
	uint64_t *ids;
	struct mcs_hold **refs;
	int *res;

	if (n <= h->snap_cap)
		return 0;
	ids = realloc(h->ids, n * sizeof(*ids));
	if (ids)
		h->ids = ids;
	refs = realloc(h->refs, n * sizeof(*refs));
	if (refs)
		h->refs = refs;
	res = realloc(h->res, n * sizeof(*res));
	if (res)
		h->res = res;
	if (!ids || !refs || !res)
		return -ENOMEM;
	h->snap_cap = n;
	return 0;
}

/* One LeaseRenew/LeaseRelease per RPC_CHUNK ids; res gets every result. */
static void lease_calls(struct mcs_master *m, bool renew, const uint64_t *ids,
			size_t n, int *res)
{
	for (size_t off = 0; off < n; off += RPC_CHUNK) {
		size_t cnt = n - off < RPC_CHUNK ? n - off : RPC_CHUNK;
		int rc = renew ? mcs_master_lease_renew(m, ids + off, cnt,
							res + off) :
				 mcs_master_lease_release(m, ids + off, cnt,
							  res + off);

		for (size_t i = 0; rc && i < cnt; i++)
			res[off + i] = rc;
	}
}

static void lose(struct mcs_hold *x, const char *why)
{
	if (!atomic_exchange(&x->lost, true))
		mc_log_info("store",
			    "hold of open object '%s' is gone (%s): its reads "
			    "now fail with LEASE_EXPIRED",
			    x->key, why);
}

/*
 * The master no longer knows x (it expired, or the master restarted):
 * take a new hold when the key still names the same memory. Called
 * without the lock while renewing (x stays allocated meanwhile).
 */
static void retake(struct mcs_holds *h, struct mcs_hold *x)
{
	Mcrpc__GetReplicaListResponse *resp = NULL;
	const char *key = x->key;
	uint64_t t0 = mcs_now_ms();
	const Mcrpc__ReplicaList *rl;
	enum same same = OTHER;
	int rc, res;

	if (atomic_load(&x->lost))
		return;
	rc = mcs_master_get_replicas(h->m, false, &key, 1, true, &resp);
	if (rc) {
		mcs_master_free(resp);
		return; /* try again at the next renewal */
	}
	rl = resp->results[0];
	if (!rl->code)
		same = same_memory(x, rl);
	pthread_mutex_lock(&h->lock);
	/* Only a hold still valid may be taken again: one that lapsed may
	 * name memory freed and reused meanwhile, even at the same place. */
	if (same == SAME && rl->hold_id && !x->dead && mcs_hold_valid(x, t0)) {
		mc_log_debug("store", "hold of '%s' taken again: %llu -> %llu",
			     x->key, (unsigned long long)x->id,
			     (unsigned long long)rl->hold_id);
		x->id = rl->hold_id;
		atomic_store(&x->confirmed_ms, t0);
		pthread_mutex_unlock(&h->lock);
		mcs_master_free(resp);
		return;
	}
	pthread_mutex_unlock(&h->lock);
	if (rl->hold_id &&
	    mcs_master_lease_release(h->m, &rl->hold_id, 1, &res))
		mc_log_debug("store", "release hold %llu",
			     (unsigned long long)rl->hold_id);
	if (rl->code == MC_STORE_OBJECT_NOT_FOUND)
		lose(x, "the object was removed");
	else if (!rl->code && same == OTHER)
		lose(x, "the key names another object now");
	else if (!mcs_hold_valid(x, mcs_now_ms()))
		lose(x, "it lapsed before it could be taken again");
	/* Otherwise (replicas not back yet): again at the next renewal. */
	mcs_master_free(resp);
}

/* Renew every hold once; called and returns with the lock held. */
static void renew_all(struct mcs_holds *h)
{
	size_t n = h->n, failed = 0, n_gone = 0;
	uint64_t t0;
	int first = 0;

	if (!n)
		return;
	if (snap_reserve(h, n)) {
		mc_log_debug("store", "renew holds: out of memory");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		h->refs[i] = h->v[i];
		h->ids[i] = h->v[i]->id;
	}
	h->renewing = true;
	pthread_mutex_unlock(&h->lock);

	t0 = mcs_now_ms();
	lease_calls(h->m, true, h->ids, n, h->res);

	pthread_mutex_lock(&h->lock);
	for (size_t i = 0; i < n; i++) {
		struct mcs_hold *x = h->refs[i];
		int r = h->res[i];

		if (x->dead)
			continue;
		if (!r) {
			atomic_store(&x->confirmed_ms, t0);
		} else if (r == -ENOENT) {
			h->refs[n_gone++] = x; /* before i: no overlap */
		} else if (!failed++) {
			first = r;
		}
	}
	if (n_gone) {
		pthread_mutex_unlock(&h->lock);
		for (size_t i = 0; i < n_gone; i++)
			retake(h, h->refs[i]);
		pthread_mutex_lock(&h->lock);
	}
	if (failed && !h->outage)
		mc_log_warn("store", "renew %zu of %zu holds: %s (retrying)",
			    failed, n, mc_strerror(first));
	else if (!failed && h->outage)
		mc_log_notice("store", "holds renewed again");
	h->outage = failed != 0;
	while (h->dead) {
		struct mcs_hold *x = h->dead;
		h->dead = x->next_dead;
		hold_free(x);
	}
	h->renewing = false;
}

static void *renewer(void *arg)
{
	struct mcs_holds *h = arg;
	uint64_t last = mcs_now_ms();
	struct timespec ts;

	pthread_mutex_lock(&h->lock);
	while (!h->stop) {
		/* Recomputed on every wake: the interval may have shrunk. */
		uint64_t now = mcs_now_ms(), due = last + h->interval_ms;

		if (now >= due) {
			last = now;
			renew_all(h);
			continue;
		}
		ts = mc_mono_deadline(due - now);
		(void)pthread_cond_timedwait(&h->cond, &h->lock, &ts);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

/* Caller holds the lock. */
static int start_thread(struct mcs_holds *h)
{
	int rc = mcs_thread_start(&h->thread, renewer, h);

	if (rc)
		return rc;
	h->started = true;
	return 0;
}

int mcs_holds_add(struct mcs_holds *h, const char *key,
		  const Mcrpc__ReplicaList *rl, uint64_t t0_ms,
		  struct mcs_hold **out)
{
	struct mcs_hold *x = calloc(1, sizeof(*x));
	uint64_t lease_ms = rl->lease_ttl_ms;
	int rc = 0, res = 0;

	if (!x || set_identity(x, key, rl)) {
		rc = -ENOMEM;
		goto failed;
	}
	if (!lease_ms)
		lease_ms = DEFAULT_LEASE_MS;
	x->id = rl->hold_id;
	x->ttl_ms = lease_ms * HOLD_TTL_LEASES;
	atomic_store(&x->confirmed_ms, t0_ms);
	pthread_mutex_lock(&h->lock);
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 16;
		struct mcs_hold **v = realloc(h->v, cap * sizeof(*v));

		if (!v) {
			rc = -ENOMEM;
			goto out;
		}
		h->v = v;
		h->cap = cap;
	}
	if (!h->started)
		rc = start_thread(h);
	if (rc)
		goto out;
	/* Renew at least once per lease TTL: a hold then survives two
	 * renewals that fail. */
	if (lease_ms < h->interval_ms) {
		h->interval_ms = (unsigned)lease_ms;
		pthread_cond_broadcast(&h->cond);
	}
	x->slot = h->n;
	h->v[h->n++] = x;
	*out = x;
	x = NULL;
out:
	pthread_mutex_unlock(&h->lock);
	if (!rc)
		return 0;
failed:
	hold_free(x);
	/* Not left to expire: the object's memory would wait for it. */
	if (mcs_master_lease_release(h->m, &rl->hold_id, 1, &res))
		mc_log_debug("store", "%s: release hold %llu", key,
			     (unsigned long long)rl->hold_id);
	return rc;
}

int mcs_holds_release(struct mcs_holds *h, struct mcs_hold *x)
{
	uint64_t id;
	int res = 0, rc;

	pthread_mutex_lock(&h->lock);
	id = x->id;
	h->v[x->slot] = h->v[--h->n];
	h->v[x->slot]->slot = x->slot;
	if (h->renewing) {
		x->dead = true;
		x->next_dead = h->dead;
		h->dead = x;
	} else {
		hold_free(x);
	}
	pthread_mutex_unlock(&h->lock);
	rc = mcs_master_lease_release(h->m, &id, 1, &res);
	return rc ? rc : res;
}

void mcs_holds_destroy(struct mcs_holds *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->lock);
	h->stop = true;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
	if (h->started)
		pthread_join(h->thread, NULL);
	/* Objects left open: their holds end now, not 30 s from now. */
	if (h->n && !snap_reserve(h, h->n)) {
		for (size_t i = 0; i < h->n; i++)
			h->ids[i] = h->v[i]->id;
		lease_calls(h->m, false, h->ids, h->n, h->res);
		mc_log_info("store", "released %zu holds of objects left open",
			    h->n);
	}
	for (size_t i = 0; i < h->n; i++)
		hold_free(h->v[i]);
	free(h->v);
	free(h->ids);
	free(h->refs);
	free(h->res);
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->lock);
	free(h);
}
