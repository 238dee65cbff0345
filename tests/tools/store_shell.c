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
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_compiler.h"
#include "mc_parse.h"
#include "mooncake/store.h"

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
	else
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
	if (scratch_reg)
		(void)mooncake_store_unregister_buffer(store, scratch);
	mooncake_store_destroy(store);
	free(scratch);
	free(line);
	reply("ok");
	return 0;
}
