/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Open, read, write, flush and release. Opening an object for reading
 * takes a hold on it (renewed while open, released at close), so `rm` or a
 * rename over its name cannot pull the memory from under the reader.
 * Reads land in registered 1 MiB buffers (the transfer engine's
 * destination) and go to the kernel from there.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "mc_log.h"
#include "mcfs.h"

#define BUF_SIZE (1u << 20)

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

static struct mcfs_fh *fh_new(enum mcfs_fh_kind kind)
{
	struct mcfs_fh *fh = calloc(1, sizeof(*fh));

	if (fh) {
		fh->kind = kind;
		pthread_mutex_init(&fh->lock, NULL);
	}
	return fh;
}

static void fh_free(struct mcfs *fs, struct mcfs_fh *fh)
{
	if (!fh)
		return;
	if (fh->kind == FH_READ && fh->obj)
		mooncake_store_object_close(fh->obj);
	if (fh->kind == FH_WRITE)
		mcfs_write_free(fs, fh);
	free(fh->text);
	pthread_mutex_destroy(&fh->lock);
	free(fh);
}

static struct mcfs_fh *fh_of(struct fuse_file_info *fi)
{
	return (struct mcfs_fh *)(uintptr_t)fi->fh;
}

static struct mcfs_fh *writer_fh(const char *key, uint64_t parent,
				 const char *name)
{
	struct mcfs_fh *fh = fh_new(FH_WRITE);

	if (!fh)
		return NULL;
	fh->key = strdup(key);
	fh->name = strdup(name);
	fh->parent_ino = parent;
	if (!fh->key || !fh->name) {
		free(fh->key);
		free(fh->name);
		free(fh);
		return NULL;
	}
	return fh;
}

/*
 * Open for writing without O_TRUNC (fio's layout, editors, appends): the
 * new version starts as a copy of the current object, staged in memory
 * like any write of unknown size (within staging_limit: ENOSPC beyond).
 */
static int copy_up(struct mcfs *fs, struct mcfs_fh *fh)
{
	mooncake_object_t obj;
	uint64_t size, off = 0;
	unsigned idx;
	char *b;
	int rc = mooncake_store_object_open(fs->store, fh->key, &obj);

	if (rc)
		return mcfs_errno(rc);
	size = mooncake_store_object_size(obj);
	b = buf_take(fs, &idx);
	while (!rc && off < size) {
		size_t want = size - off < BUF_SIZE ? (size_t)(size - off) :
						      BUF_SIZE;
		const void *p = b;
		int64_t n = mooncake_store_object_peek(obj, off, want, &p);

		if (n <= 0) {
			p = b;
			n = mooncake_store_object_read(obj, off, b, want);
		}
		if (n <= 0) {
			rc = n < 0 ? mcfs_errno((int)n) : EIO;
			break;
		}
		rc = mcfs_write_data(fs, fh, p, (size_t)n, off);
		off += (uint64_t)n;
	}
	buf_give(fs, idx);
	mooncake_store_object_close(obj);
	fh->copied = true;
	fh->dirty = false; /* a copy is no change */
	return rc;
}

void mcfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *n = mcfs_node_get(fs, ino);
	int acc = fi->flags & O_ACCMODE, rc;
	struct mcfs_fh *fh;

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (n->kind == MCFS_VFILE) {
		if (acc != O_RDONLY) {
			fuse_reply_err(req, EACCES);
			return;
		}
		fh = fh_new(FH_VIRT);
		rc = fh ? mcfs_virt_render(fs, n->name, &fh->text,
					   &fh->text_len) :
			  ENOMEM;
		if (rc) {
			fh_free(fs, fh);
			fuse_reply_err(req, rc);
			return;
		}
		fi->direct_io = 1; /* generated on open: no stable size */
		fi->fh = (uintptr_t)fh;
		fuse_reply_open(req, fi);
		return;
	}
	if (n->kind != MCFS_KV_FILE) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	rc = mcfs_wait_ready(fs);
	if (rc) {
		fuse_reply_err(req, rc);
		return;
	}
	if (acc != O_RDONLY) {
		if (fs->o.read_only) {
			fuse_reply_err(req, EROFS);
			return;
		}
		/* Objects are immutable: writing makes a new version that
		 * replaces the object at close. Without O_TRUNC it starts as
		 * a copy of the current bytes. */
		fh = writer_fh(n->key, n->parent ? n->parent->ino : 0, n->name);
		if (!fh) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		rc = fi->flags & O_TRUNC ? 0 : copy_up(fs, fh);
		if (rc) {
			fh_free(fs, fh);
			fuse_reply_err(req, rc);
			return;
		}
		fi->direct_io = 1;
		fi->fh = (uintptr_t)fh;
		fuse_reply_open(req, fi);
		return;
	}
	fh = fh_new(FH_READ);
	if (!fh) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = mooncake_store_object_open(fs->store, n->key, &fh->obj);
	if (rc) {
		fh_free(fs, fh);
		fuse_reply_err(req, mcfs_errno(rc));
		return;
	}
	fh->size = mooncake_store_object_size(fh->obj);
	if (fi->flags & O_DIRECT)
		fi->direct_io = 1;
	else
		fi->keep_cache = 1; /* this inode's bytes never change */
	fi->fh = (uintptr_t)fh;
	fuse_reply_open(req, fi);
}

void mcfs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		    mode_t mode, struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *p = mcfs_node_get(fs, parent), *n;
	struct fuse_entry_param e = { 0 };
	struct mcfs_fh *fh;
	size_t clen, plen;
	char *comp, *key;
	int rc;

	(void)mode;
	if (!p || p->kind != MCFS_KV_DIR) {
		fuse_reply_err(req, p ? EPERM : ENOENT);
		return;
	}
	if (fs->o.read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	rc = mcfs_wait_ready(fs);
	if (rc) {
		fuse_reply_err(req, rc);
		return;
	}
	comp = mcfs_unescape(name, &clen);
	plen = strlen(p->key);
	key = comp ? malloc(plen + clen + 1) : NULL;
	if (!key) {
		free(comp);
		fuse_reply_err(req, comp ? ENOMEM : EINVAL);
		return;
	}
	memcpy(key, p->key, plen);
	memcpy(key + plen, comp, clen);
	key[plen + clen] = 0;
	free(comp);
	if (mcfs_hidden_key(key)) {
		free(key);
		fuse_reply_err(req, EINVAL);
		return;
	}
	fh = writer_fh(key, p->ino, name);
	/* The file being written is a version of its own: size 0, mtime 0
	 * until it is committed (later lookups find the new object). */
	n = fh ? mcfs_node_child(fs, p, name, MCFS_KV_FILE, key, 0, 0) : NULL;
	free(key);
	if (!n) {
		fh_free(fs, fh);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	e.ino = n->ino;
	mcfs_fill_attr(fs, n, &e.attr);
	e.attr_timeout = 0;
	e.entry_timeout = 0;
	fi->direct_io = 1;
	fi->fh = (uintptr_t)fh;
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		mcfs_node_forget(fs, n->ino, 1);
		fh_free(fs, fh);
	}
}

void mcfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		  struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_fh *fh = fh_of(fi);
	unsigned idx;
	int64_t got;
	char *buf;

	(void)ino;
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	switch (fh->kind) {
	case FH_VIRT:
		if ((size_t)off >= fh->text_len)
			fuse_reply_buf(req, NULL, 0);
		else
			fuse_reply_buf(req, fh->text + off,
				       fh->text_len - (size_t)off < size ?
					       fh->text_len - (size_t)off :
					       size);
		return;
	case FH_WRITE: {
		struct iovec iov[16];
		size_t total;
		int n;

		pthread_mutex_lock(&fh->lock);
		n = mcfs_write_read(fh, (uint64_t)off, size, iov, 16, &total);
		if (n)
			fuse_reply_iov(req, iov, n);
		else
			fuse_reply_buf(req, NULL, 0);
		pthread_mutex_unlock(&fh->lock);
		return;
	}
	case FH_READ:
		break;
	default:
		fuse_reply_err(req, EBADF);
		return;
	}
	if ((uint64_t)off >= fh->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > BUF_SIZE)
		size = BUF_SIZE;
	{
		/* In this daemon's own segment: straight from there to the
		 * kernel, one copy (the hold keeps the bytes in place). */
		const void *p;
		int64_t n = mooncake_store_object_peek(fh->obj, (uint64_t)off,
						       size, &p);
		if (n > 0) {
			atomic_fetch_add(&fs->n_reads, 1);
			atomic_fetch_add(&fs->n_read_bytes, (uint64_t)n);
			fuse_reply_buf(req, p, (size_t)n);
			return;
		}
	}
	buf = buf_take(fs, &idx);
	got = mooncake_store_object_read(fh->obj, (uint64_t)off, buf, size);
	if (got < 0) {
		buf_give(fs, idx);
		atomic_fetch_add(&fs->n_errors, 1);
		fuse_reply_err(req, mcfs_errno((int)got));
		return;
	}
	atomic_fetch_add(&fs->n_reads, 1);
	atomic_fetch_add(&fs->n_read_bytes, (uint64_t)got);
	fuse_reply_buf(req, buf, (size_t)got);
	buf_give(fs, idx);
}

void mcfs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		   off_t off, struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_fh *fh = fh_of(fi);
	int rc;

	(void)ino;
	if (fh->kind != FH_WRITE || off < 0) {
		fuse_reply_err(req, EBADF);
		return;
	}
	rc = mcfs_write_data(fs, fh, buf, size, (uint64_t)off);
	if (rc)
		fuse_reply_err(req, rc);
	else
		fuse_reply_write(req, size);
}

void mcfs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
		       off_t length, struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_fh *fh = fh_of(fi);
	uint64_t end = (uint64_t)offset + (uint64_t)length;
	int rc = 0;

	(void)ino;
	if (mode) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (fh->kind != FH_WRITE) {
		fuse_reply_err(req, EBADF);
		return;
	}
	pthread_mutex_lock(&fh->lock);
	bool grow = end > fh->size;
	pthread_mutex_unlock(&fh->lock);
	if (grow)
		rc = mcfs_write_truncate(fs, fh, end);
	fuse_reply_err(req, rc);
}

void mcfs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_fh *fh = fh_of(fi);

	(void)ino;
	/* close(): the file's bytes become the object, and the error of
	 * doing so is close()'s (cp reports it). The name's cached dentry
	 * points at the old version: drop it before close() returns, so the
	 * next open by name finds the new object. (Close holds no lock the
	 * invalidation needs.) */
	if (fh->kind == FH_WRITE) {
		bool first = !fh->committed;
		int rc = mcfs_write_commit(fs, fh);
		if (first && !rc && fh->parent_ino)
			fuse_lowlevel_notify_inval_entry(fs->se, fh->parent_ino,
							 fh->name,
							 strlen(fh->name));
		fuse_reply_err(req, rc);
		return;
	}
	fuse_reply_err(req, 0);
}

void mcfs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		   struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	/* A file becomes an object at close; before that there is nothing
	 * durable to sync. */
	fuse_reply_err(req, 0);
}

void mcfs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_fh *fh = fh_of(fi);

	(void)ino;
	if (fh->kind == FH_WRITE && !fh->committed && !fh->failed)
		(void)mcfs_write_commit(fs, fh); /* no flush came (mmap) */
	fh_free(fs, fh);
	fuse_reply_err(req, 0);
}
