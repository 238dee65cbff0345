/* SPDX-License-Identifier: Apache-2.0 */
/*
 * faultfs: a test tool, not a product part. A FUSE file system that passes
 * a backing directory through and fails chosen operations on command, so
 * the integration tests can give mooncake_master's sqlite record real I/O
 * errors (EIO, ENOSPC, ...) and prove its error paths: this machine has no
 * device-mapper (dm-error, dm-flakey) to do it with a block device.
 *
 *   faultfs BACKING_DIR MOUNTPOINT [-f] [-s] [-o fuse-options]
 *
 * Commands are lines written to MOUNTPOINT/.faultfs (the file is not in
 * the backing directory and never fails):
 *
 *   fail OP ERRNO [n=N] [path=SUBSTRING]
 *       OP fails with ERRNO (a name such as EIO, ENOSPC, EROFS, or a
 *       number): every time, or only the next N times; only for paths
 *       that contain SUBSTRING when given (that end with it when it ends
 *       with '$': path=master.db$ is not master.db-wal). OP is one of read
 *       write fsync open create truncate fallocate unlink (rmdir too)
 *       rename mkdir getattr (access and lookups too) readdir, or all
 *       (every one of them).
 *   clear
 *       Forget every rule.
 *
 * Reading MOUNTPOINT/.faultfs gives one line per rule with how many
 * operations it failed ("write EIO hits=3 left=-1 path="), so a test can
 * tell that its faults fired. Files are opened with direct_io (but
 * sqlite's -shm files, which sqlite maps) and attributes are not cached:
 * every read and write of the record reaches this process.
 */
#define FUSE_USE_VERSION 35
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

enum op {
	OP_READ,
	OP_WRITE,
	OP_FSYNC,
	OP_OPEN,
	OP_CREATE,
	OP_TRUNCATE,
	OP_FALLOCATE,
	OP_UNLINK,
	OP_RENAME,
	OP_MKDIR,
	OP_GETATTR,
	OP_READDIR,
	N_OPS,
	OP_ALL = N_OPS,
};

static const char *const op_names[] = {
	"read",	     "write",  "fsync",	 "open",  "create",  "truncate",
	"fallocate", "unlink", "rename", "mkdir", "getattr", "readdir",
};

static const struct {
	const char *name;
	int err;
} errnos[] = {
	{ "EIO", EIO },	      { "ENOSPC", ENOSPC }, { "EROFS", EROFS },
	{ "EDQUOT", EDQUOT }, { "ENOMEM", ENOMEM }, { "EACCES", EACCES },
	{ "EPERM", EPERM },   { "EFBIG", EFBIG },
};

#define MAX_RULES 32
#define CTL_NAME "/.faultfs"

struct rule {
	int op; /* an enum op, or OP_ALL */
	int err;
	long left; /* failures still to give; -1: without end */
	unsigned long hits;
	char path[128]; /* empty: every path */
};

static int backing = -1; /* the backing directory */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rule rules[MAX_RULES];
static int n_rules;

/* Whether path contains pattern ("" matches every path; a pattern that
 * ends with '$' must end path). */
static bool path_matches(const char *pattern, const char *path)
{
	size_t pl = strlen(pattern), l = strlen(path);

	if (!pl)
		return true;
	if (pattern[pl - 1] != '$')
		return strstr(path, pattern) != NULL;
	pl--;
	return l >= pl && !memcmp(path + l - pl, pattern, pl);
}

/* The error op on path must fail with (negative), or 0. */
static int fault(enum op op, const char *path)
{
	int rc = 0;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < n_rules && !rc; i++) {
		struct rule *r = &rules[i];
		if ((r->op != OP_ALL && r->op != (int)op) || !r->left ||
		    !path_matches(r->path, path))
			continue;
		if (r->left > 0)
			r->left--;
		r->hits++;
		rc = -r->err;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

/* Apply one command line; 0 or -EINVAL. */
static int command(char *line)
{
	char *save = NULL, *w = strtok_r(line, " \t", &save);
	struct rule r = { .left = -1 };
	int i;

	if (!w)
		return 0;
	if (!strcmp(w, "clear") && !strtok_r(NULL, " \t", &save)) {
		n_rules = 0;
		return 0;
	}
	if (strcmp(w, "fail") || !(w = strtok_r(NULL, " \t", &save)))
		return -EINVAL;
	for (r.op = 0; r.op < N_OPS && strcmp(w, op_names[r.op]); r.op++)
		;
	if (r.op == N_OPS && strcmp(w, "all"))
		return -EINVAL;
	if (!(w = strtok_r(NULL, " \t", &save)))
		return -EINVAL;
	for (i = 0; i < (int)(sizeof(errnos) / sizeof(errnos[0])); i++)
		if (!strcmp(w, errnos[i].name))
			r.err = errnos[i].err;
	if (!r.err)
		r.err = atoi(w);
	if (r.err <= 0)
		return -EINVAL;
	while ((w = strtok_r(NULL, " \t", &save))) {
		if (!strncmp(w, "n=", 2) && atol(w + 2) > 0)
			r.left = atol(w + 2);
		else if (!strncmp(w, "path=", 5) &&
			 strlen(w + 5) < sizeof(r.path))
			snprintf(r.path, sizeof(r.path), "%s", w + 5);
		else
			return -EINVAL;
	}
	if (n_rules == MAX_RULES)
		return -ENOSPC;
	rules[n_rules++] = r;
	return 0;
}

static int ctl_write(const char *buf, size_t size)
{
	char text[1024], *save = NULL, *line;
	int rc = 0;

	if (size >= sizeof(text))
		return -EINVAL;
	memcpy(text, buf, size);
	text[size] = 0;
	pthread_mutex_lock(&lock);
	for (line = strtok_r(text, "\n", &save); line && !rc;
	     line = strtok_r(NULL, "\n", &save))
		rc = command(line);
	pthread_mutex_unlock(&lock);
	if (rc)
		fprintf(stderr, "faultfs: bad command (%s)\n", strerror(-rc));
	return rc ? rc : (int)size;
}

static const char *err_name(int err, char *num, size_t len)
{
	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (errnos[i].err == err)
			return errnos[i].name;
	snprintf(num, len, "%d", err);
	return num;
}

static int ctl_read(char *buf, size_t size, off_t off)
{
	char text[MAX_RULES * 200];
	size_t len = 0;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < n_rules; i++) {
		const struct rule *r = &rules[i];
		char num[16];
		len += (size_t)snprintf(text + len, sizeof(text) - len,
					"%s %s hits=%lu left=%ld path=%s\n",
					r->op == OP_ALL ? "all" :
							  op_names[r->op],
					err_name(r->err, num, sizeof(num)),
					r->hits, r->left, r->path);
	}
	pthread_mutex_unlock(&lock);
	if ((size_t)off >= len)
		return 0;
	if (size > len - (size_t)off)
		size = len - (size_t)off;
	memcpy(buf, text + off, size);
	return (int)size;
}

static bool is_ctl(const char *path)
{
	return !strcmp(path, CTL_NAME);
}

/* Every read and write of a file reaches this process (no page cache),
 * but sqlite's -shm files, which sqlite maps (direct_io files cannot be
 * mapped shared). */
static void no_cache(const char *path, struct fuse_file_info *fi)
{
	size_t len = strlen(path);

	fi->direct_io = len < 4 || strcmp(path + len - 4, "-shm");
}

/* The backing path of a FUSE path, relative to the backing directory. */
static const char *rel(const char *path)
{
	return path[1] ? path + 1 : ".";
}

#define CHECK(op, path)                   \
	do {                              \
		int f_ = fault(op, path); \
		if (f_)                   \
			return f_;        \
	} while (0)

static void *ffs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->attr_timeout = 0;
	cfg->entry_timeout = 0;
	cfg->negative_timeout = 0;
	cfg->use_ino = 1;
	cfg->nullpath_ok = 0;
	return NULL;
}

static int ffs_getattr(const char *path, struct stat *st,
		       struct fuse_file_info *fi)
{
	if (is_ctl(path)) {
		memset(st, 0, sizeof(*st));
		st->st_mode = S_IFREG | 0600;
		st->st_nlink = 1;
		return 0;
	}
	CHECK(OP_GETATTR, path);
	if (fi)
		return fstat((int)fi->fh, st) ? -errno : 0;
	return fstatat(backing, rel(path), st, AT_SYMLINK_NOFOLLOW) ? -errno :
								      0;
}

static int ffs_access(const char *path, int mask)
{
	if (is_ctl(path))
		return 0;
	CHECK(OP_GETATTR, path);
	return faccessat(backing, rel(path), mask, 0) ? -errno : 0;
}

static int ffs_readdir(const char *path, void *buf, fuse_fill_dir_t fill,
		       off_t off, struct fuse_file_info *fi,
		       enum fuse_readdir_flags flags)
{
	struct dirent *e;
	DIR *d;
	int fd;

	(void)off;
	(void)fi;
	(void)flags;
	CHECK(OP_READDIR, path);
	fd = openat(backing, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	while ((e = readdir(d)))
		if (fill(buf, e->d_name, NULL, 0, 0))
			break;
	closedir(d);
	return 0;
}

static int ffs_mkdir(const char *path, mode_t mode)
{
	CHECK(OP_MKDIR, path);
	return mkdirat(backing, rel(path), mode) ? -errno : 0;
}

static int ffs_rmdir(const char *path)
{
	CHECK(OP_UNLINK, path);
	return unlinkat(backing, rel(path), AT_REMOVEDIR) ? -errno : 0;
}

static int ffs_unlink(const char *path)
{
	if (is_ctl(path))
		return -EPERM;
	CHECK(OP_UNLINK, path);
	return unlinkat(backing, rel(path), 0) ? -errno : 0;
}

static int ffs_rename(const char *from, const char *to, unsigned int flags)
{
	if (is_ctl(from) || is_ctl(to))
		return -EPERM;
	CHECK(OP_RENAME, from);
	return renameat2(backing, rel(from), backing, rel(to), flags) ? -errno :
									0;
}

static int ffs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	if (is_ctl(path))
		return 0;
	if (fi)
		return fchmod((int)fi->fh, mode) ? -errno : 0;
	return fchmodat(backing, rel(path), mode, 0) ? -errno : 0;
}

static int ffs_chown(const char *path, uid_t uid, gid_t gid,
		     struct fuse_file_info *fi)
{
	if (is_ctl(path))
		return 0;
	if (fi)
		return fchown((int)fi->fh, uid, gid) ? -errno : 0;
	return fchownat(backing, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW) ?
		       -errno :
		       0;
}

static int ffs_utimens(const char *path, const struct timespec tv[2],
		       struct fuse_file_info *fi)
{
	if (is_ctl(path))
		return 0;
	if (fi)
		return futimens((int)fi->fh, tv) ? -errno : 0;
	return utimensat(backing, rel(path), tv, AT_SYMLINK_NOFOLLOW) ? -errno :
									0;
}

static int ffs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	int fd, rc;

	if (is_ctl(path))
		return 0;
	CHECK(OP_TRUNCATE, path);
	if (fi)
		return ftruncate((int)fi->fh, size) ? -errno : 0;
	fd = openat(backing, rel(path), O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = ftruncate(fd, size) ? -errno : 0;
	close(fd);
	return rc;
}

static int ffs_open(const char *path, struct fuse_file_info *fi)
{
	int fd;

	if (is_ctl(path)) {
		fi->fh = (uint64_t)-1;
		fi->direct_io = 1;
		return 0;
	}
	CHECK(OP_OPEN, path);
	fd = openat(backing, rel(path), (fi->flags & ~O_NOFOLLOW) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	no_cache(path, fi);
	return 0;
}

static int ffs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int fd;

	if (is_ctl(path))
		return -EEXIST;
	CHECK(OP_CREATE, path);
	fd = openat(backing, rel(path), fi->flags | O_CREAT | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	no_cache(path, fi);
	return 0;
}

static int ffs_read(const char *path, char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	ssize_t n;

	if (is_ctl(path))
		return ctl_read(buf, size, off);
	CHECK(OP_READ, path);
	n = pread((int)fi->fh, buf, size, off);
	return n < 0 ? -errno : (int)n;
}

static int ffs_write(const char *path, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	ssize_t n;

	if (is_ctl(path))
		return ctl_write(buf, size);
	CHECK(OP_WRITE, path);
	n = pwrite((int)fi->fh, buf, size, off);
	return n < 0 ? -errno : (int)n;
}

static int ffs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	if (is_ctl(path))
		return 0;
	CHECK(OP_FSYNC, path);
	return (datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh)) ?
		       -errno :
		       0;
}

static int ffs_fallocate(const char *path, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	if (is_ctl(path))
		return -EOPNOTSUPP;
	CHECK(OP_FALLOCATE, path);
	return fallocate((int)fi->fh, mode, off, len) ? -errno : 0;
}

static int ffs_release(const char *path, struct fuse_file_info *fi)
{
	if (!is_ctl(path))
		close((int)fi->fh);
	return 0;
}

static int ffs_statfs(const char *path, struct statvfs *st)
{
	(void)path;
	return fstatvfs(backing, st) ? -errno : 0;
}

static const struct fuse_operations ops = {
	.init = ffs_init,
	.getattr = ffs_getattr,
	.access = ffs_access,
	.readdir = ffs_readdir,
	.mkdir = ffs_mkdir,
	.rmdir = ffs_rmdir,
	.unlink = ffs_unlink,
	.rename = ffs_rename,
	.chmod = ffs_chmod,
	.chown = ffs_chown,
	.utimens = ffs_utimens,
	.truncate = ffs_truncate,
	.open = ffs_open,
	.create = ffs_create,
	.read = ffs_read,
	.write = ffs_write,
	.fsync = ffs_fsync,
	.fallocate = ffs_fallocate,
	.release = ffs_release,
	.statfs = ffs_statfs,
};

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: faultfs BACKING_DIR MOUNTPOINT "
				"[fuse options]\n");
		return 2;
	}
	backing = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (backing < 0) {
		perror(argv[1]);
		return 1;
	}
	/* fuse_main sees the arguments without the backing directory. */
	argv[1] = argv[0];
	return fuse_main(argc - 1, argv + 1, &ops, NULL);
}
