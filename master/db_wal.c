/* SPDX-License-Identifier: Apache-2.0 */
/*
 * WAL checkpoints off the request path (db_int.h, docs/design.md "The
 * record's WAL").
 *
 * sqlite's own auto-checkpoint runs inside the COMMIT that takes the WAL
 * past 1,000 pages: that commit copies the WAL into the database file and
 * fsyncs both (5-20 ms on a VM's disk for 4 MB) while the master's lock
 * is held, so every call queued on the lock stalls with it. Here a commit
 * only notes the WAL's length (a WAL hook, which replaces the
 * auto-checkpoint) and wakes a thread that checkpoints with a connection
 * of its own in PASSIVE mode: it copies what it can without waiting for
 * the writer or making it wait.
 *
 * The WAL starts over (at the next commit) only once a checkpoint has
 * copied all of it, which a checkpoint running beside a steady stream of
 * commits never does: each finds new frames behind it. So the thread
 * copies pass after pass until what is left is a short tail (each pass
 * copies what the commits added during the last one), and then the next
 * commit copies the tail itself: a few pages and two fsyncs with little
 * to flush, instead of the whole WAL. A writer that has gone quiet leaves
 * the tail to the thread. Should the thread fall far behind (a disk that
 * cannot keep up), commits checkpoint themselves as sqlite would.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "db_int.h"
#include "mc_log.h"
#include "mc_time.h"
#include "mooncake/mc_err.h"

#define DUE_FRAMES 4000 /* pages: a pass (sqlite's own: 1,000) */
#define INLINE_FRAMES (4 * DUE_FRAMES) /* the thread this far behind */
#define TAIL_FRAMES 64 /* left to the next commit */
#define MAX_PASSES 4 /* then the tail is the commit's, however long */
#define IDLE_MS 1000 /* a WAL not yet copied is copied after this */
#define WARN_MS 10000 /* a failing checkpoint is logged this often */
#define BACKOFF_MS 10 /* after a pass that failed or found it busy */

struct mst_db_wal {
	sqlite3 *h; /* the checkpointer's own connection */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop; /* mu */
	_Atomic bool due; /* a commit took the WAL past DUE_FRAMES */
	_Atomic bool tail; /* the next commit copies the rest */
	_Atomic int frames; /* the WAL's length after the last commit */
	int copied; /* frames the last complete checkpoint found */
	uint64_t warned_ms;
	struct mst_db_wal_stats st; /* mu */
};

/* A PASSIVE checkpoint on h. *left: the WAL's frames it did not copy
 * (0: it copied all of it; -1 when it failed). *us: its time. */
static int passive(sqlite3 *h, int *left, uint64_t *us)
{
	uint64_t t0 = mc_mono_us();
	int log = 0, done = 0;
	int rc = sqlite3_wal_checkpoint_v2(h, NULL, SQLITE_CHECKPOINT_PASSIVE,
					   &log, &done);

	*us = mc_mono_us() - t0;
	*left = rc == SQLITE_OK && done >= 0 && log >= done ? log - done : -1;
	return rc;
}

/* One more checkpoint of us microseconds (mu held). */
static void count(uint64_t *runs, uint64_t *total, uint64_t *max, uint64_t us)
{
	++*runs;
	*total += us;
	if (us > *max)
		*max = us;
}

/* In the committing thread, after each COMMIT (master lock held). */
static int on_commit(void *arg, sqlite3 *h, const char *name, int frames)
{
	struct mst_db_wal *w = arg;
	uint64_t us;
	int left;

	(void)name;
	atomic_store_explicit(&w->frames, frames, memory_order_relaxed);
	if (atomic_exchange_explicit(&w->tail, false, memory_order_acquire)) {
		int rc = passive(h, &left, &us);

		pthread_mutex_lock(&w->mu);
		if (rc == SQLITE_OK)
			count(&w->st.tail_runs, &w->st.tail_us,
			      &w->st.tail_max_us, us);
		if (left) { /* busy, or more came: the thread goes on */
			atomic_store(&w->due, true);
			pthread_cond_signal(&w->cv);
		}
		pthread_mutex_unlock(&w->mu);
		return SQLITE_OK;
	}
	if (frames >= INLINE_FRAMES) {
		/* SQLITE_BUSY while the thread is at it: nothing done. */
		if (passive(h, &left, &us) == SQLITE_OK) {
			pthread_mutex_lock(&w->mu);
			w->st.inline_runs++;
			pthread_mutex_unlock(&w->mu);
		}
		return SQLITE_OK;
	}
	if (frames >= DUE_FRAMES &&
	    !atomic_exchange_explicit(&w->due, true, memory_order_relaxed)) {
		pthread_mutex_lock(&w->mu);
		pthread_cond_signal(&w->cv);
		pthread_mutex_unlock(&w->mu);
	}
	return SQLITE_OK;
}

/* One pass of the thread (mu not held): the frames it left (0 all
 * copied), or -1 when it failed or found the WAL busy. */
static int checkpoint(struct mst_db_wal *w)
{
	int frames = atomic_load(&w->frames), left;
	uint64_t us;
	int rc = passive(w->h, &left, &us);

	pthread_mutex_lock(&w->mu);
	if (rc == SQLITE_OK) {
		count(&w->st.runs, &w->st.us, &w->st.max_us, us);
		if (!left)
			w->copied = frames;
	} else if (rc == SQLITE_BUSY) {
		w->st.busy++; /* a brief lock of the writer's: next time */
	} else {
		w->st.failures++;
	}
	pthread_mutex_unlock(&w->mu);
	if (rc != SQLITE_OK && rc != SQLITE_BUSY &&
	    mc_mono_ms() - w->warned_ms >= WARN_MS) {
		w->warned_ms = mc_mono_ms();
		mc_log_warn("master",
			    "checkpoint of the record's WAL failed: %s (the "
			    "WAL grows until one succeeds)",
			    sqlite3_errmsg(w->h));
	}
	return rc == SQLITE_OK ? left : -1;
}

static void *run(void *arg)
{
	struct mst_db_wal *w = arg;
	int passes = 0, left; /* passes since the last tail */
	bool quiet;

	/* Behind the threads that serve: a pass may take its time. */
	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
	pthread_mutex_lock(&w->mu);
	while (!w->stop) {
		quiet = false;
		if (!atomic_load(&w->due)) {
			struct timespec ts = mc_mono_deadline(IDLE_MS);
			int got = pthread_cond_timedwait(&w->cv, &w->mu, &ts);

			if (w->stop)
				break;
			if (!atomic_load(&w->due)) {
				if (got != ETIMEDOUT)
					continue;
				/* Quiet: what is left (a tail not taken, the
				 * last burst) is the thread's, once. */
				atomic_store(&w->tail, false);
				if (atomic_load(&w->frames) == w->copied)
					continue;
				quiet = true;
			}
		}
		atomic_store(&w->due, false);
		pthread_mutex_unlock(&w->mu);
		left = checkpoint(w);
		if (left < 0) {
			/* Busy, or failing (a full disk): again once a
			 * commit asks or the WAL is quiet, not at once. */
			struct timespec ts = mc_mono_deadline(BACKOFF_MS);

			pthread_mutex_lock(&w->mu);
			if (!w->stop)
				pthread_cond_timedwait(&w->cv, &w->mu, &ts);
			continue;
		}
		if (left > TAIL_FRAMES && ++passes < MAX_PASSES) {
			atomic_store(&w->due, true); /* another pass */
		} else if (left > 0 || !quiet) {
			/* Short (or passes do not shorten it): the tail is
			 * the next commit's. Even with none left the WAL
			 * starts over only if no transaction was open when
			 * the pass ended, and one is, under steady load. */
			atomic_store(&w->tail, true);
			passes = 0;
		}
		pthread_mutex_lock(&w->mu);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int mst_db_wal_start(struct mst_db *db, const char *path, bool full_sync)
{
	struct mst_db_wal *w = calloc(1, sizeof(*w));
	char pragma[64];

	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->mu, NULL);
	mc_cond_init_mono(&w->cv);
	snprintf(pragma, sizeof(pragma), "PRAGMA synchronous=%s;",
		 full_sync ? "FULL" : "NORMAL");
	if (sqlite3_open_v2(path, &w->h,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
			    MST_DB_VFS) != SQLITE_OK ||
	    sqlite3_exec(w->h, pragma, NULL, NULL, NULL) != SQLITE_OK ||
	    pthread_create(&w->thread, NULL, run, w)) {
		mc_log_warn("master",
			    "record %s: no checkpoint thread (%s): commits "
			    "checkpoint the WAL themselves",
			    path,
			    w->h ? sqlite3_errmsg(w->h) : "out of memory");
		sqlite3_close(w->h);
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		free(w);
		return MC_EDB;
	}
	db->wal = w;
	sqlite3_wal_hook(db->h, on_commit, w);
	return 0;
}

void mst_db_wal_stop(struct mst_db *db)
{
	struct mst_db_wal *w = db->wal;

	if (!w)
		return;
	sqlite3_wal_hook(db->h, NULL, NULL);
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	sqlite3_close(w->h);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
	db->wal = NULL;
}

bool mst_db_wal_stats(struct mst_db *db, struct mst_db_wal_stats *out)
{
	struct mst_db_wal *w = db ? db->wal : NULL;

	memset(out, 0, sizeof(*out));
	if (!w)
		return false;
	pthread_mutex_lock(&w->mu);
	*out = w->st;
	pthread_mutex_unlock(&w->mu);
	out->frames = (uint64_t)atomic_load(&w->frames);
	return true;
}
