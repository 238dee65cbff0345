/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A request's deadline in the HTTP server (mc_http_server.c): a
 * connection that began a request (its first bytes, or a request line)
 * and has not sent all of it within the deadline is shut down. The
 * library's own timeout counts idle time only, so a client that sends a
 * header line every few seconds (slowloris) kept its slot for ever, and
 * a thousand of them kept every other client out. Idle keep-alive
 * connections are left to that timeout.
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

/** A new connection on fd, armed (its first request has begun). NULL
 *  when out of memory (then not watched). */
struct mc_http_watched *mc_http_watch(struct mc_http_deadlines *d, int fd,
				      const char *peer);
/** The connection began a request: armed again. */
void mc_http_watch_arm(struct mc_http_deadlines *d, struct mc_http_watched *w);
/** The request arrived whole (its handler runs): disarmed. */
void mc_http_watch_disarm(struct mc_http_deadlines *d,
			  struct mc_http_watched *w);
/** The connection closed: forgotten. */
void mc_http_unwatch(struct mc_http_deadlines *d, struct mc_http_watched *w);

#endif
