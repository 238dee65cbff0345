/* SPDX-License-Identifier: Apache-2.0 */
/*
 * File locks, kept by this daemon per name: flock(2) and POSIX (fcntl)
 * record locks. Without them the kernel keeps locks on its inodes, and
 * one name is several inodes here (a version each, a writer's own, a
 * retried open's own: kv.c), so two processes locking one lock file
 * could both hold it. Locks are per mount (another mount, another host,
 * does not see them), as with a local filesystem exported without a lock
 * manager.
 *
 * Semantics are Linux's: flock locks are whole-file, shared or
 * exclusive, owned by the open file description (the kernel's lock
 * owner for them), converted by releasing first, released with the
 * description (release, FUSE_RELEASE_FLOCK_UNLOCK); POSIX locks are
 * byte ranges owned by the process (its lock owner), split and merged
 * per owner, released at any close of the file by that owner (flush).
 * The two kinds do not conflict with each other. A lock that must wait
 * is answered when granted (waiters in arrival order, each granted
 * once nothing conflicts), or EINTR when its caller is interrupted (a
 * signal, kill): no daemon thread waits.
 *
 * A lock also protects the locked file's own content: a grant, before
 * its answer, rebases the handle it came through when that is open for
 * writing and unchanged (mcfs_file_locked: the open copied the version
 * of its moment, and the previous holder's close published a newer one
 * before its release let this lock in: ops.c publishes, then drops).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#include "mcfs.h"

#define INTR_RING 64

struct lk_hold {
	struct lk_hold *next;
	uint64_t owner;
	uint64_t start, end; /* inclusive */
	pid_t pid;
	bool flock;
	short type; /* F_RDLCK or F_WRLCK */
};

struct lk_wait {
	struct lk_wait *next;
	fuse_req_t req;
	/* The handle it came through: alive until answered (the caller's
	 * syscall holds the file). */
	struct mcfs_fh *fh;
	uint64_t id;
	struct lk_hold want;
};

struct lk_name {
	struct lk_name *next;
	struct lk_hold *holds;
	struct lk_wait *waits; /* in arrival order */
	char key[];
};

struct mcfs_locks {
	pthread_mutex_t mu;
	struct lk_name *names;
	uint64_t next_id;
	/* Waiters interrupted before they were queued (their id). */
	uint64_t intr[INTR_RING];
	unsigned n_intr;
};

int mcfs_locks_init(struct mcfs_locks **out)
{
	struct mcfs_locks *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	pthread_mutex_init(&l->mu, NULL);
	*out = l;
	return 0;
}

void mcfs_locks_fini(struct mcfs_locks *l)
{
	if (!l)
		return;
	while (l->names) {
		struct lk_name *n = l->names;

		l->names = n->next;
		while (n->holds) {
			struct lk_hold *h = n->holds;

			n->holds = h->next;
			free(h);
		}
		while (n->waits) { /* the session is gone: nobody to answer */
			struct lk_wait *w = n->waits;

			n->waits = w->next;
			free(w);
		}
		free(n);
	}
	pthread_mutex_destroy(&l->mu);
	free(l);
}

/* The entry of key, made when make; NULL when none (or no memory). */
static struct lk_name *name_of(struct mcfs_locks *l, const char *key, bool make)
{
	struct lk_name *n;
	size_t len;

	for (n = l->names; n; n = n->next)
		if (!strcmp(n->key, key))
			return n;
	if (!make)
		return NULL;
	len = strlen(key);
	n = calloc(1, sizeof(*n) + len + 1);
	if (!n)
		return NULL;
	memcpy(n->key, key, len + 1);
	n->next = l->names;
	l->names = n;
	return n;
}

/* Drop n when nothing holds or waits on it. */
static void name_gc(struct mcfs_locks *l, struct lk_name *n)
{
	struct lk_name **pp;

	if (n->holds || n->waits)
		return;
	for (pp = &l->names; *pp; pp = &(*pp)->next)
		if (*pp == n) {
			*pp = n->next;
			free(n);
			return;
		}
}

static bool conflicts(const struct lk_hold *h, const struct lk_hold *w)
{
	return h->flock == w->flock && h->owner != w->owner &&
	       h->start <= w->end && w->start <= h->end &&
	       (h->type == F_WRLCK || w->type == F_WRLCK);
}

static const struct lk_hold *first_conflict(const struct lk_name *n,
					    const struct lk_hold *w)
{
	for (const struct lk_hold *h = n->holds; h; h = h->next)
		if (conflicts(h, w))
			return h;
	return NULL;
}

/* Remove what owner holds of kind flock in [start, end], splitting the
 * ranges that reach past it. -ENOMEM (nothing changed) when a split
 * cannot be allocated. */
static int cut(struct lk_name *n, uint64_t owner, bool flock, uint64_t start,
	       uint64_t end)
{
	struct lk_hold **pp = &n->holds;

	/* A range around [start, end] becomes two: allocate first. */
	for (struct lk_hold *h = n->holds; h; h = h->next)
		if (h->owner == owner && h->flock == flock &&
		    h->start < start && h->end > end) {
			struct lk_hold *tail = malloc(sizeof(*tail));

			if (!tail)
				return -ENOMEM;
			*tail = *h;
			tail->start = end + 1;
			h->end = start - 1;
			tail->next = h->next;
			h->next = tail;
			return 0; /* it was the only overlap of this owner */
		}
	while (*pp) {
		struct lk_hold *h = *pp;

		if (h->owner != owner || h->flock != flock || h->end < start ||
		    h->start > end) {
			pp = &h->next;
		} else if (h->start >= start && h->end <= end) {
			*pp = h->next;
			free(h);
		} else if (h->start < start) {
			h->end = start - 1;
			pp = &h->next;
		} else {
			h->start = end + 1;
			pp = &h->next;
		}
	}
	return 0;
}

/* Give w's owner what it asks for (nothing conflicts). */
static int grant(struct lk_name *n, const struct lk_hold *w)
{
	struct lk_hold *h = NULL;
	int rc;

	if (w->type != F_UNLCK && !(h = malloc(sizeof(*h))))
		return -ENOMEM; /* before anything changed */
	rc = cut(n, w->owner, w->flock, w->start, w->end);
	if (rc || !h) {
		free(h);
		return rc;
	}
	*h = *w;
	h->next = n->holds;
	n->holds = h;
	return 0;
}

/* After a release: answer the waiters that nothing blocks now, in order
 * (the answers go out after the table's lock). */
static void wake(struct lk_name *n, struct lk_wait **done)
{
	struct lk_wait **pp = &n->waits;

	while (*pp) {
		struct lk_wait *w = *pp;

		if (first_conflict(n, &w->want) || grant(n, &w->want)) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		w->next = *done;
		*done = w;
	}
}

static void answer(struct mcfs *fs, struct lk_wait *done, int err)
{
	while (done) {
		struct lk_wait *w = done;

		done = w->next;
		if (!err)
			mcfs_file_locked(fs, w->fh);
		fuse_reply_err(w->req, err);
		free(w);
	}
}

static void on_interrupt(fuse_req_t req, void *data)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_locks *l = fs->locks;
	uint64_t id = (uint64_t)(uintptr_t)data;
	struct lk_wait *gone = NULL;

	pthread_mutex_lock(&l->mu);
	for (struct lk_name *n = l->names; n; n = n->next)
		for (struct lk_wait **pp = &n->waits; *pp; pp = &(*pp)->next)
			if ((*pp)->id == id) {
				gone = *pp;
				*pp = gone->next;
				gone->next = NULL;
				name_gc(l, n); /* may free n: look no further */
				goto out;
			}
	/* Not queued yet (or answered already: harmless). */
	l->intr[l->n_intr++ % INTR_RING] = id;
out:
	pthread_mutex_unlock(&l->mu);
	answer(fs, gone, EINTR);
}

static bool interrupted(struct mcfs_locks *l, uint64_t id)
{
	for (unsigned i = 0; i < INTR_RING; i++)
		if (l->intr[i] == id)
			return true;
	return false;
}

/* Set (or release, F_UNLCK) the lock w through fh; with wait, a
 * conflicting one is answered once granted. Replies to req. */
static void set_lock(struct mcfs *fs, fuse_req_t req, const char *key,
		     struct mcfs_fh *fh, const struct lk_hold *want, bool wait)
{
	struct mcfs_locks *l = fs->locks;
	struct lk_wait *w = NULL, *done = NULL;
	struct lk_name *n;
	uint64_t id = 0;
	int rc = 0;

	if (wait && want->type != F_UNLCK) {
		w = calloc(1, sizeof(*w));
		if (!w) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		pthread_mutex_lock(&l->mu);
		id = ++l->next_id;
		pthread_mutex_unlock(&l->mu);
		/* Before it is queued: once queued, another thread may
		 * answer (and free) req at any time. */
		fuse_req_interrupt_func(req, on_interrupt,
					(void *)(uintptr_t)id);
	}
	pthread_mutex_lock(&l->mu);
	n = name_of(l, key, want->type != F_UNLCK);
	if (!n) {
		rc = want->type == F_UNLCK ? 0 : -ENOMEM;
	} else if (w && interrupted(l, id)) {
		rc = -EINTR;
	} else if (want->flock && want->type != F_UNLCK &&
		   (rc = cut(n, want->owner, true, 0, UINT64_MAX))) {
		/* (a conversion releases first, as Linux's flock) */
	} else if (want->type != F_UNLCK && first_conflict(n, want)) {
		if (w) {
			struct lk_wait **pp = &n->waits;

			w->req = req;
			w->fh = fh;
			w->id = id;
			w->want = *want;
			while (*pp)
				pp = &(*pp)->next;
			*pp = w;
			w = NULL;
			rc = 1; /* answered when granted */
		} else {
			rc = -EAGAIN; /* EWOULDBLOCK */
		}
	} else {
		rc = grant(n, want);
	}
	if (n && rc != 1) {
		wake(n, &done); /* a release or conversion may let others in */
		name_gc(l, n);
	}
	pthread_mutex_unlock(&l->mu);
	free(w);
	answer(fs, done, 0);
	if (!rc && want->type != F_UNLCK)
		mcfs_file_locked(fs, fh);
	if (rc != 1)
		fuse_reply_err(req, -rc);
}

void mcfs_locks_flock(struct mcfs *fs, fuse_req_t req, const char *key,
		      struct mcfs_fh *fh, uint64_t owner, int op)
{
	struct lk_hold want = { .owner = owner,
				.end = UINT64_MAX,
				.flock = true };
	int kind = op & (LOCK_SH | LOCK_EX | LOCK_UN);

	want.type = kind == LOCK_SH ? F_RDLCK :
		    kind == LOCK_EX ? F_WRLCK :
		    kind == LOCK_UN ? F_UNLCK :
				      -1;
	if (want.type < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	set_lock(fs, req, key, fh, &want, !(op & LOCK_NB));
}

/* [start, end] of a struct flock as the kernel sends it (l_whence
 * SEEK_SET, l_len 0: to the end); -EINVAL for a range that is not. */
static int range_of(const struct flock *lk, uint64_t *start, uint64_t *end)
{
	if (lk->l_start < 0 || lk->l_len < 0)
		return -EINVAL;
	*start = (uint64_t)lk->l_start;
	*end = lk->l_len ? *start + (uint64_t)lk->l_len - 1 : UINT64_MAX;
	return *end < *start ? -EINVAL : 0;
}

void mcfs_locks_setlk(struct mcfs *fs, fuse_req_t req, const char *key,
		      struct mcfs_fh *fh, uint64_t owner,
		      const struct flock *lk, bool sleep)
{
	struct lk_hold want = { .owner = owner,
				.pid = lk->l_pid,
				.type = lk->l_type };
	int rc = range_of(lk, &want.start, &want.end);

	if (!rc && lk->l_type != F_RDLCK && lk->l_type != F_WRLCK &&
	    lk->l_type != F_UNLCK)
		rc = -EINVAL;
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	set_lock(fs, req, key, fh, &want, sleep);
}

void mcfs_locks_getlk(struct mcfs *fs, fuse_req_t req, const char *key,
		      uint64_t owner, const struct flock *lk)
{
	struct mcfs_locks *l = fs->locks;
	struct lk_hold want = { .owner = owner, .type = lk->l_type };
	struct flock out = *lk;
	const struct lk_hold *h = NULL;
	const struct lk_name *n;
	int rc = range_of(lk, &want.start, &want.end);

	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	pthread_mutex_lock(&l->mu);
	n = name_of(l, key, false);
	if (n)
		h = first_conflict(n, &want);
	if (h) {
		out.l_type = h->type;
		out.l_whence = SEEK_SET;
		out.l_start = (off_t)h->start;
		out.l_len = h->end == UINT64_MAX ?
				    0 :
				    (off_t)(h->end - h->start + 1);
		out.l_pid = h->pid;
	} else {
		out.l_type = F_UNLCK;
	}
	pthread_mutex_unlock(&l->mu);
	fuse_reply_lock(req, &out);
}

void mcfs_locks_rename(struct mcfs *fs, const char *from, const char *to,
		       bool prefix)
{
	struct mcfs_locks *l = fs->locks;
	size_t fl = strlen(from), tl = strlen(to);
	struct lk_name *moved = NULL, **pp;

	pthread_mutex_lock(&l->mu);
	for (pp = &l->names; *pp;) {
		struct lk_name *n = *pp, *m;
		size_t rest;

		if (prefix ? strncmp(n->key, from, fl) : strcmp(n->key, from)) {
			pp = &n->next;
			continue;
		}
		rest = strlen(n->key) - fl;
		m = calloc(1, sizeof(*m) + tl + rest + 1);
		if (!m) { /* stays under its old name */
			pp = &n->next;
			continue;
		}
		memcpy(m->key, to, tl);
		memcpy(m->key + tl, n->key + fl, rest + 1);
		m->holds = n->holds;
		m->waits = n->waits;
		m->next = moved;
		moved = m;
		*pp = n->next;
		free(n);
	}
	/* Onto any entry of the new names (a rename over a locked file:
	 * both sets of holders keep what they hold). */
	while (moved) {
		struct lk_name *m = moved, *t = name_of(l, m->key, false);

		moved = m->next;
		if (!t) {
			m->next = l->names;
			l->names = m;
			continue;
		}
		struct lk_hold **hp = &t->holds;
		struct lk_wait **wp = &t->waits;

		while (*hp)
			hp = &(*hp)->next;
		*hp = m->holds;
		while (*wp)
			wp = &(*wp)->next;
		*wp = m->waits;
		free(m);
	}
	pthread_mutex_unlock(&l->mu);
}

/* What owner holds on key (flock: its flock locks, else its POSIX
 * ones), released: a close (flush) ends a process's POSIX locks, the
 * description's release its flock locks. */
void mcfs_locks_drop(struct mcfs *fs, const char *key, uint64_t owner,
		     bool flock)
{
	struct mcfs_locks *l = fs->locks;
	struct lk_wait *done = NULL;
	struct lk_name *n;

	pthread_mutex_lock(&l->mu);
	n = name_of(l, key, false);
	if (n) {
		(void)cut(n, owner, flock, 0, UINT64_MAX); /* no split */
		wake(n, &done);
		name_gc(l, n);
	}
	pthread_mutex_unlock(&l->mu);
	answer(fs, done, 0);
}
