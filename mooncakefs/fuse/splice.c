/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pipes for remote reads (splice.h), and the reads of kv.c that are not
 * read ahead: each FUSE thread has its own pipe (a thread-specific key);
 * one that may hold leftovers (a failed splice, a reply that did not take
 * everything) is closed and made anew on the thread's next read.
 * Same-host replicas (shared memory) and reads that find every
 * connection to the holder busy are read into memory as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "mc_log.h"
#include "mcfs.h"
#include "mooncake/mc_err.h"

/* Smaller reads gain little from saving their copy; they stay buffered. */
#define SPLICE_MIN (64u << 10)
/* Room a pipe keeps beside a read's bytes: libfuse sends the reply
 * header through a pipe of the same size and wants 3 pages of slack. */
#define SPLICE_SLACK (16u << 10)
#define PIPE_WANT (2 * MCFS_READ_MAX)

void mcfs_splice_setup(struct mcfs_splice *sp, bool on)
{
	sp->on = on;
	atomic_store(&sp->max, MCFS_READ_MAX);
	atomic_store(&sp->told, false);
	atomic_store(&sp->fallbacks, 0);
}

int mcfs_pipe_open(struct mcfs_splice *sp, struct mcfs_pipe *p)
{
	int sz;

	if (pipe2(p->fd, O_CLOEXEC | O_NONBLOCK)) {
		p->fd[0] = p->fd[1] = -1;
		return -errno;
	}
	/* Without CAP_SYS_RESOURCE, at most fs.pipe-max-size. */
	if (fcntl(p->fd[1], F_SETPIPE_SZ, (int)PIPE_WANT) < 0)
		(void)fcntl(p->fd[1], F_SETPIPE_SZ, (int)MCFS_READ_MAX);
	sz = fcntl(p->fd[1], F_GETPIPE_SZ);
	p->size = sz > 0 ? (size_t)sz : 0;
	if (p->size < MCFS_READ_MAX + SPLICE_SLACK &&
	    !atomic_exchange(&sp->told, true))
		mc_log_notice("mcfs",
			      "splice_read: pipes hold %zu bytes here "
			      "(fs.pipe-max-size), so reads of more than %zu "
			      "bytes are copied through a buffer; `sysctl "
			      "fs.pipe-max-size=%u` lets reads of %u bytes "
			      "through without",
			      p->size,
			      p->size > SPLICE_SLACK ? p->size - SPLICE_SLACK :
						       0,
			      PIPE_WANT, MCFS_READ_MAX);
	return 0;
}

void mcfs_pipe_close(struct mcfs_pipe *p)
{
	if (p->fd[0] >= 0)
		close(p->fd[0]);
	if (p->fd[1] >= 0)
		close(p->fd[1]);
	p->fd[0] = p->fd[1] = -1;
}

bool mcfs_splice_fits(struct mcfs_splice *sp, const struct mcfs_pipe *p,
		      size_t n)
{
	return sp->on && p->fd[0] >= 0 && n >= SPLICE_MIN &&
	       n + SPLICE_SLACK <= p->size && n <= atomic_load(&sp->max);
}

void mcfs_splice_failed(struct mcfs_splice *sp, struct mcfs_pipe *p)
{
	struct pollfd pf = { .fd = p->fd[1], .events = POLLOUT };
	/* A pipe has a slot per page of its size, whatever each holds. */
	long ps = sysconf(_SC_PAGESIZE);
	size_t page = ps > 0 ? (size_t)ps : 4096, slots = p->size / page;
	size_t held, want, cur, frag;

	atomic_fetch_add(&sp->fallbacks, 1);
	if (poll(&pf, 1, 0) != 0 || !slots)
		return; /* room left: not why it failed */
	held = mcfs_pipe_held(p);
	if (held == SIZE_MAX)
		return;
	/* Every slot is taken: the payload came in fragments of frag bytes
	 * on average (pages would have fitted). libfuse sizes the pipe it
	 * sends the reply through by bytes (a slot per page of the reply,
	 * rounded up to a power of two), so a reply in fragments under half
	 * a page overflows it too, and libfuse then copies the reply through
	 * a buffer: nothing is saved, and each failed read costs a transfer.
	 * Off then (links with a 1500-byte MTU and no receive offload give
	 * ~1.4 KiB). Otherwise half of what filled it, in whole 64 KiB: the
	 * fragments of the next payloads may be smaller still. */
	frag = held / slots;
	want = frag < page / 2 ? 0 : held / 2 / SPLICE_MIN * SPLICE_MIN;
	cur = atomic_load(&sp->max);
	while (want < cur &&
	       !atomic_compare_exchange_weak(&sp->max, &cur, want))
		;
	if (want < cur && !want)
		mc_log_notice("mcfs",
			      "splice_read: a pipe of %zu bytes filled up with "
			      "%zu (network fragments of %zu bytes on average, "
			      "under half a page: libfuse would copy such "
			      "replies anyway); remote reads are copied "
			      "through a buffer from now on",
			      p->size, held, frag);
	else if (want < cur)
		mc_log_notice("mcfs",
			      "splice_read: a pipe of %zu bytes filled up with "
			      "%zu (small network fragments); reads of more "
			      "than %zu bytes are copied from now on",
			      p->size, held, want);
}

size_t mcfs_pipe_held(const struct mcfs_pipe *p)
{
	int n = 0;

	if (p->fd[0] < 0 || ioctl(p->fd[0], FIONREAD, &n) || n < 0)
		return SIZE_MAX;
	return (size_t)n;
}

bool mcfs_pipe_reply(fuse_req_t req, struct mcfs_pipe *p, size_t n, size_t left)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(n);
	int rc;

	bv.buf[0].flags = FUSE_BUF_IS_FD;
	bv.buf[0].fd = p->fd[0];
	rc = fuse_reply_data(req, &bv, 0);
	if (rc)
		mc_log_debug("mcfs", "splice reply of %zu bytes: %s", n,
			     mc_strerror(rc));
	return !rc && mcfs_pipe_held(p) == left;
}

int mcfs_pipe_drain(struct mcfs_pipe *p, char *buf, size_t n)
{
	while (n) {
		ssize_t k = read(p->fd[0], buf, n);

		if (k > 0) {
			buf += k;
			n -= (size_t)k;
		} else if (k < 0 && errno == EINTR) {
			continue;
		} else {
			return k < 0 ? -errno :
				       -EIO; /* never: the bytes are in */
		}
	}
	return 0;
}

static void thread_pipe_free(void *arg)
{
	if (arg) {
		mcfs_pipe_close(arg);
		free(arg);
	}
}

int mcfs_splice_init(struct mcfs *fs)
{
	int rc = pthread_key_create(&fs->pipe_key, thread_pipe_free);

	mcfs_splice_setup(&fs->splice, fs->o.splice_read);
	fs->pipe_key_ok = !rc;
	return -rc;
}

void mcfs_splice_fini(struct mcfs *fs)
{
	if (!fs->pipe_key_ok)
		return;
	/* The FUSE threads have ended (their pipes went with them); the
	 * main thread never reads. */
	pthread_key_delete(fs->pipe_key);
	fs->pipe_key_ok = false;
}

static struct mcfs_pipe *thread_pipe(struct mcfs *fs)
{
	struct mcfs_pipe *p = pthread_getspecific(fs->pipe_key);

	if (p)
		return p;
	p = malloc(sizeof(*p));
	if (!p)
		return NULL;
	if (mcfs_pipe_open(&fs->splice, p)) {
		free(p);
		return NULL;
	}
	if (pthread_setspecific(fs->pipe_key, p)) {
		thread_pipe_free(p);
		return NULL;
	}
	return p;
}

/* Close a pipe that may hold bytes of another read; the next read of
 * this thread makes a new one. */
static void thread_pipe_drop(struct mcfs *fs, struct mcfs_pipe *p)
{
	(void)pthread_setspecific(fs->pipe_key, NULL);
	thread_pipe_free(p);
}

bool mcfs_splice_read(struct mcfs *fs, fuse_req_t req, mooncake_object_t obj,
		      uint64_t off, size_t n)
{
	struct mcfs_pipe *p;
	int64_t got;

	if (!fs->splice.on || !fs->pipe_key_ok)
		return false;
	p = thread_pipe(fs);
	if (!p || !mcfs_splice_fits(&fs->splice, p, n))
		return false;
	got = mooncake_store_object_splice(obj, off, n, p->fd[1]);
	if (got == MC_STORE_NOT_SUPPORTED)
		return false; /* nothing added: read into memory */
	if (got != (int64_t)n) {
		/* Part of it may sit in the pipe: read it again into memory
		 * (object_read tries every replica and has the answer). */
		mc_log_debug("mcfs", "splice read of %zu bytes: %s", n,
			     got < 0 ? mooncake_store_strerror((int)got) :
				       "short");
		mcfs_splice_failed(&fs->splice, p);
		thread_pipe_drop(fs, p);
		return false;
	}
	if (!mcfs_pipe_reply(req, p, n, 0))
		thread_pipe_drop(fs, p);
	atomic_fetch_add(&fs->n_splice_reads, 1);
	return true;
}
