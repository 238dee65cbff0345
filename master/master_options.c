/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_master's options: upstream's flag names, syntax and defaults
 * (reference: gflags of mooncake_master), then ours. docs/config.md is
 * generated from this table. Upstream features we do not have yet (HA,
 * oplog, snapshots, SSD offload, CXL, KV events) are accepted as flags and
 * refused with a clear message when turned on. --enable_multi_tenants is
 * accepted either way: tenants are the clients' key prefixes and need
 * nothing turned on here (docs/design.md "Tenants").
 */
#include <stddef.h>
#include <string.h>

#include "master_options.h"
#include "mc_auth.h"
#include "mc_daemon.h"
#include "mc_etcd_conn.h"
#include "mc_log.h"

#define OPT(n, t, f, d, lo, hi, h)                                             \
	{                                                                      \
		.name = n, .type = t,                                          \
		.offset = offsetof(struct master_cfg, f), .def = d, .min = lo, \
		.max = hi, .help = h                                           \
	}
#define OPTA(n, a, t, f, d, lo, hi, h)                                         \
	{                                                                      \
		.name = n, .alias = a, .type = t,                              \
		.offset = offsetof(struct master_cfg, f), .def = d, .min = lo, \
		.max = hi, .help = h                                           \
	}
/* A duration of at least lo ms and at most DUR_MAX_MS. */
#define DURMIN(n, f, d, unit, lo, h)                                     \
	{                                                                \
		.name = n, .type = MC_OPT_DURATION,                      \
		.offset = offsetof(struct master_cfg, f), .def = d,      \
		.unit_ms = unit, .min = lo, .max = DUR_MAX_MS, .help = h \
	}
/* Durations are added to clock readings (now + ttl, 3 * lease ttl): a
 * bound keeps those sums far from wrapping. 1e12 ms is about 31 years;
 * "18446744073709551615" made every lease end before it began. */
#define DUR_MAX_MS 1e12
#define DUR(n, f, d, unit, h) DURMIN(n, f, d, unit, 0, h)

static const struct mc_opt master_opts[] = {
	OPTA("rpc_port", "port", MC_OPT_INT, rpc_port, "50051", 0, 65535,
	     "RPC port; 0 binds a free one (see --port_file; upstream "
	     "maps 0 to 50051)."),
	OPT("rpc_address", MC_OPT_STRING, rpc_address, "0.0.0.0", 0, 0,
	    "Address the RPC listener binds, exactly."),
	OPT("rpc_interface", MC_OPT_STRING, rpc_interface, "", 0, 0,
	    "Network interface whose IPv4 address the RPC binds and HA "
	    "advertises (upstream's), unless --rpc_address names one."),
	OPTA("rpc_thread_num", "max_threads", MC_OPT_INT, rpc_thread_num, "0",
	     0, 4096,
	     "Accepted; every connection has its own thread (0 = default)."),
	OPT("rpc_conn_timeout_seconds", MC_OPT_INT, rpc_conn_timeout_seconds,
	    "300", 0, 86400,
	    "Close RPC connections idle this long (0 = never; upstream's "
	    "default is 0)."),
	OPT("rpc_enable_tcp_no_delay", MC_OPT_BOOL, rpc_enable_tcp_no_delay,
	    "true", 0, 0, "TCP_NODELAY on RPC connections (always on)."),
	OPT("enable_metric_reporting", MC_OPT_BOOL, enable_metric_reporting,
	    "true", 0, 0, "Log a metrics summary every 10 s."),
	OPT("metrics_port", MC_OPT_INT, metrics_port, "9003", 0, 65535,
	    "Admin and Prometheus HTTP port (/metrics, /health, ...)."),
	OPT("metrics_host", MC_OPT_STRING, metrics_host, "0.0.0.0", 0, 0,
	    "Address the admin HTTP listener binds."),
	DUR("default_kv_lease_ttl", default_kv_lease_ttl, "10000", 1,
	    "Lease granted by get and exist (bare numbers are ms); also the "
	    "longest a mount's written file is kept from eviction between "
	    "its commit and its publish (rename). 0 (upstream takes it) "
	    "leaves reads unprotected: the master warns at start."),
	DUR("default_kv_soft_pin_ttl", default_kv_soft_pin_ttl, "30m", 1,
	    "Soft pin duration when a put asks for one (ms)."),
	DUR("max_kv_soft_pin_ttl", max_kv_soft_pin_ttl, "24h", 1,
	    "Longest soft pin a put may ask for (ms)."),
	OPT("allow_evict_soft_pinned_objects", MC_OPT_BOOL,
	    allow_evict_soft_pinned_objects, "true", 0, 0,
	    "Evict soft-pinned objects when nothing else is left."),
	OPT("eviction_ratio", MC_OPT_DOUBLE, eviction_ratio, "0.05", 0, 1,
	    "Fraction evicted below the watermark (0 disables eviction)."),
	OPT("eviction_high_watermark_ratio", MC_OPT_DOUBLE,
	    eviction_high_watermark_ratio, "0.90", 0, 1,
	    "Used fraction of the pool above which eviction runs."),
	DURMIN("client_ttl", client_ttl, "10", 1000, 1000,
	       "A client silent this long loses its segments (bare numbers "
	       "are seconds; at least 1 s: clients ping once a second)."),
	OPT("memory_allocator", MC_OPT_STRING, memory_allocator, "offset", 0, 0,
	    "Accepted: 'offset' (TLSF here) or 'cachelib' (same)."),
	OPT("allocation_strategy", MC_OPT_STRING, allocation_strategy, "random",
	    0, 0, "random, free_ratio_first or local_first."),
	DUR("put_start_discard_timeout_sec", put_start_discard_timeout_sec,
	    "30", 1000,
	    "An unfinished put older than this gives way to a new put of the "
	    "same key (s)."),
	DUR("put_start_release_timeout_sec", put_start_release_timeout_sec,
	    "600", 1000,
	    "An abandoned put's memory is reclaimed after this (s)."),
	OPT("put_reserve_slots", MC_OPT_INT, put_reserve_slots, "4", 0, 64,
	    "Space reserved ahead per client for its next puts of a size it "
	    "put, so a small put is one master call (PutCommit) instead of "
	    "two; 0 = none (docs/design.md \"Reserved space for puts\")."),
	OPT("put_reserve_max_size", MC_OPT_SIZE, put_reserve_max_size, "1MiB",
	    0, 1ull << 30, "Largest put that gets reserved space (bytes)."),
	OPT("enable_http_metadata_server", MC_OPT_BOOL,
	    enable_http_metadata_server, "false", 0, 0,
	    "Serve the transfer engine's HTTP metadata (/metadata) too."),
	OPT("http_metadata_server_host", MC_OPT_STRING,
	    http_metadata_server_host, "0.0.0.0", 0, 0,
	    "Address the metadata HTTP listener binds, exactly."),
	OPT("http_metadata_server_port", MC_OPT_INT, http_metadata_server_port,
	    "8080", 0, 65535, "Metadata HTTP port (0 = ephemeral)."),
	OPT("enable_metadata_cleanup_on_timeout", MC_OPT_BOOL,
	    enable_metadata_cleanup_on_timeout, "true", 0, 0,
	    "The embedded metadata service removes the engine entries of "
	    "clients dropped after client_ttl, unless re-published since "
	    "(on by default, unlike upstream's false: crashed clients' "
	    "entries piled up; a client that returns publishes again). "
	    "External metadata services are not cleaned."),
	OPT("cluster_id", MC_OPT_STRING, cluster_id, "mooncake_cluster", 0, 0,
	    "Cluster name (accepted)."),
	OPT("root_fs_dir", MC_OPT_STRING, root_fs_dir, "", 0, 0,
	    "Legacy shared-filesystem replicas: not supported (must be "
	    "empty)."),
	OPT("enable_ha", MC_OPT_BOOL, enable_ha, "false", 0, 0,
	    "High availability: one leader among the masters of cluster_id, "
	    "elected on etcd, its record replicated through an op log in etcd "
	    "(docs/operations.md, \"High availability\")."),
	OPT("ha_backend_type", MC_OPT_STRING, ha_backend_type, "etcd", 0, 0,
	    "etcd (the only backend)."),
	OPT("ha_backend_connstring", MC_OPT_STRING, ha_backend_connstring, "",
	    0, 0,
	    "etcd connection string for HA (docs/config.md, \"etcd "
	    "metadata\")."),
	OPT("etcd_endpoints", MC_OPT_STRING, etcd_endpoints, "", 0, 0,
	    "etcd for HA when --ha_backend_connstring is empty (upstream's "
	    "older flag)."),
	OPT("ha_lease_ttl_sec", MC_OPT_INT, ha_lease_ttl_sec, "5", 1, 600,
	    "TTL of the leader's etcd lease: a dead leader is replaced within "
	    "about this (upstream's fixed 5 s)."),
	OPT("ha_standby_prefault", MC_OPT_BOOL, ha_standby_prefault, "true", 0,
	    0,
	    "A standby keeps memory ready for loading the record when it "
	    "takes over (256 bytes an object of its record plus the "
	    "record's size, at most half of the memory available): a "
	    "takeover without the page faults, about a quarter faster on a "
	    "VM."),
	OPT("enable_oplog", MC_OPT_BOOL, enable_oplog, "false", 0, 0,
	    "Accepted: with --enable_ha the op log is always on."),
	OPT("enable_snapshot", MC_OPT_BOOL, enable_snapshot, "false", 0, 0,
	    "Not supported (sqlite is the record)."),
	OPT("enable_offload", MC_OPT_BOOL, enable_offload, "false", 0, 0,
	    "SSD offload: not supported yet."),
	OPT("enable_cxl", MC_OPT_BOOL, enable_cxl, "false", 0, 0,
	    "CXL memory: not supported."),
	OPT("enable_multi_tenants", MC_OPT_BOOL, enable_multi_tenants, "false",
	    0, 0,
	    "Accepted; tenants (tenant_id) work without it; quotas are not "
	    "implemented (docs/design.md \"Tenants\")."),
	OPT("enable_kv_events", MC_OPT_BOOL, enable_kv_events, "false", 0, 0,
	    "ZMQ KV events: not supported (see the Watch RPC)."),
/* Upstream's companions of features not here: accepted so that any
	 * upstream command line starts this master, without effect. */
#define UPB(n, what)                                \
	OPT(n, MC_OPT_BOOL, up_bool, "false", 0, 0, \
	    "Upstream's (" what "): accepted, no effect here.")
#define UPN(n, what)                             \
	OPT(n, MC_OPT_DOUBLE, up_num, "0", 0, 0, \
	    "Upstream's (" what "): accepted, no effect here.")
#define UPS(n, f, what)                    \
	OPT(n, MC_OPT_STRING, f, "", 0, 0, \
	    "Upstream's (" what "): accepted, no effect here.")
	UPN("global_file_segment_size", "legacy DISK replicas"),
	UPB("offload_on_evict", "SSD offload"),
	UPB("offload_force_evict", "SSD offload"),
	UPN("offloading_queue_limit", "SSD offload"),
	UPN("offload_cap_ratio", "SSD offload"),
	UPB("promotion_on_hit", "SSD offload"),
	UPN("promotion_admission_threshold", "SSD offload"),
	UPN("promotion_queue_limit", "SSD offload"),
	UPN("promotion_max_per_heartbeat", "SSD offload"),
	UPN("quota_bytes", "disk tier"),
	UPB("enable_disk_eviction", "disk tier"),
	UPS("tenant_quota_connector_type", up_tenant_quota_connector_type,
	    "tenant quotas"),
	UPS("tenant_quota_connector_uri", up_tenant_quota_connector_uri,
	    "tenant quotas"),
	UPS("cxl_path", up_cxl_path, "CXL memory"),
	OPT("cxl_size", MC_OPT_SIZE, up_size, "0", 0, 0,
	    "Upstream's (CXL memory): accepted, no effect here."),
	UPN("nof_eviction_ratio", "NoF segments"),
	UPN("nof_eviction_high_watermark_ratio", "NoF segments"),
	UPN("max_total_finished_tasks", "copy and move tasks"),
	UPN("max_total_pending_tasks", "copy and move tasks"),
	UPN("max_total_processing_tasks", "copy and move tasks"),
	UPN("pending_task_timeout_sec", "copy and move tasks"),
	UPN("processing_task_timeout_sec", "copy and move tasks"),
	UPN("max_retry_attempts", "copy and move tasks"),
	UPS("dynamic_replication_mode", up_dynamic_replication_mode,
	    "hot-key replicas"),
	UPS("kv_events_bind_endpoint", up_kv_events_bind_endpoint, "KV events"),
	UPS("kv_events_backend_id", up_kv_events_backend_id, "KV events"),
	UPN("snapshot_interval_seconds", "snapshots"),
	UPN("snapshot_retention_count", "snapshots"),
	UPN("oplog_batch_max_entries",
	    "op log: one entry per transaction here"),
	UPN("oplog_poll_interval_ms", "op log: a standby polls every TTL/10"),
#undef UPB
#undef UPN
#undef UPS
	OPT("config_path", MC_OPT_STRING, config_path, NULL, 0, 0,
	    "JSON file with any of these options as keys."),
	OPT("v", MC_OPT_VERBOSITY, v, "0", 0, 9,
	    "Verbosity: -v or -v=1 debug, -v=2 trace (MC_LOG_LEVEL also)."),
	OPT("db_path", MC_OPT_STRING, db_path, "mooncake_master.db", 0, 0,
	    "sqlite file of the durable record ('memory': nothing survives "
	    "a restart, as upstream)."),
	OPT("db_full_sync", MC_OPT_BOOL, db_full_sync, "false", 0, 0,
	    "fsync every commit so a power loss loses nothing (slower)."),
	OPT("db_checkpoint_thread", MC_OPT_BOOL, db_checkpoint_thread, "true",
	    0, 0,
	    "Copy the record's WAL into its file on a thread of its own; "
	    "false: in the commit that fills it (sqlite's default), a stall "
	    "of several ms for every call waiting on the master."),
	OPT("malloc_huge_pages", MC_OPT_BOOL, malloc_huge_pages, "true", 0, 0,
	    "Put the master's heap on transparent huge pages (glibc's "
	    "glibc.malloc.hugetlb=1, set by re-executing itself once at start "
	    "unless GLIBC_TUNABLES sets it): restoring a large record, and so "
	    "an HA takeover, about a third faster."),
	DUR("restore_grace", restore_grace, "60", 1000,
	    "After a restart, segments not re-mounted within this time are "
	    "dropped with their objects (s)."),
	OPT("ckpt_holder_slots", MC_OPT_INT, ckpt_holder_slots, "4", 1, 1024,
	    "Checkpoint sources one holder serves at once (CkptSource)."),
	DUR("exist_max_idle", exist_max_idle, "20000", 1,
	    "An existence check protects an object from eviction only if "
	    "it was read or written within this time (ms)."),
	OPT("max_key_length", MC_OPT_SIZE, max_key_length, "4096", 1, 1048576,
	    "Longest key in bytes; longer is -400 INVALID_KEY."),
	OPT("max_request_size", MC_OPT_SIZE, max_request_size, "64MiB", 4096,
	    1073741824.0,
	    "Largest RPC frame body; larger closes the "
	    "connection."),
	OPT("rpc_max_connections", MC_OPT_INT, rpc_max_connections, "4096", 1,
	    1048576,
	    "RPC connections at once; at the limit a new one closes the "
	    "connection waiting longest for a request (docs/design.md)."),
	OPT("rpc_frame_timeout_seconds", MC_OPT_INT, rpc_frame_timeout_seconds,
	    "30", 1, 3600,
	    "A request must arrive in full within this long of its first "
	    "byte, and an answer be taken within this long; slower peers "
	    "are closed."),
	OPT("rpc_max_inflight_bytes", MC_OPT_SIZE, rpc_max_inflight_bytes, "0",
	    0, 1099511627776.0,
	    "Request bytes being received, all connections together beyond "
	    "16 KiB each; a connection that would exceed it is closed "
	    "(0 = --max_request_size)."),
	OPT("rpc_busy_poll_us", MC_OPT_INT, rpc_busy_poll_us, "200", 0, 10000,
	    "Poll a connection this long (us, adaptive) for its next request "
	    "before sleeping; 0 = never (docs/design.md)."),
	OPT("port_file", MC_OPT_STRING, port_file, NULL, 0, 0,
	    "Write the RPC port to this file once serving."),
	OPT("metrics_port_file", MC_OPT_STRING, metrics_port_file, NULL, 0, 0,
	    "Write the admin HTTP port to this file once it listens (an "
	    "HA standby's from its start)."),
	OPT("metadata_port_file", MC_OPT_STRING, metadata_port_file, NULL, 0, 0,
	    "Write the metadata HTTP port to this file once serving."),
	OPT("log_file", MC_OPT_STRING, log_file, NULL, 0, 0,
	    "Append logs to this file instead of stderr."),
	OPT("syslog", MC_OPT_BOOL, syslog, "false", 0, 0,
	    "Send logs to syslog instead of stderr."),
	MC_AUTH_CFG_OPT(struct master_cfg, auth_token_file,
			"The pool's token (a file of mode 0600): RPC "
			"connections, the admin HTTP (except /health, "
			"/metrics) and the embedded metadata service must "
			"prove they hold it; unset: no authentication, as "
			"upstream (docs/operations.md)."),
};

const struct mc_cfg_spec master_cfg_spec = {
	.prog = "mooncake_master",
	.summary = "Mooncake Store master: places objects in the segments "
		   "clients contribute; sqlite keeps what it placed.",
	.opts = master_opts,
	.n_opts = sizeof(master_opts) / sizeof(master_opts[0]),
	.strict = true,
	.env_prefix = "MOONCAKE_MASTER_",
	.config_opt = "config_path",
	.config_env = "MOONCAKE_MASTER_CONFIG_PATH",
};

/* ---- from flags to the master's rules ------------------------------------ */

const char *mst_ha_etcd(const struct master_cfg *c)
{
	if (c->ha_backend_connstring && *c->ha_backend_connstring)
		return c->ha_backend_connstring;
	if (c->etcd_endpoints && *c->etcd_endpoints)
		return c->etcd_endpoints;
	return NULL;
}

static int refuse_unsupported(const struct master_cfg *c)
{
	static const struct {
		size_t off;
		const char *name;
	} flags[] = {
		{ offsetof(struct master_cfg, enable_snapshot),
		  "enable_snapshot" },
		{ offsetof(struct master_cfg, enable_offload),
		  "enable_offload" },
		{ offsetof(struct master_cfg, enable_cxl), "enable_cxl" },
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
	if (c->enable_ha) {
		const char *why = NULL;

		if (!c->ha_backend_type || strcmp(c->ha_backend_type, "etcd"))
			why = "--ha_backend_type must be etcd";
		else if (!mst_ha_etcd(c))
			why = "--ha_backend_connstring (or --etcd_endpoints) "
			      "must name etcd";
		else if (!c->db_path || !*c->db_path ||
			 !strcmp(c->db_path, "memory"))
			why = "--db_path must be a file (the record standbys "
			      "keep)";
		else if (!c->rpc_port)
			why = "--rpc_port must be given (it is advertised)";
		else if (!c->rpc_address ||
			 !strcmp(c->rpc_address, "0.0.0.0") ||
			 !strcmp(c->rpc_address, "::") || !*c->rpc_address)
			why = "--rpc_address must be an address clients reach "
			      "(it is advertised in master_view)";
		if (why) {
			mc_log_err("master", "--enable_ha: %s", why);
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

/*
 * The etcd connection strings the master takes (used once HA lands) go
 * through the parser libte's etcd backend uses, so a string either would
 * refuse is refused at start. The environment (MC_ETCD_*) is libte's and
 * not read here.
 */
static int check_etcd_strings(const struct master_cfg *c)
{
	const struct {
		const char *flag, *val;
	} s[] = {
		{ "etcd_endpoints", c->etcd_endpoints },
		{ "ha_backend_connstring",
		  c->ha_backend_type && !strcmp(c->ha_backend_type, "etcd") ?
			  c->ha_backend_connstring :
			  NULL },
	};

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		struct mc_etcd_conn conn;
		char err[256] = "";
		int rc;

		if (!s[i].val || !*s[i].val)
			continue;
		rc = mc_etcd_conn_parse(s[i].val, false, &conn, err,
					sizeof(err));
		mc_etcd_conn_free(&conn);
		if (rc) {
			mc_log_err("master", "--%s: %s", s[i].flag, err);
			return MC_EXIT_USAGE;
		}
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

int master_cfg_core(const struct master_cfg *c, struct mst_config *out)
{
	int code = refuse_unsupported(c);

	if (!code)
		code = check_etcd_strings(c);
	if (code)
		return code;
	*out = (struct mst_config){
		.lease_ttl_ms = c->default_kv_lease_ttl,
		.soft_pin_ttl_ms = c->default_kv_soft_pin_ttl,
		.max_soft_pin_ttl_ms = c->max_kv_soft_pin_ttl,
		.allow_evict_soft_pinned = c->allow_evict_soft_pinned_objects,
		.eviction_ratio = c->eviction_ratio,
		.high_watermark = c->eviction_high_watermark_ratio,
		.client_ttl_ms = c->client_ttl,
		.discard_timeout_ms = c->put_start_discard_timeout_sec,
		.release_timeout_ms = c->put_start_release_timeout_sec,
		.restore_grace_ms = c->restore_grace,
		.exist_max_idle_ms = c->exist_max_idle,
		.hold_ttl_ms = 3 * c->default_kv_lease_ttl,
		.max_key_len = (size_t)c->max_key_length,
		.ckpt_holder_slots = (uint32_t)c->ckpt_holder_slots,
		.reserve_slots = (uint32_t)c->put_reserve_slots,
		.reserve_max_size = c->put_reserve_max_size,
	};
	if (!c->default_kv_lease_ttl)
		mc_log_warn(
			"master",
			"--default_kv_lease_ttl 0: reads get no lease (an "
			"object may be evicted or its memory reused while "
			"a client reads it; clients cache no locations) and "
			"a mount's written files are not kept from "
			"eviction until they are published");
	if (c->memory_allocator && strcmp(c->memory_allocator, "offset") &&
	    strcmp(c->memory_allocator, "cachelib")) {
		mc_log_err("master",
			   "--memory_allocator=%s: use offset or cachelib "
			   "(both are TLSF here)",
			   c->memory_allocator);
		return MC_EXIT_USAGE;
	}
	if (c->db_path && !*c->db_path) {
		/* An unset shell variable, most likely: a record in memory
		 * would lose everything at the next restart, silently. */
		mc_log_err("master", "--db_path is empty: give a file, or "
				     "'memory' for no durable record");
		return MC_EXIT_USAGE;
	}
	if (c->eviction_high_watermark_ratio <= 0 && c->eviction_ratio > 0) {
		mc_log_err(
			"master",
			"--eviction_high_watermark_ratio=0: every object "
			"would be evicted as soon as written; use a ratio "
			"above 0 (0.90 by default), or --eviction_ratio 0 to "
			"turn eviction off");
		return MC_EXIT_USAGE;
	}
	if (c->eviction_ratio > c->eviction_high_watermark_ratio)
		mc_log_warn("master",
			    "--eviction_ratio %.2f is above "
			    "--eviction_high_watermark_ratio %.2f: each "
			    "eviction empties the pool",
			    c->eviction_ratio,
			    c->eviction_high_watermark_ratio);
	if (parse_strategy(c->allocation_strategy, &out->strategy)) {
		mc_log_err("master",
			   "--allocation_strategy=%s: use random, "
			   "free_ratio_first or local_first",
			   c->allocation_strategy);
		return MC_EXIT_USAGE;
	}
	return 0;
}
