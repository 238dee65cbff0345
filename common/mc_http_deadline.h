/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A request's deadline in the HTTP server (mc_http_server.c): a
 * connection must have sent a whole request within the deadline of its
 * opening, or of the end of the request before it (keep-alive), else it
 * is shut down. The library's own timeout counts idle time only, so a
 * client that sent a header line every few seconds (slowloris) kept its
 * slot for ever, and a thousand of them kept every other client out. A
 * keep-alive connection idle for longer than the deadline is closed too.
 */
#ifndef MC_HTTP_DEADLINE_H
#define MC_HTTP_DEADLINE_H

#include <stdint.h>

struct mc_http_deadlines;
struct mc_http_watched;

/** Start the watcher (one thread); name for its log lines. NULL: none. */
struct mc_http_deadlines *mc_http_deadlines_start(const char *name,
						  unsigned deadline_ms);
void mc_http_deadlines_stop(struct mc_http_deadlines *d);

/** A new connection on fd, armed (its first request is due). NULL when
 *  out of memory (then not watched). */
struct mc_http_watched *mc_http_watch(struct mc_http_deadlines *d, int fd,
				      const char *peer);
/** A request ended: armed again for the next. */
void mc_http_watch_arm(struct mc_http_deadlines *d, struct mc_http_watched *w);
/** The request arrived whole (its handler runs): disarmed. */
void mc_http_watch_disarm(struct mc_http_deadlines *d,
			  struct mc_http_watched *w);
/** The connection closed: forgotten. */
void mc_http_unwatch(struct mc_http_deadlines *d, struct mc_http_watched *w);

#endif
