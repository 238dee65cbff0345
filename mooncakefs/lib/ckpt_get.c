/* SPDX-License-Identifier: Apache-2.0 */
/* Fetching checkpoints into a directory or buffers, and serving them
 * from there (include/mooncake/ckpt.h; docs/design.md, "Checkpoints"). */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_int.h"
#include "ckpt_master.h"
#include "mc_log.h"
#include "mooncake/mc_err.h"

/* 0 when dir is (now) an empty directory, else a code (logged); *made:
 * this call made it. Missing parents are made as by `mkdir -p` (and
 * stay: other fetches may be using them). */
static int empty_dir(const char *dir, bool *made)
{
	struct dirent *e;
	DIR *d;

	*made = !mkdir(dir, 0755);
	if (!*made && errno == ENOENT) {
		int rc = mcs_ckpt_mkparents(dir);

		if (rc) {
			mc_log_err("ckpt", "%s: cannot make its parents: %s",
				   dir, mc_strerror(rc));
			return rc;
		}
		*made = !mkdir(dir, 0755);
	}
	if (!*made && errno != EEXIST) {
		mc_log_err("ckpt", "%s: %s", dir, mc_strerror(-errno));
		return -errno;
	}
	d = opendir(dir);
	if (!d) {
		mc_log_err("ckpt", "%s: %s", dir, mc_strerror(-errno));
		return -errno;
	}
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			closedir(d);
			mc_log_err("ckpt",
				   "%s is not empty: fetch into an "
				   "empty or new directory",
				   dir);
			return -ENOTEMPTY;
		}
	}
	closedir(d);
	return 0;
}

/*
 * The directory fd of path's parent under root, made as needed; no
 * component is followed if it is a symlink (paths come checked, without
 * "..", but a checkpoint's own symlinks must not lead writes elsewhere).
 * *base: path's last component.
 */
static int parent_fd(int root, const char *path, const char **base)
{
	*base = path;
	char comp[NAME_MAX + 1];
	const char *p = path, *slash;
	int fd = dup(root);

	while (fd >= 0 && (slash = strchr(p, '/'))) {
		size_t n = (size_t)(slash - p);
		int next;
		if (n > NAME_MAX) {
			close(fd);
			return -ENAMETOOLONG;
		}
		memcpy(comp, p, n);
		comp[n] = 0;
		if (mkdirat(fd, comp, 0700) && errno != EEXIST) {
			int e = errno;
			close(fd);
			return -e;
		}
		next = openat(fd, comp,
			      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
		p = slash + 1;
	}
	*base = p;
	return fd < 0 ? -errno : fd;
}

/* Make every entry of lay under root: directories, symlinks, and
 * regular files of their final size (sparse until fetched). */
int mcs_ckpt_lay_out(const struct mcs_ckpt_layout *lay, const char *root)
{
	int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (rfd < 0)
		return -errno;
	for (size_t i = 0; !rc && i < lay->nfiles; i++) {
		const struct mcs_ckpt_file *f = &lay->files[i];
		const char *base;
		int pfd = parent_fd(rfd, f->path, &base), fd;
		if (pfd < 0) {
			rc = pfd;
			break;
		}
		switch (f->mode & S_IFMT) {
		case S_IFDIR:
			if (mkdirat(pfd, base, 0700) && errno != EEXIST)
				rc = -errno;
			break;
		case S_IFLNK:
			if (symlinkat(f->link, pfd, base))
				rc = -errno;
			break;
		default:
			fd = openat(pfd, base,
				    O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
					    O_CLOEXEC,
				    0600);
			if (fd < 0 || ftruncate(fd, (off_t)f->size))
				rc = -errno;
			if (fd >= 0)
				close(fd);
		}
		if (rc)
			mc_log_err("ckpt", "%s/%s: %s", root, f->path,
				   mc_strerror(rc));
		close(pfd);
	}
	close(rfd);
	return rc;
}

/* The files' modes and times once their bytes are in (directories last,
 * deepest first, so their times stay). */
static void finish(const struct mcs_ckpt_layout *lay, const char *root)
{
	for (size_t k = lay->nfiles; k-- > 0;) {
		const struct mcs_ckpt_file *f = &lay->files[k];
		struct timespec ts[2] = {
			{ .tv_nsec = UTIME_OMIT },
			{ .tv_sec = f->mtime_ns / 1000000000,
			  .tv_nsec = f->mtime_ns % 1000000000 },
		};
		char path[PATH_MAX];
		if (mcs_ckpt_join(path, root, f->path))
			continue;
		if (!S_ISLNK(f->mode) &&
		    fchmodat(AT_FDCWD, path, f->mode & 07777, 0))
			mc_log_warn("ckpt", "chmod %s: %s", path,
				    mc_strerror(-errno));
		(void)utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW);
	}
}

/* Remove what lay_out made (a fetch that failed), deepest first. */
void mcs_ckpt_undo(const struct mcs_ckpt_layout *lay, const char *root)
{
	for (size_t k = lay->nfiles; k-- > 0;) {
		char path[PATH_MAX];
		if (mcs_ckpt_join(path, root, lay->files[k].path))
			continue;
		if (S_ISDIR(lay->files[k].mode))
			(void)rmdir(path);
		else
			(void)unlink(path);
	}
	/* Parents made on the way (no entry of their own). */
	for (size_t k = lay->nfiles; k-- > 0;) {
		char path[PATH_MAX], *slash;
		if (mcs_ckpt_join(path, root, lay->files[k].path))
			continue;
		while ((slash = strrchr(path, '/')) &&
		       (size_t)(slash - path) > strlen(root)) {
			*slash = 0;
			(void)rmdir(path);
		}
	}
}

/* Fetch into sv (served already), then keep serving it; on failure stop
 * serving it. */
static int fetch(struct mooncake_ckpt *c, struct mcs_ckpt_served *sv,
		 mooncake_ckpt_progress_fn progress, void *arg)
{
	struct mcs_ckpt_fetch_cfg f;
	int rc = mcs_ckpt_announce(c, sv);

	if (rc == -EEXIST)
		mc_log_err("ckpt",
			   "%s is served by this handle already: "
			   "unserve it first",
			   sv->lay->name);
	if (rc)
		return rc;
	mcs_ckpt_fetch_cfg(c, &f, progress, arg);
	rc = mcs_ckpt_fetch_all(&f, sv);
	if (rc)
		mcs_ckpt_unserve(c, sv);
	return rc;
}

int mooncake_ckpt_get_dir(mooncake_ckpt_t *c, const char *name, const char *dir,
			  mooncake_ckpt_progress_fn progress, void *arg)
{
	struct mcs_ckpt_layout *lay = NULL;
	struct mcs_ckpt_served *sv = NULL;
	char root[PATH_MAX];
	bool made = false;
	int rc;

	if (!c || !dir || !name)
		return MC_STORE_INVALID_PARAMS;
	rc = mcs_enter(c->store);
	if (rc)
		return rc;
	rc = mcs_ckpt_lookup(c, name, &lay);
	if (!rc)
		rc = empty_dir(dir, &made);
	if (!rc && !realpath(dir, root))
		rc = -errno;
	if (!rc)
		rc = mcs_ckpt_lay_out(lay, root);
	if (!rc) {
		sv = mcs_ckpt_served_new(lay, root, true);
		if (!sv)
			rc = -ENOMEM;
		else
			lay = NULL; /* the served checkpoint's now */
	}
	if (!rc)
		rc = fetch(c, sv, progress, arg);
	if (!rc)
		finish(sv->lay, root);
	else if (sv)
		mcs_ckpt_undo(sv->lay, root);
	/* A fetch that failed leaves no directory it made (emptied above). */
	if (rc && made)
		(void)rmdir(dir);
	mcs_ckpt_served_put(sv);
	mcs_ckpt_layout_free(lay);
	mcs_leave(c->store);
	return mc_err_to_store(rc);
}

int mooncake_ckpt_get_buffers(mooncake_ckpt_t *c, const char *name,
			      void *const *bufs, const size_t *sizes, size_t n)
{
	struct mcs_ckpt_layout *lay = NULL;
	struct mcs_ckpt_served *sv = NULL;
	int rc;

	if (!c || !name || !bufs || !sizes)
		return MC_STORE_INVALID_PARAMS;
	rc = mcs_enter(c->store);
	if (rc)
		return rc;
	rc = mcs_ckpt_lookup(c, name, &lay);
	if (!rc && lay->nfiles != n)
		rc = -EINVAL;
	for (size_t i = 0; !rc && i < n; i++)
		if (!S_ISREG(lay->files[i].mode) ||
		    lay->files[i].size != sizes[i] || (!bufs[i] && sizes[i]))
			rc = -EINVAL;
	if (rc == -EINVAL)
		mc_log_err("ckpt",
			   "%s: the buffers do not match its files "
			   "in number or sizes",
			   name);
	if (!rc) {
		sv = mcs_ckpt_served_new(lay, NULL, true);
		if (!sv)
			rc = -ENOMEM;
		else
			lay = NULL;
	}
	for (size_t i = 0; !rc && i < n; i++)
		sv->mem[i] = bufs[i];
	if (!rc)
		rc = fetch(c, sv, NULL, NULL);
	mcs_ckpt_served_put(sv);
	mcs_ckpt_layout_free(lay);
	mcs_leave(c->store);
	return mc_err_to_store(rc);
}
