/* SPDX-License-Identifier: Apache-2.0 */
/* The ranges of puts in flight on dropped segments (see ghosts.h). */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ghosts.h"
#include "master.h"
#include "mc_log.h"
#include "mst_util.h"
#include "segments.h"

struct mst_ghost {
	struct mst_ghost *next;
	char *endpoint; /* the segment's, as writers address it */
	uint64_t addr, len; /* absolute: base + offset when placed */
	uint8_t writer[MST_ID_LEN];
	uint64_t put_start; /* mono ms: the put's PutStart, its identity */
	uint64_t until; /* mono ms: the put's release timeout */
	struct mst_segment *seg; /* where it is reserved now, or NULL */
	struct mc_alloc_block *blk;
	size_t key_len;
	char key[];
};

void mst_ghosts_note(struct master *m, const struct mst_segment *s,
		     const struct mst_object *o)
{
	for (unsigned i = 0; i < o->n_repl; i++) {
		const struct mst_replica *r = &o->repl[i];
		struct mst_ghost *g;

		if (r->seg != s || !r->blk)
			continue;
		g = calloc(1, sizeof(*g) + o->key_len + 1);
		if (g)
			g->endpoint = strdup(s->endpoint ? s->endpoint : "");
		if (!g || !g->endpoint) {
			free(g);
			mc_log_warn("master",
				    "out of memory keeping the range of put "
				    "%.*s on a dropped segment",
				    (int)o->key_len, o->key);
			continue;
		}
		g->addr = s->base + mc_alloc_block_offset(r->blk);
		g->len = mc_alloc_block_size(r->blk);
		memcpy(g->writer, o->writer, MST_ID_LEN);
		g->put_start = o->put_start;
		g->until = o->put_start + m->cfg.release_timeout_ms;
		g->key_len = o->key_len;
		memcpy(g->key, o->key, o->key_len);
		g->next = m->ghosts;
		m->ghosts = g;
	}
}

void mst_ghosts_segment_gone(struct master *m, const struct mst_segment *s)
{
	for (struct mst_ghost *g = m->ghosts; g; g = g->next) {
		if (g->seg != s)
			continue;
		/* The allocator goes with s (its used bytes with it). */
		g->seg = NULL;
		g->blk = NULL;
	}
}

void mst_ghosts_reserve(struct master *m, struct mst_segment *s)
{
	uint64_t cap = mc_alloc_capacity(s->alloc), end = s->base + cap;

	for (struct mst_ghost *g = m->ghosts; g; g = g->next) {
		uint64_t lo = g->addr > s->base ? g->addr : s->base;
		uint64_t hi = g->addr + g->len < end ? g->addr + g->len : end;
		uint64_t off, len;

		if (g->seg || !s->endpoint ||
		    strcmp(g->endpoint, s->endpoint) || lo >= hi)
			continue;
		/* Whole allocation units around the range. */
		off = (lo - s->base) / MC_ALLOC_ALIGN * MC_ALLOC_ALIGN;
		len = (hi - s->base - off + MC_ALLOC_ALIGN - 1) /
		      MC_ALLOC_ALIGN * MC_ALLOC_ALIGN;
		if (off + len > cap)
			len = cap - off;
		if (mc_alloc_reserve(s->alloc, off, len, &g->blk)) {
			mc_log_warn("master",
				    "segment %s: cannot keep the range of put "
				    "%.*s (%llu bytes at offset %llu) out of "
				    "new objects",
				    s->name, (int)g->key_len, g->key,
				    (unsigned long long)len,
				    (unsigned long long)off);
			g->blk = NULL;
			continue;
		}
		g->seg = s;
		m->allocated += mc_alloc_block_size(g->blk);
		mc_log_notice("master",
			      "segment %s: %llu bytes at offset %llu kept for "
			      "put %.*s, placed before the segment was dropped "
			      "and maybe still being written",
			      s->name, (unsigned long long)len,
			      (unsigned long long)off, (int)g->key_len, g->key);
	}
}

static void release(struct master *m, struct mst_ghost *g, const char *why)
{
	mc_log_info("master",
		    "put %.*s: its range on a dropped segment let "
		    "go (%s)",
		    (int)g->key_len, g->key, why);
	if (g->seg && g->blk) {
		m->allocated -= mc_alloc_block_size(g->blk);
		mc_alloc_free(g->seg->alloc, g->blk);
	}
	free(g->endpoint);
	free(g);
}

bool mst_ghosts_end(struct master *m, const uint8_t *writer, const char *key,
		    size_t key_len, uint64_t put_start)
{
	struct mst_ghost **pp = &m->ghosts;
	bool any = false;

	while (writer && *pp) {
		struct mst_ghost *g = *pp;

		if (g->key_len == key_len && !memcmp(g->key, key, key_len) &&
		    !memcmp(g->writer, writer, MST_ID_LEN) &&
		    (!put_start || g->put_start == put_start)) {
			*pp = g->next;
			release(m, g, "its writer ended the put");
			any = true;
		} else {
			pp = &g->next;
		}
	}
	return any;
}

void mst_ghosts_expire(struct master *m, uint64_t now)
{
	struct mst_ghost **pp = &m->ghosts;

	while (*pp) {
		struct mst_ghost *g = *pp;

		/* As an unfinished put: never while its writer lives. */
		if (now >= g->until && !mst_client_find(m, g->writer)) {
			*pp = g->next;
			release(m, g,
				"the release timeout passed, its writer gone");
		} else {
			pp = &g->next;
		}
	}
}

void mst_ghosts_count(const struct master *m, uint64_t *n, uint64_t *bytes)
{
	*n = *bytes = 0;
	for (const struct mst_ghost *g = m->ghosts; g; g = g->next) {
		(*n)++;
		*bytes += g->len;
	}
}

void mst_ghosts_free_all(struct master *m)
{
	while (m->ghosts) {
		struct mst_ghost *g = m->ghosts;

		m->ghosts = g->next;
		free(g->endpoint);
		free(g);
	}
}
