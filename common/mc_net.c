/* SPDX-License-Identifier: Apache-2.0 */
/* Socket helpers: see mc_net.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mc_net.h"
#include "mc_parse.h"
#include "mooncake/mc_err.h"

static int resolve(const char *host, int port, int passive,
		   struct addrinfo **res)
{
	struct addrinfo hints = { 0 };
	char portstr[8];
	int rc;

	if (!host || !*host)
		return -EINVAL;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = passive ? AI_PASSIVE : 0;
	snprintf(portstr, sizeof(portstr), "%d", port);
	rc = getaddrinfo(host, portstr, &hints, res);
	if (rc == EAI_SYSTEM)
		return -errno;
	if (rc == EAI_NONAME || rc == EAI_FAIL || rc == EAI_NODATA)
		return MC_EHOSTNAME;
	if (rc)
		return -EADDRNOTAVAIL;
	return 0;
}

int mc_net_listen(const char *host, int port, int backlog, int nonblock,
		  int *fd_out, int *port_out)
{
	struct addrinfo *res, *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd = -1, rc, one = 1;
	/* "::" is every address of both families (dual stack, as Go and
	 * Linux's default have it): a pod of a dual-stack cluster serves its
	 * IPv4 and IPv6 peers on one port. Any other IPv6 address is itself
	 * only. */
	int v6only = strcmp(host ? host : "", "::") != 0;

	if (port < 0 || port > 65535)
		return -EINVAL;
	rc = resolve(host, port, 1, &res);
	if (rc)
		return rc;
	rc = -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family,
			    ai->ai_socktype | SOCK_CLOEXEC |
				    (nonblock ? SOCK_NONBLOCK : 0),
			    ai->ai_protocol);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
				 sizeof(one));
		if (ai->ai_family == AF_INET6)
			(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only,
					 sizeof(v6only));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, backlog) == 0)
			break;
		rc = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return rc;
	if (port_out) {
		if (getsockname(fd, (struct sockaddr *)&ss, &sl)) {
			rc = -errno;
			close(fd);
			return rc;
		}
		*port_out =
			ss.ss_family == AF_INET6 ?
				ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) :
				ntohs(((struct sockaddr_in *)&ss)->sin_port);
	}
	*fd_out = fd;
	return 0;
}

static int wait_connected(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	socklen_t len = sizeof(int);
	int rc, soerr = 0;

	do {
		rc = poll(&p, 1, timeout_ms > 0 ? timeout_ms : -1);
	} while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return -errno;
	if (rc == 0)
		return -ETIMEDOUT;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len))
		return -errno;
	return -soerr;
}

int mc_net_connect(const char *host, int port, int timeout_ms, int *fd_out)
{
	struct addrinfo *res, *ai;
	int fd = -1, rc;

	rc = resolve(host, port, 0, &res);
	if (rc)
		return rc;
	rc = -ECONNREFUSED;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family,
			    ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    ai->ai_protocol);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			rc = 0;
		else if (errno == EINPROGRESS)
			rc = wait_connected(fd, timeout_ms);
		else
			rc = -errno;
		if (rc == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return rc;
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}

int mc_net_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOTSOCK) {
				n = write(fd, p, len);
				if (n < 0 && errno == EINTR)
					continue;
				if (n < 0)
					return -errno;
			} else {
				return -errno;
			}
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int mc_net_read_some(int fd, void *buf, size_t min, size_t cap, size_t *got)
{
	char *p = buf;
	size_t have = 0;

	while (have < min) {
		ssize_t n = read(fd, p + have, cap - have);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ECONNRESET;
		have += (size_t)n;
	}
	*got = have;
	return 0;
}

int mc_net_read_all(int fd, void *buf, size_t len)
{
	size_t got;

	return mc_net_read_some(fd, buf, len, len, &got);
}

int mc_net_set_nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		return -errno;
	return 0;
}

int mc_net_set_keepalive(int fd)
{
	int one = 1, idle = 30, intvl = 10, cnt = 3;

	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)))
		return -errno;
	return 0;
}

int mc_net_set_timeouts(int fd, int timeout_ms)
{
	struct timeval tv = { .tv_sec = timeout_ms / 1000,
			      .tv_usec = (timeout_ms % 1000) * 1000 };

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		return -errno;
	return 0;
}

void mc_net_addr_name(const struct sockaddr_storage *ss, char *out, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		port = ntohs(a->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		port = ntohs(a->sin6_port);
	}
	(void)mc_fmt_hostport(out, len, ip, port);
}

void mc_net_peer_name(int fd, char *out, size_t len)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t sl = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &sl))
		ss.ss_family = AF_UNSPEC;
	mc_net_addr_name(&ss, out, len);
}

/* fe80::/10: needs a zone to be reached, so never advertised. */
static bool link_local6(const struct in6_addr *a)
{
	return a->s6_addr[0] == 0xfe && (a->s6_addr[1] & 0xc0) == 0x80;
}

int mc_net_if_addr(const char *ifname, int family, char *out, size_t len)
{
	struct ifaddrs *ifs, *i;
	int rc = ifname ? -ENODEV : -EADDRNOTAVAIL;

	if (getifaddrs(&ifs))
		return -errno;
	for (i = ifs; i; i = i->ifa_next) {
		const void *a;

		if (ifname ? strcmp(i->ifa_name, ifname) :
			     (i->ifa_flags & IFF_LOOPBACK) != 0)
			continue;
		rc = -EADDRNOTAVAIL; /* the interface is there */
		if (!i->ifa_addr || i->ifa_addr->sa_family != family ||
		    !(i->ifa_flags & IFF_UP))
			continue;
		if (family == AF_INET6) {
			const struct sockaddr_in6 *s6 =
				(const void *)i->ifa_addr;

			if (link_local6(&s6->sin6_addr))
				continue;
			a = &s6->sin6_addr;
		} else {
			a = &((const struct sockaddr_in *)(const void *)
				      i->ifa_addr)
				     ->sin_addr;
		}
		if (inet_ntop(family, a, out, (socklen_t)len)) {
			rc = 0;
			break;
		}
	}
	freeifaddrs(ifs);
	return rc;
}

int mc_net_advertised(const char *host, char *out, size_t len)
{
	if (!strcmp(host, "0.0.0.0"))
		return mc_net_if_addr(NULL, AF_INET, out, len);
	if (!strcmp(host, "::"))
		return mc_net_if_addr(NULL, AF_INET6, out, len);
	if ((size_t)snprintf(out, len, "%s", host) >= len)
		return -ENAMETOOLONG;
	return 0;
}

static bool loopback_addr(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)sa;
		return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)sa;
		const uint8_t *b = a->sin6_addr.s6_addr;
		return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
		       (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && b[12] == 127);
	}
	return false;
}

bool mc_net_is_loopback(const char *host)
{
	struct addrinfo *res, *ai;
	bool all = true;

	if (resolve(host, 0, 0, &res))
		return false;
	for (ai = res; ai && all; ai = ai->ai_next)
		all = loopback_addr(ai->ai_addr);
	freeaddrinfo(res);
	return all;
}

int mc_net_source_addr(const char *host, int port, char *out, size_t len)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t sl = sizeof(ss);
	struct addrinfo *res;
	const void *a;
	int fd, rc = resolve(host, port ? port : 9, 0, &res);

	if (rc)
		return rc;
	/* A datagram socket's connect() only picks the route: nothing is
	 * sent. */
	fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl))
		rc = -errno;
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
	if (rc)
		return rc;
	a = ss.ss_family == AF_INET6 ?
		    (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr :
		    (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
	if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	if (!inet_ntop(ss.ss_family, a, out, (socklen_t)len))
		return -errno;
	return 0;
}
