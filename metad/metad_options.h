/* SPDX-License-Identifier: Apache-2.0 */
/** @file metad_options.h The configuration table of mooncake_metad. */
#ifndef METAD_OPTIONS_H
#define METAD_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "mc_cfg.h"

struct metad_cfg {
	char *host;
	int64_t port;
	char *store;
	bool store_full_sync;
	uint64_t max_body_size;
	int64_t max_key_length;
	int64_t threads;
	char *port_file;
	char *log_file;
	bool syslog;
	char *config_path;
	char *auth_token_file;
	int v;
};

extern const struct mc_cfg_spec metad_cfg_spec;

#endif
