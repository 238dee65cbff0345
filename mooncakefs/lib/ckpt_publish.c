/* SPDX-License-Identifier: Apache-2.0 */
/* Publishing checkpoints: a directory's tree or buffers
 * (include/mooncake/ckpt.h; docs/design.md, "Checkpoints"). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mc_crc32c.h"
#include "ckpt_int.h"
#include "ckpt_master.h"
#include "mc_log.h"
#include "mooncake/mc_err.h"

#define READ_CHUNK (1u << 20)

struct entry {
	char *path; /* relative */
	char *link;
	struct stat st;
};

struct tree {
	struct entry *v;
	size_t n, cap;
	const char *root;
};

static int add(struct tree *t, const char *path, const struct stat *st,
	       char *link)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		struct entry *v = realloc(t->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = cap;
	}
	t->v[t->n].path = strdup(path);
	if (!t->v[t->n].path)
		return -ENOMEM;
	t->v[t->n].link = link;
	t->v[t->n].st = *st;
	t->n++;
	return 0;
}

static void tree_free(struct tree *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->v[i].path);
		free(t->v[i].link);
	}
	free(t->v);
}

/* Every entry under dirfd (rel: its path from the root, "" at the root). */
static int walk(struct tree *t, int dirfd, const char *rel)
{
	DIR *d = fdopendir(dirfd);
	struct dirent *e;
	int rc = 0;

	if (!d) {
		close(dirfd);
		return -errno;
	}
	while (!rc && (errno = 0, e = readdir(d))) {
		char path[MC_CKPT_PATH_MAX + 2];
		struct stat st;
		char *link = NULL;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "/" : "",
			     e->d_name) > MC_CKPT_PATH_MAX) {
			mc_log_err("ckpt", "%s/%s...: path too long", t->root,
				   rel);
			rc = -ENAMETOOLONG;
			break;
		}
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			rc = -errno;
			mc_log_err("ckpt", "%s/%s: %s", t->root, path,
				   mc_strerror(-errno));
			break;
		}
		if (S_ISLNK(st.st_mode)) {
			link = calloc(1, PATH_MAX);
			ssize_t n = link ? readlinkat(dirfd, e->d_name, link,
						      PATH_MAX - 1) :
					   -1;
			if (n <= 0) {
				free(link);
				rc = link ? -errno : -ENOMEM;
				break;
			}
		} else if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
			mc_log_err("ckpt",
				   "%s/%s: not a regular file, directory or "
				   "symlink: a checkpoint cannot hold it",
				   t->root, path);
			rc = -EINVAL;
			break;
		}
		rc = add(t, path, &st, link);
		if (rc) {
			free(link);
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			int fd = openat(dirfd, e->d_name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
						O_CLOEXEC);
			rc = fd < 0 ? -errno : walk(t, fd, path);
		}
	}
	if (!rc && errno)
		rc = -errno;
	closedir(d);
	return rc;
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->path,
		      ((const struct entry *)b)->path);
}

static int64_t ns_of(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

struct sums {
	uint32_t *crcs;
	uint32_t n;
	mooncake_ckpt_progress_t prog;
	mooncake_ckpt_progress_fn progress;
	void *arg;
};

/* The crcs of one file's shards, from fd; the file must not change. */
static int sum_file(struct sums *s, int fd, const struct entry *e,
		    uint64_t shard_size, const char *root, uint8_t *buf)
{
	uint64_t size = (uint64_t)e->st.st_size, off = 0;
	struct stat after;

	while (off < size) {
		uint64_t end = off + shard_size < size ? off + shard_size :
							 size;
		uint32_t crc = 0;
		while (off < end) {
			size_t want = end - off < READ_CHUNK ? end - off :
							       READ_CHUNK;
			ssize_t n = pread(fd, buf, want, (off_t)off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				goto changed;
			crc = mc_crc32c(crc, buf, (size_t)n);
			off += (uint64_t)n;
			s->prog.bytes += (uint64_t)n;
		}
		s->crcs[s->n++] = crc;
		s->prog.shards++;
		if (s->progress)
			s->progress(s->arg, &s->prog);
	}
	if (fstat(fd, &after) || after.st_size != e->st.st_size ||
	    ns_of(&after.st_mtim) != ns_of(&e->st.st_mtim))
		goto changed;
	return 0;
changed:
	mc_log_err("ckpt", "%s/%s changed while it was being published", root,
		   e->path);
	return -EBUSY;
}

static void file_msgs_free(Mcrpc__CkptFile **f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(f[i]);
	free(f);
}

/* The message of the tree (files point into t), shard_size set. */
static int tree_msg(const struct tree *t, uint64_t shard_size, Mcrpc__Ckpt *ck,
		    uint64_t *nshards)
{
	Mcrpc__CkptFile **f = calloc(t->n ? t->n : 1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	*nshards = 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct entry *e = &t->v[i];
		f[i] = malloc(sizeof(**f));
		if (!f[i]) {
			file_msgs_free(f, i);
			return -ENOMEM;
		}
		mcrpc__ckpt_file__init(f[i]);
		f[i]->path = e->path;
		f[i]->mode = e->st.st_mode & (S_IFMT | 07777);
		f[i]->mtime_ns = ns_of(&e->st.st_mtim);
		if (S_ISREG(e->st.st_mode)) {
			f[i]->size = (uint64_t)e->st.st_size;
			f[i]->first_shard = (uint32_t)*nshards;
			*nshards += mc_ckpt_nshards(f[i]->size, shard_size);
		}
		if (e->link)
			f[i]->link = e->link;
	}
	ck->files = f;
	ck->n_files = t->n;
	ck->shard_size = shard_size;
	return 0;
}

/*
 * Create the checkpoint ck at the master with this handle as its
 * publisher, and serve it: backing from root (files) or mem (buffers,
 * one per file). st: each file's stat when summed (files), for the
 * shards' checks.
 */
static int seal_and_serve(struct mooncake_ckpt *c, Mcrpc__Ckpt *ck,
			  const char *root, uint8_t *const *mem,
			  const struct stat *st, bool owns_root)
{
	struct mcs_ckpt_layout *lay;
	struct mcs_ckpt_served *sv;
	uint64_t id;
	int rc;

	ck->id = 1; /* checked below as the master will; the real one next */
	rc = mcs_ckpt_layout_from(ck, &lay);
	if (rc)
		return rc == -EPROTO ? -EINVAL : rc;
	sv = mcs_ckpt_served_new(lay, root, false);
	if (!sv) {
		mcs_ckpt_layout_free(lay);
		return -ENOMEM;
	}
	for (size_t i = 0; i < lay->nfiles; i++) {
		if (mem)
			sv->mem[i] = mem[i];
		if (st)
			sv->st[i] = st[i];
	}
	for (uint32_t i = 0; i < lay->nshards; i++) {
		mcs_bit_set(sv->have, i);
		mcs_bit_set(sv->verified, i);
	}
	/* A copy goes with the last reference, also when sealing fails. */
	sv->owns_root = owns_root;
	rc = mcs_ckpt_create(c->store->master, ck,
			     mcs_ckpt_srv_endpoint(c->srv), false, &id);
	if (!rc) {
		lay->id = id;
		rc = mcs_ckpt_srv_add(c->srv, sv);
		if (rc) /* the master has just made this id: cannot be */
			mc_log_err("ckpt", "%s: serving id %llu: %s", ck->name,
				   (unsigned long long)id, mc_strerror(rc));
	}
	mcs_ckpt_served_put(sv);
	return rc;
}

static int copy_tree(const struct tree *t, const char *dest);

static int publish_tree(struct mooncake_ckpt *c, const char *root,
			const char *name, mooncake_ckpt_progress_fn progress,
			void *arg)
{
	char copy[PATH_MAX];
	bool owns_root = false;
	Mcrpc__Ckpt ck = MCRPC__CKPT__INIT;
	struct tree t = { .root = root };
	struct sums s = { .progress = progress, .arg = arg };
	uint64_t shard_size = c->opt.shard_size ? c->opt.shard_size :
						  MCS_CKPT_SHARD_DEFAULT;
	uint64_t nshards = 0;
	struct stat *st = NULL;
	uint8_t *buf = NULL;
	Mcrpc__CkptInfoResponse *info = NULL;
	int fd, rc;

	/* Taken already: say so before reading every byte. */
	rc = mcs_ckpt_info(c->store->master, name, 0, false, &info);
	mcs_master_free(info);
	if (!rc) {
		mc_log_err("ckpt", "%s: a checkpoint of that name exists",
			   name);
		return -EEXIST;
	}
	if (rc != -ENOENT)
		return rc;
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		mc_log_err("ckpt", "%s: %s", root, mc_strerror(-errno));
		return rc;
	}
	rc = walk(&t, fd, "");
	if (rc)
		goto out;
	if (t.n > 1) /* t.v is NULL for an empty tree */
		qsort(t.v, t.n, sizeof(*t.v), by_path);
	if (c->opt.publish_copy) {
		/* Serve a copy: the trainer may overwrite its files now. */
		static _Atomic unsigned seq;
		char leaf[300];
		if (!c->opt.cache_dir) {
			mc_log_err("ckpt", "publish_copy needs a cache_dir");
			rc = -EINVAL;
			goto out;
		}
		snprintf(leaf, sizeof(leaf), "pub-%d-%u-%s", (int)getpid(),
			 atomic_fetch_add(&seq, 1), name);
		rc = mcs_ckpt_join(copy, c->opt.cache_dir, leaf);
		if (!rc)
			rc = mcs_ckpt_mkdirs(c->opt.cache_dir);
		if (!rc)
			rc = copy_tree(&t, copy);
		if (rc) {
			mcs_ckpt_rm_tree(copy);
			goto out;
		}
		owns_root = true;
		root = copy;
		/* Its own stats: the sums below are of the copy. */
		for (size_t i = 0; i < t.n; i++) {
			char p[PATH_MAX];
			if (mcs_ckpt_join(p, root, t.v[i].path) ||
			    lstat(p, &t.v[i].st)) {
				rc = -EIO;
				break;
			}
		}
		if (rc)
			goto out;
	}
	rc = tree_msg(&t, shard_size, &ck, &nshards);
	if (rc)
		goto out;
	rc = -ENOMEM;
	s.crcs = calloc(nshards ? nshards : 1, sizeof(*s.crcs));
	st = calloc(t.n ? t.n : 1, sizeof(*st));
	buf = malloc(READ_CHUNK);
	if (!s.crcs || !st || !buf)
		goto out;
	for (size_t i = 0; i < t.n; i++)
		if (S_ISREG(t.v[i].st.st_mode))
			s.prog.total += (uint64_t)t.v[i].st.st_size;
	s.prog.nshards = (uint32_t)nshards;
	rc = 0;
	for (size_t i = 0; !rc && i < t.n; i++) {
		char path[PATH_MAX];
		if (!S_ISREG(t.v[i].st.st_mode))
			continue;
		if (mcs_ckpt_join(path, root, t.v[i].path)) {
			rc = -ENAMETOOLONG;
			break;
		}
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			rc = -errno;
			mc_log_err("ckpt", "%s: %s", path, mc_strerror(-errno));
			break;
		}
		rc = sum_file(&s, fd, &t.v[i], shard_size, root, buf);
		if (!rc && fstat(fd, &st[i]))
			rc = -errno;
		close(fd);
	}
	if (rc)
		goto out;
	ck.name = (char *)name;
	ck.crcs = s.crcs;
	ck.n_crcs = s.n;
	rc = seal_and_serve(c, &ck, root, NULL, st, owns_root);
	owns_root = false; /* the served checkpoint's now, served or not */
out:
	if (owns_root)
		mcs_ckpt_rm_tree(copy);
	file_msgs_free(ck.files, ck.n_files);
	free(s.crcs);
	free(st);
	free(buf);
	tree_free(&t);
	return rc;
}

static int copy_file(const char *from, const char *to, mode_t mode)
{
	int in = open(from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), out = -1,
	    rc = 0;
	char *buf = NULL;

	if (in >= 0)
		out = open(to,
			   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			   mode & 0700 ? mode & 0777 : 0600);
	if (in < 0 || out < 0)
		rc = -errno;
	while (!rc) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		if (n > 0)
			continue;
		if (!n)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EXDEV && errno != ENOSYS && errno != EINVAL &&
		    errno != EOPNOTSUPP) {
			rc = -errno;
			break;
		}
		/* Across filesystems on old kernels: by hand. */
		buf = buf ? buf : malloc(READ_CHUNK);
		if (!buf) {
			rc = -ENOMEM;
			break;
		}
		for (;;) {
			ssize_t r = read(in, buf, READ_CHUNK);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				rc = r < 0 ? -errno : 0;
				break;
			}
			for (ssize_t w = 0; w < r && !rc;) {
				ssize_t k =
					write(out, buf + w, (size_t)(r - w));
				if (k < 0 && errno != EINTR)
					rc = -errno;
				else if (k > 0)
					w += k;
			}
			if (rc)
				break;
		}
		break;
	}
	free(buf);
	if (in >= 0)
		close(in);
	if (out >= 0 && close(out) && !rc)
		rc = -errno;
	return rc;
}

/* dest: a copy of the walked tree (files, directories, symlinks, modes
 * and times), made new. */
static int copy_tree(const struct tree *t, const char *dest)
{
	int rc = mkdir(dest, 0700) ? -errno : 0;

	for (size_t i = 0; !rc && i < t->n; i++) {
		const struct entry *e = &t->v[i];
		char from[PATH_MAX], to[PATH_MAX];
		if (mcs_ckpt_join(from, t->root, e->path) ||
		    mcs_ckpt_join(to, dest, e->path)) {
			rc = -ENAMETOOLONG;
			break;
		}
		if (S_ISDIR(e->st.st_mode))
			rc = mkdir(to, 0700) ? -errno : 0;
		else if (S_ISLNK(e->st.st_mode))
			rc = symlink(e->link, to) ? -errno : 0;
		else
			rc = copy_file(from, to, e->st.st_mode);
		if (rc)
			mc_log_err("ckpt", "copying %s to %s: %s", from, to,
				   mc_strerror(rc));
	}
	/* Modes and times last, deepest first (a directory's time stays). */
	for (size_t i = t->n; !rc && i-- > 0;) {
		const struct entry *e = &t->v[i];
		struct timespec ts[2] = { e->st.st_atim, e->st.st_mtim };
		char to[PATH_MAX];
		if (mcs_ckpt_join(to, dest, e->path))
			continue;
		if (!S_ISLNK(e->st.st_mode))
			(void)chmod(to, e->st.st_mode & 07777);
		(void)utimensat(AT_FDCWD, to, ts, AT_SYMLINK_NOFOLLOW);
	}
	return rc;
}

int mooncake_ckpt_publish_dir(mooncake_ckpt_t *c, const char *dir,
			      const char *name,
			      mooncake_ckpt_progress_fn progress, void *arg)
{
	char root[PATH_MAX];
	int rc;

	if (!c || !dir || !mc_ckpt_name_ok(name))
		return MC_STORE_INVALID_PARAMS;
	if (!realpath(dir, root)) {
		mc_log_err("ckpt", "%s: %s", dir, mc_strerror(-errno));
		return mc_err_to_store(-errno);
	}
	rc = mcs_enter(c->store);
	if (rc)
		return rc;
	rc = publish_tree(c, root, name, progress, arg);
	mcs_leave(c->store);
	return mc_err_to_store(rc);
}

int mooncake_ckpt_publish_buffers(mooncake_ckpt_t *c, const char *name,
				  const void *const *bufs, const size_t *sizes,
				  size_t n)
{
	Mcrpc__Ckpt ck = MCRPC__CKPT__INIT;
	Mcrpc__CkptFile *f = NULL, **fp = NULL;
	char(*names)[32] = NULL;
	uint64_t shard_size, nshards = 0;
	uint32_t *crcs = NULL;
	struct timespec now;
	int rc;

	if (!c || !mc_ckpt_name_ok(name) || !n || !bufs || !sizes)
		return MC_STORE_INVALID_PARAMS;
	shard_size = c->opt.shard_size ? c->opt.shard_size :
					 MCS_CKPT_SHARD_DEFAULT;
	for (size_t i = 0; i < n; i++) {
		if (!bufs[i] && sizes[i])
			return MC_STORE_INVALID_PARAMS;
		nshards += mc_ckpt_nshards(sizes[i], shard_size);
	}
	f = calloc(n, sizeof(*f));
	fp = calloc(n, sizeof(*fp));
	names = calloc(n, sizeof(*names));
	crcs = calloc(nshards ? nshards : 1, sizeof(*crcs));
	if (!f || !fp || !names || !crcs) {
		rc = -ENOMEM;
		goto out;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	nshards = 0;
	for (size_t i = 0; i < n; i++) {
		mcrpc__ckpt_file__init(&f[i]);
		snprintf(names[i], sizeof(names[i]), "%zu", i);
		f[i].path = names[i];
		f[i].mode = S_IFREG | 0444;
		f[i].size = sizes[i];
		f[i].mtime_ns = ns_of(&now);
		for (uint64_t off = 0; off < sizes[i]; off += shard_size)
			crcs[nshards++] = mc_crc32c(
				0, (const uint8_t *)bufs[i] + off,
				sizes[i] - off < shard_size ? sizes[i] - off :
							      shard_size);
		fp[i] = &f[i];
	}
	ck.name = (char *)name;
	ck.files = fp;
	ck.n_files = n;
	ck.shard_size = shard_size;
	ck.crcs = crcs;
	ck.n_crcs = nshards;
	rc = mcs_enter(c->store);
	if (rc) {
		free(f);
		free(fp);
		free(names);
		free(crcs);
		return rc;
	}
	rc = seal_and_serve(c, &ck, NULL, (uint8_t *const *)bufs, NULL, false);
	mcs_leave(c->store);
out:
	free(f);
	free(fp);
	free(names);
	free(crcs);
	return mc_err_to_store(rc);
}
