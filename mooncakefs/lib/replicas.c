/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the store client knows about replicas, shared by the put and get
 * engines and the handles of store_fs.h: which are usable, which are on
 * this host, the order to read them in, the checks of a put's, the
 * replicate config on the wire, and flat copies kept by handles.
 */
#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "mc_log.h"
#include "store_int.h"

bool mcs_replica_usable(const Mcrpc__Replica *r, uint64_t size)
{
	return r && r->endpoint && *r->endpoint &&
	       (r->status == 0 || r->status == MCS_REPLICA_COMPLETE) &&
	       (r->size == 0 || r->size >= size);
}

bool mcs_replica_local(const struct mooncake_store *s, const Mcrpc__Replica *r)
{
	return s->host_id[0] && r && r->host_id &&
	       !strcmp(r->host_id, s->host_id);
}

size_t mcs_replicas_order(const struct mooncake_store *s,
			  const Mcrpc__ReplicaList *rl,
			  const Mcrpc__Replica **out)
{
	uint64_t away = 0; /* bit r: on a member not reached lately */
	size_t n = 0;

	/* Asked once per replica (the master's lists hold at most 8). */
	for (size_t r = 0; r < rl->n_replicas && r < 64; r++)
		if (rl->replicas[r] &&
		    mcs_master_unreachable(s->master,
					   rl->replicas[r]->endpoint))
			away |= 1ull << r;
	/* This host's, then others', then those on members this client
	 * could not reach lately (a dead member's until client_ttl drops
	 * it: tried last, not first, by every read). */
	for (int pass = 0; pass < 3; pass++) {
		for (size_t r = 0; r < rl->n_replicas; r++) {
			const Mcrpc__Replica *rep = rl->replicas[r];
			bool gone = r < 64 && (away >> r & 1);

			if (!mcs_replica_usable(rep, rl->size) ||
			    pass != (gone		       ? 2 :
				     mcs_replica_local(s, rep) ? 0 :
								 1))
				continue;
			out[n++] = rep;
		}
	}
	return n;
}

int mcs_replicas_check_put(const Mcrpc__ReplicaList *rl, uint64_t size)
{
	if (!rl->n_replicas)
		return MC_EPOOLFULL;
	for (size_t r = 0; r < rl->n_replicas; r++) {
		const Mcrpc__Replica *rep = rl->replicas[r];

		if (!rep || !rep->endpoint || !*rep->endpoint ||
		    (rep->size && rep->size != size))
			return -EPROTO;
	}
	return 0;
}

int mcs_replicate_config_check(const mooncake_replicate_config_t *c)
{
	if (!c ||
	    (c->replica_num >= 1 && c->replica_num <= MOONCAKE_MAX_REPLICAS))
		return 0;
	mc_log_warn("store", "replica_num %zu is out of range (1 to %d)",
		    c->replica_num, MOONCAKE_MAX_REPLICAS);
	return -EINVAL;
}

void mcs_replicate_config(const mooncake_replicate_config_t *c,
			  Mcrpc__ReplicateConfig *out)
{
	*out = (Mcrpc__ReplicateConfig)MCRPC__REPLICATE_CONFIG__INIT;
	out->replica_num = 1;
	if (!c)
		return;
	out->replica_num = (uint32_t)c->replica_num;
	out->with_soft_pin = c->with_soft_pin;
	out->with_hard_pin = c->with_hard_pin;
	if (c->preferred_segments && c->preferred_segments_count) {
		out->n_preferred_segments = c->preferred_segments_count;
		out->preferred_segments = (char **)c->preferred_segments;
	}
}

void *mcs_flat_alloc(size_t head, const Mcrpc__Replica *const *reps, size_t n,
		     const char *key, struct mcs_loc **locs, char **key_copy)
{
	const size_t al = alignof(struct mcs_loc);
	size_t at = (head + al - 1) / al * al;
	size_t total = at + n * sizeof(**locs) + strlen(key) + 1;
	char *p, *text;

	for (size_t i = 0; i < n; i++)
		total += strlen(reps[i]->endpoint) + 1 + MCS_SEG_ID_LEN;
	p = calloc(1, total);
	if (!p)
		return NULL;
	*locs = (struct mcs_loc *)(void *)(p + at);
	text = p + at + n * sizeof(**locs);
	for (size_t i = 0; i < n; i++) {
		const uint8_t *id = mcs_rep_seg_id(reps[i]);
		size_t len = strlen(reps[i]->endpoint) + 1;

		memcpy(text, reps[i]->endpoint, len);
		(*locs)[i] = (struct mcs_loc){ .endpoint = text,
					       .address = reps[i]->address };
		text += len;
		if (id) {
			memcpy(text, id, MCS_SEG_ID_LEN);
			(*locs)[i].seg_id = (const uint8_t *)text;
			text += MCS_SEG_ID_LEN;
		}
	}
	memcpy(text, key, strlen(key) + 1);
	*key_copy = text;
	return p;
}
