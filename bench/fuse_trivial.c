/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_trivial: the baseline of the filesystem benchmark
 * (scripts/bench_fs.sh). A FUSE daemon that serves one read-only file,
 * /data, of -o size=N bytes (default 1 GiB) straight from its own memory,
 * filled once with a pattern before the mount (so every page is faulted
 * in). It does nothing per request but copy, so it measures what FUSE
 * itself costs on this machine: the ceiling for mooncakefs's reads.
 *
 * It is set up the way mooncakefs is: the libfuse3 low-level API,
 * max_read = max_write = 1 MiB (-o max_read=1048576 is added, and init
 * sets both), max_readahead 1 MiB, no writeback cache, a multithreaded
 * loop with clone_fd and -o threads=N workers (default 8, mooncakefs's
 * default), replies with fuse_reply_buf(), keep_cache on opens without
 * O_DIRECT and direct_io on those with it.
 *
 * For the metadata figures, -o files=N adds N empty-ish files /k0 ..
 * /k<N-1> (16 bytes each, not readable), listed with readdirplus (entry
 * and attribute timeouts 60 s, as mooncakefs's defaults), and -o xattr
 * answers every getxattr with ENODATA, as mooncakefs does for the names
 * it does not serve; without it getxattr is not implemented (ENOSYS), so
 * the kernel stops asking after the first call.
 *
 * Usage: fuse_trivial MOUNTPOINT [-f] [-d]
 *                     [-o size=BYTES,threads=N,files=N,xattr,...]
 * Byte i of /data is (uint8_t)(i * 131 + 7). Unmount with umount or
 * fusermount3 -u; the daemon then exits 0.
 */
#define FUSE_USE_VERSION 314

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FT_FILE_INO 2
#define FT_FIRST_SMALL_INO 3 /* /k<i> is inode 3 + i */
#define FT_NAME "data"
#define FT_MAX_IO (1u << 20)
#define FT_SMALL_SIZE 16
#define FT_TIMEOUT 60.0

struct ft_opts {
	char *size; /* bytes, with an optional k/M/G/KiB/MiB/GiB suffix */
	int threads;
	unsigned files;
	int xattr;
};

static const struct fuse_opt ft_opt_spec[] = {
	{ "size=%s", offsetof(struct ft_opts, size), 0 },
	{ "threads=%d", offsetof(struct ft_opts, threads), 0 },
	{ "files=%u", offsetof(struct ft_opts, files), 0 },
	{ "xattr", offsetof(struct ft_opts, xattr), 1 },
	FUSE_OPT_END
};

static char *ft_data;
static uint64_t ft_size;
static unsigned ft_files;
static struct timespec ft_mtime;

/* BYTES with an optional k/K, M or G suffix (KiB, MiB, GiB also). */
static int parse_size(const char *s, uint64_t *out)
{
	unsigned shift = 0;
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	case 0:
		break;
	default:
		return -EINVAL;
	}
	if (*end && strcmp(end + 1, "") && strcmp(end + 1, "iB"))
		return -EINVAL;
	if (v > UINT64_MAX >> shift)
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

static bool ino_valid(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID || ino == FT_FILE_INO ||
	       (ino >= FT_FIRST_SMALL_INO &&
		ino - FT_FIRST_SMALL_INO < (fuse_ino_t)ft_files);
}

/* "k<i>" with i < ft_files: its inode; 0 otherwise. */
static fuse_ino_t small_ino(const char *name)
{
	unsigned long i;
	char *end;

	if (name[0] != 'k' || name[1] < '0' || name[1] > '9' ||
	    (name[1] == '0' && name[2]))
		return 0;
	errno = 0;
	i = strtoul(name + 1, &end, 10);
	if (errno || *end || i >= ft_files)
		return 0;
	return FT_FIRST_SMALL_INO + i;
}

static void fill_attr(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_mtim = ft_mtime;
	st->st_ctim = ft_mtime;
	st->st_atim = ft_mtime;
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
	} else {
		uint64_t size = ino == FT_FILE_INO ? ft_size : FT_SMALL_SIZE;

		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)size;
		st->st_blocks = (blkcnt_t)((size + 511) / 512);
		st->st_blksize = FT_MAX_IO;
	}
}

static void fill_entry(fuse_ino_t ino, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->attr_timeout = FT_TIMEOUT;
	e->entry_timeout = FT_TIMEOUT;
	fill_attr(ino, &e->attr);
}

static void ft_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* As mooncakefs: 1 MiB requests, no writeback cache. */
	conn->max_write = FT_MAX_IO;
	conn->max_read = FT_MAX_IO;
	conn->max_readahead = FT_MAX_IO;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	/* As mooncakefs: always readdirplus. */
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	conn->want &= ~(unsigned)FUSE_CAP_READDIRPLUS_AUTO;
}

static void ft_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	fuse_ino_t ino = !strcmp(name, FT_NAME) ? FT_FILE_INO : small_ino(name);

	if (parent != FUSE_ROOT_ID || !ino) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_entry(ino, &e);
	fuse_reply_entry(req, &e);
}

static void ft_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	if (!ino_valid(ino)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_attr(ino, &st);
	fuse_reply_attr(req, &st, FT_TIMEOUT);
}

static void ft_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != FT_FILE_INO) {
		fuse_reply_err(req, ino == FUSE_ROOT_ID ? EISDIR : EACCES);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EACCES);
		return;
	}
	if (fi->flags & O_DIRECT)
		fi->direct_io = 1;
	else
		fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void ft_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)off >= ft_size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > ft_size - (uint64_t)off)
		size = (size_t)(ft_size - (uint64_t)off);
	fuse_reply_buf(req, ft_data + off, size);
}

/* Entry i of the root: ".", "..", FT_NAME, then k0 .. k<files-1>. */
static fuse_ino_t dir_entry(uint64_t i, char *name, size_t len)
{
	if (i == 0 || i == 1) {
		snprintf(name, len, "%s", i ? ".." : ".");
		return FUSE_ROOT_ID;
	}
	if (i == 2) {
		snprintf(name, len, "%s", FT_NAME);
		return FT_FILE_INO;
	}
	if (i - 3 >= ft_files)
		return 0;
	snprintf(name, len, "k%" PRIu64, i - 3);
	return FT_FIRST_SMALL_INO + (i - 3);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       bool plus)
{
	char *buf, name[32];
	size_t used = 0;
	fuse_ino_t child;

	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (uint64_t i = off < 0 ? 0 : (uint64_t)off;
	     (child = dir_entry(i, name, sizeof(name))); i++) {
		struct fuse_entry_param e;
		size_t n;

		fill_entry(child, &e);
		if (plus && i < 2) {
			/* "." and "..": no lookup count is taken. */
			e.ino = 0;
			e.attr.st_ino = child;
		}
		n = plus ? fuse_add_direntry_plus(req, buf + used, size - used,
						  name, &e, (off_t)i + 1) :
			   fuse_add_direntry(req, buf + used, size - used, name,
					     &e.attr, (off_t)i + 1);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void ft_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, false);
}

static void ft_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, true);
}

static void ft_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	(void)ino;
	(void)name;
	(void)size;
	fuse_reply_err(req, ENODATA);
}

static const struct fuse_lowlevel_ops ft_ops = {
	.init = ft_init,
	.lookup = ft_lookup,
	.getattr = ft_getattr,
	.open = ft_open,
	.read = ft_read,
	.readdir = ft_readdir,
	.readdirplus = ft_readdirplus,
};

static void usage(const char *prog)
{
	printf("usage: %s MOUNTPOINT [-f] [-d] [-o OPTIONS]\n"
	       "Serves one read-only file, /" FT_NAME ", from memory.\n"
	       "  -o size=BYTES   its size (default 1GiB; k/M/G suffixes)\n"
	       "  -o threads=N    FUSE worker threads (default 8)\n"
	       "  -o files=N      also /k0 .. /k<N-1>, 16 bytes each\n"
	       "  -o xattr        answer getxattr with ENODATA (default: "
	       "ENOSYS)\n",
	       prog);
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct ft_opts o = { .size = NULL, .threads = 8 };
	struct fuse_lowlevel_ops ops = ft_ops;
	struct fuse_cmdline_opts co;
	struct fuse_loop_config *lc = NULL;
	struct fuse_session *se = NULL;
	int ret = 1;

	memset(&co, 0, sizeof(co));
	if (fuse_opt_parse(&args, &o, ft_opt_spec, NULL) ||
	    fuse_opt_add_arg(&args, "-omax_read=1048576") ||
	    fuse_opt_add_arg(&args, "-osubtype=fuse_trivial") ||
	    fuse_parse_cmdline(&args, &co)) {
		fprintf(stderr, "fuse_trivial: bad arguments\n");
		goto out;
	}
	if (co.show_help) {
		usage(argv[0]);
		ret = 0;
		goto out;
	}
	if (co.show_version) {
		printf("fuse_trivial, libfuse %s\n", fuse_pkgversion());
		ret = 0;
		goto out;
	}
	if (!co.mountpoint || o.threads < 1 || o.threads > 256) {
		usage(argv[0]);
		ret = 2;
		goto out;
	}
	ft_size = 1ull << 30;
	if (o.size && parse_size(o.size, &ft_size)) {
		fprintf(stderr, "fuse_trivial: bad size '%s'\n", o.size);
		ret = 2;
		goto out;
	}
	clock_gettime(CLOCK_REALTIME, &ft_mtime);
	/* Plain anonymous 4 KiB pages, as the daemon's buffers are; the
	 * pattern fills (and so faults in) every one before the mount. */
	if (ft_size) {
		ft_data = mmap(NULL, ft_size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (ft_data == MAP_FAILED) {
			ft_data = NULL;
			perror("fuse_trivial: mmap");
			goto out;
		}
		for (uint64_t i = 0; i < ft_size; i++)
			ft_data[i] = (char)(uint8_t)(i * 131 + 7);
	}
	ft_files = o.files;
	if (o.xattr)
		ops.getxattr = ft_getxattr;
	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se)
		goto out;
	if (fuse_set_signal_handlers(se))
		goto out_session;
	if (fuse_session_mount(se, co.mountpoint))
		goto out_signals;
	if (fuse_daemonize(co.foreground))
		goto out_unmount;
	lc = fuse_loop_cfg_create();
	if (!lc)
		goto out_unmount;
	fuse_loop_cfg_set_clone_fd(lc, 1);
	fuse_loop_cfg_set_max_threads(lc, (unsigned)o.threads);
	ret = fuse_session_loop_mt(se, lc) < 0 ? 1 : 0;
	fuse_loop_cfg_destroy(lc);
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out:
	if (ft_data)
		munmap(ft_data, ft_size);
	free(o.size);
	free(co.mountpoint);
	fuse_opt_free_args(&args);
	return ret;
}
