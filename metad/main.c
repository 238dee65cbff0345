/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_metad: the HTTP metadata service transfer engines use to find
 * each other. Parses its configuration, serves until SIGINT/SIGTERM, exits.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mc_auth.h"
#include "mc_daemon.h"
#include "mc_log.h"
#include "mc_parse.h"
#include "metad.h"
#include "metad_options.h"
#include "mooncake/mc_err.h"

int main(int argc, char **argv)
{
	struct metad_cfg cfg = { 0 };
	struct metad_options opts;
	struct mc_http_server *srv = NULL;
	struct metad *m = NULL;
	struct mc_auth_key key;
	bool auth = false;
	char err[MC_ERR_LEN] = "", at[300];
	sigset_t sigs;
	int rc, code;

	if (mc_daemon_load_config(&metad_cfg_spec, &cfg, argc, argv, &code)) {
		mc_cfg_release(&metad_cfg_spec, &cfg);
		return code;
	}
	rc = mc_daemon_setup_logging("mooncake_metad", cfg.v, cfg.log_file,
				     cfg.syslog);
	if (rc) {
		fprintf(stderr, "mooncake_metad: log file %s: %s\n",
			cfg.log_file, mc_strerror(rc));
		rc = MC_EBADCONFIG; /* exit 2: the flag names what cannot be */
		goto out;
	}
	mc_daemon_block_signals(&sigs);

	rc = mc_auth_key_load_opt(cfg.auth_token_file, &auth, &key, err,
				  sizeof(err));
	if (rc) {
		mc_log_err("metad", "--auth_token_file: %s", err);
		if (rc != -ENOMEM)
			rc = MC_EBADCONFIG; /* exit 2: the file named is wrong */
		goto out;
	}
	if (auth)
		mc_log_notice("metad", "authentication on (token file %s)",
			      cfg.auth_token_file);
	else
		mc_log_info("metad", "no --auth_token_file: metadata requests "
				     "are not authenticated");
	opts = (struct metad_options){
		.store = cfg.store,
		.full_sync = cfg.store_full_sync,
		.max_body = (size_t)cfg.max_body_size,
		.max_key = (size_t)cfg.max_key_length,
		.auth = auth ? &key : NULL,
	};
	rc = metad_create(&opts, &m, err, sizeof(err));
	if (rc) {
		mc_log_err("metad", "%s", err);
		goto out;
	}
	rc = metad_serve(m, cfg.host, (int)cfg.port, (unsigned)cfg.threads,
			 &srv, err, sizeof(err));
	if (rc) {
		mc_log_err("metad", "%s", err);
		goto out;
	}
	(void)mc_fmt_hostport(at, sizeof(at), cfg.host,
			      mc_http_server_port(srv));
	mc_log_notice("metad",
		      "serving http://%s/metadata (store %s, %zu entries)", at,
		      cfg.store && *cfg.store ? cfg.store : "memory",
		      metad_count(m));
	if (cfg.port_file && *cfg.port_file) {
		rc = mc_daemon_write_port_file(cfg.port_file,
					       mc_http_server_port(srv));
		if (rc) {
			mc_log_err("metad", "port file %s: %s", cfg.port_file,
				   mc_strerror(rc));
			goto out;
		}
	}
	rc = mc_daemon_wait_signal(&sigs);
	mc_log_notice("metad", "signal %d: stopping", rc);
	rc = 0;
out:
	mc_http_server_stop(srv);
	metad_destroy(m);
	if (auth)
		mc_auth_key_clear(&key);
	mc_cfg_release(&metad_cfg_spec, &cfg);
	return mc_daemon_exit_code(rc);
}
