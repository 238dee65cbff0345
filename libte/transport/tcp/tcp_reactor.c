/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reactor: one thread waits for the requests of every idle served
 * connection (one epoll set) and answers small READs of plain registered
 * memory itself; a connection's own thread is woken only for anything
 * else (large or GPU requests, WRITEs, refusals, a partial header, EOF).
 *
 * Why: with a thread per connection, N clients asking small gets at once
 * wake N threads, each for a few microseconds of work; on a VM every
 * wake-up costs tens of microseconds and, with more clients than CPUs,
 * they queue behind each other. The reactor takes the requests of all
 * ready connections in one wake-up (as Redis's event loop does), and it
 * is the only thread that spins for the next request (mc_busy_poll.h),
 * not one per connection.
 *
 * Ownership: a connection is in the set only while its thread is parked
 * (tcp_reactor_park, EPOLLONESHOT); the reactor then owns its rx and
 * socket until it posts the thread's semaphore. An answer the socket does
 * not take at once is copied to the connection (c->pend) and sent by its
 * thread, bounded by the engine's timeout: a peer that stops reading
 * never blocks the reactor. One connection gets at most BUDGET bytes of
 * answers per wake-up before the next ready one.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mc_log.h"
#include "tcp_int.h"

#define INLINE_MAX (64u << 10) /* the largest READ answered here */
#define BUDGET (256u << 10) /* answers per connection and wake-up */
#define EVENTS 64

struct tcp_reactor {
	int epfd;
	int stop_fd; /* eventfd in the set, data.ptr NULL */
	pthread_t thread;
	_Atomic bool stop;
	struct mc_busy_poll bp;
	struct tcp_reply_batch b;
};

int tcp_reactor_park(struct tcp_transport *t, struct tcp_conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT,
				  .data.ptr = c };

	c->wake_rc = 0;
	if (epoll_ctl(t->reactor->epfd,
		      c->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev))
		return 0; /* not parked: the caller waits on its socket */
	c->in_epoll = true;
	while (sem_wait(&c->wake) && errno == EINTR)
		;
	return c->wake_rc;
}

/* The socket's bytes into c's empty rx: 1 read, 0 none now, < 0 EOF or
 * error. */
static int fill(struct tcp_conn *c)
{
	for (;;) {
		ssize_t n =
			recv(c->fd, c->rx.buf, sizeof(c->rx.buf), MSG_DONTWAIT);
		if (n > 0) {
			c->rx.off = 0;
			c->rx.len = (size_t)n;
			return 1;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno != EINTR)
			return errno == EAGAIN ? 0 : -errno;
	}
}

/* Answer what c has of small READs; then c goes back to the set (idle)
 * or to its thread. */
static void serve(struct tcp_transport *t, struct tcp_reactor *r,
		  struct tcp_conn *c)
{
	struct tcp_rx *rx = &c->rx;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT,
				  .data.ptr = c };
	uint64_t answered = 0;
	bool idle = false;
	struct tcp_hdr h;
	int rc = 0, frc;

	for (;;) {
		if (!tcp_rx_buffered(rx)) {
			if (answered + r->b.bytes >= BUDGET) {
				idle = true; /* the set wakes us again */
				break;
			}
			rc = fill(c);
			idle = rc == 0;
			if (rc <= 0)
				break;
			rc = 0;
		}
		if (tcp_rx_buffered(rx) < TCP_HDR_LEN ||
		    tcp_hdr_decode(rx->buf + rx->off, &h))
			break; /* its thread reads the rest, or refuses */
		if (h.size > INLINE_MAX ||
		    !tcp_batch_add(t, &r->b, &h, BUDGET)) {
			if (!r->b.n)
				break; /* its thread serves h */
			answered += r->b.bytes;
			rc = tcp_batch_flush(t, c, &r->b, false);
			if (rc || c->pend_len)
				break;
			continue; /* h again, on an empty batch */
		}
		rx->off += TCP_HDR_LEN;
		atomic_fetch_add(&t->base.reactor_requests, 1);
	}
	frc = tcp_batch_flush(t, c, &r->b, false);
	if (!rc)
		rc = frc;
	if (idle && !rc && !c->pend_len &&
	    !epoll_ctl(r->epfd, EPOLL_CTL_MOD, c->fd, &ev))
		return;
	c->wake_rc = rc;
	sem_post(&c->wake);
}

static void *reactor_main(void *arg)
{
	struct tcp_transport *t = arg;
	struct tcp_reactor *r = t->reactor;
	struct epoll_event ev[EVENTS];

	tcp_status_encode(TCP_STATUS_OK, r->b.ok);
	while (!atomic_load(&r->stop)) {
		int n;

		/* Spin first when allowed; the set is readable when any
		 * member is ready. */
		if (r->bp.max_us && mc_busy_poll_wait(&r->bp, r->epfd, -1))
			continue;
		n = epoll_wait(r->epfd, ev, EVENTS, r->bp.max_us ? 0 : -1);
		for (int i = 0; i < n; i++)
			if (ev[i].data.ptr)
				serve(t, r, ev[i].data.ptr);
	}
	return NULL;
}

int tcp_reactor_start(struct tcp_transport *t)
{
	const char *env = getenv("MC_TCP_REACTOR");
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	struct tcp_reactor *r;
	int rc;

	if (env && *env && !strtol(env, NULL, 10))
		return -ECANCELED;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	rc = r->epfd < 0 || r->stop_fd < 0 ? -errno : 0;
	if (!rc && epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->stop_fd, &ev))
		rc = -errno;
	mc_busy_poll_init(&r->bp, t->busy_poll_us);
	t->reactor = r;
	if (!rc)
		rc = -pthread_create(&r->thread, NULL, reactor_main, t);
	if (rc) {
		t->reactor = NULL;
		if (r->epfd >= 0)
			close(r->epfd);
		if (r->stop_fd >= 0)
			close(r->stop_fd);
		free(r);
	}
	return rc;
}

void tcp_reactor_stop(struct tcp_transport *t)
{
	struct tcp_reactor *r = t->reactor;
	uint64_t one = 1;

	if (!r)
		return;
	atomic_store(&r->stop, true);
	if (write(r->stop_fd, &one, sizeof(one)) < 0)
		mc_log_debug("te", "tcp: reactor stop: %m");
	pthread_join(r->thread, NULL);
	close(r->epfd);
	close(r->stop_fd);
	free(r);
	t->reactor = NULL;
}
