/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Clients and the segments they contribute: mount, re-mount (re-adoption
 * after a restart of the master or of the owner), unmount, and what
 * happens when a client goes silent for client_ttl.
 */
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "db.h"
#include "feed.h"
#include "ghosts.h"
#include "master.h"
#include "master.pb-c.h"
#include "mc_log.h"
#include "mc_map.h"
#include "mooncake/mc_err.h"
#include "mst_util.h"
#include "objects.h"
#include "objmap.h"
#include "segments.h"
#include "slots.h"

struct mst_client *mst_client_find(struct master *m, const uint8_t *id)
{
	const struct mc_map_entry *e =
		mc_map_get(m->client_ids, (const char *)id, MST_ID_LEN);
	struct mst_client *c = NULL;

	if (e)
		memcpy(&c, e->val, sizeof(c));
	return c;
}

/* Unlinked from the list already: out of the map, its checkpoint
 * holdings gone, freed. */
static void client_free(struct master *m, struct mst_client *c)
{
	(void)mc_map_del(m->client_ids, (const char *)c->id, MST_ID_LEN);
	mst_ckpt_client_gone(m, c->id);
	mst_puts_writer_gone(m, c->id);
	free(c);
}

struct mst_client *mst_client_touch(struct master *m, const uint8_t *id)
{
	struct mst_client *c = mst_client_find(m, id);

	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
		memcpy(c->id, id, MST_ID_LEN);
		if (mc_map_put(m->client_ids, (const char *)c->id, MST_ID_LEN,
			       &c, sizeof(c))) {
			free(c);
			return NULL;
		}
		c->next = m->clients;
		m->clients = c;
	}
	c->last_seen = mst_now();
	return c;
}

void mst_client_leave(struct master *m, struct mst_client *c)
{
	struct mst_client **pp;

	for (struct mst_segment *s = m->segments; s; s = s->next)
		if (s->owner == c)
			return; /* it still serves memory: client_ttl decides */
	for (pp = &m->clients; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			client_free(m, c);
			return;
		}
	}
}

/* Queue the engine of s, dropped with its owner (seen: when that owner was
 * last heard), for the embedded metadata service to forget. */
static void engine_gone(struct master *m, const struct mst_segment *s,
			uint64_t seen)
{
	struct mst_gone_engine *g;
	size_t len;

	if (!m->track_gone_engines || !s->endpoint || !*s->endpoint)
		return;
	for (g = m->gone_engines; g; g = g->next)
		if (!strcmp(g->name, s->endpoint)) {
			if (g->seen < seen)
				g->seen = seen;
			return;
		}
	len = strlen(s->endpoint);
	g = malloc(sizeof(*g) + len + 1);
	if (!g)
		return; /* its entries stay, as they did before */
	memcpy(g->name, s->endpoint, len + 1);
	g->seen = seen;
	g->next = m->gone_engines;
	m->gone_engines = g;
}

struct mst_gone_engine *mst_take_gone_engines(struct master *m)
{
	struct mst_gone_engine *g = m->gone_engines;

	m->gone_engines = NULL;
	return g;
}

size_t mst_client_count(struct master *m)
{
	return mc_map_count(m->client_ids);
}

struct mst_segment *mst_segment_find(struct master *m, const uint8_t *id)
{
	for (struct mst_segment *s = m->segments; s; s = s->next)
		if (!memcmp(s->id, id, MST_ID_LEN))
			return s;
	return NULL;
}

static void set_str(char **dst, const char *src)
{
	char *n = strdup(src ? src : "");

	if (n) {
		free(*dst);
		*dst = n;
	}
}

static void seg_describe(struct mst_segment *s, const struct mst_seg_desc *d)
{
	set_str(&s->name, d->name);
	set_str(&s->endpoint, d->endpoint);
	set_str(&s->protocol, d->protocol);
	set_str(&s->host_id, d->host_id);
	s->base = d->base;
}

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* What the record holds of s equals d (the base is not recorded). */
static bool same_desc(const struct mst_segment *s, const struct mst_seg_desc *d)
{
	return same_str(s->name, d->name) &&
	       same_str(s->endpoint, d->endpoint) &&
	       same_str(s->protocol, d->protocol) &&
	       same_str(s->host_id, d->host_id);
}

/* Remove replicas on s from o; true when o has none left. */
static bool strip(struct mst_object *o, const struct mst_segment *s)
{
	unsigned j = 0;

	for (unsigned i = 0; i < o->n_repl; i++)
		if (o->repl[i].seg != s)
			o->repl[j++] = o->repl[i];
	for (unsigned i = j; i < o->n_repl; i++)
		o->repl[i] = (struct mst_replica){ 0 };
	o->n_repl = (uint8_t)j;
	return j == 0;
}

static bool on_seg(const struct mst_object *o, const struct mst_segment *s)
{
	for (unsigned i = 0; i < o->n_repl; i++)
		if (o->repl[i].seg == s)
			return true;
	return false;
}

/* The latest end (mono ms) of reads that clients may make of o's memory
 * under a lease or a hold given by this run, or `end` if later. */
static uint64_t readers_end(const struct master *m, const struct mst_object *o,
			    uint64_t end)
{
	uint64_t e = o->lease_until > o->read_lease_until ? o->lease_until :
							    o->read_lease_until;

	if (o->state != MST_COMPLETE && !o->orphan)
		return end; /* never read: a put under way */
	/* A hold lasts hold_ttl_ms after its last renewal, at most now. */
	if (o->holds && mst_now() + m->cfg.hold_ttl_ms > e)
		e = mst_now() + m->cfg.hold_ttl_ms;
	return e > end ? e : end;
}

/* In the caller's transaction (*rc: its state): orphans that lose their
 * last replica lose their row too. */
static void strip_list(struct master *m, struct mst_object **list,
		       const struct mst_segment *s, int *rc)
{
	struct mst_object **pp = list;

	while (*pp) {
		struct mst_object *o = *pp;
		if (strip(o, s)) {
			*pp = o->onext;
			o->onext = NULL;
			if (o->orphan && !*rc)
				*rc = mst_db_del_orphan(m->db, o->orphan_id);
			mst_object_free(m, o);
		} else {
			pp = &o->onext;
		}
	}
}

void mst_segment_drop(struct master *m, struct mst_segment *s, const char *why)
{
	struct mst_segment **pp;
	char hex[2 * MST_ID_LEN + 1];
	uint64_t lost = 0, kept = 0;
	int rc = mst_db_begin(m->db);

	struct mst_object **all = NULL;
	size_t n_all = 0;
	uint64_t readers = 0;

	if (mst_objmap_snapshot(&m->objs, &all, &n_all))
		n_all = 0; /* out of memory: replicas stay until the next try */
	for (size_t i = 0; i < n_all; i++) {
		struct mst_object *o = all[i];
		if (!on_seg(o, s))
			continue;
		readers = readers_end(m, o, readers);
		/* Its writer goes on writing (the run is the same): its
		 * range stays out of new objects if s comes back. */
		if (o->state == MST_PROCESSING)
			mst_ghosts_note(m, s, o);
		if (!strip(o, s)) {
			if (o->state == MST_COMPLETE && !rc)
				rc = mst_db_put_object(m->db, o);
			kept++;
			continue;
		}
		if (o->state == MST_COMPLETE) {
			if (!rc)
				rc = mst_db_del_object(m->db, o->key,
						       o->key_len, o->attr);
			mst_feed_emit(m, MCRPC__EVENT_TYPE__EV_LOST, o->key,
				      o->key_len, NULL, 0, 0);
			mst_lru_del(m, o);
			m->n_complete--;
		}
		mst_objmap_del(&m->objs, o);
		mst_object_free(m, o);
		lost++;
	}
	free(all);
	for (struct mst_object *o = m->orphans; o; o = o->onext)
		if (on_seg(o, s))
			readers = readers_end(m, o, readers);
	/* If this memory comes back as a new segment (its owner re-mounts
	 * after it expired, or with another size), nothing is placed in it
	 * while those readers may still read it. */
	/* A fence it had (readers of the run before, a quarantine) goes
	 * on too. */
	if (s->fenced_until > readers)
		readers = s->fenced_until;
	if (m->quarantine_until > readers)
		readers = m->quarantine_until;
	mst_seg_fence_note(m, s->id, readers ? readers : mst_now());
	strip_list(m, &m->orphans, s, &rc);
	/* Puts pre-empted but not reclaimed: their writers may write. */
	for (struct mst_object *o = m->releasing; o; o = o->onext)
		if (!o->orphan && on_seg(o, s))
			mst_ghosts_note(m, s, o);
	strip_list(m, &m->releasing, s, &rc);
	mst_slots_strip(m, s);
	mst_ghosts_segment_gone(m, s);
	if (!rc)
		rc = mst_db_del_segment(m->db, s->id);
	if (!rc)
		rc = mst_db_commit(m->db);
	else
		mst_db_rollback(m->db);
	mst_id_hex(s->id, hex);
	mc_log_notice("master",
		      "segment %s (%s, %s) dropped: %s; %llu objects lost, "
		      "%llu kept on other replicas%s",
		      s->name, s->endpoint, hex, why, (unsigned long long)lost,
		      (unsigned long long)kept,
		      rc ? " (NOT recorded in the database)" : "");
	for (pp = &m->segments; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	m->capacity -= s->size;
	m->allocated -= mc_alloc_used(s->alloc);
	m->view_version++;
	mc_alloc_destroy(s->alloc);
	free(s->name);
	free(s->endpoint);
	free(s->protocol);
	free(s->host_id);
	free(s);
}

static int seg_new(struct master *m, struct mst_client *c,
		   const struct mst_seg_desc *d, struct mst_segment **out)
{
	struct mst_segment *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return MC_STORE_INTERNAL_ERROR;
	memcpy(s->id, d->id, MST_ID_LEN);
	s->size = d->size;
	seg_describe(s, d);
	if (mc_alloc_create(d->size, &s->alloc) || !s->name) {
		free(s->name);
		free(s->endpoint);
		free(s->protocol);
		free(s->host_id);
		free(s);
		return MC_STORE_INTERNAL_ERROR;
	}
	s->owner = c;
	rc = mst_db_begin(m->db);
	if (!rc)
		rc = mst_db_put_segment(m->db, s);
	if (!rc)
		rc = mst_db_commit(m->db);
	else
		mst_db_rollback(m->db);
	if (rc) {
		mc_alloc_destroy(s->alloc);
		free(s->name);
		free(s->endpoint);
		free(s->protocol);
		free(s->host_id);
		free(s);
		return rc;
	}
	s->next = m->segments;
	m->segments = s;
	m->capacity += s->size;
	m->view_version++;
	*out = s;
	return 0;
}

static bool owner_live(struct master *m, const struct mst_segment *s,
		       const uint8_t *client)
{
	(void)m;
	return s->owner && memcmp(s->owner->id, client, MST_ID_LEN);
}

static int check_desc(const struct mst_seg_desc *d)
{
	if (!d->id || !d->size || !d->endpoint || !*d->endpoint)
		return MC_STORE_INVALID_PARAMS;
	return 0;
}

int mst_mount(struct master *m, const uint8_t *client,
	      const struct mst_seg_desc *d)
{
	struct mst_segment *s;
	struct mst_client *c;
	char hex[2 * MST_ID_LEN + 1];
	uint64_t now;
	int rc = check_desc(d);

	if (rc)
		return rc;
	s = mst_segment_find(m, d->id);
	if (s && owner_live(m, s, client))
		return MC_STORE_SEGMENT_ALREADY_EXISTS;
	if (s)
		mst_segment_drop(m, s, "mounted again as new memory");
	c = mst_client_touch(m, client);
	if (!c)
		return MC_STORE_INTERNAL_ERROR;
	c->joined = true;
	rc = seg_new(m, c, d, &s);
	if (rc)
		return rc;
	s->fenced_until = mst_slots_drop_fence(m, d->id);
	mst_ghosts_reserve(m, s);
	mst_id_hex(d->id, hex);
	mc_log_notice("master", "segment %s mounted: %s at %s, %llu bytes", hex,
		      d->name ? d->name : "", d->endpoint,
		      (unsigned long long)d->size);
	now = mst_now();
	if (s->fenced_until > now)
		/* Its memory came back after a drop: readers of what it
		 * held then may still read it (puts meanwhile go elsewhere,
		 * or fail -200 when nothing else has room). */
		mc_log_notice("master",
			      "segment %s at %s: nothing is placed in it for "
			      "%.1f s (readers of the objects it held before "
			      "it was dropped may still read its memory)",
			      hex, d->endpoint,
			      (double)(s->fenced_until - now) / 1000.0);
	return 0;
}

/*
 * s was re-mounted by an owner that kept its memory, but this run does not
 * know it (it started without a record, or lost it): clients of the run
 * before may still read objects there under holds given before the
 * restart, for up to a hold's TTL after this master started. Nothing is
 * placed in s until then, so none of them reads new bytes as old ones.
 */
static void fence_previous_run(struct master *m, struct mst_segment *s)
{
	uint64_t until = m->started + m->cfg.hold_ttl_ms, now = mst_now();

	/* Dropped by this run: its readers were noted then (a drop note,
	 * mst_seg_fence_note(), already set s->fenced_until). */
	if (!s || until <= now || s->fenced_until >= until ||
	    mst_seg_dropped_here(m, s->id))
		return;
	s->fenced_until = until;
	mc_log_notice("master",
		      "segment %s at %s was not in the record: nothing is "
		      "placed in it for %.1f s (readers of the previous run "
		      "may still read its memory)",
		      s->name, s->endpoint, (double)(until - now) / 1000.0);
}

int mst_remount(struct master *m, const uint8_t *client,
		const struct mst_seg_desc *d, uint64_t *objects)
{
	struct mst_segment *s;
	struct mst_client *c;
	char hex[2 * MST_ID_LEN + 1];
	int rc = check_desc(d);

	*objects = 0;
	if (rc)
		return rc;
	s = mst_segment_find(m, d->id);
	if (!s || s->size != d->size) {
		bool unknown = !s;

		/* Its owner (who knows the id) gave the memory another size:
		 * what it held is gone, whoever owned it before. */
		if (s)
			mst_segment_drop(m, s, "re-mounted with another size");
		rc = mst_mount(m, client, d);
		if (!rc && unknown)
			fence_previous_run(m, mst_segment_find(m, d->id));
		return rc ? rc : 1;
	}
	c = mst_client_touch(m, client);
	if (!c)
		return MC_STORE_INTERNAL_ERROR;
	c->joined = true;
	/* The record changes only when the description does (a master on
	 * a full disk still re-adopts an unchanged segment), and first. */
	if (!same_desc(s, d)) {
		struct mst_segment t = *s;
		t.name = (char *)d->name;
		t.endpoint = (char *)d->endpoint;
		t.protocol = (char *)d->protocol;
		t.host_id = (char *)d->host_id;
		rc = mst_db_begin(m->db);
		if (!rc)
			rc = mst_db_put_segment(m->db, &t);
		if (!rc)
			rc = mst_db_commit(m->db);
		else
			mst_db_rollback(m->db);
		if (rc)
			return rc;
		seg_describe(s, d);
	}
	s->base = d->base;
	s->owner = c;
	s->restore_deadline = 0;
	m->view_version++;
	*objects = s->n_replicas;
	mst_id_hex(d->id, hex);
	mc_log_notice("master",
		      "segment %s re-adopted by %s at %s: %llu replicas kept",
		      hex, s->name, s->endpoint,
		      (unsigned long long)s->n_replicas);
	return 0;
}

int mst_unmount(struct master *m, const uint8_t *client, const uint8_t *seg)
{
	struct mst_segment *s = mst_segment_find(m, seg);

	if (!s)
		return MC_STORE_SEGMENT_NOT_FOUND;
	if (owner_live(m, s, client))
		return MC_STORE_ILLEGAL_CLIENT;
	mst_segment_drop(m, s, "unmounted by its owner");
	return 0;
}

void mst_clients_stalled(struct master *m, uint64_t ms, uint64_t now)
{
	/* A client seen in the first half of the gap: calls were served,
	 * only the ticker was held up (the lock, the scheduler), and silence
	 * counts as it was (pings come every second). Pings served after a
	 * resume, before this tick (they waited for the master), are no
	 * such sign. */
	uint64_t tail = ms / 2 > 250 ? ms / 2 : 250;
	uint64_t from = now - ms, to = now > tail ? now - tail : 0;
	for (struct mst_client *c = m->clients; c; c = c->next)
		if (c->last_seen > from && c->last_seen < to)
			return;
	mc_log_notice("master",
		      "this master did not run for %llu ms (stopped or "
		      "paused?): its clients' silence meanwhile is not "
		      "counted against their client_ttl",
		      (unsigned long long)ms);
	for (struct mst_client *c = m->clients; c; c = c->next)
		c->last_seen = c->last_seen + ms < now ? c->last_seen + ms :
							 now;
}

void mst_expire_clients(struct master *m, uint64_t now)
{
	struct mst_client **pp = &m->clients;
	struct mst_segment *s, *next;

	while (*pp) {
		struct mst_client *c = *pp;
		if (now - c->last_seen <= m->cfg.client_ttl_ms) {
			pp = &c->next;
			continue;
		}
		char hex[2 * MST_ID_LEN + 1];
		bool owns = false;
		mst_id_hex(c->id, hex);
		for (s = m->segments; s; s = s->next)
			owns |= s->owner == c;
		/* One that owns nothing (a process killed and restarted,
		 * whose successor re-adopted its segment) is no alarm. */
		mc_log(owns ? MC_LOG_WARN : MC_LOG_INFO, "master",
		       "client %s silent for more than %llu ms: removing it%s",
		       hex, (unsigned long long)m->cfg.client_ttl_ms,
		       owns ? " and its segments" : " (it owns no segment)");
		for (s = m->segments; s; s = next) {
			next = s->next;
			if (s->owner != c)
				continue;
			engine_gone(m, s, c->last_seen);
			mst_segment_drop(m, s, "owner timed out");
		}
		*pp = c->next;
		client_free(m, c);
	}
	mst_ghosts_expire(m, now);
	mst_ckpt_tick(m, now);
	for (s = m->segments; s; s = next) {
		next = s->next;
		if (!s->owner && now > s->restore_deadline) {
			/* Not heard of since this run started. */
			engine_gone(m, s, m->started);
			mst_segment_drop(m, s,
					 "not re-mounted after the master "
					 "restarted");
		}
	}
}
