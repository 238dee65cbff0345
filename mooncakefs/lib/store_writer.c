/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Objects written by range (store_fs.h): PutStart allocates the replicas,
 * every write goes to all of them at its offset, close() ends the put
 * (PutEnd) or revokes it (PutRevoke: its memory is freed at once).
 *
 * The writer remembers which bytes were written (extents.h). A commit
 * first fills the bytes never written with zeros, so an object never
 * shows what an earlier object left in the same memory. A write that
 * failed on any replica poisons the writer: later writes are refused and
 * close() revokes the put. Writes go only while the master's run that
 * placed the replicas is in contact (mcs_write_placed, contact.h): after
 * a master restart or takeover they fail with MC_EMASTERGONE (the store
 * code TRANSFER_FAIL) and the writer is poisoned, its bytes not stored.
 *
 * Thread safety: writes at different offsets may run in any number of
 * threads at once (the extent set has its own lock); close() must not
 * run concurrently with a write of the same writer.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "extents.h"
#include "mc_log.h"
#include "mc_time.h"
#include "mooncake/te.h"
#include "staging.h"
#include "store_int.h"
#include "xfer.h"

#include "mooncake/store_fs.h"

#define STACK_OPS 8u /* replicas written without allocating */
#define ZERO_CHUNK (1u << 20) /* the zero-fill buffer */

struct mooncake_writer {
	struct mooncake_store *s;
	uint64_t size;
	char *key;
	size_t n_repl;
	struct mcs_loc *repl;
	uint64_t run; /* the master's run that placed the replicas */
	atomic_int error; /* the first failure (internal code), sticky */
	uint64_t version; /* committed: the object's (0: not said) */
	pthread_mutex_t lock; /* of done */
	struct mcs_extents done; /* bytes written */
};

static int open_writer(struct mooncake_store *s, const char *key, uint64_t size,
		       const mooncake_replicate_config_t *cfg,
		       const mooncake_fs_attr_t *attr, bool publish,
		       struct mooncake_writer **out)
{
	Mcrpc__Attr am = MCRPC__ATTR__INIT;
	Mcrpc__PutStartResponse *resp = NULL;
	const Mcrpc__ReplicaList *rl;
	Mcrpc__ReplicateConfig rcfg;
	struct mooncake_writer *w;
	struct mcs_loc *locs;
	struct mcs_put_key k = { .key = key };
	char *key_copy;
	size_t n;
	uint64_t sent;
	int rc, res = 0;

	rc = mcs_put_groups(&k, 1, cfg);
	if (rc)
		return rc;
	mcs_replicate_config(cfg, &rcfg);
	if (attr)
		mc_rpc_attr_msg(attr, &am);
	sent = mc_mono_ms();
	rc = mcs_master_put_start(s->master, false, &key, &size, 1, &rcfg,
				  attr ? &am : NULL, k.group ? &k.group : NULL,
				  0, publish, &resp);
	if (rc)
		return rc;
	mcs_contact_note(&s->contact, resp->run, sent);
	rl = resp->results[0];
	rc = rl->code;
	if (rc)
		goto out;
	/* An empty object is complete with no replica. */
	n = size ? rl->n_replicas : 0;
	if (size)
		rc = mcs_replicas_check_put(rl, size);
	w = rc ? NULL :
		 mcs_flat_alloc(sizeof(*w),
				(const Mcrpc__Replica *const *)rl->replicas, n,
				key, &locs, &key_copy);
	if (!w) {
		rc = rc ? rc : -ENOMEM;
		if (mcs_master_put_revoke(s->master, false, &key, 1, &res))
			mc_log_debug("store", "writer %s: revoke failed", key);
		goto out;
	}
	w->s = s;
	w->size = size;
	w->key = key_copy;
	w->n_repl = n;
	w->repl = locs;
	w->run = resp->run;
	atomic_init(&w->error, 0);
	pthread_mutex_init(&w->lock, NULL);
	*out = w;
out:
	mcs_master_free(resp);
	return rc;
}

static int open_any(mooncake_store_t s, const char *key, uint64_t size,
		    const mooncake_replicate_config_t *config,
		    const mooncake_fs_attr_t *attr, bool publish,
		    mooncake_writer_t *out)
{
	int rc;

	if (!out)
		return MC_STORE_INVALID_PARAMS;
	*out = NULL;
	rc = mcs_enter(s);
	if (rc)
		return rc;
	rc = !mcs_key_ok(key) ? -EINVAL : mcs_replicate_config_check(config);
	if (!rc)
		rc = open_writer(s, key, size, config, attr, publish, out);
	mcs_leave(s);
	return mc_err_to_store(rc);
}

MOONCAKE_API int mooncake_store_writer_open_attr(
	mooncake_store_t s, const char *key, uint64_t size,
	const mooncake_replicate_config_t *config,
	const mooncake_fs_attr_t *attr, mooncake_writer_t *out)
{
	return open_any(s, key, size, config, attr, false, out);
}

MOONCAKE_API int mooncake_store_writer_open_publish(
	mooncake_store_t s, const char *key, uint64_t size,
	const mooncake_replicate_config_t *config,
	const mooncake_fs_attr_t *attr, mooncake_writer_t *out)
{
	return open_any(s, key, size, config, attr, true, out);
}

MOONCAKE_API int
mooncake_store_writer_open(mooncake_store_t s, const char *key, uint64_t size,
			   const mooncake_replicate_config_t *config,
			   mooncake_writer_t *out)
{
	return mooncake_store_writer_open_attr(s, key, size, config, NULL, out);
}

/* [off, off+len) from local (registered) into every replica. */
static int write_replicas(struct mooncake_writer *w, uint64_t off, void *local,
			  uint64_t len)
{
	struct mooncake_store *s = w->s;
	struct mcs_xfer_op stack_ops[STACK_OPS], *ops = stack_ops;
	int rc = 0;

	if (w->n_repl > STACK_OPS) {
		ops = calloc(w->n_repl, sizeof(*ops));
		if (!ops)
			return -ENOMEM;
	}
	for (size_t r = 0; r < w->n_repl; r++)
		ops[r] = (struct mcs_xfer_op){
			.opcode = TE_WRITE,
			.local = local,
			.endpoint = w->repl[r].endpoint,
			.seg_id = w->repl[r].seg_id,
			.remote = w->repl[r].address + off,
			.len = len,
		};
	(void)mcs_write_placed(s, w->run, ops, w->n_repl);
	for (size_t r = 0; r < w->n_repl; r++) {
		if (!ops[r].result)
			continue;
		mc_log_debug("store", "write %s [%llu, +%llu) to %s: %s",
			     w->key, (unsigned long long)off,
			     (unsigned long long)len, ops[r].endpoint,
			     mc_strerror(ops[r].result));
		/* A master restarted or taken over: the put is lost. */
		rc = ops[r].result == MC_EMASTERGONE ? MC_EMASTERGONE :
						       MC_ETRANSFER;
	}
	if (ops != stack_ops)
		free(ops);
	return rc;
}

/* Through the staging buffer from any memory. */
static int write_staged(struct mooncake_writer *w, uint64_t off,
			const void *buf, uint64_t len)
{
	struct mooncake_store *s = w->s;
	void *tmp;
	int rc;

	rc = mcs_staging_take(s, "write", w->key, len, &tmp);
	if (rc)
		return rc;
	rc = te_mem_copy(tmp, buf, (size_t)len); /* buf may be device memory */
	if (!rc)
		rc = write_replicas(w, off, tmp, len);
	mcs_staging_free(s->staging, tmp, (size_t)len);
	return rc;
}

/* The writer is poisoned by its first failed write. */
static void fail(struct mooncake_writer *w, int rc)
{
	int none = 0;

	if (atomic_compare_exchange_strong(&w->error, &none, rc))
		mc_log_info("store",
			    "writer %s: %s; the put is revoked at close",
			    w->key, mc_strerror(rc));
}

static int do_write(struct mooncake_writer *w, uint64_t off, const void *buf,
		    uint64_t len)
{
	struct mooncake_store *s = w->s;
	int rc = atomic_load(&w->error);

	if (rc)
		return rc;
	if (mcs_regs_contains(&s->regs, buf, (size_t)len))
		rc = write_replicas(w, off, (void *)buf, len);
	else
		rc = write_staged(w, off, buf, len);
	/* A bad buffer is the caller's to fix; the put is still good. */
	if (rc == -EINVAL || rc == -ENOBUFS)
		return rc;
	if (!rc) {
		pthread_mutex_lock(&w->lock);
		rc = mcs_extents_add(&w->done, off, off + len);
		pthread_mutex_unlock(&w->lock);
	}
	if (rc)
		fail(w, rc);
	return rc;
}

MOONCAKE_API int mooncake_store_writer_write(mooncake_writer_t w, uint64_t off,
					     const void *buf, size_t len)
{
	int rc;

	if (!w || (!buf && len) || off > w->size || len > w->size - off)
		return MC_STORE_INVALID_PARAMS;
	if (!len)
		return 0;
	rc = mcs_enter(w->s);
	if (rc)
		return rc;
	rc = do_write(w, off, buf, len);
	mcs_leave(w->s);
	return mc_err_to_store(rc);
}

/* Zeros into every byte never written (a registered zero page run). */
static int fill_gaps(struct mooncake_writer *w)
{
	struct mooncake_store *s = w->s;
	uint64_t gs, ge, from = 0, filled = 0;
	size_t zlen;
	void *z;
	int rc;

	if (!mcs_extents_gap(&w->done, 0, w->size, &gs, &ge))
		return 0;
	zlen = w->size < ZERO_CHUNK ? (size_t)w->size : ZERO_CHUNK;
	z = mmap(NULL, zlen, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (z == MAP_FAILED)
		return -ENOMEM;
	rc = te_register(s->eng, z, zlen, "cpu:0", false);
	if (rc) {
		munmap(z, zlen);
		return rc;
	}
	while (!rc && mcs_extents_gap(&w->done, from, w->size, &gs, &ge)) {
		for (uint64_t pos = gs; !rc && pos < ge; pos += zlen) {
			uint64_t n = ge - pos < zlen ? ge - pos : zlen;
			rc = write_replicas(w, pos, z, n);
		}
		filled += ge - gs;
		from = ge;
	}
	if (te_unregister(s->eng, z))
		mc_log_debug("store", "writer %s: unregister zeros", w->key);
	munmap(z, zlen);
	if (!rc)
		mc_log_debug("store",
			     "writer %s: %llu bytes never written "
			     "are zeros",
			     w->key, (unsigned long long)filled);
	return rc;
}

static int end_put(struct mooncake_writer *w)
{
	struct mooncake_store *s = w->s;
	const char *key = w->key;
	int rc, res = 0;

	rc = fill_gaps(w);
	if (rc)
		return rc;
	rc = mcs_master_put_end(s->master, false, &key, 1, &res, &w->version);
	return mcs_contact_blame(s, w->run, rc ? rc : res);
}

static int close_writer(struct mooncake_writer *w, bool commit)
{
	struct mooncake_store *s = w->s;
	const char *key = w->key;
	int rc = atomic_load(&w->error), res = 0, rrc;

	if (commit && !rc) {
		rc = end_put(w);
		if (!rc)
			return 0;
		fail(w, rc);
	}
	/* PutRevoke: the memory is free at once. After a failed PutEnd the
	 * put may be complete (then this is INVALID_WRITE) or not. */
	rrc = mcs_master_put_revoke(s->master, false, &key, 1, &res);
	rrc = rrc ? rrc : res;
	if (rrc && commit)
		mc_log_debug("store", "writer %s: revoke: %s", key,
			     mc_strerror(rrc));
	return commit ? rc : rrc;
}

static int close_free(struct mooncake_writer *w, bool commit, uint64_t *version)
{
	int rc;

	/* After the store's close() the master discards the put itself. */
	rc = mcs_enter(w->s);
	if (!rc) {
		rc = mc_err_to_store(close_writer(w, commit));
		mcs_leave(w->s);
	}
	if (version)
		*version = rc ? 0 : w->version;
	pthread_mutex_destroy(&w->lock);
	mcs_extents_free(&w->done);
	free(w);
	return rc;
}

MOONCAKE_API int mooncake_store_writer_close(mooncake_writer_t w, bool commit)
{
	return w ? close_free(w, commit, NULL) : MC_STORE_INVALID_PARAMS;
}

MOONCAKE_API int mooncake_store_writer_commit(mooncake_writer_t w,
					      uint64_t *version)
{
	if (version)
		*version = 0;
	return w ? close_free(w, true, version) : MC_STORE_INVALID_PARAMS;
}
