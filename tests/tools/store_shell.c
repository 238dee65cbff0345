/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store_shell: a line-oriented driver of the public store API
 * (include/mooncake/store.h, linked against libmooncake.so) for the
 * integration tests. One command per stdin line; exactly one reply line
 * each, flushed: "ok ..." or "err CODE NAME [detail]" (CODE an upstream
 * store code, NAME its name). Bad input is answered with "err -600
 * INVALID_PARAMS usage: ...", never a crash. Blank lines and lines
 * starting with '#' are ignored (no reply). EOF quits (no reply).
 *
 * Data: VALUE(SIZE, SEED) is xorshift64* output, little-endian, 8 bytes
 * per step, the last step truncated:
 *   s = SEED ^ 0x9E3779B97F4A7C15 (1 if that is 0)
 *   step: s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
 *         word = s * 0x2545F4914F6CDD1D (mod 2^64)
 * CRCs are zlib's crc32. Batch key i is PREFIX<i> with SEED + i.
 * Strings given as "-" are NULL and sizes given as "-" are 0 (setup then
 * falls back to the config file and environment).
 *
 *   setup HOST METADATA SEGSIZE BUFSIZE PROTOCOL MASTER   -> ok
 *   put KEY SIZE SEED [REPLICAS]   put_from a registered buffer -> ok
 *   uput KEY SIZE SEED             put_from unregistered memory -> ok
 *   sput KEY SIZE SEED [REPLICAS]  put (through the staging buffer) -> ok
 *   get KEY                        get_size + get_into -> ok SIZE CRC32HEX
 *   sget KEY BUFSIZE               get (staging) -> ok SIZE CRC32HEX
 *   check KEY SIZE SEED            get_into a SIZE buffer, compare
 *                                  -> ok | mismatch SIZE|OFFSET ...
 *   bput N PREFIX SIZE SEED [REPLICAS]  batch_put_from -> ok C0,C1,...
 *   bget N PREFIX SIZE SEED        batch_get_into + compare
 *                                  -> ok C0,C1,... (0 = read and equal,
 *                                  "mismatch" = read but different)
 *   mput KEY PARTS PARTSIZE SEED   batch_put_from_multi of one key whose
 *                                  value VALUE(PARTS*PARTSIZE, SEED) is
 *                                  given in PARTS pieces -> ok C
 *   mget KEY PARTS PARTSIZE SEED   batch_get_into_multi + compare -> ok C
 *   gput KEY SIZE SEED [staged]    put_from CUDA device memory (the driver
 *                                  libte loads: MC_CUDA_LIBRARY, e.g. the
 *                                  tests' stand-in), registered; staged:
 *                                  put (copied) from unregistered device
 *                                  memory -> ok
 *   gcheck KEY SIZE SEED [staged]  get_into registered device memory (or
 *                                  get into unregistered), compare on the
 *                                  host -> ok | mismatch
 *   exist KEY...                   batch_is_exist -> ok 1 0 ...
 *   isexist KEY                    is_exist -> ok 1|0
 *   size KEY                       get_size -> ok SIZE
 *   rm KEY [force]                 remove -> ok
 *   brm KEY... [force]             batch_remove -> ok C0 C1 ...
 *   rmall [force]                  remove_all -> ok COUNT
 *   rmre REGEX [force]             remove_by_regex -> ok COUNT
 *   desc KEY                       get_replica_desc
 *                                  -> ok N endpoint@0xADDR[*] ...
 *                                  ('*': same host)
 *   hostname                       -> ok NAME (or ok - before setup)
 *   timeouts RPC_MS TRANSFER_MS    set_timeouts -> ok
 *   health                         -> ok CODE
 *   strerror CODE                  -> ok TEXT
 *   close                          -> ok
 *   new                            destroy the handle, create another
 *   quit                           close, then "ok" and exit 0
 *
 * The filesystem extensions (include/mooncake/store_fs.h). OPTS are any of
 * "threads=N" (N threads share the pieces: piece i goes to thread i % N),
 * "unreg" (read/write through unregistered memory: the staging buffer)
 * and "sparse" (only even-numbered pieces are written; a sparse read
 * expects zeros in the odd ones).
 *   oread KEY CHUNK SEED [OPTS]    object_open, read every CHUNK-byte piece
 *                                  into its place of one buffer, compare
 *                                  with VALUE(size, SEED), close
 *                                  -> ok SIZE | mismatch offset N
 *   oopen KEY                      object_open, kept open -> ok H SIZE
 *                                  version=V
 *   oreadh H CHUNK SEED [OPTS]     as oread through open handle H
 *   oread1 H OFF LEN               one object_read of LEN bytes at OFF
 *                                  -> ok GOT CRC32HEX
 *   oclose H                       object_close -> ok
 *   wwrite KEY SIZE CHUNK SEED [REPLICAS] [OPTS]
 *                                  writer_open, write VALUE(SIZE, SEED) in
 *                                  CHUNK pieces, last piece first, close
 *                                  with commit -> ok
 *   wabort KEY SIZE                writer_open, close without commit -> ok
 *   wopen KEY SIZE [REPLICAS] [publish]
 *                                  writer_open (with publish:
 *                                  writer_open_publish, a publish lease
 *                                  from the commit until a rename), kept
 *                                  open -> ok H
 *   wpiece H OFF LEN SEED          writer_write of bytes [OFF, OFF+LEN) of
 *                                  VALUE(size, SEED) -> ok
 *   wclose H commit|abort          writer_close -> ok
 *   fstat KEY                      stat -> ok size=S replicas=R holds=H
 *                                  lease=MS mtime=MS
 *   rtext KEY                      replica_text -> ok N LINE ...
 *   ren FROM TO [noreplace]        rename -> ok
 *   ls PREFIX DELIM START LIMIT    list ("-": none)
 *                                  -> ok N truncated=0|1 NAME:SIZE[:/] ...
 *   pool                           pool_stat -> ok capacity=C allocated=A
 *                                  keys=K clients=N segments=M
 *                                  largest=L
 *   watch EPOCH AFTER WAIT_MS      watch -> ok epoch=E after=A reset=0|1
 *                                  TYPE:KEY[>TO] ... (the call's count is
 *                                  checked: the events, or 1 for a reset)
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_driver.h"
#include "mc_compiler.h"
#include "mc_parse.h"
#include "mooncake/store.h"
#include "mooncake/store_fs.h"

#define MAX_ARGS 4096
#define MAX_LINE (1u << 20)
#define MAX_VALUE (4ull << 30)

static mooncake_store_t store;

/* One registered scratch area, grown on demand. */
static uint8_t *scratch;
static size_t scratch_len;
static bool scratch_reg;

static int reply(const char *fmt, ...) MC_PRINTF(1, 2);

static int reply(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	return 0;
}

static int reply_err(int code, const char *detail)
{
	const char *text = mooncake_store_strerror(code);
	size_t name_len = strcspn(text, ":");

	if (detail)
		reply("err %d %.*s %s", code, (int)name_len, text, detail);
	else
		reply("err %d %.*s", code, (int)name_len, text);
	return 0;
}

static int usage(const char *u)
{
	char d[256];

	snprintf(d, sizeof(d), "usage: %s", u);
	return reply_err(-600, d);
}

static void value_fill(uint8_t *buf, size_t size, uint64_t seed)
{
	uint64_t s = seed ^ 0x9E3779B97F4A7C15ull;

	if (!s)
		s = 1;
	for (size_t off = 0; off < size; off += 8) {
		uint64_t w;
		size_t n = size - off < 8 ? size - off : 8;

		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		w = s * 0x2545F4914F6CDD1Dull;
		for (size_t i = 0; i < n; i++)
			buf[off + i] = (uint8_t)(w >> (8 * i));
	}
}

/* Offset of the first byte that differs from VALUE(size, seed), or size. */
static size_t value_cmp(const uint8_t *buf, size_t size, uint64_t seed)
{
	uint8_t tmp[4096];

	/* Regenerate in windows: the generator is sequential, so keep its
	 * state by filling the whole prefix once per window size. */
	uint64_t s = seed ^ 0x9E3779B97F4A7C15ull;

	if (!s)
		s = 1;
	for (size_t off = 0; off < size; off += sizeof(tmp)) {
		size_t n = size - off < sizeof(tmp) ? size - off : sizeof(tmp);

		for (size_t w = 0; w < n; w += 8) {
			uint64_t x;
			size_t k = n - w < 8 ? n - w : 8;

			s ^= s >> 12;
			s ^= s << 25;
			s ^= s >> 27;
			x = s * 0x2545F4914F6CDD1Dull;
			for (size_t i = 0; i < k; i++)
				tmp[w + i] = (uint8_t)(x >> (8 * i));
		}
		if (memcmp(buf + off, tmp, n))
			for (size_t i = 0; i < n; i++)
				if (buf[off + i] != tmp[i])
					return off + i;
	}
	return size;
}

static uint32_t crc32_ieee(const uint8_t *p, size_t n)
{
	static uint32_t table[256];
	uint32_t c = 0xFFFFFFFFu;

	if (!table[1]) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t v = i;
			for (int k = 0; k < 8; k++)
				v = v & 1 ? 0xEDB88320u ^ (v >> 1) : v >> 1;
			table[i] = v;
		}
	}
	for (size_t i = 0; i < n; i++)
		c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
	return c ^ 0xFFFFFFFFu;
}

static bool parse_u64(const char *s, uint64_t *out)
{
	int64_t v;

	if (mc_parse_i64(s, &v) || v < 0)
		return false;
	*out = (uint64_t)v;
	return true;
}

/* A size: "4096", "4MB", or "-" for 0. */
static bool parse_size(const char *s, uint64_t *out)
{
	if (!strcmp(s, "-")) {
		*out = 0;
		return true;
	}
	return !mc_parse_size(s, out);
}

static const char *opt_str(const char *s)
{
	return strcmp(s, "-") ? s : NULL;
}

static bool is_force(int argc, char **argv, int at)
{
	return argc > at && !strcmp(argv[at], "force");
}

/* The registered scratch area of at least len bytes; 0 or a code. */
static int scratch_get(size_t len, uint8_t **out)
{
	size_t cap;
	int rc;

	if (!len)
		len = 1;
	if (len <= scratch_len && scratch_reg) {
		*out = scratch;
		return 0;
	}
	if (scratch_reg)
		(void)mooncake_store_unregister_buffer(store, scratch);
	scratch_reg = false;
	if (len > scratch_len) {
		cap = len < 2 * scratch_len ? 2 * scratch_len : len;
		free(scratch);
		scratch = aligned_alloc(4096, (cap + 4095) & ~(size_t)4095);
		scratch_len = scratch ? cap : 0;
		if (!scratch)
			return -1;
	}
	rc = mooncake_store_register_buffer(store, scratch, scratch_len);
	if (rc)
		return rc;
	scratch_reg = true;
	*out = scratch;
	return 0;
}

static void forget_scratch_registration(void)
{
	scratch_reg = false;
}

static void cfg_replicas(mooncake_replicate_config_t *c, int argc, char **argv,
			 int at, bool *ok)
{
	uint64_t n = 1;

	memset(c, 0, sizeof(*c));
	*ok = true;
	if (argc > at && (!parse_u64(argv[at], &n) || n > 64))
		*ok = false;
	c->replica_num = (size_t)n;
}

static int cmd_setup(int argc, char **argv)
{
	uint64_t seg, buf;
	int rc;

	if (argc != 7 || !parse_size(argv[3], &seg) ||
	    !parse_size(argv[4], &buf))
		return usage("setup HOST METADATA SEGSIZE BUFSIZE PROTOCOL "
			     "MASTER");
	rc = mooncake_store_setup(store, opt_str(argv[1]), opt_str(argv[2]),
				  seg, buf, opt_str(argv[5]), "",
				  opt_str(argv[6]));
	forget_scratch_registration();
	if (rc)
		return reply_err(rc, NULL);
	reply("ok");
	return 0;
}

/* put, uput, sput */
static int cmd_put(int argc, char **argv, char mode)
{
	mooncake_replicate_config_t c;
	uint64_t size, seed;
	uint8_t *buf = NULL;
	bool ok;
	int rc;

	cfg_replicas(&c, argc, argv, 4, &ok);
	if (argc < 4 || argc > 5 || !parse_size(argv[2], &size) ||
	    !parse_u64(argv[3], &seed) || !ok || size > MAX_VALUE)
		return usage("put KEY SIZE SEED [REPLICAS]");
	if (mode == 'r') {
		rc = scratch_get(size, &buf);
		if (rc)
			return reply_err(rc < 0 ? rc : -1, "scratch buffer");
	} else {
		buf = malloc(size ? size : 1);
		if (!buf)
			return reply_err(-1, "out of memory");
	}
	value_fill(buf, size, seed);
	if (mode == 's')
		rc = mooncake_store_put(store, argv[1], buf, size, &c);
	else
		rc = mooncake_store_put_from(store, argv[1], buf, size, &c);
	if (mode != 'r')
		free(buf);
	if (rc)
		return reply_err(rc, NULL);
	reply("ok");
	return 0;
}

static int cmd_get(int argc, char **argv)
{
	int64_t size, got;
	uint8_t *buf;
	int rc;

	if (argc != 2)
		return usage("get KEY");
	size = mooncake_store_get_size(store, argv[1]);
	if (size < 0)
		return reply_err((int)size, "get_size");
	if ((uint64_t)size > MAX_VALUE)
		return reply_err(-600, "object too large for store_shell");
	rc = scratch_get((size_t)size, &buf);
	if (rc)
		return reply_err(rc, "scratch buffer");
	got = mooncake_store_get_into(store, argv[1], buf, (size_t)size);
	if (got < 0)
		return reply_err((int)got, NULL);
	reply("ok %" PRId64 " %08x", got, crc32_ieee(buf, (size_t)got));
	return 0;
}

static int cmd_sget(int argc, char **argv)
{
	uint64_t cap;
	uint8_t *buf;
	int64_t got;

	if (argc != 3 || !parse_size(argv[2], &cap) || cap > MAX_VALUE)
		return usage("sget KEY BUFSIZE");
	buf = malloc(cap ? cap : 1);
	if (!buf)
		return reply_err(-1, "out of memory");
	got = mooncake_store_get(store, argv[1], buf, (size_t)cap);
	if (got < 0)
		reply_err((int)got, NULL);
	else
		reply("ok %" PRId64 " %08x", got, crc32_ieee(buf, (size_t)got));
	free(buf);
	return 0;
}

static int cmd_check(int argc, char **argv)
{
	uint64_t size, seed;
	uint8_t *buf;
	int64_t got;
	size_t at;
	int rc;

	if (argc != 4 || !parse_size(argv[2], &size) ||
	    !parse_u64(argv[3], &seed) || size > MAX_VALUE)
		return usage("check KEY SIZE SEED");
	rc = scratch_get(size, &buf);
	if (rc)
		return reply_err(rc, "scratch buffer");
	got = mooncake_store_get_into(store, argv[1], buf, size);
	if (got < 0)
		return reply_err((int)got, NULL);
	if ((uint64_t)got != size)
		return reply("mismatch size %" PRId64 " expected %" PRIu64, got,
			     size);
	at = value_cmp(buf, size, seed);
	if (at != size)
		return reply("mismatch offset %zu", at);
	reply("ok");
	return 0;
}

/*
 * gput / gcheck: the value through device memory, registered with the
 * store (so the transfers are libte's, staged through pinned buffers).
 */
static int cmd_gpu(int argc, char **argv, bool put)
{
	static struct gpu_driver g;
	static bool loaded;
	uint64_t size, seed;
	uint8_t *host = NULL;
	void *dev = NULL;
	int64_t got = 0;
	size_t at;
	int rc;

	bool staged = argc == 5 && !strcmp(argv[4], "staged");

	if ((argc != 4 && !staged) || !parse_size(argv[2], &size) ||
	    !parse_u64(argv[3], &seed) || !size || size > MAX_VALUE)
		return usage(put ? "gput KEY SIZE SEED [staged]" :
				   "gcheck KEY SIZE SEED [staged]");
	if (!loaded && gpu_driver_load(&g))
		return reply_err(-1, "no CUDA driver to load");
	loaded = true;
	/* Every call on this thread wants the context. */
	if (g.set(g.ctx))
		return reply_err(-1, "cuCtxSetCurrent");
	host = malloc(size);
	dev = gpu_alloc(&g, size);
	if (!host || !dev) {
		free(host);
		gpu_free(&g, dev);
		return reply_err(-1, "out of memory");
	}
	value_fill(host, size, seed);
	if (!put)
		memset(host, 0, size);
	rc = gpu_copy(&g, dev, host, size) ? -1 : 0;
	if (!rc && !staged)
		rc = mooncake_store_register_buffer(store, dev, size);
	if (!rc && put) {
		rc = staged ? mooncake_store_put(store, argv[1], dev, size,
						 NULL) :
			      mooncake_store_put_from(store, argv[1], dev, size,
						      NULL);
	} else if (!rc) {
		got = staged ? mooncake_store_get(store, argv[1], dev, size) :
			       mooncake_store_get_into(store, argv[1], dev,
						       size);
		rc = got < 0 ? (int)got : 0;
		if (!rc && gpu_copy(&g, host, dev, size))
			rc = -1;
	}
	if (!staged)
		(void)mooncake_store_unregister_buffer(store, dev);
	gpu_free(&g, dev);
	if (rc) {
		free(host);
		return reply_err(rc, NULL);
	}
	at = put ? size : value_cmp(host, size, seed);
	free(host);
	if (!put && (uint64_t)got != size)
		return reply("mismatch size %" PRId64 " expected %" PRIu64, got,
			     size);
	if (at != size)
		return reply("mismatch offset %zu", at);
	reply("ok");
	return 0;
}

/* Keys PREFIX0..N-1 in one allocation: names[i] points into it. */
static char **batch_keys(uint64_t n, const char *prefix)
{
	size_t each = strlen(prefix) + 24;
	char **names = malloc(n * (sizeof(char *) + each));
	char *text = (char *)(names + n);

	if (!names)
		return NULL;
	for (uint64_t i = 0; i < n; i++) {
		names[i] = text + i * each;
		snprintf(names[i], each, "%s%" PRIu64, prefix, i);
	}
	return names;
}

static int print_codes(const int64_t *codes, const bool *bad, uint64_t n)
{
	size_t cap = (size_t)n * 24 + 8, len;
	char *line = malloc(cap);

	if (!line)
		return reply_err(-1, "out of memory");
	len = (size_t)snprintf(line, cap, "ok ");
	for (uint64_t i = 0; i < n && len < cap; i++) {
		if (bad && bad[i])
			len += (size_t)snprintf(line + len, cap - len,
						"%smismatch", i ? "," : "");
		else
			len += (size_t)snprintf(line + len, cap - len,
						"%s%" PRId64, i ? "," : "",
						codes[i]);
	}
	reply("%s", line);
	free(line);
	return 0;
}

/* bput (put true) and bget */
static int cmd_batch(int argc, char **argv, bool put)
{
	mooncake_replicate_config_t c;
	uint64_t n, size, seed;
	char **names = NULL;
	void **bufs = NULL;
	size_t *sizes = NULL;
	int64_t *codes = NULL;
	int *ires = NULL;
	bool *bad = NULL, ok;
	uint8_t *area;
	int rc;

	cfg_replicas(&c, argc, argv, 5, &ok);
	if (argc < 5 || argc > (put ? 6 : 5) || !parse_u64(argv[1], &n) ||
	    !parse_size(argv[3], &size) || !parse_u64(argv[4], &seed) || !ok ||
	    n > 1000000 || (n && size > MAX_VALUE / n))
		return usage(put ? "bput N PREFIX SIZE SEED [REPLICAS]" :
				   "bget N PREFIX SIZE SEED");
	rc = scratch_get((size_t)(n * size), &area);
	if (rc)
		return reply_err(rc, "scratch buffer");
	names = batch_keys(n ? n : 1, argv[2]);
	bufs = calloc(n + 1, sizeof(*bufs));
	sizes = calloc(n + 1, sizeof(*sizes));
	codes = calloc(n + 1, sizeof(*codes));
	ires = calloc(n + 1, sizeof(*ires));
	bad = calloc(n + 1, sizeof(*bad));
	if (!names || !bufs || !sizes || !codes || !ires || !bad) {
		reply_err(-1, "out of memory");
		goto out;
	}
	for (uint64_t i = 0; i < n; i++) {
		bufs[i] = area + i * size;
		sizes[i] = size;
		if (put)
			value_fill(bufs[i], size, seed + i);
		else
			memset(bufs[i], 0, size);
	}
	if (put) {
		rc = mooncake_store_batch_put_from(store, (const char **)names,
						   bufs, sizes, n, &c, ires);
		for (uint64_t i = 0; i < n; i++)
			codes[i] = ires[i];
	} else {
		rc = mooncake_store_batch_get_into(store, (const char **)names,
						   bufs, sizes, n, codes);
		for (uint64_t i = 0; i < n && !rc; i++) {
			if (codes[i] < 0)
				continue;
			bad[i] = (uint64_t)codes[i] != size ||
				 value_cmp(bufs[i], size, seed + i) != size;
			codes[i] = 0;
		}
	}
	if (rc)
		reply_err(rc, NULL);
	else
		print_codes(codes, bad, n);
out:
	free(names);
	free(bufs);
	free(sizes);
	free(codes);
	free(ires);
	free(bad);
	return 0;
}

/* mput (put true) and mget: one key in PARTS pieces */
static int cmd_multi(int argc, char **argv, bool put)
{
	mooncake_replicate_config_t c = { .replica_num = 1 };
	uint64_t parts, psize, seed, total;
	const char *key = argv[1];
	void **bufs = NULL;
	size_t *sizes = NULL, np;
	uint8_t *area, *tmp = NULL;
	int64_t res = 0;
	int ires = 0, rc;

	if (argc != 5 || !parse_u64(argv[2], &parts) || !parts ||
	    parts > 4096 || !parse_size(argv[3], &psize) ||
	    !parse_u64(argv[4], &seed) || psize > MAX_VALUE / parts)
		return usage(put ? "mput KEY PARTS PARTSIZE SEED" :
				   "mget KEY PARTS PARTSIZE SEED");
	total = parts * psize;
	np = (size_t)parts;
	rc = scratch_get((size_t)total, &area);
	if (rc)
		return reply_err(rc, "scratch buffer");
	bufs = calloc(np, sizeof(*bufs));
	sizes = calloc(np, sizeof(*sizes));
	tmp = malloc(total ? total : 1);
	if (!bufs || !sizes || !tmp) {
		reply_err(-1, "out of memory");
		goto out;
	}
	/* Pieces in reverse order in the area: gathering must follow the
	 * part list, not the addresses. */
	for (size_t i = 0; i < np; i++) {
		bufs[i] = area + (np - 1 - i) * psize;
		sizes[i] = psize;
	}
	if (put) {
		value_fill(tmp, total, seed);
		for (size_t i = 0; i < np; i++)
			memcpy(bufs[i], tmp + i * psize, psize);
		rc = mooncake_store_batch_put_from_multi(store, &key, 1, bufs,
							 sizes, &np, &c, &ires);
		res = ires;
	} else {
		memset(area, 0, total);
		rc = mooncake_store_batch_get_into_multi(store, &key, 1, bufs,
							 sizes, &np, &res);
		if (!rc && res >= 0) {
			for (size_t i = 0; i < np; i++)
				memcpy(tmp + i * psize, bufs[i], psize);
			if ((uint64_t)res != total ||
			    value_cmp(tmp, total, seed) != total) {
				reply("ok mismatch");
				goto out;
			}
			res = 0;
		}
	}
	if (rc)
		reply_err(rc, NULL);
	else
		reply("ok %" PRId64, res);
out:
	free(bufs);
	free(sizes);
	free(tmp);
	return 0;
}

static int cmd_exist(int argc, char **argv)
{
	int res[MAX_ARGS];
	char line[MAX_ARGS * 12 + 8];
	size_t len;
	int rc;

	if (argc < 2)
		return usage("exist KEY...");
	rc = mooncake_store_batch_is_exist(store, (const char **)argv + 1,
					   (size_t)argc - 1, res);
	if (rc)
		return reply_err(rc, NULL);
	len = (size_t)snprintf(line, sizeof(line), "ok");
	for (int i = 0; i < argc - 1 && len < sizeof(line); i++)
		len += (size_t)snprintf(line + len, sizeof(line) - len, " %d",
					res[i]);
	reply("%s", line);
	return 0;
}

static int cmd_brm(int argc, char **argv)
{
	bool force = argc > 2 && !strcmp(argv[argc - 1], "force");
	int n = argc - 1 - (force ? 1 : 0);
	int res[MAX_ARGS];
	char line[MAX_ARGS * 12 + 8];
	size_t len;
	int rc;

	if (n < 1)
		return usage("brm KEY... [force]");
	rc = mooncake_store_batch_remove(store, (const char **)argv + 1,
					 (size_t)n, force, res);
	if (rc)
		return reply_err(rc, NULL);
	len = (size_t)snprintf(line, sizeof(line), "ok");
	for (int i = 0; i < n && len < sizeof(line); i++)
		len += (size_t)snprintf(line + len, sizeof(line) - len, " %d",
					res[i]);
	reply("%s", line);
	return 0;
}

static int cmd_desc(int argc, char **argv)
{
	mooncake_replica_desc_t d[16];
	char line[16 * 300 + 32];
	size_t len;
	int n;

	if (argc != 2)
		return usage("desc KEY");
	n = mooncake_store_get_replica_desc(store, argv[1], d, 16);
	if (n < 0)
		return reply_err(n, NULL);
	len = (size_t)snprintf(line, sizeof(line), "ok %d", n);
	for (int i = 0; i < n && i < 16 && len < sizeof(line); i++)
		len += (size_t)snprintf(line + len, sizeof(line) - len,
					" %s@0x%" PRIx64 "%s", d[i].endpoint,
					d[i].address,
					d[i].same_host ? "*" : "");
	reply("%s", line);
	return 0;
}

static int cmd_count(int argc, char **argv, bool regex)
{
	int64_t n;

	if (regex) {
		if (argc < 2 || argc > 3)
			return usage("rmre REGEX [force]");
		n = mooncake_store_remove_by_regex(store, argv[1],
						   is_force(argc, argv, 2));
	} else {
		if (argc > 2)
			return usage("rmall [force]");
		n = mooncake_store_remove_all(store, is_force(argc, argv, 1));
	}
	if (n < 0)
		return reply_err((int)n, NULL);
	reply("ok %" PRId64, n);
	return 0;
}

static void close_objects(void);

static int cmd_simple(int argc, char **argv)
{
	const char *c = argv[0];
	int64_t v;
	uint64_t a, b;
	int rc;

	if (!strcmp(c, "size") && argc == 2) {
		v = mooncake_store_get_size(store, argv[1]);
		if (v < 0)
			return reply_err((int)v, NULL);
		return reply("ok %" PRId64, v);
	}
	if (!strcmp(c, "isexist") && argc == 2) {
		rc = mooncake_store_is_exist(store, argv[1]);
		if (rc < 0)
			return reply_err(rc, NULL);
		return reply("ok %d", rc);
	}
	if (!strcmp(c, "rm") && (argc == 2 || argc == 3)) {
		rc = mooncake_store_remove(store, argv[1],
					   is_force(argc, argv, 2));
		if (rc)
			return reply_err(rc, NULL);
		return reply("ok");
	}
	if (!strcmp(c, "hostname") && argc == 1) {
		const char *h = mooncake_store_get_hostname(store);
		return reply("ok %s", h ? h : "-");
	}
	if (!strcmp(c, "timeouts") && argc == 3 && parse_u64(argv[1], &a) &&
	    parse_u64(argv[2], &b) && a <= UINT32_MAX && b <= UINT32_MAX) {
		rc = mooncake_store_set_timeouts(store, (unsigned)a,
						 (unsigned)b);
		if (rc)
			return reply_err(rc, NULL);
		return reply("ok");
	}
	if (!strcmp(c, "health") && argc == 1)
		return reply("ok %d", mooncake_store_health_check(store));
	if (!strcmp(c, "strerror") && argc == 2 && !mc_parse_i64(argv[1], &v) &&
	    v >= INT32_MIN && v <= INT32_MAX)
		return reply("ok %s", mooncake_store_strerror((int)v));
	if (!strcmp(c, "close") && argc == 1) {
		rc = mooncake_store_close(store);
		forget_scratch_registration();
		if (rc)
			return reply_err(rc, NULL);
		return reply("ok");
	}
	if (!strcmp(c, "new") && argc == 1) {
		close_objects();
		mooncake_store_destroy(store);
		forget_scratch_registration();
		store = mooncake_store_create();
		if (!store)
			return reply_err(-1, "out of memory");
		return reply("ok");
	}
	reply_err(-600, "unknown command or bad arguments");
	return 0;
}

/* ---- the filesystem extensions (store_fs.h) ------------------------------ */

#define MAX_OBJS 64
#define MAX_THREADS 64

static mooncake_object_t objs[MAX_OBJS];

static mooncake_writer_t writers[MAX_OBJS];
static uint64_t writer_size[MAX_OBJS];

/* Before the handle goes: objects are closed, writers abort. */
static void close_objects(void)
{
	for (int h = 0; h < MAX_OBJS; h++) {
		mooncake_store_object_close(objs[h]);
		objs[h] = NULL;
		if (writers[h])
			(void)mooncake_store_writer_close(writers[h], false);
		writers[h] = NULL;
	}
}

/* A reply line grown as needed. */
struct line {
	char *p;
	size_t len, cap;
	bool oom;
};

static void line_add(struct line *l, const char *fmt, ...) MC_PRINTF(2, 3);

static void line_add(struct line *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		size_t room = l->cap - l->len;

		va_start(ap, fmt);
		n = vsnprintf(l->p ? l->p + l->len : NULL, l->p ? room : 0, fmt,
			      ap);
		va_end(ap);
		if (n < 0) {
			l->oom = true;
			return;
		}
		if (l->p && (size_t)n < room) {
			l->len += (size_t)n;
			return;
		}
		size_t cap = (l->cap + (size_t)n + 1) * 2;
		char *p = realloc(l->p, cap);
		if (!p) {
			l->oom = true;
			return;
		}
		l->p = p;
		l->cap = cap;
	}
}

static int line_reply(struct line *l)
{
	if (l->oom)
		reply_err(-1, "out of memory");
	else
		reply("%s", l->p ? l->p : "ok");
	free(l->p);
	return 0;
}

/* Trailing options of oread/oreadh/wwrite. */
struct opts {
	unsigned threads;
	bool unreg, sparse;
};

static bool parse_opts(int argc, char **argv, int at, struct opts *o)
{
	uint64_t n;

	*o = (struct opts){ .threads = 1 };
	for (int i = at; i < argc; i++) {
		if (!strcmp(argv[i], "unreg"))
			o->unreg = true;
		else if (!strcmp(argv[i], "sparse"))
			o->sparse = true;
		else if (!strncmp(argv[i], "threads=", 8) &&
			 parse_u64(argv[i] + 8, &n) && n >= 1 &&
			 n <= MAX_THREADS)
			o->threads = (unsigned)n;
		else
			return false;
	}
	return true;
}

/* The memory pieces go to and come from: registered scratch or not. */
static int io_buffer(const struct opts *o, size_t size, uint8_t **out,
		     bool *heap)
{
	*heap = o->unreg;
	if (!o->unreg)
		return scratch_get(size, out);
	*out = malloc(size ? size : 1);
	return *out ? 0 : -1;
}

/* Pieces of CHUNK bytes spread over threads: thread t does i % n == t. */
struct pieces {
	mooncake_object_t obj;
	mooncake_writer_t w;
	uint8_t *buf;
	uint64_t size, chunk;
	unsigned n_threads;
	bool sparse;
	int64_t result; /* first failure */
	pthread_mutex_t lock;
};

struct worker {
	struct pieces *p;
	unsigned t;
	pthread_t thread;
};

static void set_result(struct pieces *p, int64_t rc)
{
	pthread_mutex_lock(&p->lock);
	if (!p->result)
		p->result = rc;
	pthread_mutex_unlock(&p->lock);
}

static uint64_t n_pieces(const struct pieces *p)
{
	return p->chunk ? (p->size + p->chunk - 1) / p->chunk : 0;
}

/* Reads in order of offsets. */
static void *read_pieces(void *arg)
{
	struct worker *wk = arg;
	struct pieces *p = wk->p;

	for (uint64_t i = wk->t; i < n_pieces(p); i += p->n_threads) {
		uint64_t off = i * p->chunk;
		uint64_t len = p->size - off < p->chunk ? p->size - off :
							  p->chunk;
		int64_t got = mooncake_store_object_read(p->obj, off,
							 p->buf + off, len);

		if (got != (int64_t)len) {
			set_result(p, got < 0 ? got : -800);
			break;
		}
	}
	return NULL;
}

/* Writes the last piece first. */
static void *write_pieces(void *arg)
{
	struct worker *wk = arg;
	struct pieces *p = wk->p;
	uint64_t n = n_pieces(p);

	for (uint64_t k = wk->t; k < n; k += p->n_threads) {
		uint64_t i = n - 1 - k;
		uint64_t off = i * p->chunk;
		uint64_t len = p->size - off < p->chunk ? p->size - off :
							  p->chunk;
		int rc;

		if (p->sparse && i % 2)
			continue;
		rc = mooncake_store_writer_write(p->w, off, p->buf + off, len);
		if (rc) {
			set_result(p, rc);
			break;
		}
	}
	return NULL;
}

static int64_t run_pieces(struct pieces *p, void *(*fn)(void *))
{
	struct worker wk[MAX_THREADS];
	unsigned started = 0;

	pthread_mutex_init(&p->lock, NULL);
	for (unsigned t = 0; t < p->n_threads; t++) {
		wk[t] = (struct worker){ .p = p, .t = t };
		if (p->n_threads == 1) {
			fn(&wk[t]);
			continue;
		}
		if (pthread_create(&wk[t].thread, NULL, fn, &wk[t])) {
			set_result(p, -1);
			break;
		}
		started++;
	}
	for (unsigned t = 0; t < started; t++)
		pthread_join(wk[t].thread, NULL);
	pthread_mutex_destroy(&p->lock);
	return p->result;
}

/* Read all of obj in pieces and compare with VALUE(size, seed). */
static int read_verify(mooncake_object_t obj, uint64_t chunk, uint64_t seed,
		       const struct opts *o)
{
	uint64_t size = mooncake_store_object_size(obj);
	struct pieces p = { .obj = obj,
			    .size = size,
			    .chunk = chunk,
			    .n_threads = o->threads };
	uint8_t *want = NULL;
	bool heap;
	int64_t rc;

	if (size > MAX_VALUE)
		return reply_err(-600, "object too large for store_shell");
	if (io_buffer(o, (size_t)size, &p.buf, &heap))
		return reply_err(-1, "buffer");
	memset(p.buf, 0xA5, (size_t)size);
	rc = run_pieces(&p, read_pieces);
	if (rc) {
		reply_err((int)rc, NULL);
		goto out;
	}
	if (!o->sparse) {
		size_t at = value_cmp(p.buf, (size_t)size, seed);
		if (at != size)
			reply("mismatch offset %zu", at);
		else
			reply("ok %" PRIu64, size);
		goto out;
	}
	/* Sparse: odd pieces were never written and must read as zeros. */
	want = malloc(size ? size : 1);
	if (!want) {
		reply_err(-1, "out of memory");
		goto out;
	}
	value_fill(want, (size_t)size, seed);
	for (uint64_t off = 0; off < size; off += chunk) {
		uint64_t len = size - off < chunk ? size - off : chunk;
		if ((off / chunk) % 2)
			memset(want + off, 0, (size_t)len);
	}
	for (uint64_t i = 0; i < size; i++) {
		if (p.buf[i] != want[i]) {
			reply("mismatch offset %" PRIu64, i);
			goto out;
		}
	}
	reply("ok %" PRIu64, size);
out:
	free(want);
	if (heap)
		free(p.buf);
	return 0;
}

static int cmd_oread(int argc, char **argv)
{
	mooncake_object_t obj;
	uint64_t chunk, seed;
	struct opts o;
	int rc;

	if (argc < 4 || !parse_size(argv[2], &chunk) || !chunk ||
	    !parse_u64(argv[3], &seed) || !parse_opts(argc, argv, 4, &o))
		return usage("oread KEY CHUNK SEED [threads=N] [unreg] "
			     "[sparse]");
	rc = mooncake_store_object_open(store, argv[1], &obj);
	if (rc)
		return reply_err(rc, "open");
	read_verify(obj, chunk, seed, &o);
	mooncake_store_object_close(obj);
	return 0;
}

/* A handle number of the table, or -1. */
static int handle_arg(const char *a)
{
	uint64_t h;

	if (!parse_u64(a, &h) || h >= MAX_OBJS || !objs[h])
		return -1;
	return (int)h;
}

static int cmd_ohandle(int argc, char **argv)
{
	const char *c = argv[0];
	uint64_t chunk, seed, off, len;
	struct opts o;
	int h, rc;

	if (!strcmp(c, "oopen")) {
		if (argc != 2)
			return usage("oopen KEY");
		for (h = 0; h < MAX_OBJS && objs[h]; h++)
			;
		if (h == MAX_OBJS)
			return reply_err(-600, "too many open objects");
		rc = mooncake_store_object_open(store, argv[1], &objs[h]);
		if (rc)
			return reply_err(rc, NULL);
		return reply("ok %d %" PRIu64 " version=%" PRIu64, h,
			     mooncake_store_object_size(objs[h]),
			     mooncake_store_object_version(objs[h]));
	}
	if (!strcmp(c, "oclose")) {
		if (argc != 2 || (h = handle_arg(argv[1])) < 0)
			return usage("oclose H");
		mooncake_store_object_close(objs[h]);
		objs[h] = NULL;
		return reply("ok");
	}
	if (!strcmp(c, "oread1")) {
		uint8_t *buf;
		int64_t got;

		if (argc != 4 || (h = handle_arg(argv[1])) < 0 ||
		    !parse_u64(argv[2], &off) || !parse_size(argv[3], &len) ||
		    len > MAX_VALUE)
			return usage("oread1 H OFF LEN");
		if (scratch_get((size_t)len, &buf))
			return reply_err(-1, "scratch buffer");
		got = mooncake_store_object_read(objs[h], off, buf, len);
		if (got < 0)
			return reply_err((int)got, NULL);
		return reply("ok %" PRId64 " %08x", got,
			     crc32_ieee(buf, (size_t)got));
	}
	if (argc < 4 || (h = handle_arg(argv[1])) < 0 ||
	    !parse_size(argv[2], &chunk) || !chunk ||
	    !parse_u64(argv[3], &seed) || !parse_opts(argc, argv, 4, &o))
		return usage("oreadh H CHUNK SEED [threads=N] [unreg] "
			     "[sparse]");
	return read_verify(objs[h], chunk, seed, &o);
}

static int cmd_wwrite(int argc, char **argv)
{
	mooncake_replicate_config_t c = { .replica_num = 1 };
	struct pieces p = { 0 };
	uint64_t size, chunk, seed, repl = 1;
	struct opts o;
	int at = 5, rc;
	bool heap;

	if (argc > 5 && parse_u64(argv[5], &repl))
		at = 6;
	if (argc < 5 || !parse_size(argv[2], &size) || size > MAX_VALUE ||
	    !parse_size(argv[3], &chunk) || !chunk ||
	    !parse_u64(argv[4], &seed) || repl > 64 ||
	    !parse_opts(argc, argv, at, &o))
		return usage("wwrite KEY SIZE CHUNK SEED [REPLICAS] "
			     "[threads=N] [unreg] [sparse]");
	c.replica_num = (size_t)repl;
	if (io_buffer(&o, (size_t)size, &p.buf, &heap))
		return reply_err(-1, "buffer");
	value_fill(p.buf, (size_t)size, seed);
	rc = mooncake_store_writer_open(store, argv[1], size, &c, &p.w);
	if (rc) {
		reply_err(rc, "open");
		goto out;
	}
	p.size = size;
	p.chunk = chunk;
	p.n_threads = o.threads;
	p.sparse = o.sparse;
	rc = (int)run_pieces(&p, write_pieces);
	if (rc) {
		(void)mooncake_store_writer_close(p.w, false);
		reply_err(rc, "write");
		goto out;
	}
	rc = mooncake_store_writer_close(p.w, true);
	if (rc)
		reply_err(rc, "close");
	else
		reply("ok");
out:
	if (heap)
		free(p.buf);
	return 0;
}

static int cmd_wabort(int argc, char **argv)
{
	mooncake_writer_t w;
	uint64_t size;
	int rc;

	if (argc != 3 || !parse_size(argv[2], &size))
		return usage("wabort KEY SIZE");
	rc = mooncake_store_writer_open(store, argv[1], size, NULL, &w);
	if (rc)
		return reply_err(rc, "open");
	rc = mooncake_store_writer_close(w, false);
	if (rc)
		return reply_err(rc, "close");
	return reply("ok");
}

static int writer_arg(const char *a)
{
	uint64_t h;

	if (!parse_u64(a, &h) || h >= MAX_OBJS || !writers[h])
		return -1;
	return (int)h;
}

/* wopen, wpiece, wclose */
static int cmd_whandle(int argc, char **argv)
{
	mooncake_replicate_config_t c = { .replica_num = 1 };
	const char *cmd = argv[0];
	uint64_t size, repl = 1, off, len, seed;
	uint8_t *buf;
	int h, rc;

	if (!strcmp(cmd, "wopen")) {
		bool publish = argc > 3 && !strcmp(argv[argc - 1], "publish");
		int n = argc - publish;

		if (n < 3 || n > 4 || !parse_size(argv[2], &size) ||
		    (n == 4 && (!parse_u64(argv[3], &repl) || repl > 64)))
			return usage("wopen KEY SIZE [REPLICAS] [publish]");
		for (h = 0; h < MAX_OBJS && writers[h]; h++)
			;
		if (h == MAX_OBJS)
			return reply_err(-600, "too many open writers");
		c.replica_num = (size_t)repl;
		rc = publish ?
			     mooncake_store_writer_open_publish(store, argv[1],
								size, &c, NULL,
								&writers[h]) :
			     mooncake_store_writer_open(store, argv[1], size,
							&c, &writers[h]);
		if (rc)
			return reply_err(rc, NULL);
		writer_size[h] = size;
		return reply("ok %d", h);
	}
	if (!strcmp(cmd, "wclose")) {
		if (argc != 3 || (h = writer_arg(argv[1])) < 0 ||
		    (strcmp(argv[2], "commit") && strcmp(argv[2], "abort")))
			return usage("wclose H commit|abort");
		rc = mooncake_store_writer_close(writers[h],
						 !strcmp(argv[2], "commit"));
		writers[h] = NULL;
		if (rc)
			return reply_err(rc, NULL);
		return reply("ok");
	}
	if (argc != 5 || (h = writer_arg(argv[1])) < 0 ||
	    !parse_u64(argv[2], &off) || !parse_size(argv[3], &len) ||
	    !parse_u64(argv[4], &seed) || writer_size[h] > MAX_VALUE)
		return usage("wpiece H OFF LEN SEED");
	size = writer_size[h];
	if (scratch_get((size_t)size, &buf))
		return reply_err(-1, "scratch buffer");
	value_fill(buf, (size_t)size, seed);
	/* Past the end: handed over as is, for the library to refuse. */
	rc = mooncake_store_writer_write(
		writers[h], off, off <= size ? buf + off : buf, (size_t)len);
	if (rc)
		return reply_err(rc, NULL);
	return reply("ok");
}

static int cmd_fstat(int argc, char **argv)
{
	mooncake_obj_stat_t st;
	int rc;

	if (argc != 2)
		return usage("fstat KEY");
	rc = mooncake_store_stat(store, argv[1], &st);
	if (rc)
		return reply_err(rc, NULL);
	return reply("ok size=%" PRIu64 " replicas=%" PRIu32 " holds=%" PRIu32
		     " lease=%" PRIu64 " mtime=%" PRIu64 " version=%" PRIu64,
		     st.size, st.replicas, st.holds, st.lease_ms, st.mtime_ms,
		     st.version);
}

static int cmd_rtext(int argc, char **argv)
{
	char buf[4096];
	int n;

	if (argc != 2)
		return usage("rtext KEY");
	n = mooncake_store_replica_text(store, argv[1], buf, sizeof(buf));
	if (n < 0)
		return reply_err(n, NULL);
	for (char *p = buf; *p; p++)
		if (*p == '\n')
			*p = ' ';
	return reply("ok %d %s", n, buf);
}

static int cmd_ren(int argc, char **argv)
{
	bool no_replace = argc == 4 && !strcmp(argv[3], "noreplace");
	int rc;

	if (argc != 3 && !no_replace)
		return usage("ren FROM TO [noreplace]");
	rc = mooncake_store_rename(store, argv[1], argv[2], no_replace);
	if (rc)
		return reply_err(rc, NULL);
	return reply("ok");
}

static void ls_entry(void *arg, const mooncake_list_entry_t *e)
{
	line_add(arg, " %s:%" PRIu64 "%s", e->name, e->size,
		 e->is_prefix ? ":/" : "");
}

static int cmd_ls(int argc, char **argv)
{
	struct line entries = { 0 }, l = { 0 };
	bool truncated = false;
	uint64_t limit;
	int n;

	if (argc != 5 || !parse_u64(argv[4], &limit) || limit > UINT32_MAX)
		return usage("ls PREFIX DELIM START LIMIT");
	n = mooncake_store_list(store, opt_str(argv[1]), opt_str(argv[2]),
				opt_str(argv[3]), (unsigned)limit, ls_entry,
				&entries, &truncated);
	if (n < 0) {
		free(entries.p);
		return reply_err(n, NULL);
	}
	line_add(&l, "ok %d truncated=%d%s", n, truncated ? 1 : 0,
		 entries.p ? entries.p : "");
	l.oom |= entries.oom;
	free(entries.p);
	return line_reply(&l);
}

static int cmd_pool(int argc, char **argv)
{
	mooncake_pool_stat_t st;
	int rc;

	(void)argv;
	if (argc != 1)
		return usage("pool");
	rc = mooncake_store_pool_stat(store, &st);
	if (rc)
		return reply_err(rc, NULL);
	return reply("ok capacity=%" PRIu64 " allocated=%" PRIu64
		     " keys=%" PRIu64 " clients=%" PRIu32 " segments=%" PRIu32
		     " largest=%" PRIu64,
		     st.capacity, st.allocated, st.keys, st.clients,
		     st.segments, st.largest_segment);
}

static const char *ev_name(enum mooncake_event_type t)
{
	switch (t) {
	case MOONCAKE_EV_PUT:
		return "put";
	case MOONCAKE_EV_REMOVE:
		return "remove";
	case MOONCAKE_EV_RENAME:
		return "rename";
	case MOONCAKE_EV_EVICT:
		return "evict";
	case MOONCAKE_EV_LOST:
		return "lost";
	case MOONCAKE_EV_ATTR:
		return "attr";
	case MOONCAKE_EV_MKDIR:
		return "mkdir";
	case MOONCAKE_EV_RMDIR:
		return "rmdir";
	case MOONCAKE_EV_CKPT_PUT:
		return "ckpt_put";
	case MOONCAKE_EV_CKPT_REMOVE:
		return "ckpt_remove";
	}
	return "?";
}

static void watch_event(void *arg, const mooncake_event_t *e)
{
	line_add(arg, " %s:%s%s%s", ev_name(e->type), e->key, *e->to ? ">" : "",
		 e->to);
}

static size_t count_events(const char *text)
{
	size_t n = 0;

	for (; text && *text; text++)
		n += *text == ' ';
	return n;
}

static int cmd_watch(int argc, char **argv)
{
	struct line events = { 0 }, l = { 0 };
	uint64_t epoch, after, wait;
	bool reset = false;
	int n;

	if (argc != 4 || !parse_u64(argv[1], &epoch) ||
	    !parse_u64(argv[2], &after) || !parse_u64(argv[3], &wait) ||
	    wait > UINT32_MAX)
		return usage("watch EPOCH AFTER WAIT_MS");
	n = mooncake_store_watch(store, &epoch, &after, (unsigned)wait,
				 watch_event, &events, &reset);
	if (n < 0) {
		free(events.p);
		return reply_err(n, NULL);
	}
	/* The count is the events delivered, or 1 for a reset. */
	if (reset ? n != 1 || events.p : n != (int)count_events(events.p)) {
		free(events.p);
		return reply("err -1 INTERNAL_ERROR watch returned %d with "
			     "reset=%d",
			     n, reset ? 1 : 0);
	}
	line_add(&l, "ok epoch=%" PRIu64 " after=%" PRIu64 " reset=%d%s", epoch,
		 after, reset ? 1 : 0, events.p ? events.p : "");
	l.oom |= events.oom;
	free(events.p);
	return line_reply(&l);
}

static bool run_fs(int argc, char **argv)
{
	const char *c = argv[0];

	if (!strcmp(c, "oread"))
		cmd_oread(argc, argv);
	else if (!strcmp(c, "oopen") || !strcmp(c, "oreadh") ||
		 !strcmp(c, "oread1") || !strcmp(c, "oclose"))
		cmd_ohandle(argc, argv);
	else if (!strcmp(c, "wwrite"))
		cmd_wwrite(argc, argv);
	else if (!strcmp(c, "wabort"))
		cmd_wabort(argc, argv);
	else if (!strcmp(c, "wopen") || !strcmp(c, "wpiece") ||
		 !strcmp(c, "wclose"))
		cmd_whandle(argc, argv);
	else if (!strcmp(c, "fstat"))
		cmd_fstat(argc, argv);
	else if (!strcmp(c, "rtext"))
		cmd_rtext(argc, argv);
	else if (!strcmp(c, "ren"))
		cmd_ren(argc, argv);
	else if (!strcmp(c, "ls"))
		cmd_ls(argc, argv);
	else if (!strcmp(c, "pool"))
		cmd_pool(argc, argv);
	else if (!strcmp(c, "watch"))
		cmd_watch(argc, argv);
	else
		return false;
	return true;
}

static void run(int argc, char **argv)
{
	const char *c = argv[0];

	if (!strcmp(c, "setup"))
		cmd_setup(argc, argv);
	else if (!strcmp(c, "put"))
		cmd_put(argc, argv, 'r');
	else if (!strcmp(c, "uput"))
		cmd_put(argc, argv, 'u');
	else if (!strcmp(c, "sput"))
		cmd_put(argc, argv, 's');
	else if (!strcmp(c, "get"))
		cmd_get(argc, argv);
	else if (!strcmp(c, "sget"))
		cmd_sget(argc, argv);
	else if (!strcmp(c, "check"))
		cmd_check(argc, argv);
	else if (!strcmp(c, "gput"))
		cmd_gpu(argc, argv, true);
	else if (!strcmp(c, "gcheck"))
		cmd_gpu(argc, argv, false);
	else if (!strcmp(c, "bput"))
		cmd_batch(argc, argv, true);
	else if (!strcmp(c, "bget"))
		cmd_batch(argc, argv, false);
	else if (!strcmp(c, "mput"))
		cmd_multi(argc, argv, true);
	else if (!strcmp(c, "mget"))
		cmd_multi(argc, argv, false);
	else if (!strcmp(c, "exist"))
		cmd_exist(argc, argv);
	else if (!strcmp(c, "brm"))
		cmd_brm(argc, argv);
	else if (!strcmp(c, "rmall"))
		cmd_count(argc, argv, false);
	else if (!strcmp(c, "rmre"))
		cmd_count(argc, argv, true);
	else if (!strcmp(c, "desc"))
		cmd_desc(argc, argv);
	else if (!run_fs(argc, argv))
		cmd_simple(argc, argv);
}

int main(void)
{
	static char *argv[MAX_ARGS + 1];
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;

	store = mooncake_store_create();
	if (!store) {
		reply("err -1 INTERNAL_ERROR out of memory");
		return 1;
	}
	while ((len = getline(&line, &cap, stdin)) >= 0) {
		int argc = 0;
		char *p = line;

		if ((size_t)len > MAX_LINE) {
			reply_err(-600, "line too long");
			continue;
		}
		if (memchr(line, '\0', (size_t)len)) {
			reply_err(-600, "NUL byte in the line");
			continue;
		}
		while (*p) {
			while (*p == ' ' || *p == '\t' || *p == '\n' ||
			       *p == '\r')
				*p++ = '\0';
			if (!*p)
				break;
			if (argc == MAX_ARGS)
				break;
			argv[argc++] = p;
			while (*p && *p != ' ' && *p != '\t' && *p != '\n' &&
			       *p != '\r')
				p++;
		}
		argv[argc] = NULL;
		if (!argc || argv[0][0] == '#')
			continue;
		if (argc == MAX_ARGS) {
			reply_err(-600, "too many arguments");
			continue;
		}
		if (!strcmp(argv[0], "quit"))
			break;
		run(argc, argv);
	}
	/* "quit" is answered once the handle is closed: the pool has
	 * forgotten us by the time the test reads "ok". */
	close_objects();
	if (scratch_reg)
		(void)mooncake_store_unregister_buffer(store, scratch);
	mooncake_store_destroy(store);
	free(scratch);
	free(line);
	reply("ok");
	return 0;
}
