/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The FUSE operations. Each finds its node or handle and dispatches on
 * its kind to the namespace that owns it (root.c, kv.c and file.c,
 * virt.c); what is the same for every namespace (attributes, statfs,
 * forgetting inodes, directory handles) is here. Namespace functions
 * return a negative errno; the reply gets -rc.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "mc_log.h"
#include "mcfs.h"
#include "mooncake/mc_err.h"

struct mcfs_fh *mcfs_fh_new(enum mcfs_fh_kind kind, uint64_t ino)
{
	struct mcfs_fh *fh = calloc(1, sizeof(*fh));

	if (fh) {
		fh->kind = kind;
		fh->ino = ino;
		pthread_mutex_init(&fh->lock, NULL);
	}
	return fh;
}

void mcfs_fh_free(struct mcfs *fs, struct mcfs_fh *fh)
{
	if (!fh)
		return;
	/* A thread that replied under the handle's lock (a read, a page of
	 * a listing) may still be on its way to unlocking it: the program
	 * it woke can close at once, and the release run on another thread.
	 * Wait for it, or its unlock would write into freed memory. */
	pthread_mutex_lock(&fh->lock);
	pthread_mutex_unlock(&fh->lock);
	if (fh->kind == FH_READ)
		mcfs_ra_close(fs->ra, fh->ra); /* before its object */
	if (fh->kind == FH_READ && fh->obj)
		mooncake_store_object_close(fh->obj);
	if (fh->kind == FH_WRITE)
		mcfs_file_free(fs, fh);
	if (fh->kind == FH_DIR)
		mcfs_dirlist_free(&fh->dir);
	if (fh->kind == FH_CKPT)
		mooncake_ckpt_file_close(fh->ckf);
	if (fh->kind == FH_STAGE && fh->fd >= 0)
		close(fh->fd);
	free(fh->text);
	pthread_mutex_destroy(&fh->lock);
	free(fh);
}

static struct mcfs_fh *fh_of(struct fuse_file_info *fi)
{
	return fi ? (struct mcfs_fh *)(uintptr_t)fi->fh : NULL;
}

/* Node of ino or reply ENOENT. */
static struct mcfs_node *node_or_reply(fuse_req_t req, struct mcfs *fs,
				       fuse_ino_t ino)
{
	struct mcfs_node *n = mcfs_node_get(fs, ino);

	if (!n)
		fuse_reply_err(req, ENOENT);
	return n;
}

static void reply_rc(fuse_req_t req, int rc)
{
	fuse_reply_err(req, -rc);
}

/* Generated files change at every open: never cached. */
static double attr_timeout(struct mcfs *fs, const struct mcfs_node *n)
{
	return n->kind == MCFS_VFILE || n->kind == MCFS_CKPT_STAGE ?
		       0 :
		       fs->o.attr_timeout;
}

static void reply_entry(fuse_req_t req, struct mcfs *fs, struct mcfs_node *n)
{
	struct fuse_entry_param e = { .ino = n->ino };

	mcfs_fill_attr(fs, n, &e.attr);
	e.attr_timeout = attr_timeout(fs, n);
	e.entry_timeout = n->kind == MCFS_VFILE || n->kind == MCFS_CKPT_STAGE ?
				  0 :
				  fs->o.entry_timeout;
	if (fuse_reply_entry(req, &e) == -ENOENT)
		mcfs_node_forget(fs, n->ino, 1); /* the caller went away */
}

/* ---- the session --------------------------------------------------------- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	/* 1 MiB requests (max_pages 256 where the kernel has it). */
	conn->max_write = 1u << 20;
	conn->max_read = 1u << 20;
	conn->max_readahead = 1u << 20;
	conn->want |= FUSE_CAP_ATOMIC_O_TRUNC; /* open(O_TRUNC) = replace */
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	conn->want &= ~(unsigned)FUSE_CAP_READDIRPLUS_AUTO;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
	/* Locks by name, not by the kernel's inodes (locks.c). */
	if (conn->capable & FUSE_CAP_FLOCK_LOCKS)
		conn->want |= FUSE_CAP_FLOCK_LOCKS;
	if (conn->capable & FUSE_CAP_POSIX_LOCKS)
		conn->want |= FUSE_CAP_POSIX_LOCKS;
	(void)userdata;
}

static void op_destroy(void *userdata)
{
	struct mcfs *fs = userdata;

	mcfs_watch_stop(fs);
	pthread_mutex_lock(&fs->ready_lock);
	if (fs->ready == 0)
		fs->ready = -1;
	pthread_mutex_unlock(&fs->ready_lock);
}

/* ---- names ----------------------------------------------------------- */

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *p = node_or_reply(req, fs, parent), *n = NULL;
	int rc;

	if (!p)
		return;
	atomic_fetch_add(&fs->n_lookups, 1);
	switch (p->kind) {
	case MCFS_ROOT:
		rc = mcfs_root_lookup(fs, p, name, &n);
		break;
	case MCFS_CKPT_DIR:
	case MCFS_CKPT_NODE:
		rc = mcfs_ckpt_lookup(fs, p, name, &n);
		break;
	case MCFS_CKPT_STAGE:
		rc = mcfs_cstage_lookup(fs, p, name, &n);
		break;
	case MCFS_KV_DIR:
		rc = mcfs_kv_lookup(fs, p, name, fuse_req_ctx(req)->pid, &n);
		break;
	case MCFS_VDIR:
		rc = mcfs_virt_lookup(fs, p, name, &n);
		break;
	default:
		rc = -ENOTDIR;
		break;
	}
	if (rc) {
		reply_rc(req, rc);
	} else if (n) {
		reply_entry(req, fs, n);
	} else {
		/* Absent: kv/ names may appear any time, so the kernel
		 * remembers the absence for negative_timeout only. */
		struct fuse_entry_param e = { .ino = 0 };
		e.entry_timeout = p->kind == MCFS_KV_DIR ||
						  p->kind == MCFS_CKPT_DIR ||
						  p->kind == MCFS_CKPT_STAGE ?
					  fs->o.negative_timeout :
					  fs->o.entry_timeout;
		fuse_reply_entry(req, &e);
	}
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	mcfs_node_forget(fuse_req_userdata(req), ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct mcfs *fs = fuse_req_userdata(req);

	for (size_t i = 0; i < count; i++)
		mcfs_node_forget(fs, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void reply_attr(fuse_req_t req, struct mcfs *fs, struct mcfs_node *n,
		       struct mcfs_fh *fh)
{
	struct stat st;

	mcfs_fill_attr(fs, n, &st);
	if (fh && fh->kind == FH_WRITE)
		st.st_size = (off_t)mcfs_file_size(fh);
	fuse_reply_attr(req, &st,
			fh && fh->kind == FH_WRITE ? 0 : attr_timeout(fs, n));
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *n = node_or_reply(req, fs, ino);

	if (!n)
		return;
	/* The kernel's copy expired, or a change through this mount made
	 * it drop it (a directory's mtime after a create): ask again. */
	mcfs_kv_refresh(fs, n);
	reply_attr(req, fs, n, fh_of(fi));
}

/* A handle read or written after a flush: a copy of its descriptor is
 * still open (no release on its way). One load when it was not flushed. */
static void fh_used(struct mcfs *fs, struct mcfs_fh *fh)
{
	if (atomic_load_explicit(&fh->closing, memory_order_relaxed))
		mcfs_node_closing(fs, fh, false);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *n = node_or_reply(req, fs, ino);
	struct mcfs_fh *fh = fh_of(fi);
	int rc = 0;

	if (!n)
		return;
	if (n->kind == MCFS_CKPT_STAGE) {
		rc = mcfs_cstage_setattr(fs, n, attr, to_set, fh);
		if (rc)
			reply_rc(req, rc);
		else
			reply_attr(req, fs, n, fh);
		return;
	}
	if (n->kind != MCFS_KV_FILE && n->kind != MCFS_KV_DIR)
		rc = -EPERM; /* "/", ckpt/ and .mooncake/ are fixed */
	else if ((to_set & FUSE_SET_ATTR_SIZE) && attr->st_size < 0)
		rc = -EINVAL;
	else if ((to_set & FUSE_SET_ATTR_SIZE) && fh && fh->kind == FH_WRITE) {
		fh_used(fs, fh);
		rc = mcfs_file_truncate(fs, fh, (uint64_t)attr->st_size);
	} else if (to_set & FUSE_SET_ATTR_SIZE)
		rc = n->kind == MCFS_KV_FILE ?
			     mcfs_kv_truncate(fs, n, (uint64_t)attr->st_size) :
			     -EISDIR;
	if (!rc && (to_set & ~FUSE_SET_ATTR_SIZE))
		rc = mcfs_kv_setattr(fs, n, attr, to_set);
	if (rc) {
		reply_rc(req, rc);
		return;
	}
	if ((to_set & FUSE_SET_ATTR_SIZE) && !(fh && fh->kind == FH_WRITE)) {
		struct stat st;
		mcfs_fill_attr(fs, n, &st);
		st.st_size = attr->st_size;
		fuse_reply_attr(req, &st, 0);
		return;
	}
	reply_attr(req, fs, n, fh);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct mcfs *fs = fuse_req_userdata(req);
	mooncake_pool_stat_t ps;
	struct statvfs sv = { 0 };
	int rc = mcfs_wait_ready(fs);

	(void)ino;
	if (!rc)
		rc = mcfs_errno(mooncake_store_pool_stat(fs->store, &ps));
	if (rc) {
		reply_rc(req, rc);
		return;
	}
	/* df's total and used are the master's capacity and allocation. */
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_blocks = ps.capacity / 4096;
	sv.f_bfree = sv.f_bavail = ps.capacity > ps.allocated ?
					   (ps.capacity - ps.allocated) / 4096 :
					   0;
	sv.f_files = ps.keys + 1000000;
	sv.f_ffree = sv.f_favail = 1000000;
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}

/* The namespace of a directory where names are made and removed. */
static int dir_for_change(struct mcfs *fs, fuse_ino_t ino,
			  struct mcfs_node **out)
{
	*out = mcfs_node_get(fs, ino);
	if (!*out)
		return -ENOENT;
	switch ((*out)->kind) {
	case MCFS_KV_DIR:
		return 0;
	case MCFS_KV_FILE:
	case MCFS_VFILE:
		return -ENOTDIR;
	default: /* "/", ckpt/ (reserved), .mooncake/: fixed */
		return -EPERM;
	}
}

/* ckpt/, a checkpoint's directories, and staged ones (ckpt_stage.c). */
static bool in_ckpt(struct mcfs *fs, fuse_ino_t ino, struct mcfs_node **out)
{
	*out = mcfs_node_get(fs, ino);
	return *out && ((*out)->kind == MCFS_CKPT_DIR ||
			(*out)->kind == MCFS_CKPT_NODE ||
			(*out)->kind == MCFS_CKPT_STAGE);
}

/* A staged name under p (ckpt/ or a staged directory), with a lookup
 * reference dropped at once: is it there? */
static bool staged(struct mcfs *fs, struct mcfs_node *p, const char *name)
{
	struct mcfs_node *n = NULL;

	if (p->kind != MCFS_CKPT_DIR && p->kind != MCFS_CKPT_STAGE)
		return false;
	if (mcfs_cstage_lookup(fs, p, name, &n) || !n)
		return false;
	mcfs_node_forget(fs, n->ino, 1);
	return true;
}

static int ckpt_remove(struct mcfs *fs, struct mcfs_node *p, const char *name,
		       bool is_dir)
{
	if (p->kind == MCFS_CKPT_STAGE || staged(fs, p, name))
		return mcfs_cstage_unlink(fs, p, name, is_dir);
	return mcfs_ckpt_unlink(fs, p, name, is_dir);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *p;
	int rc;

	if (in_ckpt(fs, parent, &p)) {
		reply_rc(req, ckpt_remove(fs, p, name, false));
		return;
	}
	rc = dir_for_change(fs, parent, &p);
	reply_rc(req, rc ? rc : mcfs_kv_unlink(fs, p, name));
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *p, *np = mcfs_node_get(fs, newparent);
	int rc;

	if (in_ckpt(fs, parent, &p)) {
		/* Staged names move (a staged root renamed to its final name
		 * is sealed); published ones are immutable, links move. */
		if (!np ||
		    (np->kind != MCFS_CKPT_DIR && np->kind != MCFS_CKPT_STAGE))
			rc = np ? -EXDEV : -ENOENT;
		else if (p->kind == MCFS_CKPT_STAGE || staged(fs, p, name))
			rc = mcfs_cstage_rename(fs, p, name, np, newname,
						flags);
		else if (p->kind == MCFS_CKPT_DIR && np->kind == MCFS_CKPT_DIR)
			rc = mcfs_ckpt_rename_link(fs, name, newname, flags);
		else
			rc = -EPERM;
		/* The kernel now calls the moved inode by its new name. */
		if (!rc && np->kind == MCFS_CKPT_DIR)
			mcfs_node_renamed(fs, p, name, np, newname, newname);
		reply_rc(req, rc);
		return;
	}
	rc = dir_for_change(fs, parent, &p);
	if (!rc && !np)
		rc = -ENOENT;
	if (!rc)
		rc = mcfs_kv_rename(fs, p, name, np, newname, flags);
	reply_rc(req, rc);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *p, *n = NULL;
	mooncake_fs_attr_t a;
	int rc;

	if (in_ckpt(fs, parent, &p)) {
		rc = p->kind == MCFS_CKPT_NODE ?
			     -EPERM :
			     mcfs_cstage_mkdir(fs, p, name, mode, &n);
	} else if (!(rc = dir_for_change(fs, parent, &p))) {
		a = mcfs_new_attr(fs, req, p, S_IFDIR | (mode & 07777));
		rc = mcfs_kv_mkdir(fs, p, name, &a, &n);
	}
	if (rc)
		reply_rc(req, rc);
	else
		reply_entry(req, fs, n);
}

/* Regular files only: FIFOs, sockets and device nodes are not objects. */
static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *p, *n = NULL;
	struct mcfs_fh *fh = NULL;
	mooncake_fs_attr_t a;
	int rc = S_ISREG(mode) ? dir_for_change(fs, parent, &p) : -EPERM;

	(void)rdev;
	if (!rc) {
		/* Made at once, as an O_EXCL create. */
		a = mcfs_new_attr(fs, req, p, mode);
		rc = mcfs_kv_create(fs, p, name, &a, O_EXCL, &n, &fh);
	}
	if (!rc) {
		mcfs_node_close(fs, n->ino, true);
		mcfs_fh_free(fs, fh);
	}
	if (rc)
		reply_rc(req, rc);
	else
		reply_entry(req, fs, n);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *p, *n = NULL;
	mooncake_fs_attr_t a;
	int rc;

	if (in_ckpt(fs, parent, &p)) {
		rc = p->kind == MCFS_CKPT_STAGE ?
			     mcfs_cstage_symlink(fs, p, link, name, &n) :
		     p->kind == MCFS_CKPT_DIR ?
			     mcfs_ckpt_symlink(fs, p, link, name, &n) :
			     -EPERM;
	} else if (!(rc = dir_for_change(fs, parent, &p))) {
		a = mcfs_new_attr(fs, req, p, S_IFLNK | 0777);
		rc = mcfs_kv_symlink(fs, p, name, link, &a, &n);
	}
	if (rc)
		reply_rc(req, rc);
	else
		reply_entry(req, fs, n);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *n = node_or_reply(req, fs, ino);
	char buf[4096];
	int rc;

	if (!n)
		return;
	rc = n->kind == MCFS_CKPT_NODE ?
		     mcfs_ckpt_readlink(fs, n, buf, sizeof(buf)) :
	     n->kind == MCFS_CKPT_STAGE ?
		     mcfs_cstage_readlink(fs, n, buf, sizeof(buf)) :
		     mcfs_kv_readlink(fs, n, buf, sizeof(buf));
	if (rc < 0)
		reply_rc(req, rc);
	else
		fuse_reply_readlink(req, buf);
}

/* Hard links: an object has one name. */
static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	(void)ino;
	(void)newparent;
	(void)newname;
	fuse_reply_err(req, EPERM);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *p;
	int rc;

	if (in_ckpt(fs, parent, &p)) {
		reply_rc(req, ckpt_remove(fs, p, name, true));
		return;
	}
	rc = dir_for_change(fs, parent, &p);

	reply_rc(req, rc ? rc : mcfs_kv_rmdir(fs, p, name));
}

/* ---- extended attributes ---------------------------------------------- */

static void reply_xattr(fuse_req_t req, const char *v, size_t len, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, v, len);
}

/*
 * Without -o xattr, getxattr and listxattr are not implemented: after the
 * first ENOSYS the kernel sends neither again, so `ls -l` (which asks every
 * file for security.selinux and system.posix_acl_access) costs no round
 * trip per file. setxattr (user.mooncake.seal) is unaffected.
 */
static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *n;

	if (!fs->o.xattr) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	n = mcfs_node_get(fs, ino);
	if (n && n->kind == MCFS_KV_FILE)
		reply_xattr(req, mcfs_kv_xattr_names, mcfs_kv_xattr_names_len,
			    size);
	else
		reply_xattr(req, "", 0, size);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *n;
	char buf[8192];
	int rc;

	atomic_fetch_add(&fs->n_getxattr, 1);
	if (!fs->o.xattr) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	/* ls -l asks every file for security.* and system.posix_acl_*:
	 * answer those before touching the inode table. */
	if (strncmp(name, "user.mooncake.", 14)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	n = mcfs_node_get(fs, ino);
	rc = n ? mcfs_kv_getxattr(fs, n, name, buf, sizeof(buf)) : -ENODATA;
	if (rc < 0)
		reply_rc(req, rc);
	else
		reply_xattr(req, buf, (size_t)rc, size);
}

/* user.mooncake.seal on a staged checkpoint (mooncake ckpt seal NAME):
 * publish it; on a published one: EEXIST (sealed already). Nothing else
 * is settable. */
static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *n = mcfs_node_get(fs, ino);

	(void)value;
	(void)size;
	(void)flags;
	if (n && n->kind == MCFS_CKPT_STAGE &&
	    !strcmp(name, "user.mooncake.seal")) {
		reply_rc(req, mcfs_cstage_seal_attr(fs, n));
		return;
	}
	if (n && n->kind == MCFS_CKPT_NODE && n->parent &&
	    n->parent->kind == MCFS_CKPT_DIR && n->version &&
	    !strcmp(name, "user.mooncake.seal")) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	fuse_reply_err(req, ENOTSUP);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino;
	(void)name;
	fuse_reply_err(req, ENOTSUP);
}

/* ---- files ------------------------------------------------------------ */

static void reply_open(fuse_req_t req, struct mcfs *fs, struct mcfs_fh *fh,
		       struct fuse_file_info *fi)
{
	/* A version's bytes never change: the kernel may keep its pages.
	 * What is written, and generated files, bypass the page cache. */
	if ((fh->kind == FH_READ || fh->kind == FH_CKPT) &&
	    !(fi->flags & O_DIRECT))
		fi->keep_cache = 1;
	else
		fi->direct_io = 1;
	fi->fh = (uintptr_t)fh;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		/* interrupted: the kernel will not release it */
		if (fh->kind == FH_READ || fh->kind == FH_WRITE)
			mcfs_node_close(fs, fh->ino, fh->kind == FH_WRITE);
		mcfs_fh_free(fs, fh);
	}
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *n = node_or_reply(req, fs, ino);
	struct mcfs_fh *fh = NULL;
	int rc;

	if (!n)
		return;
	switch (n->kind) {
	case MCFS_KV_FILE:
		rc = mcfs_kv_open(fs, n, fi->flags, fuse_req_ctx(req)->pid,
				  &fh);
		break;
	case MCFS_VFILE:
		rc = mcfs_virt_open(fs, n, fi->flags, &fh);
		break;
	case MCFS_CKPT_NODE:
		rc = mcfs_ckpt_open(fs, n, fi->flags, &fh);
		break;
	case MCFS_CKPT_STAGE:
		rc = mcfs_cstage_open(fs, n, fi->flags, &fh);
		break;
	default:
		rc = -EISDIR;
		break;
	}
	if (rc)
		reply_rc(req, rc);
	else
		reply_open(req, fs, fh, fi);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *p, *n = NULL;
	struct fuse_entry_param e = { 0 };
	struct mcfs_fh *fh = NULL;
	mooncake_fs_attr_t a;
	int rc;

	if (in_ckpt(fs, parent, &p)) {
		/* Files belong in a (staged) checkpoint's directory. */
		rc = p->kind == MCFS_CKPT_STAGE ?
			     mcfs_cstage_create(fs, p, name, mode, fi->flags,
						&n, &fh) :
			     -EPERM;
	} else {
		rc = dir_for_change(fs, parent, &p);
		if (!rc) {
			/* Within this mount the kernel's lookup made O_EXCL
			 * exclusive already; between mounts only when asked
			 * (excl_create: a publish at each such create, which
			 * cp, tar and rsync make for every file). */
			int fl = fs->o.excl_create ? fi->flags :
						     fi->flags & ~O_EXCL;
			a = mcfs_new_attr(fs, req, p, S_IFREG | (mode & 07777));
			rc = mcfs_kv_create(fs, p, name, &a, fl, &n, &fh);
		}
	}
	if (rc) {
		reply_rc(req, rc);
		return;
	}
	e.ino = n->ino;
	mcfs_fill_attr(fs, n, &e.attr);
	fi->direct_io = 1;
	fi->fh = (uintptr_t)fh;
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		mcfs_node_close(fs, n->ino, true);
		mcfs_node_forget(fs, n->ino, 1);
		mcfs_fh_free(fs, fh);
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_fh *fh = fh_of(fi);

	(void)ino;
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	switch (fh->kind) {
	case FH_READ:
		fh_used(fs, fh);
		mcfs_kv_read(req, fs, fh, size, off);
		return;
	case FH_WRITE: {
		struct iovec iov[16];
		size_t total;
		int n;

		fh_used(fs, fh);
		n = mcfs_file_read(fs, fh, (uint64_t)off, size, iov, 16,
				   &total);
		if (n < 0) {
			reply_rc(req, n);
			return;
		}
		if (n)
			fuse_reply_iov(req, iov, n);
		else
			fuse_reply_buf(req, NULL, 0);
		mcfs_file_read_done(fh);
		return;
	}
	case FH_CKPT:
		mcfs_ckpt_read(req, fs, fh, size, off);
		return;
	case FH_STAGE:
		mcfs_cstage_read(req, fh, size, off);
		return;
	case FH_VIRT:
		/* Reply under the lock: the reader woken by the reply may
		 * close at once, and the release (mcfs_fh_free) frees the
		 * text only after this thread is done with it. */
		pthread_mutex_lock(&fh->lock);
		if ((size_t)off >= fh->text_len)
			fuse_reply_buf(req, NULL, 0);
		else
			fuse_reply_buf(req, fh->text + off,
				       fh->text_len - (size_t)off < size ?
					       fh->text_len - (size_t)off :
					       size);
		pthread_mutex_unlock(&fh->lock);
		return;
	default:
		fuse_reply_err(req, EBADF);
	}
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_fh *fh = fh_of(fi);
	int rc;

	(void)ino;
	if (fh->kind == FH_STAGE && off >= 0) {
		rc = mcfs_cstage_write(fh, buf, size, off);
		if (rc)
			reply_rc(req, rc);
		else
			fuse_reply_write(req, size);
		return;
	}
	if (fh->kind != FH_WRITE || off < 0) {
		fuse_reply_err(req, EBADF);
		return;
	}
	fh_used(fs, fh);
	/* A plain load on every later write: no locked instruction. */
	if (!atomic_load_explicit(&fh->wrote, memory_order_relaxed) &&
	    !atomic_exchange(&fh->wrote, true) && fuse_req_ctx(req)->uid)
		mcfs_kv_drop_privs(fs, fh->node);
	rc = mcfs_file_write(fs, fh, buf, size, (uint64_t)off,
			     (fi->flags & O_APPEND) != 0);
	if (rc)
		reply_rc(req, rc);
	else
		fuse_reply_write(req, size);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
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
	fh_used(fs, fh);
	if (end > mcfs_file_size(fh))
		rc = mcfs_file_truncate(fs, fh, end);
	reply_rc(req, rc);
}

/*
 * Publish a handle's changes; after a flush, drop this mount's dentry of
 * the name before close() returns, so the next open by name finds the new
 * version (close holds no lock the invalidation needs), unless the dentry
 * is the handle's node, now standing for that version (it keeps its inode
 * number: tar compares it). An fsync holds
 * the file's inode lock, which a rename in the directory may wait for
 * while holding the directory's: it leaves the dentry to the change feed
 * (milliseconds) rather than risk that deadlock.
 */
static int publish(struct mcfs *fs, struct mcfs_fh *fh, bool invalidate)
{
	bool changed = false;
	int rc = mcfs_file_publish(fs, fh, &changed);

	if (changed && invalidate && fh->parent_ino && !fh->bound)
		fuse_lowlevel_notify_inval_entry(fs->se, fh->parent_ino,
						 fh->name, strlen(fh->name));
	return rc;
}

/* ---- locks ------------------------------------------------------------- */

/* The name ino's locks are kept under (malloc'd), or NULL with ENOENT
 * replied. */
static char *lock_key_or_reply(fuse_req_t req, fuse_ino_t ino)
{
	char *key = mcfs_node_lock_key(fuse_req_userdata(req), ino);

	if (!key)
		fuse_reply_err(req, ENOENT);
	return key;
}

/* An unlock through a handle open for writing publishes its changes
 * first, as a close does before it drops its locks: whoever the lock lets
 * in next reads them. A failed publish leaves the changes for the next
 * flush; the lock is released anyway. */
static void publish_unlocking(struct mcfs *fs, struct mcfs_fh *fh)
{
	if (fh && fh->kind == FH_WRITE)
		(void)publish(fs, fh, true);
}

static void op_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     int op)
{
	struct mcfs *fs = fuse_req_userdata(req);
	char *key = lock_key_or_reply(req, ino);

	if (key && (op & LOCK_UN))
		publish_unlocking(fs, fh_of(fi));
	if (key)
		mcfs_locks_flock(fs, req, key, fh_of(fi), fi->lock_owner, op);
	free(key);
}

static void op_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     struct flock *lock)
{
	char *key = lock_key_or_reply(req, ino);

	if (key)
		mcfs_locks_getlk(fuse_req_userdata(req), req, key,
				 fi->lock_owner, lock);
	free(key);
}

static void op_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     struct flock *lock, int sleep)
{
	struct mcfs *fs = fuse_req_userdata(req);
	char *key = lock_key_or_reply(req, ino);

	if (key && lock->l_type == F_UNLCK)
		publish_unlocking(fs, fh_of(fi));
	if (key)
		mcfs_locks_setlk(fs, req, key, fh_of(fi), fi->lock_owner, lock,
				 sleep != 0);
	free(key);
}

/* A close by a process ends its POSIX locks (flush), the description's
 * release its flock locks: after what it wrote is published, so that a
 * process the lock lets in reads it. */
static void drop_locks(struct mcfs *fs, fuse_ino_t ino,
		       const struct fuse_file_info *fi, bool flock)
{
	char *key = mcfs_node_lock_key(fs, ino);

	if (key)
		mcfs_locks_drop(fs, key, fi->lock_owner, flock);
	free(key);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_fh *fh = fh_of(fi);
	int rc;

	/* Every close() of a descriptor of the file: what it wrote is the
	 * name's version, and the error of making it so is close()'s (cp
	 * reports it). The handle stays writable through other copies. */
	rc = fh->kind == FH_WRITE ? publish(fs, fh, true) : 0;
	drop_locks(fs, ino, fi, false);
	/* Most flushes are a close(2), whose release the kernel sends after
	 * close returns: an open of the inode meanwhile waits for it. */
	if (!rc && (fh->kind == FH_READ || fh->kind == FH_WRITE))
		mcfs_node_closing(fs, fh, true);
	reply_rc(req, rc);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_fh *fh = fh_of(fi);

	(void)ino;
	(void)datasync;
	reply_rc(req, fh && fh->kind == FH_WRITE ? publish(fs, fh, false) : 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_fh *fh = fh_of(fi);

	if (fh->kind == FH_WRITE) {
		/* No flush came after the last change (a writable mmap):
		 * publish now; nobody is left to tell if that fails. */
		int rc = publish(fs, fh, false);
		if (rc)
			mc_log_warn("mcfs",
				    "%s: the last changes could not be "
				    "published: %s",
				    fh->key, mc_strerror(rc));
	}
	if (fi->flock_release)
		drop_locks(fs, ino, fi, true);
	if (fh->kind == FH_READ || fh->kind == FH_WRITE)
		mcfs_node_release(fs, fh);
	mcfs_fh_free(fs, fh);
	fuse_reply_err(req, 0);
}

/* ---- directories ------------------------------------------------------ */

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *n = node_or_reply(req, fs, ino);
	struct mcfs_fh *fh;
	int rc = 0;

	if (!n)
		return;
	if (n->kind == MCFS_KV_FILE || n->kind == MCFS_VFILE ||
	    (n->kind == MCFS_CKPT_NODE && n->attr.mode &&
	     !S_ISDIR(n->attr.mode)))
		rc = -ENOTDIR;
	else if (n->kind == MCFS_KV_DIR)
		rc = mcfs_wait_ready(fs);
	if (rc) {
		reply_rc(req, rc);
		return;
	}
	fh = mcfs_fh_new(FH_DIR, ino);
	if (!fh) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fh->dir.next_off = 1;
	fi->fh = (uintptr_t)fh;
	if (fuse_reply_open(req, fi) == -ENOENT)
		mcfs_fh_free(fs, fh);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *dir = node_or_reply(req, fs, ino);
	struct mcfs_fh *fh = fh_of(fi);
	int (*page)(struct mcfs *, struct mcfs_node *, struct mcfs_dirlist *);

	if (!dir)
		return;
	switch (dir->kind) {
	case MCFS_KV_DIR:
		page = mcfs_kv_list;
		break;
	case MCFS_VDIR:
		page = mcfs_virt_list;
		break;
	case MCFS_CKPT_DIR:
	case MCFS_CKPT_NODE:
		page = mcfs_ckpt_list;
		break;
	case MCFS_CKPT_STAGE:
		page = mcfs_cstage_list;
		break;
	default:
		page = mcfs_root_list;
		break;
	}
	pthread_mutex_lock(&fh->lock);
	mcfs_dirlist_reply(req, fs, dir, &fh->dir, size, off, plus, page);
	pthread_mutex_unlock(&fh->lock);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);

	if (fi->flock_release)
		drop_locks(fs, ino, fi, true);
	mcfs_fh_free(fs, fh_of(fi));
	fuse_reply_err(req, 0);
}

const struct fuse_lowlevel_ops mcfs_ops = {
	.init = op_init,
	.destroy = op_destroy,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.statfs = op_statfs,
	.unlink = op_unlink,
	.rename = op_rename,
	.mkdir = op_mkdir,
	.mknod = op_mknod,
	.link = op_link,
	.symlink = op_symlink,
	.readlink = op_readlink,
	.rmdir = op_rmdir,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.setxattr = op_setxattr,
	.removexattr = op_removexattr,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.fallocate = op_fallocate,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.flock = op_flock,
	.getlk = op_getlk,
	.setlk = op_setlk,
};
