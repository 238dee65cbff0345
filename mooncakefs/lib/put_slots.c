/* SPDX-License-Identifier: Apache-2.0 */
/* Reserved space for puts, the client's side (put_slots.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_time.h"
#include "put_slots.h"

void mcs_slots_init(struct mcs_slots *sl, bool off)
{
	memset(sl, 0, sizeof(*sl));
	pthread_mutex_init(&sl->lock, NULL);
	sl->off = off;
}

void mcs_slots_destroy(struct mcs_slots *sl)
{
	for (size_t i = 0; i < sl->n; i++)
		free(sl->v[i].endpoint);
	sl->n = 0;
	pthread_mutex_destroy(&sl->lock);
}

static void queue_give(struct mcs_slots *sl, uint64_t id)
{
	/* A full queue forgets: the master frees it after its release
	 * timeout. */
	if (sl->n_give < MCS_SLOTS_GIVE_MAX)
		sl->give[sl->n_give++] = id;
}

/* Remove v[i] (its endpoint freed; give: queued to give back). */
static void remove_at(struct mcs_slots *sl, size_t i, bool give)
{
	if (give)
		queue_give(sl, sl->v[i].id);
	free(sl->v[i].endpoint);
	sl->v[i] = sl->v[--sl->n];
}

uint32_t mcs_slots_want(struct mcs_slots *sl, uint64_t size)
{
	size_t have = 0, room;

	if (sl->off)
		return 0;
	pthread_mutex_lock(&sl->lock);
	for (size_t i = 0; i < sl->n; i++)
		have += sl->v[i].size == size;
	room = MCS_SLOTS_MAX - sl->n;
	pthread_mutex_unlock(&sl->lock);
	if (have >= MCS_SLOTS_PER_SIZE)
		return 0;
	have = MCS_SLOTS_PER_SIZE - have;
	return (uint32_t)(have < room ? have : room);
}

/* Under the lock. */
static void contact_locked(struct mcs_slots *sl, uint64_t run, uint64_t sent_ms)
{
	if (run != sl->run) {
		/* A new run: the old one's slots are not the master's. */
		for (size_t i = sl->n; i-- > 0;)
			if (sl->v[i].run != run)
				remove_at(sl, i, false);
		sl->n_give = 0;
		sl->run = run;
		sl->contact_ms = sent_ms;
	} else if (sent_ms > sl->contact_ms) {
		sl->contact_ms = sent_ms;
	}
}

void mcs_slots_contact(struct mcs_slots *sl, uint64_t run, uint64_t sent_ms)
{
	if (!run)
		return; /* a master without slots */
	pthread_mutex_lock(&sl->lock);
	contact_locked(sl, run, sent_ms);
	pthread_mutex_unlock(&sl->lock);
}

void mcs_slots_add(struct mcs_slots *sl, uint64_t run,
		   Mcrpc__Slot *const *slots, size_t n)
{
	uint64_t now = mc_mono_ms();

	pthread_mutex_lock(&sl->lock);
	for (size_t i = 0; i < n; i++) {
		const Mcrpc__Slot *x = slots[i];
		const Mcrpc__ReplicaList *l = x ? x->space : NULL;
		struct mcs_slot *s;
		char *ep;

		if (!x)
			continue;
		if (run != sl->run || !l || l->n_replicas != 1 ||
		    !l->replicas[0] || !l->replicas[0]->endpoint ||
		    sl->n == MCS_SLOTS_MAX ||
		    !(ep = strdup(l->replicas[0]->endpoint))) {
			if (run == sl->run)
				queue_give(sl, x->id);
			continue;
		}
		s = &sl->v[sl->n++];
		*s = (struct mcs_slot){ .id = x->id,
					.size = l->size,
					.run = run,
					.got_ms = now,
					.use_ms = x->use_ms,
					.addr = l->replicas[0]->address,
					.endpoint = ep };
		if (l->replicas[0]->segment_id.len == sizeof(s->seg_id)) {
			memcpy(s->seg_id, l->replicas[0]->segment_id.data,
			       sizeof(s->seg_id));
			s->has_seg_id = true;
		}
	}
	pthread_mutex_unlock(&sl->lock);
}

int mcs_slots_take(struct mcs_slots *sl, uint64_t size, struct mcs_slot *out)
{
	uint64_t now;
	int rc = -ENOENT;

	if (sl->off)
		return rc;
	now = mc_mono_ms();
	pthread_mutex_lock(&sl->lock);
	if (now - sl->contact_ms < MCS_SLOT_CONTACT_MS) {
		for (size_t i = 0; i < sl->n; i++) {
			const struct mcs_slot *s = &sl->v[i];

			if (s->size != size || s->run != sl->run ||
			    now - s->got_ms >= s->use_ms)
				continue;
			*out = *s;
			sl->v[i] = sl->v[--sl->n];
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&sl->lock);
	return rc;
}

void mcs_slots_put_back(struct mcs_slots *sl, struct mcs_slot *s)
{
	pthread_mutex_lock(&sl->lock);
	if (s->run == sl->run && sl->n < MCS_SLOTS_MAX) {
		sl->v[sl->n++] = *s;
		s->endpoint = NULL;
	} else if (s->run == sl->run) {
		queue_give(sl, s->id);
	}
	pthread_mutex_unlock(&sl->lock);
	free(s->endpoint);
	s->endpoint = NULL;
}

void mcs_slots_drop(struct mcs_slots *sl, struct mcs_slot *s, bool give)
{
	pthread_mutex_lock(&sl->lock);
	if (give && s->run == sl->run)
		queue_give(sl, s->id);
	pthread_mutex_unlock(&sl->lock);
	free(s->endpoint);
	s->endpoint = NULL;
}

void mcs_slots_expire(struct mcs_slots *sl)
{
	uint64_t now = mc_mono_ms();

	pthread_mutex_lock(&sl->lock);
	for (size_t i = sl->n; i-- > 0;)
		if (now - sl->v[i].got_ms >= sl->v[i].use_ms)
			remove_at(sl, i, sl->v[i].run == sl->run);
	pthread_mutex_unlock(&sl->lock);
}

void mcs_slots_drop_endpoint(struct mcs_slots *sl, const char *endpoint)
{
	pthread_mutex_lock(&sl->lock);
	for (size_t i = sl->n; i-- > 0;)
		if (!strcmp(sl->v[i].endpoint, endpoint))
			remove_at(sl, i, sl->v[i].run == sl->run);
	pthread_mutex_unlock(&sl->lock);
}

void mcs_slots_clear(struct mcs_slots *sl)
{
	pthread_mutex_lock(&sl->lock);
	while (sl->n)
		remove_at(sl, sl->n - 1, sl->v[sl->n - 1].run == sl->run);
	pthread_mutex_unlock(&sl->lock);
}

size_t mcs_slots_drain(struct mcs_slots *sl, uint64_t *ids, size_t max)
{
	size_t n;

	pthread_mutex_lock(&sl->lock);
	n = sl->n_give < max ? sl->n_give : max;
	memcpy(ids, sl->give, n * sizeof(*ids));
	memmove(sl->give, sl->give + n, (sl->n_give - n) * sizeof(*ids));
	sl->n_give -= n;
	pthread_mutex_unlock(&sl->lock);
	return n;
}

void mcs_slots_requeue(struct mcs_slots *sl, const uint64_t *ids, size_t n)
{
	pthread_mutex_lock(&sl->lock);
	for (size_t i = 0; i < n; i++)
		queue_give(sl, ids[i]);
	pthread_mutex_unlock(&sl->lock);
}
