/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_master: parse the configuration, restore the state from
 * sqlite, serve RPC, admin HTTP and (optionally) the embedded metadata
 * service until SIGINT/SIGTERM, run housekeeping in the background.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "lifecycle.h"
#include "master.h"
#include "master_options.h"
#include "mc_daemon.h"
#include "mc_log.h"
#include "metad.h"
#include "mooncake/mc_err.h"
#include "mst_util.h"
#include "rpc_server.h"

struct ticker {
	struct master *m;
	bool report;
	atomic_bool stop;
	pthread_t t;
};

static void *tick_main(void *arg)
{
	struct ticker *tk = arg;
	uint64_t last_report = mst_now();

	while (!atomic_load(&tk->stop)) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&tk->m->lock);
		mst_tick(tk->m);
		char *s = NULL;
		if (tk->report && mst_now() - last_report >= 10000) {
			last_report = mst_now();
			s = mst_admin_summary(tk->m);
		}
		pthread_mutex_unlock(&tk->m->lock);
		if (s)
			mc_log_info("master", "%s", s);
		free(s);
	}
	return NULL;
}

static int refuse_unsupported(const struct master_cfg *c)
{
	static const struct {
		size_t off;
		const char *name;
	} flags[] = {
		{ offsetof(struct master_cfg, enable_ha), "enable_ha" },
		{ offsetof(struct master_cfg, enable_oplog), "enable_oplog" },
		{ offsetof(struct master_cfg, enable_snapshot),
		  "enable_snapshot" },
		{ offsetof(struct master_cfg, enable_offload),
		  "enable_offload" },
		{ offsetof(struct master_cfg, enable_cxl), "enable_cxl" },
		{ offsetof(struct master_cfg, enable_multi_tenants),
		  "enable_multi_tenants" },
		{ offsetof(struct master_cfg, enable_kv_events),
		  "enable_kv_events" },
	};

	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		if (*(const bool *)((const char *)c + flags[i].off)) {
			mc_log_err("master",
				   "--%s is not supported by this master yet "
				   "(see docs/config.md)",
				   flags[i].name);
			return MC_EXIT_USAGE;
		}
	}
	if (c->root_fs_dir && *c->root_fs_dir) {
		mc_log_err("master", "--root_fs_dir (shared-filesystem "
				     "replicas) is not supported");
		return MC_EXIT_USAGE;
	}
	return 0;
}

static int parse_strategy(const char *s, int *out)
{
	if (!s || !strcmp(s, "random"))
		*out = MST_RANDOM;
	else if (!strcmp(s, "free_ratio_first"))
		*out = MST_FREE_RATIO_FIRST;
	else if (!strcmp(s, "local_first"))
		*out = MST_LOCAL_FIRST;
	else
		return -1;
	return 0;
}

static int write_port(const char *path, int port, const char *what)
{
	int rc;

	if (!path || !*path)
		return 0;
	rc = mc_daemon_write_port_file(path, port);
	if (rc)
		mc_log_err("master", "%s port file %s: %s", what, path,
			   mc_strerror(rc));
	return rc;
}

int main(int argc, char **argv)
{
	struct master_cfg cfg = { 0 };
	struct mst_config mc = { 0 };
	struct master *m = NULL;
	struct mst_rpc_server *rpc = NULL;
	struct mc_http_server *admin = NULL, *meta_srv = NULL;
	struct metad *meta = NULL;
	struct ticker tk = { 0 };
	char err[MC_ERR_LEN] = "", meta_store[4200];
	sigset_t sigs;
	int rc, code;

	if (mc_daemon_load_config(&master_cfg_spec, &cfg, argc, argv, &code)) {
		mc_cfg_release(&master_cfg_spec, &cfg);
		return code;
	}
	rc = mc_daemon_setup_logging("mooncake_master", cfg.v, cfg.log_file,
				     cfg.syslog);
	if (rc) {
		fprintf(stderr, "mooncake_master: log file %s: %s\n",
			cfg.log_file, mc_strerror(rc));
		goto out;
	}
	code = refuse_unsupported(&cfg);
	if (code) {
		mc_cfg_release(&master_cfg_spec, &cfg);
		return code;
	}
	mc = (struct mst_config){
		.lease_ttl_ms = cfg.default_kv_lease_ttl,
		.soft_pin_ttl_ms = cfg.default_kv_soft_pin_ttl,
		.max_soft_pin_ttl_ms = cfg.max_kv_soft_pin_ttl,
		.allow_evict_soft_pinned = cfg.allow_evict_soft_pinned_objects,
		.eviction_ratio = cfg.eviction_ratio,
		.high_watermark = cfg.eviction_high_watermark_ratio,
		.client_ttl_ms = cfg.client_ttl,
		.discard_timeout_ms = cfg.put_start_discard_timeout_sec,
		.release_timeout_ms = cfg.put_start_release_timeout_sec,
		.restore_grace_ms = cfg.restore_grace,
		.exist_max_idle_ms = cfg.exist_max_idle,
		.hold_ttl_ms = 3 * cfg.default_kv_lease_ttl,
		.max_key_len = (size_t)cfg.max_key_length,
	};
	if (parse_strategy(cfg.allocation_strategy, &mc.strategy)) {
		mc_log_err("master",
			   "--allocation_strategy=%s: use random, "
			   "free_ratio_first or local_first",
			   cfg.allocation_strategy);
		mc_cfg_release(&master_cfg_spec, &cfg);
		return MC_EXIT_USAGE;
	}
	mc_daemon_block_signals(&sigs);

	rc = mst_create(&mc, cfg.db_path, cfg.db_full_sync, &m, err,
			sizeof(err));
	if (rc) {
		mc_log_err("master", "%s", err);
		goto out;
	}
	if (cfg.enable_http_metadata_server) {
		bool mem = !cfg.db_path || !*cfg.db_path ||
			   !strcmp(cfg.db_path, "memory");
		struct metad_options mo = {
			.store = meta_store,
			.full_sync = cfg.db_full_sync,
			.max_body = METAD_DEFAULT_MAX_BODY,
			.max_key = METAD_DEFAULT_MAX_KEY,
		};
		snprintf(meta_store, sizeof(meta_store), "%s%s%s",
			 mem ? "memory" : "sqlite:", mem ? "" : cfg.db_path,
			 mem ? "" : "-metadata");
		rc = metad_create(&mo, &meta, err, sizeof(err));
		if (!rc)
			rc = metad_serve(meta, cfg.http_metadata_server_host,
					 (int)cfg.http_metadata_server_port, 4,
					 &meta_srv, err, sizeof(err));
		if (rc) {
			mc_log_err("master", "metadata service: %s", err);
			goto out;
		}
		mc_log_notice("master",
			      "metadata service on http://%s:%d/metadata",
			      cfg.http_metadata_server_host,
			      mc_http_server_port(meta_srv));
		rc = write_port(cfg.metadata_port_file,
				mc_http_server_port(meta_srv), "metadata");
		if (rc)
			goto out;
	}
	struct mc_http_server_cfg hc = {
		.host = cfg.metrics_host,
		.port = (int)cfg.metrics_port,
		.threads = 2,
		.max_body = 4096,
		.idle_timeout_s = 60,
		.handler = mst_admin_handle,
		.arg = m,
		.name = "admin",
	};
	rc = mc_http_server_start(&hc, &admin, err, sizeof(err));
	if (rc) {
		mc_log_err("master", "admin HTTP: %s", err);
		goto out;
	}
	struct mst_rpc_server_cfg rc_cfg = {
		.host = cfg.rpc_address,
		.port = (int)cfg.rpc_port,
		.max_connections = (unsigned)cfg.rpc_max_connections,
		.idle_timeout_s = (unsigned)cfg.rpc_conn_timeout_seconds,
		.frame_timeout_s = (unsigned)cfg.rpc_frame_timeout_seconds,
		.max_body = (size_t)cfg.max_request_size,
		.max_inflight = (size_t)cfg.rpc_max_inflight_bytes,
		.busy_poll_us = (unsigned)cfg.rpc_busy_poll_us,
	};
	rc = mst_rpc_server_start(m, &rc_cfg, &rpc, err, sizeof(err));
	if (rc) {
		mc_log_err("master", "%s", err);
		goto out;
	}
	tk.m = m;
	tk.report = cfg.enable_metric_reporting;
	rc = pthread_create(&tk.t, NULL, tick_main, &tk);
	if (rc) {
		rc = -rc;
		goto out;
	}
	mc_log_notice("master",
		      "serving RPC on %s:%d, admin HTTP on %s:%d, database %s",
		      cfg.rpc_address, mst_rpc_server_port(rpc),
		      cfg.metrics_host, mc_http_server_port(admin),
		      cfg.db_path);
	rc = write_port(cfg.port_file, mst_rpc_server_port(rpc), "RPC");
	if (!rc)
		rc = write_port(cfg.metrics_port_file,
				mc_http_server_port(admin), "admin");
	if (rc)
		goto stop;
	rc = mc_daemon_wait_signal(&sigs);
	mc_log_notice("master", "signal %d: stopping", rc);
	rc = 0;
stop:
	atomic_store(&tk.stop, true);
	pthread_join(tk.t, NULL);
out:
	mst_rpc_server_stop(rpc);
	mc_http_server_stop(admin);
	mc_http_server_stop(meta_srv);
	metad_destroy(meta);
	mst_destroy(m);
	mc_cfg_release(&master_cfg_spec, &cfg);
	return mc_daemon_exit_code(rc);
}
