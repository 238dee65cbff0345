/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's state: creation (restore.c rebuilds segments and objects
 * from the record), teardown, and the periodic housekeeping of mst_tick().
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "ckpt.h"
#include "db.h"
#include "evict.h"
#include "feed.h"
#include "lifecycle.h"
#include "ghosts.h"
#include "master.h"
#include "mc_log.h"
#include "mc_map.h"
#include "mc_rpc.h"
#include "mooncake/mc_err.h"
#include "mst_util.h"
#include "objects.h"
#include "groups.h"
#include "objmap.h"
#include "place.h"
#include "restore.h"
#include "slots.h"
#include "segments.h"

/* A record on a (nearly) full disk says so at start: /health is degraded
 * from the first request (it reads the free space each time), and the log
 * names the file and what to do before the first change fails. */
static void disk_probe(struct master *m, const char *db_path)
{
	bool low;
	uint64_t free_b = mst_db_disk_free(m->db, &low);

	if (low)
		mc_log_warn("master",
			    "the record %s has %llu KiB free on its "
			    "filesystem: changes (puts, removes, mounts) fail "
			    "once it is full; make room on that filesystem",
			    db_path, (unsigned long long)(free_b >> 10));
}

int mst_create(const struct mst_config *cfg, const char *db_path,
	       unsigned db_flags, struct master **out, char *err, size_t errlen)
{
	struct master *m = calloc(1, sizeof(*m));
	size_t nm = mc_rpc_method_count();
	struct mst_restore_counts r;
	int rc;

	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	m->cfg = *cfg;
	m->started = mst_now();
	if (getrandom(&m->rng, sizeof(m->rng), 0) != sizeof(m->rng) || !m->rng)
		m->rng = mst_wall() | 1;
	m->view_version = mst_rand(m) >> 16;
	/* Hold ids of different runs must differ: clients renew ids of the
	 * previous run after a restart and must be told they are unknown. */
	m->next_hold = (mst_rand(m) & 0xffffffffull) << 32;
	m->stats.requests = calloc(nm, sizeof(uint64_t));
	m->stats.failures = calloc(nm, sizeof(uint64_t));
	m->stats.batch_items = calloc(nm, sizeof(uint64_t));
	m->stats.batch_failed_items = calloc(nm, sizeof(uint64_t));
	if (!m->stats.requests || !m->stats.failures || !m->stats.batch_items ||
	    !m->stats.batch_failed_items || mst_objmap_init(&m->objs) ||
	    mst_objmap_init(&m->put_slots) || mc_map_create(&m->hold_ids) ||
	    mc_map_create(&m->client_ids) || mc_map_create(&m->groups) ||
	    mst_feed_init(&m->feed, 65536)) {
		snprintf(err, errlen, "out of memory");
		mst_destroy(m);
		return -ENOMEM;
	}
	m->feed.epoch = mst_rand(m) >> 1 | 1;
	m->run = mst_rand(m) | 1;
	rc = mst_db_open(db_path, db_flags, &m->db, err, errlen);
	if (rc) {
		mst_destroy(m);
		return rc;
	}
	rc = mst_restore(m, &r);
	if (!rc)
		rc = mst_ckpt_restore(m);
	if (!rc && (r.segments || r.orphans)) {
		/* Readers of the previous run keep reading until a renewal
		 * tells them their hold is gone, or their lease ends. */
		m->quarantine_until = mst_now() + cfg->hold_ttl_ms;
		for (struct mst_object *o = m->orphans; o; o = o->onext)
			o->read_lease_until = m->quarantine_until;
	}
	/* The previous run's clients may hold slots on the segments just
	 * restored, or be writing puts it placed: nothing is placed there
	 * until they have stopped (docs/design.md "Writes into placed
	 * space"). */
	if (!rc && r.segments)
		m->fence_until = mst_now() + MST_SLOT_FENCE_MS;
	/* With or without a record, members that re-mount wait for it
	 * before they fence: a master that restarted keeping nothing
	 * (--db_path memory, or its file lost) cannot tell whether a run
	 * before it still has writers. */
	if (!rc)
		m->run_fence_until = mst_now() + MST_SLOT_FENCE_MS;
	if (rc) {
		if (rc == -ENOMEM)
			snprintf(
				err, errlen,
				"restoring from %s failed: out of memory after "
				"%llu of the record's %llu objects (a master "
				"holds about 256 bytes per object plus the "
				"record's size: docs/operations.md, Memory)",
				db_path, (unsigned long long)r.objects,
				(unsigned long long)r.in_record);
		else
			snprintf(err, errlen, "restoring from %s failed: %s",
				 db_path, mc_strerror(rc));
		mst_destroy(m);
		return rc;
	}
	if (r.segments)
		mc_log_notice("master",
			      "restored %llu segments and %llu objects from "
			      "%s (%llu replicas dropped); owners have %llu "
			      "ms to re-mount; for %llu ms removed objects "
			      "keep their memory (%llu removed before the "
			      "restart) and eviction waits, for readers of "
			      "the previous run",
			      (unsigned long long)r.segments,
			      (unsigned long long)r.objects, db_path,
			      (unsigned long long)r.dropped_replicas,
			      (unsigned long long)cfg->restore_grace_ms,
			      (unsigned long long)cfg->hold_ttl_ms,
			      (unsigned long long)r.orphans);
	disk_probe(m, db_path);
	*out = m;
	return 0;
}

static void free_group(const struct mc_map_entry *e, void *arg)
{
	struct mst_group *g;

	(void)arg;
	memcpy(&g, e->val, sizeof(g));
	free(g);
}

void mst_destroy(struct master *m)
{
	if (!m)
		return;
	while (m->holds) {
		struct mst_hold *h = m->holds;
		m->holds = h->next;
		free(h);
	}
	for (size_t i = 0; m->objs.slots && i < m->objs.cap; i++) {
		struct mst_object *o = m->objs.slots[i].obj;
		if (o)
			free(o->attr);
		free(o); /* allocators go below, whole */
	}
	for (struct mst_object *o = m->orphans, *n; o; o = n) {
		n = o->onext;
		free(o->attr);
		free(o);
	}
	for (struct mst_object *o = m->releasing, *n; o; o = n) {
		n = o->onext;
		free(o->attr);
		free(o);
	}
	while (m->segments) {
		struct mst_segment *s = m->segments;
		m->segments = s->next;
		mc_alloc_destroy(s->alloc);
		free(s->name);
		free(s->endpoint);
		free(s->protocol);
		free(s->host_id);
		free(s);
	}
	while (m->clients) {
		struct mst_client *c = m->clients;
		m->clients = c->next;
		free(c);
	}
	mc_map_destroy(m->client_ids);
	while (m->gone_engines) {
		struct mst_gone_engine *g = m->gone_engines;
		m->gone_engines = g->next;
		free(g);
	}
	mst_ckpt_free(m);
	mst_place_cache_free(m);
	mst_objmap_free(&m->objs);
	mst_slots_free_all(m);
	mst_ghosts_free_all(m);
	mc_map_destroy(m->hold_ids);
	if (m->groups)
		mc_map_foreach(m->groups, free_group, NULL);
	mc_map_destroy(m->groups);
	if (m->feed.ring)
		mst_feed_free(&m->feed);
	mst_db_close(m->db);
	free(m->stats.requests);
	free(m->stats.failures);
	free(m->stats.batch_items);
	free(m->stats.batch_failed_items);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static void expire_holds(struct master *m, uint64_t now)
{
	for (struct mst_hold *h = m->holds, *n; h; h = n) {
		n = h->next;
		if (h->expires <= now)
			mst_hold_drop(m, h);
	}
}

/*
 * An unfinished put's memory may be taken back only once its writer is
 * gone too: a live writer (it pings) may still be writing into it, however
 * slowly, and reusing that memory would corrupt another object. A writer
 * the master never knew (no heartbeat) or that went silent for client_ttl
 * has no such claim after the release timeout.
 */
static bool put_reclaimable(struct master *m, const struct mst_object *o,
			    uint64_t now)
{
	return now - o->put_start >= m->cfg.release_timeout_ms &&
	       !mst_client_find(m, o->writer);
}

static bool reclaimable(struct master *m, const struct mst_object *o,
			uint64_t now, bool releasing)
{
	return releasing ? put_reclaimable(m, o, now) :
			   !o->holds && o->read_lease_until <= now;
}

/*
 * Free what nobody may use any more. Orphans lose their rows first, in
 * one transaction; if that fails they stay (and are tried again on the
 * next tick): freeing memory a row still records would let a restart
 * reserve it twice.
 */
static void reclaim(struct master *m, struct mst_object **list, uint64_t now,
		    bool releasing)
{
	struct mst_object **pp, *done = NULL;
	int rc = 0;

	for (pp = list; *pp;) {
		struct mst_object *o = *pp;
		if (!reclaimable(m, o, now, releasing)) {
			pp = &o->onext;
			continue;
		}
		*pp = o->onext;
		o->onext = done;
		done = o;
	}
	if (!done)
		return;
	if (!releasing) {
		rc = mst_db_begin(m->db);
		for (struct mst_object *o = done; !rc && o; o = o->onext)
			rc = mst_db_del_orphan(m->db, o->orphan_id);
		if (!rc)
			rc = mst_db_commit(m->db);
		else
			mst_db_rollback(m->db);
	}
	if (rc) {
		mc_log_warn("master", "orphans not freed: their records could "
				      "not be deleted (retrying)");
		while (done) {
			struct mst_object *o = done;
			done = o->onext;
			o->onext = *list;
			*list = o;
		}
		return;
	}
	while (done) {
		struct mst_object *o = done;
		done = o->onext;
		if (releasing)
			m->stats.released++;
		mst_object_free(m, o);
	}
}

/* PutStarts nobody finished or pre-empted: freed after the release
 * timeout once their writer is gone. The unfinished puts only, oldest
 * first, up to the first one younger than the timeout. */
static void sweep_abandoned(struct master *m, uint64_t now)
{
	struct mst_object *o = m->pend_head, *next;

	for (; o && now - o->put_start >= m->cfg.release_timeout_ms; o = next) {
		next = o->lru_next;
		if (o->state == MST_PROCESSING && put_reclaimable(m, o, now)) {
			mst_objmap_del(&m->objs, o);
			m->stats.released++;
			mst_object_free(m, o);
		}
	}
}

/* A gap between ticks this long is the master's own stall. */
#define STALL_MS 1000u

void mst_tick(struct master *m)
{
	uint64_t now = mst_now(), frees0 = m->frees;

	if (now - m->last_slow_tick >= 100) {
		/* The master itself did not run (stopped, a VM paused, the
		 * lock held that long): its clients' pings waited for it, so
		 * their silence meanwhile is not theirs. */
		if (m->last_slow_tick && now - m->last_slow_tick > STALL_MS)
			mst_clients_stalled(m, now - m->last_slow_tick - 100,
					    now);
		m->last_slow_tick = now;
		mst_expire_clients(m, now);
		expire_holds(m, now);
		reclaim(m, &m->orphans, now, false);
		reclaim(m, &m->releasing, now, true);
	}
	if (now - m->last_sweep >= 5000) {
		m->last_sweep = now;
		sweep_abandoned(m, now);
		mst_slots_sweep(m, now);
	}
	/* HA: request ids are kept 10 minutes (clients retry for 20 s). */
	if (mst_db_logged(m->db) && now - m->last_ops_prune >= 60000) {
		m->last_ops_prune = now;
		(void)mst_db_ops_prune(m->db, (int64_t)mst_wall() - 600000);
	}
	mst_evict_tick(m);
	if (m->frees != frees0)
		m->freed_seq = mst_db_log_seq(m->db);
}
