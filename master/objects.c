/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Object rules (upstream's, docs/design.md "Master"): put start/end/revoke,
 * get and exist with leases, stat without one, remove (refused while
 * leased unless forced; forced removal keeps the memory until readers are
 * done), atomic rename, and holds (leases a reader keeps while it has the
 * object open).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "dirs.h"
#include "feed.h"
#include "ghosts.h"
#include "master.h"
#include "master.pb-c.h"
#include "mc_log.h"
#include "mc_map.h"
#include "mooncake/mc_err.h"
#include "mooncake/store_fs.h"
#include "mst_util.h"
#include "objects.h"
#include "groups.h"
#include "objmap.h"
#include "slots.h"
#include "place.h"
#include "txn.h"

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

bool mst_replica_live(const struct mst_replica *r)
{
	return r->seg && r->seg->owner && r->blk;
}

uint64_t mst_replica_addr(const struct mst_replica *r)
{
	return r->seg->base + mc_alloc_block_offset(r->blk);
}

/* Readable replicas; an empty object counts as one (it needs none). */
static unsigned live_replicas(const struct mst_object *o)
{
	unsigned n = 0;

	if (!o->size)
		return 1;

	for (unsigned i = 0; i < o->n_repl; i++)
		n += mst_replica_live(&o->repl[i]);
	return n;
}

bool mst_object_leased(const struct mst_object *o, uint64_t now)
{
	return o->lease_until > now || o->holds > 0;
}

void mst_hold_drop(struct master *m, struct mst_hold *h)
{
	if (h->prev)
		h->prev->next = h->next;
	else
		m->holds = h->next;
	if (h->next)
		h->next->prev = h->prev;
	(void)mc_map_del(m->hold_ids, (const char *)&h->id, sizeof(h->id));
	if (h->obj->holds)
		h->obj->holds--;
	free(h);
}

static void drop_holds_of(struct master *m, struct mst_object *o)
{
	for (struct mst_hold *h = m->holds, *n; h; h = n) {
		n = h->next;
		if (h->obj == o)
			mst_hold_drop(m, h);
	}
	o->holds = 0;
}

void mst_object_free(struct master *m, struct mst_object *o)
{
	if (o->state == MST_PROCESSING || o->state == MST_ENDING)
		mst_pend_del(m, o);
	for (unsigned i = 0; i < o->n_repl; i++)
		mst_replica_free(m, &o->repl[i]);
	if (o->holds)
		drop_holds_of(m, o);
	mst_group_leave(m, o);
	free(o->attr);
	free(o);
}

static int check_key(struct master *m, size_t len)
{
	if (!len)
		return MC_STORE_INVALID_PARAMS;
	if (len > m->cfg.max_key_len)
		return MC_STORE_INVALID_KEY;
	return 0;
}

struct mst_object *mst_object_new(const char *key, size_t key_len,
				  unsigned n_repl)
{
	size_t align = _Alignof(struct mst_replica);
	size_t at = (sizeof(struct mst_object) + key_len + 1 + align - 1) &
		    ~(align - 1);
	struct mst_object *o =
		calloc(1, at + (size_t)n_repl * sizeof(struct mst_replica));

	if (!o)
		return NULL;
	if (key_len)
		memcpy(o->key, key, key_len);
	o->key_len = key_len;
	o->repl = (struct mst_replica *)((char *)o + at);
	return o;
}

/* An unfinished put older than the discard timeout gives way: its memory
 * is released only after the release timeout (its writer may still be
 * writing into it). */
static void discard(struct master *m, struct mst_object *o)
{
	mst_objmap_del(&m->objs, o);
	mst_pend_del(m, o);
	o->onext = m->releasing;
	m->releasing = o;
	m->stats.discarded++;
	m->stats.discarded_bytes += o->size * o->n_repl;
}

void mst_puts_writer_gone(struct master *m, const uint8_t *client)
{
	struct mst_object *next;
	unsigned n = 0;

	for (struct mst_object *o = m->pend_head; o; o = next) {
		next = o->lru_next;
		if (o->state == MST_PROCESSING &&
		    !memcmp(o->writer, client, MST_ID_LEN)) {
			discard(m, o);
			n++;
		}
	}
	if (n)
		mc_log_info("master",
			    "%u unfinished puts of a client gone given up", n);
}

/* OBJECT_ALREADY_EXISTS (*out the object) when key is complete or a put
 * of it is in progress; an unfinished put older than the discard timeout
 * gives way. */
static int taken_key(struct master *m, const char *key, size_t key_len,
		     uint64_t now, struct mst_object **out)
{
	struct mst_object *o = mst_objmap_get(&m->objs, key, key_len);

	if (!o)
		return 0;
	if (o->state == MST_COMPLETE ||
	    now - o->put_start < m->cfg.discard_timeout_ms) {
		*out = o;
		return MC_STORE_OBJECT_ALREADY_EXISTS;
	}
	discard(m, o);
	return 0;
}

int mst_put_commit(struct master *m, const uint8_t *client, const char *key,
		   size_t key_len, struct mst_object *slot,
		   struct mst_object **out)
{
	uint64_t now = mst_now();
	struct mst_object *o;
	int rc = check_key(m, key_len);

	*out = NULL;
	if (!rc)
		rc = taken_key(m, key, key_len, now, out);
	if (rc)
		return rc;
	o = mst_object_new(key, key_len, slot->n_repl);
	if (!o)
		return MC_STORE_INTERNAL_ERROR;
	o->size = slot->size;
	o->state = MST_PROCESSING;
	o->n_repl = slot->n_repl;
	memcpy(o->repl, slot->repl, slot->n_repl * sizeof(*o->repl));
	o->put_start = now;
	memcpy(o->writer, client, MST_ID_LEN);
	mst_slot_consumed(m, slot);
	mst_objmap_add(&m->objs, o);
	mst_pend_add(m, o);
	*out = o;
	return 0;
}

int mst_put_start(struct master *m, const uint8_t *client, const char *key,
		  size_t key_len, uint64_t size, const struct mst_put_cfg *pc,
		  struct mst_object **out)
{
	struct mst_replica repl[MST_MAX_REPLICAS] = { { 0 } };
	unsigned want = pc->replicas ? pc->replicas : 1, n = 0;
	uint64_t now = mst_now();
	struct mst_object *o;
	int rc = check_key(m, key_len);

	if (rc)
		return rc;
	if (want > MST_MAX_REPLICAS)
		want = MST_MAX_REPLICAS;
	rc = taken_key(m, key, key_len, now, out);
	if (rc)
		return rc;
	/* An empty object needs no memory: it is complete with no replica.
	 * No room is NO_AVAILABLE_HANDLE: evicting for it is the service's
	 * call (mst_evict_for_put). */
	n = size ? mst_place(m, client, size, want, pc, repl) : 0;
	if (!n && size)
		return MC_STORE_NO_AVAILABLE_HANDLE;
	if (size && n < want)
		m->stats.partial_allocations++;
	o = mst_object_new(key, key_len, n);
	if (o && pc->attr && !(o->attr = malloc(sizeof(*o->attr)))) {
		free(o);
		o = NULL;
	}
	if (!o) {
		for (unsigned i = 0; i < n; i++)
			mst_replica_free(m, &repl[i]);
		return MC_STORE_INTERNAL_ERROR;
	}
	o->size = size;
	o->state = MST_PROCESSING;
	o->n_repl = (uint8_t)n;
	memcpy(o->repl, repl, n * sizeof(*repl));
	if (o->attr)
		*o->attr = *pc->attr;
	o->put_start = now;
	o->hard_pin = pc->hard_pin;
	/* While PROCESSING, soft_pin_until holds the pin's duration: the
	 * deadline starts when the object becomes readable. */
	if (pc->soft_pin) {
		uint64_t ttl = pc->soft_pin_ttl_ms ? pc->soft_pin_ttl_ms :
						     m->cfg.soft_pin_ttl_ms;
		o->soft_pin_until = ttl < m->cfg.max_soft_pin_ttl_ms ?
					    ttl :
					    m->cfg.max_soft_pin_ttl_ms;
	}
	o->publish = pc->publish;
	memcpy(o->writer, client, MST_ID_LEN);
	if (pc->group_len && mst_group_join(m, o, pc->group, pc->group_len)) {
		mst_object_free(m, o);
		return MC_STORE_INTERNAL_ERROR;
	}
	mst_objmap_add(&m->objs, o);
	mst_pend_add(m, o);
	*out = o;
	return 0;
}

/* A put is finished or revoked only by the client that started it (when
 * the request names one): a put pre-empted after the discard timeout
 * must not complete its successor. */
static bool not_writer(const struct mst_object *o, const uint8_t *client)
{
	return client && o->state == MST_PROCESSING &&
	       memcmp(o->writer, client, MST_ID_LEN);
}

/* o, on the releasing list, is a put of key by client, given up while it
 * was away (past client_ttl: mst_puts_writer_gone) or pre-empted. */
static bool discarded_of(const struct mst_object *o, const uint8_t *client,
			 const char *key, size_t key_len)
{
	return o->key_len == key_len && !memcmp(o->key, key, key_len) &&
	       !not_writer(o, client);
}

/* How many of client's given-up puts of key wait for release. */
static size_t discarded_puts(const struct master *m, const uint8_t *client,
			     const char *key, size_t key_len)
{
	size_t n = 0;

	for (const struct mst_object *o = m->releasing; o; o = o->onext)
		n += discarded_of(o, client, key, key_len);
	return n;
}

/* A given-up put of client's, revoked now: its writer writes no more, so
 * its memory goes (waiting for the writer to be gone, it stayed for as
 * long as that client came back and lived). */
static bool revoke_discarded(struct master *m, const uint8_t *client,
			     const char *key, size_t key_len)
{
	for (struct mst_object **pp = &m->releasing; *pp; pp = &(*pp)->onext) {
		struct mst_object *o = *pp;

		if (!discarded_of(o, client, key, key_len))
			continue;
		*pp = o->onext;
		m->stats.released++;
		mst_object_free(m, o);
		return true;
	}
	return false;
}

int mst_put_end_prepare(struct master *m, const uint8_t *client,
			const char *key, size_t key_len,
			struct mst_object **out)
{
	struct mst_object *o = mst_objmap_get(&m->objs, key, key_len);
	int rc;

	*out = NULL;
	/* A put whose segment was dropped while it wrote: the client puts
	 * it again (ghosts.h). */
	if ((!o || o->state != MST_PROCESSING || not_writer(o, client)) &&
	    mst_ghosts_end(m, client, key, key_len, 0))
		return MC_STORE_REPLICA_IS_GONE;
	if (!o || o->state == MST_REMOVING)
		return MC_STORE_OBJECT_NOT_FOUND;
	if (not_writer(o, client))
		return MC_STORE_ILLEGAL_CLIENT;
	if (o->state != MST_PROCESSING) {
		/* Already complete, or repeated in this batch: a put of an
		 * existing key is success (objects are immutable). If this
		 * client's own put of it was pre-empted (older than the
		 * discard timeout) by another client's, its writes are done
		 * now: that memory goes at once, not after the release
		 * timeout. Not when the client has several such puts (its
		 * threads, each still maybe writing: which one ends here is
		 * not said), nor when the object is its own (a repeat). */
		if (client && memcmp(o->writer, client, MST_ID_LEN) &&
		    discarded_puts(m, client, key, key_len) == 1)
			(void)revoke_discarded(m, client, key, key_len);
		return 0;
	}
	/* Its writes are done: the range a dropped replica kept goes. */
	if (m->ghosts)
		(void)mst_ghosts_end(m, client, key, key_len, o->put_start);
	if (!live_replicas(o))
		return MC_STORE_REPLICA_IS_GONE;
	o->version = mst_next_version(m);
	if (o->soft_pin_until)
		o->soft_pin_until += MST_VERSION_MS(o->version);
	o->state = MST_ENDING;
	*out = o;
	rc = mst_db_put_object(m->db, o);
	if (!rc && o->attr)
		rc = mst_dir_touch_parent(m, key, key_len);
	return rc;
}

void mst_put_end_fail(struct master *m, struct mst_object *o)
{
	mst_objmap_del(&m->objs, o);
	mst_object_free(m, o);
}

void mst_put_end_apply(struct master *m, struct mst_object *o)
{
	mst_pend_del(m, o);
	o->state = MST_COMPLETE;
	o->last_access = mst_now();
	if (o->publish)
		o->publish_until = o->last_access + m->cfg.lease_ttl_ms;
	mst_lru_add(m, o);
	m->n_complete++;
	mst_feed_emit(m, MCRPC__EVENT_TYPE__EV_PUT, o->key, o->key_len, NULL, 0,
		      o->version);
}

int mst_put_revoke(struct master *m, const uint8_t *client, const char *key,
		   size_t key_len)
{
	struct mst_object *o = mst_objmap_get(&m->objs, key, key_len);

	if ((!o || o->state != MST_PROCESSING || not_writer(o, client)) &&
	    (mst_ghosts_end(m, client, key, key_len, 0) ||
	     (client && revoke_discarded(m, client, key, key_len))))
		return 0;
	if (!o)
		return MC_STORE_OBJECT_NOT_FOUND;
	if (not_writer(o, client))
		return MC_STORE_ILLEGAL_CLIENT;
	if (o->state != MST_PROCESSING)
		return MC_STORE_INVALID_WRITE;
	if (m->ghosts)
		(void)mst_ghosts_end(m, client, key, key_len, o->put_start);
	mst_objmap_del(&m->objs, o);
	mst_object_free(m, o);
	return 0;
}

/* HA, just after taking over: a replica's segment waits for its owner,
 * who re-mounts within a ping. */
bool mst_ha_settling(const struct master *m)
{
	return m->ha_settle_until && mst_now() < m->ha_settle_until;
}

static bool owner_due(const struct master *m, const struct mst_object *o)
{
	if (!mst_ha_settling(m))
		return false;
	for (unsigned i = 0; i < o->n_repl; i++)
		if (o->repl[i].seg && !o->repl[i].seg->owner)
			return true;
	return false;
}

static int readable(struct master *m, const char *key, size_t key_len,
		    struct mst_object **out)
{
	struct mst_object *o = mst_objmap_get(&m->objs, key, key_len);

	if (!key_len)
		return MC_STORE_INVALID_PARAMS;
	if (!o)
		return MC_STORE_OBJECT_NOT_FOUND;
	if (o->state != MST_COMPLETE)
		return MC_STORE_REPLICA_IS_NOT_READY;
	if (!live_replicas(o))
		return owner_due(m, o) ? MC_STORE_UNAVAILABLE_IN_CURRENT_MODE :
					 MC_STORE_REPLICA_IS_NOT_READY;
	*out = o;
	return 0;
}

int mst_get(struct master *m, const char *key, size_t key_len, bool hold,
	    uint64_t age_ms, struct mst_object **out, uint64_t *hold_id,
	    uint64_t *lease_ms)
{
	uint64_t now = mst_now(), ttl = m->cfg.lease_ttl_ms;
	struct mst_object *o;
	int rc = readable(m, key, key_len, &o);

	if (rc)
		return rc;
	*lease_ms = age_ms < ttl ? ttl - age_ms : 0;
	o->read_lease_until = max_u64(o->read_lease_until, now + *lease_ms);
	o->lease_until = max_u64(o->lease_until, o->read_lease_until);
	o->last_access = now;
	mst_lru_touch(m, o);
	mst_group_touch(m, o);
	if (hold) {
		struct mst_hold *h = calloc(1, sizeof(*h));
		if (!h)
			return MC_STORE_INTERNAL_ERROR;
		h->id = ++m->next_hold;
		h->obj = o;
		h->expires = now + m->cfg.hold_ttl_ms;
		if (mc_map_put(m->hold_ids, (const char *)&h->id, sizeof(h->id),
			       &h, sizeof(h))) {
			free(h);
			return MC_STORE_INTERNAL_ERROR;
		}
		h->next = m->holds;
		if (h->next)
			h->next->prev = h;
		m->holds = h;
		o->holds++;
		*hold_id = h->id;
	}
	*out = o;
	return 0;
}

int mst_touch(struct master *m, const char *key, size_t key_len,
	      struct mst_object **out)
{
	struct mst_object *o;
	int rc = readable(m, key, key_len, &o);

	if (rc)
		return rc;
	o->last_access = mst_now();
	mst_lru_touch(m, o);
	mst_group_touch(m, o);
	*out = o;
	return 0;
}

int mst_exist(struct master *m, const char *key, size_t key_len)
{
	struct mst_object *o;

	if (readable(m, key, key_len, &o))
		return 0;
	o->lease_until =
		max_u64(o->lease_until, mst_now() + m->cfg.lease_ttl_ms);
	mst_group_touch(m, o);
	return 1;
}

int mst_stat(struct master *m, const char *key, size_t key_len,
	     struct mst_object **out)
{
	struct mst_object *o = mst_objmap_get(&m->objs, key, key_len);

	if (!o || o->state != MST_COMPLETE)
		return MC_STORE_OBJECT_NOT_FOUND;
	*out = o;
	return 0;
}

int mst_remove_prepare(struct master *m, const char *key, size_t key_len,
		       bool force, struct mst_object **out)
{
	struct mst_object *o = mst_objmap_get(&m->objs, key, key_len);
	int rc;

	if (!o)
		return MC_STORE_OBJECT_NOT_FOUND;
	if (o->state == MST_REMOVING)
		return MC_STORE_OBJECT_NOT_FOUND; /* repeated in this batch */
	if (o->state != MST_COMPLETE)
		return MC_STORE_REPLICA_IS_NOT_READY;
	if (!force && mst_object_leased(o, mst_now()))
		return MC_STORE_OBJECT_HAS_LEASE;
	o->state = MST_REMOVING;
	rc = mst_unlink_prepare(m, o);
	if (!rc && o->attr)
		rc = mst_dir_touch_parent(m, key, key_len);
	if (rc) {
		/* Not recorded: the object stays, whatever the batch does. */
		mst_remove_undo(m, o);
		return rc;
	}
	*out = o;
	return 0;
}

void mst_remove_undo(struct master *m, struct mst_object *o)
{
	(void)m;
	o->state = MST_COMPLETE;
	mst_unlink_undo(o);
}

/* A reader may still copy from o's memory: a read lease or a hold, or
 * the master restarted recently and forgot them. */
static bool keeps_memory(const struct master *m, const struct mst_object *o,
			 uint64_t now)
{
	return o->read_lease_until > now || o->holds ||
	       now < m->quarantine_until;
}

int mst_unlink_prepare(struct master *m, struct mst_object *o)
{
	int rc = mst_db_del_object(m->db, o->key, o->key_len, o->attr);

	if (rc || !o->n_repl || !keeps_memory(m, o, mst_now()))
		return rc;
	o->orphan = true;
	o->orphan_id = ++m->next_orphan_id;
	if (o->read_lease_until < m->quarantine_until)
		o->read_lease_until = m->quarantine_until;
	return mst_db_put_orphan(m->db, o);
}

void mst_unlink_undo(struct mst_object *o)
{
	o->orphan = false;
}

/* Out of the namespace; the memory stays while a reader may use it (as
 * decided by mst_unlink_prepare). */
static void unlink_obj(struct master *m, struct mst_object *o)
{
	mst_objmap_del(&m->objs, o);
	mst_lru_del(m, o);
	m->n_complete--;
	if (o->orphan) {
		o->onext = m->orphans;
		m->orphans = o;
	} else {
		mst_object_free(m, o);
	}
}

void mst_remove_apply(struct master *m, struct mst_object *o, int ev_type)
{
	mst_feed_emit(m, ev_type, o->key, o->key_len, NULL, 0, 0);
	unlink_obj(m, o);
}

struct drop_ctx {
	struct master *m;
	struct mst_object **v;
	int ev_type;
};

static int drop_prepare(void *arg, size_t i)
{
	struct drop_ctx *d = arg;

	return mst_unlink_prepare(d->m, d->v[i]);
}

static void drop_finish(void *arg, size_t i, bool committed)
{
	struct drop_ctx *d = arg;

	if (committed)
		mst_remove_apply(d->m, d->v[i], d->ev_type);
	else
		mst_unlink_undo(d->v[i]);
}

int mst_drop_objects(struct master *m, struct mst_object **v, size_t n,
		     int ev_type)
{
	struct drop_ctx d = { .m = m, .v = v, .ev_type = ev_type };

	return mst_txn_run(m, n, drop_prepare, drop_finish, &d);
}

/* A copy of src under the key to, sharing src's replicas and attributes
 * (moved_apply() hands them over); NULL: no memory. */
static struct mst_object *moved_copy(const struct mst_object *src,
				     const char *to, size_t to_len)
{
	struct mst_object *n = mst_object_new(to, to_len, src->n_repl);
	struct mst_replica *own;

	if (!n)
		return NULL;
	own = n->repl;
	memcpy(n, src, offsetof(struct mst_object, repl));
	n->repl = own;
	memcpy(n->repl, src->repl, src->n_repl * sizeof(*n->repl));
	n->lru_prev = n->lru_next = NULL;
	n->publish = false; /* renamed: published */
	n->publish_until = 0;
	return n;
}

/* In the open transaction: n (moved_copy() of src) replaces src, and a
 * file's parents' records are touched (for a new version of n's name,
 * only when that name is new: touch_from false, touch_to !dst). */
static int moved_prepare(struct master *m, const struct mst_object *src,
			 const struct mst_object *n, bool touch_from,
			 bool touch_to)
{
	int rc = mst_db_del_object(m->db, src->key, src->key_len, src->attr);

	if (!rc)
		rc = mst_db_put_object(m->db, n);
	if (!rc && n->attr && touch_from)
		rc = mst_dir_touch_parent(m, src->key, src->key_len);
	if (!rc && n->attr && touch_to)
		rc = mst_dir_touch_parent(m, n->key, n->key_len);
	return rc;
}

/* Committed: n takes over src's replicas, holds and recency. */
static void moved_apply(struct master *m, struct mst_object *src,
			struct mst_object *n)
{
	mst_objmap_del(&m->objs, src);
	mst_lru_del(m, src);
	for (struct mst_hold *h = m->holds; h; h = h->next)
		if (h->obj == src)
			h->obj = n;
	mst_group_replace(src, n);
	free(src);
	mst_objmap_add(&m->objs, n);
	mst_lru_add(m, n);
}

/* A file's ctime follows its renames; the old value for an undo. */
static int64_t touch_ctime(struct mst_object *n)
{
	int64_t old = 0;

	if (n->attr) {
		old = n->attr->ctime_ns;
		n->attr->ctime_ns = mst_wall_ns();
		n->attr->flags |= MOONCAKE_ATTR_CTIME_SET;
	}
	return old;
}

int mst_rename(struct master *m, const char *from, size_t from_len,
	       const char *to, size_t to_len, bool no_replace, bool version)
{
	struct mst_object *src, *dst, *n;
	uint32_t old_flags;
	int64_t old_ctime;
	int rc = check_key(m, to_len);

	if (rc)
		return rc;
	src = mst_objmap_get(&m->objs, from, from_len);
	if (!src || src->state != MST_COMPLETE)
		return MC_STORE_OBJECT_NOT_FOUND;
	if (from_len == to_len && !memcmp(from, to, to_len))
		return 0;
	dst = mst_objmap_get(&m->objs, to, to_len);
	if (dst && no_replace)
		return MC_STORE_OBJECT_ALREADY_EXISTS;
	if (dst && dst->state != MST_COMPLETE)
		return MC_STORE_OBJECT_REPLICA_BUSY;
	n = moved_copy(src, to, to_len);
	if (!n)
		return MC_STORE_INTERNAL_ERROR;
	old_flags = n->attr ? n->attr->flags : 0;
	old_ctime = touch_ctime(n);
	rc = mst_db_begin(m->db);
	if (!rc && dst)
		rc = mst_unlink_prepare(m, dst);
	if (!rc)
		rc = moved_prepare(m, src, n, !version, !version || !dst);
	if (!rc)
		rc = mst_db_commit(m->db);
	else
		mst_db_rollback(m->db);
	if (rc) {
		if (dst)
			mst_unlink_undo(dst);
		if (n->attr) {
			n->attr->ctime_ns = old_ctime;
			n->attr->flags = old_flags;
		}
		free(n);
		return rc;
	}
	if (dst)
		unlink_obj(m, dst);
	moved_apply(m, src, n);
	mst_feed_emit(m, MCRPC__EVENT_TYPE__EV_RENAME, from, from_len, to,
		      to_len, n->version);
	return 0;
}

/* ---- directory rename ----------------------------------------------------- */

struct names {
	char **v;
	size_t *len, n, cap;
	mst_attr_t *attrs; /* records: their attributes (mode 0: none) */
};

static int names_add(void *arg, const char *name, size_t len,
		     const mst_attr_t *a)
{
	struct names *ns = arg;

	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? 2 * ns->cap : 64;
		char **v = realloc(ns->v, cap * sizeof(*v));
		size_t *l = v ? realloc(ns->len, cap * sizeof(*l)) : NULL;
		mst_attr_t *at = l ? realloc(ns->attrs, cap * sizeof(*at)) :
				     NULL;
		if (v)
			ns->v = v;
		if (l)
			ns->len = l;
		if (at)
			ns->attrs = at;
		if (!at)
			return MC_STORE_INTERNAL_ERROR;
		ns->cap = cap;
	}
	ns->v[ns->n] = malloc(len + 1);
	if (!ns->v[ns->n])
		return MC_STORE_INTERNAL_ERROR;
	memcpy(ns->v[ns->n], name, len);
	ns->v[ns->n][len] = 0;
	ns->len[ns->n] = len;
	if (a)
		ns->attrs[ns->n] = *a;
	else
		memset(&ns->attrs[ns->n], 0, sizeof(*ns->attrs));
	ns->n++;
	return 0;
}

static void names_free(struct names *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
	free(ns->len);
	free(ns->attrs);
}

/* from's name moved under to: a malloc'd key (NULL: no memory). */
static char *moved_name(const char *name, size_t len, size_t from_len,
			const char *to, size_t to_len, size_t *out_len)
{
	size_t nl = to_len + len - from_len;
	char *k = malloc(nl + 1);

	if (k) {
		memcpy(k, to, to_len);
		memcpy(k + to_len, name + from_len, len - from_len);
		k[nl] = 0;
		*out_len = nl;
	}
	return k;
}

int mst_rename_dir(struct master *m, const char *from, size_t from_len,
		   const char *to, size_t to_len)
{
	struct names keys = { 0 }, dirs = { 0 };
	struct mst_object **src = NULL, **moved = NULL;
	mst_attr_t rec;
	int rc, has_from, has_to;

	if (from_len < 2 || to_len < 2 || from[from_len - 1] != '/' ||
	    to[to_len - 1] != '/')
		return MC_STORE_INVALID_PARAMS;
	if (to_len >= from_len && !memcmp(to, from, from_len))
		return to_len == from_len ? 0 : MC_STORE_INVALID_PARAMS;
	if (mst_objmap_get(&m->objs, to, to_len - 1))
		return MC_STORE_OBJECT_ALREADY_EXISTS; /* a file named to */
	rc = mst_db_has_under(m->db, to, to_len);
	if (rc)
		return rc == 1 ? MC_STORE_INVALID_WRITE : rc;
	has_from = mst_dir_record(m, from, from_len, &rec);
	has_to = mst_dir_record(m, to, to_len, NULL);
	if (has_from < 0 || has_to < 0)
		return has_from < 0 ? has_from : has_to;
	rc = mst_db_each_under(m->db, false, from, from_len, names_add, &keys);
	if (!rc)
		rc = mst_db_each_under(m->db, true, from, from_len, names_add,
				       &dirs);
	if (!rc && !has_from && !keys.n && !dirs.n)
		rc = MC_STORE_OBJECT_NOT_FOUND;
	src = rc ? NULL : calloc(keys.n + 1, sizeof(*src));
	moved = src ? calloc(keys.n + 1, sizeof(*moved)) : NULL;
	if (!rc && !moved)
		rc = MC_STORE_INTERNAL_ERROR;
	for (size_t i = 0; !rc && i < keys.n; i++) {
		size_t nl;
		char *nk = moved_name(keys.v[i], keys.len[i], from_len, to,
				      to_len, &nl);
		src[i] = mst_objmap_get(&m->objs, keys.v[i], keys.len[i]);
		if (!nk)
			rc = MC_STORE_INTERNAL_ERROR;
		else if (nl > m->cfg.max_key_len)
			rc = MC_STORE_INVALID_KEY;
		else if (!src[i] || src[i]->state != MST_COMPLETE)
			rc = MC_STORE_OBJECT_REPLICA_BUSY; /* mid-change */
		else if (!(moved[i] = moved_copy(src[i], nk, nl)))
			rc = MC_STORE_INTERNAL_ERROR;
		free(nk);
	}
	if (!rc)
		rc = mst_db_begin(m->db);
	for (size_t i = 0; !rc && i < keys.n; i++) {
		rc = mst_db_del_object(m->db, src[i]->key, src[i]->key_len,
				       src[i]->attr);
		if (!rc)
			rc = mst_db_put_object(m->db, moved[i]);
	}
	for (size_t i = 0; !rc && i < dirs.n; i++) {
		size_t nl;
		char *np = moved_name(dirs.v[i], dirs.len[i], from_len, to,
				      to_len, &nl);
		rc = np ? mst_db_dir_del(m->db, dirs.v[i], dirs.len[i]) :
			  MC_STORE_INTERNAL_ERROR;
		if (!rc)
			rc = mst_db_dir_put(
				m->db, np, nl,
				dirs.attrs[i].mode ? &dirs.attrs[i] : NULL);
		free(np);
	}
	if (!rc && has_from) {
		rec.ctime_ns = mst_wall_ns();
		rc = mst_db_dir_del(m->db, from, from_len);
		if (!rc)
			rc = mst_db_dir_put(m->db, to, to_len,
					    rec.mode ? &rec : NULL);
	} else if (!rc && has_to) {
		rc = mst_db_dir_del(m->db, to, to_len); /* replaced */
	}
	if (!rc)
		rc = mst_dir_touch_parent(m, from, from_len - 1);
	if (!rc)
		rc = mst_dir_touch_parent(m, to, to_len - 1);
	if (!rc)
		rc = mst_db_commit(m->db);
	else if (src && moved)
		mst_db_rollback(m->db);
	for (size_t i = 0; i < keys.n && moved; i++) {
		if (rc)
			free(moved[i]);
		else
			moved_apply(m, src[i], moved[i]);
	}
	if (!rc)
		mst_feed_emit(m, MCRPC__EVENT_TYPE__EV_RENAME, from, from_len,
			      to, to_len, 0);
	free(src);
	free(moved);
	names_free(&keys);
	names_free(&dirs);
	return rc;
}

/* ---- attributes ----------------------------------------------------------- */

void mst_attr_apply(mst_attr_t *t, unsigned mask, const mst_attr_t *a)
{
	if (mask & MOONCAKE_SET_MODE)
		t->mode = (t->mode & ~07777u) | (a->mode & 07777u);
	if (mask & MOONCAKE_SET_UID)
		t->uid = a->uid;
	if (mask & MOONCAKE_SET_GID)
		t->gid = a->gid;
	if (mask & MOONCAKE_SET_ATIME) {
		t->atime_ns = a->atime_ns;
		t->flags |= MOONCAKE_ATTR_ATIME_SET;
	}
	if (mask & MOONCAKE_SET_MTIME) {
		t->mtime_ns = a->mtime_ns;
		t->flags |= MOONCAKE_ATTR_MTIME_SET;
	}
	t->ctime_ns = mst_wall_ns();
	t->flags |= MOONCAKE_ATTR_CTIME_SET;
}

int mst_setattr(struct master *m, const char *key, size_t key_len,
		unsigned mask, const mst_attr_t *a, mst_attr_t *out)
{
	struct mst_object *o = mst_objmap_get(&m->objs, key, key_len);
	mst_attr_t *t, old;
	bool fresh;
	int rc;

	if (!o || o->state != MST_COMPLETE)
		return MC_STORE_OBJECT_NOT_FOUND;
	fresh = !o->attr;
	if (fresh) {
		o->attr = malloc(sizeof(*o->attr));
		if (!o->attr)
			return MC_STORE_INTERNAL_ERROR;
		*o->attr = *a;
		o->attr->flags &= MOONCAKE_ATTR_ATIME_SET |
				  MOONCAKE_ATTR_MTIME_SET |
				  MOONCAKE_ATTR_CTIME_SET;
	}
	t = o->attr;
	old = *t;
	mst_attr_apply(t, mask, a);
	rc = mst_db_begin(m->db);
	if (!rc)
		rc = mst_db_put_object(m->db, o);
	if (!rc)
		rc = mst_db_commit(m->db);
	else
		mst_db_rollback(m->db);
	if (rc) {
		if (fresh) {
			free(o->attr);
			o->attr = NULL;
		} else {
			*t = old;
		}
		return rc;
	}
	*out = *t;
	mst_feed_emit(m, MCRPC__EVENT_TYPE__EV_ATTR, key, key_len, NULL, 0, 0);
	return 0;
}

static struct mst_hold *hold_find(struct master *m, uint64_t id)
{
	const struct mc_map_entry *e =
		mc_map_get(m->hold_ids, (const char *)&id, sizeof(id));
	struct mst_hold *h = NULL;

	if (e)
		memcpy(&h, e->val, sizeof(h));
	return h;
}

int mst_hold_renew(struct master *m, uint64_t id)
{
	struct mst_hold *h = hold_find(m, id);

	if (!h)
		return MC_STORE_OBJECT_NOT_FOUND;
	h->expires = mst_now() + m->cfg.hold_ttl_ms;
	return 0;
}

int mst_hold_release(struct master *m, uint64_t id)
{
	struct mst_hold *h = hold_find(m, id);

	if (!h)
		return MC_STORE_OBJECT_NOT_FOUND;
	mst_hold_drop(m, h);
	return 0;
}
