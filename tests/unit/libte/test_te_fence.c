/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Writes that must not land late (docs/design.md "Writes into placed
 * space"), with two real engines in this process over loopback TCP
 * (MC_FORCE_TCP, one connection per peer): a batch's write window keeps
 * the pieces of a write that could not start in time from going at all
 * (the target's memory past them stays as it was), and leaves reads
 * alone; te_fence_inbound() ends the connections peers had open, and
 * their next requests go on new ones.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/te.h"
#include "te_test_engine.h"

#define LEN (64u << 20)
#define MiB (1u << 20)

struct pair {
	struct te_engine *a, *b; /* a writes into b's memory */
	unsigned char *mem, *local;
	struct te_segment *seg;
};

static void pair_up(struct pair *p)
{
	char err[256] = "";

	setenv("MC_FORCE_TCP", "1", 1);
	setenv("MC_TCP_LANES_PER_PEER", "1", 1);
	p->a = engine();
	p->b = engine();
	p->mem = aligned_alloc(4096, LEN);
	p->local = aligned_alloc(4096, LEN);
	cr_assert(p->mem && p->local);
	memset(p->mem, 0, LEN);
	memset(p->local, 0xab, LEN);
	cr_assert_eq(te_register(p->b, p->mem, LEN, "*", true), 0);
	cr_assert_eq(te_register(p->a, p->local, LEN, "*", false), 0);
	cr_assert_eq(te_segment_open(p->a, te_engine_name(p->b), &p->seg, err,
				     sizeof(err)),
		     0, "%s", err);
}

static void pair_down(struct pair *p)
{
	te_segment_close(p->seg);
	cr_assert_eq(te_unregister(p->b, p->mem), 0);
	cr_assert_eq(te_unregister(p->a, p->local), 0);
	te_engine_destroy(p->a);
	te_engine_destroy(p->b);
	free(p->mem);
	free(p->local);
}

/* One request of len bytes at off through a batch with window_ms; its
 * status. */
static struct te_status one(struct pair *p, enum te_opcode op, uint64_t off,
			    uint64_t len, unsigned window_ms)
{
	struct te_request r = { .opcode = op,
				.local = p->local + off,
				.target = p->seg,
				.target_addr =
					(uint64_t)(uintptr_t)p->mem + off,
				.length = len };
	struct te_status st;
	struct te_batch *b;

	cr_assert_eq(te_batch_create(p->a, 1, &b), 0);
	te_batch_set_write_window(b, window_ms);
	cr_assert_eq(te_batch_submit(b, &r, 1), 0);
	cr_assert_eq(te_batch_wait(b, 10000), 0);
	cr_assert_eq(te_batch_status(b, 0, &st), 0);
	cr_assert_eq(te_batch_destroy(b), 0);
	return st;
}

/* Connections peers have open to eng. */
static uint64_t served(struct te_engine *eng)
{
	struct te_counters c;

	cr_assert_eq(te_counters(eng, "tcp", &c), 0);
	return c.connections;
}

/* one() after a fence: the first request may meet the ended connection
 * (-ECONNRESET or -EPIPE: the store's transfers go again once); the next
 * one reconnects. */
static struct te_status after_fence(struct pair *p, enum te_opcode op,
				    uint64_t len)
{
	struct te_status st = one(p, op, 0, len, 400);

	if (st.status != TE_COMPLETED) {
		cr_assert(st.error == -ECONNRESET || st.error == -EPIPE,
			  "error %d", st.error);
		st = one(p, op, 0, len, 400);
	}
	return st;
}

static size_t count_byte(const unsigned char *m, size_t len, unsigned char c)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++)
		n += m[i] == c;
	return n;
}

Test(te_fence, write_window_keeps_late_pieces_from_going)
{
	struct pair p;
	struct te_status st;

	pair_up(&p);
	/* Connect first, so the window is not spent on connecting. */
	st = one(&p, TE_WRITE, 0, 4096, 0);
	cr_assert_eq(st.status, TE_COMPLETED);
	memset(p.mem, 0, LEN);
	/* 64 slices of 1 MiB on one connection, 8 in flight: the later
	 * ones cannot start within 1 ms of the submission. */
	st = one(&p, TE_WRITE, 0, LEN, 1);
	cr_assert_eq(st.status, TE_FAILED);
	cr_assert_eq(st.error, -ECONNABORTED, "error %d", st.error);
	/* The last slices never left (how many went before depends on
	 * the machine: none on a busy one). */
	cr_assert_eq(count_byte(p.mem + LEN - 8 * MiB, 8 * MiB, 0), 8 * MiB);
	/* Without a window the same write goes through whole. */
	st = one(&p, TE_WRITE, 0, LEN, 0);
	cr_assert_eq(st.status, TE_COMPLETED, "error %d", st.error);
	cr_assert_eq(memcmp(p.mem, p.local, LEN), 0);
	pair_down(&p);
}

Test(te_fence, write_window_leaves_reads_alone)
{
	struct pair p;
	struct te_status st;

	pair_up(&p);
	memset(p.mem, 0x5c, LEN);
	st = one(&p, TE_READ, 0, LEN, 1);
	cr_assert_eq(st.status, TE_COMPLETED, "error %d", st.error);
	cr_assert_eq(memcmp(p.mem, p.local, LEN), 0);
	pair_down(&p);
}

Test(te_fence, fenced_connections_end_and_peers_come_back)
{
	struct pair p;
	struct te_status st;

	pair_up(&p);
	st = one(&p, TE_WRITE, 0, MiB, 0);
	cr_assert_eq(st.status, TE_COMPLETED);
	cr_assert_eq(served(p.b), 1);
	cr_assert_eq(te_fence_inbound(p.b, 1000), 0);
	cr_assert_eq(served(p.b), 0);
	/* The peer's connection was ended: it comes back on a new one. */
	memset(p.local, 0x31, MiB);
	st = after_fence(&p, TE_WRITE, MiB);
	cr_assert_eq(st.status, TE_COMPLETED, "error %d", st.error);
	cr_assert_eq(memcmp(p.mem, p.local, MiB), 0);
	cr_assert_eq(served(p.b), 1);
	/* Again (the new connection ends too); the engine doing the
	 * writing, which serves nothing here, can be fenced as well. */
	cr_assert_eq(te_fence_inbound(p.b, 1000), 0);
	cr_assert_eq(served(p.b), 0);
	cr_assert_eq(te_fence_inbound(p.a, 1000), 0);
	st = after_fence(&p, TE_READ, MiB);
	cr_assert_eq(st.status, TE_COMPLETED, "error %d", st.error);
	pair_down(&p);
}
