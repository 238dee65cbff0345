/* SPDX-License-Identifier: Apache-2.0 */
/*
 * RPC method handlers (see service.h and common/rpc/master.proto). Each
 * handler runs under the master lock and builds its response in an arena;
 * the frame is packed before the lock is released, so responses may point
 * into the master's state.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "arena.h"
#include "ckpt.h"
#include "db.h"
#include "dirs.h"
#include "evict.h"
#include "groups.h"
#include "master.h"
#include "mc_log.h"
#include "mc_time.h"
#include "mooncake/mc_err.h"
#include "mooncake/mc_version.h"
#include "mooncake/store_fs.h"
#include "mst_util.h"
#include "noroom.h"
#include "objects.h"
#include "objmap.h"
#include "place.h"
#include "segments.h"
#include "service.h"
#include "slots.h"
#include "txn.h"

struct call {
	struct master *m;
	struct arena a;
	const ProtobufCMessage *req;
	ProtobufCMessage *resp;
	size_t method_row;
	uint64_t items, failed_items;
};

/* PutStartRequest.unreachable entries read (the rest ignored). */
#define MAX_UNREACHABLE 16

#define NEW(c, type, init)                                     \
	({                                                     \
		type *p_ = arena_alloc(&(c)->a, sizeof(type)); \
		if (p_)                                        \
			init(p_);                              \
		p_;                                            \
	})

#define ARRAY(c, type, n) \
	((type *)arena_alloc(&(c)->a, sizeof(type) * ((n) ? (n) : 1)))

static bool id_ok(const ProtobufCBinaryData *d)
{
	return d->len == MST_ID_LEN && d->data;
}

static void seg_desc(const Mcrpc__Segment *s, struct mst_seg_desc *d)
{
	*d = (struct mst_seg_desc){
		.id = s->id.len == MST_ID_LEN ? s->id.data : NULL,
		.name = s->name,
		.endpoint = s->endpoint,
		.protocol = s->protocol,
		.host_id = s->host_id,
		.base = s->base_addr,
		.size = s->size,
	};
}

static Mcrpc__Segment *seg_msg(struct call *c, const struct mst_segment *s)
{
	Mcrpc__Segment *g = NEW(c, Mcrpc__Segment, mcrpc__segment__init);

	if (!g)
		return NULL;
	g->id.data = (uint8_t *)s->id;
	g->id.len = MST_ID_LEN;
	g->name = s->name;
	g->endpoint = s->endpoint;
	g->base_addr = s->base;
	g->size = s->size;
	g->protocol = s->protocol;
	g->host_id = s->host_id;
	return g;
}

/* ---- liveness and segments ---------------------------------------------- */

static int h_service_ready(struct call *c)
{
	Mcrpc__ServiceReadyResponse *r =
		NEW(c, Mcrpc__ServiceReadyResponse,
		    mcrpc__service_ready_response__init);

	if (!r)
		return -ENOMEM;
	r->version = (char *)MC_VERSION_STRING;
	r->protocol_version = MC_RPC_VERSION;
	r->max_key_length = c->m->cfg.max_key_len;
	r->scoped_remove = true;
	c->resp = &r->base;
	return 0;
}

static int h_ping(struct call *c)
{
	const Mcrpc__PingRequest *q = (const void *)c->req;
	Mcrpc__PingResponse *r =
		NEW(c, Mcrpc__PingResponse, mcrpc__ping_response__init);
	struct mst_client *cl;
	uint64_t now;

	if (!r)
		return -ENOMEM;
	c->resp = &r->base;
	r->view_version = c->m->view_version;
	r->run = c->m->run;
	now = mst_now();
	r->fence_ms =
		c->m->run_fence_until > now ? c->m->run_fence_until - now : 0;
	if (!id_ok(&q->client_id)) {
		r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	cl = mst_client_find(c->m, q->client_id.data);
	if (cl) {
		cl->last_seen = mst_now();
		mst_note_reachable(c->m, cl);
	}
	/* Made anew by a checkpoint call after it expired: its segment is
	 * gone until it re-mounts (it stayed out of the pool for good). */
	r->client_status = cl && cl->joined ? 1 : 2;
	/* A holder of checkpoint shards from before a restart is back. */
	if (!cl && mst_ckpt_restored_client(c->m, q->client_id.data))
		cl = mst_client_touch(c->m, q->client_id.data);
	if (cl && q->leaving)
		mst_client_leave(c->m, cl);
	return 0;
}

static int h_mount(struct call *c)
{
	const Mcrpc__MountSegmentRequest *q = (const void *)c->req;
	Mcrpc__MountSegmentResponse *r =
		NEW(c, Mcrpc__MountSegmentResponse,
		    mcrpc__mount_segment_response__init);
	struct mst_seg_desc d;

	if (!r)
		return -ENOMEM;
	c->resp = &r->base;
	if (!id_ok(&q->client_id) || !q->segment) {
		r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	seg_desc(q->segment, &d);
	r->code = mst_mount(c->m, q->client_id.data, &d);
	return 0;
}

static int h_remount(struct call *c)
{
	const Mcrpc__ReMountSegmentRequest *q = (const void *)c->req;
	Mcrpc__ReMountSegmentResponse *r =
		NEW(c, Mcrpc__ReMountSegmentResponse,
		    mcrpc__re_mount_segment_response__init);
	struct mst_client *cl;

	if (!r)
		return -ENOMEM;
	c->resp = &r->base;
	if (!id_ok(&q->client_id)) {
		r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	cl = mst_client_touch(c->m, q->client_id.data);
	if (!cl)
		return -ENOMEM;
	cl->joined = true;
	r->results = ARRAY(c, int32_t, q->n_segments);
	r->objects = ARRAY(c, uint64_t, q->n_segments);
	if (!r->results || !r->objects)
		return -ENOMEM;
	r->n_results = r->n_objects = q->n_segments;
	for (size_t i = 0; i < q->n_segments; i++) {
		struct mst_seg_desc d;
		seg_desc(q->segments[i], &d);
		r->results[i] = mst_remount(c->m, q->client_id.data, &d,
					    &r->objects[i]);
	}
	return 0;
}

static int h_unmount(struct call *c)
{
	const Mcrpc__UnmountSegmentRequest *q = (const void *)c->req;
	Mcrpc__UnmountSegmentResponse *r =
		NEW(c, Mcrpc__UnmountSegmentResponse,
		    mcrpc__unmount_segment_response__init);

	if (!r)
		return -ENOMEM;
	c->resp = &r->base;
	if (!id_ok(&q->client_id) || !id_ok(&q->segment_id)) {
		r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	r->code = mst_unmount(c->m, q->client_id.data, q->segment_id.data);
	return 0;
}

static int h_get_status(struct call *c)
{
	struct master *m = c->m;
	Mcrpc__GetStatusResponse *r = NEW(c, Mcrpc__GetStatusResponse,
					  mcrpc__get_status_response__init);
	size_t n = 0;

	if (!r)
		return -ENOMEM;
	c->resp = &r->base;
	for (struct mst_segment *s = m->segments; s; s = s->next)
		n++;
	r->segments = ARRAY(c, Mcrpc__SegmentStatus *, n);
	if (!r->segments)
		return -ENOMEM;
	for (struct mst_segment *s = m->segments; s; s = s->next) {
		Mcrpc__SegmentStatus *st = NEW(c, Mcrpc__SegmentStatus,
					       mcrpc__segment_status__init);
		if (!st || !(st->segment = seg_msg(c, s)))
			return -ENOMEM;
		st->used = mc_alloc_used(s->alloc);
		st->objects = s->n_replicas;
		st->mounted = s->owner != NULL;
		if (s->owner) {
			st->client_id.data = s->owner->id;
			st->client_id.len = MST_ID_LEN;
		}
		r->segments[r->n_segments++] = st;
	}
	r->capacity = m->capacity;
	r->allocated = m->allocated;
	r->keys = m->n_complete;
	r->clients = (uint32_t)mst_client_count(m);
	r->evicted_keys = m->stats.evicted_keys;
	r->version = (char *)MC_VERSION_STRING;
	r->uptime_ms = mst_now() - m->started;
	for (struct mst_hold *h = m->holds; h; h = h->next)
		r->holds++;
	for (struct mst_object *o = m->orphans; o; o = o->onext) {
		r->orphans++;
		r->orphan_bytes += o->size * o->n_repl;
	}
	if (m->quarantine_until > mst_now())
		r->quarantine_left_ms = m->quarantine_until - mst_now();
	return 0;
}

/* ---- put ------------------------------------------------------------------ */

static bool single_ok(struct call *c, size_t n)
{
	const struct mc_rpc_method *md = mc_rpc_method_at(c->method_row);

	return md->batch || n == 1;
}

static Mcrpc__ReplicaList *replica_list(struct call *c,
					const struct mst_object *o, bool live)
{
	Mcrpc__ReplicaList *l =
		NEW(c, Mcrpc__ReplicaList, mcrpc__replica_list__init);

	if (!l)
		return NULL;
	if (!o)
		return l;
	l->replicas = ARRAY(c, Mcrpc__Replica *, o->n_repl);
	if (!l->replicas)
		return NULL;
	l->size = o->size;
	for (unsigned i = 0; i < o->n_repl; i++) {
		const struct mst_replica *rp = &o->repl[i];
		Mcrpc__Replica *x;
		if (!rp->seg || !rp->blk || (live && !mst_replica_live(rp)))
			continue;
		x = NEW(c, Mcrpc__Replica, mcrpc__replica__init);
		if (!x)
			return NULL;
		x->endpoint = rp->seg->endpoint;
		x->address = mst_replica_addr(rp);
		x->size = o->size;
		x->protocol = rp->seg->protocol;
		x->segment_id.data = (uint8_t *)rp->seg->id;
		x->segment_id.len = MST_ID_LEN;
		x->host_id = rp->seg->host_id;
		x->status = o->state == MST_COMPLETE ? 3 : 2;
		l->replicas[l->n_replicas++] = x;
	}
	return l;
}

/* ---- attributes ------------------------------------------------------- */

/* The message of a (NULL: none). */
static Mcrpc__Attr *attr_msg(struct call *c, const mst_attr_t *a)
{
	Mcrpc__Attr *x;

	if (!a || !a->mode)
		return NULL;
	x = NEW(c, Mcrpc__Attr, mcrpc__attr__init);
	if (x)
		mc_rpc_attr_msg(a, x);
	return x;
}

/* Fill r->attr, or fail the call for want of memory. */
#define SET_ATTR(c, r, a)                                             \
	do {                                                          \
		const mst_attr_t *a_ = (a);                           \
		if (a_ && a_->mode && !((r)->attr = attr_msg(c, a_))) \
			return -ENOMEM;                               \
	} while (0)

/* HA, just after taking over: some segment still waits for its owner,
 * who re-mounts within a ping. */
static bool owners_due(const struct master *m)
{
	if (!mst_ha_settling(m))
		return false;
	for (const struct mst_segment *s = m->segments; s; s = s->next)
		if (!s->owner)
			return true;
	return false;
}

/* A put that finds no room evicts for it (the policy, evict.c) and
 * tries once more. */
static int put_start(struct call *c, const uint8_t *client, const char *key,
		     uint64_t size, const struct mst_put_cfg *pc,
		     struct mst_object **o)
{
	size_t len = strlen(key);
	int rc = mst_put_start(c->m, client, key, len, size, pc, o);

	if (rc == MC_STORE_NO_AVAILABLE_HANDLE && mst_evict_for_put(c->m, size))
		rc = mst_put_start(c->m, client, key, len, size, pc, o);
	if (rc == MC_STORE_NO_AVAILABLE_HANDLE) {
		c->m->stats.alloc_failures++;
		mst_no_room_note(c->m, size);
	}
	return rc;
}

/* group_ids: none, one for all keys, or one per key, none too long. */
static bool groups_ok(const Mcrpc__PutStartRequest *q)
{
	if (q->n_group_ids > 1 && q->n_group_ids != q->n_keys)
		return false;
	for (size_t i = 0; i < q->n_group_ids; i++)
		if (strlen(q->group_ids[i]) > MST_GROUP_ID_MAX)
			return false;
	return true;
}

/* The most slots one call may ask for. */
#define RESERVE_MAX 16

/* Up to want slots of size for client, as messages in *slots. */
static int grant(struct call *c, const uint8_t *client, uint64_t size,
		 uint32_t want, Mcrpc__Slot ***slots, size_t *n_slots)
{
	struct mst_object *got[RESERVE_MAX];
	unsigned n;

	n = mst_slots_grant(c->m, client, size,
			    want < RESERVE_MAX ? want : RESERVE_MAX, got);
	if (!n)
		return 0;
	*slots = ARRAY(c, Mcrpc__Slot *, n);
	if (!*slots)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		Mcrpc__Slot *x = NEW(c, Mcrpc__Slot, mcrpc__slot__init);

		if (!x || !(x->space = replica_list(c, got[i], false)))
			return -ENOMEM;
		x->id = mst_slot_id(got[i]);
		x->use_ms = mst_slot_use_ms(c->m);
		(*slots)[(*n_slots)++] = x;
	}
	return 0;
}

/* A PutStart whose put may also reserve slots (PutStartRequest.reserve):
 * one key, one replica, nothing a slot would not carry. */
static bool plain_put(const Mcrpc__PutStartRequest *q)
{
	const Mcrpc__ReplicateConfig *k = q->config;

	return q->n_keys == 1 && !q->n_group_ids &&
	       !(q->attr && q->attr->mode) &&
	       (!k || (k->replica_num <= 1 && !k->with_soft_pin &&
		       !k->with_hard_pin && !k->n_preferred_segments));
}

static int h_put_start(struct call *c)
{
	const Mcrpc__PutStartRequest *q = (const void *)c->req;
	Mcrpc__PutStartResponse *r = NEW(c, Mcrpc__PutStartResponse,
					 mcrpc__put_start_response__init);
	struct mst_put_cfg pc = { 0 };
	mst_attr_t attr;

	if (!r)
		return -ENOMEM;
	c->resp = &r->base;
	if (!id_ok(&q->client_id) || q->n_sizes != q->n_keys ||
	    !single_ok(c, q->n_keys)) {
		r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	_Static_assert(MST_MAX_REPLICAS == MOONCAKE_MAX_REPLICAS,
		       "the master's replica limit is the API's");
	if (q->config && q->config->replica_num > MST_MAX_REPLICAS) {
		r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	if (q->config) {
		pc.replicas = q->config->replica_num;
		pc.hard_pin = q->config->with_hard_pin;
		pc.soft_pin = q->config->with_soft_pin;
		pc.soft_pin_ttl_ms = q->config->soft_pin_ttl_ms;
		pc.preferred =
			(const char *const *)q->config->preferred_segments;
		pc.n_preferred = q->config->n_preferred_segments;
	}
	pc.publish = q->publish;
	/* Endpoints its writer could not reach: not placed there (place.c). */
	pc.avoid = (const char *const *)q->unreachable;
	pc.n_avoid = q->n_unreachable < MAX_UNREACHABLE ? q->n_unreachable :
							  MAX_UNREACHABLE;
	for (size_t i = 0; i < pc.n_avoid; i++)
		mst_note_unreachable(c->m, pc.avoid[i]);
	if (q->attr && q->attr->mode) {
		attr = mc_rpc_attr_of(q->attr);
		pc.attr = &attr;
	}
	if (!groups_ok(q)) {
		r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	/* Just after a takeover the segments' owners re-mount (within a
	 * ping): placing now would find the pool empty, or crowd the
	 * segments already back. The whole call is asked again. */
	if (owners_due(c->m)) {
		r->code = MC_STORE_UNAVAILABLE_IN_CURRENT_MODE;
		return 0;
	}
	r->results = ARRAY(c, Mcrpc__ReplicaList *, q->n_keys);
	if (!r->results)
		return -ENOMEM;
	for (size_t i = 0; i < q->n_keys; i++) {
		struct mst_object *o = NULL;
		int rc;
		if (q->n_group_ids) {
			pc.group = q->group_ids[q->n_group_ids == 1 ? 0 : i];
			pc.group_len = strlen(pc.group);
		}
		rc = put_start(c, q->client_id.data, q->keys[i], q->sizes[i],
			       &pc, &o);
		Mcrpc__ReplicaList *l = replica_list(c, rc ? NULL : o, false);
		if (!l)
			return -ENOMEM;
		l->code = rc;
		l->in_progress = rc == MC_STORE_OBJECT_ALREADY_EXISTS &&
				 o->state != MST_COMPLETE;
		c->failed_items += rc != 0;
		r->results[r->n_results++] = l;
	}
	c->items += q->n_keys;
	r->run = c->m->run;
	if (q->reserve && plain_put(q) && !r->results[0]->code)
		return grant(c, q->client_id.data, q->sizes[0], q->reserve,
			     &r->slots, &r->n_slots);
	return 0;
}

static Mcrpc__KeysResponse *keys_resp(struct call *c, size_t n)
{
	Mcrpc__KeysResponse *r =
		NEW(c, Mcrpc__KeysResponse, mcrpc__keys_response__init);

	if (!r)
		return NULL;
	r->results = ARRAY(c, Mcrpc__KeyResult *, n);
	if (!r->results)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		r->results[i] =
			NEW(c, Mcrpc__KeyResult, mcrpc__key_result__init);
		if (!r->results[i])
			return NULL;
	}
	r->n_results = n;
	c->resp = &r->base;
	return r;
}

static void count_results(struct call *c, Mcrpc__KeysResponse *r)
{
	c->items += r->n_results;
	for (size_t i = 0; i < r->n_results; i++)
		c->failed_items += r->results[i]->code != 0;
}

/* A batch of PutEnds or Removes in one transaction (mst_txn_run): a key's
 * own answer is its result; a failed record aborts them all. */
struct keys_txn {
	struct call *c;
	const Mcrpc__KeysRequest *q;
	Mcrpc__KeysResponse *r;
	struct mst_object **objs;
};

static int end_prepare(void *arg, size_t i)
{
	struct keys_txn *t = arg;
	const Mcrpc__KeysRequest *q = t->q;
	int k = mst_put_end_prepare(
		t->c->m, id_ok(&q->client_id) ? q->client_id.data : NULL,
		q->keys[i], strlen(q->keys[i]), &t->objs[i]);

	t->r->results[i]->code = k;
	return k == MC_STORE_INTERNAL_ERROR ? k : 0;
}

/* Not recorded: the put is given up (mst_put_end_fail), so its key is
 * free again and nothing claims bytes the record does not have. */
static void end_finish(void *arg, size_t i, bool committed)
{
	struct keys_txn *t = arg;
	struct mst_object *o = t->objs[i];
	const char *key = t->q->keys[i];

	if (o && o->state == MST_ENDING) {
		if (committed) {
			mst_put_end_apply(t->c->m, o);
			t->r->results[i]->version = o->version;
			return;
		}
		mst_put_end_fail(t->c->m, o);
		t->r->results[i]->code = MC_STORE_INTERNAL_ERROR;
	} else if (!committed && !t->r->results[i]->code) {
		/* Unprepared, or a repeat of a key given up above: success
		 * only for an object that was complete already. */
		o = mst_objmap_get(&t->c->m->objs, key, strlen(key));
		if (!o || o->state != MST_COMPLETE)
			t->r->results[i]->code = MC_STORE_INTERNAL_ERROR;
	}
}

static int h_put_end(struct call *c)
{
	const Mcrpc__KeysRequest *q = (const void *)c->req;
	struct keys_txn t = { .c = c, .q = q, .r = keys_resp(c, q->n_keys) };

	if (!t.r)
		return -ENOMEM;
	if (!single_ok(c, q->n_keys)) {
		t.r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	t.objs = ARRAY(c, struct mst_object *, q->n_keys);
	if (!t.objs)
		return -ENOMEM;
	if (mst_txn_run(c->m, q->n_keys, end_prepare, end_finish, &t))
		t.r->code = MC_STORE_INTERNAL_ERROR;
	count_results(c, t.r);
	return 0;
}

/* PutCommit's one key in its transaction, as a PutEnd's (end_prepare,
 * end_finish). */
struct commit_txn {
	struct master *m;
	const uint8_t *client;
	const char *key;
	struct mst_object *o;
	int code;
	bool freed; /* o given up in the rollback */
};

static int commit_prepare(void *arg, size_t i)
{
	struct commit_txn *t = arg;

	(void)i;
	t->code = mst_put_end_prepare(t->m, t->client, t->key, strlen(t->key),
				      &t->o);
	return t->code == MC_STORE_INTERNAL_ERROR ? t->code : 0;
}

static void commit_finish(void *arg, size_t i, bool committed)
{
	struct commit_txn *t = arg;

	(void)i;
	if (t->o && t->o->state == MST_ENDING) {
		if (committed) {
			mst_put_end_apply(t->m, t->o);
			return;
		}
		mst_put_end_fail(t->m, t->o);
		t->freed = true;
	}
	if (!committed && !t->code)
		t->code = MC_STORE_INTERNAL_ERROR;
}

static int h_put_commit(struct call *c)
{
	const Mcrpc__PutCommitRequest *q = (const void *)c->req;
	Mcrpc__PutCommitResponse *r = NEW(c, Mcrpc__PutCommitResponse,
					  mcrpc__put_commit_response__init);
	struct commit_txn t = { .m = c->m, .key = q->key };
	struct mst_object *slot, *o = NULL;
	uint64_t size;
	int rc;

	if (!r)
		return -ENOMEM;
	c->resp = &r->base;
	r->run = c->m->run;
	if (!id_ok(&q->client_id)) {
		r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	t.client = q->client_id.data;
	for (size_t i = 0; i < q->n_release; i++)
		mst_slot_release(c->m, t.client, q->release[i]);
	if (!*q->key)
		return 0;
	c->items = 1;
	slot = mst_slot_take(c->m, t.client, q->slot);
	if (!slot) {
		r->code = MC_STORE_INVALID_PARAMS;
		c->failed_items = 1;
		return 0;
	}
	size = slot->size;
	rc = mst_put_commit(c->m, t.client, q->key, strlen(q->key), slot, &o);
	if (rc) {
		r->code = rc;
		r->in_progress = rc == MC_STORE_OBJECT_ALREADY_EXISTS && o &&
				 o->state != MST_COMPLETE;
		mst_slot_put_back(c->m, slot);
		c->failed_items = 1;
		return 0;
	}
	if (mst_txn_run(c->m, 1, commit_prepare, commit_finish, &t) && !t.code)
		t.code = MC_STORE_INTERNAL_ERROR;
	r->code = t.code;
	if (t.code) {
		/* Not complete (a replica's segment went, or no record):
		 * given up, its memory with it. */
		if (!t.freed && o->state == MST_PROCESSING)
			mst_put_end_fail(c->m, o);
		c->failed_items = 1;
		return 0;
	}
	r->version = o->version;
	c->m->stats.slot_commits++;
	return grant(c, t.client, size, q->reserve, &r->slots, &r->n_slots);
}

static int h_put_revoke(struct call *c)
{
	const Mcrpc__KeysRequest *q = (const void *)c->req;
	Mcrpc__KeysResponse *r = keys_resp(c, q->n_keys);

	if (!r)
		return -ENOMEM;
	if (!single_ok(c, q->n_keys)) {
		r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	for (size_t i = 0; i < q->n_keys; i++)
		r->results[i]->code = mst_put_revoke(
			c->m, id_ok(&q->client_id) ? q->client_id.data : NULL,
			q->keys[i], strlen(q->keys[i]));
	count_results(c, r);
	return 0;
}

/* ---- get and exist -------------------------------------------------------- */

static int h_get_replica_list(struct call *c)
{
	const Mcrpc__KeysRequest *q = (const void *)c->req;
	Mcrpc__GetReplicaListResponse *r =
		NEW(c, Mcrpc__GetReplicaListResponse,
		    mcrpc__get_replica_list_response__init);

	if (!r)
		return -ENOMEM;
	c->resp = &r->base;
	if (!single_ok(c, q->n_keys) ||
	    (q->n_read_age_ms &&
	     (q->n_read_age_ms != q->n_keys || q->hold || q->touch))) {
		r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	r->results = ARRAY(c, Mcrpc__ReplicaList *, q->n_keys);
	if (!r->results)
		return -ENOMEM;
	for (size_t i = 0; i < q->n_keys; i++) {
		struct mst_object *o = NULL;
		uint64_t hold = 0, lease = 0, age;
		size_t len;
		int rc;

		if (i % MST_PREFETCH_MAX == 0 && q->n_keys > 1)
			mst_objmap_prefetch(&c->m->objs, &q->keys[i],
					    q->n_keys - i);
		age = q->n_read_age_ms ? q->read_age_ms[i] : 0;
		len = strlen(q->keys[i]);
		rc = q->touch ? mst_touch(c->m, q->keys[i], len, &o) :
				mst_get(c->m, q->keys[i], len, q->hold, age, &o,
					&hold, &lease);
		if (rc == MC_STORE_UNAVAILABLE_IN_CURRENT_MODE) {
			/* HA takeover: ask again shortly (the whole call). */
			r->code = rc;
			r->n_results = 0;
			return 0;
		}
		Mcrpc__ReplicaList *l =
			replica_list(c, rc || q->touch ? NULL : o, true);
		if (!l)
			return -ENOMEM;
		l->code = rc;
		l->size = rc ? 0 : o->size;
		l->lease_ttl_ms = rc ? 0 : lease;
		l->version = rc ? 0 : o->version;
		l->hold_id = hold;
		l->hold_ttl_ms = hold ? c->m->cfg.hold_ttl_ms : 0;
		c->failed_items += rc != 0;
		r->results[r->n_results++] = l;
	}
	c->items += q->n_keys;
	return 0;
}

static int h_exist(struct call *c)
{
	const Mcrpc__KeysRequest *q = (const void *)c->req;
	Mcrpc__ExistResponse *r =
		NEW(c, Mcrpc__ExistResponse, mcrpc__exist_response__init);

	if (!r)
		return -ENOMEM;
	c->resp = &r->base;
	if (!single_ok(c, q->n_keys)) {
		r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	r->results = ARRAY(c, int32_t, q->n_keys);
	if (!r->results)
		return -ENOMEM;
	r->n_results = q->n_keys;
	for (size_t i = 0; i < q->n_keys; i++) {
		if (i % MST_PREFETCH_MAX == 0 && q->n_keys > 1)
			mst_objmap_prefetch(&c->m->objs, &q->keys[i],
					    q->n_keys - i);
		r->results[i] = mst_exist(c->m, q->keys[i], strlen(q->keys[i]));
	}
	c->items += q->n_keys;
	return 0;
}

static int h_get_size(struct call *c)
{
	const Mcrpc__KeysRequest *q = (const void *)c->req;
	Mcrpc__GetSizeResponse *r =
		NEW(c, Mcrpc__GetSizeResponse, mcrpc__get_size_response__init);

	if (!r)
		return -ENOMEM;
	c->resp = &r->base;
	r->sizes = ARRAY(c, int64_t, q->n_keys);
	if (!r->sizes)
		return -ENOMEM;
	r->n_sizes = q->n_keys;
	for (size_t i = 0; i < q->n_keys; i++) {
		struct mst_object *o;
		int rc = mst_stat(c->m, q->keys[i], strlen(q->keys[i]), &o);
		r->sizes[i] = rc ? rc : (int64_t)o->size;
	}
	c->items += q->n_keys;
	return 0;
}

/* ---- remove --------------------------------------------------------------- */

static int remove_prepare(void *arg, size_t i)
{
	struct keys_txn *t = arg;
	int k = mst_remove_prepare(t->c->m, t->q->keys[i],
				   strlen(t->q->keys[i]), t->q->force,
				   &t->objs[i]);

	t->r->results[i]->code = k;
	return k == MC_STORE_INTERNAL_ERROR ? k : 0;
}

static void remove_finish(void *arg, size_t i, bool committed)
{
	struct keys_txn *t = arg;
	struct mst_object *o = t->objs[i];

	if (committed) {
		if (o && o->state == MST_REMOVING)
			mst_remove_apply(t->c->m, o,
					 MCRPC__EVENT_TYPE__EV_REMOVE);
		return;
	}
	if (o && o->state == MST_REMOVING)
		mst_remove_undo(t->c->m, o);
	if (!t->r->results[i]->code) /* prepared, or never reached */
		t->r->results[i]->code = MC_STORE_INTERNAL_ERROR;
}

static int h_remove(struct call *c)
{
	const Mcrpc__KeysRequest *q = (const void *)c->req;
	struct keys_txn t = { .c = c, .q = q, .r = keys_resp(c, q->n_keys) };

	if (!t.r)
		return -ENOMEM;
	if (!single_ok(c, q->n_keys)) {
		t.r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	t.objs = ARRAY(c, struct mst_object *, q->n_keys);
	if (!t.objs)
		return -ENOMEM;
	if (mst_txn_run(c->m, q->n_keys, remove_prepare, remove_finish, &t))
		t.r->code = MC_STORE_INTERNAL_ERROR;
	if (!mc_rpc_method_at(c->method_row)->batch && !t.r->code)
		t.r->code = t.r->results[0]->code;
	count_results(c, t.r);
	return 0;
}

/* key (len bytes) starts with the pl bytes of prefix ("" is everything). */
static bool under(const char *key, size_t len, const char *prefix, size_t pl)
{
	return !pl || (len >= pl && !memcmp(key, prefix, pl));
}

static int h_remove_all(struct call *c)
{
	const Mcrpc__RemoveAllRequest *q = (const void *)c->req;
	Mcrpc__CountResponse *r =
		NEW(c, Mcrpc__CountResponse, mcrpc__count_response__init);
	bool by_regex = mc_rpc_method_at(c->method_row)->id ==
			MCRPC__METHOD__REMOVE_BY_REGEX;
	pcre2_code *re = NULL;
	pcre2_match_data *md = NULL;
	struct master *m = c->m;
	uint64_t now = mst_now(), n = 0, cap = 0;
	struct mst_object **v = NULL;
	size_t pl = q->prefix ? strlen(q->prefix) : 0;
	size_t xl = q->exclude_prefix ? strlen(q->exclude_prefix) : 0;

	if (!r)
		return -ENOMEM;
	c->resp = &r->base;
	if (by_regex) {
		int ec;
		PCRE2_SIZE eo;
		if (!q->regex || !*q->regex) {
			r->code = MC_STORE_INVALID_PARAMS;
			return 0;
		}
		re = pcre2_compile((PCRE2_SPTR)q->regex, PCRE2_ZERO_TERMINATED,
				   0, &ec, &eo, NULL);
		if (!re) {
			r->code = MC_STORE_INVALID_PARAMS;
			return 0;
		}
		md = pcre2_match_data_create_from_pattern(re, NULL);
		if (!md) {
			pcre2_code_free(re);
			return -ENOMEM;
		}
	}
	for (struct mst_object *o = m->lru_head; o; o = o->lru_next) {
		if (!q->force && mst_object_leased(o, now))
			continue;
		/* A tenant's keys only (matched without the prefix), or all
		 * but the tenants' (docs/design.md "Tenants"). */
		if (!under(o->key, o->key_len, q->prefix, pl) ||
		    (xl && under(o->key, o->key_len, q->exclude_prefix, xl)))
			continue;
		if (re && pcre2_match(re, (PCRE2_SPTR)o->key + pl,
				      o->key_len - pl, 0, 0, md, NULL) < 0)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 1024;
			struct mst_object **nv = realloc(v, nc * sizeof(*v));
			if (!nv) {
				free(v);
				pcre2_match_data_free(md);
				pcre2_code_free(re);
				return -ENOMEM;
			}
			v = nv;
			cap = nc;
		}
		v[n++] = o;
	}
	pcre2_match_data_free(md);
	pcre2_code_free(re);
	if (mst_drop_objects(m, v, n, MCRPC__EVENT_TYPE__EV_REMOVE))
		r->code = MC_STORE_INTERNAL_ERROR;
	else
		r->count = n;
	free(v);
	return 0;
}

/* ---- filesystem support --------------------------------------------------- */

/* Stat of the directory key/: a record, or anything under it. */
static int stat_dir(struct call *c, Mcrpc__StatResponse *r, const char *key)
{
	size_t kl = strlen(key);
	char *path = arena_alloc(&c->a, kl + 2);
	mst_attr_t a;
	int rc;

	if (!path)
		return -ENOMEM;
	memcpy(path, key, kl);
	memcpy(path + kl, "/", 2);
	rc = mst_dir_record(c->m, path, kl + 1, &a);
	if (rc == 1) {
		SET_ATTR(c, r, &a);
	} else if (rc == 0) {
		rc = mst_dir_has_entries(c->m, path, kl + 1);
		if (rc == 0)
			rc = MC_STORE_OBJECT_NOT_FOUND;
	}
	if (rc == 1 && mst_dir_subdirs(c->m, path, kl + 1, &r->subdirs))
		r->subdirs = 0; /* the count is a hint: the stat stands */
	r->code = rc < 0 ? rc : 0;
	r->is_dir = rc == 1;
	return 0;
}

static int h_stat(struct call *c)
{
	const Mcrpc__KeysRequest *q = (const void *)c->req;
	Mcrpc__StatResponse *r =
		NEW(c, Mcrpc__StatResponse, mcrpc__stat_response__init);
	uint64_t now = mst_now(), wall = mst_wall();
	struct mst_object *o;
	Mcrpc__ReplicaList *l;

	if (!r)
		return -ENOMEM;
	c->resp = &r->base;
	if (q->n_keys != 1 || (!*q->keys[0] && !q->dir)) {
		r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	r->code = mst_stat(c->m, q->keys[0], strlen(q->keys[0]), &o);
	if (r->code == MC_STORE_OBJECT_NOT_FOUND && q->dir)
		return stat_dir(c, r, q->keys[0]);
	if (r->code)
		return 0;
	l = replica_list(c, o, true);
	if (!l)
		return -ENOMEM;
	r->size = o->size;
	r->replicas = (uint32_t)l->n_replicas;
	r->replica_list = l->replicas;
	r->n_replica_list = l->n_replicas;
	r->lease_ms = o->lease_until > now ? o->lease_until - now : 0;
	r->holds = o->holds;
	r->hard_pin = o->hard_pin;
	r->soft_pin_ms = o->soft_pin_until > wall ? o->soft_pin_until - wall :
						    0;
	r->mtime_ms = MST_VERSION_MS(o->version);
	r->version = o->version;
	SET_ATTR(c, r, o->attr);
	return 0;
}

struct list_ctx {
	struct call *c;
	Mcrpc__ListResponse *r;
	bool oom;
};

static void list_cb(void *arg, const struct mst_db_entry *e)
{
	struct list_ctx *lc = arg;
	Mcrpc__ListEntry *x =
		NEW(lc->c, Mcrpc__ListEntry, mcrpc__list_entry__init);

	if (!x || !(x->name = arena_strndup(&lc->c->a, e->name, e->name_len))) {
		lc->oom = true;
		return;
	}
	x->size = e->size;
	x->is_prefix = e->is_prefix;
	x->mtime_ms = MST_VERSION_MS(e->version);
	x->version = e->version;
	if (e->attr && !(x->attr = attr_msg(lc->c, e->attr))) {
		lc->oom = true;
		return;
	}
	lc->r->entries[lc->r->n_entries++] = x;
}

static int h_list(struct call *c)
{
	const Mcrpc__ListRequest *q = (const void *)c->req;
	Mcrpc__ListResponse *r =
		NEW(c, Mcrpc__ListResponse, mcrpc__list_response__init);
	unsigned limit = q->limit ? q->limit : 1000;
	struct list_ctx lc = { .c = c, .r = r };
	bool trunc = false;
	const char *p = q->prefix ? q->prefix : "";
	const char *d = q->delimiter ? q->delimiter : "";
	const char *s = q->start_after ? q->start_after : "";

	if (!r)
		return -ENOMEM;
	c->resp = &r->base;
	if (limit > 100000)
		limit = 100000;
	r->entries = ARRAY(c, Mcrpc__ListEntry *, limit);
	if (!r->entries)
		return -ENOMEM;
	r->code = mst_db_list(c->m->db, p, strlen(p), d, strlen(d), s,
			      strlen(s), limit, q->dirs, list_cb, &lc, &trunc);
	if (lc.oom)
		return -ENOMEM;
	r->truncated = trunc;
	return 0;
}

static int h_lease(struct call *c)
{
	const Mcrpc__LeaseRequest *q = (const void *)c->req;
	Mcrpc__KeysResponse *r = keys_resp(c, q->n_hold_ids);
	bool renew = mc_rpc_method_at(c->method_row)->id ==
		     MCRPC__METHOD__LEASE_RENEW;

	if (!r)
		return -ENOMEM;
	for (size_t i = 0; i < q->n_hold_ids; i++)
		r->results[i]->code =
			renew ? mst_hold_renew(c->m, q->hold_ids[i]) :
				mst_hold_release(c->m, q->hold_ids[i]);
	count_results(c, r);
	return 0;
}

static int h_rename(struct call *c)
{
	const Mcrpc__RenameRequest *q = (const void *)c->req;
	Mcrpc__KeysResponse *r = keys_resp(c, 0);

	if (!r)
		return -ENOMEM;
	if (!q->from || !q->to) {
		r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	r->code = q->prefix ?
			  mst_rename_dir(c->m, q->from, strlen(q->from), q->to,
					 strlen(q->to)) :
			  mst_rename(c->m, q->from, strlen(q->from), q->to,
				     strlen(q->to), q->no_replace, q->version);
	return 0;
}

static int h_set_attr(struct call *c)
{
	const Mcrpc__SetAttrRequest *q = (const void *)c->req;
	Mcrpc__StatResponse *r =
		NEW(c, Mcrpc__StatResponse, mcrpc__stat_response__init);
	mst_attr_t a = { 0 }, out;

	if (!r)
		return -ENOMEM;
	c->resp = &r->base;
	if (!q->key || !q->attr || !(q->attr->mode & S_IFMT)) {
		r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	a = mc_rpc_attr_of(q->attr);
	r->code = q->dir ? mst_dir_setattr(c->m, q->key, strlen(q->key),
					   q->mask, &a, &out) :
			   mst_setattr(c->m, q->key, strlen(q->key), q->mask,
				       &a, &out);
	r->is_dir = q->dir;
	if (!r->code)
		SET_ATTR(c, r, &out);
	return 0;
}

static int h_mkdir(struct call *c)
{
	const Mcrpc__MkdirRequest *q = (const void *)c->req;
	Mcrpc__KeysResponse *r = keys_resp(c, 0);
	mst_attr_t a;

	if (!r)
		return -ENOMEM;
	if (!q->path) {
		r->code = MC_STORE_INVALID_PARAMS;
		return 0;
	}
	if (q->attr)
		a = mc_rpc_attr_of(q->attr);
	r->code = mst_mkdir(c->m, q->path, strlen(q->path),
			    q->attr && q->attr->mode ? &a : NULL);
	return 0;
}

static int h_rmdir(struct call *c)
{
	const Mcrpc__KeysRequest *q = (const void *)c->req;
	Mcrpc__KeysResponse *r = keys_resp(c, 0);

	if (!r)
		return -ENOMEM;
	r->code = q->n_keys == 1 ?
			  mst_rmdir(c->m, q->keys[0], strlen(q->keys[0])) :
			  MC_STORE_INVALID_PARAMS;
	return 0;
}

static int h_watch(struct call *c)
{
	const Mcrpc__WatchRequest *q = (const void *)c->req;
	Mcrpc__WatchResponse *r =
		NEW(c, Mcrpc__WatchResponse, mcrpc__watch_response__init);
	struct mst_feed *f = &c->m->feed;
	unsigned max = q->max ? q->max : 1024;
	uint64_t after = q->after, oldest;

	if (!r)
		return -ENOMEM;
	c->resp = &r->base;
	r->epoch = f->epoch;
	if (q->epoch != f->epoch) {
		/* A new cursor, or one from before a restart. */
		r->reset = q->epoch != 0;
		r->last = f->last_seq;
		return 0;
	}
	if (f->last_seq <= after && q->wait_ms) {
		unsigned w = q->wait_ms > 30000 ? 30000 : q->wait_ms;
		struct timespec ts = mc_mono_deadline(w); /* feed's clock */
		while (f->last_seq <= after && !c->m->stopping &&
		       pthread_cond_timedwait(&f->cond, &c->m->lock, &ts) == 0)
			;
	}
	oldest = f->last_seq - f->n + 1;
	if (after + 1 < oldest || after > f->last_seq) {
		r->reset = true;
		r->last = f->last_seq;
		return 0;
	}
	uint64_t n = f->last_seq - after;
	if (n > max)
		n = max;
	r->events = ARRAY(c, Mcrpc__Event *, n);
	if (!r->events)
		return -ENOMEM;
	for (uint64_t s = after + 1; s <= after + n; s++) {
		const struct mst_event *e =
			&f->ring[(f->head + (s - oldest)) % f->cap];
		Mcrpc__Event *x = NEW(c, Mcrpc__Event, mcrpc__event__init);
		if (!x)
			return -ENOMEM;
		x->seq = e->seq;
		x->type = e->type;
		x->key = e->key ? e->key : (char *)"";
		x->to = e->to ? e->to : (char *)"";
		x->version = e->version;
		r->events[r->n_events++] = x;
	}
	r->last = after + n;
	return 0;
}

/* ---- checkpoints (ckpt.c) ---------------------------------------------------- */

#define RESP(c, r, type, init)        \
	type *r = NEW(c, type, init); \
	if (!r)                       \
		return -ENOMEM;       \
	(c)->resp = &r->base

static int h_ckpt_create(struct call *c)
{
	const Mcrpc__CkptCreateRequest *q = (const void *)c->req;
	RESP(c, r, Mcrpc__CkptCreateResponse,
	     mcrpc__ckpt_create_response__init);

	r->code = mst_ckpt_create(c->m, q, &r->id);
	return 0;
}

static int h_ckpt_list(struct call *c)
{
	RESP(c, r, Mcrpc__CkptListResponse, mcrpc__ckpt_list_response__init);

	r->code = mst_ckpt_list(c->m, &c->a, (const void *)c->req, r);
	return 0;
}

static int h_ckpt_info(struct call *c)
{
	RESP(c, r, Mcrpc__CkptInfoResponse, mcrpc__ckpt_info_response__init);

	r->code = mst_ckpt_info(c->m, &c->a, (const void *)c->req, r);
	if (r->code)
		r->ckpt = NULL;
	return 0;
}

static int h_ckpt_remove(struct call *c)
{
	const Mcrpc__CkptRemoveRequest *q = (const void *)c->req;
	RESP(c, r, Mcrpc__CkptRemoveResponse,
	     mcrpc__ckpt_remove_response__init);

	r->code = mst_ckpt_remove(c->m, q->name);
	return 0;
}

static int h_ckpt_hold(struct call *c)
{
	RESP(c, r, Mcrpc__CkptHoldResponse, mcrpc__ckpt_hold_response__init);

	r->code = mst_ckpt_hold(c->m, (const void *)c->req);
	return 0;
}

static int h_ckpt_source(struct call *c)
{
	RESP(c, r, Mcrpc__CkptSourceResponse,
	     mcrpc__ckpt_source_response__init);

	r->code = mst_ckpt_source(c->m, (const void *)c->req, r);
	return 0;
}

static int h_ckpt_done(struct call *c)
{
	RESP(c, r, Mcrpc__CkptDoneResponse, mcrpc__ckpt_done_response__init);

	r->code = mst_ckpt_done(c->m, (const void *)c->req);
	return 0;
}

/* ---- dispatch ------------------------------------------------------------- */

typedef int (*handler_fn)(struct call *c);

static handler_fn handler_of(uint16_t id)
{
	switch (id) {
	case MCRPC__METHOD__SERVICE_READY:
		return h_service_ready;
	case MCRPC__METHOD__PING:
		return h_ping;
	case MCRPC__METHOD__MOUNT_SEGMENT:
		return h_mount;
	case MCRPC__METHOD__REMOUNT_SEGMENT:
		return h_remount;
	case MCRPC__METHOD__UNMOUNT_SEGMENT:
		return h_unmount;
	case MCRPC__METHOD__GET_STATUS:
		return h_get_status;
	case MCRPC__METHOD__PUT_START:
	case MCRPC__METHOD__BATCH_PUT_START:
		return h_put_start;
	case MCRPC__METHOD__PUT_END:
	case MCRPC__METHOD__BATCH_PUT_END:
		return h_put_end;
	case MCRPC__METHOD__PUT_REVOKE:
	case MCRPC__METHOD__BATCH_PUT_REVOKE:
		return h_put_revoke;
	case MCRPC__METHOD__PUT_COMMIT:
		return h_put_commit;
	case MCRPC__METHOD__GET_REPLICA_LIST:
	case MCRPC__METHOD__BATCH_GET_REPLICA_LIST:
		return h_get_replica_list;
	case MCRPC__METHOD__EXIST_KEY:
	case MCRPC__METHOD__BATCH_EXIST_KEY:
		return h_exist;
	case MCRPC__METHOD__GET_SIZE:
		return h_get_size;
	case MCRPC__METHOD__REMOVE:
	case MCRPC__METHOD__BATCH_REMOVE:
		return h_remove;
	case MCRPC__METHOD__REMOVE_ALL:
	case MCRPC__METHOD__REMOVE_BY_REGEX:
		return h_remove_all;
	case MCRPC__METHOD__STAT:
		return h_stat;
	case MCRPC__METHOD__LIST:
		return h_list;
	case MCRPC__METHOD__LEASE_RENEW:
	case MCRPC__METHOD__LEASE_RELEASE:
		return h_lease;
	case MCRPC__METHOD__RENAME:
		return h_rename;
	case MCRPC__METHOD__WATCH:
		return h_watch;
	case MCRPC__METHOD__SET_ATTR:
		return h_set_attr;
	case MCRPC__METHOD__MKDIR:
		return h_mkdir;
	case MCRPC__METHOD__RMDIR:
		return h_rmdir;
	case MCRPC__METHOD__CKPT_CREATE:
		return h_ckpt_create;
	case MCRPC__METHOD__CKPT_LIST:
		return h_ckpt_list;
	case MCRPC__METHOD__CKPT_INFO:
		return h_ckpt_info;
	case MCRPC__METHOD__CKPT_REMOVE:
		return h_ckpt_remove;
	case MCRPC__METHOD__CKPT_HOLD:
		return h_ckpt_hold;
	case MCRPC__METHOD__CKPT_SOURCE:
		return h_ckpt_source;
	case MCRPC__METHOD__CKPT_DONE:
		return h_ckpt_done;
	}
	return NULL;
}

/*
 * HA: the answer to a retried request that some leader already applied
 * (its id is in the record): done, as the first answer said unless the
 * leader died before sending it: code 0 and, for per-key answers, 0 for
 * each key of the request.
 */
static int applied_answer(struct call *c, const struct mc_rpc_method *md)
{
	ProtobufCMessage *r = arena_alloc(&c->a, md->resp->sizeof_message);

	if (!r)
		return -ENOMEM;
	md->resp->message_init(r);
	if (md->resp == &mcrpc__keys_response__descriptor &&
	    md->req == &mcrpc__keys_request__descriptor) {
		const Mcrpc__KeysRequest *q =
			(const Mcrpc__KeysRequest *)c->req;
		Mcrpc__KeysResponse *kr = (Mcrpc__KeysResponse *)r;
		size_t n = q->n_keys;

		kr->results =
			arena_alloc(&c->a, (n ? n : 1) * sizeof(*kr->results));
		if (!kr->results)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++) {
			Mcrpc__KeyResult *k = arena_alloc(&c->a, sizeof(*k));

			if (!k)
				return -ENOMEM;
			mcrpc__key_result__init(k);
			kr->results[i] = k;
		}
		kr->n_results = n;
	}
	c->resp = r;
	return 0;
}

/* After a restart or takeover, a call that places memory waits out the
 * fence (slots.h): the previous run's clients may still write into the
 * slots it gave them. Without the lock: other calls go on. */
static void fence_wait(const struct master *m, uint16_t method)
{
	uint64_t now;

	if (!m->fence_until || (method != MCRPC__METHOD__PUT_START &&
				method != MCRPC__METHOD__BATCH_PUT_START &&
				method != MCRPC__METHOD__PUT_COMMIT))
		return;
	while ((now = mst_now()) < m->fence_until) {
		uint64_t ms = m->fence_until - now;
		struct timespec ts = { (time_t)(ms / 1000),
				       (long)(ms % 1000) * 1000000L };

		nanosleep(&ts, NULL);
	}
}

int mst_service_call(struct master *m, const struct mc_rpc_hdr *h,
		     const uint8_t *body, uint8_t **frame, size_t *len)
{
	const struct mc_rpc_method *md = mc_rpc_method(h->method);
	handler_fn fn = md ? handler_of(h->method) : NULL;
	struct call c = { .m = m };
	struct mc_rpc_hdr rh = *h;
	uint64_t seq0, seq1, placed0, frees0, wait;
	int rc;

	if (!fn)
		return mc_rpc_pack_code(h, MC_STORE_NOT_SUPPORTED, 0, frame,
					len);
	/* Keys are byte strings: one with a NUL would be cut short. */
	if (!mc_rpc_strings_ok(md->req, body, h->length))
		return mc_rpc_pack_code(h, MC_STORE_INVALID_PARAMS, 0, frame,
					len);
	c.method_row = (size_t)(md - mc_rpc_method_at(0));
	c.req = mc_rpc_unpack(md->req, body, h->length);
	if (!c.req)
		return -EPROTO;
	rh.flags = 0;
	fence_wait(m, h->method);
	/* HA: past the lease this master may no longer lead: nothing is
	 * served (a standby may be taking over), clients look again. */
	{
		uint64_t until = atomic_load(&m->ha_until);

		if (until && mst_now() >= until) {
			rc = mc_rpc_pack_code(
				h, MC_STORE_UNAVAILABLE_IN_CURRENT_MODE, 0,
				frame, len);
			goto out;
		}
	}
	pthread_mutex_lock(&m->lock);
	seq0 = mst_db_log_seq(m->db);
	placed0 = m->placed;
	frees0 = m->frees;
	rc = (h->flags & MC_RPC_FLAG_RETRY) && mst_db_logged(m->db) ?
		     mst_db_op_applied(m->db, h->req_id) :
		     0;
	if (rc == 1) {
		rc = applied_answer(&c, md);
	} else if (!rc) {
		if (h->flags & MC_RPC_FLAG_OPID)
			mst_db_set_op(m->db, h->req_id);
		rc = fn(&c);
		mst_db_set_op(m->db, 0);
	} else {
		rc = mc_rpc_pack_code(h, rc, 0, frame, len);
		pthread_mutex_unlock(&m->lock);
		goto out;
	}
	if (!rc && c.resp) {
		int32_t code = mc_rpc_resp_code(c.resp);
		m->stats.requests[c.method_row]++;
		if (code || (c.items && c.failed_items == c.items))
			m->stats.failures[c.method_row]++;
		m->stats.batch_items[c.method_row] += c.items;
		m->stats.batch_failed_items[c.method_row] += c.failed_items;
		rh.kind = MC_RPC_RESPONSE;
		rc = mc_rpc_pack_frame(&rh, c.resp, frame, len);
	} else if (!rc) {
		rc = -ENOMEM;
	}
	seq1 = mst_db_log_seq(m->db);
	if (m->frees != frees0)
		m->freed_seq = seq1;
	/* HA group commit: what this call changed is acknowledged only once
	 * it is in the op log (other calls meanwhile commit and ship with
	 * it), and memory it handed out only once the changes that freed
	 * memory before it are (master.h, placed); a leader that cannot ship
	 * any more answers as no leader. */
	wait = seq1 != seq0 ? seq1 : 0;
	if (m->placed != placed0 && m->freed_seq > wait)
		wait = m->freed_seq;
	pthread_mutex_unlock(&m->lock);
	if (!rc && wait) {
		int w = mst_db_log_wait(m->db, wait);

		if (w) {
			free(*frame);
			*frame = NULL;
			rc = mc_rpc_pack_code(h, w, 0, frame, len);
		}
	}
out:
	protobuf_c_message_free_unpacked((ProtobufCMessage *)c.req, NULL);
	arena_free(&c.a);
	return rc;
}
