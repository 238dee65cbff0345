/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Put: one (Batch)PutStart for all keys, every replica of every key
 * written in as few transfer batches as possible, then one (Batch)PutEnd
 * for the keys whose writes all succeeded and one (Batch)PutRevoke for the
 * others (TRANSFER_FAIL) and for those whose PutEnd failed (the master
 * may have kept their put unfinished: the key would stay blocked).
 * OBJECT_ALREADY_EXISTS is success without writing (objects are
 * immutable) once that object is complete: while another client's put of
 * the key is still in progress, this put waits for it (success if it
 * completes, our own put if it fails, -EBUSY if it is still going after
 * the transfer timeout), so a put never reports bytes that were not
 * stored. The writes go only while the master's run that placed them is
 * in contact (mcs_write_placed, contact.h); keys whose writes stopped
 * because another run serves now (a restart, a takeover) are put again
 * on it from the start, up to GONE_TRIES times. Keys whose writes failed
 * because a replica's member could not be reached (killed, cut off) are
 * revoked and put again, up to AWAY_TRIES times, their PutStart naming
 * that member to the master, which places them elsewhere
 * (mcs_master_note_unreachable): a dead member no longer fails the puts
 * placed on it until client_ttl drops it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "locs.h"
#include "mc_log.h"
#include "mc_map.h"
#include "mc_time.h"
#include "put_slots.h"
#include "staging.h"
#include "store_err.h"
#include "store_int.h"
#include "util.h"
#include "xfer.h"
#include "mooncake/te.h"

#define PENDING 1 /* a result not known yet */
#define IN_PROGRESS 2 /* another client's put of the key is in progress */
#define GONE_TRIES 3 /* puts again after MC_EMASTERGONE */
#define AWAY 3 /* a replica's member could not be reached: put elsewhere */
#define AWAY_TRIES 2

struct pk {
	uint64_t size;
	int start; /* PutStart's code for the key */
	size_t op_first, op_n;
};

/* Sum of the parts; -EINVAL for no bytes, unregistered memory. */
static int validate(struct mooncake_store *s, const struct mcs_put_key *k,
		    uint64_t *size)
{
	uint64_t sum = 0;

	if (!mcs_key_ok(k->key) || !k->n_parts || !k->parts || !k->part_sizes)
		return -EINVAL;
	for (size_t p = 0; p < k->n_parts; p++) {
		if (sum + k->part_sizes[p] < sum)
			return -EINVAL;
		sum += k->part_sizes[p];
		if (!k->part_sizes[p])
			continue;
		if (!k->parts[p])
			return -EINVAL;
		if (!k->trusted && !mcs_regs_contains(&s->regs, k->parts[p],
						      k->part_sizes[p])) {
			mc_log_debug("store",
				     "put %s: buffer %p (%zu bytes) is not "
				     "registered",
				     k->key, k->parts[p], k->part_sizes[p]);
			return -EINVAL;
		}
	}
	if (!sum)
		return -EINVAL;
	*size = sum;
	return 0;
}

/* End or revoke the keys listed in idx; results of the ended ones. */
static void finish(struct mooncake_store *s, struct mcs_put_key *keys,
		   const size_t *idx, size_t n, bool batch, bool end)
{
	const char **names;
	int *res;
	int rc;

	if (!n)
		return;
	names = calloc(n, sizeof(*names));
	res = calloc(n, sizeof(*res));
	if (!names || !res) {
		rc = -ENOMEM;
	} else {
		for (size_t i = 0; i < n; i++)
			names[i] = keys[idx[i]].key;
		rc = end ? mcs_master_put_end(s->master, batch, names, n, res,
					      NULL) :
			   mcs_master_put_revoke(s->master, batch, names, n,
						 res);
	}
	for (size_t i = 0; i < n; i++) {
		int r = rc ? rc : res[i];
		if (end)
			keys[idx[i]].result = r;
		else if (r)
			mc_log_debug("store", "revoke %s: %s", keys[idx[i]].key,
				     mc_strerror(r));
	}
	free(names);
	free(res);
}

/* Keys whose PutEnd failed because the master now serving is another run
 * than the one that placed them (a restart or takeover between the last
 * write and the PutEnd): MC_EMASTERGONE, put again by mcs_put_keys(). */
static void ended_gone(struct mooncake_store *s, uint64_t run,
		       struct mcs_put_key *keys, const size_t *ended,
		       size_t n_end)
{
	int bad = 0;

	for (size_t e = 0; e < n_end && !bad; e++)
		if (keys[ended[e]].result != MC_EREPLICAGONE)
			bad = keys[ended[e]].result;
	/* Its segment was dropped while it wrote (the master kept its range
	 * out of new objects until now): written again elsewhere. */
	for (size_t e = 0; e < n_end; e++) {
		if (keys[ended[e]].result != MC_EREPLICAGONE)
			continue;
		mc_log_info("store",
			    "put %s: its segment was dropped while it was "
			    "written: putting it again",
			    keys[ended[e]].key);
		keys[ended[e]].result = MC_EMASTERGONE;
	}
	if (mcs_contact_blame(s, run, bad) != MC_EMASTERGONE)
		return;
	for (size_t e = 0; e < n_end; e++)
		if (keys[ended[e]].result)
			keys[ended[e]].result = MC_EMASTERGONE;
}

/* A key the master said exists may be an earlier key of this batch: it
 * then shares that key's fate. */
static void resolve_duplicates(struct mcs_put_key *keys, struct pk *st,
			       size_t n)
{
	struct mc_map *first = NULL;

	for (size_t i = 0; i < n; i++) {
		const struct mc_map_entry *e;
		size_t j;

		if (st[i].start != -EEXIST)
			continue;
		if (!first) {
			if (mc_map_create(&first))
				break;
			for (size_t k = n; k-- > 0;) {
				if (st[k].start != 0)
					continue;
				/* Later duplicates give way to earlier. */
				if (mc_map_put(first, keys[k].key,
					       strlen(keys[k].key), &k,
					       sizeof(k)))
					break;
			}
		}
		e = mc_map_get(first, keys[i].key, strlen(keys[i].key));
		if (!e)
			continue;
		memcpy(&j, e->val, sizeof(j));
		if (j < i)
			keys[i].result = keys[j].result;
	}
	mc_map_destroy(first);
}

/* A put that reserved space may serve (put_slots.h): one key, one
 * replica, no pin, preferred segment or group. */
static bool plain_put(const struct mcs_put_key *keys, size_t n,
		      const mooncake_replicate_config_t *cfg, bool batch)
{
	return !batch && n == 1 && (!keys[0].group || !*keys[0].group) &&
	       (!cfg ||
		(cfg->replica_num <= 1 && !cfg->with_soft_pin &&
		 !cfg->with_hard_pin && !cfg->preferred_segments_count));
}

/* The slots the master's answer (sent at sent_ms) brought. */
static void keep_slots(struct mooncake_store *s, uint64_t run, uint64_t sent_ms,
		       Mcrpc__Slot *const *slots, size_t n)
{
	mcs_contact_note(&s->contact, run, sent_ms);
	mcs_slots_contact(&s->slots, run, sent_ms);
	if (n)
		mcs_slots_add(&s->slots, run, slots, n);
}

/*
 * Put k (of size bytes, validated) into a slot held for its size: the
 * write, then one PutCommit. 1: done, k->result set (IN_PROGRESS: another
 * client's put of the key goes on); 0: not done, put it the usual way (no
 * slot, a failed write, a slot the master no longer has, or no answer:
 * a PutStart then finds the object if the commit went through).
 */
static int put_slot(struct mooncake_store *s, struct mcs_put_key *k,
		    uint64_t size)
{
	Mcrpc__PutCommitResponse *resp = NULL;
	struct mcs_xfer_op *ops;
	uint64_t give[MCS_SLOTS_GIVE_MAX], off = 0, sent;
	struct mcs_slot sl;
	size_t n_give;
	int rc;

	if (mcs_slots_take(&s->slots, size, &sl))
		return 0;
	ops = calloc(k->n_parts, sizeof(*ops));
	if (!ops) {
		mcs_slots_put_back(&s->slots, &sl);
		return 0;
	}
	for (size_t p = 0; p < k->n_parts; p++) {
		ops[p] = (struct mcs_xfer_op){ .opcode = TE_WRITE,
					       .local = k->parts[p],
					       .endpoint = sl.endpoint,
					       .seg_id = sl.has_seg_id ?
								 sl.seg_id :
								 NULL,
					       .remote = sl.addr + off,
					       .len = k->part_sizes[p] };
		off += k->part_sizes[p];
	}
	(void)mcs_write_placed(s, sl.run, ops, k->n_parts);
	for (size_t p = 0; p < k->n_parts; p++)
		if (ops[p].result) {
			mc_log_debug("store", "put %s: write to slot on %s: %s",
				     k->key, sl.endpoint,
				     mc_strerror(ops[p].result));
			mcs_note_own_limit(ops[p].result);
			rc = ops[p].result;
			free(ops);
			/* A slot of a run gone is not the new one's. */
			mcs_slots_drop(&s->slots, &sl, rc != MC_EMASTERGONE);
			return 0;
		}
	free(ops);
	n_give = mcs_slots_drain(&s->slots, give, MCS_SLOTS_GIVE_MAX);
	sent = mc_mono_ms();
	rc = mcs_master_put_commit(s->master, k->key, sl.id,
				   mcs_slots_want(&s->slots, size), give,
				   n_give, &resp);
	if (rc) {
		mcs_slots_requeue(&s->slots, give, n_give);
		mcs_slots_drop(&s->slots, &sl, true);
		return 0;
	}
	keep_slots(s, resp->run, sent, resp->slots, resp->n_slots);
	rc = resp->code;
	if (rc == MC_STORE_OBJECT_ALREADY_EXISTS) {
		k->result = resp->in_progress ? IN_PROGRESS : 0;
		mcs_slots_put_back(&s->slots, &sl);
		rc = 0;
	} else {
		/* Consumed (0), or gone with the failed put. */
		mcs_slots_drop(&s->slots, &sl, false);
		k->result = mcs_err_from_store(rc);
	}
	mcs_master_free(resp);
	/* No such slot (a restarted master), or its segment gone: put the
	 * usual way. Other codes are the put's, as PutEnd's would be (-1:
	 * the record could not be written, the put is given up). */
	if (rc == MC_STORE_INVALID_PARAMS || rc == MC_STORE_REPLICA_IS_GONE) {
		mc_log_debug("store", "put %s: commit into a slot: %s", k->key,
			     mc_strerror(rc));
		k->result = PENDING;
		return 0;
	}
	return 1;
}

/* again: a round of wait_others(), which writes no slot (the key is
 * most likely still another client's: no value written in vain). */
static void put_round(struct mooncake_store *s, struct mcs_put_key *keys,
		      size_t n, const mooncake_replicate_config_t *cfg,
		      bool batch, bool again)
{
	Mcrpc__PutStartResponse *resp = NULL;
	Mcrpc__ReplicateConfig rcfg;
	struct mcs_xfer_op *ops = NULL;
	struct pk *st;
	const char **names = NULL, **groups = NULL;
	uint64_t *sizes = NULL;
	size_t *live = NULL, *ended = NULL, *revoked = NULL;
	size_t n_live = 0, n_ops = 0, n_end = 0, n_rev = 0;
	bool any_group = false, plain = plain_put(keys, n, cfg, batch);
	uint64_t sent;
	int rc = 0;

	st = calloc(n, sizeof(*st));
	live = calloc(n, sizeof(*live));
	names = calloc(n, sizeof(*names));
	sizes = calloc(n, sizeof(*sizes));
	ended = calloc(n, sizeof(*ended));
	revoked = calloc(n, sizeof(*revoked));
	if (!st || !live || !names || !sizes || !ended || !revoked) {
		for (size_t i = 0; i < n; i++)
			keys[i].result = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		st[i].start = PENDING;
		keys[i].result = validate(s, &keys[i], &st[i].size);
		if (keys[i].result)
			continue;
		keys[i].result = PENDING;
		names[n_live] = keys[i].key;
		sizes[n_live] = st[i].size;
		any_group |= keys[i].group && *keys[i].group;
		live[n_live++] = i;
	}
	if (!n_live)
		goto out;
	if (plain && !again && put_slot(s, &keys[0], st[0].size))
		goto out;
	/* Group ids (upstream's group_ids) only when a key has one: most
	 * puts have none and pay nothing for them. */
	if (any_group) {
		groups = malloc(n_live * sizeof(*groups));
		if (!groups) {
			rc = -ENOMEM;
			goto fail_all;
		}
		for (size_t j = 0; j < n_live; j++)
			groups[j] = keys[live[j]].group ? keys[live[j]].group :
							  "";
	}

	mcs_replicate_config(cfg, &rcfg);
	sent = mc_mono_ms();
	rc = mcs_master_put_start(
		s->master, batch, names, sizes, n_live, &rcfg, NULL, groups,
		plain ? mcs_slots_want(&s->slots, sizes[0]) : 0, false, &resp);
	if (rc)
		goto fail_all;
	if (plain)
		keep_slots(s, resp->run, sent, resp->slots, resp->n_slots);
	else
		mcs_contact_note(&s->contact, resp->run, sent);
	for (size_t j = 0; j < n_live; j++) {
		const Mcrpc__ReplicaList *rl = resp->results[j];
		size_t i = live[j];

		st[i].start = rl->code;
		if (rl->code == -EEXIST) {
			keys[i].result = rl->in_progress ? IN_PROGRESS : 0;
			continue;
		}
		if (rl->code) {
			keys[i].result = rl->code;
			continue;
		}
		keys[i].result = mcs_replicas_check_put(rl, st[i].size);
		if (keys[i].result) {
			revoked[n_rev++] = i;
			continue;
		}
		keys[i].result = PENDING;
		n_ops += rl->n_replicas * keys[i].n_parts;
	}

	ops = calloc(n_ops ? n_ops : 1, sizeof(*ops));
	if (!ops) {
		for (size_t j = 0; j < n_live; j++) {
			if (keys[live[j]].result != PENDING)
				continue;
			keys[live[j]].result = -ENOMEM;
			revoked[n_rev++] = live[j];
		}
		goto end;
	}
	n_ops = 0;
	for (size_t j = 0; j < n_live; j++) {
		const Mcrpc__ReplicaList *rl = resp->results[j];
		size_t i = live[j];
		const struct mcs_put_key *k = &keys[i];

		if (keys[i].result != PENDING)
			continue;
		st[i].op_first = n_ops;
		for (size_t r = 0; r < rl->n_replicas; r++) {
			uint64_t off = 0;

			for (size_t p = 0; p < k->n_parts; p++) {
				ops[n_ops++] = (struct mcs_xfer_op){
					.opcode = TE_WRITE,
					.local = k->parts[p],
					.endpoint = rl->replicas[r]->endpoint,
					.seg_id =
						mcs_rep_seg_id(rl->replicas[r]),
					.remote =
						rl->replicas[r]->address + off,
					.len = k->part_sizes[p],
				};
				off += k->part_sizes[p];
			}
		}
		st[i].op_n = n_ops - st[i].op_first;
	}
	(void)mcs_write_placed(s, resp->run, ops, n_ops);

	for (size_t j = 0; j < n_live; j++) {
		size_t i = live[j];
		bool away = false;
		int bad = 0;

		if (keys[i].result != PENDING)
			continue;
		for (size_t o = st[i].op_first;
		     o < st[i].op_first + st[i].op_n && bad != MC_EMASTERGONE;
		     o++) {
			if (!ops[o].result)
				continue;
			bad = ops[o].result;
			away |= mcs_peer_unreachable(bad);
			mc_log_debug("store",
				     "put %s: write to %s at %#llx: %s",
				     keys[i].key, ops[o].endpoint,
				     (unsigned long long)ops[o].remote,
				     mc_strerror(bad));
			mcs_note_own_limit(bad);
		}
		if (bad == MC_EMASTERGONE) {
			/* The run that knew this put is gone: nothing to
			 * revoke; mcs_put_keys() puts it again. */
			keys[i].result = bad;
		} else if (bad) {
			keys[i].result = away ? AWAY : MC_ETRANSFER;
			revoked[n_rev++] = i;
		} else {
			ended[n_end++] = i;
		}
	}
end:
	finish(s, keys, ended, n_end, batch, true);
	ended_gone(s, resp->run, keys, ended, n_end);
	for (size_t e = 0; e < n_end; e++)
		if (keys[ended[e]].result &&
		    keys[ended[e]].result != MC_EMASTERGONE)
			revoked[n_rev++] = ended[e];
	finish(s, keys, revoked, n_rev, batch, false);
	resolve_duplicates(keys, st, n);
	goto out;

fail_all:
	for (size_t i = 0; i < n; i++)
		if (keys[i].result == PENDING)
			keys[i].result = rc;
out:
	mcs_master_free(resp);
	free(ops);
	free(st);
	free(live);
	free(names);
	free(sizes);
	free(ended);
	free(revoked);
	free(groups);
}

/* Put again the keys whose result is which (again: as put_round); how
 * many there were (0 also when out of memory: they keep their result). */
static size_t put_again(struct mooncake_store *s, struct mcs_put_key *keys,
			size_t n, const mooncake_replicate_config_t *cfg,
			bool batch, int which, bool again)
{
	struct mcs_put_key *sub;
	size_t *idx, k = 0;

	for (size_t i = 0; i < n; i++)
		k += keys[i].result == which;
	if (!k)
		return 0;
	sub = calloc(k, sizeof(*sub));
	idx = calloc(k, sizeof(*idx));
	if (sub && idx) {
		k = 0;
		for (size_t i = 0; i < n; i++)
			if (keys[i].result == which) {
				idx[k] = i;
				sub[k++] = keys[i];
			}
		put_round(s, sub, k, cfg, batch && k > 1, again);
		for (size_t j = 0; j < k; j++)
			keys[idx[j]].result = sub[j].result;
	} else {
		k = 0;
	}
	free(sub);
	free(idx);
	return k;
}

/* Keys that another client is putting (IN_PROGRESS): put again, with a
 * growing pause, until that put completed (the master then says the
 * object exists: success) or failed (ours then goes through). */
static void wait_others(struct mooncake_store *s, struct mcs_put_key *keys,
			size_t n, const mooncake_replicate_config_t *cfg,
			bool batch)
{
	uint64_t deadline = mcs_now_ms() + atomic_load(&s->transfer_ms);
	unsigned pause_us = 200;
	bool any = true;

	while (any && mcs_now_ms() < deadline) {
		any = false;
		for (size_t i = 0; i < n && !any; i++)
			any = keys[i].result == IN_PROGRESS;
		if (!any)
			break;
		usleep(pause_us);
		pause_us = pause_us < 25000 ? pause_us * 2 : 50000;
		if (!put_again(s, keys, n, cfg, batch, IN_PROGRESS, true))
			break;
	}
	for (size_t i = 0; i < n; i++)
		if (keys[i].result == IN_PROGRESS)
			keys[i].result = -EBUSY;
}

int mcs_put_groups(struct mcs_put_key *keys, size_t n,
		   const mooncake_replicate_config_t *cfg)
{
	size_t g = cfg ? cfg->group_ids_count : 0;

	if (!g)
		return 0;
	if (!cfg->group_ids || (g != 1 && g != n)) {
		mc_log_warn("store",
			    "group_ids: %zu given for %zu keys (expected one, "
			    "or one per key)",
			    g, n);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		const char *id = cfg->group_ids[g == 1 ? 0 : i];
		if (id && strlen(id) > MCS_GROUP_ID_MAX) {
			mc_log_warn("store",
				    "group id of %zu bytes: at most %d",
				    strlen(id), MCS_GROUP_ID_MAX);
			return -EINVAL;
		}
		if (!keys[i].group)
			keys[i].group = id;
	}
	return 0;
}

int mcs_put_keys(struct mooncake_store *s, struct mcs_put_key *keys, size_t n,
		 const mooncake_replicate_config_t *cfg, bool batch)
{
	int rc = mcs_put_groups(keys, n, cfg);

	if (rc) {
		for (size_t i = 0; i < n; i++)
			keys[i].result = rc;
		return 0;
	}
	/* A put of a cached key: the cached object was removed elsewhere. */
	for (size_t i = 0; s->locs && i < n; i++)
		mcs_locs_drop(s->locs, keys[i].key);
	put_round(s, keys, n, cfg, batch, false);
	/* Writes stopped by a master restart or takeover: the new run
	 * places them afresh (the caller's buffers still hold the bytes). */
	for (int t = 0; t < GONE_TRIES; t++)
		if (!put_again(s, keys, n, cfg, batch, MC_EMASTERGONE, false))
			break;
	for (int t = 0; t < AWAY_TRIES; t++)
		if (!put_again(s, keys, n, cfg, batch, AWAY, false))
			break;
	for (size_t i = 0; i < n; i++)
		if (keys[i].result == AWAY)
			keys[i].result = MC_ETRANSFER;
	wait_others(s, keys, n, cfg, batch);
	return 0;
}

int mcs_put_staged(struct mooncake_store *s, const char *key, const void *value,
		   size_t size, const mooncake_replicate_config_t *cfg)
{
	struct mcs_put_key k = { .key = key, .n_parts = 1, .trusted = true };
	void *buf;
	int rc;

	if (!mcs_key_ok(key) || !value || !size)
		return -EINVAL;
	rc = mcs_staging_take(s, "put", key, size, &buf);
	if (rc)
		return rc;
	/* The value may be CUDA device memory: te_mem_copy reaches it. */
	rc = te_mem_copy(buf, value, size);
	if (rc) {
		mcs_staging_free(s->staging, buf, size);
		return rc;
	}
	k.parts = &buf;
	k.part_sizes = &size;
	(void)mcs_put_keys(s, &k, 1, cfg, false);
	mcs_staging_free(s->staging, buf, size);
	return k.result;
}
