/* SPDX-License-Identifier: Apache-2.0 */
/*
 * te_client: a scripted transfer-engine initiator for the fault tests. It
 * creates an engine, registers a local buffer and then runs commands read
 * from stdin, one per line, answering each with exactly one line that
 * starts with "ok" or "error", so a test drives it step by step between
 * the faults it injects.
 *
 *   te_client --metadata CONN [--name NAME] [--transport T]
 *             [--timeout_ms N] [--size BYTES]
 *
 * First line: "ready NAME RPC", or "error create RC ERRNAME: MESSAGE" and
 * exit 1. Commands (B names a batch, SEG a segment as opened):
 *
 *   open SEG                       te_segment_open
 *   close SEG                      te_segment_close
 *   submit B SEG read|write ADDR LEN COUNT
 *                                  a new batch of COUNT requests of LEN
 *                                  bytes at target ADDR + i * LEN, local
 *                                  offset i * LEN (wrapping in the buffer)
 *   run B SEG read|write ADDR LEN COUNT
 *                                  as submit, through te_batch_transfer:
 *                                  "ok ran B since_submit_ms=S" once
 *                                  every request ended
 *   wait B MS                      te_batch_wait: "ok rc=R waited_ms=W
 *                                  since_submit_ms=S"
 *   status B                       "ok completed=C failed=F timeout=T
 *                                  waiting=W transferred=X errors=NAMES"
 *   check B SEED BASE              completed READs hold te_pattern.h's
 *                                  pattern for SEED at offset ADDR - BASE
 *   destroy B                      te_batch_destroy: "ok rc=R"
 *   counters TRANSPORT             te_counters
 *   notify SEG NAME MSG            te_notify
 *   quit                           clean up and exit 0 (also at EOF)
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mc_compiler.h"
#include "mc_log.h"
#include "mc_parse.h"
#include "mooncake/mc_err.h"
#include "mooncake/te.h"
#include "te_pattern.h"

#define MAX_OBJS 32
#define NAME_LEN 256

struct seg {
	char name[NAME_LEN];
	struct te_segment *s;
};

struct batch {
	char name[64];
	struct te_batch *b;
	struct te_request *reqs;
	unsigned n;
	double submitted_ms;
};

static struct te_engine *eng;
static uint8_t *local;
static uint64_t local_len;
static struct seg segs[MAX_OBJS];
static struct batch batches[MAX_OBJS];

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void reply(const char *fmt, ...) MC_PRINTF(1, 2);

static void reply(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static struct seg *find_seg(const char *name)
{
	for (int i = 0; i < MAX_OBJS; i++)
		if (segs[i].s && !strcmp(segs[i].name, name))
			return &segs[i];
	return NULL;
}

static struct batch *find_batch(const char *name)
{
	for (int i = 0; i < MAX_OBJS; i++)
		if (batches[i].b && !strcmp(batches[i].name, name))
			return &batches[i];
	return NULL;
}

static int parse_u64(const char *v, uint64_t *out)
{
	int64_t x;

	if (!v)
		return -EINVAL;
	if (mc_parse_i64(v, &x) == 0 && x >= 0) {
		*out = (uint64_t)x;
		return 0;
	}
	return mc_parse_size(v, out);
}

static void cmd_open(const char *name)
{
	char err[TE_ERR_LEN] = "";
	struct seg *s = NULL;
	int rc;

	if (!name || strlen(name) >= NAME_LEN)
		return reply("error usage: open SEG");
	if (find_seg(name))
		return reply("ok already open");
	for (int i = 0; i < MAX_OBJS && !s; i++)
		if (!segs[i].s)
			s = &segs[i];
	if (!s)
		return reply("error too many segments");
	rc = te_segment_open(eng, name, &s->s, err, sizeof(err));
	if (rc) {
		s->s = NULL;
		return reply("error open %d %s: %s", rc, mc_err_name(rc), err);
	}
	snprintf(s->name, sizeof(s->name), "%s", name);
	reply("ok open %s", name);
}

static void cmd_close(const char *name)
{
	struct seg *s = name ? find_seg(name) : NULL;

	if (!s)
		return reply("error no segment %s", name ? name : "");
	te_segment_close(s->s);
	s->s = NULL;
	reply("ok");
}

/* submit, or with in_call `run`: te_batch_transfer, which returns once
 * every request ended (the engine may move them on this thread). */
static void cmd_submit(char **argv, int argc, bool in_call)
{
	struct batch *bt = NULL;
	struct seg *s;
	uint64_t addr, len, count;
	enum te_opcode op;
	int rc;

	if (argc != 7 || parse_u64(argv[4], &addr) ||
	    parse_u64(argv[5], &len) || parse_u64(argv[6], &count) || !len ||
	    !count || count > 65536 || len > local_len)
		return reply("error usage: submit|run B SEG read|write ADDR "
			     "LEN COUNT");
	if (!strcmp(argv[3], "read"))
		op = TE_READ;
	else if (!strcmp(argv[3], "write"))
		op = TE_WRITE;
	else
		return reply("error op must be read or write");
	s = find_seg(argv[2]);
	if (!s)
		return reply("error no segment %s", argv[2]);
	if (find_batch(argv[1]) || strlen(argv[1]) >= sizeof(bt->name))
		return reply("error batch %s exists", argv[1]);
	for (int i = 0; i < MAX_OBJS && !bt; i++)
		if (!batches[i].b)
			bt = &batches[i];
	if (!bt)
		return reply("error too many batches");
	bt->reqs = calloc(count, sizeof(*bt->reqs));
	if (!bt->reqs)
		return reply("error out of memory");
	rc = te_batch_create(eng, (unsigned)count, &bt->b);
	if (rc) {
		free(bt->reqs);
		bt->b = NULL;
		return reply("error te_batch_create %d", rc);
	}
	for (uint64_t i = 0; i < count; i++) {
		uint64_t slots = local_len / len;
		bt->reqs[i] = (struct te_request){
			.opcode = op,
			.local = local + (i % slots) * len,
			.target = s->s,
			.target_addr = addr + i * len,
			.length = len,
		};
	}
	bt->n = (unsigned)count;
	snprintf(bt->name, sizeof(bt->name), "%s", argv[1]);
	bt->submitted_ms = now_ms();
	if (in_call) {
		rc = te_batch_transfer(bt->b, bt->reqs, bt->n, -1);
		if (!rc)
			return reply("ok ran %s since_submit_ms=%.0f", bt->name,
				     now_ms() - bt->submitted_ms);
	} else {
		rc = te_batch_submit(bt->b, bt->reqs, bt->n);
	}
	if (rc) {
		te_batch_destroy(bt->b);
		free(bt->reqs);
		bt->b = NULL;
		return reply("error submit %d %s", rc, mc_err_name(rc));
	}
	reply("ok submitted %s", bt->name);
}

static void cmd_wait(const char *name, const char *ms)
{
	struct batch *bt = name ? find_batch(name) : NULL;
	int64_t t;
	double t0;
	int rc;

	if (!bt || !ms || mc_parse_i64(ms, &t) || t < -1 || t > 3600000)
		return reply("error usage: wait B MS");
	t0 = now_ms();
	rc = te_batch_wait(bt->b, (int)t);
	reply("ok rc=%d waited_ms=%.0f since_submit_ms=%.0f", rc, now_ms() - t0,
	      now_ms() - bt->submitted_ms);
}

static void cmd_status(const char *name)
{
	struct batch *bt = name ? find_batch(name) : NULL;
	unsigned cnt[7] = { 0 };
	uint64_t bytes = 0;
	char errs[256] = "";
	size_t el = 0;

	if (!bt)
		return reply("error usage: status B");
	for (unsigned i = 0; i < bt->n; i++) {
		struct te_status st;

		if (te_batch_status(bt->b, i, &st))
			return reply("error te_batch_status %u", i);
		if ((unsigned)st.status < MC_ARRAY_SIZE(cnt))
			cnt[st.status]++;
		bytes += st.transferred;
		if (st.error && !strstr(errs, mc_err_name(st.error)) &&
		    el + 40 < sizeof(errs))
			el += (size_t)snprintf(errs + el, sizeof(errs) - el,
					       "%s%s", el ? "," : "",
					       mc_err_name(st.error));
	}
	reply("ok completed=%u failed=%u timeout=%u waiting=%u "
	      "transferred=%llu errors=%s",
	      cnt[TE_COMPLETED], cnt[TE_FAILED], cnt[TE_TIMEOUT],
	      cnt[TE_WAITING], (unsigned long long)bytes, el ? errs : "-");
}

static void cmd_check(char **argv, int argc)
{
	struct batch *bt = argc == 4 ? find_batch(argv[1]) : NULL;
	uint64_t seed, base;
	unsigned checked = 0;

	if (!bt || parse_u64(argv[2], &seed) || parse_u64(argv[3], &base))
		return reply("error usage: check B SEED BASE");
	if ((uint64_t)bt->n * bt->reqs[0].length > local_len)
		return reply("error the batch's requests share local memory");
	for (unsigned i = 0; i < bt->n; i++) {
		const struct te_request *r = &bt->reqs[i];
		struct te_status st;
		size_t at;

		if (te_batch_status(bt->b, i, &st) || r->opcode != TE_READ ||
		    st.status != TE_COMPLETED)
			continue;
		at = te_pattern_check(r->local, r->length, seed,
				      r->target_addr - base);
		if (at != r->length)
			return reply("error mismatch request %u byte %zu", i,
				     at);
		checked++;
	}
	reply("ok checked=%u", checked);
}

static void cmd_destroy(const char *name)
{
	struct batch *bt = name ? find_batch(name) : NULL;
	int rc;

	if (!bt)
		return reply("error usage: destroy B");
	rc = te_batch_destroy(bt->b);
	if (!rc) {
		free(bt->reqs);
		bt->b = NULL;
	}
	reply("ok rc=%d", rc);
}

static void cmd_counters(const char *tp)
{
	struct te_counters c;
	int rc = tp ? te_counters(eng, tp, &c) : -EINVAL;

	if (rc)
		return reply("error counters %d", rc);
	reply("ok read_bytes=%llu write_bytes=%llu read_requests=%llu "
	      "write_requests=%llu failed=%llu served=%llu connections=%llu "
	      "registrations=%llu inflight=%llu caller_requests=%llu",
	      (unsigned long long)c.read_bytes,
	      (unsigned long long)c.write_bytes,
	      (unsigned long long)c.read_requests,
	      (unsigned long long)c.write_requests,
	      (unsigned long long)c.failed_requests,
	      (unsigned long long)c.served_bytes,
	      (unsigned long long)c.connections,
	      (unsigned long long)c.registrations,
	      (unsigned long long)c.inflight,
	      (unsigned long long)c.caller_requests);
}

static void cmd_notify(char **argv, int argc)
{
	struct seg *s = argc == 4 ? find_seg(argv[1]) : NULL;
	int rc;

	if (!s)
		return reply("error usage: notify SEG NAME MSG");
	rc = te_notify(eng, s->s, argv[2], argv[3]);
	if (rc)
		return reply("error notify %d %s", rc, mc_err_name(rc));
	reply("ok");
}

/* Returns false after "quit". */
static bool run_line(char *line)
{
	char *argv[8], *save = NULL, *tok;
	int argc = 0;

	for (tok = strtok_r(line, " \t\r\n", &save); tok && argc < 8;
	     tok = strtok_r(NULL, " \t\r\n", &save))
		argv[argc++] = tok;
	if (!argc) {
		reply("error empty command");
		return true;
	}
	if (!strcmp(argv[0], "quit"))
		return false;
	if (!strcmp(argv[0], "open"))
		cmd_open(argc > 1 ? argv[1] : NULL);
	else if (!strcmp(argv[0], "close"))
		cmd_close(argc > 1 ? argv[1] : NULL);
	else if (!strcmp(argv[0], "submit"))
		cmd_submit(argv, argc, false);
	else if (!strcmp(argv[0], "run"))
		cmd_submit(argv, argc, true);
	else if (!strcmp(argv[0], "wait"))
		cmd_wait(argc > 1 ? argv[1] : NULL, argc > 2 ? argv[2] : NULL);
	else if (!strcmp(argv[0], "status"))
		cmd_status(argc > 1 ? argv[1] : NULL);
	else if (!strcmp(argv[0], "check"))
		cmd_check(argv, argc);
	else if (!strcmp(argv[0], "destroy"))
		cmd_destroy(argc > 1 ? argv[1] : NULL);
	else if (!strcmp(argv[0], "counters"))
		cmd_counters(argc > 1 ? argv[1] : NULL);
	else if (!strcmp(argv[0], "notify"))
		cmd_notify(argv, argc);
	else
		reply("error unknown command %s", argv[0]);
	return true;
}

static int usage(const char *msg)
{
	fprintf(stderr,
		"te_client: %s\nusage: te_client --metadata CONN [--name "
		"NAME] [--transport T] [--timeout_ms N] [--size BYTES]\n",
		msg);
	return 2;
}

int main(int argc, char **argv)
{
	struct te_engine_cfg cfg = { .local_server_name = "127.0.0.1" };
	char err[TE_ERR_LEN] = "", *line = NULL;
	uint64_t timeout = 0;
	size_t cap = 0;
	bool clean = true;
	int rc;

	local_len = 64ull << 20;
	for (int i = 1; i < argc; i += 2) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v || strncmp(f, "--", 2))
			return usage("flags are --name VALUE pairs");
		if (!strcmp(f, "--metadata"))
			cfg.metadata = v;
		else if (!strcmp(f, "--name"))
			cfg.local_server_name = v;
		else if (!strcmp(f, "--transport"))
			cfg.transport = v;
		else if (!strcmp(f, "--timeout_ms")) {
			if (parse_u64(v, &timeout) || timeout > 3600000)
				return usage("bad --timeout_ms");
			cfg.timeout_ms = (unsigned)timeout;
		} else if (!strcmp(f, "--size")) {
			if (parse_u64(v, &local_len) || local_len < 4096)
				return usage("bad --size");
		} else {
			return usage("unknown flag");
		}
	}
	if (!cfg.metadata)
		return usage("--metadata is required");
	mc_log_init_from_env();
	rc = te_engine_create(&cfg, &eng, err, sizeof(err));
	if (rc) {
		reply("error create %d %s: %s", rc, mc_err_name(rc), err);
		return 1;
	}
	local = aligned_alloc(4096, (local_len + 4095) & ~4095ull);
	if (!local)
		return 1;
	memset(local, 0, local_len);
	rc = te_register(eng, local, local_len, "cpu:0", false);
	if (rc) {
		reply("error te_register %d", rc);
		return 1;
	}
	reply("ready %s %s", te_engine_name(eng), te_engine_rpc_address(eng));
	while (getline(&line, &cap, stdin) > 0)
		if (!run_line(line))
			break;
	free(line);

	/* Batches still in flight own local memory: wait, then free. */
	for (int i = 0; i < MAX_OBJS; i++) {
		if (!batches[i].b)
			continue;
		if (te_batch_wait(batches[i].b, 60000) ||
		    te_batch_destroy(batches[i].b)) {
			clean = false;
			continue;
		}
		free(batches[i].reqs);
	}
	if (!clean) {
		reply("error batches still in flight at exit");
		_exit(1);
	}
	for (int i = 0; i < MAX_OBJS; i++)
		if (segs[i].s)
			te_segment_close(segs[i].s);
	if (te_unregister(eng, local))
		fprintf(stderr, "te_client: te_unregister failed\n");
	te_engine_destroy(eng);
	free(local);
	reply("ok bye");
	return 0;
}
