/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/mc_busy_poll.c over a socketpair: a ready socket
 * returns at once, a silent one times out, a hang-up counts as readable,
 * data sent while the waiter spins is seen, and the window shrinks on
 * long waits and grows back on short ones. No timing is asserted beyond
 * "returned" and "timed out".
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mc_busy_poll.h"

static int sv[2];

static void pair_setup(void)
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

static void pair_teardown(void)
{
	close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
}

TestSuite(mc_busy_poll, .init = pair_setup, .fini = pair_teardown);

static unsigned window(struct mc_busy_poll *bp)
{
	return atomic_load(&bp->window_us);
}

Test(mc_busy_poll, ready_socket_returns_at_once)
{
	struct mc_busy_poll bp;

	mc_busy_poll_init(&bp, 50);
	cr_assert_eq(window(&bp), 50);
	cr_assert_eq(write(sv[1], "x", 1), 1);
	cr_assert_eq(mc_busy_poll_wait(&bp, sv[0], 1000), 0);
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
	atomic_store(&bp.window_us, 600);
	cr_assert_eq(mc_busy_poll_wait(&bp, sv[0], 1000), 0);
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
