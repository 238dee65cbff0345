/* SPDX-License-Identifier: Apache-2.0 */
/*
 * te_gpu: libte with CUDA device memory, through whichever driver library
 * libte loads (MC_CUDA_LIBRARY: the tests' stand-in, tests/tools/
 * fake_cuda.c; on a GPU machine, unset: libcuda.so.1). Cases, each
 * printing "ok <case> ..." or "FAIL <case>: why" (exit 1):
 *
 *   out    device -> a te_peer's host buffer (WRITE), read back into
 *          another device buffer (READ), compared through the host;
 *   serve  a second engine in this process registers device memory
 *          remote-accessible; the first WRITEs and READs it over tcp
 *          (the server side's bounce buffer);
 *   local  host <-> own device memory through the local transport;
 *   timing (--bench) 1 MiB and 16 MiB WRITEs from device and from host
 *          memory to the peer: MB/s of each and the ratio;
 *   faults (--faults, the stand-in only) the driver fails a copy or a
 *          stream's synchronize, first or in the middle of a transfer of
 *          several chunks, both ways: the transfer ends FAILED with the
 *          driver's error, no sooner than its chunks in flight, and the
 *          next one, unarmed, moves every byte (nothing leaked: run with
 *          MC_GPU_STAGE_BUFFERS=1, a pinned buffer kept would hang it).
 *
 *   te_gpu --target NAME --target_addr A --target_size N [--bench]
 *   te_gpu --expect_refusal   (no driver: a "cuda:0" tag is refused,
 *                              "cpu:0" is not)
 *   te_gpu --serve_device N --ready FILE
 *          registers N bytes of device memory (VALUE byte i = i * 7 + 1)
 *          remote-accessible, writes {"name","addr","size"} to FILE and
 *          serves until stdin closes;
 *   te_gpu --ipc_target NAME --ipc_addr A --ipc_size N
 *          case ipc: another process's device memory on this host (the
 *          cuda_ipc transport): checks its bytes, writes host and device
 *          memory into it and reads them back; requires that cuda_ipc
 *          carried them (its counters) and tcp did not.
 *
 * Sizes cross the staging chunk (4 MiB by default) unevenly. The engine
 * runs with P2PHANDSHAKE on 127.0.0.1, with the transport TE_GPU_TRANSPORT
 * names (unset: chosen per request; "rdma" for the staged chunks over
 * the NIC, in the rdma VM).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_driver.h"
#include "mooncake/mc_err.h"
#include "mooncake/te.h"

static struct gpu_driver cu;

static int fails;

#define CHECK(c, name, ...)                        \
	do {                                       \
		if (!(c)) {                        \
			printf("FAIL %s: ", name); \
			printf(__VA_ARGS__);       \
			printf("\n");              \
			fails++;                   \
			return;                    \
		}                                  \
	} while (0)

static void *dev_alloc(size_t len)
{
	return gpu_alloc(&cu, len);
}

/* Driver copies in this thread (the tool's own, not libte's). */
static int dcopy(void *dst, const void *src, size_t len)
{
	return gpu_copy(&cu, dst, src, len);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (unsigned char)(seed >> 16);
	}
}

static int transfer(struct te_engine *eng, struct te_segment *seg, int op,
		    void *local, uint64_t addr, uint64_t len)
{
	struct te_request r = { .opcode = op,
				.local = local,
				.target = seg,
				.target_addr = addr,
				.length = len };
	struct te_status st;
	struct te_batch *b;
	int rc = te_batch_create(eng, 4, &b);

	if (rc)
		return rc;
	rc = te_batch_submit(b, &r, 1);
	if (!rc)
		rc = te_batch_wait(b, 60000);
	if (!rc)
		rc = te_batch_status(b, 0, &st);
	if (!rc && st.status != TE_COMPLETED)
		rc = st.error ? st.error : -1;
	if (!rc && st.transferred != len)
		rc = -2;
	te_batch_destroy(b);
	return rc;
}

static struct te_engine *engine(void)
{
	struct te_engine_cfg cfg = { .metadata = "P2PHANDSHAKE",
				     .local_server_name = "127.0.0.1",
				     .timeout_ms = 20000,
				     .transport = getenv("TE_GPU_TRANSPORT") };
	char err[256] = "";
	struct te_engine *e = NULL;

	if (te_engine_create(&cfg, &e, err, sizeof(err)))
		fprintf(stderr, "te_gpu: engine: %s\n", err);
	return e;
}

/* WRITE len bytes from device memory to [addr, ...) of seg, READ them
 * back into other device memory, compare on the host. */
static void round_trip(const char *name, struct te_engine *eng,
		       struct te_segment *seg, uint64_t addr, size_t len)
{
	unsigned char *h = malloc(len), *back = malloc(len);
	void *d1 = dev_alloc(len), *d2 = dev_alloc(len);
	int rc;

	CHECK(h && back && d1 && d2, name, "allocation");
	fill(h, len, (unsigned)len);
	CHECK(!dcopy(d1, h, len), name, "copy to device");
	CHECK(!te_register(eng, d1, len, "cuda:0", false) &&
		      !te_register(eng, d2, len, "cuda:0", false),
	      name, "register device memory");
	rc = transfer(eng, seg, TE_WRITE, d1, addr, len);
	CHECK(!rc, name, "write from device: %d %s", rc, mc_strerror(rc));
	rc = transfer(eng, seg, TE_READ, d2, addr, len);
	CHECK(!rc, name, "read into device: %d %s", rc, mc_strerror(rc));
	CHECK(!dcopy(back, d2, len), name, "copy from device");
	CHECK(!memcmp(h, back, len), name, "bytes differ (%zu bytes)", len);
	te_unregister(eng, d1);
	te_unregister(eng, d2);
	gpu_free(&cu, d1);
	gpu_free(&cu, d2);
	free(h);
	free(back);
	printf("ok %s %zu\n", name, len);
}

static void case_out(struct te_engine *eng, const char *target, uint64_t addr,
		     uint64_t size)
{
	static const size_t sizes[] = { 1, 4097, (4u << 20) + 123,
					(9u << 20) + 77 };
	struct te_segment *seg;
	char err[256] = "";

	if (te_segment_open(eng, target, &seg, err, sizeof(err))) {
		printf("FAIL out: open %s: %s\n", target, err);
		fails++;
		return;
	}
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (sizes[i] <= size)
			round_trip("out", eng, seg, addr, sizes[i]);
	te_segment_close(seg);
}

static void case_faults(struct te_engine *eng, const char *target,
			uint64_t addr, uint64_t size)
{
	static const char *const kinds[] = { "copy", "sync" };
	const size_t len = (3u << 20) + 4321; /* several chunks of 64 KiB+ */
	unsigned char *h = malloc(len), *back = malloc(len);
	void *d1 = dev_alloc(len), *d2 = dev_alloc(len);
	struct te_segment *seg;
	char err[256] = "";
	int n = 0;

	CHECK(cu.fail, "faults", "the driver is not the stand-in");
	CHECK(size >= len && h && back && d1 && d2, "faults", "setup");
	CHECK(!te_segment_open(eng, target, &seg, err, sizeof(err)), "faults",
	      "open %s: %s", target, err);
	CHECK(!te_register(eng, d1, len, "cuda:0", false) &&
		      !te_register(eng, d2, len, "cuda:0", false),
	      "faults", "register device memory");
	for (int kind = 0; kind < 2; kind++)
		for (int skip = 0; skip <= 2; skip += 2)
			for (int op = TE_READ; op <= TE_WRITE; op++) {
				const char *what = op == TE_WRITE ? "write" :
								    "read";
				int rc;

				fill(h, len, (unsigned)(n + 11));
				CHECK(!dcopy(d1, h, len), "faults", "fill");
				cu.fail(kind, skip, 1);
				rc = transfer(eng, seg, op,
					      op == TE_WRITE ? d1 : d2, addr,
					      len);
				cu.fail(kind, 0, 0);
				CHECK(rc, "faults",
				      "%s with a failing %s (after %d) "
				      "succeeded",
				      what, kinds[kind], skip);
				/* Unarmed, both ways, every byte. */
				rc = transfer(eng, seg, TE_WRITE, d1, addr,
					      len);
				CHECK(!rc, "faults",
				      "write after a %s fault: %s", kinds[kind],
				      mc_strerror(rc));
				rc = transfer(eng, seg, TE_READ, d2, addr, len);
				CHECK(!rc, "faults",
				      "read after a %s fault: %s", kinds[kind],
				      mc_strerror(rc));
				CHECK(!dcopy(back, d2, len) &&
					      !memcmp(h, back, len),
				      "faults", "bytes differ after a %s fault",
				      kinds[kind]);
				n++;
			}
	te_unregister(eng, d1);
	te_unregister(eng, d2);
	te_segment_close(seg);
	gpu_free(&cu, d1);
	gpu_free(&cu, d2);
	free(h);
	free(back);
	printf("ok faults %d\n", n);
}

/* The other two places that copy through the driver: the local transport
 * (host memory <-> this engine's own device memory) and a peer's tcp
 * server (its bounce buffer for remote-accessible device memory). The
 * driver fails once; the transfer fails; the next one is whole. */
static void fault_once(const char *name, struct te_engine *eng,
		       struct te_engine *owner, int kind)
{
	const size_t len = (2u << 20) + 99;
	void *d = dev_alloc(len);
	unsigned char *h = malloc(len), *back = malloc(len);
	struct te_segment *seg;
	char err[256] = "";
	int rc;

	CHECK(d && h && back, name, "setup");
	CHECK(!te_register(owner, d, len, "cuda:0", true) &&
		      !te_register(eng, h, len, "cpu:0", false) &&
		      !te_register(eng, back, len, "cpu:0", false),
	      name, "register");
	CHECK(!te_segment_open(eng, te_engine_name(owner), &seg, err,
			       sizeof(err)),
	      name, "open: %s", err);
	fill(h, len, 9);
	for (int op = TE_READ; op <= TE_WRITE; op++) {
		cu.fail(kind, 0, 1);
		rc = transfer(eng, seg, op, op == TE_WRITE ? h : back,
			      (uintptr_t)d, len);
		cu.fail(kind, 0, 0);
		CHECK(rc, name, "%s with a failing driver succeeded",
		      op == TE_WRITE ? "write" : "read");
	}
	rc = transfer(eng, seg, TE_WRITE, h, (uintptr_t)d, len);
	CHECK(!rc, name, "write after the fault: %s", mc_strerror(rc));
	rc = transfer(eng, seg, TE_READ, back, (uintptr_t)d, len);
	CHECK(!rc, name, "read after the fault: %s", mc_strerror(rc));
	CHECK(!memcmp(h, back, len), name, "bytes differ after the fault");
	te_segment_close(seg);
	te_unregister(owner, d);
	te_unregister(eng, h);
	te_unregister(eng, back);
	gpu_free(&cu, d);
	free(h);
	free(back);
	printf("ok %s\n", name);
}

static void case_serve(struct te_engine *eng)
{
	const size_t len = (6u << 20) + 11;
	struct te_engine *srv = engine();
	void *d = dev_alloc(len);
	unsigned char *h = malloc(len), *back = malloc(len);
	struct te_segment *seg;
	char err[256] = "";
	int rc;

	CHECK(srv && d && h && back, "serve", "setup");
	CHECK(!te_register(srv, d, len, "cuda:0", true), "serve",
	      "register remote device memory");
	CHECK(!te_segment_open(eng, te_engine_name(srv), &seg, err,
			       sizeof(err)),
	      "serve", "open: %s", err);
	fill(h, len, 7);
	CHECK(!te_register(eng, h, len, "cpu:0", false) &&
		      !te_register(eng, back, len, "cpu:0", false),
	      "serve", "register host memory");
	rc = transfer(eng, seg, TE_WRITE, h, (uintptr_t)d, len);
	CHECK(!rc, "serve", "write into peer's device: %s", mc_strerror(rc));
	rc = transfer(eng, seg, TE_READ, back, (uintptr_t)d, len);
	CHECK(!rc, "serve", "read peer's device: %s", mc_strerror(rc));
	CHECK(!memcmp(h, back, len), "serve", "bytes differ");
	memset(back, 0, len);
	CHECK(!dcopy(back, d, len) && !memcmp(h, back, len), "serve",
	      "device memory does not hold the bytes");
	te_segment_close(seg);
	te_unregister(eng, h);
	te_unregister(eng, back);
	te_engine_destroy(srv);
	gpu_free(&cu, d);
	free(h);
	free(back);
	printf("ok serve %zu\n", len);
}

static void case_local(struct te_engine *eng)
{
	const size_t len = (5u << 20) + 3;
	void *d = dev_alloc(len);
	unsigned char *h = malloc(len), *back = malloc(len);
	struct te_segment *seg;
	char err[256] = "";
	int rc;

	CHECK(d && h && back, "local", "setup");
	CHECK(!te_register(eng, d, len, "cuda:0", true) &&
		      !te_register(eng, h, len, "cpu:0", false) &&
		      !te_register(eng, back, len, "cpu:0", false),
	      "local", "register");
	CHECK(!te_segment_open(eng, te_engine_name(eng), &seg, err,
			       sizeof(err)),
	      "local", "open self: %s", err);
	fill(h, len, 3);
	rc = transfer(eng, seg, TE_WRITE, h, (uintptr_t)d, len);
	CHECK(!rc, "local", "host -> own device: %s", mc_strerror(rc));
	rc = transfer(eng, seg, TE_READ, back, (uintptr_t)d, len);
	CHECK(!rc, "local", "own device -> host: %s", mc_strerror(rc));
	CHECK(!memcmp(h, back, len), "local", "bytes differ");
	te_segment_close(seg);
	te_unregister(eng, d);
	te_unregister(eng, h);
	te_unregister(eng, back);
	gpu_free(&cu, d);
	free(h);
	free(back);
	printf("ok local %zu\n", len);
}

static void case_ipc(struct te_engine *eng, const char *target, uint64_t addr,
		     uint64_t size)
{
	size_t len = size;
	unsigned char *h = malloc(len), *back = malloc(len);
	void *d = dev_alloc(len);
	struct te_counters ci, tc;
	struct te_segment *seg;
	char err[256] = "";
	int rc;

	CHECK(h && back && d, "ipc", "setup");
	CHECK(!te_segment_open(eng, target, &seg, err, sizeof(err)), "ipc",
	      "open: %s", err);
	CHECK(!te_register(eng, h, len, "cpu:0", false) &&
		      !te_register(eng, back, len, "cpu:0", false) &&
		      !te_register(eng, d, len, "cuda:0", false),
	      "ipc", "register");
	/* The peer's bytes as it wrote them. */
	rc = transfer(eng, seg, TE_READ, back, addr, len);
	CHECK(!rc, "ipc", "read peer's device: %s", mc_strerror(rc));
	for (size_t i = 0; i < len; i++)
		CHECK(back[i] == (unsigned char)(i * 7 + 1), "ipc",
		      "peer's byte %zu is %u", i, back[i]);
	/* Host memory in, and back. */
	fill(h, len, 11);
	rc = transfer(eng, seg, TE_WRITE, h, addr, len);
	CHECK(!rc, "ipc", "host -> peer's device: %s", mc_strerror(rc));
	rc = transfer(eng, seg, TE_READ, back, addr, len);
	CHECK(!rc && !memcmp(h, back, len), "ipc", "host round trip");
	/* Our device memory in (device to device), and back into it. */
	fill(h, len, 12);
	CHECK(!dcopy(d, h, len), "ipc", "copy to device");
	rc = transfer(eng, seg, TE_WRITE, d, addr, len);
	CHECK(!rc, "ipc", "device -> peer's device: %s", mc_strerror(rc));
	CHECK(!dcopy(d, back, len), "ipc", "clear device");
	rc = transfer(eng, seg, TE_READ, d, addr, len);
	CHECK(!rc, "ipc", "peer's device -> device: %s", mc_strerror(rc));
	CHECK(!dcopy(back, d, len) && !memcmp(h, back, len), "ipc",
	      "device round trip");
	CHECK(!te_counters(eng, "cuda_ipc", &ci) &&
		      !te_counters(eng, "tcp", &tc),
	      "ipc", "counters");
	CHECK(ci.read_requests == 3 && ci.write_requests == 2 &&
		      tc.read_requests + tc.write_requests == 0,
	      "ipc", "cuda_ipc %" PRIu64 "/%" PRIu64 " tcp %" PRIu64,
	      ci.read_requests, ci.write_requests,
	      tc.read_requests + tc.write_requests);
	te_segment_close(seg);
	te_unregister(eng, h);
	te_unregister(eng, back);
	te_unregister(eng, d);
	gpu_free(&cu, d);
	free(h);
	free(back);
	printf("ok ipc %zu\n", len);
}

static int serve_device(size_t len, const char *ready)
{
	struct te_engine *eng = engine();
	unsigned char *h = malloc(len);
	void *d = dev_alloc(len);
	char line[64];
	FILE *f;

	if (!eng || !h || !d)
		return 1;
	for (size_t i = 0; i < len; i++)
		h[i] = (unsigned char)(i * 7 + 1);
	if (dcopy(d, h, len) || te_register(eng, d, len, "cuda:0", true))
		return 1;
	f = fopen(ready, "w");
	if (!f)
		return 1;
	fprintf(f, "{\"name\":\"%s\",\"addr\":%" PRIuPTR ",\"size\":%zu}\n",
		te_engine_name(eng), (uintptr_t)d, len);
	fclose(f);
	while (fgets(line, sizeof(line), stdin))
		;
	te_unregister(eng, d);
	te_engine_destroy(eng);
	gpu_free(&cu, d);
	free(h);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* MB/s of WRITEs of len bytes from buf for about 1 s. */
static double rate(struct te_engine *eng, struct te_segment *seg, void *buf,
		   uint64_t addr, size_t len)
{
	double t0 = now_s(), t;
	uint64_t bytes = 0;

	do {
		if (transfer(eng, seg, TE_WRITE, buf, addr, len))
			return 0;
		bytes += len;
		t = now_s() - t0;
	} while (t < 1.0);
	return bytes / t / 1e6;
}

static void case_bench(struct te_engine *eng, const char *target, uint64_t addr,
		       uint64_t size)
{
	static const size_t sizes[] = { 1u << 20, 16u << 20 };
	struct te_segment *seg;
	char err[256] = "";

	CHECK(!te_segment_open(eng, target, &seg, err, sizeof(err)), "bench",
	      "open: %s", err);
	for (unsigned i = 0; i < 2 && sizes[i] <= size; i++) {
		size_t len = sizes[i];
		void *d = dev_alloc(len), *h = malloc(len);
		double dr, hr;

		CHECK(d && h, "bench", "allocation");
		memset(h, 1, len);
		CHECK(!dcopy(d, h, len), "bench", "copy");
		CHECK(!te_register(eng, d, len, "cuda:0", false) &&
			      !te_register(eng, h, len, "cpu:0", false),
		      "bench", "register");
		hr = rate(eng, seg, h, addr, len);
		dr = rate(eng, seg, d, addr, len);
		printf("ok bench %zu host %.0f MB/s device %.0f MB/s "
		       "ratio %.2f\n",
		       len, hr, dr, hr > 0 ? dr / hr : 0);
		te_unregister(eng, d);
		te_unregister(eng, h);
		gpu_free(&cu, d);
		free(h);
	}
	te_segment_close(seg);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "target", required_argument, NULL, 't' },
		{ "target_addr", required_argument, NULL, 'a' },
		{ "target_size", required_argument, NULL, 's' },
		{ "bench", no_argument, NULL, 'b' },
		{ "expect_refusal", no_argument, NULL, 'r' },
		{ "serve_device", required_argument, NULL, 'S' },
		{ "ready", required_argument, NULL, 'R' },
		{ "ipc_target", required_argument, NULL, 'T' },
		{ "ipc_addr", required_argument, NULL, 'A' },
		{ "ipc_size", required_argument, NULL, 'Z' },
		{ "faults", no_argument, NULL, 'F' },
		{ NULL, 0, NULL, 0 }
	};
	const char *target = NULL, *ready = NULL, *ipc = NULL;
	uint64_t addr = 0, size = 0, serve = 0, ipc_addr = 0, ipc_size = 0;
	struct te_engine *eng;
	bool bench = false, refusal = false, faults = false;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 't')
			target = optarg;
		else if (c == 'a')
			addr = strtoull(optarg, NULL, 0);
		else if (c == 's')
			size = strtoull(optarg, NULL, 0);
		else if (c == 'b')
			bench = true;
		else if (c == 'r')
			refusal = true;
		else if (c == 'S')
			serve = strtoull(optarg, NULL, 0);
		else if (c == 'R')
			ready = optarg;
		else if (c == 'T')
			ipc = optarg;
		else if (c == 'A')
			ipc_addr = strtoull(optarg, NULL, 0);
		else if (c == 'Z')
			ipc_size = strtoull(optarg, NULL, 0);
		else if (c == 'F')
			faults = true;
		else
			return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (refusal) {
		static char buf[4096];
		int rc;

		eng = engine();
		if (!eng)
			return 1;
		rc = te_register(eng, buf, sizeof(buf), "cuda:0", false);
		printf("%s refused %d %s\n",
		       rc == MC_ENOTSUPPORTED ? "ok" : "FAIL", rc,
		       mc_err_name(rc));
		if (rc == MC_ENOTSUPPORTED)
			rc = te_register(eng, buf, sizeof(buf), "cpu:0", false);
		else
			rc = -1;
		te_engine_destroy(eng);
		return rc ? 1 : 0;
	}
	if (gpu_driver_load(&cu)) {
		printf("FAIL driver: cannot load %s\n",
		       getenv("MC_CUDA_LIBRARY") ? getenv("MC_CUDA_LIBRARY") :
						   "libcuda.so.1");
		return 1;
	}
	if (serve && ready)
		return serve_device(serve, ready);
	eng = engine();
	if (!eng)
		return 1;
	if (ipc) {
		case_ipc(eng, ipc, ipc_addr, ipc_size);
		te_engine_destroy(eng);
		return fails ? 1 : 0;
	}
	if (target && faults) {
		struct te_engine *srv = engine();

		case_faults(eng, target, addr, size);
		if (cu.fail) {
			/* local: the NULL stream; serve: the server's own */
			fault_once("faults_local", eng, eng, 2);
			fault_once("faults_serve", eng, srv, 0);
		}
		te_engine_destroy(srv);
		te_engine_destroy(eng);
		return fails ? 1 : 0;
	}
	if (target) {
		case_out(eng, target, addr, size);
		if (bench)
			case_bench(eng, target, addr, size);
	}
	case_serve(eng);
	case_local(eng);
	if (cu.stats) {
		uint64_t n[4], b[4];

		for (int d = 0; d < 4; d++)
			cu.stats(d, &n[d], &b[d]);
		printf("stats h2d %" PRIu64 " %" PRIu64 " d2h %" PRIu64
		       " %" PRIu64 " d2d %" PRIu64 " %" PRIu64 "\n",
		       n[1], b[1], n[2], b[2], n[3], b[3]);
	}
	te_engine_destroy(eng);
	return fails ? 1 : 0;
}
