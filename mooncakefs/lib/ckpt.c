/* SPDX-License-Identifier: Apache-2.0 */
/* The checkpoint handle, list, info, link, remove and unserve
 * (include/mooncake/ckpt.h; publishing in ckpt_publish.c, fetching in
 * ckpt_get.c). */
#include <errno.h>
#include <limits.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckpt_int.h"
#include "ckpt_master.h"
#include "mc_log.h"
#include "mc_parse.h"
#include "mc_time.h"
#include "util.h"

#define API(rc) mc_err_to_store(rc)

static void reannounce(void *arg, struct mcs_ckpt_served *sv)
{
	struct mooncake_ckpt *c = arg;
	struct mcs_ckpt_served *now;
	int rc = 0;

	pthread_mutex_lock(&c->alock);
	now = mcs_ckpt_srv_find(c->srv, sv->lay->id);
	if (now == sv) /* still served */
		rc = mcs_ckpt_announce_held(c, sv);
	mcs_ckpt_served_put(now);
	pthread_mutex_unlock(&c->alock);

	if (rc && rc != -ENOENT)
		mc_log_debug("ckpt", "%s: re-announcing: %s", sv->lay->name,
			     mc_strerror(rc));
}

/* Tell the master again, now and then, what this handle holds. */
static void *keeper_main(void *arg)
{
	struct mooncake_ckpt *c = arg;

	pthread_mutex_lock(&c->klock);
	while (!c->stopping) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += MCS_CKPT_REANNOUNCE_MS / 1000;
		while (!c->stopping &&
		       pthread_cond_timedwait(&c->kcond, &c->klock, &ts) == 0)
			;
		if (c->stopping)
			break;
		pthread_mutex_unlock(&c->klock);
		if (!mcs_enter(c->store)) {
			mcs_ckpt_srv_each(c->srv, reannounce, c);
			mcs_leave(c->store);
		}
		pthread_mutex_lock(&c->klock);
	}
	pthread_mutex_unlock(&c->klock);
	return NULL;
}

static int keeper_start(struct mooncake_ckpt *c)
{
	pthread_mutex_init(&c->klock, NULL);
	pthread_mutex_init(&c->alock, NULL);
	mc_cond_init_mono(&c->kcond);
	if (pthread_create(&c->keeper, NULL, keeper_main, c))
		return -EAGAIN;
	c->keeper_started = true;
	return 0;
}

static void keeper_stop(struct mooncake_ckpt *c)
{
	if (!c->keeper_started)
		return;
	pthread_mutex_lock(&c->klock);
	c->stopping = true;
	pthread_cond_signal(&c->kcond);
	pthread_mutex_unlock(&c->klock);
	pthread_join(c->keeper, NULL);
	c->keeper_started = false;
}

int mooncake_ckpt_open(mooncake_store_t store,
		       const mooncake_ckpt_options_t *options,
		       mooncake_ckpt_t **out)
{
	struct mooncake_ckpt *c;
	struct mc_auth_key key;
	bool have_key = false;
	char host[256], err[256] = "";
	struct mcs_ckpt_srv_cfg sc = { 0 };
	int port = 0, rc;

	if (!out)
		return MC_STORE_INVALID_PARAMS;
	*out = NULL;
	rc = mcs_enter(store);
	if (rc)
		return rc;
	c = calloc(1, sizeof(*c));
	if (!c) {
		rc = -ENOMEM;
		goto out;
	}
	c->store = store;
	pthread_mutex_init(&c->cache_lock, NULL);
	pthread_cond_init(&c->cache_cond, NULL);
	if (options)
		c->opt = *options;
	if (c->opt.cache_dir && *c->opt.cache_dir &&
	    !(c->opt.cache_dir = c->cache_dir = strdup(c->opt.cache_dir))) {
		rc = -ENOMEM;
		goto out;
	}
	c->opt.serve_host = NULL; /* used below only, not kept */
	if (c->opt.shard_size && (c->opt.shard_size < MCS_CKPT_SHARD_MIN ||
				  c->opt.shard_size > MCS_CKPT_SHARD_MAX)) {
		mc_log_err(
			"ckpt",
			"shard_size %llu: expected 64 KiB to 1 GiB (0: 64 MiB)",
			(unsigned long long)c->opt.shard_size);
		rc = -EINVAL;
		goto out;
	}
	if (options && options->serve_host && *options->serve_host) {
		snprintf(host, sizeof(host), "%s", options->serve_host);
	} else if (mc_parse_hostport(store->name ? store->name :
						   store->cfg.local_hostname,
				     host, sizeof(host), 0, &port)) {
		rc = -EINVAL;
		goto out;
	}
	rc = mc_auth_key_load_opt(store->cfg.auth_token_file, &have_key, &key,
				  err, sizeof(err));
	if (rc) {
		mc_log_err("ckpt", "auth_token_file: %s", err);
		goto out;
	}
	sc.host = host;
	sc.port = c->opt.serve_port;
	sc.auth = have_key ? &key : NULL;
	sc.master = store->master;
	rc = mcs_ckpt_srv_start(&sc, &c->srv, err, sizeof(err));
	if (rc)
		mc_log_err("ckpt", "holder server on %s: %s", host, err);
	if (!rc)
		rc = mcs_ckpt_peers_new(have_key ? &key : NULL,
					c->opt.timeout_ms, &c->peers);
	if (!rc)
		rc = keeper_start(c);
	if (have_key)
		mc_auth_key_clear(&key);
out:
	mcs_leave(store);
	if (rc) {
		if (c) {
			keeper_stop(c);
			mcs_ckpt_srv_stop(c->srv);
			mcs_ckpt_peers_free(c->peers);
			pthread_mutex_destroy(&c->cache_lock);
			pthread_cond_destroy(&c->cache_cond);
			free(c->cache_dir);
			free(c);
		}
		return API(rc);
	}
	*out = c;
	return 0;
}

static void drop_holder(void *arg, struct mcs_ckpt_served *sv)
{
	struct mooncake_ckpt *c = arg;
	int rc = mcs_ckpt_hold(c->store->master, sv->lay->id,
			       mcs_ckpt_srv_endpoint(c->srv), NULL, 0, true);

	if (rc && rc != -ENOENT)
		mc_log_warn("ckpt",
			    "%s: telling the master we stop serving: %s",
			    sv->lay->name, mc_strerror(rc));
}

void mooncake_ckpt_close(mooncake_ckpt_t *c)
{
	/* A child of fork(): the threads to stop are the parent's (joining
	 * them hung for good), as is what they serve; nothing is freed. */
	if (!c || mcs_store_forked(c->store))
		return;
	keeper_stop(c);
	if (!mcs_enter(c->store)) {
		mcs_ckpt_cache_free(c);
		mcs_ckpt_srv_each(c->srv, drop_holder, c);
		mcs_leave(c->store);
	}
	mcs_ckpt_srv_stop(c->srv);
	mcs_ckpt_peers_free(c->peers);
	pthread_mutex_destroy(&c->alock);
	pthread_mutex_destroy(&c->klock);
	pthread_cond_destroy(&c->kcond);
	pthread_mutex_destroy(&c->cache_lock);
	pthread_cond_destroy(&c->cache_cond);
	free(c->cache_dir);
	free(c);
}

const char *mooncake_ckpt_endpoint(const mooncake_ckpt_t *c)
{
	return c ? mcs_ckpt_srv_endpoint(c->srv) : NULL;
}

static int info_layout(struct mooncake_ckpt *c, const char *name,
		       Mcrpc__CkptInfoResponse **resp,
		       struct mcs_ckpt_layout **out)
{
	int rc = mcs_ckpt_info(c->store->master, name, 0, false, resp);

	if (rc)
		return rc;
	if (!(*resp)->ckpt)
		return -EPROTO;
	rc = mcs_ckpt_layout_from((*resp)->ckpt, out);
	if (rc == -EPROTO)
		mc_log_err("ckpt",
			   "%s: the master's record does not check out "
			   "(bad path, size or checksums): refused",
			   name);
	return rc;
}

int mcs_ckpt_lookup(struct mooncake_ckpt *c, const char *name,
		    struct mcs_ckpt_layout **out)
{
	Mcrpc__CkptInfoResponse *r = NULL;
	int rc;

	*out = NULL;
	if (!mc_ckpt_name_ok(name))
		return -EINVAL;
	rc = info_layout(c, name, &r, out);
	if (!rc && (*out)->link) {
		char *target = strdup((*out)->link);
		mcs_ckpt_layout_free(*out);
		*out = NULL;
		mcs_master_free(r);
		r = NULL;
		rc = !target		      ? -ENOMEM :
		     !mc_ckpt_name_ok(target) ? -ENOENT :
						info_layout(c, target, &r, out);
		if (!rc && (*out)->link) {
			mcs_ckpt_layout_free(*out);
			*out = NULL;
			rc = -ELOOP;
		}
		free(target);
	}
	mcs_master_free(r);
	return rc;
}

int mcs_ckpt_announce_held(struct mooncake_ckpt *c, struct mcs_ckpt_served *sv)
{
	size_t bl = mcs_bitmap_len(sv->lay->nshards);
	uint8_t *map = malloc(bl ? bl : 1);
	bool any = false;
	int rc;

	if (!map)
		return -ENOMEM;
	pthread_mutex_lock(&sv->lock);
	for (size_t i = 0; i < bl; i++) {
		map[i] = sv->have[i];
		any |= map[i] != 0;
	}
	pthread_mutex_unlock(&sv->lock);
	rc = any ? mcs_ckpt_hold(c->store->master, sv->lay->id,
				 mcs_ckpt_srv_endpoint(c->srv), map, bl,
				 false) :
		   0;
	free(map);
	return rc;
}

int mcs_ckpt_announce(struct mooncake_ckpt *c, struct mcs_ckpt_served *sv)
{
	int rc = mcs_ckpt_srv_add(c->srv, sv);

	return rc ? rc : mcs_ckpt_announce_held(c, sv);
}

void mcs_ckpt_fetch_cfg(struct mooncake_ckpt *c, struct mcs_ckpt_fetch_cfg *f,
			mooncake_ckpt_progress_fn progress, void *arg)
{
	memset(f, 0, sizeof(*f));
	f->master = c->store->master;
	f->peers = c->peers;
	f->srv = c->srv;
	f->inflight = c->opt.inflight;
	f->progress = progress;
	f->arg = arg;
}

int mooncake_ckpt_link(mooncake_ckpt_t *c, const char *name, const char *target,
		       bool replace)
{
	Mcrpc__Ckpt ck = MCRPC__CKPT__INIT;
	uint64_t id;
	int rc;

	if (!c || !mc_ckpt_name_ok(name) || !mc_ckpt_name_ok(target))
		return MC_STORE_INVALID_PARAMS;
	rc = mcs_enter(c->store);
	if (rc)
		return rc;
	ck.name = (char *)name;
	ck.link = (char *)target;
	rc = mcs_ckpt_create(c->store->master, &ck, NULL, replace, &id);
	mcs_leave(c->store);
	return API(rc);
}

void mcs_ckpt_unserve(struct mooncake_ckpt *c, struct mcs_ckpt_served *sv)
{
	pthread_mutex_lock(&c->alock);
	if (!mcs_ckpt_srv_remove(c->srv, sv->lay->id))
		drop_holder(c, sv);
	pthread_mutex_unlock(&c->alock);
}

/* fn on the checkpoint name served here, inside the handle: its code,
 * or -ENOENT (as a store code) when name is not served here. */
static int on_served(mooncake_ckpt_t *c, const char *name, const void *arg,
		     int (*fn)(struct mooncake_ckpt *c,
			       struct mcs_ckpt_served *sv, const void *arg))
{
	struct mcs_ckpt_served *sv;
	int rc;

	if (!c || !name)
		return MC_STORE_INVALID_PARAMS;
	rc = mcs_enter(c->store);
	if (rc)
		return rc;
	sv = mcs_ckpt_srv_find_name(c->srv, name);
	rc = sv ? fn(c, sv, arg) : -ENOENT;
	mcs_ckpt_served_put(sv);
	mcs_leave(c->store);
	return API(rc);
}

static int unserve_one(struct mooncake_ckpt *c, struct mcs_ckpt_served *sv,
		       const void *arg)
{
	(void)arg;
	mcs_ckpt_unserve(c, sv);
	return 0;
}

int mooncake_ckpt_unserve(mooncake_ckpt_t *c, const char *name)
{
	return on_served(c, name, NULL, unserve_one);
}

/* arg: the directory it must be served from (not another of that name). */
static int own_root(struct mooncake_ckpt *c, struct mcs_ckpt_served *sv,
		    const void *arg)
{
	(void)c;
	if (!sv->root || !arg || strcmp(sv->root, arg))
		return -ENOENT;
	pthread_mutex_lock(&sv->lock);
	sv->owns_root = true;
	pthread_mutex_unlock(&sv->lock);
	return 0;
}

int mooncake_ckpt_hand_over(mooncake_ckpt_t *c, const char *name,
			    const char *dir)
{
	char real[PATH_MAX];

	/* Served from its real path (publish_dir). */
	if (!dir || !realpath(dir, real))
		return MC_STORE_INVALID_PARAMS;
	return on_served(c, name, real, own_root);
}

int mooncake_ckpt_remove(mooncake_ckpt_t *c, const char *name)
{
	struct mcs_ckpt_served *sv;
	int rc;

	if (!c || !mc_ckpt_name_ok(name))
		return MC_STORE_INVALID_PARAMS;
	rc = mcs_enter(c->store);
	if (rc)
		return rc;
	rc = mcs_ckpt_remove(c->store->master, name);
	sv = rc ? NULL : mcs_ckpt_srv_find_name(c->srv, name);
	if (sv) { /* the master dropped every holder record with it */
		pthread_mutex_lock(&c->alock);
		(void)mcs_ckpt_srv_remove(c->srv, sv->lay->id);
		pthread_mutex_unlock(&c->alock);
		mcs_ckpt_served_put(sv);
	}
	mcs_leave(c->store);
	return API(rc);
}

int64_t mooncake_ckpt_list(mooncake_ckpt_t *c, const char *prefix,
			   void (*fn)(void *arg,
				      const mooncake_ckpt_entry_t *e),
			   void *arg)
{
	char *after = NULL;
	int64_t n = 0;
	int rc;

	if (!c)
		return MC_STORE_INVALID_PARAMS;
	rc = mcs_enter(c->store);
	if (rc)
		return rc;
	for (;;) {
		Mcrpc__CkptListResponse *r = NULL;
		bool more;
		rc = mcs_ckpt_list(c->store->master, prefix, after, 0, &r);
		if (rc)
			break;
		for (size_t i = 0; i < r->n_ckpts; i++) {
			const Mcrpc__Ckpt *k = r->ckpts[i];
			mooncake_ckpt_entry_t e = {
				.name = k->name,
				.link = k->link[0] ? k->link : NULL,
				.total_size = k->total_size,
				.files = k->nfiles,
				.shards = k->shards,
				.holders = k->holders,
				.lost_shards = k->lost_shards,
				.created_ns = k->created_ns,
				.id = k->id,
			};
			if (fn)
				fn(arg, &e);
			n++;
		}
		more = r->truncated && r->n_ckpts;
		free(after);
		after = more ? strdup(r->ckpts[r->n_ckpts - 1]->name) : NULL;
		mcs_master_free(r);
		if (!more)
			break;
		if (!after) {
			rc = -ENOMEM;
			break;
		}
	}
	free(after);
	mcs_leave(c->store);
	return rc ? API(rc) : n;
}

static json_t *holders_json(const Mcrpc__Ckpt *k)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < k->n_holder_list; i++) {
		const Mcrpc__CkptHolder *h = k->holder_list[i];
		char id[2 * MCS_CLIENT_ID_LEN + 1] = "";
		for (size_t b = 0;
		     b < h->client_id.len && b < MCS_CLIENT_ID_LEN; b++)
			snprintf(id + 2 * b, 3, "%02x", h->client_id.data[b]);
		json_array_append_new(
			a,
			json_pack("{s:s, s:s, s:b, s:I, s:I, s:I}", "client",
				  id, "endpoint", h->endpoint, "publisher",
				  h->publisher, "shards", (json_int_t)h->shards,
				  "active", (json_int_t)h->active,
				  "served_bytes", (json_int_t)h->served_bytes));
	}
	return a;
}

static json_t *files_json(const Mcrpc__Ckpt *k)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < k->n_files; i++) {
		const Mcrpc__CkptFile *f = k->files[i];
		json_t *o = json_pack("{s:s, s:I, s:I, s:I}", "path", f->path,
				      "mode", (json_int_t)f->mode, "size",
				      (json_int_t)f->size, "mtime_ns",
				      (json_int_t)f->mtime_ns);
		if (o && f->link[0])
			json_object_set_new(o, "link", json_string(f->link));
		json_array_append_new(a, o);
	}
	return a;
}

int mooncake_ckpt_info(mooncake_ckpt_t *c, const char *name, char **json)
{
	Mcrpc__CkptInfoResponse *r = NULL;
	json_t *o = NULL;
	int rc;

	if (!c || !json || !mc_ckpt_name_ok(name))
		return MC_STORE_INVALID_PARAMS;
	*json = NULL;
	rc = mcs_enter(c->store);
	if (rc)
		return rc;
	rc = mcs_ckpt_info(c->store->master, name, 0, true, &r);
	if (!rc && !r->ckpt)
		rc = -EPROTO;
	if (!rc) {
		const Mcrpc__Ckpt *k = r->ckpt;
		o = json_pack(
			"{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}",
			"name", k->name, "id", (json_int_t)k->id, "shard_size",
			(json_int_t)k->shard_size, "total_size",
			(json_int_t)k->total_size, "shards",
			(json_int_t)k->shards, "holders",
			(json_int_t)k->holders, "lost_shards",
			(json_int_t)k->lost_shards, "created_ns",
			(json_int_t)k->created_ns, "files", files_json(k),
			"holder_list", holders_json(k));
		if (o && k->link[0])
			json_object_set_new(o, "link", json_string(k->link));
		*json = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
		if (!*json)
			rc = -ENOMEM;
	}
	json_decref(o);
	mcs_master_free(r);
	mcs_leave(c->store);
	return API(rc);
}

int64_t mooncake_ckpt_files(mooncake_ckpt_t *c, const char *name, uint64_t *id,
			    void (*fn)(void *arg,
				       const mooncake_ckpt_dirent_t *e),
			    void *arg)
{
	Mcrpc__CkptInfoResponse *r = NULL;
	struct mcs_ckpt_layout *lay = NULL;
	int64_t n = 0;
	int rc;

	if (!c || !mc_ckpt_name_ok(name))
		return MC_STORE_INVALID_PARAMS;
	rc = mcs_enter(c->store);
	if (rc)
		return rc;
	rc = info_layout(c, name, &r, &lay);
	mcs_master_free(r);
	if (!rc && lay->link)
		rc = -EINVAL;
	if (!rc && id)
		*id = lay->id;
	for (size_t i = 0; !rc && i < lay->nfiles; i++) {
		const struct mcs_ckpt_file *f = &lay->files[i];
		mooncake_ckpt_dirent_t e = {
			.path = f->path,
			.mode = f->mode,
			.size = f->size,
			.mtime_ns = f->mtime_ns,
			.link = f->link,
		};
		if (fn)
			fn(arg, &e);
		n++;
	}
	mcs_ckpt_layout_free(lay);
	mcs_leave(c->store);
	return rc ? mc_err_to_store(rc) : n;
}
