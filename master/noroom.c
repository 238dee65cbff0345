/* SPDX-License-Identifier: Apache-2.0 */
/* Why a put found no room (noroom.h). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "alloc.h"
#include "master.h"
#include "mc_compiler.h"
#include "mc_log.h"
#include "mst_util.h"
#include "noroom.h"
#include "place.h"
#include "segments.h"
#include "slots.h"

#define LOG_EVERY_MS 1000

uint64_t mst_largest_free(const struct master *m)
{
	uint64_t best = 0;

	for (const struct mst_segment *s = m->segments; s; s = s->next) {
		uint64_t l;

		if (!mst_seg_placeable(s))
			continue;
		l = mc_alloc_largest_free(s->alloc);
		if (l > best)
			best = l;
	}
	return best;
}

void mst_given_up_count(const struct master *m, uint64_t *n, uint64_t *bytes)
{
	*n = *bytes = 0;
	for (const struct mst_object *o = m->releasing; o; o = o->onext) {
		(*n)++;
		*bytes += o->size * o->n_repl;
	}
}

/* Given-up puts: how many wait for a writer still known (it may still
 * write: until it ends them), and in how many ms the first of the others
 * is freed (the release timeout after its start; UINT64_MAX: none). */
static void given_up_due(struct master *m, uint64_t now, uint64_t *waiting,
			 uint64_t *first_ms)
{
	*waiting = 0;
	*first_ms = UINT64_MAX;
	for (const struct mst_object *o = m->releasing; o; o = o->onext) {
		uint64_t due = o->put_start + m->cfg.release_timeout_ms;

		if (mst_client_find(m, o->writer))
			(*waiting)++;
		else if ((due > now ? due - now : 0) < *first_ms)
			*first_ms = due > now ? due - now : 0;
	}
}

/* Orphans: count, bytes, and when the last read lease ends (ms from now;
 * holds are renewed, so a held one has no end). */
static void orphans_due(const struct master *m, uint64_t now, uint64_t *n,
			uint64_t *bytes, uint64_t *lease_ms, uint64_t *held)
{
	*n = *bytes = *lease_ms = *held = 0;
	for (const struct mst_object *o = m->orphans; o; o = o->onext) {
		(*n)++;
		*bytes += o->size * o->n_repl;
		*held += o->holds != 0;
		if (o->read_lease_until > now &&
		    o->read_lease_until - now > *lease_ms)
			*lease_ms = o->read_lease_until - now;
	}
}

/* Append to buf (of size cap, used *len). */
static void add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
	MC_PRINTF(4, 5);
static void add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*len >= cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *len, cap - *len, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len += (size_t)n < cap - *len ? (size_t)n : cap - *len - 1;
}

void mst_no_room_note(struct master *m, uint64_t size)
{
	uint64_t now = mst_now(), gn, gb, gw, gfirst, on, ob, olease, oheld;
	uint64_t pn = 0, pb = 0, sn, sb;
	char held[768] = "";
	size_t len = 0;

	m->no_room.quiet++;
	if (m->no_room.at && now - m->no_room.at < LOG_EVERY_MS)
		return;
	mst_given_up_count(m, &gn, &gb);
	given_up_due(m, now, &gw, &gfirst);
	orphans_due(m, now, &on, &ob, &olease, &oheld);
	for (const struct mst_object *o = m->pend_head; o; o = o->lru_next) {
		pn++;
		pb += o->size * o->n_repl;
	}
	mst_slots_count(m, &sn, &sb);
	if (gn) {
		add(held, sizeof(held), &len,
		    "; %" PRIu64 " bytes in %" PRIu64
		    " unfinished puts given up (writer gone or pre-empted)",
		    gb, gn);
		if (gw)
			add(held, sizeof(held), &len,
			    ", %" PRIu64 " of them until their writer, still "
			    "known, ends them",
			    gw);
		if (gfirst != UINT64_MAX)
			add(held, sizeof(held), &len,
			    ", freed %" PRIu64 " s after their start "
			    "(--put_start_release_timeout_sec), the first in "
			    "%" PRIu64 " s",
			    m->cfg.release_timeout_ms / 1000,
			    (gfirst + 999) / 1000);
	}
	if (on)
		add(held, sizeof(held), &len,
		    "; %" PRIu64 " bytes in %" PRIu64
		    " removed objects still read (orphans: %" PRIu64
		    " held open, read leases end within %" PRIu64 " s)",
		    ob, on, oheld, (olease + 999) / 1000);
	if (pn)
		add(held, sizeof(held), &len,
		    "; %" PRIu64 " bytes in %" PRIu64 " puts in progress", pb,
		    pn);
	if (sn)
		add(held, sizeof(held), &len,
		    "; %" PRIu64 " bytes in %" PRIu64
		    " slots reserved for clients' next puts",
		    sb, sn);
	if (len)
		held[0] = ':';
	mc_log_warn("master",
		    "no room for a put of %" PRIu64 " bytes (%" PRIu64
		    " such puts since the last line): the longest free range "
		    "is %" PRIu64 " bytes, %" PRIu64 " of %" PRIu64
		    " bytes free, and eviction cannot make one that long (an "
		    "object is one block on one segment). Not evictable%s%s"
		    "pinned, leased or held objects",
		    size, m->no_room.quiet, mst_largest_free(m),
		    m->capacity > m->allocated ? m->capacity - m->allocated : 0,
		    m->capacity, held, len ? "; and " : ": ");
	m->no_room.at = now;
	m->no_room.quiet = 0;
}
