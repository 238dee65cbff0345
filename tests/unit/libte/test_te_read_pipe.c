/* SPDX-License-Identifier: Apache-2.0 */
/*
 * te_read_pipe(): two real engines in this process talk over loopback TCP
 * (MC_FORCE_TCP); reads of the target's registered memory land in a pipe
 * byte for byte; a refused range, a pipe too small for the payload and a
 * peer that the transport cannot reach this way each give their code,
 * and the connection stays in step for the reads after them.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "mooncake/mc_err.h"
#include "mooncake/te.h"
#include "te_test_engine.h"

#define TARGET_LEN (4u << 20)

struct pair {
	struct te_engine *a, *b; /* a reads b's memory */
	unsigned char *mem, *local;
	bool shm; /* mem from te_mem_alloc (same-host peers map it) */
	struct te_segment *seg;
};

static void pair_up(struct pair *p, const char *force_tcp, bool shm)
{
	char err[256] = "";
	void *m = NULL;

	if (force_tcp)
		setenv("MC_FORCE_TCP", force_tcp, 1);
	else
		unsetenv("MC_FORCE_TCP");
	p->a = engine();
	p->b = engine();
	p->shm = shm;
	if (shm)
		cr_assert_eq(te_mem_alloc(p->b, TARGET_LEN, NULL, &m), 0);
	else
		m = aligned_alloc(4096, TARGET_LEN);
	p->mem = m;
	p->local = aligned_alloc(4096, 1u << 20);
	cr_assert(p->mem && p->local);
	for (size_t i = 0; i < TARGET_LEN; i++)
		p->mem[i] = (unsigned char)(i * 7 + i / 4096);
	cr_assert_eq(te_register(p->b, p->mem, TARGET_LEN, "*", true), 0);
	cr_assert_eq(te_register(p->a, p->local, 1u << 20, "*", false), 0);
	cr_assert_eq(te_segment_open(p->a, te_engine_name(p->b), &p->seg, err,
				     sizeof(err)),
		     0, "%s", err);
}

static void pair_down(struct pair *p)
{
	te_segment_close(p->seg);
	cr_assert_eq(te_unregister(p->b, p->mem), 0);
	if (p->shm)
		te_mem_free(p->b, p->mem);
	else
		free(p->mem);
	te_engine_destroy(p->a);
	te_engine_destroy(p->b);
	free(p->local);
}

/* A pipe of at least size bytes: {read end, write end}. Without
 * CAP_SYS_RESOURCE a pipe holds at most fs.pipe-max-size (1 MiB by
 * default), so the reads below stay within 1 MiB. */
static void make_pipe(int fd[2], int size)
{
	cr_assert_eq(pipe2(fd, O_CLOEXEC | O_NONBLOCK), 0);
	cr_assert_geq(fcntl(fd[1], F_SETPIPE_SZ, size), size);
}

static size_t held(int rfd)
{
	int n = -1;

	cr_assert_eq(ioctl(rfd, FIONREAD, &n), 0);
	return (size_t)n;
}

/* te_read_pipe, retried while the engine has no idle connection yet (the
 * first transfer to a peer connects its lanes). */
static int read_pipe(struct pair *p, uint64_t off, uint64_t len, int wfd)
{
	int rc = -EAGAIN;

	for (int i = 0; i < 200 && rc == -EAGAIN; i++) {
		rc = te_read_pipe(p->a, p->seg,
				  (uint64_t)(uintptr_t)p->mem + off, len, NULL,
				  wfd, -1);
		if (rc == -EAGAIN) {
			/* A batch read connects the lanes. */
			struct te_batch *b;
			struct te_request r = {
				.opcode = TE_READ,
				.local = p->local,
				.target = p->seg,
				.target_addr = (uint64_t)(uintptr_t)p->mem,
				.length = 4096,
			};

			cr_assert_eq(te_batch_create(p->a, 1, &b), 0);
			cr_assert_eq(te_batch_transfer(b, &r, 1, 5000), 0);
			cr_assert_eq(te_batch_destroy(b), 0);
			usleep(10000);
		}
	}
	return rc;
}

/* The next len bytes of the pipe equal the target's at off. */
static void expect_bytes(struct pair *p, int rfd, uint64_t off, size_t len)
{
	unsigned char *got = malloc(len);
	size_t n = 0;

	cr_assert_not_null(got);
	while (n < len) {
		ssize_t k = read(rfd, got + n, len - n);
		cr_assert_gt(k, 0);
		n += (size_t)k;
	}
	cr_assert_eq(memcmp(got, p->mem + off, len), 0, "len %zu at %llu", len,
		     (unsigned long long)off);
	free(got);
}

Test(te_read_pipe, bytes_land_in_the_pipe)
{
	static const uint64_t cases[][2] = {
		{ 0, 1 },
		{ 4095, 4097 },
		{ 12345, 300000 },
		{ 1u << 20, 768u << 10 },
		{ TARGET_LEN - 65536, 65536 },
	};
	struct pair p;
	int fd[2];

	pair_up(&p, "1", false);
	make_pipe(fd, 1 << 20);
	for (unsigned r = 0; r < 2; r++) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			cr_assert_eq(read_pipe(&p, cases[i][0], cases[i][1],
					       fd[1]),
				     0, "case %zu", i);
			cr_assert_eq(held(fd[0]), cases[i][1]);
			expect_bytes(&p, fd[0], cases[i][0],
				     (size_t)cases[i][1]);
		}
	}
	cr_assert_eq(te_read_pipe(p.a, p.seg, (uint64_t)(uintptr_t)p.mem, 0,
				  NULL, fd[1], -1),
		     0);
	cr_assert_eq(te_read_pipe(p.a, p.seg, (uint64_t)(uintptr_t)p.mem, 1,
				  NULL, -1, -1),
		     -EINVAL);
	close(fd[0]);
	close(fd[1]);
	pair_down(&p);
}

Test(te_read_pipe, refused_range_and_full_pipe_keep_the_connection)
{
	struct pair p;
	int small[2], fd[2];

	pair_up(&p, "1", false);
	make_pipe(fd, 1 << 20);
	/* Outside the registered buffer: refused, nothing in the pipe. */
	cr_assert_eq(read_pipe(&p, TARGET_LEN, 4096, fd[1]), MC_ENOTREG);
	cr_assert_eq(held(fd[0]), 0);
	cr_assert_eq(read_pipe(&p, 100, 200000, fd[1]), 0);
	expect_bytes(&p, fd[0], 100, 200000);
	/* A pipe of 64 KiB cannot take 1 MiB: -ENOBUFS, the rest of the
	 * payload is read off the socket, so the next reply is whole. */
	make_pipe(small, 65536);
	cr_assert_eq(read_pipe(&p, 0, 1u << 20, small[1]), -ENOBUFS);
	/* A slot may hold more than a page (the socket's fragments). */
	cr_assert_lt(held(small[0]), 1u << 20);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(read_pipe(&p, 777, 500000, fd[1]), 0);
		expect_bytes(&p, fd[0], 777, 500000);
	}
	close(small[0]);
	close(small[1]);
	close(fd[0]);
	close(fd[1]);
	pair_down(&p);
}

Test(te_read_pipe, shared_memory_peers_say_not_supported)
{
	struct pair p;
	int fd[2];

	/* Same host without MC_FORCE_TCP: shared memory, no pipe path;
	 * nothing is added and the caller reads into memory. */
	pair_up(&p, NULL, true);
	make_pipe(fd, 1 << 20);
	cr_assert_eq(te_read_pipe(p.a, p.seg, (uint64_t)(uintptr_t)p.mem, 65536,
				  NULL, fd[1], -1),
		     MC_ENOTSUPPORTED);
	cr_assert_eq(held(fd[0]), 0);
	close(fd[0]);
	close(fd[1]);
	pair_down(&p);
}
