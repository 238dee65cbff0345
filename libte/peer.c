/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peers and segments. A peer is resolved once (rpc_meta + ram descriptor
 * from the metadata backend, or a Metadata handshake in P2PHANDSHAKE
 * mode) and cached by name. When a transport finds a peer unreachable it
 * marks it stale; the next use resolves the name again, so a peer that
 * restarted under the same name (new ports) is reachable again.
 *
 * Calls down only: desc.c (decoding descriptors; in P2PHANDSHAKE mode our
 * own descriptor to send), hs_client.c (the Metadata exchange), the
 * metadata backend, and transports' peer_release ops when a peer is
 * freed. Holders drop peers with te__peer_put() (te_int.h), which frees
 * through p->destroy, so tasks and transports need no code of this file.
 * Locking: eng->peer_lock guards the cache and each segment's peer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_parse.h"
#include "mc_time.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

static void peer_destroy(struct te_peer *p)
{
	for (int i = 0; i < TE_TP_COUNT; i++) {
		struct te_transport *tp = p->eng->tps[i];
		if (tp && tp->ops->peer_release && p->tp_priv[i])
			tp->ops->peer_release(tp, p);
	}
	te__desc_release(p);
	free(p);
}

struct te_peer *te__peer_new(struct te_engine *eng)
{
	struct te_peer *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	atomic_store(&p->refs, 1);
	p->eng = eng;
	p->destroy = peer_destroy;
	return p;
}

static int fetch(struct te_engine *eng, const char *name, struct te_peer *p,
		 char *err, size_t errlen)
{
	char key[TE_NAME_MAX + 64], *val = NULL, *mine;
	size_t len;
	int rc;

	if (eng->p2p) {
		/* The name is "host:port" of the peer's RPC listener. */
		rc = mc_parse_hostport(name, p->ip, sizeof(p->ip), -1,
				       &p->rpc_port);
		if (rc) {
			snprintf(err, errlen,
				 "segment '%s': with P2PHANDSHAKE a segment "
				 "name is host:port ([IPv6]:port)",
				 name);
			return -EINVAL;
		}
		mine = te__describe(eng);
		if (!mine)
			return -ENOMEM;
		rc = te__rpc_fetch_desc(p->ip, p->rpc_port, mine, eng->auth,
					&val, &len, err, errlen);
		free(mine);
		if (rc)
			return rc;
	} else {
		rc = te__meta_key(eng, key, sizeof(key), "rpc_meta", name);
		if (!rc)
			rc = eng->meta->ops->get(eng->meta, key, &val, &len,
						 err, errlen);
		if (rc)
			return rc;
		rc = te__rpc_meta_decode(val, len, p->ip, sizeof(p->ip),
					 &p->rpc_port);
		free(val);
		val = NULL;
		if (rc) {
			snprintf(err, errlen,
				 "segment '%s': bad rpc_meta entry", name);
			return rc;
		}
		rc = te__meta_key(eng, key, sizeof(key), "ram", name);
		if (!rc)
			rc = eng->meta->ops->get(eng->meta, key, &val, &len,
						 err, errlen);
		if (rc)
			return rc;
	}
	rc = te__desc_decode(val, len, p, err, errlen);
	free(val);
	return rc;
}

/* Caller holds peer_lock. Drops stale entries on the way. */
static struct te_peer *cache_find(struct te_engine *eng, const char *name)
{
	for (unsigned i = 0; i < eng->n_peers; i++) {
		struct te_peer *p = eng->peers[i];
		if (strcmp(p->name, name) != 0)
			continue;
		if (!p->stale)
			return p;
		eng->peers[i] = eng->peers[--eng->n_peers];
		te__peer_put(p);
		i--;
	}
	return NULL;
}

static int cache_add(struct te_engine *eng, struct te_peer *p)
{
	if (eng->n_peers == eng->cap_peers) {
		unsigned cap = eng->cap_peers ? eng->cap_peers * 2 : 16;
		struct te_peer **n = realloc(eng->peers, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		eng->peers = n;
		eng->cap_peers = cap;
	}
	eng->peers[eng->n_peers++] = te__peer_get(p);
	return 0;
}

int te__peer_lookup(struct te_engine *eng, const char *name,
		    struct te_peer **out, char *err, size_t errlen)
{
	struct te_peer *p, *cached;
	char ebuf[TE_ERR_LEN] = "";
	int rc;

	if (!err) {
		err = ebuf;
		errlen = sizeof(ebuf);
	}
	if (strlen(name) >= TE_NAME_MAX || !*name) {
		snprintf(err, errlen, "segment name '%.64s...': bad length",
			 name);
		return -ENAMETOOLONG;
	}
	if (!strcmp(name, eng->name)) {
		*out = te__peer_get(eng->self);
		return 0;
	}
	pthread_mutex_lock(&eng->peer_lock);
	p = cache_find(eng, name);
	if (p) {
		*out = te__peer_get(p);
		pthread_mutex_unlock(&eng->peer_lock);
		return 0;
	}
	pthread_mutex_unlock(&eng->peer_lock);

	p = te__peer_new(eng);
	if (!p)
		return -ENOMEM;
	rc = fetch(eng, name, p, err, errlen);
	if (rc) {
		char detail[TE_ERR_LEN];

		snprintf(detail, sizeof(detail), "%s", err);
		snprintf(err, errlen, "segment '%s' %s: %s", name,
			 rc == -ENOENT ?
				 "is not known to the metadata service" :
				 "cannot be resolved",
			 detail);
		te__peer_put(p);
		return rc;
	}
	/* The descriptor's name is the peer's; we asked for this one. */
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->fetched_ns = mc_mono_ns();
	pthread_mutex_lock(&eng->peer_lock);
	cached = cache_find(eng, name);
	if (cached) { /* another thread won the race */
		te__peer_get(cached);
		pthread_mutex_unlock(&eng->peer_lock);
		te__peer_put(p);
		*out = cached;
		return 0;
	}
	rc = cache_add(eng, p);
	pthread_mutex_unlock(&eng->peer_lock);
	if (rc) {
		te__peer_put(p);
		return rc;
	}
	*out = p;
	return 0;
}

void te__peers_free(struct te_engine *eng)
{
	for (unsigned i = 0; i < eng->n_peers; i++)
		te__peer_put(eng->peers[i]);
	free(eng->peers);
	eng->peers = NULL;
	eng->n_peers = eng->cap_peers = 0;
}

int te_segment_open(struct te_engine *eng, const char *name,
		    struct te_segment **out, char *err, size_t errlen)
{
	struct te_segment *s;
	int rc;

	if (te__forked(eng))
		return MC_EFORKED;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	rc = te__peer_lookup(eng, name, &s->peer, err, errlen);
	if (rc) {
		free(s);
		return rc;
	}
	s->eng = eng;
	snprintf(s->name, sizeof(s->name), "%s", name);
	*out = s;
	return 0;
}

void te_segment_close(struct te_segment *seg)
{
	if (!seg)
		return;
	if (te__forked(seg->eng))
		return; /* the parent's (te_engine.forks) */
	te__peer_put(seg->peer);
	free(seg);
}

struct te_peer *te__segment_peer(struct te_segment *seg)
{
	struct te_engine *eng = seg->eng;
	struct te_peer *p, *fresh;

	pthread_mutex_lock(&eng->peer_lock);
	p = seg->peer;
	if (!p->stale) {
		te__peer_get(p);
		pthread_mutex_unlock(&eng->peer_lock);
		return p;
	}
	pthread_mutex_unlock(&eng->peer_lock);
	if (te__peer_lookup(eng, seg->name, &fresh, NULL, 0))
		return NULL;
	pthread_mutex_lock(&eng->peer_lock);
	p = seg->peer;
	seg->peer = fresh;
	te__peer_get(fresh);
	pthread_mutex_unlock(&eng->peer_lock);
	te__peer_put(p);
	return fresh;
}

/* Whether [addr, addr + len) overlaps [base, base + blen). */
static bool overlaps(uint64_t addr, uint64_t len, uint64_t base, uint64_t blen)
{
	return addr < base + blen && base < addr + len;
}

/*
 * Whether peer p may hold [addr, addr + len) for owner. This engine's
 * own memory: one registration of that tag covers the range. A peer's
 * descriptor: no buffer of another tag overlaps it (buffers without a
 * tag, from engines before tags, mixed in during a rolling upgrade, are
 * not held to it; a range in no buffer is left to the transport to
 * refuse, as before).
 */
static bool owns(struct te_peer *p, uint64_t addr, uint64_t len,
		 const char *owner)
{
	struct te_engine *eng = p->eng;
	bool ok = false;

	if (p->is_self) {
		pthread_rwlock_rdlock(&eng->reg_lock);
		for (unsigned i = 0; i < eng->n_regs && !ok; i++) {
			const struct te_memreg *r = eng->regs[i];

			ok = addr >= r->addr && len <= r->len &&
			     addr - r->addr <= r->len - len &&
			     !strcmp(r->owner, owner);
		}
		pthread_rwlock_unlock(&eng->reg_lock);
		return ok;
	}
	for (unsigned i = 0; i < p->n_buffers; i++) {
		const struct te_buffer_desc *b = &p->buffers[i];

		if (b->owner[0] && strcmp(b->owner, owner) &&
		    overlaps(addr, len, b->addr, b->length))
			return false;
	}
	return true;
}

/* A peer's descriptor fetched this long ago may predate its owner's
 * latest registrations: fetched again (once) before a refusal. Younger,
 * a refusal stands (requests for a holder that restarted must not make
 * every call fetch it anew). */
#define REFETCH_AFTER_NS 1000000000ull

struct te_peer *te__segment_peer_at(struct te_segment *seg, uint64_t addr,
				    uint64_t len, const char *owner, int *err)
{
	struct te_peer *p = te__segment_peer(seg);

	*err = -EHOSTUNREACH;
	if (!p || !owner || owns(p, addr, len, owner))
		return p;
	if (!p->is_self && mc_mono_ns() - p->fetched_ns > REFETCH_AFTER_NS) {
		te__peer_invalidate(p);
		te__peer_put(p);
		p = te__segment_peer(seg);
		if (!p || owns(p, addr, len, owner))
			return p;
	}
	te__peer_put(p);
	*err = MC_ESEGMOVED;
	return NULL;
}

int te_segment_buffers(struct te_segment *seg, struct te_buffer_info *out,
		       unsigned max)
{
	struct te_peer *p;
	int n;

	if (te__forked(seg->eng))
		return MC_EFORKED;
	p = te__segment_peer(seg);
	if (!p)
		return -EHOSTUNREACH;
	if (p->is_self) {
		struct te_engine *eng = seg->eng;
		unsigned k = 0;

		pthread_rwlock_rdlock(&eng->reg_lock);
		for (unsigned i = 0; i < eng->n_regs; i++) {
			struct te_memreg *r = eng->regs[i];
			if (!r->remote)
				continue;
			if (k < max) {
				out[k].addr = r->addr;
				out[k].length = r->len;
				snprintf(out[k].location,
					 sizeof(out[k].location), "%s",
					 r->location);
				out[k].shareable = r->shm_path != NULL;
			}
			k++;
		}
		pthread_rwlock_unlock(&eng->reg_lock);
		n = (int)k;
	} else {
		for (unsigned i = 0; i < p->n_buffers && i < max; i++) {
			out[i].addr = p->buffers[i].addr;
			out[i].length = p->buffers[i].length;
			snprintf(out[i].location, sizeof(out[i].location), "%s",
				 p->buffers[i].location);
			out[i].shareable = p->buffers[i].shm_path != NULL;
		}
		n = (int)p->n_buffers;
	}
	te__peer_put(p);
	return n;
}
