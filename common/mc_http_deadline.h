/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A request's deadline in the HTTP server (mc_http_server.c): a
 * connection must have sent a whole request within the deadline of its
 * opening, or of the end of the request before it (keep-alive), else it
 * is shut down. The library's own timeout counts idle time only, so a
 * client that sent a header line every few seconds (slowloris) kept its
 * slot for ever, and a thousand of them kept every other client out. A
 * keep-alive connection idle for longer than the deadline is closed too.
 *
 * The same watch keeps the server's connections within max_conns: a new
 * connection beyond it shuts down the one that has waited longest for a
 * request (idle keep-alive, or not yet sent a whole request), never one
 * whose request is being handled or answered, as the RPC server does. A
 * thousand idle connections re-opened as fast as they are closed kept
 * every other client out (the library refuses new ones at its limit).
 */
#ifndef MC_HTTP_DEADLINE_H
#define MC_HTTP_DEADLINE_H

#include <stdbool.h>
#include <stdint.h>

struct mc_http_deadlines;
struct mc_http_watched;

/** Start the watcher (one thread); name for its log lines; max_conns
 *  connections at most (0: no limit). NULL: none. */
struct mc_http_deadlines *mc_http_deadlines_start(const char *name,
						  unsigned deadline_ms,
						  unsigned max_conns);
void mc_http_deadlines_stop(struct mc_http_deadlines *d);

/** A new connection on fd, armed (its first request is due); over
 *  max_conns, the longest-waiting other one is shut down. NULL when out
 *  of memory (then not watched). */
struct mc_http_watched *mc_http_watch(struct mc_http_deadlines *d, int fd,
				      const char *peer);
/** Shut down the connection that has waited longest for a request (why:
 *  for the log line). False when all are being served. */
bool mc_http_deadlines_evict(struct mc_http_deadlines *d, const char *why);
/** A request ended: armed again for the next. */
void mc_http_watch_arm(struct mc_http_deadlines *d, struct mc_http_watched *w);
/** The request arrived whole (its handler runs): disarmed. */
void mc_http_watch_disarm(struct mc_http_deadlines *d,
			  struct mc_http_watched *w);
/** The connection closed: forgotten. */
void mc_http_unwatch(struct mc_http_deadlines *d, struct mc_http_watched *w);

#endif
