/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_sbuf.h
 * A growing text buffer for reports (Prometheus metrics, admin pages, the
 * mount's .mooncake/ files). Appends never fail visibly: the first
 * allocation failure sets oom and later appends do nothing, so a caller
 * checks once at the end. p is NUL-terminated whenever it is not NULL.
 * Start from { 0 }; the caller owns p (free it, also when oom is set).
 */
#ifndef MC_SBUF_H
#define MC_SBUF_H

#include <stdbool.h>
#include <stddef.h>

struct mc_sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

void mc_sbuf_printf(struct mc_sbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void mc_sbuf_put(struct mc_sbuf *b, const char *s, size_t n);

#endif
