/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_master: parse the configuration, restore the state from
 * sqlite, serve RPC, admin HTTP and (optionally) the embedded metadata
 * service until SIGINT/SIGTERM, run housekeeping in the background
 * (daemon.h).
 */
#include <errno.h>
#include <limits.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "db.h"
#include "master_options.h"
#include "mc_daemon.h"
#include "mc_log.h"
#include "mc_net.h"
#include "mooncake/mc_err.h"

/* A start that failed (a port taken, ...) leaves no record files behind
 * that it made itself: an empty record and its metadata store. */
static void remove_new_record(const char *path)
{
	char md[PATH_MAX];

	(void)unlink(path);
	mst_db_unlink_sides(path);
	if (snprintf(md, sizeof(md), "%s-metadata", path) < (int)sizeof(md)) {
		(void)unlink(md);
		mst_db_unlink_sides(md);
	}
}

/*
 * --rpc_interface NAME (upstream's): the RPC listens on, and HA advertises,
 * that interface's IPv4 address, unless --rpc_address names one. It was
 * accepted and did nothing: the listener stayed on every interface.
 */
static int rpc_interface(struct master_cfg *cfg)
{
	char ip[64];
	int rc;

	if (!cfg->rpc_interface || !*cfg->rpc_interface)
		return 0;
	if (strcmp(cfg->rpc_address, "0.0.0.0")) {
		mc_log_warn("master",
			    "--rpc_interface %s: ignored, --rpc_address %s "
			    "names the address",
			    cfg->rpc_interface, cfg->rpc_address);
		return 0;
	}
	rc = mc_net_if_addr(cfg->rpc_interface, AF_INET, ip, sizeof(ip));
	if (rc) {
		mc_log_err("master", "--rpc_interface %s: %s",
			   cfg->rpc_interface,
			   rc == -ENODEV ? "no such interface" :
					   "no IPv4 address that is up");
		return MC_EXIT_USAGE;
	}
	free(cfg->rpc_address);
	cfg->rpc_address = strdup(ip);
	if (!cfg->rpc_address)
		return MC_EXIT_FAILURE;
	mc_log_info("master", "--rpc_interface %s: RPC on %s",
		    cfg->rpc_interface, ip);
	return 0;
}

int main(int argc, char **argv)
{
	struct master_cfg cfg = { 0 };
	struct mst_config mc;
	struct mst_daemon *d = NULL;
	const char *huge_why = NULL;
	sigset_t sigs;
	bool fresh;
	int rc, code;

	if (mc_daemon_load_config(&master_cfg_spec, &cfg, argc, argv, &code)) {
		mc_cfg_release(&master_cfg_spec, &cfg);
		return code;
	}
	if (cfg.malloc_huge_pages) /* before anything is opened */
		mc_daemon_huge_heap(argv, &huge_why);
	rc = mc_daemon_setup_logging("mooncake_master", cfg.v, cfg.log_file,
				     cfg.syslog);
	if (rc) {
		fprintf(stderr, "mooncake_master: log file %s: %s\n",
			cfg.log_file, mc_strerror(rc));
		mc_cfg_release(&master_cfg_spec, &cfg);
		return MC_EXIT_USAGE; /* the flag names what cannot be */
	}
	if (huge_why)
		mc_log_warn(
			"master",
			"cannot re-execute with the heap on huge pages (%s): "
			"going on without",
			huge_why);
	else if (mc_daemon_heap_is_huge())
		mc_log_info(
			"master",
			"heap on transparent huge pages (GLIBC_TUNABLES=%s)",
			getenv("GLIBC_TUNABLES"));
	/* Before the checks of master_cfg_core: HA wants an address. */
	code = rpc_interface(&cfg);
	if (!code)
		code = master_cfg_core(&cfg, &mc);
	if (code) {
		mc_cfg_release(&master_cfg_spec, &cfg);
		return code;
	}
	mc_daemon_block_signals(&sigs);
	fresh = cfg.db_path && *cfg.db_path && strcmp(cfg.db_path, "memory") &&
		access(cfg.db_path, F_OK);
	rc = mst_daemon_start(&cfg, &mc, &sigs, argv, &d);
	if (rc && rc != -EINTR && fresh)
		remove_new_record(cfg.db_path);
	if (!rc) {
		rc = mc_daemon_wait_signal(&sigs);
		mc_log_notice("master", "signal %d: stopping", rc);
		rc = 0;
	}
	if (rc == -EINTR)
		rc = 0; /* a standby stopped by a signal */
	mst_daemon_stop(d);
	mc_cfg_release(&master_cfg_spec, &cfg);
	return mc_daemon_exit_code(rc);
}
