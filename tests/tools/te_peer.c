/* SPDX-License-Identifier: Apache-2.0 */
/*
 * te_peer: a passive transfer-engine target for the integration tests. It
 * creates an engine, registers one remote-accessible buffer filled with
 * the test pattern (te_pattern.h), announces itself in a ready file and
 * serves peers until SIGTERM or SIGINT, then unregisters, destroys the
 * engine and exits 0.
 *
 *   te_peer --metadata CONN [--name 127.0.0.1] [--size 64M] [--shm]
 *           [--ready FILE] [--pattern SEED] [--timeout_ms N]
 *           [--transport rdma] [--device NAMES]
 *
 * --transport rdma makes the engine open its RDMA NICs and register the
 * buffer on them, so that peers can reach it with one-sided RDMA
 * (--device: upstream's device_name list).
 * --shm allocates the buffer with te_mem_alloc() (so a same-host peer can
 * use the shm transport); otherwise it is plain aligned_alloc() memory
 * that only tcp reaches. The ready file gets one JSON line, written to a
 * temporary file and renamed into place:
 *
 *   {"name": "<segment name>", "rpc": "ip:port", "addr": N, "size": N}
 *
 * Every 50 ms received notifications are printed as "notify NAME MSG".
 * Exit status: 0 clean stop, 1 runtime failure, 2 usage.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mc_log.h"
#include "mc_parse.h"
#include "mooncake/mc_err.h"
#include "mooncake/te.h"
#include "te_pattern.h"

struct opts {
	const char *metadata;
	const char *name;
	const char *ready;
	uint64_t size;
	uint64_t seed;
	uint64_t timeout_ms;
	bool shm;
	const char *transport;
	const char *device;
};

static int usage(const char *msg)
{
	fprintf(stderr,
		"te_peer: %s\n"
		"usage: te_peer --metadata CONN [--name NAME] [--size BYTES] "
		"[--shm] [--ready FILE] [--pattern SEED] [--timeout_ms N] "
		"[--transport rdma] [--device NAMES]\n",
		msg);
	return 2;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		const char *eq = strchr(a, '=');
		char flag[64];
		size_t flen = eq ? (size_t)(eq - a) : strlen(a);

		if (strncmp(a, "--", 2) || flen >= sizeof(flag))
			return usage("bad argument");
		memcpy(flag, a + 2, flen - 2);
		flag[flen - 2] = '\0';
		if (!strcmp(flag, "shm")) {
			o->shm = true;
			continue;
		}
		if (eq)
			v = eq + 1;
		else if (i + 1 < argc)
			v = argv[++i];
		else
			return usage("flag needs a value");
		if (!strcmp(flag, "metadata"))
			o->metadata = v;
		else if (!strcmp(flag, "name"))
			o->name = v;
		else if (!strcmp(flag, "ready"))
			o->ready = v;
		else if (!strcmp(flag, "transport"))
			o->transport = v;
		else if (!strcmp(flag, "device"))
			o->device = v;
		else if (!strcmp(flag, "size")) {
			if (mc_parse_size(v, &o->size) || !o->size)
				return usage("bad --size");
		} else if (!strcmp(flag, "pattern")) {
			int64_t s;
			if (mc_parse_i64(v, &s))
				return usage("bad --pattern");
			o->seed = (uint64_t)s;
		} else if (!strcmp(flag, "timeout_ms")) {
			int64_t t;
			if (mc_parse_i64(v, &t) || t < 0 || t > 3600000)
				return usage("bad --timeout_ms");
			o->timeout_ms = (uint64_t)t;
		} else {
			return usage("unknown flag");
		}
	}
	if (!o->metadata)
		return usage("--metadata is required");
	return 0;
}

/* Write the ready file atomically: a temporary file renamed into place. */
static int write_ready(const char *path, struct te_engine *eng, void *buf,
		       uint64_t size)
{
	json_t *o =
		json_pack("{s:s, s:s, s:I, s:I}", "name", te_engine_name(eng),
			  "rpc", te_engine_rpc_address(eng), "addr",
			  (json_int_t)(uintptr_t)buf, "size", (json_int_t)size);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	char tmp[4096];
	FILE *f;
	int rc = 0;

	json_decref(o);
	if (!text)
		return -ENOMEM;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
		free(text);
		return -ENAMETOOLONG;
	}
	f = fopen(tmp, "we");
	if (!f) {
		free(text);
		return -errno;
	}
	if (fprintf(f, "%s\n", text) < 0)
		rc = -EIO;
	if (fclose(f) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	free(text);
	return rc;
}

static void print_notifications(struct te_engine *eng)
{
	char *names[16], *msgs[16];
	int n;

	while ((n = te_notifications(eng, names, msgs, 16)) > 0) {
		for (int i = 0; i < n; i++) {
			printf("notify %s %s\n", names[i], msgs[i]);
			free(names[i]);
			free(msgs[i]);
		}
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	struct opts o = { .name = "127.0.0.1", .size = 64ull << 20 };
	struct te_engine_cfg cfg = { 0 };
	struct te_engine *eng = NULL;
	char err[TE_ERR_LEN] = "";
	struct timespec tick = { .tv_nsec = 50 * 1000000L };
	sigset_t set;
	void *buf = NULL;
	int rc, sig;

	rc = parse_args(argc, argv, &o);
	if (rc)
		return rc;
	mc_log_init_from_env();
	/* Blocked here and in every engine thread; taken by sigtimedwait. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	cfg.metadata = o.metadata;
	cfg.local_server_name = o.name;
	cfg.timeout_ms = (unsigned)o.timeout_ms;
	cfg.transport = o.transport;
	cfg.rdma_devices = o.device;
	rc = te_engine_create(&cfg, &eng, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "te_peer: te_engine_create: rc=%d (%s): %s\n",
			rc, mc_err_name(rc), err);
		return 1;
	}
	if (o.shm) {
		rc = te_mem_alloc(eng, o.size, NULL, &buf);
		if (rc)
			fprintf(stderr, "te_peer: te_mem_alloc: %s\n",
				mc_strerror(rc));
	} else {
		size_t len = (o.size + 4095) & ~(size_t)4095;
		buf = aligned_alloc(4096, len);
		rc = buf ? 0 : -ENOMEM;
	}
	if (rc)
		goto out;
	te_pattern_fill(buf, o.size, o.seed, 0);
	rc = te_register(eng, buf, o.size, "cpu:0", true);
	if (rc) {
		fprintf(stderr, "te_peer: te_register: %s\n", mc_strerror(rc));
		goto out_free;
	}
	if (o.ready) {
		rc = write_ready(o.ready, eng, buf, o.size);
		if (rc) {
			fprintf(stderr, "te_peer: ready file %s: %s\n", o.ready,
				mc_strerror(rc));
			goto out_unreg;
		}
	}
	printf("ready %s %s\n", te_engine_name(eng),
	       te_engine_rpc_address(eng));
	fflush(stdout);

	for (;;) {
		sig = sigtimedwait(&set, NULL, &tick);
		print_notifications(eng);
		if (sig == SIGTERM || sig == SIGINT)
			break;
	}
	printf("stopping on signal %d\n", sig);
	fflush(stdout);

out_unreg:
	if (te_unregister(eng, buf))
		fprintf(stderr, "te_peer: te_unregister failed\n");
out_free:
	if (o.shm)
		te_mem_free(eng, buf);
	else
		free(buf);
out:
	te_engine_destroy(eng);
	return rc ? 1 : 0;
}
