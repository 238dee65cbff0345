/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Follow the master's change feed and drop what the kernel cached about
 * keys that changed anywhere in the pool (put, remove, rename, evict,
 * lost) and about checkpoints published or removed (ckpt/), so names stay cached for entry_timeout yet a change shows on
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
 * keeps its inode number. kept: key names a directory that the event
 * made or changed, not removed (mkdir, attributes, a directory's rename
 * target). */
static void inval_key(struct mcfs *fs, const char *key, uint64_t version,
		      bool kept)
{
	char *name = NULL;
	struct mcfs_node *dir;
	uint64_t ino;

	if (!key || !*key || mcfs_hidden_key(key))
		return;
	dir = mcfs_node_dir_for(fs, key, &name);
	if (!name)
		return;
	if (kept && (ino = mcfs_node_dir_held(fs, dir, name))) {
		/* The kernel's entry already names this directory (this
		 * mount made it, or looked it up): only its attributes may
		 * be stale. Dropping the entry of a directory that is some
		 * process's working directory leaves that process in a
		 * dentry the kernel no longer finds by name; seen: a later
		 * rmdir of a directory made in it answered ENOENT without
		 * asking the daemon (pjdfstest, the own mkdir event of the
		 * test's directory arriving after its shell entered it). */
		fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
	} else if (!mcfs_node_bound(fs, dir, name, version)) {
		/* -ENOENT: the kernel had nothing cached; fine. */
		fuse_lowlevel_notify_inval_entry(fs->se, dir->ino, name,
						 strlen(name));
		atomic_fetch_add(&fs->n_invalidations, 1);
	}
	free(name);
}

/* A directory's events name its prefix: its entry is the name without
 * the trailing '/'. */
static void inval_path(struct mcfs *fs, const char *key, uint64_t version,
		       bool kept)
{
	size_t n = key ? strlen(key) : 0;
	char *k;

	if (!n || key[n - 1] != '/') {
		inval_key(fs, key, version, false);
		return;
	}
	k = strndup(key, n - 1);
	if (k)
		inval_key(fs, k, 0, kept);
	free(k);
}

static void on_event(void *arg, const mooncake_event_t *e)
{
	struct mcfs *fs = arg;

	switch (e->type) {
	case MOONCAKE_EV_RENAME:
		inval_path(fs, e->key, 0, false);
		inval_path(fs, e->to, e->version, true);
		break;
	case MOONCAKE_EV_MKDIR:
	case MOONCAKE_EV_ATTR:
		inval_path(fs, e->key, 0, true);
		break;
	case MOONCAKE_EV_CKPT_PUT:
	case MOONCAKE_EV_CKPT_REMOVE:
		/* ckpt/NAME: a new id is a new inode, found by a new lookup */
		if (e->key && *e->key) {
			fuse_lowlevel_notify_inval_entry(
				fs->se, fs->ckpt->ino, e->key, strlen(e->key));
			atomic_fetch_add(&fs->n_invalidations, 1);
		}
		break;
	default:
		inval_path(fs, e->key,
			   e->type == MOONCAKE_EV_PUT ? e->version : 0, false);
		break;
	}
}

/* Every cached name under kv/; of a directory the kernel holds, its
 * attributes only (see inval_key: the processes inside it keep their
 * working directory; one removed in the gap answers ENOENT to the
 * operations that reach the master). */
static void inval_all(struct mcfs *fs)
{
	struct pair {
		uint64_t parent, held;
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
			v[n].held = x->kind == MCFS_KV_DIR && x->nlookup ?
					    x->ino :
					    0;
			v[n].name = strdup(x->name);
			if (v[n].name)
				n++;
		}
done:
	pthread_mutex_unlock(&fs->itab_lock);
	for (size_t i = 0; i < n; i++) {
		if (v[i].held)
			fuse_lowlevel_notify_inval_inode(fs->se, v[i].held, -1,
							 0);
		else
			fuse_lowlevel_notify_inval_entry(fs->se, v[i].parent,
							 v[i].name,
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
			if (atomic_load(&fs->stop))
				break; /* mcfs_watch_stop() ended the poll */
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
		if (reset) {
			inval_all(fs);
			atomic_fetch_add(&fs->n_feed_resets, 1);
		}
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
	if (fs->watch_started) {
		(void)mooncake_store_watch_stop(fs->store); /* ends its poll */
		pthread_join(fs->watch_thread, NULL);
	}
	fs->watch_started = false;
}
