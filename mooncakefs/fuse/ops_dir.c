/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Directories. kv/ and its subdirectories list through the master a page
 * (1000 names) at a time, so a directory of a million keys lists without
 * the daemon holding it; readdirplus hands the kernel each entry's
 * attributes from the listing, so `ls -l` costs no lookup per file.
 * Offsets are entry numbers: a reader going backwards restarts the
 * listing and skips forward.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_log.h"
#include "mcfs.h"

#define PAGE 1000

static void ents_free(struct mcfs_fh *fh)
{
	for (size_t i = 0; i < fh->n_ents; i++) {
		free(fh->ents[i].name);
		free(fh->ents[i].key);
	}
	free(fh->ents);
	fh->ents = NULL;
	fh->n_ents = fh->pos = 0;
}

static int ent_add(struct mcfs_fh *fh, size_t *cap, const char *name,
		   const char *key, bool dir, uint64_t size, uint64_t mtime)
{
	struct mcfs_dirent *e;

	if (fh->n_ents == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct mcfs_dirent *n = realloc(fh->ents, nc * sizeof(*n));
		if (!n)
			return ENOMEM;
		fh->ents = n;
		*cap = nc;
	}
	e = &fh->ents[fh->n_ents];
	e->name = strdup(name);
	e->key = strdup(key);
	if (!e->name || !e->key) {
		free(e->name);
		free(e->key);
		return ENOMEM;
	}
	e->is_dir = dir;
	e->size = size;
	e->mtime_ms = mtime;
	fh->n_ents++;
	return 0;
}

struct page_ctx {
	struct mcfs_fh *fh;
	size_t cap, plen;
	char *last; /* last name from the master (the next cursor) */
	char *last_file; /* dedup: a key "x" and the directory "x/" */
	int err;
};

static void page_cb(void *arg, const mooncake_list_entry_t *e)
{
	struct page_ctx *pc = arg;
	const char *rest = e->name + pc->plen;
	size_t len = strlen(rest);
	char *name;

	free(pc->last);
	pc->last = strdup(e->name);
	if (pc->err || !pc->last) {
		pc->err = ENOMEM;
		return;
	}
	if (mcfs_hidden_key(e->name))
		return;
	if (e->is_prefix && len)
		len--; /* the trailing delimiter */
	if (e->is_prefix && pc->last_file && strlen(pc->last_file) == len &&
	    !memcmp(pc->last_file, rest, len))
		return; /* shown as the file */
	name = mcfs_escape(rest, len);
	if (!name) {
		pc->err = ENOMEM;
		return;
	}
	if (strlen(name) <= 255)
		pc->err = ent_add(pc->fh, &pc->cap, name, e->name, e->is_prefix,
				  e->size, e->mtime_ms);
	if (!e->is_prefix) {
		free(pc->last_file);
		pc->last_file = name;
	} else {
		free(name);
	}
}

/*
 * Directories made here with mkdir and still empty. One that has keys
 * now is listed by the master already: it leaves the mkdir set.
 */
static int add_mkdirs(struct mcfs *fs, struct mcfs_fh *fh, size_t *cap)
{
	size_t plen = strlen(fh->prefix), n = 0;
	char **mine = NULL;
	int err = 0;

	pthread_mutex_lock(&fs->itab_lock);
	for (size_t i = 0; i < fs->n_mkdirs; i++) {
		const char *d = fs->mkdirs[i];
		size_t dl = strlen(d);
		if (dl <= plen + 1 || strncmp(d, fh->prefix, plen) ||
		    memchr(d + plen, '/', dl - plen - 1))
			continue;
		char **nm = realloc(mine, (n + 1) * sizeof(*mine));
		if (!nm || !(nm[n] = strdup(d))) {
			free(nm ? nm : mine);
			mine = NULL;
			n = 0;
			err = ENOMEM;
			break;
		}
		mine = nm;
		n++;
	}
	pthread_mutex_unlock(&fs->itab_lock);
	for (size_t i = 0; i < n; i++) {
		bool trunc;
		int keys = 0;
		size_t dl = strlen(mine[i]);
		if (mooncake_store_list(fs->store, mine[i], "", NULL, 1,
					mcfs_count_entry, &keys, &trunc) >= 0 &&
		    keys) {
			mcfs_mkdir_forget(fs, mine[i]);
		} else if (!err) {
			char *nm = mcfs_escape(mine[i] + plen, dl - plen - 1);
			err = nm ? ent_add(fh, cap, nm, mine[i], true, 0, 0) :
				   ENOMEM;
			free(nm);
		}
		free(mine[i]);
	}
	free(mine);
	return err;
}

/* Fetch the next page of a kv directory into fh->ents. */
static int next_page(struct mcfs *fs, struct mcfs_fh *fh)
{
	struct page_ctx pc = { .fh = fh, .plen = strlen(fh->prefix) };
	bool trunc = false;
	int rc;

	ents_free(fh);
	rc = mooncake_store_list(fs->store, fh->prefix, "/", fh->cursor, PAGE,
				 page_cb, &pc, &trunc);
	free(pc.last_file);
	if (rc < 0) {
		free(pc.last);
		return mcfs_errno(rc);
	}
	if (pc.err) {
		free(pc.last);
		return pc.err;
	}
	if (pc.last) {
		free(fh->cursor);
		fh->cursor = pc.last;
	}
	if (!trunc) {
		fh->eof = true;
		pc.err = add_mkdirs(fs, fh, &pc.cap);
	}
	return pc.err;
}

static int static_list(struct mcfs *fs, struct mcfs_fh *fh,
		       const struct mcfs_node *n)
{
	size_t cap = 0;
	int rc = 0;

	if (n->kind == MCFS_ROOT) {
		rc = ent_add(fh, &cap, "kv", "", true, 0, 0);
		if (!rc)
			rc = ent_add(fh, &cap, "ckpt", "", true, 0, 0);
		if (!rc)
			rc = ent_add(fh, &cap, ".mooncake", "", true, 0, 0);
	} else if (n->kind == MCFS_VDIR) {
		for (int i = 0; !rc && mcfs_vfiles[i]; i++)
			rc = ent_add(fh, &cap, mcfs_vfiles[i], mcfs_vfiles[i],
				     false, 0, 0);
	}
	(void)fs;
	fh->eof = true;
	return rc;
}

void mcfs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *n = mcfs_node_get(fs, ino);
	struct mcfs_fh *fh;

	if (!n || n->kind == MCFS_KV_FILE || n->kind == MCFS_VFILE) {
		fuse_reply_err(req, n ? ENOTDIR : ENOENT);
		return;
	}
	if (n->kind == MCFS_KV_DIR) {
		int rc = mcfs_wait_ready(fs);
		if (rc) {
			fuse_reply_err(req, rc);
			return;
		}
	}
	fh = calloc(1, sizeof(*fh));
	if (!fh || !(fh->prefix = strdup(n->key))) {
		free(fh);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fh->kind = FH_DIR;
	fh->dir_ino = ino;
	fh->next_off = 1;
	pthread_mutex_init(&fh->lock, NULL);
	fi->fh = (uintptr_t)fh;
	fuse_reply_open(req, fi);
}

static void restart(struct mcfs_fh *fh)
{
	ents_free(fh);
	free(fh->cursor);
	fh->cursor = NULL;
	fh->eof = false;
	fh->next_off = 1;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *dir = mcfs_node_get(fs, ino);
	struct mcfs_fh *fh = (struct mcfs_fh *)(uintptr_t)fi->fh;
	char *buf = malloc(size);
	size_t used = 0;
	int rc = 0;

	if (!buf || !dir) {
		free(buf);
		fuse_reply_err(req, buf ? ENOENT : ENOMEM);
		return;
	}
	pthread_mutex_lock(&fh->lock);
	/* off is the d_off of the last entry the reader consumed, which is
	 * the number of the entry to produce next. */
	if (off < fh->next_off || off == 0)
		restart(fh);
	for (;;) {
		const char *name;
		struct fuse_entry_param e = { 0 };
		struct mcfs_node *n = NULL;
		size_t need;

		if (fh->next_off < off && fh->next_off <= 2) {
			fh->next_off++; /* skipping back to off */
			continue;
		}
		if (fh->next_off == 1 || fh->next_off == 2) {
			name = fh->next_off == 1 ? "." : "..";
			e.attr.st_ino = fh->next_off == 1 ? ino : FUSE_ROOT_ID;
			e.attr.st_mode = S_IFDIR;
		} else {
			if (fh->pos == fh->n_ents) {
				if (fh->eof)
					break;
				if (dir->kind == MCFS_KV_DIR)
					rc = next_page(fs, fh);
				else
					rc = static_list(fs, fh, dir);
				if (rc || !fh->n_ents) {
					if (!rc && !fh->eof)
						continue;
					break;
				}
			}
			struct mcfs_dirent *d = &fh->ents[fh->pos];
			if (fh->next_off < off) {
				fh->pos++;
				fh->next_off++;
				continue;
			}
			name = d->name;
			if (plus) {
				enum mcfs_kind k =
					d->is_dir ?
						(dir->kind == MCFS_ROOT &&
								 !strcmp(name,
									 ".mooncake") ?
							 MCFS_VDIR :
						 dir->kind == MCFS_ROOT &&
								 !strcmp(name,
									 "ckpt") ?
							 MCFS_CKPT_DIR :
							 MCFS_KV_DIR) :
					dir->kind == MCFS_VDIR ? MCFS_VFILE :
								 MCFS_KV_FILE;
				n = mcfs_node_child(fs, dir, name, k, d->key,
						    d->size, d->mtime_ms);
				if (!n) {
					rc = ENOMEM;
					break;
				}
				e.ino = n->ino;
				mcfs_fill_attr(fs, n, &e.attr);
				e.attr_timeout = k == MCFS_VFILE ?
							 0 :
							 fs->o.attr_timeout;
				e.entry_timeout = k == MCFS_VFILE ?
							  0 :
							  fs->o.entry_timeout;
			} else {
				e.attr.st_ino = 0;
				e.attr.st_mode = d->is_dir ? S_IFDIR : S_IFREG;
			}
		}
		if (plus)
			need = fuse_add_direntry_plus(req, buf + used,
						      size - used, name, &e,
						      fh->next_off + 1);
		else
			need = fuse_add_direntry(req, buf + used, size - used,
						 name, &e.attr,
						 fh->next_off + 1);
		if (need > size - used) {
			if (n)
				mcfs_node_forget(fs, n->ino, 1);
			break;
		}
		used += need;
		if (fh->next_off > 2)
			fh->pos++;
		fh->next_off++;
	}
	pthread_mutex_unlock(&fh->lock);
	if (rc && !used)
		fuse_reply_err(req, rc);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

void mcfs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

void mcfs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

void mcfs_op_releasedir(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi)
{
	struct mcfs_fh *fh = (struct mcfs_fh *)(uintptr_t)fi->fh;

	(void)ino;
	ents_free(fh);
	free(fh->cursor);
	free(fh->prefix);
	pthread_mutex_destroy(&fh->lock);
	free(fh);
	fuse_reply_err(req, 0);
}
