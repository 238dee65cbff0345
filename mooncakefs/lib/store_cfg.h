/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file store_cfg.h
 * The store client's configuration (docs/config.md, "Store client"): one
 * lenient mc_cfg table read from the JSON file named by
 * MOONCAKE_CONFIG_PATH, then MOONCAKE_* / MC_* variables; setup()'s
 * non-NULL, non-zero arguments win over both. Unknown keys in the file are
 * ignored with a warning, since vLLM, SGLang and LMCache share it.
 */
#ifndef MCS_STORE_CFG_H
#define MCS_STORE_CFG_H

#include <stdbool.h>
#include <stdint.h>

#include "mc_cfg.h"

struct mcs_cfg {
	char *local_hostname;
	char *metadata_server;
	uint64_t global_segment_size;
	uint64_t local_buffer_size;
	char *protocol;
	char *device_name;
	char *master_server_address;
	uint64_t rpc_timeout_ms;
	int64_t rpc_busy_poll_us;
	uint64_t transfer_timeout_ms;
	uint64_t ping_interval_ms;
	int64_t location_cache_keys; /* 0: no location cache */
	bool put_reserve; /* ask for reserved space (put_slots.h) */
	char *auth_token_file; /* the pool's token; "" or NULL: none */
	/* Set (file, environment, args): a kept segment of this name in
	 * /dev/shm, required; "" or NULL: see keep_segment. */
	char *segment_name;
	bool keep_segment; /* from args */
	char *default_segment_name; /* from args; NULL: the engine name */
	char *tenant_id; /* "default", "" or NULL: the default tenant */
	char *storage_root_dir; /* upstream's disk replicas: a warning */
};

/* What setup() was given; NULL strings and 0 sizes mean "not given". */
struct mcs_cfg_args {
	const char *local_hostname;
	const char *metadata_server;
	uint64_t global_segment_size;
	uint64_t local_buffer_size;
	const char *protocol;
	const char *device_name;
	const char *master_server_address;
	const char *segment_name;
	const char *auth_token_file;
	/* The caller is a pool member that outlives its clients
	 * (mooncake_client, the mount): without a segment_name, keep the
	 * segment under default_segment_name (NULL: the engine name) where
	 * /dev/shm has room, else use unnamed memory with a warning. Not set
	 * (embedded clients): unnamed memory, gone with the process. */
	bool keep_segment;
	const char *default_segment_name;
	const char *tenant_id; /* NULL: from the file and the environment */
	/* A check before the load that uses the result: say nothing of a
	 * MOONCAKE_CONFIG_PATH file ignored (the load will). */
	bool quiet;
};

extern const struct mc_cfg_spec mcs_cfg_spec;

/**
 * Defaults < file < environment < args. 0, or a negative code with the
 * option, its source and the bad value named in err. A file that cannot
 * be used is an error, unless args name the three addresses (as
 * upstream's setup(), which never reads it): then it is ignored, with a
 * warning.
 */
int mcs_cfg_load(struct mcs_cfg *cfg, const struct mcs_cfg_args *args,
		 char *err, size_t errlen) MC_MUST_CHECK;

void mcs_cfg_release(struct mcs_cfg *cfg);

#endif
