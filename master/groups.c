/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Object groups: see groups.h. The map holds a pointer to each group;
 * members are a doubly linked list through the objects themselves, so
 * joining, leaving and a rename's hand-over are O(1).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "groups.h"
#include "mc_map.h"
#include "objmap.h"

static struct mst_group *find(struct master *m, const char *id, size_t len)
{
	const struct mc_map_entry *e = mc_map_get(m->groups, id, len);
	struct mst_group *g;

	if (!e)
		return NULL;
	memcpy(&g, e->val, sizeof(g));
	return g;
}

int mst_group_join(struct master *m, struct mst_object *o, const char *id,
		   size_t len)
{
	struct mst_group *g = find(m, id, len);

	if (!g) {
		g = calloc(1, sizeof(*g) + len + 1);
		if (!g)
			return -ENOMEM;
		memcpy(g->id, id, len);
		g->id_len = len;
		if (mc_map_put(m->groups, id, len, &g, sizeof(g))) {
			free(g);
			return -ENOMEM;
		}
	}
	o->group = g;
	o->grp_prev = NULL;
	o->grp_next = g->head;
	if (g->head)
		g->head->grp_prev = o;
	g->head = o;
	g->n++;
	return 0;
}

void mst_group_leave(struct master *m, struct mst_object *o)
{
	struct mst_group *g = o->group;

	if (!g)
		return;
	if (o->grp_prev)
		o->grp_prev->grp_next = o->grp_next;
	else
		g->head = o->grp_next;
	if (o->grp_next)
		o->grp_next->grp_prev = o->grp_prev;
	o->group = NULL;
	o->grp_prev = o->grp_next = NULL;
	if (--g->n)
		return;
	(void)mc_map_del(m->groups, g->id, g->id_len);
	free(g);
}

void mst_group_replace(struct mst_object *src, struct mst_object *n)
{
	if (!src->group)
		return;
	n->group = src->group;
	n->grp_prev = src->grp_prev;
	n->grp_next = src->grp_next;
	if (n->grp_prev)
		n->grp_prev->grp_next = n;
	else
		n->group->head = n;
	if (n->grp_next)
		n->grp_next->grp_prev = n;
	src->group = NULL;
	src->grp_prev = src->grp_next = NULL;
}

void mst_group_each(struct mst_object *o,
		    void (*fn)(struct mst_object *x, void *arg), void *arg)
{
	struct mst_object *x, *next;

	if (!o->group) {
		fn(o, arg);
		return;
	}
	for (x = o->group->head; x; x = next) {
		next = x->grp_next; /* fn may move x in the recency list */
		if (x->state == MST_COMPLETE && !x->orphan)
			fn(x, arg);
	}
}

struct touch {
	struct master *m;
	const struct mst_object *from;
};

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static void touch_one(struct mst_object *x, void *arg)
{
	struct touch *t = arg;

	if (x == t->from)
		return;
	x->read_lease_until =
		max_u64(x->read_lease_until, t->from->read_lease_until);
	x->lease_until = max_u64(x->lease_until, t->from->lease_until);
	x->last_access = max_u64(x->last_access, t->from->last_access);
	mst_lru_touch(t->m, x);
}

void mst_group_touch(struct master *m, struct mst_object *o)
{
	struct touch t = { .m = m, .from = o };

	if (o->group && o->group->n > 1)
		mst_group_each(o, touch_one, &t);
}
