/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ckpt/: checkpoints shared peer to peer (include/mooncake/ckpt.h;
 * docs/design.md, "Checkpoints"), read-only.
 *   ckpt/NAME/...   a checkpoint's files, directories and symlinks, with
 *                   their sizes, modes (write bits off) and times
 *   ckpt/LINK       a top-level link (ckpt/latest -> llama-8b)
 * Reads fetch the shards they touch from the checkpoint's holders (the
 * next shard ahead of a sequential reader), keep them in the cache
 * directory (ckpt_cache=) and serve them to other readers while mounted.
 * Nodes are bound to the checkpoint's id, so a name published again is a
 * new inode and the kernel's cached pages of the old one are never shown
 * for it (files are immutable: their pages stay cached).
 * rm -r ckpt/NAME unpublishes NAME for every mount: entries inside go
 * one by one without effect, the directory's removal is the unpublish.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "ckpt_layout.h"
#include "mc_log.h"
#include "mc_ratelimit.h"
#include "mcfs.h"
#include "mooncake/ckpt.h"
#include "mooncake/mc_err.h"

struct ent {
	char *path, *link;
	uint32_t mode;
	uint64_t size;
	int64_t mtime_ns;
};

/* A checkpoint's entries, sorted by path; kept while mounted (small:
 * names and sizes only). */
struct tree {
	uint64_t id;
	int64_t created_ns;
	struct ent *v;
	size_t n, cap;
	struct tree *next;
};

struct mcfs_ckpt {
	pthread_mutex_t lock;
	mooncake_ckpt_t *h; /* opened on first use (after the pool joined) */
	char *cache; /* what reads fetched (the library's cache_dir) */
	char *pub; /* staged checkpoints (ckpt_stage.c) */
	char *cache_parent; /* the directory the cache is made in */
	struct tree *trees;
	struct mc_ratelimit said; /* the cache cannot be made: logged */
};

int mcfs_ckpt_init(struct mcfs *fs)
{
	/* An empty segment_name= is unset, as for the library (it named
	 * the cache's base itself, and the cleanup below emptied every
	 * mount's cache on the host). */
	const char *seg = fs->o.segment_name && *fs->o.segment_name ?
				  fs->o.segment_name :
			  fs->default_segment ? fs->default_segment :
						"mount";
	const char *base = fs->o.ckpt_cache; /* set by main.c */
	struct mcfs_ckpt *ck = calloc(1, sizeof(*ck));
	size_t n;

	if (!ck)
		return -ENOMEM;
	n = strlen(base) + strlen(seg) + 2;
	ck->cache = malloc(n);
	if (!ck->cache) {
		free(ck);
		return -ENOMEM;
	}
	/* One directory per mount: two mounts never share what they hold. */
	snprintf(ck->cache, n, "%s/%s", base, seg);
	for (char *c = ck->cache + strlen(base) + 1; *c; c++)
		if (*c == '/')
			*c = '_';
	ck->cache_parent = strdup(base);
	ck->pub = malloc(n + 4);
	if (!ck->pub || !ck->cache_parent) {
		free(ck->pub);
		free(ck->cache_parent);
		free(ck->cache);
		free(ck);
		return -ENOMEM;
	}
	snprintf(ck->pub, n + 4, "%s.pub", ck->cache);
	/* What a mount that died fetched or staged: not anyone's now. */
	mcfs_cstage_rm_tree(ck->cache);
	mcfs_cstage_rm_tree(ck->pub);
	pthread_mutex_init(&ck->lock, NULL);
	fs->ck = ck;
	return 0;
}

static void tree_free(struct tree *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->v[i].path);
		free(t->v[i].link);
	}
	free(t->v);
	free(t);
}

void mcfs_ckpt_fini(struct mcfs *fs)
{
	struct mcfs_ckpt *ck = fs->ck;

	if (!ck)
		return;
	/* Stops serving; what was fetched is removed with the cache, what
	 * this mount staged or sealed with its pub/ directory. */
	mooncake_ckpt_close(ck->h);
	mcfs_cstage_rm_tree(ck->cache);
	mcfs_cstage_rm_tree(ck->pub);
	free(ck->pub);
	while (ck->trees) {
		struct tree *t = ck->trees;
		ck->trees = t->next;
		tree_free(t);
	}
	pthread_mutex_destroy(&ck->lock);
	free(ck->cache);
	free(ck->cache_parent);
	free(ck);
	fs->ck = NULL;
}

const char *mcfs_ckpt_pub(struct mcfs *fs)
{
	return fs->ck->pub;
}

int mcfs_ckpt_pub_make(struct mcfs *fs)
{
	return mcs_ckpt_mkdirs(fs->ck->pub);
}

/* The handle, opened on first use: 0 or -errno. */
int mcfs_ckpt_handle(struct mcfs *fs, mooncake_ckpt_t **out)
{
	struct mcfs_ckpt *ck = fs->ck;
	int rc = mcfs_wait_ready(fs);

	if (rc)
		return rc;
	pthread_mutex_lock(&ck->lock);
	if (!ck->h) {
		mooncake_ckpt_options_t o = {
			.cache_dir = ck->cache,
			.cache_max_bytes = fs->o.ckpt_cache_size,
		};
		struct statvfs sv;
		int made = mcs_ckpt_mkdirs(ck->cache);

		if (made) {
			/* Said once a minute: every ckpt/ call meets it. */
			if (mc_ratelimit_ok(&ck->said, 60000, NULL))
				mc_log_err(
					"mcfs",
					"checkpoints: cache %s: %s "
					"(-o ckpt_cache=DIR chooses another)",
					ck->cache, mc_strerror(made));
			pthread_mutex_unlock(&ck->lock);
			*out = NULL;
			return made == -EROFS ? -EROFS : -EACCES;
		}
		if (!o.cache_max_bytes && !statvfs(ck->cache_parent, &sv))
			o.cache_max_bytes =
				(uint64_t)sv.f_blocks * sv.f_frsize / 2;
		rc = mooncake_ckpt_open(fs->store, &o, &ck->h);
		if (rc)
			mc_log_err("mcfs", "checkpoints (cache %s): %s",
				   ck->cache, mooncake_store_strerror(rc));
		rc = rc ? mcfs_errno(rc) : 0;
	}
	*out = ck->h;
	pthread_mutex_unlock(&ck->lock);
	return rc;
}

static void add_ent(void *arg, const mooncake_ckpt_dirent_t *e)
{
	struct tree *t = arg;
	struct ent *x;

	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 16;
		struct ent *v = realloc(t->v, cap * sizeof(*v));
		if (!v)
			return; /* short: checked by the caller */
		t->v = v;
		t->cap = cap;
	}
	x = &t->v[t->n];
	x->path = strdup(e->path);
	x->link = e->link ? strdup(e->link) : NULL;
	if (!x->path || (e->link && !x->link)) {
		free(x->path);
		free(x->link);
		return;
	}
	x->mode = e->mode;
	x->size = e->size;
	x->mtime_ns = e->mtime_ns;
	t->n++;
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct ent *)a)->path,
		      ((const struct ent *)b)->path);
}

/* The tree of the checkpoint name now published (want: the id the
 * caller's node is bound to, 0 any): NULL and *rc when there is none, or
 * it is another id. */
static struct tree *tree_of(struct mcfs *fs, const char *name, uint64_t want,
			    int *rc)
{
	struct mcfs_ckpt *ck = fs->ck;
	mooncake_ckpt_t *h;
	struct tree *t;
	uint64_t id = 0;
	int64_t n;

	if (want) {
		pthread_mutex_lock(&ck->lock);
		for (t = ck->trees; t && t->id != want; t = t->next)
			;
		pthread_mutex_unlock(&ck->lock);
		if (t)
			return t;
	}
	*rc = mcfs_ckpt_handle(fs, &h);
	if (*rc)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t) {
		*rc = -ENOMEM;
		return NULL;
	}
	n = mooncake_ckpt_files(h, name, &id, add_ent, t);
	if (n < 0 || (size_t)n != t->n || (want && id != want)) {
		*rc = n < 0		? mcfs_errno((int)n) :
		      (size_t)n != t->n ? -ENOMEM :
					  -ENOENT;
		tree_free(t);
		return NULL;
	}
	if (t->n > 1) /* t->v is NULL for an empty checkpoint */
		qsort(t->v, t->n, sizeof(*t->v), by_path);
	t->id = id;
	pthread_mutex_lock(&ck->lock);
	for (struct tree *x = ck->trees; x; x = x->next) {
		if (x->id == id) { /* another thread was first */
			pthread_mutex_unlock(&ck->lock);
			tree_free(t);
			return x;
		}
	}
	t->next = ck->trees;
	ck->trees = t;
	pthread_mutex_unlock(&ck->lock);
	return t;
}

/* The entry at path, or the first under path + "/" (*implicit: a
 * directory with no entry of its own); NULL when neither. */
static const struct ent *find(const struct tree *t, const char *path,
			      bool *implicit)
{
	size_t lo = 0, hi = t->n, pl = strlen(path);

	*implicit = false;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (strcmp(t->v[mid].path, path) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < t->n && !strcmp(t->v[lo].path, path))
		return &t->v[lo];
	/* Entries under path/ sort after path and after every path that
	 * extends it with a byte below '/'. */
	for (size_t i = lo; i < t->n; i++) {
		int c = strncmp(t->v[i].path, path, pl);
		if (c > 0)
			break;
		if (!c && t->v[i].path[pl] == '/') {
			*implicit = true;
			return &t->v[i];
		}
	}
	return NULL;
}

/* The checkpoint's name of a node's key ("NAME" or "NAME/PATH"), and its
 * PATH ("" for the checkpoint itself). */
static void split_key(const char *key, char *name, size_t len,
		      const char **path)
{
	const char *slash = strchr(key, '/');
	size_t n = slash ? (size_t)(slash - key) : strlen(key);

	if (n >= len)
		n = len - 1;
	memcpy(name, key, n);
	name[n] = 0;
	*path = slash ? slash + 1 : "";
}

static mooncake_fs_attr_t attr_of(uint32_t mode, int64_t mtime_ns)
{
	mooncake_fs_attr_t a = { .mode = mode,
				 .mtime_ns = mtime_ns,
				 .ctime_ns = mtime_ns,
				 .atime_ns = mtime_ns,
				 .flags = MOONCAKE_ATTR_ATIME_SET |
					  MOONCAKE_ATTR_MTIME_SET |
					  MOONCAKE_ATTR_CTIME_SET };
	return a;
}

void mcfs_ckpt_fill_attr(const struct mcfs_node *n, const mooncake_fs_attr_t *a,
			 struct stat *st)
{
	int64_t t = a->mtime_ns;

	/* Published files are read-only: no write bit, whatever they had. */
	st->st_mode = (a->mode ? a->mode : S_IFDIR | 0555) & ~0222u;
	st->st_nlink = S_ISDIR(st->st_mode) ? 2 : 1;
	st->st_size = (off_t)n->size;
	st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
	st->st_mtim.tv_sec = (time_t)(t / 1000000000);
	st->st_mtim.tv_nsec = (long)(t % 1000000000);
	st->st_atim = st->st_ctim = st->st_mtim;
}

/* ---- ckpt/ itself ---------------------------------------------------- */

struct top {
	const char *want; /* lookup: this name only */
	struct mcfs_dirlist *d;
	struct tree *found_link; /* unused */
	bool hit, is_link;
	char link[4096];
	uint64_t id;
	int64_t created_ns;
	uint64_t size;
	int rc;
};

static void top_ent(void *arg, const mooncake_ckpt_entry_t *e)
{
	struct top *t = arg;
	mooncake_fs_attr_t a;

	if (t->want) {
		if (strcmp(e->name, t->want))
			return;
		t->hit = true;
		t->is_link = e->link != NULL;
		if (e->link)
			snprintf(t->link, sizeof(t->link), "%s", e->link);
		t->created_ns = e->created_ns;
		t->size = e->total_size;
		t->id = e->id;
		return;
	}
	if (t->rc)
		return;
	a = attr_of(e->link ? S_IFLNK | 0777 : S_IFDIR | 0555, e->created_ns);
	t->rc = mcfs_dirent_add(t->d, e->name, e->name, MCFS_CKPT_NODE,
				e->link ? 0 : e->id,
				e->link ? strlen(e->link) : 0,
				(uint64_t)(e->created_ns / 1000000), &a);
}

/* What the master has under name at ckpt/ (t->hit: something; *h: the
 * handle): 0 or -errno. */
static int top_find(struct mcfs *fs, const char *name, struct top *t,
		    mooncake_ckpt_t **h)
{
	int64_t n;
	int rc = mcfs_ckpt_handle(fs, h);

	memset(t, 0, sizeof(*t));
	t->want = name;
	if (rc)
		return rc;
	n = mooncake_ckpt_list(*h, name, top_ent, t);
	return n < 0 ? mcfs_errno((int)n) : 0;
}

static int top_lookup(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		      struct mcfs_node **out)
{
	struct top t;
	mooncake_ckpt_t *h;
	mooncake_fs_attr_t a;
	int rc = top_find(fs, name, &t, &h);

	if (rc || !t.hit)
		return rc;
	a = attr_of(t.is_link ? S_IFLNK | 0777 : S_IFDIR | 0555, t.created_ns);
	*out = mcfs_node_child(fs, dir, name, MCFS_CKPT_NODE, name,
			       t.is_link ? 0 : t.id,
			       t.is_link ? strlen(t.link) : 0,
			       (uint64_t)(t.created_ns / 1000000), &a);
	return *out ? 0 : -ENOMEM;
}

/* ---- inside a checkpoint ------------------------------------------------ */

int mcfs_ckpt_lookup(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		     struct mcfs_node **out)
{
	char cname[256], path[4096], key[4400];
	const char *dpath;
	const struct ent *e;
	struct tree *t;
	mooncake_fs_attr_t a;
	bool implicit;
	int rc = 0;

	*out = NULL;
	if (dir->kind == MCFS_CKPT_DIR) {
		/* This mount's staged checkpoints hide nothing published:
		 * a name is staged only while it is not published. */
		rc = mcfs_cstage_lookup(fs, dir, name, out);
		return rc || *out ? rc : top_lookup(fs, dir, name, out);
	}
	if (!dir->version ||
	    !S_ISDIR(dir->attr.mode ? dir->attr.mode : S_IFDIR))
		return -ENOTDIR;
	split_key(dir->key, cname, sizeof(cname), &dpath);
	t = tree_of(fs, cname, dir->version, &rc);
	if (!t)
		return rc == -ENOENT ? 0 : rc;
	if ((size_t)snprintf(path, sizeof(path), "%s%s%s", dpath,
			     *dpath ? "/" : "", name) >= sizeof(path))
		return -ENAMETOOLONG;
	e = find(t, path, &implicit);
	if (!e)
		return 0;
	snprintf(key, sizeof(key), "%s/%s", cname, path);
	a = implicit ? attr_of(S_IFDIR | 0555, dir->attr.mtime_ns) :
		       attr_of(e->mode, e->mtime_ns);
	*out = mcfs_node_child(fs, dir, name, MCFS_CKPT_NODE, key, t->id,
			       implicit		? 0 :
			       S_ISLNK(e->mode) ? strlen(e->link) :
						  e->size,
			       (uint64_t)(a.mtime_ns / 1000000), &a);
	return *out ? 0 : -ENOMEM;
}

int mcfs_ckpt_list(struct mcfs *fs, struct mcfs_node *dir,
		   struct mcfs_dirlist *d)
{
	char cname[256];
	const char *dpath;
	struct tree *t;
	size_t dl;
	int rc = 0;

	d->eof = true;
	if (dir->kind == MCFS_CKPT_DIR) {
		struct top top = { .d = d };
		mooncake_ckpt_t *h;
		int64_t n;
		rc = mcfs_ckpt_handle(fs, &h);
		if (rc)
			return rc;
		n = mooncake_ckpt_list(h, NULL, top_ent, &top);
		if (n < 0)
			return mcfs_errno((int)n);
		return top.rc ? top.rc : mcfs_cstage_list(fs, dir, d);
	}
	split_key(dir->key, cname, sizeof(cname), &dpath);
	t = tree_of(fs, cname, dir->version, &rc);
	if (!t)
		return rc;
	dl = strlen(dpath);
	for (size_t i = 0; !rc && i < t->n; i++) {
		const struct ent *e = &t->v[i];
		const char *rest, *slash;
		char comp[256], key[4400];
		mooncake_fs_attr_t a;
		bool deeper;
		if (dl && (strncmp(e->path, dpath, dl) || e->path[dl] != '/'))
			continue;
		rest = e->path + (dl ? dl + 1 : 0);
		slash = strchr(rest, '/');
		deeper = slash != NULL;
		snprintf(comp, sizeof(comp), "%.*s",
			 (int)(deeper ? (size_t)(slash - rest) : strlen(rest)),
			 rest);
		/* An implicit directory: once, where its first entry is
		 * (its own entry, when there is one, comes just before). */
		if (deeper && i > 0) {
			const char *prev = t->v[i - 1].path;
			size_t cl = (size_t)(rest - e->path) + strlen(comp);
			if (!strncmp(prev, e->path, cl) &&
			    (prev[cl] == 0 || prev[cl] == '/'))
				continue;
		}
		snprintf(key, sizeof(key), "%s/%.*s%s%s", cname, (int)dl, dpath,
			 dl ? "/" : "", comp);
		a = deeper ? attr_of(S_IFDIR | 0555, dir->attr.mtime_ns) :
			     attr_of(e->mode, e->mtime_ns);
		rc = mcfs_dirent_add(d, comp, key, MCFS_CKPT_NODE, t->id,
				     deeper	      ? 0 :
				     S_ISLNK(e->mode) ? strlen(e->link) :
							e->size,
				     (uint64_t)(a.mtime_ns / 1000000), &a);
	}
	return rc;
}

int mcfs_ckpt_readlink(struct mcfs *fs, struct mcfs_node *n, char *buf,
		       size_t size)
{
	char cname[256];
	const char *path;
	const struct ent *e;
	struct tree *t;
	bool implicit;
	int rc = 0;

	if (n->kind != MCFS_CKPT_NODE || !S_ISLNK(n->attr.mode))
		return -EINVAL;
	split_key(n->key, cname, sizeof(cname), &path);
	if (!*path) { /* a top-level link */
		struct top top;
		mooncake_ckpt_t *h;
		rc = top_find(fs, cname, &top, &h);
		if (rc)
			return rc;
		if (!top.hit || !top.is_link)
			return -ENOENT;
		snprintf(buf, size, "%s", top.link);
		return (int)strlen(buf);
	}
	t = tree_of(fs, cname, n->version, &rc);
	if (!t)
		return rc ? rc : -ENOENT;
	e = find(t, path, &implicit);
	if (!e || implicit || !e->link)
		return -ENOENT;
	snprintf(buf, size, "%s", e->link);
	return (int)strlen(buf);
}

int mcfs_ckpt_open(struct mcfs *fs, struct mcfs_node *n, int flags,
		   struct mcfs_fh **out)
{
	char cname[256];
	const char *path;
	mooncake_ckpt_t *h;
	struct mcfs_fh *fh;
	int rc;

	if (!S_ISREG(n->attr.mode))
		return S_ISDIR(n->attr.mode) || !n->attr.mode ? -EISDIR :
								-EINVAL;
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
		return -EACCES; /* published files are read-only */
	rc = mcfs_ckpt_handle(fs, &h);
	if (rc)
		return rc;
	split_key(n->key, cname, sizeof(cname), &path);
	fh = mcfs_fh_new(FH_CKPT, n->ino);
	if (!fh)
		return -ENOMEM;
	rc = mooncake_ckpt_file_open(h, n->version, path, &fh->ckf);
	if (rc) {
		mcfs_fh_free(fs, fh);
		return mcfs_errno(rc) == -ENOENT ? -ESTALE : mcfs_errno(rc);
	}
	*out = fh;
	return 0;
}

void mcfs_ckpt_read(fuse_req_t req, struct mcfs *fs, struct mcfs_fh *fh,
		    size_t size, off_t off)
{
	char *buf = malloc(size ? size : 1);
	int64_t n;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = mooncake_ckpt_file_pread(fh->ckf, buf, size, (uint64_t)off);
	if (n < 0) {
		atomic_fetch_add(&fs->n_errors, 1);
		fuse_reply_err(req, -mcfs_errno((int)n));
	} else {
		atomic_fetch_add(&fs->n_reads, 1);
		atomic_fetch_add(&fs->n_read_bytes, (uint64_t)n);
		fuse_reply_buf(req, buf, (size_t)n);
	}
	free(buf);
}

int mcfs_ckpt_unlink(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		     bool is_dir)
{
	mooncake_ckpt_t *h;
	struct top t;
	int rc;

	if (dir->kind == MCFS_CKPT_NODE)
		return 0; /* inside: immutable; rm -r goes on to NAME */
	rc = top_find(fs, name, &t, &h);
	if (rc)
		return rc;
	if (!t.hit)
		return -ENOENT;
	/* rmdir of a link is ENOTDIR, unlink of a checkpoint EISDIR */
	if (t.is_link == is_dir)
		return is_dir ? -ENOTDIR : -EISDIR;
	rc = mooncake_ckpt_remove(h, name);
	if (!rc)
		mc_log_notice("mcfs", "checkpoint %s unpublished", name);
	return rc ? mcfs_errno(rc) : 0;
}

int mcfs_ckpt_published(struct mcfs *fs, const char *name)
{
	struct top t;
	mooncake_ckpt_t *h;
	int rc = top_find(fs, name, &t, &h);

	return rc ? rc : t.hit ? -EEXIST : 0;
}

int mcfs_ckpt_symlink(struct mcfs *fs, struct mcfs_node *dir,
		      const char *target, const char *name,
		      struct mcfs_node **out)
{
	mooncake_ckpt_t *h;
	int rc = mcfs_ckpt_handle(fs, &h);

	if (rc)
		return rc;
	rc = mcfs_cstage_lookup(fs, dir, name, out);
	if (*out) {
		mcfs_node_forget(fs, (*out)->ino, 1);
		*out = NULL;
		return -EEXIST;
	}
	/* A link names a checkpoint: one path component. */
	if (strchr(target, '/'))
		return -EINVAL;
	rc = mooncake_ckpt_link(h, name, target, false);
	if (rc)
		return mcfs_errno(rc);
	rc = top_lookup(fs, dir, name, out);
	return rc ? rc : *out ? 0 : -ENOENT;
}

int mcfs_ckpt_rename_link(struct mcfs *fs, const char *name,
			  const char *newname, unsigned flags)
{
	struct top t;
	mooncake_ckpt_t *h;
	int rc = top_find(fs, name, &t, &h);

	if (rc)
		return rc;
	if (!t.hit)
		return -ENOENT;
	if (!t.is_link || (flags & RENAME_EXCHANGE))
		return -EPERM; /* a published checkpoint keeps its name */
	/* ln -sfn: a new link under a temporary name moved over the old
	 * one. The new name first, then the old one goes. */
	rc = mooncake_ckpt_link(h, newname, t.link,
				!(flags & RENAME_NOREPLACE));
	if (!rc)
		rc = mooncake_ckpt_remove(h, name);
	return rc ? mcfs_errno(rc) : 0;
}
