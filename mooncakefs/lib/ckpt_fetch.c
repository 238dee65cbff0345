/* SPDX-License-Identifier: Apache-2.0 */
/* Fetching shards from holders (see ckpt_fetch.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mc_crc32c.h"
#include "ckpt_fetch.h"
#include "ckpt_master.h"
#include "mc_log.h"
#include "mc_rpc_client.h"
#include "mc_time.h"
#include "mooncake/mc_err.h"

/* ---- connections to holders --------------------------------------------- */

struct peer {
	char *endpoint;
	struct mc_rpc_client *rpc;
	struct peer *next;
};

struct mcs_ckpt_peers {
	pthread_mutex_t lock;
	struct peer *list;
	struct mc_auth_key auth;
	bool have_auth;
	unsigned timeout_ms;
};

int mcs_ckpt_peers_new(const struct mc_auth_key *auth, unsigned timeout_ms,
		       struct mcs_ckpt_peers **out)
{
	struct mcs_ckpt_peers *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	if (auth) {
		p->auth = *auth;
		p->have_auth = true;
	}
	p->timeout_ms = timeout_ms ? timeout_ms : 30000;
	*out = p;
	return 0;
}

void mcs_ckpt_peers_free(struct mcs_ckpt_peers *p)
{
	if (!p)
		return;
	while (p->list) {
		struct peer *x = p->list;
		p->list = x->next;
		mc_rpc_client_destroy(x->rpc);
		free(x->endpoint);
		free(x);
	}
	mc_auth_key_clear(&p->auth);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static int peer_get(struct mcs_ckpt_peers *p, const char *endpoint,
		    struct mc_rpc_client **out)
{
	struct peer *x;
	int rc = 0;

	pthread_mutex_lock(&p->lock);
	for (x = p->list; x; x = x->next)
		if (!strcmp(x->endpoint, endpoint))
			break;
	if (!x) {
		x = calloc(1, sizeof(*x));
		rc = x ? mc_rpc_client_create(endpoint, p->timeout_ms,
					      &x->rpc) :
			 -ENOMEM;
		if (!rc && !(x->endpoint = strdup(endpoint)))
			rc = -ENOMEM;
		if (rc) {
			if (x && x->rpc)
				mc_rpc_client_destroy(x->rpc);
			free(x);
			x = NULL;
		} else {
			mc_rpc_client_set_busy_poll(x->rpc, 0);
			if (p->have_auth)
				mc_rpc_client_set_auth(x->rpc, &p->auth);
			x->next = p->list;
			p->list = x;
		}
	}
	pthread_mutex_unlock(&p->lock);
	*out = x ? x->rpc : NULL;
	return rc;
}

/* ---- one shard from one holder -------------------------------------------- */

/*
 * Read shard from endpoint into buf (the shard's length): 0; MC_ECHECKSUM
 * when the bytes do not match the crc, or the holder says its copy does
 * not; -ENODATA when the holder does not have it; another code when the
 * holder could not be reached or failed.
 */
static int read_shard(const struct mcs_ckpt_fetch_cfg *cfg,
		      const struct mcs_ckpt_layout *lay, uint32_t shard,
		      const char *endpoint, uint8_t *buf)
{
	const struct mcs_ckpt_shard *sh = &lay->shards[shard];
	struct mc_rpc_client *rpc;
	uint32_t crc = 0;
	int rc = peer_get(cfg->peers, endpoint, &rpc);

	for (uint32_t off = 0; !rc && off < sh->len;) {
		Mcrpc__CkptReadRequest q = MCRPC__CKPT_READ_REQUEST__INIT;
		Mcrpc__CkptReadResponse *r = NULL;
		uint32_t n = sh->len - off < MCS_CKPT_READ_MAX ?
				     sh->len - off :
				     MCS_CKPT_READ_MAX;
		q.id = lay->id;
		q.shard = shard;
		q.offset = off;
		q.length = n;
		rc = mc_rpc_call(rpc, MCRPC__METHOD__CKPT_READ, &q.base,
				 (ProtobufCMessage **)&r);
		if (rc)
			break;
		if (r->code == MC_STORE_REPLICA_NOT_FOUND)
			rc = -ENODATA;
		else if (r->code == MC_STORE_CHECKSUM_MISMATCH)
			rc = MC_ECHECKSUM;
		else if (r->code)
			rc = MC_ETRANSFER;
		else if (r->data.len != n || r->crc != lay->crcs[shard])
			rc = -EPROTO;
		if (!rc) {
			memcpy(buf + off, r->data.data, n);
			crc = mc_crc32c(crc, buf + off, n);
			off += n;
		}
		protobuf_c_message_free_unpacked(&r->base, NULL);
	}
	if (!rc && crc != lay->crcs[shard])
		rc = MC_ECHECKSUM;
	return rc;
}

static int result_of(int rc)
{
	if (!rc)
		return MCS_CKPT_FETCHED;
	/* A holder without the shard is not corrupt: it may be publishing
	 * right now, or dropping it and telling the master itself. */
	return rc == MC_ECHECKSUM || rc == -EPROTO ? MCS_CKPT_CORRUPT :
						     MCS_CKPT_UNREACHABLE;
}

/*
 * Fetch shard from the source the master named (src), into dst, and tell
 * the master how it went. buf: room for a shard (unused for memory).
 */
int mcs_ckpt_fetch_from(const struct mcs_ckpt_fetch_cfg *cfg,
			struct mcs_ckpt_served *dst, uint32_t shard,
			const Mcrpc__CkptSourceResponse *src, uint8_t *buf)
{
	const struct mcs_ckpt_layout *lay = dst->lay;
	const struct mcs_ckpt_shard *sh = &lay->shards[shard];
	uint8_t *into = mcs_ckpt_served_mem(dst, shard);
	int rc, drc;

	if (!into)
		into = buf;
	rc = read_shard(cfg, lay, shard, src->endpoint, into);
	/* Bytes not checked whole (a copy that failed its check, or cut
	 * short) do not stay in the caller's memory: another holder's
	 * replace them, or the get fails. */
	if (rc && into != buf)
		memset(into, 0, sh->len);
	if (!rc)
		rc = mcs_ckpt_served_write(dst, shard, into);
	if (!rc)
		mcs_ckpt_served_mark(dst, shard, true);
	if (rc && rc != MC_ECHECKSUM && rc != -ENODATA)
		mc_log_info("ckpt", "%s: shard %u from %s: %s", lay->name,
			    shard, src->endpoint, mc_strerror(rc));
	else if (rc)
		mc_log_warn("ckpt", "%s: shard %u from %s: %s (reported)",
			    lay->name, shard, src->endpoint, mc_strerror(rc));
	drc = src->holder.len == MCS_CLIENT_ID_LEN ?
		      mcs_ckpt_done(cfg->master, lay->id, shard,
				    src->holder.data, result_of(rc),
				    rc ? 0 : sh->len,
				    !rc && cfg->srv ?
					    mcs_ckpt_srv_endpoint(cfg->srv) :
					    NULL) :
		      -EPROTO;
	if (drc && drc != -ENOENT)
		mc_log_info("ckpt", "%s: reporting shard %u: %s", lay->name,
			    shard, mc_strerror(drc));
	return rc;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * Whether to ask the master again after rc: transport errors for a few
 * seconds (it may be restarting), and "no holder" (-ENODATA) as long as
 * the master skips a holder reported unreachable (a holder restarting,
 * or one that was still announcing what it holds), 7 s in all.
 */
static bool master_retry(int rc, unsigned *tries)
{
	return rc != -ENOENT && rc != -EINVAL && rc != -EPERM && ++*tries <= 28;
}

#define RETRY_MS 250

/* No holder left after one's copy failed its check (the master drops a
 * copy reported corrupt): the caller hears of the mismatch, -801, not of
 * a missing replica. */
static int corrupt_or(int rc, bool corrupt)
{
	return rc == -ENODATA && corrupt ? MC_ECHECKSUM : rc;
}

int mcs_ckpt_fetch_shard(const struct mcs_ckpt_fetch_cfg *cfg,
			 struct mcs_ckpt_served *dst, uint32_t shard)
{
	const struct mcs_ckpt_layout *lay = dst->lay;
	const char *exclude[MCS_CKPT_TRIES];
	char *owned[MCS_CKPT_TRIES];
	size_t nex = 0;
	uint8_t *buf = NULL;
	unsigned mtries = 0, waits = 0;
	bool corrupt = false;
	int rc = -EIO;

	if (shard >= lay->nshards)
		return -EINVAL;
	if (!mcs_ckpt_served_mem(dst, shard) &&
	    !(buf = malloc(lay->shards[shard].len)))
		return -ENOMEM;
	for (unsigned t = 0; t < MCS_CKPT_TRIES;) {
		Mcrpc__CkptSourceResponse *src = NULL;
		int src_rc = mcs_ckpt_source(cfg->master, lay->id, shard, NULL,
					     0, exclude, nex, &src);
		if (src_rc) {
			rc = src_rc;
			if (!master_retry(src_rc, &mtries))
				break;
			sleep_ms(RETRY_MS);
			continue;
		}
		if (src->retry_ms) {
			/* Every holder busy, the shard on its way to another
			 * reader: it will be a holder with room soon. */
			unsigned ms = src->retry_ms > 2000 ? 2000 :
							     src->retry_ms;
			mcs_master_free(src);
			if (++waits > 300) {
				rc = -ETIMEDOUT;
				break;
			}
			sleep_ms(ms);
			continue;
		}
		rc = mcs_ckpt_fetch_from(cfg, dst, shard, src, buf);
		corrupt |= result_of(rc) == MCS_CKPT_CORRUPT;
		if (rc && nex < MCS_CKPT_TRIES &&
		    (owned[nex] = strdup(src->endpoint)))
			exclude[nex] = owned[nex], nex++;
		mcs_master_free(src);
		if (!rc)
			break;
		t++;
	}
	for (size_t i = 0; i < nex; i++)
		free(owned[i]);
	free(buf);
	return corrupt_or(rc, corrupt);
}

/* ---- every shard, several at once ----------------------------------------- */

struct run {
	const struct mcs_ckpt_fetch_cfg *cfg;
	struct mcs_ckpt_served *dst;
	pthread_mutex_t lock;
	pthread_mutex_t report_lock; /* progress calls, one at a time */
	pthread_cond_t cond;
	uint8_t *claimed; /* held or in flight here */
	uint8_t *fails; /* per shard: failed sources */
	unsigned inflight;
	int err;
	bool corrupt; /* a copy failed its check */
	mooncake_ckpt_progress_t prog;
	char **sources; /* endpoints in use, one per worker */
};

static void report(struct run *r)
{
	mooncake_ckpt_progress_t p;
	unsigned n = r->cfg->inflight ? r->cfg->inflight : 4;

	if (!r->cfg->progress)
		return;
	/* One call at a time, each with a newer figure than the last: the
	 * snapshot is taken under the same lock as the call. */
	pthread_mutex_lock(&r->report_lock);
	pthread_mutex_lock(&r->lock);
	p = r->prog;
	p.sources = 0;
	for (unsigned i = 0; i < n; i++) {
		bool seen = false;
		if (!r->sources[i])
			continue;
		for (unsigned k = 0; k < i && !seen; k++)
			seen = r->sources[k] &&
			       !strcmp(r->sources[k], r->sources[i]);
		p.sources += !seen;
	}
	pthread_mutex_unlock(&r->lock);
	r->cfg->progress(r->cfg->arg, &p);
	pthread_mutex_unlock(&r->report_lock);
}

struct worker {
	struct run *r;
	unsigned idx;
};

/* One worker: ask for a shard nobody here has or fetches, fetch it,
 * until every shard is held or the run failed. */
static void *work(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->r;
	const struct mcs_ckpt_layout *lay = r->dst->lay;
	size_t bl = mcs_bitmap_len(lay->nshards);
	uint8_t *have = malloc(bl ? bl : 1);
	uint8_t *buf = malloc(lay->shard_size);
	unsigned mtries = 0;

	pthread_mutex_lock(&r->lock);
	if (!have || !buf)
		r->err = r->err ? r->err : -ENOMEM;
	while (!r->err) {
		Mcrpc__CkptSourceResponse *src = NULL;
		uint32_t shard;
		int rc;

		memcpy(have, r->claimed, bl);
		pthread_mutex_unlock(&r->lock);
		rc = mcs_ckpt_source(r->cfg->master, lay->id, -1, have, bl,
				     NULL, 0, &src);
		pthread_mutex_lock(&r->lock);
		if (rc) {
			if (!master_retry(rc, &mtries)) {
				r->err = r->err ? r->err : rc;
				break;
			}
			/* Not under the lock: the other workers go on. */
			pthread_mutex_unlock(&r->lock);
			sleep_ms(RETRY_MS);
			pthread_mutex_lock(&r->lock);
			continue;
		}
		mtries = 0;
		if (src->done || src->retry_ms) {
			unsigned wait = src->retry_ms ? src->retry_ms : 200;
			bool done = src->done;
			mcs_master_free(src);
			if (done && !r->inflight)
				break;
			if (done) {
				/* The rest is in flight here: wait for it (a
				 * failure hands its shard back). */
				pthread_cond_wait(&r->cond, &r->lock);
				continue;
			}
			pthread_mutex_unlock(&r->lock);
			sleep_ms(wait > 2000 ? 2000 : wait);
			pthread_mutex_lock(&r->lock);
			continue;
		}
		shard = src->shard;
		if (shard >= lay->nshards || mcs_bit(r->claimed, shard)) {
			/* Claimed meanwhile (or nonsense): hand it back. */
			pthread_mutex_unlock(&r->lock);
			if (shard < lay->nshards &&
			    src->holder.len == MCS_CLIENT_ID_LEN &&
			    mcs_ckpt_done(r->cfg->master, lay->id, shard,
					  src->holder.data, MCS_CKPT_FETCHED, 0,
					  NULL))
				mc_log_debug("ckpt",
					     "%s: handing shard %u "
					     "back failed",
					     lay->name, shard);
			mcs_master_free(src);
			pthread_mutex_lock(&r->lock);
			continue;
		}
		mcs_bit_set(r->claimed, shard);
		r->inflight++;
		free(r->sources[w->idx]);
		r->sources[w->idx] = strdup(src->endpoint);
		pthread_mutex_unlock(&r->lock);
		report(r);
		rc = mcs_ckpt_fetch_from(r->cfg, r->dst, shard, src, buf);
		mcs_master_free(src);
		pthread_mutex_lock(&r->lock);
		/* Its source stays counted until the next claim: the report
		 * below is the one a progress line is most often made of. */
		r->inflight--;
		if (rc) {
			mcs_bit_clear(r->claimed, shard);
			r->corrupt |= result_of(rc) == MCS_CKPT_CORRUPT;
			r->prog.retries++;
			if (++r->fails[shard] >= MCS_CKPT_TRIES)
				r->err = r->err ? r->err : rc;
		} else {
			r->prog.shards++;
			r->prog.bytes += lay->shards[shard].len;
		}
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
		report(r);
		pthread_mutex_lock(&r->lock);
	}
	free(r->sources[w->idx]);
	r->sources[w->idx] = NULL;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	free(have);
	free(buf);
	return NULL;
}

int mcs_ckpt_fetch_all(const struct mcs_ckpt_fetch_cfg *cfg,
		       struct mcs_ckpt_served *dst)
{
	const struct mcs_ckpt_layout *lay = dst->lay;
	unsigned n = cfg->inflight ? cfg->inflight : 4;
	size_t bl = mcs_bitmap_len(lay->nshards);
	struct run r = { .cfg = cfg, .dst = dst };
	pthread_t *t = calloc(n, sizeof(*t));
	struct worker *w = calloc(n, sizeof(*w));
	unsigned started = 0;

	r.claimed = calloc(bl ? bl : 1, 1);
	r.fails = calloc(lay->nshards ? lay->nshards : 1, 1);
	r.sources = calloc(n, sizeof(*r.sources));
	if (!t || !w || !r.claimed || !r.fails || !r.sources) {
		r.err = -ENOMEM;
		goto out;
	}
	pthread_mutex_init(&r.lock, NULL);
	pthread_mutex_init(&r.report_lock, NULL);
	pthread_cond_init(&r.cond, NULL);
	pthread_mutex_lock(&dst->lock);
	memcpy(r.claimed, dst->have, bl);
	pthread_mutex_unlock(&dst->lock);
	r.prog.total = lay->total;
	r.prog.nshards = lay->nshards;
	for (uint32_t i = 0; i < lay->nshards; i++) {
		if (mcs_bit(r.claimed, i)) {
			r.prog.shards++;
			r.prog.bytes += lay->shards[i].len;
		}
	}
	report(&r);
	for (unsigned i = 0; i < n; i++) {
		w[i].r = &r;
		w[i].idx = i;
		if (pthread_create(&t[i], NULL, work, &w[i]))
			break;
		started++;
	}
	if (!started)
		r.err = -EAGAIN;
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	pthread_cond_destroy(&r.cond);
	pthread_mutex_destroy(&r.report_lock);
	pthread_mutex_destroy(&r.lock);
out:
	free(t);
	free(w);
	free(r.claimed);
	free(r.fails);
	free(r.sources);
	return corrupt_or(r.err, r.corrupt);
}
