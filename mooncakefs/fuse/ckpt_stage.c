/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Publishing through the mount (ckpt/, docs/design.md "Checkpoints"): a
 * directory made in ckpt/ is this mount's own until it is sealed, kept
 * under the mount's cache directory (pub/) and seen by no other mount.
 * Everything inside is a plain local tree (files, directories, symlinks,
 * modes and times), reached through this file.
 *   cp -r model/ ckpt/.llama-8b.tmp && mv ckpt/.llama-8b.tmp ckpt/llama-8b
 * seals it: renaming a staged directory to a name without a leading dot
 * publishes it under that name, whole, for every mount (the files move to
 * pub/.sealed/ and are served from there while mounted). A directory
 * copied straight to its final name waits for `mooncake ckpt seal NAME`
 * (the user.mooncake.seal attribute).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_layout.h"
#include "mc_log.h"
#include "mcfs.h"
#include "mooncake/ckpt.h"
#include "mooncake/mc_err.h"

static _Atomic uint64_t sealed_seq;

/* The local path of a staged key ("NAME" or "NAME/PATH"). */
static int path_of(struct mcfs *fs, const char *key, char *out)
{
	const char *pub = mcfs_ckpt_pub(fs);

	if ((size_t)snprintf(out, PATH_MAX, "%s/%s", pub, key) >= PATH_MAX)
		return -ENAMETOOLONG;
	return 0;
}

static int child_key(const struct mcfs_node *dir, const char *name, char *out)
{
	if (strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	if ((size_t)snprintf(out, PATH_MAX, "%s%s%s", dir->key,
			     *dir->key ? "/" : "", name) >= PATH_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/* The node of key (that exists locally), with a lookup reference. */
static int node_of(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		   const char *key, struct mcfs_node **out)
{
	*out = mcfs_node_child(fs, dir, name, MCFS_CKPT_STAGE, key, 0, 0, 0,
			       NULL);
	return *out ? 0 : -ENOMEM;
}

int mcfs_cstage_lookup(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		       struct mcfs_node **out)
{
	char key[PATH_MAX], path[PATH_MAX];
	struct stat st;
	int rc;

	*out = NULL;
	if (dir->kind == MCFS_CKPT_DIR && !strcmp(name, ".sealed"))
		return 0;
	rc = child_key(dir, name, key);
	if (!rc)
		rc = path_of(fs, key, path);
	if (rc)
		return rc;
	if (lstat(path, &st))
		return errno == ENOENT ? 0 : -errno;
	return node_of(fs, dir, name, key, out);
}

void mcfs_cstage_fill_attr(struct mcfs *fs, const struct mcfs_node *n,
			   struct stat *st)
{
	char path[PATH_MAX];
	struct stat l;
	ino_t ino = st->st_ino;

	if (path_of(fs, n->key, path) || lstat(path, &l)) {
		st->st_mode = S_IFREG;
		st->st_nlink = 0;
		return;
	}
	l.st_ino = ino;
	l.st_uid = st->st_uid;
	l.st_gid = st->st_gid;
	l.st_dev = 0;
	*st = l;
}

int mcfs_cstage_list(struct mcfs *fs, struct mcfs_node *dir,
		     struct mcfs_dirlist *d)
{
	char path[PATH_MAX], key[PATH_MAX];
	struct dirent *e;
	DIR *dd;
	int rc = dir->kind == MCFS_CKPT_DIR ?
			 (snprintf(path, sizeof(path), "%s", mcfs_ckpt_pub(fs)),
			  0) :
			 path_of(fs, dir->key, path);

	if (rc)
		return rc;
	dd = opendir(path);
	if (!dd)
		return errno == ENOENT && dir->kind == MCFS_CKPT_DIR ? 0 :
								       -errno;
	while (!rc && (e = readdir(dd))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    (dir->kind == MCFS_CKPT_DIR &&
		     !strcmp(e->d_name, ".sealed")))
			continue;
		rc = child_key(dir, e->d_name, key);
		if (!rc)
			rc = mcfs_dirent_add(d, e->d_name, key, MCFS_CKPT_STAGE,
					     0, 0, 0, NULL);
	}
	closedir(dd);
	d->eof = true;
	return rc;
}

/* A name a staged root may take at ckpt/: not published, not staged. */
static int root_free(struct mcfs *fs, struct mcfs_node *ckdir, const char *name)
{
	struct mcfs_node *n = NULL;
	int rc = mcfs_ckpt_published(fs, name);

	if (rc)
		return rc; /* -EEXIST, or the master's error */
	rc = mcfs_cstage_lookup(fs, ckdir, name, &n);
	if (n) {
		mcfs_node_forget(fs, n->ino, 1);
		return -EEXIST;
	}
	return rc;
}

int mcfs_cstage_mkdir(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		      mode_t mode, struct mcfs_node **out)
{
	char key[PATH_MAX], path[PATH_MAX];
	int rc = dir->kind == MCFS_CKPT_DIR ? root_free(fs, dir, name) : 0;

	if (!rc && dir->kind == MCFS_CKPT_DIR)
		rc = mcfs_ckpt_pub_make(fs);
	if (!rc)
		rc = child_key(dir, name, key);
	if (!rc)
		rc = path_of(fs, key, path);
	if (!rc && mkdir(path, mode & 07777))
		rc = -errno;
	return rc ? rc : node_of(fs, dir, name, key, out);
}

int mcfs_cstage_create(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		       mode_t mode, int flags, struct mcfs_node **node,
		       struct mcfs_fh **out)
{
	char key[PATH_MAX], path[PATH_MAX];
	struct mcfs_fh *fh;
	int fd, rc = child_key(dir, name, key);

	if (!rc)
		rc = path_of(fs, key, path);
	if (rc)
		return rc;
	fd = open(path,
		  (flags & ~O_NOFOLLOW) | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
		  mode & 07777);
	if (fd < 0)
		return -errno;
	fh = mcfs_fh_new(FH_STAGE, 0);
	rc = fh ? node_of(fs, dir, name, key, node) : -ENOMEM;
	if (rc) {
		close(fd);
		mcfs_fh_free(fs, fh);
		return rc;
	}
	fh->ino = (*node)->ino;
	fh->fd = fd;
	*out = fh;
	return 0;
}

int mcfs_cstage_open(struct mcfs *fs, struct mcfs_node *n, int flags,
		     struct mcfs_fh **out)
{
	char path[PATH_MAX];
	struct mcfs_fh *fh;
	int fd, rc = path_of(fs, n->key, path);

	if (rc)
		return rc;
	fd = open(path, (flags & ~(O_CREAT | O_EXCL)) | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	fh = mcfs_fh_new(FH_STAGE, n->ino);
	if (!fh) {
		close(fd);
		return -ENOMEM;
	}
	fh->fd = fd;
	*out = fh;
	return 0;
}

int mcfs_cstage_symlink(struct mcfs *fs, struct mcfs_node *dir,
			const char *target, const char *name,
			struct mcfs_node **out)
{
	char key[PATH_MAX], path[PATH_MAX];
	int rc = child_key(dir, name, key);

	if (!rc)
		rc = path_of(fs, key, path);
	if (!rc && symlink(target, path))
		rc = -errno;
	return rc ? rc : node_of(fs, dir, name, key, out);
}

int mcfs_cstage_readlink(struct mcfs *fs, struct mcfs_node *n, char *buf,
			 size_t size)
{
	char path[PATH_MAX];
	ssize_t k;
	int rc = path_of(fs, n->key, path);

	if (rc)
		return rc;
	k = readlink(path, buf, size - 1);
	if (k < 0)
		return -errno;
	buf[k] = 0;
	return (int)k;
}

/* Remove a local tree (a staged or sealed directory). */
void mcfs_cstage_rm_tree(const char *path)
{
	mcs_ckpt_rm_tree(path);
}

int mcfs_cstage_unlink(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		       bool is_dir)
{
	char key[PATH_MAX], path[PATH_MAX];
	int rc = child_key(dir, name, key);

	if (!rc)
		rc = path_of(fs, key, path);
	if (!rc && (is_dir ? rmdir(path) : unlink(path)))
		rc = -errno;
	return rc;
}

/*
 * Publish the staged root `name` as `as`: its files move to pub/.sealed/
 * (served from there), and the checkpoint appears whole in every mount.
 */
static int seal(struct mcfs *fs, const char *name, const char *as)
{
	char from[PATH_MAX], to[PATH_MAX], sealed[PATH_MAX];
	mooncake_ckpt_t *h;
	int rc = mcfs_ckpt_handle(fs, &h);

	if (rc)
		return rc;
	if (path_of(fs, name, from) || path_of(fs, ".sealed", sealed) ||
	    (size_t)snprintf(to, sizeof(to), "%s/%" PRIu64 "-%s", sealed,
			     atomic_fetch_add(&sealed_seq, 1),
			     as) >= sizeof(to))
		return -ENAMETOOLONG;
	if (mkdir(sealed, 0700) && errno != EEXIST)
		return -errno;
	if (rename(from, to))
		return -errno;
	rc = mooncake_ckpt_publish_dir(h, to, as, NULL, NULL);
	if (rc) {
		if (rename(to, from))
			mc_log_err("mcfs",
				   "%s: could not be put back after a "
				   "failed seal: %s",
				   from, mc_strerror(-errno));
		return mcfs_errno(rc);
	}
	/* Its sealed files go once it is no longer served here (rm -r of
	 * it, after the reads in flight): they stayed until the unmount. */
	if (mooncake_ckpt_hand_over(h, as, to))
		mc_log_warn("mcfs", "%s: kept until the unmount", to);
	mc_log_notice("mcfs", "checkpoint %s sealed (from ckpt/%s)", as, name);
	return 0;
}

int mcfs_cstage_rename(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		       struct mcfs_node *newdir, const char *newname,
		       unsigned flags)
{
	char from[PATH_MAX], to[PATH_MAX], fk[PATH_MAX], tk[PATH_MAX];
	int rc;

	if (dir->kind == MCFS_CKPT_DIR && newdir->kind == MCFS_CKPT_DIR &&
	    newname[0] != '.') {
		/* mv ckpt/.x.tmp ckpt/x: the seal. */
		if (flags & RENAME_EXCHANGE)
			return -EINVAL;
		rc = root_free(fs, newdir, newname);
		return rc ? rc : seal(fs, name, newname);
	}
	if ((dir->kind == MCFS_CKPT_DIR) != (newdir->kind == MCFS_CKPT_DIR))
		return -EXDEV; /* a root stays a root, an entry an entry */
	if (newdir->kind == MCFS_CKPT_DIR) {
		rc = root_free(fs, newdir, newname);
		if (rc)
			return rc;
	}
	rc = child_key(dir, name, fk);
	if (!rc)
		rc = child_key(newdir, newname, tk);
	if (!rc)
		rc = path_of(fs, fk, from);
	if (!rc)
		rc = path_of(fs, tk, to);
	/* Staged nodes are looked up at every use (entry_timeout 0): the
	 * next walk finds the moved name's node by its new key. */
	if (!rc && renameat2(AT_FDCWD, from, AT_FDCWD, to, flags))
		rc = -errno;
	return rc;
}

int mcfs_cstage_seal_attr(struct mcfs *fs, struct mcfs_node *n)
{
	if (n->parent != fs->ckpt || strchr(n->key, '/'))
		return -EINVAL; /* a checkpoint's root only */
	return seal(fs, n->key, n->key);
}

int mcfs_cstage_setattr(struct mcfs *fs, struct mcfs_node *n,
			const struct stat *st, int to_set, struct mcfs_fh *fh)
{
	char path[PATH_MAX];
	int rc = path_of(fs, n->key, path);

	if (rc)
		return rc;
	if ((to_set & FUSE_SET_ATTR_MODE) && chmod(path, st->st_mode & 07777))
		return -errno;
	if ((to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) &&
	    lchown(path, (to_set & FUSE_SET_ATTR_UID) ? st->st_uid : (uid_t)-1,
		   (to_set & FUSE_SET_ATTR_GID) ? st->st_gid : (gid_t)-1))
		return -errno;
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (fh && fh->kind == FH_STAGE ?
			    ftruncate(fh->fd, st->st_size) :
			    truncate(path, st->st_size))
			return -errno;
	}
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
		struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT },
					  { .tv_nsec = UTIME_OMIT } };
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			ts[0].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_ATIME)
			ts[0] = st->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			ts[1].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_MTIME)
			ts[1] = st->st_mtim;
		if (utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW))
			return -errno;
	}
	return 0;
}

void mcfs_cstage_read(fuse_req_t req, struct mcfs_fh *fh, size_t size,
		      off_t off)
{
	char *buf = malloc(size ? size : 1);
	ssize_t n;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = pread(fh->fd, buf, size, off);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

int mcfs_cstage_write(struct mcfs_fh *fh, const char *buf, size_t size,
		      off_t off)
{
	for (size_t done = 0; done < size;) {
		ssize_t n = pwrite(fh->fd, buf + done, size - done,
				   off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}
