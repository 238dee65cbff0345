/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transfer_engine_bench --mode target: one engine, one buffer of
 * --buffer_size filled with the pattern (te_mem_alloc for --protocol shm,
 * so same-host initiators map it; anonymous pre-faulted memory otherwise),
 * registered remote-accessible. Prints the segment name, writes
 * --ready_file, serves until SIGINT or SIGTERM, then cleans up.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_daemon.h"
#include "mooncake/mc_err.h"
#include "mooncake/te.h"
#include "te_bench.h"

/* Write text to path atomically: a temporary file, then rename. */
static int write_file_atomic(const char *path, const char *text)
{
	size_t n = strlen(path) + 8;
	char *tmp = malloc(n);
	FILE *f;
	int rc = 0;

	if (!tmp)
		return -ENOMEM;
	snprintf(tmp, n, "%s.tmp", path);
	f = fopen(tmp, "we");
	if (!f) {
		rc = -errno;
		free(tmp);
		return rc;
	}
	if (fputs(text, f) < 0)
		rc = -EIO;
	if (fclose(f) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	free(tmp);
	return rc;
}

static int publish_ready(const struct teb_cfg *c, struct te_engine *eng)
{
	char text[1024];

	printf("segment: %s\nrpc: %s\n", te_engine_name(eng),
	       te_engine_rpc_address(eng));
	fflush(stdout);
	if (!c->ready_file)
		return 0;
	snprintf(text, sizeof(text), "{\"segment\": \"%s\", \"rpc\": \"%s\"}\n",
		 te_engine_name(eng), te_engine_rpc_address(eng));
	return write_file_atomic(c->ready_file, text);
}

int teb_run_target(const struct teb_cfg *c)
{
	struct te_engine_cfg ecfg = {
		.metadata = c->metadata_server,
		.local_server_name = c->local_server_name,
		.transport = c->protocol,
		.tcp_lanes = (unsigned)c->lanes,
	};
	bool shm = !strcmp(c->protocol, "shm");
	size_t len = (size_t)c->buffer_size;
	char err[TE_ERR_LEN] = "", loc[32];
	struct te_engine *eng;
	void *buf = NULL;
	sigset_t sigs;
	int rc, sig;

	/* Before any engine thread exists, so they all inherit the mask. */
	mc_daemon_block_signals(&sigs);
	rc = te_engine_create(&ecfg, &eng, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "transfer_engine_bench: engine: %s (%s)\n",
			err[0] ? err : mc_strerror(rc), mc_err_name(rc));
		return rc;
	}
	if (shm) {
		rc = te_mem_alloc(eng, len, NULL, &buf);
	} else {
		buf = teb_alloc(len);
		rc = buf ? 0 : -ENOMEM;
	}
	if (rc) {
		fprintf(stderr,
			"transfer_engine_bench: cannot allocate %zu bytes: "
			"%s\n",
			len, mc_strerror(rc));
		goto out;
	}
	teb_fill_pattern(buf, len, 0);
	teb_location(buf, loc, sizeof(loc));
	rc = te_register(eng, buf, len, loc, true);
	if (rc) {
		fprintf(stderr, "transfer_engine_bench: te_register: %s\n",
			mc_strerror(rc));
		goto out_free;
	}
	if (c->print_topology) {
		char *topo = te_topology_json();

		printf("topology: %s\nbuffer numa node: %d\n",
		       topo ? topo : "null", te_mem_numa_node(buf));
		free(topo);
	}
	rc = publish_ready(c, eng);
	if (rc) {
		fprintf(stderr, "transfer_engine_bench: --ready_file %s: %s\n",
			c->ready_file, strerror(-rc));
		goto out_unreg;
	}
	sig = mc_daemon_wait_signal(&sigs);
	fprintf(stderr, "transfer_engine_bench: signal %d, stopping\n", sig);
	if (c->ready_file)
		unlink(c->ready_file);
out_unreg:
	/* Waits for peers' accesses in progress (they hold reg_lock). */
	if (te_unregister(eng, buf))
		fprintf(stderr,
			"transfer_engine_bench: te_unregister failed\n");
out_free:
	if (shm)
		te_mem_free(eng, buf);
	else
		teb_free(buf, len);
out:
	te_engine_destroy(eng);
	return rc;
}
