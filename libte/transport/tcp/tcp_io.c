/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Blocking-style socket I/O on non-blocking sockets, bounded by a
 * deadline: poll() waits, short reads and writes continue, EINTR retries.
 * -ETIMEDOUT when the deadline passes, -ECONNRESET on EOF.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "mc_busy_poll.h"
#include "mc_time.h"
#include "tcp_int.h"

static int wait_fd_ev(int fd, short events, uint64_t deadline_ns,
		      short *revents)
{
	struct pollfd p = { .fd = fd, .events = events };
	int ms = -1, rc;

	if (deadline_ns) {
		uint64_t now = mc_mono_ns();
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
	*revents = p.revents;
	return 0;
}

static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
	short rev;

	return wait_fd_ev(fd, events, deadline_ns, &rev);
}

/* Until fd can take more bytes. A peer that closed its side while we
 * wait has ended the connection (neither end of ours half-closes one):
 * without this a sender whose peer closed with its window shut would
 * wait out its deadline (a fenced server, te_fence_inbound). */
static int wait_out(int fd, uint64_t deadline_ns)
{
	short rev = 0;
	int rc = wait_fd_ev(fd, POLLOUT | POLLRDHUP, deadline_ns, &rev);

	if (!rc && (rev & POLLRDHUP) && !(rev & POLLOUT))
		return -ECONNRESET;
	return rc;
}

/* iovecs with as few sendmsg() calls as the socket allows: a small
 * header rides in the same segment as its payload (one wake-up for the
 * peer instead of two: TCP_NODELAY sends a lone header on its own), and a
 * batch's requests leave in one write. iov is consumed. */
int tcp_io_sendv(int fd, struct iovec *iov, int cnt, uint64_t deadline_ns)
{
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)cnt };

	while (m.msg_iovlen && !m.msg_iov->iov_len) {
		m.msg_iov++;
		m.msg_iovlen--;
	}
	while (m.msg_iovlen) {
		ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			size_t k = (size_t)n;
			/* Skip what was sent and empty iovecs (whose base
			 * may be NULL: no arithmetic on it). */
			while (m.msg_iovlen) {
				struct iovec *v = m.msg_iov;
				if (v->iov_len > k) {
					if (k) {
						v->iov_base =
							(char *)v->iov_base + k;
						v->iov_len -= k;
					}
					break;
				}
				k -= v->iov_len;
				m.msg_iov++;
				m.msg_iovlen--;
			}
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			return -errno;
		int rc = wait_out(fd, deadline_ns);
		if (rc)
			return rc;
	}
	return 0;
}

int tcp_io_send2(int fd, const void *a, size_t alen, const void *b, size_t blen,
		 uint64_t deadline_ns)
{
	struct iovec iov[2] = { { (void *)a, alen }, { (void *)b, blen } };

	return tcp_io_sendv(fd, iov, 2, deadline_ns);
}

int tcp_io_send(int fd, const void *buf, size_t len, uint64_t deadline_ns)
{
	return tcp_io_send2(fd, buf, len, NULL, 0, deadline_ns);
}

/*
 * Large payloads: wake the reader once per RCVLOWAT_MAX bytes instead of
 * once per arriving segment (SO_RCVLOWAT). Never more than what is still
 * expected, or poll() would wait for bytes that never come.
 */
#define RCVLOWAT_MIN (64u << 10)
#define RCVLOWAT_MAX (256u << 10)

static void set_lowat(int fd, int *cur, size_t left)
{
	int want = left >= RCVLOWAT_MIN ?
			   (int)(left < RCVLOWAT_MAX ? left : RCVLOWAT_MAX) :
			   1;

	if (want != *cur &&
	    !setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof(want)))
		*cur = want;
}

/* Where the bytes read off a socket go: memory, or a pipe (splice). */
struct sink {
	char *p; /* NULL: the pipe */
	int pipe_fd;
};

static ssize_t take(int fd, struct sink *k, uint64_t len)
{
	size_t want = len < (1u << 30) ? (size_t)len : (1u << 30);
	ssize_t n;

	if (!k->p)
		return splice(fd, NULL, k->pipe_fd, NULL, want,
			      SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	n = recv(fd, k->p, want, MSG_DONTWAIT);
	if (n > 0)
		k->p += n;
	return n;
}

/* Is the pipe's write end full (no room for even a page)? */
static bool pipe_full(int pipe_fd)
{
	struct pollfd p = { .fd = pipe_fd, .events = POLLOUT };

	return poll(&p, 1, 0) == 0;
}

/* len bytes off the socket into k; -ENOBUFS (a pipe only) when k filled
 * up first: EAGAIN right after poll() said the socket is readable. */
static int take_all(int fd, struct sink *k, uint64_t len, uint64_t deadline_ns,
		    uint64_t *left)
{
	int lowat = 1, rc = 0;
	bool waited = false;

	while (len) {
		ssize_t n = take(fd, k, len);
		if (n > 0) {
			len -= (uint64_t)n;
			waited = false;
			continue;
		}
		if (n == 0) {
			rc = -ECONNRESET;
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN) {
			rc = -errno;
			break;
		}
		if (waited && !k->p && pipe_full(k->pipe_fd)) {
			rc = -ENOBUFS;
			break;
		}
		set_lowat(fd, &lowat, len);
		rc = wait_fd(fd, POLLIN, deadline_ns);
		if (rc)
			break;
		waited = true;
	}
	if (lowat != 1)
		set_lowat(fd, &lowat, 0);
	*left = len;
	return rc;
}

int tcp_io_recv(int fd, void *buf, size_t len, uint64_t deadline_ns)
{
	struct sink k = { .p = buf };
	uint64_t left;

	return take_all(fd, &k, len, deadline_ns, &left);
}

/* Read and drop the len bytes of a reply that has no room left: the next
 * reply on the connection starts right after them. */
static int discard(int fd, uint64_t len, uint64_t deadline_ns)
{
	size_t cap = len < (64u << 10) ? (size_t)len : (64u << 10);
	char *buf = malloc(cap);
	int rc = buf ? 0 : -ENOMEM;

	while (!rc && len) {
		size_t k = len < cap ? (size_t)len : cap;

		rc = tcp_io_recv(fd, buf, k, deadline_ns);
		len -= k;
	}
	free(buf);
	return rc;
}

int tcp_io_splice_in(int fd, int pipe_fd, uint64_t len, uint64_t deadline_ns)
{
	struct sink k = { .pipe_fd = pipe_fd };
	uint64_t left;
	int rc = take_all(fd, &k, len, deadline_ns, &left);

	if (rc == -ENOBUFS) {
		rc = discard(fd, left, deadline_ns);
		if (!rc)
			rc = -ENOBUFS; /* the connection is still in step */
	}
	return rc;
}

/* Wait for bytes (spinning first when rx->bp allows), then read what
 * the socket holds into the empty buffer. */
static int rx_fill(struct tcp_rx *rx, uint64_t deadline_ns)
{
	rx->off = rx->len = 0;
	for (;;) {
		ssize_t n =
			recv(rx->fd, rx->buf, sizeof(rx->buf), MSG_DONTWAIT);
		int ms = -1, rc;

		if (n > 0) {
			rx->len = (size_t)n;
			return 0;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		if (deadline_ns) {
			uint64_t now = mc_mono_ns();
			if (now >= deadline_ns)
				return -ETIMEDOUT;
			ms = (int)((deadline_ns - now + 999999) / 1000000);
		}
		rc = rx->bp ? mc_busy_poll_wait(rx->bp, rx->fd, ms) :
			      wait_fd(rx->fd, POLLIN, deadline_ns);
		if (rc)
			return rc;
	}
}

int tcp_rx_read(struct tcp_rx *rx, void *dst, size_t n, uint64_t deadline_ns)
{
	char *p = dst;

	while (n) {
		size_t k;

		if (rx->off == rx->len) {
			/* Large remainders go straight into place. */
			if (n >= sizeof(rx->buf) / 2)
				return tcp_io_recv(rx->fd, p, n, deadline_ns);
			int rc = rx_fill(rx, deadline_ns);
			if (rc)
				return rc;
		}
		k = rx->len - rx->off < n ? rx->len - rx->off : n;
		memcpy(p, rx->buf + rx->off, k);
		rx->off += k;
		p += k;
		n -= k;
	}
	return 0;
}
