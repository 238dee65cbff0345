/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Blocking-style socket I/O on non-blocking sockets, bounded by a
 * deadline: poll() waits, short reads and writes continue, EINTR retries.
 * -ETIMEDOUT when the deadline passes, -ECONNRESET on EOF.
 */
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp_int.h"

static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
	struct pollfd p = { .fd = fd, .events = events };
	int ms = -1, rc;

	if (deadline_ns) {
		uint64_t now = te__now_ns();
		if (now >= deadline_ns)
			return -ETIMEDOUT;
		ms = (int)((deadline_ns - now + 999999) / 1000000);
	}
	do {
		rc = poll(&p, 1, ms);
	} while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return -errno;
	if (rc == 0)
		return -ETIMEDOUT;
	return 0;
}

int tcp_io_send(int fd, const void *buf, size_t len, uint64_t deadline_ns)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			return -errno;
		int rc = wait_fd(fd, POLLOUT, deadline_ns);
		if (rc)
			return rc;
	}
	return 0;
}

int tcp_io_recv(int fd, void *buf, size_t len, uint64_t deadline_ns)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		int rc = wait_fd(fd, POLLIN, deadline_ns);
		if (rc)
			return rc;
	}
	return 0;
}
