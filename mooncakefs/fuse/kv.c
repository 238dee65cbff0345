/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kv/: every object of the pool, '/' in a key making directories (a
 * directory exists while keys exist under it, or while the master keeps a
 * record of it: mkdir makes one, rmdir removes it). Lookups, stat and
 * listings take no lease (Stat and List). Attributes (mode, owner, times)
 * are the master's, stored with each file and directory record; objects
 * put through the API have none and show the mount's defaults.
 *
 * Versions. A file's inode stands for one version of its key, and every
 * open is bound to it:
 *  - an open for reading takes a hold on the object (its memory stays
 *    readable until close even if the name is removed or replaced) and
 *    checks that the object is the inode's version; when the name has
 *    moved on it answers ESTALE, and the kernel looks the name up again
 *    and retries with the new version's inode, so a reader never mixes
 *    one version's cached size or pages with another's bytes;
 *    The kernel retries once: under heavy churn the name may move on again
 *    between that lookup and the open, or another thread may open the
 *    inode for writing. So for a second after a stale open, that
 *    thread's lookups of the name *bind*: they return an inode of its
 *    own (no other thread's open uses it until that thread's has)
 *    holding the version they return, and the open that follows uses
 *    that hold; an open that finds handles in its way that were closed
 *    (flushed), their release not come yet, waits for it (inode.c);
 *  - an open for writing keeps the inode the name's (file.c builds the
 *    next version in its handle, and each publish binds the inode to the
 *    version published, so the writer's stat(path) keeps matching its
 *    descriptor: sqlite checks that before every write transaction);
 *    a reader's open of it is sent to a fresh inode of the published
 *    version (which retires it), and a writer's open of an inode open
 *    for reading is sent to a fresh one: the writer's size changes never
 *    reach a reader's inode.
 * Reads land in registered 1 MiB buffers (the transfer engine's
 * destination), or come straight from this daemon's own segment.
 */
#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mc_log.h"
#include "mc_time.h"
#include "mcfs.h"
#include "mooncake/mc_err.h"

#define BUF_SIZE MCFS_READ_MAX
#define PAGE 1000
/* How long an open waits for a created file's publish under way. */
#define PUBLISH_WAIT_US 2000
#define PUBLISH_WAIT_TRIES 50

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- names and keys ------------------------------------------------------ */

/* The key of name inside directory dir, malloc'd; -ENAMETOOLONG for a
 * name longer than NAME_MAX or a key longer than the master accepts,
 * -ENOMEM; *hidden for internal keys. */
static int child_key(const struct mcfs *fs, const struct mcfs_node *dir,
		     const char *name, char **out, bool *hidden)
{
	size_t clen, plen = strlen(dir->key);
	char *comp, *key;

	*out = NULL;
	*hidden = false;
	if (strlen(name) > NAME_MAX)
		return -ENAMETOOLONG;
	comp = mcfs_unescape(name, &clen);
	if (!comp)
		return -ENOMEM;
	if (plen + clen > fs->max_key) {
		free(comp);
		return -ENAMETOOLONG;
	}
	key = malloc(plen + clen + 2);
	if (!key) {
		free(comp);
		return -ENOMEM;
	}
	memcpy(key, dir->key, plen);
	memcpy(key + plen, comp, clen);
	key[plen + clen] = 0;
	free(comp);
	*hidden = mcfs_hidden_key(key);
	*out = key;
	return 0;
}

/* The directory prefix of key: key + "/", malloc'd (NULL: no memory). */
static char *prefix_of(const char *key)
{
	size_t kl = strlen(key);
	char *p = malloc(kl + 2);

	if (p) {
		memcpy(p, key, kl);
		memcpy(p + kl, "/", 2);
	}
	return p;
}

/* Is there a directory at key (a record, or keys under it)? */
static int dir_exists(struct mcfs *fs, const char *key, bool *yes)
{
	mooncake_obj_stat_t st;
	int rc = mooncake_store_stat_dir(fs->store, key, &st);

	*yes = !rc && st.is_dir;
	return rc == MC_STORE_OBJECT_NOT_FOUND ? 0 : mcfs_errno(rc);
}

/* A directory of kv/ where names may change: the checks every namespace
 * change makes first. */
static int writable_dir(struct mcfs *fs, struct mcfs_node *dir)
{
	if (dir->kind != MCFS_KV_DIR)
		return dir->kind == MCFS_VDIR || dir->kind == MCFS_ROOT ?
			       -EPERM :
			       -ENOENT;
	if (fs->o.read_only)
		return -EROFS;
	return mcfs_wait_ready(fs);
}

/* The key of a name about to be made, removed or renamed in dir: checks
 * dir (writable_dir), answers bad for a name that cannot be a key, and
 * EPERM for the hidden one (lookups never find it: the kernel asks to
 * make it, never to remove it). */
static int key_to_change(struct mcfs *fs, struct mcfs_node *dir,
			 const char *name, int bad, char **key)
{
	bool hidden;
	int rc = writable_dir(fs, dir);

	*key = NULL;
	if (!rc)
		rc = child_key(fs, dir, name, key, &hidden);
	if (!rc && hidden)
		rc = -EPERM;
	if (rc == -ENOENT)
		rc = bad;
	if (rc) {
		free(*key);
		*key = NULL;
	}
	return rc;
}

/* ---- lookup and listing --------------------------------------------------- */

/* Stat key and hold the object stat described, for the open that follows
 * (a binding lookup); *obj stays NULL if the key keeps changing. */
static int stat_bound(struct mcfs *fs, const char *key, mooncake_obj_stat_t *st,
		      mooncake_object_t *obj)
{
	int rc = 0;

	*obj = NULL;
	for (int tries = 0; tries < 3; tries++) {
		rc = mooncake_store_stat(fs->store, key, st);
		if (rc)
			return rc;
		if (mooncake_store_object_open(fs->store, key, obj))
			break;
		if (mooncake_store_object_version(*obj) == st->version)
			break;
		mooncake_store_object_close(*obj);
		*obj = NULL;
	}
	return rc;
}

int mcfs_kv_lookup(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		   pid_t pid, struct mcfs_node **out)
{
	mooncake_obj_stat_t st;
	mooncake_object_t held = NULL;
	bool hidden, isdir, bind;
	char *key;
	int stale, rc = mcfs_wait_ready(fs);

	*out = NULL;
	if (rc)
		return rc;
	rc = child_key(fs, dir, name, &key, &hidden);
	if (rc == -ENOENT || (!rc && hidden)) {
		free(key);
		return 0; /* cannot exist: a negative entry */
	}
	if (rc)
		return rc;
	/* One Stat answers for a file or, failing that, a directory. */
	stale = mcfs_stale_recent(fs, dir->ino, name, pid);
	/* A retried open (a reader's or a writer's) binds the version it
	 * finds, so that one more publish of the name before the open does
	 * not turn it away again (the kernel retries once). "" (kv/%00) can
	 * only be a directory. */
	bind = stale && *key;
	if (bind)
		rc = stat_bound(fs, key, &st, &held);
	if (!bind || rc == MC_STORE_OBJECT_NOT_FOUND)
		rc = mooncake_store_stat_dir(fs->store, key, &st);
	isdir = !rc && st.is_dir;
	if (rc == 0 && !isdir && stale) {
		/* A retried open's inode, which no other thread's open turns
		 * away: the kernel retries only once. */
		*out = mcfs_node_private(fs, dir, name, key, &st, pid,
					 stale == 2);
		rc = *out ? 0 : -ENOMEM;
		if (*out && held)
			mcfs_node_pre_set(fs, *out, held);
		else
			mooncake_store_object_close(held);
	} else if (rc == 0 && !isdir) {
		*out = mcfs_node_child(fs, dir, name, MCFS_KV_FILE, key,
				       st.version, st.size, st.mtime_ms,
				       &st.attr);
		rc = *out ? 0 : -ENOMEM;
	} else if (rc == 0) {
		char *prefix = prefix_of(key);
		*out = prefix ? mcfs_node_child(fs, dir, name, MCFS_KV_DIR,
						prefix, 0, 0, 0, &st.attr) :
				NULL;
		rc = *out ? 0 : -ENOMEM;
		if (*out)
			atomic_store(&(*out)->subdirs, st.subdirs);
		free(prefix);
		mooncake_store_object_close(held);
	} else if (rc == MC_STORE_OBJECT_NOT_FOUND) {
		/* Or a file this mount is creating (published at close). */
		*out = mcfs_node_creating(fs, dir, name);
		rc = 0;
		if (*out && stale) {
			/* A thread turned away from the creator's inode: the
			 * file as it is published so far (empty), on an inode
			 * of its own. */
			struct mcfs_node *c = *out;
			mooncake_obj_stat_t empty = { .mtime_ms = c->mtime_ms };

			empty.attr = mcfs_node_attr(fs, c);
			*out = mcfs_node_private(fs, dir, name, key, &empty,
						 pid, stale == 2);
			mcfs_node_forget(fs, c->ino, 1);
			rc = *out ? 0 : -ENOMEM;
		}
	} else {
		rc = mcfs_errno(rc);
	}
	free(key);
	return rc;
}

struct page_ctx {
	struct mcfs_dirlist *d;
	size_t plen;
	char *last; /* last name from the master (the next cursor) */
	int err;
};

/*
 * Whether the directory comp (raw, without its '/') is also a file
 * listed before: d->chain keeps the files that start every entry since
 * (entries come in byte order, so those starting with a file's name
 * follow it together and the directory of that name is among them).
 */
static bool chain_shown(struct mcfs_dirlist *d, const char *comp, size_t len)
{
	while (d->chain_n) {
		size_t top = d->chain_lens[d->chain_n - 1];

		if (top <= len && !memcmp(d->chain, comp, top))
			break;
		d->chain_n--;
	}
	return d->chain_n && d->chain_lens[d->chain_n - 1] == len;
}

/* The file comp (raw) was listed: every file left on the chain starts
 * it (chain_shown() came first). 0 or -ENOMEM. */
static int chain_push(struct mcfs_dirlist *d, const char *comp, size_t len)
{
	char *s = realloc(d->chain, len + 1);

	if (!s)
		return -ENOMEM;
	d->chain = s;
	memcpy(s, comp, len);
	s[len] = 0;
	if (d->chain_n == d->chain_cap) {
		size_t cap = d->chain_cap ? 2 * d->chain_cap : 8;
		size_t *l = realloc(d->chain_lens, cap * sizeof(*l));

		if (!l)
			return -ENOMEM;
		d->chain_lens = l;
		d->chain_cap = cap;
	}
	d->chain_lens[d->chain_n++] = len;
	return 0;
}

static void page_cb(void *arg, const mooncake_list_entry_t *e)
{
	struct page_ctx *pc = arg;
	const char *rest = e->name + pc->plen;
	size_t len = strlen(rest);
	char *name;

	free(pc->last);
	pc->last = strdup(e->name);
	if (pc->err || !pc->last) {
		pc->err = -ENOMEM;
		return;
	}
	if (mcfs_hidden_key(e->name))
		return;
	if (e->is_prefix && len)
		len--; /* the trailing delimiter */
	if (chain_shown(pc->d, rest, len) && e->is_prefix)
		return; /* shown as the file */
	name = mcfs_escape(rest, len);
	if (!name) {
		pc->err = -ENOMEM;
		return;
	}
	if (strlen(name) <= 255)
		pc->err = mcfs_dirent_add(
			pc->d, name, e->name,
			e->is_prefix ? MCFS_KV_DIR : MCFS_KV_FILE, e->version,
			e->size, e->mtime_ms, &e->attr);
	free(name);
	if (!pc->err && !e->is_prefix)
		pc->err = chain_push(pc->d, rest, len);
}

/* After the master's last page: the files this mount is creating here
 * (published at their first close or fsync, unknown to the master until
 * then), so that `ls` shows a file being copied in. A name the master
 * listed (someone published it meanwhile) is not listed twice. */
static int list_creating(struct mcfs *fs, struct mcfs_node *dir,
			 struct mcfs_dirlist *d)
{
	struct mcfs_dirlist c = { 0 };
	mooncake_obj_stat_t st;
	int rc = mcfs_node_creating_list(fs, dir, &c);

	for (size_t i = 0; !rc && i < c.n_ents; i++) {
		const struct mcfs_dirent *e = &c.ents[i];

		if (mooncake_store_stat(fs->store, e->key, &st) ==
		    MC_STORE_OBJECT_NOT_FOUND)
			rc = mcfs_dirent_add(d, e->name, e->key, e->kind, 0, 0,
					     e->mtime_ms, &e->attr);
	}
	mcfs_dirlist_free(&c);
	return rc;
}

int mcfs_kv_list(struct mcfs *fs, struct mcfs_node *dir, struct mcfs_dirlist *d)
{
	struct page_ctx pc = { .d = d };
	bool trunc = false;
	int rc;

	if (!d->prefix && !(d->prefix = strdup(dir->key)))
		return -ENOMEM;
	pc.plen = strlen(d->prefix);
	rc = mooncake_store_list_dirs(fs->store, d->prefix, "/", d->cursor,
				      PAGE, page_cb, &pc, &trunc);
	if (rc < 0 || pc.err) {
		free(pc.last);
		return rc < 0 ? mcfs_errno(rc) : pc.err;
	}
	if (pc.last) {
		free(d->cursor);
		d->cursor = pc.last;
	}
	d->eof = !trunc;
	return d->eof ? list_creating(fs, dir, d) : 0;
}

/* ---- registered read buffers ------------------------------------------- */

int mcfs_bufs_init(struct mcfs *fs, unsigned n)
{
	int rc;

	if (n > 64)
		n = 64;
	fs->bufs = aligned_alloc(4096, (size_t)n * BUF_SIZE);
	if (!fs->bufs)
		return -ENOMEM;
	rc = mooncake_store_register_buffer(fs->store, fs->bufs,
					    (size_t)n * BUF_SIZE);
	if (rc) {
		free(fs->bufs);
		fs->bufs = NULL;
		return rc;
	}
	fs->n_bufs = n;
	fs->buf_free = n == 64 ? ~0ull : (1ull << n) - 1;
	pthread_mutex_init(&fs->buf_lock, NULL);
	pthread_cond_init(&fs->buf_cond, NULL);
	return 0;
}

void mcfs_bufs_free(struct mcfs *fs)
{
	if (!fs->bufs)
		return;
	mooncake_store_unregister_buffer(fs->store, fs->bufs);
	free(fs->bufs);
	fs->bufs = NULL;
}

static char *buf_take(struct mcfs *fs, unsigned *idx)
{
	pthread_mutex_lock(&fs->buf_lock);
	while (!fs->buf_free)
		pthread_cond_wait(&fs->buf_cond, &fs->buf_lock);
	*idx = (unsigned)__builtin_ctzll(fs->buf_free);
	fs->buf_free &= ~(1ull << *idx);
	pthread_mutex_unlock(&fs->buf_lock);
	return fs->bufs + (size_t)*idx * BUF_SIZE;
}

static void buf_give(struct mcfs *fs, unsigned idx)
{
	pthread_mutex_lock(&fs->buf_lock);
	fs->buf_free |= 1ull << idx;
	pthread_cond_signal(&fs->buf_cond);
	pthread_mutex_unlock(&fs->buf_lock);
}

/* ---- opening files ---------------------------------------------------- */

/* The object key names now, held open, if it is the inode's version;
 * -ESTALE (and n retired) when the name has moved on. */
static int open_version(struct mcfs *fs, struct mcfs_node *n, pid_t pid,
			bool write, mooncake_object_t *out)
{
	int rc;

	/* The binding lookup's hold, taken for this thread's open. */
	*out = n->owner == pid ? mcfs_node_pre_take(fs, n) : NULL;
	if (*out)
		return 0;
	rc = mooncake_store_object_open(fs->store, n->key, out);
	/* A created file whose first publish is under way binds its node to
	 * the version just before the rename that makes it the name's
	 * (file.c): the rename lands within a master call. */
	for (int i = 0; rc == MC_STORE_OBJECT_NOT_FOUND && n->created &&
			n->version && i < PUBLISH_WAIT_TRIES;
	     i++) {
		usleep(PUBLISH_WAIT_US);
		rc = mooncake_store_object_open(fs->store, n->key, out);
	}
	/* A file being created (by this mount) and not published yet: its
	 * version is empty, for readers and for writers that start from it
	 * (flock's lock file, two O_CREAT|O_APPEND opens). */
	if (rc == MC_STORE_OBJECT_NOT_FOUND && !n->version &&
	    !atomic_load(&n->unlinked) && !atomic_load(&n->create_failed))
		return 0;
	if (rc)
		return mcfs_errno(rc);
	if (mooncake_store_object_version(*out) == n->version)
		return 0;
	mooncake_store_object_close(*out);
	*out = NULL;
	/* This thread's own inode for a name that was not published when it
	 * looked (kv lookup): published since, by the creator. The kernel
	 * retries a stale open only once, so it opens what it looked at:
	 * the empty file (a writer publishes only if written, or if the
	 * name is still free). */
	if (!n->version && n->owner == pid && !n->created &&
	    n->owner_until_ms > mc_mono_ms())
		return 0;
	mcfs_node_retire(fs, n);
	if (n->parent)
		mcfs_stale_note(fs, n->parent->ino, n->name, pid, write, 0);
	atomic_fetch_add(&fs->n_stale, 1);
	return -ESTALE;
}

static struct mcfs_fh *writer_fh(struct mcfs_node *n, const char *key)
{
	char *k = strdup(key), *name = strdup(n->name);
	struct mcfs_fh *fh = k && name ? mcfs_fh_new(FH_WRITE, n->ino) : NULL;

	if (!fh) {
		free(k);
		free(name);
		return NULL;
	}
	fh->key = k;
	fh->name = name;
	fh->parent_ino = n->parent ? n->parent->ino : 0;
	fh->node = n;
	return fh;
}

/* A handle writing n's key: empty, or starting from base. */
static int start_writer(struct mcfs *fs, struct mcfs_node *n,
			mooncake_object_t base, struct mcfs_fh **out)
{
	struct mcfs_fh *fh = writer_fh(n, n->key);
	int rc = fh ? mcfs_file_init(fs, fh, base) : -ENOMEM;

	if (rc) {
		mcfs_fh_free(fs, fh);
		return rc;
	}
	*out = fh;
	return 0;
}

int mcfs_kv_open(struct mcfs *fs, struct mcfs_node *n, int flags, pid_t pid,
		 struct mcfs_fh **out)
{
	bool write = (flags & O_ACCMODE) != O_RDONLY;
	mooncake_object_t obj = NULL;
	struct mcfs_fh *fh;
	int rc;

	if (n->kind != MCFS_KV_FILE)
		return -EISDIR;
	if (write && fs->o.read_only)
		return -EROFS;
	rc = mcfs_wait_ready(fs);
	if (!rc)
		rc = mcfs_node_open(fs, n, write, pid);
	if (rc) {
		if (rc == -ESTALE && n->parent) {
			/* The same file, open the other way: its retry's
			 * inode is one file with this one. */
			mcfs_stale_note(fs, n->parent->ino, n->name, pid, write,
					n->same_as ? n->same_as : n->ino);
			atomic_fetch_add(&fs->n_stale, 1);
		}
		return rc;
	}
	/* Writing without O_TRUNC starts from the inode's version too. */
	if (!write || !(flags & O_TRUNC))
		rc = open_version(fs, n, pid, write, &obj);
	if (!rc && write) {
		rc = start_writer(fs, n, obj, out);
		/* Starting from a name not published yet (open_version). */
		if (!rc && !obj && !(flags & O_TRUNC))
			(*out)->if_absent = true;
		/* Emptied on purpose: a lock granted later keeps it so. */
		if (!rc && (flags & O_TRUNC))
			(*out)->modified = true;
		mooncake_store_object_close(obj);
	} else if (!rc) {
		fh = mcfs_fh_new(FH_READ, n->ino);
		if (fh) {
			fh->obj = obj; /* NULL: empty (open_version) */
			fh->size = obj ? mooncake_store_object_size(obj) : 0;
			*out = fh;
		} else {
			mooncake_store_object_close(obj);
			rc = -ENOMEM;
		}
	}
	if (rc)
		mcfs_node_close(fs, n->ino, write);
	else if (n->owner == pid)
		mcfs_node_owner_opened(fs, n, pid, write);
	/* Before the open's reply, so the reader's first fstat or read asks
	 * again (an answer computed before comes back older than this and
	 * the kernel ignores it). */
	if (!rc && !write && atomic_exchange(&n->sized_by_writers, false))
		fuse_lowlevel_notify_inval_inode(fs->se, n->ino, -1, 0);
	return rc;
}

/* O_EXCL (and mknod): the name is made now, empty, and only if no one
 * made it meanwhile. Within one mount the kernel's lookup under the
 * directory's lock saw to that already; another mount's create of the
 * same new name is seen only here (the lock-file idiom between hosts).
 * The handle then writes on as over its own published file. */
static int create_exclusive(struct mcfs *fs, struct mcfs_node *n,
			    struct mcfs_fh *fh)
{
	bool changed;
	int rc;

	fh->if_absent = fh->excl = true;
	rc = mcfs_file_publish(fs, fh, &changed);
	if (rc) {
		mcfs_node_close(fs, n->ino, true);
		mcfs_fh_free(fs, fh);
	}
	return rc;
}

int mcfs_kv_create(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		   const mooncake_fs_attr_t *attr, int flags,
		   struct mcfs_node **node, struct mcfs_fh **out)
{
	struct mcfs_node *n;
	char *key;
	int rc = key_to_change(fs, dir, name, -EINVAL, &key);

	if (rc)
		return rc;
	/* The file being written is an inode of its own (version 0 until
	 * published; later lookups find the published version). */
	n = mcfs_node_child(fs, dir, name, MCFS_KV_FILE, key, 0, 0,
			    (uint64_t)(now_ns() / 1000000), attr);
	free(key);
	if (!n)
		return -ENOMEM;
	pthread_mutex_lock(&fs->itab_lock);
	n->created = true;
	pthread_mutex_unlock(&fs->itab_lock);
	rc = mcfs_node_open(fs, n, true, 0);
	if (!rc) {
		rc = start_writer(fs, n, NULL, out);
		if (rc)
			mcfs_node_close(fs, n->ino, true);
		else if (!(flags & O_TRUNC))
			(*out)->if_absent = true; /* unless written */
		else
			(*out)->modified = true; /* (mcfs_file_locked) */
	}
	if (!rc && (flags & O_EXCL))
		rc = create_exclusive(fs, n, *out);
	if (rc) {
		mcfs_node_forget(fs, n->ino, 1);
		return rc;
	}
	*node = n;
	return 0;
}

void mcfs_kv_read(fuse_req_t req, struct mcfs *fs, struct mcfs_fh *fh,
		  size_t size, off_t off)
{
	const void *p;
	unsigned idx, others;
	uint64_t n;
	int64_t got;
	char *buf;

	if ((uint64_t)off >= fh->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > BUF_SIZE)
		size = BUF_SIZE;
	/* In this daemon's own segment: straight from there to the kernel,
	 * one copy (the hold keeps the bytes in place). */
	got = mooncake_store_object_peek(fh->obj, (uint64_t)off, size, &p);
	if (got > 0) {
		atomic_fetch_add(&fs->n_reads, 1);
		atomic_fetch_add(&fs->n_read_bytes, (uint64_t)got);
		fuse_reply_buf(req, p, (size_t)got);
		return;
	}
	/* Held elsewhere: read sequentially, from the chunks fetched ahead.
	 * Once replied, the program may close at once and the release free
	 * fh on another thread: nothing of fh is read after the reply. */
	n = fh->size - (uint64_t)off < size ? fh->size - (uint64_t)off : size;
	others = atomic_fetch_add(&fs->remote_reads, 1);
	if (mcfs_ra_read(fs->ra, &fh->ra, fh->obj, fh->size, req, (uint64_t)off,
			 size, others) ||
	    mcfs_splice_read(fs, req, fh->obj, (uint64_t)off, (size_t)n)) {
		atomic_fetch_sub(&fs->remote_reads, 1);
		atomic_fetch_add(&fs->n_reads, 1);
		atomic_fetch_add(&fs->n_read_bytes, n);
		return;
	}
	buf = buf_take(fs, &idx);
	got = mooncake_store_object_read(fh->obj, (uint64_t)off, buf, size);
	atomic_fetch_sub(&fs->remote_reads, 1);
	if (got < 0) {
		buf_give(fs, idx);
		atomic_fetch_add(&fs->n_errors, 1);
		fuse_reply_err(req, -mcfs_errno((int)got));
		return;
	}
	atomic_fetch_add(&fs->n_reads, 1);
	atomic_fetch_add(&fs->n_read_bytes, (uint64_t)got);
	fuse_reply_buf(req, buf, (size_t)got);
	buf_give(fs, idx);
}

int mcfs_kv_truncate(struct mcfs *fs, struct mcfs_node *n, uint64_t size)
{
	mooncake_object_t base = NULL;
	struct mcfs_fh *fh = NULL;
	bool changed;
	int rc;

	if (n->kind != MCFS_KV_FILE)
		return -EISDIR;
	if (fs->o.read_only)
		return -EROFS;
	rc = mcfs_wait_ready(fs);
	/* The next version: the inode's bytes, cut or grown (with zeros). */
	if (!rc && size)
		rc = open_version(fs, n, 0, true, &base);
	if (!rc)
		rc = start_writer(fs, n, base, &fh);
	mooncake_store_object_close(base);
	if (!rc)
		rc = mcfs_file_truncate(fs, fh, size);
	if (!rc)
		rc = mcfs_file_publish(fs, fh, &changed);
	mcfs_fh_free(fs, fh);
	if (!rc)
		mcfs_node_retire(fs, n); /* no longer the name's version */
	return rc;
}

/* ---- namespace changes ------------------------------------------------ */

int mcfs_kv_unlink(struct mcfs *fs, struct mcfs_node *dir, const char *name)
{
	bool isdir = false;
	char *key;
	int rc = key_to_change(fs, dir, name, -ENOENT, &key);

	if (rc)
		return rc;
	/* Forced: a reader holding the object keeps it until it closes. */
	rc = mooncake_store_remove(fs->store, key, true);
	if (rc == MC_STORE_OBJECT_NOT_FOUND && !dir_exists(fs, key, &isdir) &&
	    isdir)
		rc = 1;
	/* Not found: maybe a file being created, never published yet. */
	if ((rc == 0 || rc == MC_STORE_OBJECT_NOT_FOUND) &&
	    mcfs_node_unlinked(fs, dir, name))
		rc = 0;
	free(key);
	return rc == 1 ? -EISDIR : mcfs_errno(rc);
}

/* A directory's rename: every key and record under it, in one step. */
static int rename_dir(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		      struct mcfs_node *newdir, const char *newname,
		      const char *from, const char *to, unsigned flags)
{
	char *fp = prefix_of(from), *tp = prefix_of(to);
	mooncake_obj_stat_t st;
	int rc = fp && tp ? 0 : -ENOMEM;

	if (!rc) {
		rc = mooncake_store_stat_dir(fs->store, to, &st);
		if (rc == 0)
			rc = !st.is_dir		      ? -ENOTDIR :
			     flags & RENAME_NOREPLACE ? -EEXIST :
							0;
		else
			rc = rc == MC_STORE_OBJECT_NOT_FOUND ? 0 :
							       mcfs_errno(rc);
	}
	if (rc)
		goto out;
	/* Every key under it moves: no publish lands meanwhile (file.c). */
	mcfs_name_lock_all(fs);
	rc = mcfs_errno(mooncake_store_rename_dir(fs->store, fp, tp));
	if (!rc) {
		mcfs_node_renamed_dir(fs, dir, name, newdir, newname, fp, tp);
		mcfs_locks_rename(fs, fp, tp, true);
	}
	mcfs_name_unlock_all(fs);
out:
	free(fp);
	free(tp);
	return rc;
}

/* A file this mount is creating has no object at the master yet: it
 * moves here (its writer publishes under the new name, file.c); what the
 * new name held is replaced now, as by any rename. */
static int rename_creating(struct mcfs *fs, const char *to, unsigned flags)
{
	mooncake_obj_stat_t st;
	int rc;

	if (flags & RENAME_NOREPLACE) {
		rc = mooncake_store_stat(fs->store, to, &st);
		return rc == MC_STORE_OBJECT_NOT_FOUND ? 0 :
		       rc			       ? rc :
			    MC_STORE_OBJECT_ALREADY_EXISTS;
	}
	rc = mooncake_store_remove(fs->store, to, true);
	return rc == MC_STORE_OBJECT_NOT_FOUND ? 0 : rc;
}

/* A file's rename, or a new file's (rename_creating), under the two
 * names' stripes: no publish of either name through this mount (file.c)
 * lands between the master's rename and the nodes' (it would make the old
 * name again, or overwrite what was renamed over). A store code, or 1:
 * from is a directory after all. */
static int rename_file(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		       struct mcfs_node *newdir, const char *newname,
		       const char *from, const char *to, unsigned flags)
{
	struct mcfs_node *creating = NULL;
	bool isdir = false;
	int rc = 0;

	mcfs_name_lock2(fs, from, to);
	/* Not over a file this mount is creating either: ls shows it. */
	if ((flags & RENAME_NOREPLACE) &&
	    (creating = mcfs_node_creating(fs, newdir, newname))) {
		mcfs_node_forget(fs, creating->ino, 1);
		rc = MC_STORE_OBJECT_ALREADY_EXISTS;
	}
	if (!rc)
		rc = mooncake_store_rename(fs->store, from, to,
					   (flags & RENAME_NOREPLACE) != 0);
	if (rc == MC_STORE_OBJECT_NOT_FOUND && !dir_exists(fs, from, &isdir) &&
	    isdir) {
		rc = 1;
	} else if (rc == MC_STORE_OBJECT_NOT_FOUND &&
		   (creating = mcfs_node_creating(fs, dir, name))) {
		mcfs_node_forget(fs, creating->ino, 1);
		rc = rename_creating(fs, to, flags);
	}
	if (!rc && strcmp(from, to)) {
		(void)mcfs_node_unlinked(fs, newdir, newname); /* replaced */
		mcfs_node_renamed(fs, dir, name, newdir, newname, to);
		mcfs_locks_rename(fs, from, to, false);
	}
	mcfs_name_unlock2(fs, from, to);
	return rc;
}

int mcfs_kv_rename(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		   struct mcfs_node *newdir, const char *newname,
		   unsigned flags)
{
	char *from = NULL, *to = NULL;
	bool h1, h2, isdir = false;
	int rc = writable_dir(fs, dir);

	if (rc)
		return rc;
	if (flags & RENAME_EXCHANGE)
		return -EINVAL;
	if (newdir->kind != MCFS_KV_DIR)
		return -EXDEV;
	rc = child_key(fs, dir, name, &from, &h1);
	if (!rc)
		rc = child_key(fs, newdir, newname, &to, &h2);
	/* The hidden name is not there to move, and is reserved. */
	if (!rc && (h1 || h2))
		rc = h1 ? -ENOENT : -EPERM;
	if (rc)
		goto out;
	/* A file over a directory: EISDIR (the master would let a key and
	 * a directory of the same name coexist). */
	rc = dir_exists(fs, to, &isdir);
	if (!rc && isdir) {
		rc = dir_exists(fs, from, &isdir);
		if (!rc)
			rc = isdir ? rename_dir(fs, dir, name, newdir, newname,
						from, to, flags) :
				     -EISDIR;
		goto out;
	}
	if (rc)
		goto out;
	rc = rename_file(fs, dir, name, newdir, newname, from, to, flags);
	if (rc == 1) /* from is a directory after all */
		rc = rename_dir(fs, dir, name, newdir, newname, from, to,
				flags);
	else
		rc = mcfs_errno(rc);
out:
	free(from);
	free(to);
	return rc;
}

int mcfs_kv_mkdir(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		  const mooncake_fs_attr_t *attr, struct mcfs_node **out)
{
	struct mcfs_node *n;
	char *key, *prefix;
	int rc = key_to_change(fs, dir, name, -EINVAL, &key);

	if (rc)
		return rc;
	prefix = prefix_of(key);
	free(key);
	if (!prefix)
		return -ENOMEM;
	/* The node (counted as the kernel's) before the master has the
	 * record: the feed may bring this mkdir's event before its answer
	 * is back, and the watch must find the directory held then, or it
	 * drops the entry the kernel is making (watch.c, inval_key). */
	n = mcfs_node_child(fs, dir, name, MCFS_KV_DIR, prefix, 0, 0, 0, NULL);
	/* -705 for a record, keys under it, or a file of that name. */
	rc = n ? mcfs_errno(mooncake_store_mkdir(fs->store, prefix, attr)) :
		 -ENOMEM;
	free(prefix);
	if (rc) {
		if (n)
			mcfs_node_forget(fs, n->ino, 1);
		return rc;
	}
	mcfs_node_set_attr(fs, n, attr);
	*out = n;
	return 0;
}

int mcfs_kv_rmdir(struct mcfs *fs, struct mcfs_node *dir, const char *name)
{
	char *key, *prefix;
	int rc = key_to_change(fs, dir, name, -ENOENT, &key);

	if (rc)
		return rc;
	prefix = prefix_of(key);
	free(key);
	if (!prefix)
		return -ENOMEM;
	/* -700 (ENOTEMPTY) when anything is under it, -704 when no
	 * directory is there. */
	rc = mcfs_errno(mooncake_store_rmdir(fs->store, prefix));
	free(prefix);
	return rc;
}

/* ---- symbolic links ----------------------------------------------------- */

int mcfs_kv_symlink(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		    const char *target, const mooncake_fs_attr_t *attr,
		    struct mcfs_node **out)
{
	mooncake_replicate_config_t cfg = { .replica_num = fs->o.replicas };
	size_t len = strlen(target);
	mooncake_obj_stat_t st;
	mooncake_writer_t w = NULL;
	bool isdir;
	char *key;
	int rc = key_to_change(fs, dir, name, -EINVAL, &key);

	if (rc)
		return rc;
	if (len > 4095) {
		free(key);
		return -ENAMETOOLONG;
	}
	rc = dir_exists(fs, key, &isdir);
	if (!rc && isdir)
		rc = -EEXIST;
	/* Put under the name itself: -705 (EEXIST) when it is taken. */
	if (!rc)
		rc = mcfs_errno(mooncake_store_writer_open_attr(
			fs->store, key, len, &cfg, attr, &w));
	if (!rc && len)
		rc = mcfs_errno(mooncake_store_writer_write(w, 0, target, len));
	if (w) {
		int c = mcfs_errno(mooncake_store_writer_close(w, rc == 0));
		rc = rc ? rc : c;
	}
	if (!rc)
		rc = mcfs_errno(mooncake_store_stat(fs->store, key, &st));
	if (!rc) {
		*out = mcfs_node_child(fs, dir, name, MCFS_KV_FILE, key,
				       st.version, st.size, st.mtime_ms,
				       &st.attr);
		rc = *out ? 0 : -ENOMEM;
	}
	free(key);
	return rc;
}

int mcfs_kv_readlink(struct mcfs *fs, struct mcfs_node *n, char *buf,
		     size_t size)
{
	mooncake_object_t obj;
	int64_t got;
	int rc;

	if (n->kind != MCFS_KV_FILE || !S_ISLNK(mcfs_node_attr(fs, n).mode))
		return -EINVAL;
	rc = mcfs_wait_ready(fs);
	if (!rc)
		rc = mcfs_errno(
			mooncake_store_object_open(fs->store, n->key, &obj));
	if (rc)
		return rc;
	got = mooncake_store_object_read(obj, 0, buf, size - 1);
	mooncake_store_object_close(obj);
	if (got < 0)
		return mcfs_errno((int)got);
	buf[got] = 0;
	return (int)got;
}

/* ---- attributes ------------------------------------------------------- */

mooncake_fs_attr_t mcfs_new_attr(struct mcfs *fs, fuse_req_t req,
				 struct mcfs_node *dir, mode_t mode)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	mooncake_fs_attr_t a = {
		.mode = (uint32_t)mode,
		.uid = c->uid,
		.gid = c->gid,
		.flags = MOONCAKE_ATTR_ATIME_SET | MOONCAKE_ATTR_MTIME_SET |
			 MOONCAKE_ATTR_CTIME_SET,
	};
	mooncake_fs_attr_t pa = mcfs_node_attr(fs, dir);

	a.atime_ns = a.mtime_ns = a.ctime_ns = now_ns();
	/* A file's times follow its content: the put's completion. */
	if (S_ISREG(mode) || S_ISLNK(mode))
		a.flags = 0;
	if (pa.mode & S_ISGID) {
		a.gid = pa.gid;
		if (S_ISDIR(mode))
			a.mode |= S_ISGID;
	}
	return a;
}

/* What n shows now, as stored attributes (the defaults for none). */
static mooncake_fs_attr_t shown_attr(struct mcfs *fs, struct mcfs_node *n)
{
	mooncake_fs_attr_t a = mcfs_node_attr(fs, n);
	struct stat st;

	if (a.mode)
		return a;
	mcfs_fill_attr(fs, n, &st);
	a.mode = (uint32_t)st.st_mode;
	a.uid = st.st_uid;
	a.gid = st.st_gid;
	return a;
}

static int64_t ns_of(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

void mcfs_kv_drop_privs(struct mcfs *fs, struct mcfs_node *n)
{
	const uint32_t sgid = S_ISGID | S_IXGRP;
	struct stat st = { 0 };
	uint32_t mode;

	if (!n)
		return;
	pthread_mutex_lock(&fs->itab_lock);
	mode = n->attr.mode; /* 0: none stored, no such bits */
	pthread_mutex_unlock(&fs->itab_lock);
	if (!(mode & S_ISUID) && (mode & sgid) != sgid)
		return;
	st.st_mode = mode & ~(S_ISUID | ((mode & sgid) == sgid ? S_ISGID : 0));
	if (mcfs_kv_setattr(fs, n, &st, FUSE_SET_ATTR_MODE))
		mc_log_warn("mcfs", "%s: set-ID bits not cleared on write",
			    n->key);
}

int mcfs_kv_setattr(struct mcfs *fs, struct mcfs_node *n, const struct stat *st,
		    int to_set)
{
	mooncake_fs_attr_t a = shown_attr(fs, n), out;
	bool dir = n->kind == MCFS_KV_DIR, writing;
	unsigned mask = 0;
	int64_t now = now_ns();
	int rc;

	if (n == fs->kv)
		return -EPERM; /* kv/ itself is the mount's */
	if (fs->o.read_only)
		return -EROFS;
	if (to_set & FUSE_SET_ATTR_MODE) {
		mask |= MOONCAKE_SET_MODE;
		a.mode = (a.mode & S_IFMT) | ((uint32_t)st->st_mode & 07777);
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		mask |= MOONCAKE_SET_UID;
		a.uid = st->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		mask |= MOONCAKE_SET_GID;
		a.gid = st->st_gid;
	}
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW)) {
		mask |= MOONCAKE_SET_ATIME;
		a.atime_ns = to_set & FUSE_SET_ATTR_ATIME_NOW ?
				     now :
				     ns_of(&st->st_atim);
	}
	if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
		mask |= MOONCAKE_SET_MTIME;
		a.mtime_ns = to_set & FUSE_SET_ATTR_MTIME_NOW ?
				     now :
				     ns_of(&st->st_mtim);
	}
	if (!mask)
		return 0;
	/* A file being written: its next version carries them (and the
	 * version it replaces, if any, gets them now). */
	pthread_mutex_lock(&fs->itab_lock);
	writing = n->kind == MCFS_KV_FILE && n->n_writers;
	if (writing) {
		mooncake_fs_attr_t *t = &n->attr;
		if (!t->mode)
			*t = a;
		t->mode = a.mode;
		t->uid = a.uid;
		t->gid = a.gid;
		if (mask & MOONCAKE_SET_ATIME) {
			t->atime_ns = a.atime_ns;
			t->flags |= MOONCAKE_ATTR_ATIME_SET;
		}
		if (mask & MOONCAKE_SET_MTIME) {
			t->mtime_ns = a.mtime_ns;
			t->flags |= MOONCAKE_ATTR_MTIME_SET;
			atomic_store(&n->mtime_pending, true);
		}
		t->ctime_ns = now;
		t->flags |= MOONCAKE_ATTR_CTIME_SET;
	}
	pthread_mutex_unlock(&fs->itab_lock);
	rc = mcfs_wait_ready(fs);
	if (rc)
		return rc;
	rc = mcfs_errno(
		mooncake_store_setattr(fs->store, n->key, dir, mask, &a, &out));
	if (writing)
		return rc == -ENOENT ? 0 : rc; /* not yet published */
	if (!rc)
		mcfs_node_set_attr(fs, n, &out);
	return rc;
}

void mcfs_kv_refresh(struct mcfs *fs, struct mcfs_node *n)
{
	mooncake_obj_stat_t st;
	char *key;
	size_t kl;
	bool writing;

	pthread_mutex_lock(&fs->itab_lock);
	writing = n->n_writers || !n->version;
	pthread_mutex_unlock(&fs->itab_lock);
	/* A file node of version 0 was made by a create: the name's
	 * published version has another inode. */
	if (n == fs->kv || (n->kind == MCFS_KV_FILE && writing) ||
	    (n->kind != MCFS_KV_FILE && n->kind != MCFS_KV_DIR) ||
	    mcfs_wait_ready(fs))
		return;
	key = strdup(n->key);
	if (!key)
		return;
	kl = strlen(key);
	if (n->kind == MCFS_KV_DIR && kl)
		key[kl - 1] = 0; /* the directory's name, not its prefix */
	if (!mooncake_store_stat_dir(fs->store, key, &st) &&
	    st.is_dir == (n->kind == MCFS_KV_DIR) &&
	    (st.is_dir || st.version == n->version)) {
		mcfs_node_set_attr(fs, n, &st.attr);
		atomic_store(&n->subdirs, st.subdirs);
	}
	free(key);
}

/* ---- extended attributes ---------------------------------------------- */

const char mcfs_kv_xattr_names[] = "user.mooncake.key\0"
				   "user.mooncake.replicas\0"
				   "user.mooncake.lease_ms\0"
				   "user.mooncake.holds\0"
				   "user.mooncake.pins\0";
const size_t mcfs_kv_xattr_names_len = sizeof(mcfs_kv_xattr_names) - 1;

static int text(char *buf, size_t len, const char *s)
{
	size_t n = strlen(s);

	if (n < len)
		memcpy(buf, s, n + 1);
	return n < len ? (int)n : -ERANGE;
}

int mcfs_kv_getxattr(struct mcfs *fs, struct mcfs_node *n, const char *name,
		     char *buf, size_t len)
{
	mooncake_obj_stat_t st;
	char v[64];
	int rc;

	if (n->kind != MCFS_KV_FILE)
		return -ENODATA;
	if (!strcmp(name, "user.mooncake.key"))
		return text(buf, len, n->key);
	rc = mcfs_wait_ready(fs);
	if (rc)
		return rc;
	if (!strcmp(name, "user.mooncake.replicas")) {
		rc = mooncake_store_replica_text(fs->store, n->key, buf, len);
		if (rc < 0)
			return mcfs_errno(rc);
		return (int)strlen(buf);
	}
	rc = mooncake_store_stat(fs->store, n->key, &st);
	if (rc)
		return mcfs_errno(rc);
	if (!strcmp(name, "user.mooncake.lease_ms"))
		snprintf(v, sizeof(v), "%" PRIu64, st.lease_ms);
	else if (!strcmp(name, "user.mooncake.holds"))
		snprintf(v, sizeof(v), "%u", st.holds);
	else if (!strcmp(name, "user.mooncake.pins"))
		snprintf(v, sizeof(v), "%s%s%s", st.hard_pin ? "hard" : "",
			 st.hard_pin && st.soft_pin_ms ? "," : "",
			 st.soft_pin_ms ? "soft" :
			 st.hard_pin	? "" :
					  "none");
	else
		return -ENODATA;
	return text(buf, len, v);
}
