/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Chained hash map with power-of-two buckets that doubles at load 1.
 * SipHash-1-3 keeps bucket choice unpredictable to remote clients.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "mc_map.h"

struct mc_map {
	struct mc_map_entry **buckets;
	size_t n_buckets; /* power of two */
	size_t count;
	uint64_t seed[2];
};

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                   \
	do {                       \
		v0 += v1;          \
		v1 = ROTL(v1, 13); \
		v1 ^= v0;          \
		v0 = ROTL(v0, 32); \
		v2 += v3;          \
		v3 = ROTL(v3, 16); \
		v3 ^= v2;          \
		v0 += v3;          \
		v3 = ROTL(v3, 21); \
		v3 ^= v0;          \
		v2 += v1;          \
		v1 = ROTL(v1, 17); \
		v1 ^= v2;          \
		v2 = ROTL(v2, 32); \
	} while (0)

uint64_t mc_siphash(const uint64_t key[2], const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t v0 = 0x736f6d6570736575ULL ^ key[0];
	uint64_t v1 = 0x646f72616e646f6dULL ^ key[1];
	uint64_t v2 = 0x6c7967656e657261ULL ^ key[0];
	uint64_t v3 = 0x7465646279746573ULL ^ key[1];
	uint64_t b = (uint64_t)len << 56, m;
	size_t i, tail = len & 7;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&m, p + i, 8);
		v3 ^= m;
		SIPROUND;
		v0 ^= m;
	}
	for (size_t j = 0; j < tail; j++)
		b |= (uint64_t)p[i + j] << (8 * j);
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

int mc_map_create(struct mc_map **out)
{
	struct mc_map *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->n_buckets = 64;
	m->buckets = calloc(m->n_buckets, sizeof(*m->buckets));
	if (!m->buckets) {
		free(m);
		return -ENOMEM;
	}
	if (getrandom(m->seed, sizeof(m->seed), 0) != sizeof(m->seed)) {
		/* No entropy yet: fall back to address-derived bits. */
		m->seed[0] = (uint64_t)(uintptr_t)m ^ 0x9e3779b97f4a7c15ULL;
		m->seed[1] = (uint64_t)(uintptr_t)m->buckets;
	}
	*out = m;
	return 0;
}

void mc_map_destroy(struct mc_map *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_buckets; i++) {
		struct mc_map_entry *e = m->buckets[i], *next;
		for (; e; e = next) {
			next = e->next;
			free(e->val);
			free(e);
		}
	}
	free(m->buckets);
	free(m);
}

static struct mc_map_entry **find_slot(const struct mc_map *m, const char *key,
				       size_t key_len, uint64_t h)
{
	struct mc_map_entry **pp = &m->buckets[h & (m->n_buckets - 1)];

	for (; *pp; pp = &(*pp)->next) {
		if ((*pp)->hash == h && (*pp)->key_len == key_len &&
		    !memcmp((*pp)->key, key, key_len))
			break;
	}
	return pp;
}

static void grow(struct mc_map *m)
{
	size_t n = m->n_buckets * 2;
	struct mc_map_entry **b = calloc(n, sizeof(*b));

	if (!b)
		return; /* keep working with longer chains */
	for (size_t i = 0; i < m->n_buckets; i++) {
		struct mc_map_entry *e = m->buckets[i], *next;
		for (; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	}
	free(m->buckets);
	m->buckets = b;
	m->n_buckets = n;
}

static char *dup_val(const void *val, size_t len)
{
	char *v = malloc(len + 1);

	if (!v)
		return NULL;
	if (len)
		memcpy(v, val, len);
	v[len] = '\0';
	return v;
}

int mc_map_put(struct mc_map *m, const char *key, size_t key_len,
	       const void *val, size_t val_len)
{
	uint64_t h = mc_siphash(m->seed, key, key_len);
	struct mc_map_entry **pp = find_slot(m, key, key_len, h), *e;
	char *v = dup_val(val, val_len);

	if (!v)
		return -ENOMEM;
	if (*pp) {
		free((*pp)->val);
		(*pp)->val = v;
		(*pp)->val_len = val_len;
		return 0;
	}
	e = malloc(sizeof(*e) + key_len + 1);
	if (!e) {
		free(v);
		return -ENOMEM;
	}
	e->hash = h;
	e->key_len = key_len;
	memcpy(e->key, key, key_len);
	e->key[key_len] = '\0';
	e->val = v;
	e->val_len = val_len;
	e->next = NULL;
	*pp = e;
	if (++m->count > m->n_buckets)
		grow(m);
	return 0;
}

const struct mc_map_entry *mc_map_get(const struct mc_map *m, const char *key,
				      size_t key_len)
{
	uint64_t h = mc_siphash(m->seed, key, key_len);

	return *find_slot(m, key, key_len, h);
}

int mc_map_del(struct mc_map *m, const char *key, size_t key_len)
{
	uint64_t h = mc_siphash(m->seed, key, key_len);
	struct mc_map_entry **pp = find_slot(m, key, key_len, h), *e = *pp;

	if (!e)
		return -ENOENT;
	*pp = e->next;
	free(e->val);
	free(e);
	m->count--;
	return 0;
}

size_t mc_map_count(const struct mc_map *m)
{
	return m->count;
}

void mc_map_foreach(const struct mc_map *m,
		    void (*fn)(const struct mc_map_entry *e, void *arg),
		    void *arg)
{
	for (size_t i = 0; i < m->n_buckets; i++)
		for (const struct mc_map_entry *e = m->buckets[i]; e;
		     e = e->next)
			fn(e, arg);
}
