/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin pages of the pool's view that upstream's tools read (docs/
 * operations.md, "Admin HTTP"): /leader, /query_segment and
 * /get_segments_detail, in upstream's shapes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "admin_int.h"
#include "alloc.h"
#include "ha.h"
#include "master.h"
#include "mst_util.h"

void mst_admin_leader(const struct mst_admin *a, struct mc_http_response *resp)
{
	/* Only the serving master answers at all: with HA it is the leader
	 * of its epoch; without, no view names a leader (as upstream). */
	if (!a->ha || !a->leader_addr) {
		mst_admin_reply_json(resp, 200,
				     json_pack("{s:b}", "present", 0));
		return;
	}
	mst_admin_reply_json(resp, 200,
			     json_pack("{s:b,s:s,s:I}", "present", 1,
				       "leader_address", a->leader_addr,
				       "view_version",
				       (json_int_t)mst_ha_epoch(a->ha)));
}

static struct mst_segment *by_name(struct master *m, const char *name)
{
	for (struct mst_segment *s = m->segments; s; s = s->next)
		if (s->name && !strcmp(s->name, name))
			return s;
	return NULL;
}

void mst_admin_query_segment(struct master *m, const char *query,
			     struct mc_http_response *resp)
{
	char name[1024];
	size_t n;
	struct mst_segment *s;
	uint64_t used = 0, cap = 0;

	if (mc_http_query_get(query, "segment", name, sizeof(name), &n) || !n) {
		(void)mc_http_replyf(resp, 400, "missing or bad ?segment=\n");
		return;
	}
	pthread_mutex_lock(&m->lock);
	s = by_name(m, name);
	if (s) {
		used = mc_alloc_used(s->alloc);
		cap = mc_alloc_capacity(s->alloc);
	}
	pthread_mutex_unlock(&m->lock);
	if (!s) {
		(void)mc_http_replyf(resp, 404, "no segment %s\n", name);
		return;
	}
	(void)mc_http_replyf(resp, 200,
			     "%s\nUsed(bytes): %" PRIu64
			     "\nCapacity(bytes) : %" PRIu64 "\n",
			     name, used, cap);
	resp->content_type = "text/plain; version=0.0.4";
}

static json_t *detail(const struct mst_segment *s)
{
	char id[2 * MST_ID_LEN + 1], owner[2 * MST_ID_LEN + 1] = "";
	char base[32], human[48];
	uint64_t used = mc_alloc_used(s->alloc);
	uint64_t cap = mc_alloc_capacity(s->alloc), now = mst_now();
	json_t *o;

	mst_id_hex(s->id, id);
	if (s->owner)
		mst_id_hex(s->owner->id, owner);
	snprintf(base, sizeof(base), "0x%" PRIx64, s->base);
	snprintf(human, sizeof(human), "%g GiB",
		 (double)s->size / 1024.0 / 1024.0 / 1024.0);
	o = json_pack("{s:o,s:s,s:s,s:s,s:I,s:s,s:o,s:o,s:s,s:I,s:I,s:f}",
		      "segment_name", mst_admin_json_str(s->name), "segment_id",
		      id, "client_id", owner, "base_address", base,
		      "size_bytes", (json_int_t)s->size, "size_human", human,
		      "te_endpoint", mst_admin_json_str(s->endpoint),
		      "protocol", mst_admin_json_str(s->protocol), "status",
		      s->owner ? "OK" : "AWAITING_OWNER",
		      "allocator_used_bytes", (json_int_t)used,
		      "allocator_capacity_bytes", (json_int_t)cap,
		      "allocator_usage_percent",
		      cap ? 100.0 * (double)used / (double)cap : 0.0);
	/* Ours: how long nothing is placed in it yet (readers of memory it
	 * held before a drop or a restart may still read it). */
	/* Ours: the longest free range, the largest object it can take
	 * without eviction (an object is one block on one segment). */
	if (o)
		(void)json_object_set_new(
			o, "allocator_largest_free_bytes",
			json_integer(
				(json_int_t)mc_alloc_largest_free(s->alloc)));
	if (o)
		(void)json_object_set_new(
			o, "placement_fenced_ms",
			json_integer(
				s->fenced_until > now ?
					(json_int_t)(s->fenced_until - now) :
					0));
	return o;
}

void mst_admin_segments_detail(struct master *m, struct mc_http_response *resp)
{
	json_t *list = json_array();
	size_t n = 0;

	pthread_mutex_lock(&m->lock);
	for (struct mst_segment *s = m->segments; list && s; s = s->next) {
		if (json_array_append_new(list, detail(s))) {
			json_decref(list);
			list = NULL;
		}
		n++;
	}
	pthread_mutex_unlock(&m->lock);
	mst_admin_reply_json(resp, list ? 200 : 500,
			     list ? json_pack("{s:I,s:o}", "total_segments",
					      (json_int_t)n, "segments", list) :
				    NULL);
}
