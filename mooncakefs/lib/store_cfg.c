/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store client's option table and its loader (see store_cfg.h). Key
 * names and defaults are upstream's MooncakeConfig ones where upstream has
 * them; sizes take integers or "4GB"/"500gb" strings.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "mc_log.h"

#include "mooncake/store.h"
#include "store_cfg.h"

#define OPT(n, e, t, f, d, lo, hi, h)                                       \
	{                                                                   \
		.name = n, .env = e, .type = t,                             \
		.offset = offsetof(struct mcs_cfg, f), .def = d, .min = lo, \
		.max = hi, .unit_ms = 1, .help = h                          \
	}

static const struct mc_opt mcs_opts[] = {
	OPT("local_hostname", "MOONCAKE_LOCAL_HOSTNAME", MC_OPT_STRING,
	    local_hostname, "localhost", 0, 0,
	    "This node's transfer-engine name, \"host\", \"host:port\" or "
	    "\"[IPv6]:port\" (the port is the engine's RPC port); 0.0.0.0 "
	    "(::) means this host's first non-loopback IPv4 (IPv6) address; "
	    "a loopback name (the default) with a master not on loopback "
	    "means this host's address on the way to the master."),
	OPT("metadata_server", "MOONCAKE_TE_META_DATA_SERVER", MC_OPT_STRING,
	    metadata_server, "P2PHANDSHAKE", 0, 0,
	    "http://h:p/metadata, etcd://h:p or P2PHANDSHAKE."),
	OPT("global_segment_size", "MOONCAKE_GLOBAL_SEGMENT_SIZE", MC_OPT_SIZE,
	    global_segment_size, "0", 0, 0,
	    "Bytes this node contributes to the pool (0: none)."),
	OPT("local_buffer_size", "MOONCAKE_LOCAL_BUFFER_SIZE", MC_OPT_SIZE,
	    local_buffer_size, "0", 0, 0,
	    "Staging buffer for put/get of unregistered memory (0: none)."),
	OPT("protocol", "MOONCAKE_PROTOCOL", MC_OPT_STRING, protocol, "tcp", 0,
	    0,
	    "Transport: tcp or rdma (one-sided RDMA between hosts, shared "
	    "memory within one; refused with the reason where no RDMA "
	    "device serves, or served by tcp with MC_RDMA_FALLBACK_TCP=1)."),
	OPT("device_name", "MOONCAKE_DEVICE", MC_OPT_STRING, device_name, "", 0,
	    0, "RDMA devices to use, a comma list (rdma only; \"\": all)."),
	OPT("master_server_address", "MOONCAKE_MASTER", MC_OPT_STRING,
	    master_server_address, "127.0.0.1:50051", 0, 0,
	    "host:port of mooncake_master, or etcd://h1:2379;h2:2379 for HA "
	    "masters (cluster: MOONCAKE_CLUSTER_ID)."),
	OPT("rpc_timeout_ms", "MC_RPC_TIMEOUT_MS", MC_OPT_DURATION,
	    rpc_timeout_ms, "5000", 1, 3600000,
	    "Timeout of one master RPC (bare numbers are ms)."),
	OPT("rpc_busy_poll_us", "MC_RPC_BUSY_POLL_US", MC_OPT_INT,
	    rpc_busy_poll_us, "200", 0, 10000,
	    "Poll for a master answer this long (us, adaptive) before "
	    "sleeping; 0 = sleep at once (docs/design.md)."),
	OPT("transfer_timeout_ms", "MC_TRANSFER_TIMEOUT_MS", MC_OPT_DURATION,
	    transfer_timeout_ms, "30000", 1, 3600000,
	    "Timeout of one transfer (bare numbers are ms)."),
	OPT("ping_interval_ms", "MC_STORE_PING_MS", MC_OPT_DURATION,
	    ping_interval_ms, "1000", 10, 60000,
	    "Heartbeat interval to the master."),
	OPT("location_cache_keys", "MC_LOCATION_CACHE_KEYS", MC_OPT_INT,
	    location_cache_keys, "65536", 0, 16777216,
	    "Keys whose replicas a get remembers under the master's read "
	    "lease, to read them again without asking the master; 0 = "
	    "off (docs/design.md \"One round trip per get\")."),
	OPT("put_reserve", "MC_PUT_RESERVE", MC_OPT_BOOL, put_reserve, "true",
	    0, 0,
	    "Ask the master for space reserved ahead, so a single put of a "
	    "size put before is one master call (PutCommit) instead of two "
	    "(docs/design.md \"Reserved space for puts\")."),
	OPT("auth_token_file", "MOONCAKE_AUTH_TOKEN_FILE", MC_OPT_STRING,
	    auth_token_file, "", 0, 0,
	    "The pool's token (a file of mode 0600) when the master has one "
	    "(docs/operations.md); empty: none."),
	OPT("segment_name", "MOONCAKE_SEGMENT_NAME", MC_OPT_STRING,
	    segment_name, "", 0, 0,
	    "Keep the segment as /dev/shm/mooncake.seg.NAME, re-adopted "
	    "by the next process of this name (fails when /dev/shm cannot "
	    "hold it); empty: unnamed memory that dies with the process "
	    "(mooncake_client, the mount: a kept segment named after the "
	    "engine or mount point, where /dev/shm has room)."),
	OPT("storage_root_dir", "MOONCAKE_STORAGE_ROOT_DIR", MC_OPT_STRING,
	    storage_root_dir, "", 0, 0,
	    "Upstream's shared-filesystem disk replicas (LMCache's key of "
	    "that name sets it): not supported, objects live in memory "
	    "only; set, setup says so in a warning."),
	OPT("tenant_id", "MOONCAKE_TENANT_ID", MC_OPT_STRING, tenant_id,
	    "default", 0, 0,
	    "This client's key namespace: 1-64 of [A-Za-z0-9_.-]; a tenant "
	    "T's keys are the pool's .tenants/T/<key>; \"default\" or "
	    "empty: the default tenant (docs/design.md \"Tenants\")."),
};

/* What the connectors' own settings put in MOONCAKE_CONFIG_PATH's file
 * beside ours: LMCache's (transfer_timeout, prefer_local_alloc,
 * save_chunk_meta) and vLLM's (mode, enable_offload). docs/config.md. */
static const char *const foreign_keys[] = {
	"transfer_timeout", "prefer_local_alloc",
	"save_chunk_meta",  "mode",
	"enable_offload",   NULL,
};

const struct mc_cfg_spec mcs_cfg_spec = {
	.prog = "libmooncake",
	.summary = "Mooncake Store client configuration.",
	.opts = mcs_opts,
	.n_opts = sizeof(mcs_opts) / sizeof(mcs_opts[0]),
	.strict = false,
	.foreign = foreign_keys,
	.env_prefix = NULL,
	.config_opt = NULL,
	.config_env = "MOONCAKE_CONFIG_PATH",
};

static int override(char **field, const char *v)
{
	char *c;

	if (!v)
		return 0;
	c = strdup(v);
	if (!c)
		return -ENOMEM;
	free(*field);
	*field = c;
	return 0;
}

/* The caller names the three addresses a client needs. */
static bool complete(const struct mcs_cfg_args *a)
{
	return a && a->local_hostname && *a->local_hostname &&
	       a->metadata_server && *a->metadata_server &&
	       a->master_server_address && *a->master_server_address;
}

int mcs_cfg_load(struct mcs_cfg *cfg, const struct mcs_cfg_args *a, char *err,
		 size_t errlen)
{
	struct mc_cfg_result res;
	char *argv[] = { "libmooncake", NULL };
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	rc = mc_cfg_load(&mcs_cfg_spec, cfg, 1, argv, &res, err, errlen);
	if (rc && rc != -ENOMEM && complete(a)) {
		/* Upstream's setup() never reads the file (the connectors
		 * do, and SGLang names its own): a stale or foreign one
		 * left in the environment must not fail a call that names
		 * everything it needs. */
		struct mc_cfg_spec no_file = mcs_cfg_spec;
		char why[256];

		snprintf(why, sizeof(why), "%s", err ? err : "");
		no_file.config_env = NULL;
		mc_cfg_release(&mcs_cfg_spec, cfg);
		memset(cfg, 0, sizeof(*cfg));
		rc = mc_cfg_load(&no_file, cfg, 1, argv, &res, err, errlen);
		/* Only the file failed (else its error stands, unwarned). */
		if (!rc && !a->quiet)
			mc_log_warn("store",
				    "MOONCAKE_CONFIG_PATH ignored (setup() "
				    "names its addresses): %s",
				    why);
	}
	if (rc)
		return rc;
	if (a) {
		rc = override(&cfg->local_hostname, a->local_hostname);
		if (!rc)
			rc = override(&cfg->metadata_server,
				      a->metadata_server);
		if (!rc)
			rc = override(&cfg->protocol, a->protocol);
		if (!rc)
			rc = override(&cfg->device_name, a->device_name);
		if (!rc)
			rc = override(&cfg->master_server_address,
				      a->master_server_address);
		if (!rc)
			rc = override(&cfg->segment_name, a->segment_name);
		if (!rc)
			rc = override(&cfg->auth_token_file,
				      a->auth_token_file);
		if (!rc)
			rc = override(&cfg->default_segment_name,
				      a->default_segment_name);
		if (!rc)
			rc = override(&cfg->tenant_id, a->tenant_id);
		cfg->keep_segment = a->keep_segment;
		if (rc) {
			snprintf(err, errlen, "out of memory");
			return rc;
		}
		/* Sizes: 0 means none, as upstream; only MOONCAKE_SIZE_UNSET
		 * leaves them to the file and the environment. */
		if (a->global_segment_size != MOONCAKE_SIZE_UNSET)
			cfg->global_segment_size = a->global_segment_size;
		if (a->local_buffer_size != MOONCAKE_SIZE_UNSET)
			cfg->local_buffer_size = a->local_buffer_size;
	}
	if (!cfg->local_hostname || !*cfg->local_hostname) {
		snprintf(err, errlen, "local_hostname is empty");
		return -EINVAL;
	}
	if (!cfg->metadata_server || !*cfg->metadata_server) {
		snprintf(err, errlen, "metadata_server is empty");
		return -EINVAL;
	}
	if (!cfg->master_server_address || !*cfg->master_server_address) {
		snprintf(err, errlen, "master_server_address is empty");
		return -EINVAL;
	}
	return 0;
}

void mcs_cfg_release(struct mcs_cfg *cfg)
{
	free(cfg->default_segment_name);
	cfg->default_segment_name = NULL;
	mc_cfg_release(&mcs_cfg_spec, cfg);
}
