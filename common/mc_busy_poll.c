/* SPDX-License-Identifier: Apache-2.0 */
/* Adaptive busy polling of a socket: see mc_busy_poll.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mc_busy_poll.h"
#include "mc_time.h"

static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static void table_open(void);

void mc_busy_poll_init(struct mc_busy_poll *bp, unsigned max_us)
{
	/* Not in the first wait: its time would count as waiting. */
	if (max_us)
		pthread_once(&table_once, table_open);
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

/* How many threads may spin at once on this host: one per online CPU, at
 * most SLOTS_MAX. */
#define SLOTS_MAX 64u
/* A slot taken longer ago than this was left by a thread that died
 * spinning (a spin lasts at most MC_BUSY_POLL max_us, 10 ms). */
#define STALE_MS 1000u

/* The host's spinner slots: a file of this user's in /dev/shm (512 bytes,
 * mode 0600), mapped by each of the user's processes that busy-polls.
 * Slot i is 0 when free, else the CLOCK_MONOTONIC ms at which a thread
 * took it (the clock is the host's, so every process reads it alike). */
struct spin_table {
	_Atomic uint64_t slot[SLOTS_MAX];
};

static struct spin_table *table; /* NULL: per-process count below */
static unsigned n_slots;
static char table_path[256];
/* Without the table: threads of this process spinning now. */
static _Atomic unsigned spinning;
/* This process's spins: taken, refused (every slot busy), crowded out
 * (more threads runnable than CPUs). */
static _Atomic uint64_t n_taken, n_refused, n_crowded;
/* /proc/loadavg (its 4th field: threads runnable on the host now), read
 * at most once per ms per process. */
static int loadavg_fd = -1;
static unsigned n_cpus;
static _Atomic uint64_t runnable_ms;
static _Atomic unsigned runnable;

static void table_open(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	struct stat st;
	void *p;
	int fd;

	n_cpus = n > 0 ? (unsigned)n : 1;
	loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	n_slots = n_cpus;
	if (n_slots > SLOTS_MAX)
		n_slots = SLOTS_MAX;
	const char *env = getenv("MC_BUSY_POLL_TABLE");

	if (env && *env)
		snprintf(table_path, sizeof(table_path), "%s", env);
	else
		snprintf(table_path, sizeof(table_path),
			 "/dev/shm/mc-spinners.%u", (unsigned)geteuid());
	fd = open(table_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	/* Ours and a plain file: nobody else can shrink it under us. */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077) ||
	    (st.st_size < (off_t)sizeof(*table) &&
	     ftruncate(fd, sizeof(*table)))) {
		close(fd);
		return;
	}
	p = mmap(NULL, sizeof(*table), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 0);
	close(fd);
	if (p != MAP_FAILED)
		table = p;
}

const char *mc_busy_poll_table(unsigned *slots)
{
	pthread_once(&table_once, table_open);
	*slots = n_slots;
	return table ? table_path : NULL;
}

void mc_busy_poll_counts(uint64_t *taken, uint64_t *refused, uint64_t *crowded)
{
	*taken = atomic_load(&n_taken);
	*refused = atomic_load(&n_refused);
	*crowded = atomic_load(&n_crowded);
}

/* More threads runnable on the host than it has CPUs (the caller is one
 * of them): a spinner would only take time from a thread that has work,
 * perhaps the one it waits for. */
static bool crowded(uint64_t now)
{
	char buf[128], *slash;
	ssize_t n;

	if (loadavg_fd < 0)
		return false;
	if (now != atomic_load_explicit(&runnable_ms, memory_order_relaxed)) {
		/* "0.50 0.40 0.30 3/180 12345": the 4th field's numerator. */
		n = pread(loadavg_fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			return false;
		buf[n] = 0;
		slash = strchr(buf, '/');
		if (!slash)
			return false;
		while (slash > buf && slash[-1] >= '0' && slash[-1] <= '9')
			slash--;
		atomic_store_explicit(&runnable, (unsigned)atoi(slash),
				      memory_order_relaxed);
		atomic_store_explicit(&runnable_ms, now, memory_order_relaxed);
	}
	return atomic_load_explicit(&runnable, memory_order_relaxed) > n_cpus;
}

/* A free (or stale) slot of the host's, taken: its index; -1 when all
 * are busy, -3 when the host is crowded. Without the table, this
 * process's count stands in: -2 taken. */
static int take(void)
{
	uint64_t now = mc_mono_ms() | 1; /* never 0 */

	pthread_once(&table_once, table_open);
	if (crowded(now))
		return -3;
	if (!table) {
		if (atomic_fetch_add(&spinning, 1) < n_slots)
			return -2;
		atomic_fetch_sub(&spinning, 1);
		return -1;
	}
	for (unsigned i = 0; i < n_slots; i++) {
		uint64_t v = atomic_load_explicit(&table->slot[i],
						  memory_order_relaxed);

		if ((!v || (now > v && now - v > STALE_MS)) &&
		    atomic_compare_exchange_strong(&table->slot[i], &v, now))
			return (int)i;
	}
	return -1;
}

static void give_back(int slot)
{
	if (slot >= 0)
		atomic_store(&table->slot[slot], 0);
	else if (slot == -2)
		atomic_fetch_sub(&spinning, 1);
}

/* Poll fd without sleeping until end_us: true once it is ready. */
static bool spin(int fd, uint64_t end_us)
{
	int slot = take();
	bool ok = false;

	if (slot == -1 || slot == -3) {
		/* The host's spinners are all busy, or its CPUs: sleep. */
		atomic_fetch_add_explicit(slot == -1 ? &n_refused : &n_crowded,
					  1, memory_order_relaxed);
		return false;
	}
	atomic_fetch_add_explicit(&n_taken, 1, memory_order_relaxed);
	do {
		ok = ready(fd);
		if (ok)
			break;
		sched_yield();
	} while (mc_mono_us() < end_us);
	give_back(slot);
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
