/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transfer_engine_bench: upstream's benchmark of the transfer engine, with
 * its flags. Start a target (it registers a buffer and prints its segment
 * name), then an initiator that reads or writes it in batches for a
 * duration and reports the throughput:
 *
 *   transfer_engine_bench --mode target --protocol tcp --ready_file r.json
 *   transfer_engine_bench --segment_id 127.0.0.1:15123 --threads 4 --json
 *
 * Nothing here asserts a timing; scripts/bench_te.sh runs the matrix next
 * to raw TCP (tcp_pump) and memcpy (memcpy_bench) baselines.
 */
#include <stdio.h>
#include <string.h>

#include "mc_daemon.h"
#include "mooncake/te.h"
#include "te_bench.h"

void teb_location(const void *addr, char *buf, size_t len)
{
	int node = te_mem_numa_node(addr);

	if (node >= 0)
		snprintf(buf, len, "cpu:%d", node);
	else
		snprintf(buf, len, "*");
}

int main(int argc, char **argv)
{
	struct teb_cfg c = { 0 };
	char err[MC_ERR_LEN];
	int rc, code;

	if (mc_daemon_load_config(&teb_cfg_spec, &c, argc, argv, &code))
		return code;
	rc = teb_cfg_check(&c, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "transfer_engine_bench: %s\n", err);
		mc_cfg_release(&teb_cfg_spec, &c);
		return MC_EXIT_USAGE;
	}
	rc = mc_daemon_setup_logging("transfer_engine_bench", c.v, NULL, false);
	if (!rc) {
		if (!strcmp(c.mode, "target"))
			rc = teb_run_target(&c);
		else
			rc = teb_run_initiator(&c);
	}
	mc_cfg_release(&teb_cfg_spec, &c);
	return rc ? MC_EXIT_FAILURE : MC_EXIT_OK;
}
