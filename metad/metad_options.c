/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_metad's options: one row each. --host and --port keep the
 * names and defaults of upstream's mooncake_http_metadata_server; the rest
 * are ours (docs/config.md is generated from this table).
 */
#include <stddef.h>

#include "mc_auth.h"
#include "metad_options.h"

#define OPT(n, t, f, d, lo, hi, h)                                             \
	{                                                                      \
		.name = n, .type = t, .offset = offsetof(struct metad_cfg, f), \
		.def = d, .min = lo, .max = hi, .help = h                      \
	}

static const struct mc_opt metad_opts[] = {
	OPT("host", MC_OPT_STRING, host, "0.0.0.0", 0, 0,
	    "Address to bind, exactly (use 127.0.0.1 for loopback only)."),
	OPT("port", MC_OPT_INT, port, "8080", 0, 65535,
	    "TCP port; 0 picks a free one (see --port_file)."),
	OPT("store", MC_OPT_STRING, store, "memory", 0, 0,
	    "'memory' (lost on restart, as upstream) or 'sqlite:PATH' "
	    "(durable: survives restart and kill -9)."),
	OPT("store_full_sync", MC_OPT_BOOL, store_full_sync, "false", 0, 0,
	    "fsync every commit so a power loss loses nothing (slower)."),
	OPT("max_body_size", MC_OPT_SIZE, max_body_size, "1MiB", 1,
	    1073741824.0, "Largest PUT body; larger ones get 413."),
	OPT("max_key_length", MC_OPT_INT, max_key_length, "4096", 1, 65536,
	    "Longest key in bytes after URL-unescaping; longer gets 400."),
	OPT("threads", MC_OPT_INT, threads, "4", 1, 256,
	    "HTTP worker threads."),
	OPT("port_file", MC_OPT_STRING, port_file, NULL, 0, 0,
	    "Write the bound port to this file once serving."),
	OPT("log_file", MC_OPT_STRING, log_file, NULL, 0, 0,
	    "Append logs to this file instead of stderr."),
	OPT("syslog", MC_OPT_BOOL, syslog, "false", 0, 0,
	    "Send logs to syslog instead of stderr."),
	OPT("config_path", MC_OPT_STRING, config_path, NULL, 0, 0,
	    "JSON file with any of these options as keys."),
	MC_AUTH_CFG_OPT(struct metad_cfg, auth_token_file,
			"The pool's token (a file of mode 0600): every "
			"/metadata request must be signed with it (/health "
			"stays open); unset: no authentication, as upstream "
			"(docs/operations.md)."),
	OPT("v", MC_OPT_VERBOSITY, v, "0", 0, 9,
	    "Verbosity: -v or -v=1 debug, -v=2 trace (MC_LOG_LEVEL also)."),
};

const struct mc_cfg_spec metad_cfg_spec = {
	.prog = "mooncake_metad",
	.summary = "HTTP metadata service for mooncakefs transfer engines "
		   "(GET/PUT/DELETE /metadata?key=).",
	.opts = metad_opts,
	.n_opts = sizeof(metad_opts) / sizeof(metad_opts[0]),
	.strict = true,
	.env_prefix = "MOONCAKE_METAD_",
	.config_opt = "config_path",
	.config_env = "MOONCAKE_METAD_CONFIG_PATH",
};
