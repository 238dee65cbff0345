/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reserved space for puts (slots.h). A slot's key in master.put_slots is
 * its client's id followed by the slot's id (little-endian), so only that
 * client finds it, and no object's key is ever one (keys sent by clients
 * are what PutStart takes: a slot is never in master.objs).
 */
#include <stdlib.h>
#include <string.h>

#include "mc_le.h"
#include "mst_util.h"
#include "objects.h"
#include "objmap.h"
#include "place.h"
#include "segments.h"
#include "slots.h"

#define KEY_LEN (MST_ID_LEN + 8)

static void slot_key(char *k, const uint8_t *client, uint64_t id)
{
	memcpy(k, client, MST_ID_LEN);
	mc_put_le64((uint8_t *)k + MST_ID_LEN, id);
}

uint64_t mst_slot_use_ms(const struct master *m)
{
	uint64_t q = m->cfg.release_timeout_ms / 4;

	return q < 5000 ? q : 5000;
}

uint64_t mst_slot_id(const struct mst_object *slot)
{
	return mc_get_le64((const uint8_t *)slot->key + MST_ID_LEN);
}

unsigned mst_slots_grant(struct master *m, const uint8_t *client, uint64_t size,
			 unsigned want, struct mst_object **out)
{
	struct mst_client *c = mst_client_find(m, client);
	const struct mst_put_cfg pc = { .replicas = 1 };
	unsigned got = 0;

	if (!c || !size || size > m->cfg.reserve_max_size)
		return 0;
	while (got < want && c->n_slots < m->cfg.reserve_slots) {
		struct mst_replica r = { 0 };
		struct mst_object *o;
		char key[KEY_LEN];

		if (mst_place(m, client, size, 1, &pc, &r) != 1)
			break;
		slot_key(key, client, ++m->next_slot);
		o = mst_object_new(key, KEY_LEN, 1);
		if (!o || mst_objmap_add(&m->put_slots, o)) {
			free(o);
			mst_replica_free(m, &r);
			break;
		}
		o->size = size;
		o->state = MST_PROCESSING;
		o->n_repl = 1;
		o->repl[0] = r;
		o->put_start = mst_now();
		memcpy(o->writer, client, MST_ID_LEN);
		c->n_slots++;
		m->stats.slot_grants++;
		out[got++] = o;
	}
	return got;
}

/* The slot leaves the map (taken, freed): its client holds one fewer. */
static void unmap(struct master *m, struct mst_object *o)
{
	struct mst_client *c = mst_client_find(m, o->writer);

	mst_objmap_del(&m->put_slots, o);
	if (c && c->n_slots)
		c->n_slots--;
}

struct mst_object *mst_slot_take(struct master *m, const uint8_t *client,
				 uint64_t id)
{
	char key[KEY_LEN];
	struct mst_object *o;

	slot_key(key, client, id);
	o = mst_objmap_get(&m->put_slots, key, KEY_LEN);
	if (o)
		unmap(m, o);
	return o;
}

void mst_slot_put_back(struct master *m, struct mst_object *slot)
{
	struct mst_client *c = mst_client_find(m, slot->writer);

	if (mst_objmap_add(&m->put_slots, slot)) {
		/* No room to keep it: freeing is safe, its writer is done. */
		mst_object_free(m, slot);
		return;
	}
	if (c)
		c->n_slots++;
}

void mst_slot_consumed(struct master *m, struct mst_object *slot)
{
	slot->n_repl = 0; /* the object owns them now */
	mst_object_free(m, slot);
}

void mst_slot_release(struct master *m, const uint8_t *client, uint64_t id)
{
	struct mst_object *o = mst_slot_take(m, client, id);

	if (!o)
		return;
	m->stats.slot_returns++;
	mst_object_free(m, o);
}

/* Free every slot gone() says is gone, counting them in *freed (NULL:
 * not counted). The pass reads a snapshot: deleting moves entries. */
static void free_gone(struct master *m,
		      bool (*gone)(struct master *m, struct mst_object *o,
				   const void *arg),
		      const void *arg, uint64_t *freed)
{
	struct mst_object **all = NULL;
	size_t n = 0;

	if (!m->put_slots.count || mst_objmap_snapshot(&m->put_slots, &all, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		if (!gone(m, all[i], arg))
			continue;
		unmap(m, all[i]);
		mst_object_free(m, all[i]);
		if (freed)
			(*freed)++;
	}
	free(all);
}

static bool too_old(struct master *m, struct mst_object *o, const void *arg)
{
	return *(const uint64_t *)arg - o->put_start >=
	       m->cfg.release_timeout_ms;
}

void mst_slots_sweep(struct master *m, uint64_t now)
{
	free_gone(m, too_old, &now, &m->stats.slot_reclaimed);
}

/* Loses its replicas on segment arg; gone when none is left. */
static bool stripped(struct master *m, struct mst_object *o, const void *arg)
{
	unsigned j = 0;

	(void)m;
	for (unsigned r = 0; r < o->n_repl; r++)
		if (o->repl[r].seg != arg)
			o->repl[j++] = o->repl[r];
	o->n_repl = (uint8_t)j;
	return !j;
}

void mst_seg_fence_note(struct master *m, const uint8_t *id, uint64_t until)
{
	struct mst_slot_drop *d = &m->slot_drops[0];

	/* The same id's note, else the one that ends first (ended ones
	 * first): a live fence goes only when every note is live. */
	for (unsigned i = 0; i < MST_SLOT_DROPS; i++) {
		struct mst_slot_drop *e = &m->slot_drops[i];

		if (e->until && !memcmp(e->id, id, MST_ID_LEN)) {
			if (e->until < until)
				e->until = until;
			return;
		}
		if (e->until < d->until)
			d = e;
	}
	memcpy(d->id, id, MST_ID_LEN);
	d->until = until;
}

void mst_slots_strip(struct master *m, const struct mst_segment *s)
{
	uint64_t gone = 0;

	/* A slot has one replica: a slot on s is gone with it. */
	free_gone(m, stripped, s, &gone);
	if (gone)
		mst_seg_fence_note(m, s->id,
				   mst_now() + mst_slot_use_ms(m) +
					   MST_SLOT_FENCE_MS);
}

bool mst_seg_dropped_here(const struct master *m, const uint8_t *id)
{
	for (unsigned i = 0; i < MST_SLOT_DROPS; i++)
		if (m->slot_drops[i].until &&
		    !memcmp(m->slot_drops[i].id, id, MST_ID_LEN))
			return true;
	return false;
}

uint64_t mst_slots_drop_fence(struct master *m, const uint8_t *id)
{
	uint64_t now = mst_now(), until = 0;

	for (unsigned i = 0; i < MST_SLOT_DROPS; i++) {
		const struct mst_slot_drop *d = &m->slot_drops[i];

		if (d->until > now && d->until > until &&
		    !memcmp(d->id, id, MST_ID_LEN))
			until = d->until;
	}
	return until;
}

void mst_slots_count(const struct master *m, uint64_t *n, uint64_t *bytes)
{
	*n = m->put_slots.count;
	*bytes = 0;
	for (size_t i = 0; m->put_slots.slots && i < m->put_slots.cap; i++)
		if (m->put_slots.slots[i].obj)
			*bytes += m->put_slots.slots[i].obj->size;
}

void mst_slots_free_all(struct master *m)
{
	for (size_t i = 0; m->put_slots.slots && i < m->put_slots.cap; i++)
		free(m->put_slots.slots[i].obj);
	mst_objmap_free(&m->put_slots);
}
