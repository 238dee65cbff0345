/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memcpy_bench: the baseline of transfer_engine_bench --protocol shm. One
 * thread copies --block_size chunks between a --buffer_size working set
 * (the target's buffer) and a batch_size x block_size one (an initiator
 * thread's buffer), both pre-faulted, walking them in the order the
 * initiator's requests do: "read" copies big -> small, "write" small ->
 * big. --hugepages=false backs the big buffer with 4 KiB pages, as the
 * /dev/shm memory of te_mem_alloc() is when shmem huge pages are off.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench_util.h"
#include "mc_daemon.h"
#include "te_bench.h"

struct mcp_cfg {
	char *operation;
	uint64_t block_size;
	uint64_t buffer_size;
	int64_t batch_size;
	int64_t duration;
	bool hugepages;
	bool json;
};

#define OPT(n, t, f, d, lo, hi, h)                                           \
	{                                                                    \
		.name = n, .type = t, .offset = offsetof(struct mcp_cfg, f), \
		.def = d, .min = lo, .max = hi, .help = h                    \
	}

static const struct mc_opt mcp_opts[] = {
	OPT("operation", MC_OPT_STRING, operation, "read", 0, 0,
	    "read (buffer -> batch area) or write (batch area -> buffer)."),
	OPT("block_size", MC_OPT_SIZE, block_size, "65536", 1, 1073741824.0,
	    "Bytes per memcpy."),
	OPT("buffer_size", MC_OPT_SIZE, buffer_size, "1GiB", 4096,
	    1099511627776.0, "The big working set (the target's buffer)."),
	OPT("batch_size", MC_OPT_INT, batch_size, "128", 1, 1048576,
	    "The small working set is batch_size x block_size."),
	OPT("duration", MC_OPT_INT, duration, "10", 1, 86400,
	    "Seconds to copy."),
	OPT("hugepages", MC_OPT_BOOL, hugepages, "true", 0, 0,
	    "Ask for transparent huge pages for the big buffer."),
	OPT("json", MC_OPT_BOOL, json, "false", 0, 0,
	    "Print one JSON summary line."),
};

static const struct mc_cfg_spec mcp_spec = {
	.prog = "memcpy_bench",
	.summary = "Single-thread memcpy throughput over a pre-faulted "
		   "working set (the baseline of the shm transport).",
	.opts = mcp_opts,
	.n_opts = sizeof(mcp_opts) / sizeof(mcp_opts[0]),
	.strict = true,
};

static char *alloc_big(size_t len, bool huge)
{
	char *p;

	if (huge)
		return teb_alloc(len);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	(void)madvise(p, len, MADV_NOHUGEPAGE);
	memset(p, 0, len);
	return p;
}

static void free_big(char *p, size_t len, bool huge)
{
	if (huge)
		teb_free(p, len);
	else if (p)
		munmap(p, len);
}

int main(int argc, char **argv)
{
	struct mcp_cfg c = { 0 };
	uint64_t bytes = 0, k = 0, t0, t1, deadline, nslots, stride, n;
	size_t block, small_len;
	char *big, *small;
	bool rd;
	int code;

	if (mc_daemon_load_config(&mcp_spec, &c, argc, argv, &code))
		return code;
	rd = !strcmp(c.operation, "read");
	if ((!rd && strcmp(c.operation, "write")) ||
	    c.block_size > c.buffer_size) {
		fprintf(stderr, "memcpy_bench: --operation read|write, and "
				"--block_size <= --buffer_size\n");
		mc_cfg_release(&mcp_spec, &c);
		return MC_EXIT_USAGE;
	}
	block = (size_t)c.block_size;
	n = (uint64_t)c.batch_size;
	small_len = block * n;
	stride = (c.block_size + TEB_SLOT_ALIGN - 1) & ~(uint64_t)255;
	nslots = (c.buffer_size - c.block_size) / stride + 1;
	big = alloc_big(c.buffer_size, c.hugepages);
	small = teb_alloc(small_len);
	if (!big || !small) {
		fprintf(stderr, "memcpy_bench: out of memory\n");
		free_big(big, c.buffer_size, c.hugepages);
		teb_free(small, small_len);
		mc_cfg_release(&mcp_spec, &c);
		return MC_EXIT_FAILURE;
	}
	teb_fill_pattern(big, c.buffer_size, 0);
	t0 = bench_now_ns();
	deadline = t0 + (uint64_t)c.duration * 1000000000ull;
	/* The clock is read once per batch_size copies, like a batch. */
	do {
		for (uint64_t i = 0; i < n; i++, k++) {
			char *b = big + (k % nslots) * stride;
			char *s = small + i * block;

			if (rd)
				memcpy(s, b, block);
			else
				memcpy(b, s, block);
			/* The copies must happen: nothing reads them. */
			__asm__ volatile("" : : "r"(b), "r"(s) : "memory");
		}
		bytes += n * block;
		t1 = bench_now_ns();
	} while (t1 < deadline);
	if (c.json)
		printf("{\"tool\": \"memcpy_bench\", \"operation\": \"%s\", "
		       "\"block_size\": %" PRIu64 ", \"hugepages\": %s, "
		       "\"duration_s\": %.3f, \"bytes\": %" PRIu64
		       ", \"gbps\": %.4f}\n",
		       c.operation, c.block_size,
		       c.hugepages ? "true" : "false", (double)(t1 - t0) / 1e9,
		       bytes, (double)bytes / ((double)(t1 - t0)));
	else
		printf("memcpy_bench: %s %" PRIu64
		       "-byte blocks: %.2f GB/s over %.2f s\n",
		       c.operation, c.block_size,
		       (double)bytes / ((double)(t1 - t0)),
		       (double)(t1 - t0) / 1e9);
	free_big(big, c.buffer_size, c.hugepages);
	teb_free(small, small_len);
	mc_cfg_release(&mcp_spec, &c);
	return MC_EXIT_OK;
}
