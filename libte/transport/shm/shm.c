/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The "shm" transport: a peer on the same host and network namespace
 * (equal mc_host_id) publishes, for buffers it allocated with
 * te_mem_alloc(), the file behind them: its /dev/shm file, or for unnamed
 * memory its memfd's descriptor, /proc/<pid>/fd/<n>. We map that file once
 * per peer buffer and copy in the submitting thread (with the engine's
 * copy helpers for large requests, copy.c): no sockets, no peer CPU.
 *
 * Safety: the path must lie under /dev/shm/ or be /proc/<pid>/fd/<n>
 * (checked when decoding the descriptor), the file must be the published
 * inode, at least as large as the published range plus the tag page
 * (checked with fstat before mapping, so a truncated file cannot SIGBUS
 * us), and its last page must hold the descriptor's tag (mem.c: only a
 * process that could read the file knows it, so a peer cannot make us
 * map a file it could not open itself); the owner reserved its blocks
 * (te_mem_alloc), so no fault inside it can either.
 * Mappings live as long as the cached peer. The owner holds a shared
 * flock on its file while alive; before each copy we try an exclusive
 * one, and getting it means the owner died: the request fails and the
 * peer is resolved again on next use (one syscall per request).
 *
 * Reach: a peer's buffer is reachable only once we could map it. A file
 * we may not open (another user's 0600 file or process, another /dev/shm
 * behind a mount namespace, another pid namespace) makes the buffer
 * unreachable here, so the request goes to the next transport (tcp),
 * whose server checks it as for any remote reader; the failure is
 * remembered for as long as the peer is cached.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "mc_log.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

struct shm_map {
	int err; /* the mapping failed (remembered): not reachable */
	int fd; /* the peer's file, to test its owner's lock */
	void *base; /* mapping, page aligned */
	size_t map_len;
	char *ptr; /* the buffer's first byte inside the mapping */
};

struct shm_peer {
	pthread_mutex_t lock;
	unsigned n;
	struct shm_map *maps; /* one per peer buffer, lazily mapped */
};

static int shm_init(struct te_engine *eng, const struct te_engine_cfg *cfg,
		    struct te_transport **out, char *err, size_t errlen)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

static void shm_fini(struct te_transport *tp)
{
	free(tp);
}

static int find_buffer(struct te_peer *p, uint64_t addr, uint64_t len)
{
	for (unsigned i = 0; i < p->n_buffers; i++) {
		struct te_buffer_desc *b = &p->buffers[i];
		if (b->shm_path && addr >= b->addr &&
		    len <= b->length - (addr - b->addr) &&
		    addr - b->addr <= b->length)
			return (int)i;
	}
	return -1;
}

/* /proc/<pid>/fd/<n> names a memfd te_mem_alloc() made ("mooncake"). */
static bool memfd_of_ours(const char *path)
{
	static const char want[] = "/memfd:mooncake";
	char link[64];
	ssize_t n = readlink(path, link, sizeof(link) - 1);

	if (n < (ssize_t)sizeof(want) - 1)
		return false;
	link[n] = '\0';
	return !strncmp(link, want, sizeof(want) - 1) &&
	       (!link[sizeof(want) - 1] || link[sizeof(want) - 1] == ' ');
}

static int map_buffer(struct te_buffer_desc *b, struct shm_map *m)
{
	long page = sysconf(_SC_PAGESIZE);
	uint64_t aligned = b->shm_offset & ~((uint64_t)page - 1);
	size_t map_len = (size_t)(b->length + (b->shm_offset - aligned));
	struct stat st;
	void *p;
	int fd, rc;

	bool proc = !strncmp(b->shm_path, "/proc/", 6);
	struct statfs fs;

	/* A descriptor's /proc link is followed, if it is a memfd of
	 * te_mem_alloc()'s; a /dev/shm name is not. */
	if (proc && !memfd_of_ours(b->shm_path))
		return -EACCES;
	/* O_NOCTTY | O_NONBLOCK: whatever the name, opening it must not
	 * make it our terminal or wait. */
	fd = open(b->shm_path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK |
				       (proc ? 0 : O_NOFOLLOW));
	if (fd < 0)
		return -errno;
	/* Shared memory only (tmpfs, a memfd, hugetlbfs): never a file on
	 * a disk that happens to end with a tag. */
	if (fstatfs(fd, &fs) ||
	    (fs.f_type != TMPFS_MAGIC && fs.f_type != HUGETLBFS_MAGIC)) {
		close(fd);
		return -EACCES;
	}
	/* The range lies before the tag page (mem.c). */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size < TE_SHM_TAG_PAGE ||
	    (uint64_t)st.st_size - TE_SHM_TAG_PAGE < b->shm_offset ||
	    (uint64_t)st.st_size - TE_SHM_TAG_PAGE - b->shm_offset <
		    b->length) {
		close(fd);
		return -EBADMSG;
	}
	/* Another file under that name: another pid namespace, a reused pid,
	 * a replaced /dev/shm file. */
	if (b->shm_ino && (uint64_t)st.st_ino != b->shm_ino) {
		close(fd);
		return -ESTALE;
	}
	/* A file that does not hold the descriptor's tag is not the peer's
	 * (it names a file it could not read: another user's segment or
	 * some program's memory, opened here with our rights). */
	if (!te__shm_tag_ok(fd, (uint64_t)st.st_size, b->shm_tag)) {
		close(fd);
		return -EACCES;
	}
	p = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 (off_t)aligned);
	rc = p == MAP_FAILED ? -errno : 0;
	if (rc) {
		close(fd);
		return rc;
	}
	m->fd = fd;
	m->base = p;
	m->map_len = map_len;
	m->ptr = (char *)p + (b->shm_offset - aligned);
	return 0;
}

static struct shm_peer *peer_state(struct te_transport *tp, struct te_peer *p)
{
	struct shm_peer *sp;

	/* Creation races are settled under the engine's peer lock. */
	pthread_mutex_lock(&tp->eng->peer_lock);
	sp = p->tp_priv[tp->index];
	if (!sp) {
		sp = calloc(1, sizeof(*sp));
		if (sp) {
			sp->maps = calloc(p->n_buffers, sizeof(*sp->maps));
			if (!sp->maps) {
				free(sp);
				sp = NULL;
			} else {
				sp->n = p->n_buffers;
				pthread_mutex_init(&sp->lock, NULL);
				p->tp_priv[tp->index] = sp;
			}
		}
	}
	pthread_mutex_unlock(&tp->eng->peer_lock);
	return sp;
}

/*
 * Map buffer i of the peer once: 0, or the error that keeps it unmapped.
 * Running out of descriptors or memory is not remembered (the next request
 * tries again); anything else is, until the peer is resolved again.
 */
static int map_once(struct te_peer *p, struct shm_peer *sp, int i)
{
	struct shm_map *m = &sp->maps[i];
	int rc;

	pthread_mutex_lock(&sp->lock);
	rc = m->err;
	if (!m->base && !rc) {
		rc = map_buffer(&p->buffers[i], m);
		if (rc && rc != -EMFILE && rc != -ENFILE && rc != -ENOMEM) {
			m->err = rc;
			mc_log_info("te",
				    "shm: cannot map %s of '%s' (%s): "
				    "reading it over tcp",
				    p->buffers[i].shm_path, p->name,
				    mc_strerror(rc));
		}
	}
	pthread_mutex_unlock(&sp->lock);
	return rc;
}

static bool shm_reachable(struct te_transport *tp, struct te_peer *peer,
			  const struct te_request *req)
{
	struct shm_peer *sp;
	int i;

	if (peer->is_self || !peer->host_id[0] ||
	    strcmp(peer->host_id, tp->eng->host_id))
		return false;
	i = find_buffer(peer, req->target_addr, req->length);
	if (i < 0)
		return false;
	sp = peer_state(tp, peer);
	return sp && map_once(peer, sp, i) == 0;
}

static int shm_submit(struct te_transport *tp, struct te_task *t)
{
	struct te_peer *p = t->peer;
	int i = find_buffer(p, t->req.target_addr, t->req.length);
	/*
	 * shm_reachable() picked us in this thread: it made the peer's state
	 * and mapped the buffer (both under locks), so reading them needs
	 * neither lock again.
	 */
	struct shm_peer *sp = p->tp_priv[tp->index];
	struct te_buffer_desc *b;
	char *target;

	if (i < 0)
		return MC_ENOTREG;
	if (!sp || !sp->maps[i].base)
		return -EIO;
	b = &p->buffers[i];
	/*
	 * The owner holds a shared lock on its file while alive: if we can
	 * lock it exclusively, it died and its memory is nobody's pool.
	 */
	if (flock(sp->maps[i].fd, LOCK_EX | LOCK_NB) == 0) {
		flock(sp->maps[i].fd, LOCK_UN);
		te__peer_invalidate(p);
		return -ECONNRESET;
	}
	target = sp->maps[i].ptr + (t->req.target_addr - b->addr);
	if (t->req.opcode == TE_READ)
		te__copy(tp->eng->copier, t->req.local, target, t->req.length);
	else
		te__copy(tp->eng->copier, target, t->req.local, t->req.length);
	te__slice_done(t, t->req.length, 0);
	return 0;
}

static void shm_peer_release(struct te_transport *tp, struct te_peer *p)
{
	struct shm_peer *sp = p->tp_priv[tp->index];

	for (unsigned i = 0; i < sp->n; i++) {
		if (sp->maps[i].base) {
			munmap(sp->maps[i].base, sp->maps[i].map_len);
			close(sp->maps[i].fd);
		}
	}
	pthread_mutex_destroy(&sp->lock);
	free(sp->maps);
	free(sp);
	p->tp_priv[tp->index] = NULL;
}

const struct te_transport_ops te_shm_ops = {
	.name = "shm",
	.version = 1,
	.init = shm_init,
	.fini = shm_fini,
	.reachable = shm_reachable,
	.submit = shm_submit,
	.peer_release = shm_peer_release,
};
