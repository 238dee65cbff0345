/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_net.h
 * Socket helpers that handle CLOEXEC, EINTR and short I/O once, so callers
 * never do (Redis anet.c). All return 0 or a negative errno.
 *
 * Listeners bind exactly the address they are given: "0.0.0.0" or "::"
 * must be asked for explicitly; there is no implicit wildcard. "::" is
 * both families (dual stack); "0.0.0.0" is IPv4 only.
 */
#ifndef MC_NET_H
#define MC_NET_H

#include <stdbool.h>
#include <stddef.h>

#include "mc_compiler.h"

/**
 * Create a listening TCP socket on host:port (port 0 = ephemeral).
 * @param nonblock  set O_NONBLOCK on the listener
 * @param fd_out    the socket, CLOEXEC, SO_REUSEADDR
 * @param port_out  the port actually bound (may be NULL)
 * @return 0, -EADDRINUSE, -EADDRNOTAVAIL, -ENOENT (host did not resolve)...
 */
int mc_net_listen(const char *host, int port, int backlog, int nonblock,
		  int *fd_out, int *port_out) MC_MUST_CHECK;

/** Connect with a timeout (ms, 0 = none); the socket is CLOEXEC, blocking. */
int mc_net_connect(const char *host, int port, int timeout_ms,
		   int *fd_out) MC_MUST_CHECK;

/** Write all of buf: retries EINTR and short writes, never raises SIGPIPE. */
int mc_net_write_all(int fd, const void *buf, size_t len) MC_MUST_CHECK;

/** Read exactly len bytes; -ECONNRESET when the peer closes early. */
int mc_net_read_all(int fd, void *buf, size_t len) MC_MUST_CHECK;
/** Read at least min and at most cap bytes (cap >= min): as many as the
 *  socket holds once min arrived, in as few reads as it takes (one, when
 *  they came together). *got: how many. 0 or -errno, -ECONNRESET at EOF. */
int mc_net_read_some(int fd, void *buf, size_t min, size_t cap,
		     size_t *got) MC_MUST_CHECK;

/** Best effort: failing only costs latency. */
int mc_net_set_nodelay(int fd);
/** TCP keepalive after 30 s idle, 3 probes 10 s apart: a connection whose
 *  peer host died or was cut off ends within about a minute (a server
 *  thread blocked reading it is freed). 0 or -errno. */
int mc_net_set_keepalive(int fd);

/** Send and receive timeouts in ms (0 = none). */
int mc_net_set_timeouts(int fd, int timeout_ms) MC_MUST_CHECK;

/** "ip:port" ("[v6]:port") of an address accept() gave ("?:0" for other families). */
struct sockaddr_storage;
void mc_net_addr_name(const struct sockaddr_storage *ss, char *out, size_t len);
/** "ip:port" of a connected socket's peer ("?:0" when unknown), for logs. */
void mc_net_peer_name(int fd, char *out, size_t len);

/**
 * The first address of family (AF_INET, AF_INET6: not link-local) of
 * interface ifname that is up, as text; ifname NULL: of the first
 * non-loopback interface that has one. -ENODEV when there is no such
 * interface, -EADDRNOTAVAIL when it has no such address.
 */
int mc_net_if_addr(const char *ifname, int family, char *out,
		   size_t len) MC_MUST_CHECK;

/**
 * host as peers may be given it: a wildcard ("0.0.0.0", "::"), which
 * on another host means that host, becomes this host's first
 * non-loopback address of its family (mc_net_if_addr); anything else is
 * copied. 0, -EADDRNOTAVAIL (no such address: ask for one), -ENAMETOOLONG.
 */
int mc_net_advertised(const char *host, char *out, size_t len) MC_MUST_CHECK;

/** Does host name this host only: does it resolve, and to loopback
 *  addresses only (127.0.0.0/8, ::1)? */
bool mc_net_is_loopback(const char *host);

/**
 * This host's address that packets to host:port leave from (the route's
 * source; nothing is sent), as text. 0, MC_EHOSTNAME (host does not
 * resolve) or -errno (-ENETUNREACH: no route).
 */
int mc_net_source_addr(const char *host, int port, char *out,
		       size_t len) MC_MUST_CHECK;

#endif
