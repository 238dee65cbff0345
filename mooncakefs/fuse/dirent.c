/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Directory listings: a namespace fills a page of entries at a time
 * (kv/ from the master's List, 1000 names a page, so a directory of a
 * million keys lists without the daemon holding it; "/" and .mooncake/
 * from fixed names), and this file turns them into readdir replies.
 * readdirplus hands the kernel each entry's attributes from the listing,
 * so `ls -l` costs no lookup per file. Offsets are entry numbers: a reader
 * going backwards restarts the listing and skips forward.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mcfs.h"

int mcfs_dirent_add(struct mcfs_dirlist *d, const char *name, const char *key,
		    enum mcfs_kind kind, uint64_t version, uint64_t size,
		    uint64_t mtime_ms, const mooncake_fs_attr_t *attr)
{
	struct mcfs_dirent *e;

	if (d->n_ents == d->cap) {
		size_t nc = d->cap ? d->cap * 2 : 64;
		struct mcfs_dirent *n = realloc(d->ents, nc * sizeof(*n));
		if (!n)
			return -ENOMEM;
		d->ents = n;
		d->cap = nc;
	}
	e = &d->ents[d->n_ents];
	e->name = strdup(name);
	e->key = strdup(key);
	if (!e->name || !e->key) {
		free(e->name);
		free(e->key);
		return -ENOMEM;
	}
	e->kind = kind;
	e->version = version;
	e->size = size;
	e->mtime_ms = mtime_ms;
	e->attr = attr ? *attr : (mooncake_fs_attr_t){ 0 };
	d->n_ents++;
	return 0;
}

void mcfs_dirlist_clear(struct mcfs_dirlist *d)
{
	for (size_t i = 0; i < d->n_ents; i++) {
		free(d->ents[i].name);
		free(d->ents[i].key);
	}
	d->n_ents = d->pos = 0;
}

void mcfs_dirlist_free(struct mcfs_dirlist *d)
{
	mcfs_dirlist_clear(d);
	free(d->ents);
	free(d->cursor);
	free(d->prefix);
	free(d->chain);
	free(d->chain_lens);
	memset(d, 0, sizeof(*d));
}

static void restart(struct mcfs_dirlist *d)
{
	mcfs_dirlist_clear(d);
	free(d->cursor);
	d->cursor = NULL;
	d->chain_n = 0;
	d->eof = false;
	d->err = 0;
	d->next_off = 1;
}

/* The entry for readdirplus: a looked-up node with its attributes. */
static int plus_entry(struct mcfs *fs, struct mcfs_node *dir,
		      const struct mcfs_dirent *de, struct fuse_entry_param *e,
		      struct mcfs_node **out)
{
	struct mcfs_node *n;
	/* A file this mount is creating (version 0, mcfs_kv_list): its own
	 * node, not cached (it changes as it is written); none when it was
	 * published or closed meanwhile: the name alone (ino 0). */
	bool creating = de->kind == MCFS_KV_FILE && !de->version;
	bool gen = de->kind == MCFS_VFILE || creating; /* made at open */

	if (creating) {
		n = mcfs_node_creating(fs, dir, de->name);
		if (!n) {
			e->attr.st_mode = S_IFREG; /* st_ino 0, as readdir's */
			*out = NULL;
			return 0;
		}
	} else {
		n = mcfs_node_child(fs, dir, de->name, de->kind, de->key,
				    de->version, de->size, de->mtime_ms,
				    de->kind == MCFS_KV_FILE ||
						    de->kind == MCFS_KV_DIR ||
						    de->kind == MCFS_CKPT_NODE ?
					    &de->attr :
					    NULL);
	}
	if (!n)
		return -ENOMEM;
	e->ino = n->ino;
	mcfs_fill_attr(fs, n, &e->attr);
	e->attr_timeout = gen ? 0 : fs->o.attr_timeout;
	e->entry_timeout = gen ? 0 : fs->o.entry_timeout;
	*out = n;
	return 0;
}

void mcfs_dirlist_reply(fuse_req_t req, struct mcfs *fs, struct mcfs_node *dir,
			struct mcfs_dirlist *d, size_t size, off_t off,
			bool plus,
			int (*next_page)(struct mcfs *fs, struct mcfs_node *dir,
					 struct mcfs_dirlist *d))
{
	char *buf = malloc(size);
	size_t used = 0;
	int rc = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* off is the d_off of the last entry the reader consumed, which is
	 * the number of the entry to produce next. */
	if (off < d->next_off || off == 0)
		restart(d);
	if (d->err && off == d->next_off) {
		/* Met after the last reply's entries: said now, where the
		 * listing goes on (an empty reply would end it, short). */
		fuse_reply_err(req, -d->err);
		d->err = 0;
		free(buf);
		return;
	}
	for (;;) {
		const char *name;
		struct fuse_entry_param e = { 0 };
		struct mcfs_node *n = NULL;
		size_t need;

		if (d->next_off < off && d->next_off <= 2) {
			d->next_off++; /* skipping back to off */
			continue;
		}
		if (d->next_off == 1 || d->next_off == 2) {
			name = d->next_off == 1 ? "." : "..";
			e.attr.st_ino = d->next_off == 1 ? dir->ino :
							   FUSE_ROOT_ID;
			e.attr.st_mode = S_IFDIR;
		} else {
			if (d->pos == d->n_ents) {
				if (d->eof)
					break;
				mcfs_dirlist_clear(d);
				rc = next_page(fs, dir, d);
				if (rc || !d->n_ents) {
					if (!rc && !d->eof)
						continue;
					break;
				}
			}
			struct mcfs_dirent *de = &d->ents[d->pos];
			if (d->next_off < off) {
				d->pos++;
				d->next_off++;
				continue;
			}
			name = de->name;
			if (plus) {
				rc = plus_entry(fs, dir, de, &e, &n);
				if (rc)
					break;
			} else if (S_ISLNK(de->attr.mode)) {
				e.attr.st_mode = S_IFLNK;
			} else {
				e.attr.st_mode =
					de->kind == MCFS_KV_FILE ||
							de->kind == MCFS_VFILE ?
						S_IFREG :
						S_IFDIR;
			}
		}
		if (plus)
			need = fuse_add_direntry_plus(req, buf + used,
						      size - used, name, &e,
						      d->next_off + 1);
		else
			need = fuse_add_direntry(req, buf + used, size - used,
						 name, &e.attr,
						 d->next_off + 1);
		if (need > size - used) {
			if (n)
				mcfs_node_forget(fs, n->ino, 1);
			break;
		}
		used += need;
		if (d->next_off > 2)
			d->pos++;
		d->next_off++;
	}
	if (rc && !used) {
		fuse_reply_err(req, -rc);
	} else {
		d->err = rc; /* for the next call */
		fuse_reply_buf(req, buf, used);
	}
	free(buf);
}
