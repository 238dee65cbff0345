/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Recency and eviction. Complete objects sit on one LRU list ordered by
 * their last read (or completed write); existence checks do not count as
 * reads. Eviction drops, least recent first, objects that are not hard
 * pinned, not held open, not under a read lease, and not under an
 * existence lease unless the object went unread for exist_max_idle (so
 * polling batch_is_exist cannot pin the pool: upstream's #2187).
 * Soft-pinned objects go only when nothing else is left and
 * --allow_evict_soft_pinned_objects is on.
 */
#include <stdlib.h>

#include "db.h"
#include "master.h"
#include "mc_log.h"
#include "master.pb-c.h"

void mst_lru_add(struct master *m, struct mst_object *o)
{
	o->lru_next = NULL;
	o->lru_prev = m->lru_tail;
	if (m->lru_tail)
		m->lru_tail->lru_next = o;
	else
		m->lru_head = o;
	m->lru_tail = o;
}

void mst_lru_del(struct master *m, struct mst_object *o)
{
	if (o->lru_prev)
		o->lru_prev->lru_next = o->lru_next;
	else if (m->lru_head == o)
		m->lru_head = o->lru_next;
	if (o->lru_next)
		o->lru_next->lru_prev = o->lru_prev;
	else if (m->lru_tail == o)
		m->lru_tail = o->lru_prev;
	o->lru_prev = o->lru_next = NULL;
}

void mst_lru_touch(struct master *m, struct mst_object *o)
{
	if (m->lru_tail == o)
		return;
	mst_lru_del(m, o);
	mst_lru_add(m, o);
}

static bool evictable(struct master *m, const struct mst_object *o,
		      uint64_t now, uint64_t wall, bool soft_ok)
{
	if (o->hard_pin || o->holds || o->read_lease_until > now)
		return false;
	if (o->lease_until > now &&
	    now - o->last_access < m->cfg.exist_max_idle_ms)
		return false;
	if (o->soft_pin_until > wall && !soft_ok)
		return false;
	return true;
}

uint64_t mst_evict(struct master *m, uint64_t bytes, uint64_t count)
{
	uint64_t now = mst_now(), wall = mst_wall(), freed = 0, n = 0;
	size_t cap = 256;
	struct mst_object **v = malloc(cap * sizeof(*v));
	int rc;

	if (!v)
		return 0;
	if (now < m->quarantine_until) {
		/* Readers from before a restart may hold any object. */
		free(v);
		return 0;
	}
	m->stats.eviction_attempts++;
	for (int pass = 0; pass < 2; pass++) {
		bool soft = pass == 1;
		if (soft && !m->cfg.allow_evict_soft_pinned)
			break;
		for (struct mst_object *o = m->lru_head; o; o = o->lru_next) {
			if ((bytes && freed >= bytes) || (count && n >= count))
				break;
			if (!evictable(m, o, now, wall, soft))
				continue;
			if (!soft && o->soft_pin_until > wall)
				continue;
			if (soft && o->soft_pin_until <= wall)
				continue; /* taken in pass 0 already */
			if (n == cap) {
				struct mst_object **nv =
					realloc(v, 2 * cap * sizeof(*v));
				if (!nv)
					break;
				v = nv;
				cap *= 2;
			}
			v[n++] = o;
			for (unsigned i = 0; i < o->n_repl; i++)
				if (o->repl[i].blk)
					freed += mc_alloc_block_size(
						o->repl[i].blk);
		}
		if ((bytes && freed >= bytes) || (count && n >= count))
			break;
	}
	rc = n ? mst_db_begin(m->db) : 0;
	for (uint64_t i = 0; !rc && i < n; i++)
		rc = mst_unlink_prepare(m, v[i]);
	if (n && !rc)
		rc = mst_db_commit(m->db);
	else if (n)
		mst_db_rollback(m->db);
	if (rc) {
		for (uint64_t i = 0; i < n; i++)
			mst_unlink_undo(v[i]);
		mc_log_err("master", "eviction not recorded; nothing evicted");
		free(v);
		return 0;
	}
	for (uint64_t i = 0; i < n; i++) {
		m->stats.evicted_keys++;
		m->stats.evicted_bytes += v[i]->size;
		mst_remove_apply(m, v[i], MCRPC__EVENT_TYPE__EV_EVICT);
	}
	if (n)
		m->stats.eviction_successes++;
	free(v);
	return n;
}

void mst_evict_tick(struct master *m)
{
	double hw = m->cfg.high_watermark, er = m->cfg.eviction_ratio;
	double cap = (double)m->capacity;

	if (!m->capacity || er <= 0)
		return;
	if ((double)m->allocated > hw * cap) {
		double target = (hw - er) * cap;
		if (target < 0)
			target = 0;
		mst_evict(m, (uint64_t)((double)m->allocated - target), 0);
	} else if (m->need_eviction) {
		uint64_t c = (uint64_t)(er * (double)m->n_complete + 0.999);
		mst_evict(m, 0, c ? c : 1);
	}
	/* A request made during a restart's quarantine waits for its end. */
	if (mst_now() >= m->quarantine_until)
		m->need_eviction = false;
}
