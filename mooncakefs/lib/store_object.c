/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Objects opened for ranged reads (store_fs.h): GetReplicaList with a hold
 * gives the replicas, the size and a hold that holds.c renews while the
 * object is open, so its memory is neither freed nor reused, even when the
 * key is removed or renamed over. A read moves [off, off+len) of one
 * replica (this host's first) with one transfer and fails over to the next
 * replica; the replica that answered last is tried first next time.
 *
 * A handle never changes after open except for that preference (atomic),
 * so any number of threads may read through it at once without a lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "holds.h"
#include "mc_log.h"
#include "segment.h"
#include "staging.h"
#include "store_int.h"
#include "util.h"
#include "xfer.h"

#include "mooncake/store_fs.h"
#include "mooncake/te.h"

struct mooncake_object {
	struct mooncake_store *s;
	struct mcs_hold *hold;
	uint64_t size, version;
	char *key;
	size_t n_repl;
	atomic_size_t pref; /* the replica to try first */
	struct mcs_loc *repl; /* this host's first */
};

/* The handle for the answer rl (the hold is the caller's to add). */
static int make_handle(struct mooncake_store *s, const char *key,
		       const Mcrpc__ReplicaList *rl,
		       struct mooncake_object **out)
{
	const Mcrpc__Replica **order;
	struct mooncake_object *o;
	struct mcs_loc *locs;
	char *key_copy;
	size_t n = 0;

	order = calloc(rl->n_replicas ? rl->n_replicas : 1, sizeof(*order));
	if (!order)
		return -ENOMEM;
	/* An empty object needs no replica: there is nothing to read. */
	if (rl->size)
		n = mcs_replicas_order(s, rl, order);
	if (rl->size && !n) {
		free(order);
		return MC_ENOTREADY;
	}
	o = mcs_flat_alloc(sizeof(*o), order, n, key, &locs, &key_copy);
	free(order);
	if (!o)
		return -ENOMEM;
	o->s = s;
	o->size = rl->size;
	o->version = rl->version;
	o->key = key_copy;
	o->n_repl = n;
	o->repl = locs;
	atomic_init(&o->pref, 0);
	*out = o;
	return 0;
}

static int open_object(struct mooncake_store *s, const char *key,
		       struct mooncake_object **out)
{
	Mcrpc__GetReplicaListResponse *resp = NULL;
	const Mcrpc__ReplicaList *rl;
	struct mooncake_object *o = NULL;
	struct mcs_hold *hold = NULL;
	uint64_t t0 = mcs_now_ms();
	int rc;

	rc = mcs_master_get_replicas(s->master, false, &key, 1, true, &resp);
	if (rc)
		return rc;
	rl = resp->results[0];
	rc = rl->code;
	if (rc)
		goto out;
	if (!rl->hold_id) {
		mc_log_warn("store",
			    "open %s: the master gave no hold (too old for "
			    "open objects?)",
			    key);
		rc = MC_ENOTSUPPORTED;
		goto out;
	}
	rc = mcs_holds_add(s->holds, key, rl, t0, &hold); /* or released */
	if (rc)
		goto out;
	rc = make_handle(s, key, rl, &o);
	if (rc) {
		/* Not left to expire: the memory waits for it. */
		(void)mcs_holds_release(s->holds, hold);
		goto out;
	}
	o->hold = hold;
	*out = o;
out:
	mcs_master_free(resp);
	return rc;
}

MOONCAKE_API int mooncake_store_object_open(mooncake_store_t s, const char *key,
					    mooncake_object_t *out)
{
	int rc;

	if (!out)
		return MC_STORE_INVALID_PARAMS;
	*out = NULL;
	rc = mcs_enter(s);
	if (rc)
		return rc;
	rc = mcs_key_ok(key) ? open_object(s, key, out) : -EINVAL;
	mcs_leave(s);
	return mc_err_to_store(rc);
}

MOONCAKE_API uint64_t mooncake_store_object_size(mooncake_object_t o)
{
	return o ? o->size : 0;
}

MOONCAKE_API uint64_t mooncake_store_object_version(mooncake_object_t o)
{
	return o ? o->version : 0;
}

/* n bytes at off into local (registered), from the replicas in turn. */
static int read_replicas(struct mooncake_object *o, uint64_t off, void *local,
			 uint64_t n)
{
	struct mooncake_store *s = o->s;
	size_t first = atomic_load_explicit(&o->pref, memory_order_relaxed);
	int rc = MC_ETRANSFER;

	for (size_t i = 0; i < o->n_repl; i++) {
		size_t r = (first + i) % o->n_repl;
		struct mcs_xfer_op op = {
			.opcode = TE_READ,
			.local = local,
			.endpoint = o->repl[r].endpoint,
			.seg_id = o->repl[r].seg_id,
			.remote = o->repl[r].address + off,
			.len = n,
		};

		(void)mcs_xfer_run(s->xfer, &op, 1,
				   atomic_load(&s->transfer_ms));
		if (!op.result) {
			if (r != first)
				atomic_store_explicit(&o->pref, r,
						      memory_order_relaxed);
			return 0;
		}
		mc_log_debug(
			"store", "read %s [%llu, +%llu) from %s: %s%s", o->key,
			(unsigned long long)off, (unsigned long long)n,
			o->repl[r].endpoint, mc_strerror(op.result),
			i + 1 < o->n_repl ? "; trying the next replica" : "");
		mcs_note_transfer(s, o->repl[r].endpoint, op.result);
	}
	return rc;
}

/* Through the staging buffer into any memory. */
static int read_staged(struct mooncake_object *o, uint64_t off, void *buf,
		       uint64_t n)
{
	struct mooncake_store *s = o->s;
	void *tmp;
	int rc;

	rc = mcs_staging_take(s, "read", o->key, n, &tmp);
	if (rc)
		return rc;
	rc = read_replicas(o, off, tmp, n);
	if (!rc) /* buf may be CUDA device memory */
		rc = te_mem_copy(buf, tmp, (size_t)n);
	mcs_staging_free(s->staging, tmp, (size_t)n);
	return rc;
}

/* The bytes a call for len at off reads: 0 past the end or for none. */
static uint64_t span(const struct mooncake_object *o, uint64_t off, size_t len)
{
	if (off >= o->size || !len)
		return 0;
	return o->size - off < len ? o->size - off : len;
}

MOONCAKE_API int64_t mooncake_store_object_read(mooncake_object_t o,
						uint64_t off, void *buf,
						size_t len)
{
	struct mooncake_store *s;
	uint64_t n;
	int rc;

	if (!o || (!buf && len))
		return MC_STORE_INVALID_PARAMS;
	s = o->s;
	n = span(o, off, len);
	if (!n)
		return 0;
	if (n > INT64_MAX)
		n = INT64_MAX;
	rc = mcs_enter(s);
	if (rc)
		return rc;
	if (!mcs_hold_valid(o->hold, mcs_now_ms()))
		rc = MC_ELEASEEXPIRED;
	else if (mcs_regs_contains(&s->regs, buf, (size_t)n))
		rc = read_replicas(o, off, buf, n);
	else
		rc = read_staged(o, off, buf, n);
	/* Memory that may have been reused before the read ended (the hold
	 * was lost or not renewed in time) is not an answer. */
	if (!rc && !mcs_hold_valid(o->hold, mcs_now_ms())) {
		mc_log_debug("store",
			     "read %s: its hold was not renewed in "
			     "time",
			     o->key);
		rc = MC_ELEASEEXPIRED;
	}
	mcs_leave(s);
	return rc ? mc_err_to_store(rc) : (int64_t)n;
}

MOONCAKE_API int64_t mooncake_store_object_splice(mooncake_object_t o,
						  uint64_t off, size_t len,
						  int pipe_fd)
{
	struct mooncake_store *s;
	size_t r;
	uint64_t n;
	int rc;

	if (!o || pipe_fd < 0)
		return MC_STORE_INVALID_PARAMS;
	s = o->s;
	n = span(o, off, len);
	if (!n)
		return 0;
	rc = mcs_enter(s);
	if (rc)
		return rc;
	r = atomic_load_explicit(&o->pref, memory_order_relaxed);
	if (!mcs_hold_valid(o->hold, mcs_now_ms()))
		rc = MC_ELEASEEXPIRED;
	else if (!s->xfer || !o->n_repl)
		rc = MC_ENOTSUPPORTED;
	else
		rc = mcs_xfer_read_pipe(s->xfer, o->repl[r].endpoint,
					o->repl[r].seg_id,
					o->repl[r].address + off, n, pipe_fd,
					atomic_load(&s->transfer_ms));
	/* Nothing added: the caller reads into memory instead. */
	if (rc == -EAGAIN || rc == -EHOSTUNREACH)
		rc = MC_ENOTSUPPORTED;
	/* As object_read: bytes of memory that may have been reused before
	 * they were all in the pipe are not an answer. */
	if (!rc && !mcs_hold_valid(o->hold, mcs_now_ms()))
		rc = MC_ELEASEEXPIRED;
	mcs_leave(s);
	return rc ? mc_err_to_store(rc) : (int64_t)n;
}

MOONCAKE_API int64_t mooncake_store_object_peek(mooncake_object_t o,
						uint64_t off, size_t len,
						const void **ptr)
{
	struct mooncake_store *s;
	const char *me;
	uint64_t n;
	int rc;

	if (!o || !ptr)
		return MC_STORE_INVALID_PARAMS;
	*ptr = NULL;
	s = o->s;
	n = span(o, off, len);
	if (!n)
		return 0;
	rc = mcs_enter(s);
	if (rc)
		return rc;
	rc = MC_ENOTSUPPORTED;
	me = s->eng ? te_engine_name(s->eng) : NULL;
	if (!mcs_hold_valid(o->hold, mcs_now_ms())) {
		rc = MC_ELEASEEXPIRED;
	} else if (me && s->seg) {
		uintptr_t lo = (uintptr_t)s->seg->pool;
		uintptr_t hi = lo + s->seg->size;
		for (size_t i = 0; i < o->n_repl; i++) {
			uintptr_t a = (uintptr_t)o->repl[i].address;
			if (strcmp(o->repl[i].endpoint, me) || a < lo ||
			    a + o->size > hi || a + o->size < a)
				continue;
			*ptr = (const void *)(a + off); /* our own segment */
			rc = 0;
			break;
		}
	}
	mcs_leave(s);
	return rc ? mc_err_to_store(rc) : (int64_t)n;
}

MOONCAKE_API void mooncake_store_object_close(mooncake_object_t o)
{
	int rc;

	if (!o)
		return;
	/* After the store's close() the hold is gone already. */
	if (!mcs_enter(o->s)) {
		rc = mcs_holds_release(o->s->holds, o->hold);
		if (rc && rc != -ENOENT)
			mc_log_debug("store", "close %s: release hold: %s",
				     o->key, mc_strerror(rc));
		mcs_leave(o->s);
	}
	free(o);
}
