/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's key -> object index: an intrusive chained hash table
 * (SipHash with a random seed), doubling at load factor 1. Intrusive so a
 * million keys cost one allocation each (the object, key inline).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "master.h"
#include "mc_map.h"

int mst_objmap_init(struct mst_objmap *om)
{
	om->n_buckets = 1024;
	om->count = 0;
	om->buckets = calloc(om->n_buckets, sizeof(*om->buckets));
	if (!om->buckets)
		return -ENOMEM;
	if (getrandom(om->seed, sizeof(om->seed), 0) != sizeof(om->seed)) {
		om->seed[0] = (uint64_t)(uintptr_t)om;
		om->seed[1] = 0x9e3779b97f4a7c15ull;
	}
	return 0;
}

void mst_objmap_free(struct mst_objmap *om)
{
	free(om->buckets);
	om->buckets = NULL;
	om->n_buckets = om->count = 0;
}

uint64_t mst_objmap_hash(const struct mst_objmap *om, const char *key,
			 size_t len)
{
	return mc_siphash(om->seed, key, len);
}

struct mst_object *mst_objmap_get(struct mst_objmap *om, const char *key,
				  size_t len)
{
	uint64_t h = mst_objmap_hash(om, key, len);
	struct mst_object *o = om->buckets[h & (om->n_buckets - 1)];

	for (; o; o = o->hnext)
		if (o->hash == h && o->key_len == len &&
		    !memcmp(o->key, key, len))
			return o;
	return NULL;
}

static void grow(struct mst_objmap *om)
{
	size_t n = om->n_buckets * 2;
	struct mst_object **b = calloc(n, sizeof(*b));

	if (!b)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < om->n_buckets; i++) {
		struct mst_object *o = om->buckets[i], *next;
		for (; o; o = next) {
			next = o->hnext;
			o->hnext = b[o->hash & (n - 1)];
			b[o->hash & (n - 1)] = o;
		}
	}
	free(om->buckets);
	om->buckets = b;
	om->n_buckets = n;
}

int mst_objmap_add(struct mst_objmap *om, struct mst_object *o)
{
	size_t i;

	o->hash = mst_objmap_hash(om, o->key, o->key_len);
	if (om->count >= om->n_buckets)
		grow(om);
	i = o->hash & (om->n_buckets - 1);
	o->hnext = om->buckets[i];
	om->buckets[i] = o;
	om->count++;
	return 0;
}

void mst_objmap_del(struct mst_objmap *om, struct mst_object *o)
{
	struct mst_object **pp = &om->buckets[o->hash & (om->n_buckets - 1)];

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == o) {
			*pp = o->hnext;
			o->hnext = NULL;
			om->count--;
			return;
		}
	}
}
