/* SPDX-License-Identifier: Apache-2.0 */
/* Adaptive busy polling of a socket: see mc_busy_poll.h. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mc_busy_poll.h"
#include "mc_time.h"

void mc_busy_poll_init(struct mc_busy_poll *bp, unsigned max_us)
{
	bp->max_us = max_us;
	atomic_init(&bp->window_us, max_us);
}

/* true once fd has a byte, a hang-up or an error for read(2) to report. */
static bool ready(int fd)
{
	char b;
	ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	return n >= 0 ||
	       (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void adapt(struct mc_busy_poll *bp, uint64_t waited_us)
{
	unsigned w = atomic_load_explicit(&bp->window_us, memory_order_relaxed);

	if (waited_us <= bp->max_us) {
		if (w >= bp->max_us)
			return;
		w = w ? w * 2 : (bp->max_us + 3) / 4;
		if (w > bp->max_us)
			w = bp->max_us;
	} else {
		if (!w)
			return;
		w /= 2;
	}
	atomic_store_explicit(&bp->window_us, w, memory_order_relaxed);
}

/* Threads of this process busy polling now, and how many may. */
static _Atomic unsigned spinning;
static _Atomic unsigned max_spinning;

static unsigned spinner_limit(void)
{
	unsigned m = atomic_load_explicit(&max_spinning, memory_order_relaxed);
	long n;

	if (m)
		return m;
	n = sysconf(_SC_NPROCESSORS_ONLN);
	m = n >= 4 ? (unsigned)(n / 2) : 1;
	atomic_store_explicit(&max_spinning, m, memory_order_relaxed);
	return m;
}

/* Poll fd without sleeping until end_us: true once it is ready. */
static bool spin(int fd, uint64_t end_us)
{
	bool ok = false;

	if (atomic_fetch_add(&spinning, 1) < spinner_limit()) {
		do {
			ok = ready(fd);
			if (ok)
				break;
			sched_yield();
		} while (mc_mono_us() < end_us);
	}
	atomic_fetch_sub(&spinning, 1);
	return ok;
}

int mc_busy_poll_wait(struct mc_busy_poll *bp, int fd, int timeout_ms)
{
	unsigned w = atomic_load_explicit(&bp->window_us, memory_order_relaxed);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t t0 = 0;
	int n;

	if (bp->max_us) {
		t0 = mc_mono_us();
		if (w && spin(fd, t0 + w))
			return 0;
	}
	do
		n = poll(&p, 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (t0)
		adapt(bp, mc_mono_us() - t0);
	return n ? 0 : -ETIMEDOUT;
}
