/* SPDX-License-Identifier: Apache-2.0 */
/* A growing text buffer: see mc_sbuf.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_sbuf.h"

/* Room for n more bytes and a NUL. */
static bool reserve(struct mc_sbuf *b, size_t n)
{
	size_t cap;
	char *np;

	if (b->oom)
		return false;
	if (b->len + n + 1 <= b->cap)
		return true;
	cap = (b->cap ? b->cap * 2 : 4096) + n;
	np = realloc(b->p, cap);
	if (!np) {
		b->oom = true;
		return false;
	}
	b->p = np;
	b->cap = cap;
	return true;
}

void mc_sbuf_printf(struct mc_sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	/* At most twice: the second time the buffer has room for it all. */
	for (size_t want = 0; reserve(b, want);) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		want = (size_t)n;
	}
}

void mc_sbuf_put(struct mc_sbuf *b, const char *s, size_t n)
{
	if (!reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}
