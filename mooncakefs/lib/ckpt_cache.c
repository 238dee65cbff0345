/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checkpoints read on demand (include/mooncake/ckpt.h, "reads on demand";
 * docs/design.md, "Checkpoints"): what the mount's ckpt/ stands on. A
 * checkpoint's files are laid out sparse under cache_dir/<id>/; a read
 * fetches the shards it touches that are not there yet (one fetch per
 * shard however many readers wait for it), and starts fetching the next
 * shard of the file ahead of a sequential reader. Opening a file also
 * starts fetching in the background, shards in the master's order
 * (rarest first), so readers that open the same files at once fetch
 * different shards and soon from each other instead of all from the
 * publisher: the whole checkpoint when it takes at most half the cache
 * (programs load every file of a model, one after the other), else the
 * file. Everything fetched is served to other readers while the handle
 * lives.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_int.h"
#include "ckpt_master.h"
#include "mc_log.h"
#include "mc_time.h"
#include "mooncake/mc_err.h"

/* Read-ahead fetches running at once per handle. */
#define READAHEAD_MAX 2

struct mcs_ckpt_cached {
	uint64_t id;
	char root[PATH_MAX];
	struct mcs_ckpt_served *sv;
	uint8_t *fetching; /* shards being fetched (bitmap) */
	unsigned users; /* open files and read-ahead fetches */
	uint64_t held; /* bytes of the shards fetched */
	uint64_t used_ms; /* last open or read (LRU) */
	uint8_t *prefetching; /* files being fetched whole (bitmap) */
	bool prefetching_all; /* the whole checkpoint is being fetched */
	/* sv is what this handle serves already (published here, or
	 * fetched whole): read from there, nothing of it in the cache, and
	 * forgotten when its last file closes. */
	bool borrowed;
	struct mcs_ckpt_cached *next;
};

struct mooncake_ckpt_file {
	struct mooncake_ckpt *c;
	struct mcs_ckpt_cached *k;
	uint32_t file;
	uint64_t size;
	uint32_t last_shard; /* read-ahead: the last shard read */
};

/* A fresh directory for checkpoint lay under the cache: what a previous
 * process left there (the same layout) is removed first. */
static int cache_root(struct mooncake_ckpt *c,
		      const struct mcs_ckpt_layout *lay, char *root)
{
	char idname[32];
	struct stat st;
	int rc;

	snprintf(idname, sizeof(idname), "%" PRIu64, lay->id);
	if (mcs_ckpt_join(root, c->opt.cache_dir, idname))
		return -ENAMETOOLONG;
	rc = mcs_ckpt_mkdirs(c->opt.cache_dir);
	if (rc) {
		mc_log_err("ckpt", "cache_dir %s: %s", c->opt.cache_dir,
			   mc_strerror(rc));
		return rc;
	}
	if (!lstat(root, &st)) {
		mcs_ckpt_undo(lay, root);
		if (rmdir(root)) {
			mc_log_err("ckpt",
				   "%s holds files of no checkpoint: remove "
				   "them, or use another cache_dir",
				   root);
			return -ENOTEMPTY;
		}
	}
	if (mkdir(root, 0700)) {
		mc_log_err("ckpt", "%s: %s", root, mc_strerror(-errno));
		return -errno;
	}
	return mcs_ckpt_lay_out(lay, root);
}

static void drop_cached(struct mooncake_ckpt *c, struct mcs_ckpt_cached *k);

/* The cached checkpoint id, made on first use (under cache_lock). */
static int cached_get(struct mooncake_ckpt *c, uint64_t id,
		      struct mcs_ckpt_cached **out)
{
	Mcrpc__CkptInfoResponse *r = NULL;
	struct mcs_ckpt_layout *lay = NULL;
	struct mcs_ckpt_cached *k;
	int rc;

	for (k = c->cached; k; k = k->next) {
		if (k->id == id) {
			*out = k;
			return 0;
		}
	}
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->sv = mcs_ckpt_srv_find(c->srv, id);
	if (k->sv) {
		/* A checkpoint this handle serves (a mount's sealed one)
		 * cannot be announced again (-EEXIST): its reads were
		 * EEXIST on the mount that published it. */
		k->id = id;
		k->borrowed = true;
		k->fetching =
			calloc(mcs_bitmap_len(k->sv->lay->nshards) + 1, 1);
		k->prefetching = calloc(
			mcs_bitmap_len((uint32_t)k->sv->lay->nfiles) + 1, 1);
		if (!k->fetching || !k->prefetching) {
			drop_cached(c, k);
			return -ENOMEM;
		}
		k->next = c->cached;
		c->cached = k;
		*out = k;
		return 0;
	}
	free(k);
	rc = mcs_ckpt_info(c->store->master, NULL, id, false, &r);
	if (!rc)
		rc = r->ckpt ? mcs_ckpt_layout_from(r->ckpt, &lay) : -EPROTO;
	mcs_master_free(r);
	if (!rc && lay->link)
		rc = -EINVAL;
	k = rc ? NULL : calloc(1, sizeof(*k));
	if (!rc && !k)
		rc = -ENOMEM;
	if (!rc) {
		k->id = id;
		k->fetching = calloc(mcs_bitmap_len(lay->nshards) + 1, 1);
		k->prefetching =
			calloc(mcs_bitmap_len((uint32_t)lay->nfiles) + 1, 1);
		rc = k->fetching && k->prefetching ?
			     cache_root(c, lay, k->root) :
			     -ENOMEM;
	}
	if (!rc) {
		k->sv = mcs_ckpt_served_new(lay, k->root, true);
		if (k->sv)
			lay = NULL;
		rc = k->sv ? mcs_ckpt_announce(c, k->sv) : -ENOMEM;
	}
	if (rc) {
		if (k && k->sv) {
			mcs_ckpt_undo(k->sv->lay, k->root);
			(void)rmdir(k->root);
			mcs_ckpt_served_put(k->sv);
		}
		if (k) {
			free(k->fetching);
			free(k->prefetching);
		}
		free(k);
		mcs_ckpt_layout_free(lay);
		return rc;
	}
	k->next = c->cached;
	c->cached = k;
	*out = k;
	return 0;
}

/* Under cache_lock: forget cached checkpoint k (no user left). */
static void drop_cached(struct mooncake_ckpt *c, struct mcs_ckpt_cached *k)
{
	struct mcs_ckpt_cached **pp;

	for (pp = &c->cached; *pp && *pp != k; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = k->next;
	if (k->borrowed) {
		mcs_ckpt_served_put(k->sv);
		free(k->fetching);
		free(k->prefetching);
		free(k);
		return;
	}
	mcs_ckpt_unserve(c, k->sv);
	mcs_ckpt_undo(k->sv->lay, k->root);
	(void)rmdir(k->root);
	mcs_ckpt_served_put(k->sv);
	free(k->fetching);
	free(k->prefetching);
	free(k);
}

/* Under cache_lock: room for need more bytes within cache_max_bytes,
 * made by dropping whole checkpoints nobody reads (least recently read
 * first, never keep). Over the cap when nothing can go (logged). */
static void make_room(struct mooncake_ckpt *c, struct mcs_ckpt_cached *keep,
		      uint64_t need)
{
	uint64_t max = c->opt.cache_max_bytes, total;

	if (!max)
		return;
	for (;;) {
		struct mcs_ckpt_cached *lru = NULL;
		total = 0;
		for (struct mcs_ckpt_cached *k = c->cached; k; k = k->next) {
			total += k->held;
			if (k != keep && !k->users && k->held &&
			    (!lru || k->used_ms < lru->used_ms))
				lru = k;
		}
		if (total + need <= max)
			return;
		if (!lru)
			break;
		mc_log_info("ckpt",
			    "cache: dropping checkpoint %" PRIu64 " (%" PRIu64
			    " bytes, not read for %" PRIu64 " ms) for room",
			    lru->id, lru->held, mc_mono_ms() - lru->used_ms);
		drop_cached(c, lru);
	}
	mc_log_warn("ckpt",
		    "cache: %" PRIu64
		    " bytes held, over cache_max_bytes %" PRIu64
		    ": every checkpoint in it is being read",
		    total + need, max);
}

/* Make sure shard is held, fetching it unless another thread is (then
 * wait for that). Called and returns with cache_lock held. */
static int ensure(struct mooncake_ckpt *c, struct mcs_ckpt_cached *k,
		  uint32_t shard)
{
	for (;;) {
		struct mcs_ckpt_fetch_cfg f;
		bool have;
		int rc;

		pthread_mutex_lock(&k->sv->lock);
		have = mcs_bit(k->sv->have, shard);
		pthread_mutex_unlock(&k->sv->lock);
		if (have)
			return 0;
		if (mcs_bit(k->fetching, shard)) {
			pthread_cond_wait(&c->cache_cond, &c->cache_lock);
			continue;
		}
		mcs_bit_set(k->fetching, shard);
		make_room(c, k, k->sv->lay->shards[shard].len);
		pthread_mutex_unlock(&c->cache_lock);
		mcs_ckpt_fetch_cfg(c, &f, NULL, NULL);
		rc = mcs_ckpt_fetch_shard(&f, k->sv, shard);
		pthread_mutex_lock(&c->cache_lock);
		mcs_bit_clear(k->fetching, shard);
		if (!rc)
			k->held += k->sv->lay->shards[shard].len;
		pthread_cond_broadcast(&c->cache_cond);
		return rc;
	}
}

struct ahead {
	struct mooncake_ckpt *c;
	struct mcs_ckpt_cached *k;
	uint32_t shard;
};

static void *ahead_main(void *arg)
{
	struct ahead *a = arg;
	struct mooncake_ckpt *c = a->c;

	pthread_mutex_lock(&c->cache_lock);
	(void)ensure(c, a->k, a->shard);
	a->k->users--;
	c->readahead--;
	pthread_cond_broadcast(&c->cache_cond);
	pthread_mutex_unlock(&c->cache_lock);
	free(a);
	return NULL;
}

/* Under cache_lock: fetch shard in the background if nobody has it or
 * fetches it, and read-ahead has room. */
static void read_ahead(struct mooncake_ckpt *c, struct mcs_ckpt_cached *k,
		       uint32_t shard)
{
	struct ahead *a;
	pthread_attr_t attr;
	pthread_t t;
	bool have;

	if (c->readahead >= READAHEAD_MAX || mcs_bit(k->fetching, shard))
		return;
	pthread_mutex_lock(&k->sv->lock);
	have = mcs_bit(k->sv->have, shard);
	pthread_mutex_unlock(&k->sv->lock);
	if (have || !(a = malloc(sizeof(*a))))
		return;
	a->c = c;
	a->k = k;
	a->shard = shard;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	k->users++;
	c->readahead++;
	if (pthread_create(&t, &attr, ahead_main, a)) {
		k->users--;
		c->readahead--;
		free(a);
	}
	pthread_attr_destroy(&attr);
}

#define ALL_FILES UINT32_MAX

struct prefetch {
	struct mooncake_ckpt *c;
	struct mcs_ckpt_cached *k;
	uint32_t file; /* ALL_FILES: the whole checkpoint */
};

/* Under cache_lock: have = shards held or being fetched, and every
 * shard outside the file (so the master offers only the file's). */
static void prefetch_have(struct mcs_ckpt_cached *k, uint32_t file,
			  uint8_t *have, size_t bl)
{
	const struct mcs_ckpt_layout *lay = k->sv->lay;
	uint32_t first = 0, end = lay->nshards;

	if (file != ALL_FILES) {
		first = lay->files[file].first_shard;
		end = first + lay->files[file].nshards;
	}
	memset(have, 0xff, bl);
	pthread_mutex_lock(&k->sv->lock);
	for (uint32_t i = first; i < end; i++)
		if (!mcs_bit(k->sv->have, i) && !mcs_bit(k->fetching, i))
			mcs_bit_clear(have, i);
	pthread_mutex_unlock(&k->sv->lock);
}

/* One worker fetching a file whole, a shard at a time, the master
 * choosing which (rarest first, least busy holder). */
static void *prefetch_main(void *arg)
{
	struct prefetch *p = arg;
	struct mooncake_ckpt *c = p->c;
	struct mcs_ckpt_cached *k = p->k;
	const struct mcs_ckpt_layout *lay = k->sv->lay;
	size_t bl = mcs_bitmap_len(lay->nshards);
	uint8_t *have = malloc(bl ? bl : 1);
	uint8_t *buf = malloc(lay->shard_size);
	struct mcs_ckpt_fetch_cfg f;
	unsigned fails = 0;

	mcs_ckpt_fetch_cfg(c, &f, NULL, NULL);
	pthread_mutex_lock(&c->cache_lock);
	while (have && buf && !c->cache_closing && fails < MCS_CKPT_TRIES) {
		Mcrpc__CkptSourceResponse *src = NULL;
		uint32_t shard;
		int rc;

		prefetch_have(k, p->file, have, bl);
		pthread_mutex_unlock(&c->cache_lock);
		/* The handle's close waits for this thread: the store
		 * (closed after it) is still there. */
		rc = mcs_ckpt_source(c->store->master, lay->id, -1, have, bl,
				     NULL, 0, &src);
		pthread_mutex_lock(&c->cache_lock);
		if (rc || src->done || src->retry_ms) {
			/* Done, or nothing to do now: reads fetch on demand
			 * what is left; a busy pool is asked again. */
			unsigned wait = !rc && !src->done ? src->retry_ms : 0;
			mcs_master_free(src);
			if (!wait)
				break;
			pthread_mutex_unlock(&c->cache_lock);
			usleep((wait > 2000 ? 2000 : wait) * 1000u);
			pthread_mutex_lock(&c->cache_lock);
			continue;
		}
		shard = src->shard;
		if (shard >= lay->nshards || mcs_bit(k->fetching, shard) ||
		    mcs_bit(k->sv->have, shard)) {
			pthread_mutex_unlock(&c->cache_lock);
			if (shard < lay->nshards &&
			    src->holder.len == MCS_CLIENT_ID_LEN &&
			    mcs_ckpt_done(c->store->master, lay->id, shard,
					  src->holder.data, MCS_CKPT_FETCHED, 0,
					  NULL))
				mc_log_debug("ckpt", "handing a source back");
			mcs_master_free(src);
			pthread_mutex_lock(&c->cache_lock);
			continue;
		}
		mcs_bit_set(k->fetching, shard);
		make_room(c, k, lay->shards[shard].len);
		pthread_mutex_unlock(&c->cache_lock);
		rc = mcs_ckpt_fetch_from(&f, k->sv, shard, src, buf);
		mcs_master_free(src);
		pthread_mutex_lock(&c->cache_lock);
		mcs_bit_clear(k->fetching, shard);
		if (!rc)
			k->held += lay->shards[shard].len;
		else
			fails++;
		pthread_cond_broadcast(&c->cache_cond);
	}
	if (p->file == ALL_FILES)
		k->prefetching_all = false;
	else
		mcs_bit_clear(k->prefetching, p->file);
	k->users--;
	c->readahead--;
	pthread_cond_broadcast(&c->cache_cond);
	pthread_mutex_unlock(&c->cache_lock);
	free(have);
	free(buf);
	free(p);
	return NULL;
}

/* Under cache_lock: fetch file (or, when it fits half the cache, the
 * whole checkpoint) in the background, unless that runs already
 * (inflight workers, at most one per shard). */
static void prefetch(struct mooncake_ckpt *c, struct mcs_ckpt_cached *k,
		     uint32_t file)
{
	const struct mcs_ckpt_layout *lay = k->sv->lay;
	unsigned n = c->opt.inflight ? c->opt.inflight : 4;
	uint32_t shards = lay->files[file].nshards;
	pthread_attr_t attr;

	if (!c->opt.cache_max_bytes || lay->total <= c->opt.cache_max_bytes / 2)
		file = ALL_FILES;
	if (file == ALL_FILES)
		shards = lay->nshards;
	if (!shards || c->cache_closing ||
	    (file == ALL_FILES ? k->prefetching_all :
				 mcs_bit(k->prefetching, file)))
		return;
	if (n > shards)
		n = shards;
	if (file == ALL_FILES)
		k->prefetching_all = true;
	else
		mcs_bit_set(k->prefetching, file);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (unsigned i = 0; i < n; i++) {
		struct prefetch *p = malloc(sizeof(*p));
		pthread_t t;
		if (!p)
			break;
		p->c = c;
		p->k = k;
		p->file = file;
		k->users++;
		c->readahead++;
		if (pthread_create(&t, &attr, prefetch_main, p)) {
			k->users--;
			c->readahead--;
			free(p);
			break;
		}
	}
	pthread_attr_destroy(&attr);
}

int mooncake_ckpt_file_open(mooncake_ckpt_t *c, uint64_t id, const char *path,
			    mooncake_ckpt_file_t **out)
{
	struct mcs_ckpt_cached *k = NULL;
	mooncake_ckpt_file_t *f;
	long i = -1;
	int rc;

	if (!c || !path || !out)
		return MC_STORE_INVALID_PARAMS;
	*out = NULL;
	if (!c->opt.cache_dir || !*c->opt.cache_dir) {
		mc_log_err("ckpt", "reads on demand need a cache_dir");
		return MC_STORE_INVALID_PARAMS;
	}
	rc = mcs_enter(c->store);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->cache_lock);
	rc = cached_get(c, id, &k);
	if (!rc) {
		i = mcs_ckpt_layout_find(k->sv->lay, path);
		if (i < 0 || !S_ISREG(k->sv->lay->files[i].mode))
			rc = i < 0 ? -ENOENT : -EINVAL;
	}
	f = rc ? NULL : calloc(1, sizeof(*f));
	if (!rc && !f)
		rc = -ENOMEM;
	if (!rc) {
		f->c = c;
		f->k = k;
		f->file = (uint32_t)i;
		f->size = k->sv->lay->files[i].size;
		f->last_shard = UINT32_MAX;
		k->users++;
		k->used_ms = mc_mono_ms();
		if (!k->borrowed)
			prefetch(c, k, f->file);
		*out = f;
	}
	pthread_mutex_unlock(&c->cache_lock);
	mcs_leave(c->store);
	return mc_err_to_store(rc);
}

int64_t mooncake_ckpt_file_pread(mooncake_ckpt_file_t *f, void *buf, size_t len,
				 uint64_t off)
{
	struct mooncake_ckpt *c;
	const struct mcs_ckpt_layout *lay;
	const struct mcs_ckpt_file *file;
	uint64_t end, done = 0;
	int rc;

	if (!f || (!buf && len))
		return MC_STORE_INVALID_PARAMS;
	c = f->c;
	lay = f->k->sv->lay;
	file = &lay->files[f->file];
	if (off >= f->size)
		return 0;
	end = off + len < f->size && off + len >= off ? off + len : f->size;
	rc = mcs_enter(c->store);
	if (rc)
		return rc;
	while (!rc && off + done < end) {
		uint64_t at = off + done;
		uint32_t k = (uint32_t)(at / lay->shard_size);
		uint32_t shard = file->first_shard + k;
		uint64_t in = at - (uint64_t)k * lay->shard_size;
		uint64_t n = lay->shards[shard].len - in;
		if (n > end - at)
			n = end - at;
		pthread_mutex_lock(&c->cache_lock);
		f->k->used_ms = mc_mono_ms();
		rc = ensure(c, f->k, shard);
		/* Sequential: the next shard of the file on its way. */
		if (!rc && k + 1 < file->nshards &&
		    (f->last_shard == UINT32_MAX || shard >= f->last_shard))
			read_ahead(c, f->k, shard + 1);
		f->last_shard = shard;
		pthread_mutex_unlock(&c->cache_lock);
		if (!rc)
			rc = mcs_ckpt_served_read(f->k->sv, shard, in,
						  (uint32_t)n,
						  (char *)buf + done);
		if (!rc)
			done += n;
	}
	mcs_leave(c->store);
	return rc && !done ? mc_err_to_store(rc) : (int64_t)done;
}

void mooncake_ckpt_file_close(mooncake_ckpt_file_t *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->c->cache_lock);
	if (!--f->k->users && f->k->borrowed)
		drop_cached(f->c, f->k);
	pthread_mutex_unlock(&f->c->cache_lock);
	free(f);
}

void mcs_ckpt_cache_free(struct mooncake_ckpt *c)
{
	pthread_mutex_lock(&c->cache_lock);
	c->cache_closing = true;
	while (c->readahead)
		pthread_cond_wait(&c->cache_cond, &c->cache_lock);
	while (c->cached) {
		if (c->cached->users)
			mc_log_warn("ckpt",
				    "checkpoint %" PRIu64 ": %u files still "
				    "open at close",
				    c->cached->id, c->cached->users);
		drop_cached(c, c->cached);
	}
	pthread_mutex_unlock(&c->cache_lock);
}
