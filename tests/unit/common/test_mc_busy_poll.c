/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/mc_busy_poll.c over a socketpair: a ready socket
 * returns at once, a silent one times out, a hang-up counts as readable,
 * data sent while the waiter spins is seen, and the window shrinks on
 * long waits and grows back on short ones; the host-wide table of spinner
 * slots refuses a spin when full, frees stale slots and is shared with a
 * child process. No timing is asserted beyond "returned" and "timed
 * out".
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mc_busy_poll.h"

static int sv[2];

/* A private table of spinner slots (MC_BUSY_POLL_TABLE), so that the
 * host's spinners in tests running beside these do not take its slots;
 * each test runs in its own process, before the library opened any. */
static char private_path[64];

static void private_table_fini(void)
{
	unlink(private_path);
}

static void pair_setup(void)
{
	snprintf(private_path, sizeof(private_path),
		 "/dev/shm/mc-spinners-test.%d", (int)getpid());
	cr_assert_eq(setenv("MC_BUSY_POLL_TABLE", private_path, 1), 0);
	atexit(private_table_fini);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

static void pair_teardown(void)
{
	close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
}

TestSuite(mc_busy_poll, .init = pair_setup, .fini = pair_teardown);

/* Waits for an uncrowded moment, 1 ms apart: a loaded CI host (ctest -j2
 * beside daemons) stayed crowded for over 0.5 s; the wait ends at the
 * first such moment, so only a host that never has one takes long. */
#define CROWDED_TRIES 30000

static unsigned window(struct mc_busy_poll *bp)
{
	return atomic_load(&bp->window_us);
}

/* A wait on a ready socket that spun: from window w, again while the host
 * was too crowded to spin (tests run beside this one). */
static void ready_wait_spun(struct mc_busy_poll *bp, unsigned w)
{
	uint64_t t, r, c0, c1;

	for (int i = 0; i < CROWDED_TRIES; i++) {
		atomic_store(&bp->window_us, w);
		mc_busy_poll_counts(&t, &r, &c0);
		cr_assert_eq(mc_busy_poll_wait(bp, sv[0], 1000), 0);
		mc_busy_poll_counts(&t, &r, &c1);
		if (c1 == c0)
			return;
		usleep(1000);
	}
	cr_assert_fail("the host stayed crowded for 30 s");
}

Test(mc_busy_poll, ready_socket_returns_at_once)
{
	struct mc_busy_poll bp;

	mc_busy_poll_init(&bp, 50);
	cr_assert_eq(window(&bp), 50);
	cr_assert_eq(write(sv[1], "x", 1), 1);
	ready_wait_spun(&bp, 50);
	/* Peeking left the byte for the reader. */
	char c = 0;
	cr_assert_eq(read(sv[0], &c, 1), 1);
	cr_assert_eq(c, 'x');
	cr_assert_eq(window(&bp), 50, "a hit keeps the window");
}

Test(mc_busy_poll, silent_socket_times_out_and_shrinks_the_window)
{
	struct mc_busy_poll bp;

	mc_busy_poll_init(&bp, 40);
	cr_assert_eq(mc_busy_poll_wait(&bp, sv[0], 20), -ETIMEDOUT);
	cr_assert_eq(window(&bp), 20, "a wait over max_us halves it");
	for (int i = 0; i < 8; i++)
		cr_assert_eq(mc_busy_poll_wait(&bp, sv[0], 5), -ETIMEDOUT);
	cr_assert_eq(window(&bp), 0, "long waits turn spinning off");
}

Test(mc_busy_poll, short_waits_grow_the_window_back)
{
	struct mc_busy_poll bp;

	mc_busy_poll_init(&bp, 1000);
	atomic_store(&bp.window_us, 0);
	/* Data is already there: the poll(2) returns within max_us. */
	cr_assert_eq(write(sv[1], "x", 1), 1);
	cr_assert_eq(mc_busy_poll_wait(&bp, sv[0], 1000), 0);
	cr_assert_eq(window(&bp), 250, "grows from max_us / 4");
	ready_wait_spun(&bp, 600);
	cr_assert_eq(window(&bp), 600, "a hit while spinning keeps it");
}

Test(mc_busy_poll, hang_up_is_readable)
{
	struct mc_busy_poll bp;

	mc_busy_poll_init(&bp, 50);
	close(sv[1]);
	sv[1] = -1;
	cr_assert_eq(mc_busy_poll_wait(&bp, sv[0], 1000), 0);
	char c;
	cr_assert_eq(read(sv[0], &c, 1), 0, "the read reports the hang-up");
}

Test(mc_busy_poll, off_never_spins_but_waits)
{
	struct mc_busy_poll bp;

	mc_busy_poll_init(&bp, 0);
	cr_assert_eq(mc_busy_poll_wait(&bp, sv[0], 10), -ETIMEDOUT);
	cr_assert_eq(write(sv[1], "x", 1), 1);
	cr_assert_eq(mc_busy_poll_wait(&bp, sv[0], 1000), 0);
	cr_assert_eq(window(&bp), 0);
}

static void *late_writer(void *arg)
{
	usleep(2000);
	cr_assert_eq(write(*(int *)arg, "y", 1), 1);
	return NULL;
}

Test(mc_busy_poll, data_arriving_later_is_seen)
{
	struct mc_busy_poll bp;
	pthread_t t;

	/* A window longer than the writer's delay: seen while spinning. */
	mc_busy_poll_init(&bp, 200000);
	cr_assert_eq(pthread_create(&t, NULL, late_writer, &sv[1]), 0);
	cr_assert_eq(mc_busy_poll_wait(&bp, sv[0], 5000), 0);
	pthread_join(t, NULL);
	char c = 0;
	cr_assert_eq(read(sv[0], &c, 1), 1);
	cr_assert_eq(c, 'y');
}

/* ---- the host's spinner slots ------------------------------------------ */

static _Atomic uint64_t *map_table(unsigned *slots)
{
	const char *path;
	void *p;
	int fd;

	path = mc_busy_poll_table(slots);

	cr_assert_str_eq(path, private_path, "no private spinner table");
	fd = open(path, O_RDWR | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	p = mmap(NULL, 64 * sizeof(uint64_t), PROT_READ | PROT_WRITE,
		 MAP_SHARED, fd, 0);
	close(fd);
	cr_assert_neq(p, MAP_FAILED);
	return p;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One wait on the silent socket with a fresh window; returns what it
 * did: 't' spun, 'r' refused (slots busy), 'c' crowded out. */
static char one_wait(struct mc_busy_poll *bp)
{
	uint64_t t0, r0, c0, t1, r1, c1;

	mc_busy_poll_counts(&t0, &r0, &c0);
	atomic_store(&bp->window_us, 200);
	cr_assert_eq(mc_busy_poll_wait(bp, sv[0], 2), -ETIMEDOUT);
	mc_busy_poll_counts(&t1, &r1, &c1);
	cr_assert_eq((t1 - t0) + (r1 - r0) + (c1 - c0), 1);
	return t1 > t0 ? 't' : r1 > r0 ? 'r' : 'c';
}

/* Until the host is not crowded (tests run beside this one). */
static char wait_uncrowded(struct mc_busy_poll *bp)
{
	char w = 'c';

	for (int i = 0; i < CROWDED_TRIES && w == 'c'; i++)
		if ((w = one_wait(bp)) == 'c')
			usleep(1000);
	cr_assert_neq(w, 'c', "the host stayed crowded for 30 s");
	return w;
}

/* Every slot busy (as other processes' spinners would hold them): the
 * wait sleeps at once and counts a refusal; slots left by threads that
 * died spinning (taken 2 s ago) are taken again; the slot goes back to
 * 0 after the spin. */
Test(mc_busy_poll, host_slots_cap_spinning_across_processes)
{
	struct mc_busy_poll bp;
	unsigned n;
	_Atomic uint64_t *t = map_table(&n);

	cr_assert(n >= 1 && n <= 64);
	mc_busy_poll_init(&bp, 200);
	for (int i = 0; i < 3; i++) {
		for (unsigned j = 0; j < n; j++)
			atomic_store(&t[j], now_ms());
		cr_assert_eq(wait_uncrowded(&bp), 'r',
			     "spun with every slot taken");
	}
	for (unsigned j = 0; j < n; j++)
		atomic_store(&t[j], now_ms() - 2000);
	cr_assert_eq(wait_uncrowded(&bp), 't', "a stale slot was not taken");
	unsigned freed = 0;
	for (unsigned i = 0; i < n; i++)
		freed += atomic_load(&t[i]) == 0;
	cr_assert_eq(freed, 1, "the slot taken is given back");
	for (unsigned i = 0; i < n; i++)
		atomic_store(&t[i], 0);
	munmap((void *)t, 64 * sizeof(uint64_t));
}

/* A child process spinning holds a slot the parent sees taken. */
Test(mc_busy_poll, a_child_spinning_holds_a_host_slot)
{
	unsigned n;
	_Atomic uint64_t *t = map_table(&n);
	int sync[2];
	pid_t pid;

	cr_assert_eq(pipe(sync), 0);
	for (unsigned i = 1; i < n; i++) /* all but slot 0 busy */
		atomic_store(&t[i], now_ms());
	atomic_store(&t[0], 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct mc_busy_poll bp;

		mc_busy_poll_init(&bp, 10000);
		(void)!write(sync[1], "s", 1);
		/* Spins 10 ms per wait (when the host is not crowded), until
		 * the parent has seen it. */
		for (int i = 0; i < 1000; i++) {
			atomic_store(&bp.window_us, 10000);
			(void)!mc_busy_poll_wait(&bp, sv[0], 10);
		}
		_exit(0);
	}
	char c;
	cr_assert_eq(read(sync[0], &c, 1), 1);
	bool seen = false;
	for (int i = 0; i < 50000 && !seen; i++) {
		seen = atomic_load(&t[0]) != 0;
		if (!seen)
			usleep(100);
	}
	kill(pid, SIGKILL);
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(seen, "the child's spin took no host slot");
	for (unsigned i = 0; i < n; i++)
		atomic_store(&t[i], 0);
	munmap((void *)t, 64 * sizeof(uint64_t));
	close(sync[0]);
	close(sync[1]);
}
