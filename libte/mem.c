/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shareable memory from te_mem_alloc() (contract in te.h).
 *
 * Unnamed memory is a memfd: it is in no filesystem, so it neither counts
 * against /dev/shm (a container's is 64 MiB) nor outlives the last process
 * that maps it, kill -9 included. Same-host peers open it through the
 * owner's descriptor, /proc/<pid>/fd/<n> (which the kernel allows to the
 * owner's user and root only; a peer in another pid namespace opens some
 * other file there, and the inode number published beside the path tells
 * it so). Where memfd_create is refused, private anonymous memory: peers
 * then read it over tcp.
 *
 * Named memory is /dev/shm/mooncake.<name>, kept after the process for the
 * next one of that name. Its blocks are reserved with fallocate before it
 * is mapped, so no later fault can SIGBUS: a /dev/shm too small for it is
 * -ENOSPC at allocation, never a signal.
 *
 * Either way the owner holds a shared flock on the file for as long as the
 * memory is its (peers test it to see the owner alive), and the pages are
 * faulted in by background threads (populate.c) after te_mem_alloc()
 * returns; te_mem_wait() waits for them.
 *
 * The file is one page longer than the memory: that page holds
 * TE_SHM_MAGIC and a secret drawn for this allocation (its tag), which
 * the descriptor names. A peer maps the file only if it finds the tag
 * there (shm.c), so only a process that could read the file can name it:
 * a descriptor that names another user's segment or another program's
 * file is not mapped with the reader's rights. A named file that exists
 * must be ours (another user may have made it first, to read what we
 * keep in it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "mc_log.h"
#include "mc_memcg.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

struct shm_alloc {
	struct shm_alloc *next;
	uintptr_t addr;
	size_t len;
	char *path; /* what peers open; NULL: private, not shareable */
	uint64_t ino;
	char tag[TE_SHM_TAG_HEX + 1]; /* of the file's last page, hex */
	bool named; /* /dev/shm/mooncake.<name>, kept after us */
	bool unlinked; /* te_mem_unlink() removed the name */
	int fd; /* holds a shared flock: peers test it to see we are alive */
	struct te_populate *populate;
};

static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shm_alloc *allocs;

char *te__mem_shm_path(uintptr_t addr, size_t len, uint64_t *offset,
		       uint64_t *ino, char tag[TE_SHM_TAG_HEX + 1])
{
	char *path = NULL;

	pthread_mutex_lock(&alloc_lock);
	for (struct shm_alloc *a = allocs; a; a = a->next) {
		if (addr >= a->addr && addr + len <= a->addr + a->len) {
			if (a->path)
				path = strdup(a->path);
			*offset = addr - a->addr;
			*ino = a->ino;
			memcpy(tag, a->tag, TE_SHM_TAG_HEX + 1);
			break;
		}
	}
	pthread_mutex_unlock(&alloc_lock);
	return path;
}

/* An existing named file must be ours and closed to others: another user
 * may have made it first (a name is easy to guess) to read or change
 * what we would keep in it. */
static int check_owner(int fd, const char *path)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	/* One name only: a hard link made by another user to a file of
	 * ours (or root's) is not a segment of this name. */
	if (st.st_uid != geteuid() || st.st_nlink != 1) {
		mc_log_err("te",
			   "%s belongs to uid %u, not to this process's "
			   "user (%u), or has %u names: not used (remove it "
			   "if it is not meant to be shared)",
			   path, (unsigned)st.st_uid, (unsigned)geteuid(),
			   (unsigned)st.st_nlink);
		return -EPERM;
	}
	if ((st.st_mode & 077) && fchmod(fd, st.st_mode & 0700))
		return -errno;
	return 0;
}

/*
 * Whether /dev/shm can still provide, and our memory cgroup allow, what
 * fallocate would take for a file of len bytes that already holds
 * st_blocks: 0, -ENOSPC (/dev/shm) or -ENOMEM (the cgroup's limit).
 */
static int check_room(int fd, size_t len)
{
	struct statvfs vfs;
	struct stat st;
	uint64_t have, need;

	if (fstat(fd, &st) || fstatvfs(fd, &vfs))
		return 0; /* fallocate decides */
	have = (uint64_t)st.st_blocks * 512;
	need = have >= len ? 0 : len - have;
	if (need > (uint64_t)vfs.f_bavail * vfs.f_frsize)
		return -ENOSPC;
	/* The blocks are charged to our memory cgroup as they are taken:
	 * past its limit the kernel kills us inside fallocate. */
	return need > mc_memcg_room(NULL) ? -ENOMEM : 0;
}

/* Open or create /dev/shm/mooncake.<name> with room for len bytes. */
static int open_named(const char *name, size_t len, struct shm_alloc *a)
{
	char path[TE_NAME_MAX + 64];
	bool created = true;
	struct stat st;
	int fd, rc;

	snprintf(path, sizeof(path), "/mooncake.%s", name);
	for (char *c = path + 1; *c; c++)
		if (*c == '/')
			*c = '_';
	fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		created = false;
		fd = shm_open(path, O_RDWR | O_CLOEXEC, 0600);
		if (fd >= 0) {
			rc = check_owner(fd, path);
			if (rc) {
				close(fd);
				return rc;
			}
		}
	}
	if (fd < 0)
		return -errno;
	/*
	 * Liveness for same-host peers: a shared lock for as long as the
	 * memory is ours; a peer that can take an exclusive one knows we are
	 * gone (the kernel drops the lock when we die). Taken at once.
	 */
	(void)flock(fd, LOCK_SH);
	rc = check_room(fd, len + TE_SHM_TAG_PAGE);
	if (!rc && ftruncate(fd, (off_t)(len + TE_SHM_TAG_PAGE)))
		rc = -errno;
	/* Reserve every block now: a fault on a full tmpfs is SIGBUS. */
	if (!rc && fallocate(fd, 0, 0, (off_t)(len + TE_SHM_TAG_PAGE)) &&
	    errno != EOPNOTSUPP)
		rc = -errno;
	if (!rc)
		rc = te__shm_tag_write(fd, len, a->tag);
	if (!rc && fstat(fd, &st))
		rc = -errno;
	if (rc) {
		close(fd);
		if (created)
			shm_unlink(path);
		return rc;
	}
	a->fd = fd;
	a->ino = (uint64_t)st.st_ino;
	a->named = true;
	a->path = malloc(strlen(path) + 9);
	if (!a->path)
		return -ENOMEM; /* the caller closes fd */
	snprintf(a->path, strlen(path) + 9, "/dev/shm%s", path);
	return 0;
}

/* A memfd of len bytes, reached by peers through /proc/<pid>/fd/<fd>. */
static int open_unnamed(size_t len, struct shm_alloc *a)
{
	char path[64];
	struct stat st;
	int fd = memfd_create("mooncake", MFD_CLOEXEC);

	if (fd < 0)
		return -errno;
	(void)flock(fd, LOCK_SH);
	if (ftruncate(fd, (off_t)(len + TE_SHM_TAG_PAGE)) || fstat(fd, &st)) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	{
		int rc = te__shm_tag_write(fd, len, a->tag);

		if (rc) {
			close(fd);
			return rc;
		}
	}
	a->fd = fd;
	a->ino = (uint64_t)st.st_ino;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), fd);
	a->path = strdup(path);
	return a->path ? 0 : -ENOMEM;
}

int te_mem_alloc(struct te_engine *eng, size_t len, const char *name,
		 void **out)
{
	struct shm_alloc *a;
	void *p;
	int rc;

	if (te__forked(eng))
		return MC_EFORKED;
	if (!len)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->fd = -1;
	rc = name ? open_named(name, len, a) : open_unnamed(len, a);
	if (rc && !name && rc != -ENOMEM)
		rc = 0; /* no memfd here: private memory, read over tcp */
	if (rc)
		goto err;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 a->fd >= 0 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS, a->fd,
		 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		goto err;
	}
	/* Huge pages where the kernel gives them (THP for private memory,
	 * shmem_enabled for memfds and /dev/shm), asked before any fault. */
	(void)madvise(p, len, MADV_HUGEPAGE);
	/* Pool memory stays out of core dumps: gigabytes of other clients'
	 * objects (a crash of an inference server wrote them all). */
	(void)madvise(p, len, MADV_DONTDUMP);
	rc = te__populate_start(p, len, &a->populate);
	if (rc) {
		munmap(p, len);
		goto err;
	}
	a->addr = (uintptr_t)p;
	a->len = len;
	pthread_mutex_lock(&alloc_lock);
	a->next = allocs;
	allocs = a;
	pthread_mutex_unlock(&alloc_lock);
	*out = p;
	return 0;

err:
	if (a->fd >= 0)
		close(a->fd);
	free(a->path);
	free(a);
	return rc;
}

/* Take the allocation starting at addr out of the list (NULL: none). */
static struct shm_alloc *take(uintptr_t addr)
{
	struct shm_alloc **pp, *a = NULL;

	pthread_mutex_lock(&alloc_lock);
	for (pp = &allocs; *pp; pp = &(*pp)->next) {
		if ((*pp)->addr == addr) {
			a = *pp;
			*pp = a->next;
			break;
		}
	}
	pthread_mutex_unlock(&alloc_lock);
	return a;
}

int te_mem_wait(struct te_engine *eng, void *addr)
{
	struct te_populate *job = NULL;
	int rc = -ENOENT;

	if (te__forked(eng))
		return MC_EFORKED;
	pthread_mutex_lock(&alloc_lock);
	for (struct shm_alloc *a = allocs; a; a = a->next) {
		if (a->addr == (uintptr_t)addr) {
			job = a->populate;
			rc = 0;
			break;
		}
	}
	/* te_mem_free() of this memory meanwhile is the caller's bug (as
	 * any use after free), so the job may be used unlocked. */
	pthread_mutex_unlock(&alloc_lock);
	te__populate_wait(job);
	return rc;
}

int te_mem_unlink(struct te_engine *eng, void *addr)
{
	int rc = -ENOENT;

	if (te__forked(eng))
		return MC_EFORKED;
	pthread_mutex_lock(&alloc_lock);
	for (struct shm_alloc *a = allocs; a; a = a->next) {
		if (a->addr != (uintptr_t)addr)
			continue;
		rc = 0;
		if (a->named && !a->unlinked && unlink(a->path) &&
		    errno != ENOENT)
			rc = -errno;
		/* Never unlink again: the name may be someone else's now. */
		a->unlinked = true;
		break;
	}
	pthread_mutex_unlock(&alloc_lock);
	return rc;
}

void te_mem_free(struct te_engine *eng, void *addr)
{
	struct shm_alloc *a;

	if (te__forked(eng))
		return; /* the parent's (te_engine.forks) */
	a = take((uintptr_t)addr);
	if (!a)
		return;
	te__populate_stop(a->populate);
	munmap(addr, a->len);
	if (a->fd >= 0)
		close(a->fd);
	free(a->path);
	free(a);
}
