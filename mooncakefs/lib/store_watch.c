/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The change feed (store_fs.h): Watch long polls on the master client's
 * own connections for long polls (master_client.c), so they occupy none
 * of the pool that every other call uses.
 *
 * A long wait is cut into polls of at most WATCH_SLICE_MS, and the handle
 * is left between them: close() (which waits for calls in progress) then
 * ends a watcher within one slice, with UNAVAILABLE_IN_CURRENT_STATUS,
 * instead of waiting out its whole wait. An event still arrives as soon
 * as the master has it.
 */
#include <errno.h>

#include "mc_log.h"
#include "store_int.h"
#include "util.h"

#include "mooncake/store_fs.h"

#define WATCH_SLICE_MS 1000u

static bool known_type(int t)
{
	switch (t) {
	case MCRPC__EVENT_TYPE__EV_PUT:
	case MCRPC__EVENT_TYPE__EV_REMOVE:
	case MCRPC__EVENT_TYPE__EV_RENAME:
	case MCRPC__EVENT_TYPE__EV_EVICT:
	case MCRPC__EVENT_TYPE__EV_LOST:
	case MCRPC__EVENT_TYPE__EV_ATTR:
	case MCRPC__EVENT_TYPE__EV_MKDIR:
	case MCRPC__EVENT_TYPE__EV_RMDIR:
	case MCRPC__EVENT_TYPE__EV_CKPT_PUT:
	case MCRPC__EVENT_TYPE__EV_CKPT_REMOVE:
		return true;
	default:
		return false;
	}
}

static enum mooncake_event_type event_type(int t)
{
	switch (t) {
	case MCRPC__EVENT_TYPE__EV_REMOVE:
		return MOONCAKE_EV_REMOVE;
	case MCRPC__EVENT_TYPE__EV_RENAME:
		return MOONCAKE_EV_RENAME;
	case MCRPC__EVENT_TYPE__EV_EVICT:
		return MOONCAKE_EV_EVICT;
	case MCRPC__EVENT_TYPE__EV_LOST:
		return MOONCAKE_EV_LOST;
	case MCRPC__EVENT_TYPE__EV_ATTR:
		return MOONCAKE_EV_ATTR;
	case MCRPC__EVENT_TYPE__EV_MKDIR:
		return MOONCAKE_EV_MKDIR;
	case MCRPC__EVENT_TYPE__EV_RMDIR:
		return MOONCAKE_EV_RMDIR;
	case MCRPC__EVENT_TYPE__EV_CKPT_PUT:
		return MOONCAKE_EV_CKPT_PUT;
	case MCRPC__EVENT_TYPE__EV_CKPT_REMOVE:
		return MOONCAKE_EV_CKPT_REMOVE;
	default:
		return MOONCAKE_EV_PUT;
	}
}

/*
 * Poll until an event, a reset or the deadline; *out gets the last answer.
 * Enters and leaves the handle itself; returns 0, an internal code, or the
 * store code of a handle that closed meanwhile (*closed set).
 */
static int watch_poll(struct mooncake_store *s, uint64_t *epoch,
		      uint64_t *after, unsigned wait_ms,
		      Mcrpc__WatchResponse **out, bool *closed)
{
	uint64_t deadline = mcs_now_ms() + wait_ms;
	Mcrpc__WatchResponse *r = NULL;
	int rc;

	*out = NULL;
	for (;;) {
		uint64_t now = mcs_now_ms();
		uint64_t left = deadline > now ? deadline - now : 0;
		unsigned slice = left < WATCH_SLICE_MS ? (unsigned)left :
							 WATCH_SLICE_MS;

		rc = mcs_enter(s);
		if (rc) {
			*closed = true;
			return rc;
		}
		if (!*epoch) {
			/* A new cursor: the master answers at once with the
			 * present; then wait from there. */
			rc = mcs_master_watch(s->master, 0, 0, 0, 0, &r);
			if (!rc) {
				*epoch = r->epoch;
				*after = r->last;
				mcs_master_free(r);
			}
			r = NULL;
		}
		if (!rc)
			rc = mcs_master_watch(s->master, *epoch, *after, slice,
					      0, &r);
		mcs_leave(s);
		if (rc)
			return rc;
		if (r->reset || r->n_events || !left ||
		    mcs_now_ms() >= deadline) {
			*out = r;
			return 0;
		}
		/* Nothing in this slice: keep the cursor, poll again. */
		*after = r->last;
		mcs_master_free(r);
		r = NULL;
	}
}

MOONCAKE_API int mooncake_store_watch(mooncake_store_t s, uint64_t *epoch,
				      uint64_t *after, unsigned wait_ms,
				      void (*fn)(void *arg,
						 const mooncake_event_t *e),
				      void *arg, bool *reset)
{
	Mcrpc__WatchResponse *r = NULL;
	bool closed = false;
	int rc, n = 0;

	if (reset)
		*reset = false;
	if (!s || !epoch || !after)
		return MC_STORE_INVALID_PARAMS;
	rc = watch_poll(s, epoch, after, wait_ms, &r, &closed);
	if (rc == -ECANCELED) /* mooncake_store_watch_stop() */
		return MC_STORE_UNAVAILABLE_IN_CURRENT_STATUS;
	if (rc)
		return closed ? rc : mc_err_to_store(rc);
	/* Callbacks run outside the handle: they may call the store. */
	if (r->reset) {
		mc_log_info("store",
			    "change feed: events lost (epoch %llu -> %llu)",
			    (unsigned long long)*epoch,
			    (unsigned long long)r->epoch);
		if (reset)
			*reset = true;
		n = 1;
	} else {
		for (size_t i = 0; i < r->n_events; i++) {
			const Mcrpc__Event *ev = r->events[i];
			mooncake_event_t e;

			if (!ev || !known_type(ev->type)) {
				mc_log_debug("store",
					     "change feed: event of unknown "
					     "type %d skipped",
					     ev ? (int)ev->type : -1);
				continue;
			}
			e = (mooncake_event_t){
				.seq = ev->seq,
				.type = event_type(ev->type),
				.key = ev->key ? ev->key : "",
				.to = ev->to ? ev->to : "",
				.version = ev->version,
			};
			if (fn)
				fn(arg, &e);
			n++;
		}
	}
	*epoch = r->epoch;
	*after = r->last;
	mcs_master_free(r);
	return n;
}

MOONCAKE_API int mooncake_store_watch_stop(mooncake_store_t s)
{
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	mcs_master_watch_stop(s->master);
	mcs_leave(s);
	return 0;
}
