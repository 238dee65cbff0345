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
#include "master.h"
#include "mc_map.h"
#include "mc_log.h"
#include "mooncake/mc_err.h"
#include "master.pb-c.h"

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
	for (unsigned i = 0; i < o->n_repl; i++)
		mst_replica_free(m, &o->repl[i]);
	if (o->holds)
		drop_holds_of(m, o);
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
	o->onext = m->releasing;
	m->releasing = o;
	m->stats.discarded++;
	m->stats.discarded_bytes += o->size * o->n_repl;
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
	o = mst_objmap_get(&m->objs, key, key_len);
	if (o) {
		if (o->state == MST_COMPLETE ||
		    now - o->put_start < m->cfg.discard_timeout_ms)
			return MC_STORE_OBJECT_ALREADY_EXISTS;
		discard(m, o);
	}
	/* An empty object needs no memory: it is complete with no replica. */
	n = size ? mst_place(m, client, size, want, pc, repl) : 0;
	for (int round = 0; size && !n && round < 4; round++) {
		/* Full: evict least recently read objects, then retry. */
		if (!mst_evict(m, (size * want) << round, 0))
			break;
		n = mst_place(m, client, size, want, pc, repl);
	}
	if (!n && size) {
		m->stats.alloc_failures++;
		m->need_eviction = true;
		return MC_STORE_NO_AVAILABLE_HANDLE;
	}
	if (size && n < want)
		m->stats.partial_allocations++;
	o = mst_object_new(key, key_len, n);
	if (!o) {
		for (unsigned i = 0; i < n; i++)
			mst_replica_free(m, &repl[i]);
		return MC_STORE_INTERNAL_ERROR;
	}
	o->size = size;
	o->state = MST_PROCESSING;
	o->n_repl = (uint8_t)n;
	memcpy(o->repl, repl, n * sizeof(*repl));
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
	memcpy(o->writer, client, MST_ID_LEN);
	mst_objmap_add(&m->objs, o);
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

int mst_put_end_prepare(struct master *m, const uint8_t *client,
			const char *key, size_t key_len,
			struct mst_object **out)
{
	struct mst_object *o = mst_objmap_get(&m->objs, key, key_len);

	*out = NULL;
	if (!o || o->state == MST_REMOVING)
		return MC_STORE_OBJECT_NOT_FOUND;
	if (not_writer(o, client))
		return MC_STORE_ILLEGAL_CLIENT;
	if (o->state != MST_PROCESSING)
		return 0; /* already complete, or repeated in this batch */
	if (!live_replicas(o))
		return MC_STORE_REPLICA_IS_GONE;
	o->version = mst_next_version(m);
	if (o->soft_pin_until)
		o->soft_pin_until += MST_VERSION_MS(o->version);
	o->state = MST_ENDING;
	*out = o;
	return mst_db_put_object(m->db, o);
}

void mst_put_end_undo(struct master *m, struct mst_object *o)
{
	(void)m;
	o->state = MST_PROCESSING;
	if (o->soft_pin_until)
		o->soft_pin_until -= MST_VERSION_MS(o->version);
}

void mst_put_end_apply(struct master *m, struct mst_object *o)
{
	o->state = MST_COMPLETE;
	o->last_access = mst_now();
	mst_lru_add(m, o);
	m->n_complete++;
	mst_feed_emit(m, MCRPC__EVENT_TYPE__EV_PUT, o->key, o->key_len, NULL,
		      0);
}

int mst_put_revoke(struct master *m, const uint8_t *client, const char *key,
		   size_t key_len)
{
	struct mst_object *o = mst_objmap_get(&m->objs, key, key_len);

	if (!o)
		return MC_STORE_OBJECT_NOT_FOUND;
	if (not_writer(o, client))
		return MC_STORE_ILLEGAL_CLIENT;
	if (o->state != MST_PROCESSING)
		return MC_STORE_INVALID_WRITE;
	mst_objmap_del(&m->objs, o);
	mst_object_free(m, o);
	return 0;
}

static int readable(struct master *m, const char *key, size_t key_len,
		    struct mst_object **out)
{
	struct mst_object *o = mst_objmap_get(&m->objs, key, key_len);

	if (!o)
		return MC_STORE_OBJECT_NOT_FOUND;
	if (o->state != MST_COMPLETE || !live_replicas(o))
		return MC_STORE_REPLICA_IS_NOT_READY;
	*out = o;
	return 0;
}

int mst_get(struct master *m, const char *key, size_t key_len, bool hold,
	    struct mst_object **out, uint64_t *hold_id)
{
	uint64_t now = mst_now();
	struct mst_object *o;
	int rc = readable(m, key, key_len, &o);

	if (rc)
		return rc;
	o->read_lease_until = now + m->cfg.lease_ttl_ms;
	o->lease_until = max_u64(o->lease_until, o->read_lease_until);
	o->last_access = now;
	mst_lru_touch(m, o);
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

int mst_exist(struct master *m, const char *key, size_t key_len)
{
	struct mst_object *o;

	if (readable(m, key, key_len, &o))
		return 0;
	o->lease_until =
		max_u64(o->lease_until, mst_now() + m->cfg.lease_ttl_ms);
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
	int rc = mst_db_del_object(m->db, o->key, o->key_len);

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
	mst_feed_emit(m, ev_type, o->key, o->key_len, NULL, 0);
	unlink_obj(m, o);
}

int mst_rename(struct master *m, const char *from, size_t from_len,
	       const char *to, size_t to_len, bool no_replace)
{
	struct mst_object *src, *dst, *n;
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
	n = mst_object_new(to, to_len, src->n_repl);
	if (!n)
		return MC_STORE_INTERNAL_ERROR;
	{
		struct mst_replica *own = n->repl;

		memcpy(n, src, offsetof(struct mst_object, repl));
		n->repl = own;
		memcpy(n->repl, src->repl, src->n_repl * sizeof(*n->repl));
	}
	n->lru_prev = n->lru_next = NULL;
	rc = mst_db_begin(m->db);
	if (!rc && dst)
		rc = mst_unlink_prepare(m, dst);
	if (!rc)
		rc = mst_db_del_object(m->db, from, from_len);
	if (!rc)
		rc = mst_db_put_object(m->db, n);
	if (!rc)
		rc = mst_db_commit(m->db);
	else
		mst_db_rollback(m->db);
	if (rc) {
		if (dst)
			mst_unlink_undo(dst);
		free(n);
		return rc;
	}
	if (dst)
		unlink_obj(m, dst);
	/* n takes over src's replicas, holds and recency. */
	mst_objmap_del(&m->objs, src);
	mst_lru_del(m, src);
	for (struct mst_hold *h = m->holds; h; h = h->next)
		if (h->obj == src)
			h->obj = n;
	free(src);
	mst_objmap_add(&m->objs, n);
	mst_lru_add(m, n);
	mst_feed_emit(m, MCRPC__EVENT_TYPE__EV_RENAME, from, from_len, to,
		      to_len);
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
