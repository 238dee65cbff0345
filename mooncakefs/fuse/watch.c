/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Follow the master's change feed and drop what the kernel cached about
 * keys that changed anywhere in the pool (put, remove, rename, evict,
 * lost), so names stay cached for entry_timeout yet a change shows on
 * every mount within about one feed round trip (the feed is a long poll:
 * events arrive as they happen). A feed reset (events lost, master
 * restarted) drops every cached name.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mc_log.h"
#include "mcfs.h"

/* version: of the object now under key (0: unknown). The kernel's entry
 * of a created node of this mount already bound to it stays: the file
 * keeps its inode number. */
static void inval_key(struct mcfs *fs, const char *key, uint64_t version)
{
	char *name = NULL;
	struct mcfs_node *dir;

	if (!key || !*key || mcfs_hidden_key(key))
		return;
	dir = mcfs_node_dir_for(fs, key, &name);
	if (!name)
		return;
	/* -ENOENT: the kernel had nothing cached; fine. */
	if (!version || !mcfs_node_bound(fs, dir, name, version)) {
		fuse_lowlevel_notify_inval_entry(fs->se, dir->ino, name,
						 strlen(name));
		atomic_fetch_add(&fs->n_invalidations, 1);
	}
	free(name);
}

/* A directory's events name its prefix: its entry is the name without
 * the trailing '/'. */
static void inval_path(struct mcfs *fs, const char *key, uint64_t version)
{
	size_t n = key ? strlen(key) : 0;
	char *k;

	if (!n || key[n - 1] != '/') {
		inval_key(fs, key, version);
		return;
	}
	k = strndup(key, n - 1);
	if (k)
		inval_key(fs, k, 0);
	free(k);
}

static void on_event(void *arg, const mooncake_event_t *e)
{
	struct mcfs *fs = arg;

	if (e->type == MOONCAKE_EV_RENAME) {
		inval_path(fs, e->key, 0);
		inval_path(fs, e->to, e->version);
	} else {
		inval_path(fs, e->key,
			   e->type == MOONCAKE_EV_PUT ? e->version : 0);
	}
}

/* Every cached name under kv/. */
static void inval_all(struct mcfs *fs)
{
	struct pair {
		uint64_t parent;
		char *name;
	} *v = NULL;
	size_t n = 0, cap = 0;

	pthread_mutex_lock(&fs->itab_lock);
	for (size_t b = 0; b < fs->n_buckets; b++)
		for (struct mcfs_node *x = fs->by_ino[b]; x; x = x->ino_next) {
			if (!x->parent ||
			    (x->kind != MCFS_KV_FILE &&
			     x->kind != MCFS_KV_DIR) ||
			    x == fs->kv)
				continue;
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 256;
				struct pair *nv = realloc(v, nc * sizeof(*nv));
				if (!nv)
					goto done;
				v = nv;
				cap = nc;
			}
			v[n].parent = x->parent->ino;
			v[n].name = strdup(x->name);
			if (v[n].name)
				n++;
		}
done:
	pthread_mutex_unlock(&fs->itab_lock);
	for (size_t i = 0; i < n; i++) {
		fuse_lowlevel_notify_inval_entry(fs->se, v[i].parent, v[i].name,
						 strlen(v[i].name));
		free(v[i].name);
	}
	free(v);
}

static void *watch_main(void *arg)
{
	struct mcfs *fs = arg;
	uint64_t epoch = 0, after = 0;
	bool failing = false;

	while (!atomic_load(&fs->stop)) {
		bool reset = false;

		mcfs_node_pre_sweep(fs);
		int rc = mooncake_store_watch(fs->store, &epoch, &after, 1000,
					      on_event, fs, &reset);
		if (rc < 0) {
			if (!failing)
				mc_log_warn(
					"mcfs",
					"change feed: %s; caches expire "
					"by their timeouts until it is back",
					mooncake_store_strerror(rc));
			failing = true;
			struct timespec ts = { 0, 200 * 1000 * 1000 };
			nanosleep(&ts, NULL);
			continue;
		}
		if (failing)
			mc_log_notice("mcfs", "change feed back");
		failing = false;
		if (reset)
			inval_all(fs);
	}
	return NULL;
}

int mcfs_watch_start(struct mcfs *fs)
{
	int rc = pthread_create(&fs->watch_thread, NULL, watch_main, fs);

	if (!rc)
		fs->watch_started = true;
	return -rc;
}

void mcfs_watch_stop(struct mcfs *fs)
{
	atomic_store(&fs->stop, true);
	if (fs->watch_started)
		pthread_join(fs->watch_thread, NULL);
	fs->watch_started = false;
}
