/* SPDX-License-Identifier: Apache-2.0 */
/** @file master_options.h The configuration table of mooncake_master. */
#ifndef MASTER_OPTIONS_H
#define MASTER_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "master.h"
#include "mc_cfg.h"

struct master_cfg {
	/* upstream's */
	int64_t rpc_port;
	char *rpc_address;
	char *rpc_interface;
	int64_t rpc_thread_num;
	int64_t rpc_conn_timeout_seconds;
	bool rpc_enable_tcp_no_delay;
	bool enable_metric_reporting;
	int64_t metrics_port;
	char *metrics_host;
	uint64_t default_kv_lease_ttl;
	uint64_t default_kv_soft_pin_ttl;
	uint64_t max_kv_soft_pin_ttl;
	bool allow_evict_soft_pinned_objects;
	double eviction_ratio;
	double eviction_high_watermark_ratio;
	uint64_t client_ttl;
	char *memory_allocator;
	char *allocation_strategy;
	uint64_t put_start_discard_timeout_sec;
	uint64_t put_start_release_timeout_sec;
	bool enable_http_metadata_server;
	char *http_metadata_server_host;
	int64_t http_metadata_server_port;
	bool enable_metadata_cleanup_on_timeout;
	char *cluster_id;
	char *root_fs_dir;
	bool enable_ha;
	char *ha_backend_type;
	char *ha_backend_connstring;
	char *etcd_endpoints;
	int64_t ha_lease_ttl_sec;
	bool ha_standby_prefault;
	bool enable_oplog;
	bool enable_snapshot;
	bool enable_offload;
	bool enable_cxl;
	bool enable_multi_tenants;
	bool enable_kv_events;
	/* Upstream's flags of features this master does not have, accepted
	 * and ignored (their values land here, unused). */
	bool up_bool;
	double up_num;
	uint64_t up_size;
	char *up_tenant_quota_connector_type, *up_tenant_quota_connector_uri;
	char *up_cxl_path, *up_kv_events_bind_endpoint;
	char *up_kv_events_backend_id, *up_dynamic_replication_mode;
	char *config_path;
	int v;
	/* ours */
	char *db_path;
	bool db_full_sync;
	bool db_checkpoint_thread;
	bool malloc_huge_pages;
	uint64_t restore_grace;
	uint64_t exist_max_idle;
	int64_t ckpt_holder_slots;
	int64_t put_reserve_slots;
	uint64_t put_reserve_max_size;
	uint64_t max_key_length;
	uint64_t max_request_size;
	int64_t rpc_max_connections;
	int64_t rpc_frame_timeout_seconds;
	uint64_t rpc_max_inflight_bytes;
	int64_t rpc_busy_poll_us;
	char *port_file;
	char *metrics_port_file;
	char *metadata_port_file;
	char *log_file;
	bool syslog;
	char *auth_token_file;
};

extern const struct mc_cfg_spec master_cfg_spec;

/**
 * The master's rules from the flags: 0, or MC_EXIT_USAGE (the reason
 * logged) for a flag this master does not support or a bad value.
 */
/** The etcd connection string HA uses (NULL: none given). */
const char *mst_ha_etcd(const struct master_cfg *c);
int master_cfg_core(const struct master_cfg *c, struct mst_config *out);

#endif
