/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Owner tags (te_register_owned, te_request.owner): two real engines in
 * this process, the target's memory tagged with an owner. A request for
 * that owner reads it, over tcp and through shared memory; one for
 * another owner ends MC_ESEGMOVED and moves nothing (the store's guard
 * against a holder restarted under the same engine name), also through
 * te_read_pipe; a request without an owner reads anything, as before; a
 * peer's memory registered without a tag (an engine from before tags, in
 * a rolling upgrade) is read by owned requests too, this engine's own is
 * not; bad tags are -EINVAL.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mooncake/mc_err.h"
#include "mooncake/te.h"
#include "te_test_engine.h"

#define LEN (1u << 20)

/* Read 4 KiB at at of the segment opened for owner (NULL: a plain
 * segment) into local: the request's error (0: it moved the bytes). */
static int read_as(struct te_engine *a, const char *name, const char *owner,
		   const unsigned char *at, unsigned char *local)
{
	struct te_request req = { .opcode = TE_READ,
				  .local = local,
				  .target_addr = (uint64_t)(uintptr_t)at,
				  .length = 4096 };
	struct te_segment *seg = NULL;
	struct te_status st = { 0 };
	struct te_batch *b = NULL;
	char err[256] = "";

	cr_assert_eq(te_segment_open(a, name, &seg, err, sizeof(err)), 0, "%s",
		     err);
	req.target = seg;
	req.owner = owner;
	memset(local, 0, 4096);
	cr_assert_eq(te_batch_create(a, 1, &b), 0);
	cr_assert_eq(te_batch_transfer(b, &req, 1, 5000), 0);
	cr_assert_eq(te_batch_status(b, 0, &st), 0);
	cr_assert_eq(te_batch_destroy(b), 0);
	te_segment_close(seg);
	if (st.status == TE_COMPLETED) {
		cr_assert_eq(st.transferred, 4096);
		cr_assert_eq(memcmp(local, at, 4096), 0);
		return 0;
	}
	cr_assert_eq(st.status, TE_FAILED);
	for (size_t i = 0; i < 4096; i++)
		cr_assert_eq(local[i], 0, "a refused read moved bytes");
	return st.error;
}

static void owners(const char *force_tcp, bool shm)
{
	struct te_engine *a, *b;
	unsigned char *mem, *local = aligned_alloc(4096, 4096);
	void *m = NULL;

	if (force_tcp)
		setenv("MC_FORCE_TCP", force_tcp, 1);
	else
		unsetenv("MC_FORCE_TCP");
	a = engine();
	b = engine();
	if (shm)
		cr_assert_eq(te_mem_alloc(b, LEN, NULL, &m), 0);
	else
		m = aligned_alloc(4096, LEN);
	mem = m;
	for (size_t i = 0; i < LEN; i++)
		mem[i] = (unsigned char)(i * 13 + 1);
	cr_assert_eq(te_register_owned(b, mem, LEN, "cpu:0", true, "seg-b"), 0);
	cr_assert_eq(te_register(a, local, 4096, "*", false), 0);

	cr_expect_eq(read_as(a, te_engine_name(b), "seg-b", mem + 8192, local),
		     0);
	cr_expect_eq(read_as(a, te_engine_name(b), NULL, mem + 8192, local), 0);
	cr_expect_eq(read_as(a, te_engine_name(b), "seg-c", mem + 8192, local),
		     MC_ESEGMOVED);
	/* This engine's own memory is held to its tags too. */
	cr_expect_eq(read_as(b, te_engine_name(b), "seg-b", mem + 8192,
			     mem + LEN - 4096),
		     0);
	cr_expect_eq(read_as(b, te_engine_name(b), "seg-c", mem + 8192,
			     mem + LEN - 4096),
		     MC_ESEGMOVED);

	/* Untagged memory (a peer from before tags) is not held to them. */
	unsigned char *plain = aligned_alloc(4096, 4 * 4096);

	cr_assert(plain);
	memset(plain, 0x5a, 4 * 4096);
	cr_assert_eq(te_register(b, plain, 4 * 4096, "cpu:0", true), 0);
	cr_expect_eq(
		read_as(a, te_engine_name(b), "seg-b", plain + 4096, local), 0);
	/* This engine's own memory needs the tag. */
	cr_expect_eq(read_as(b, te_engine_name(b), "seg-b", plain + 4096,
			     mem + LEN - 4096),
		     MC_ESEGMOVED);
	cr_assert_eq(te_unregister(b, plain), 0);
	free(plain);

	/* A read into a pipe is held to the owner too. */
	struct te_segment *seg = NULL;
	char err[256] = "";
	int fd[2];

	cr_assert_eq(pipe(fd), 0);
	cr_assert_eq(te_segment_open(a, te_engine_name(b), &seg, err,
				     sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(te_read_pipe(a, seg, (uint64_t)(uintptr_t)mem + 8192, 4096,
				  "seg-c", fd[1], -1),
		     MC_ESEGMOVED);
	te_segment_close(seg);
	close(fd[0]);
	close(fd[1]);

	cr_assert_eq(te_unregister(a, local), 0);
	cr_assert_eq(te_unregister(b, mem), 0);
	if (shm)
		te_mem_free(b, mem);
	else
		free(mem);
	te_engine_destroy(a);
	te_engine_destroy(b);
	free(local);
}

Test(te_owner, over_tcp)
{
	owners("1", false);
}

Test(te_owner, through_shared_memory)
{
	owners(NULL, true);
}

Test(te_owner, bad_tags_are_refused)
{
	struct te_engine *a = engine();
	char owner[TE_OWNER_LEN + 1];
	void *m = aligned_alloc(4096, 4096);

	memset(owner, 'x', TE_OWNER_LEN);
	owner[TE_OWNER_LEN] = '\0';
	cr_expect_eq(te_register_owned(a, m, 4096, "*", true, owner), -EINVAL);
	te_engine_destroy(a);
	free(m);
}
