/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_client: a standalone pool member (upstream's "real client").
 * It joins the pool with a segment of --global_segment_size bytes under
 * the transfer-engine name --host:--port, serves peers' reads and writes
 * of that memory until SIGTERM/SIGINT, then leaves cleanly (the master
 * drops the segment's replicas). After kill -9, a restart under the same
 * host:port re-adopts the segment and the objects in it survive.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_auth.h"
#include "mc_daemon.h"
#include "mc_log.h"
#include "mc_parse.h"
#include "mc_net.h"
#include "mooncake/mc_err.h"
#include "store_int.h"

struct client_cfg {
	char *host;
	int64_t port;
	uint64_t global_segment_size;
	char *master_server_address;
	char *metadata_server;
	char *protocol;
	char *device_names;
	int64_t threads;
	char *segment_name;
	char *auth_token_file;
	char *tenant_id;
	char *port_file;
	char *log_file;
	char *config_path;
	int v;
	/* upstream's, of features not here */
	bool enable_offload, enable_http_server;
	int64_t http_port;
};

#define OPT(n, t, f, d, lo, hi, h)                                             \
	{                                                                      \
		.name = n, .type = t,                                          \
		.offset = offsetof(struct client_cfg, f), .def = d, .min = lo, \
		.max = hi, .help = h                                           \
	}

static const struct mc_opt client_opts[] = {
	OPT("host", MC_OPT_STRING, host, "0.0.0.0", 0, 0,
	    "Address to bind and advertise; 0.0.0.0 (::) means this host's "
	    "first non-loopback IPv4 (IPv6) address."),
	OPT("port", MC_OPT_INT, port, "50052", 0, 65535,
	    "Transfer-engine RPC port (the name is host:port); 0 picks a "
	    "free one (see --port_file)."),
	OPT("global_segment_size", MC_OPT_SIZE, global_segment_size, "4GB",
	    1048576.0, 1125899906842624.0,
	    "Bytes contributed to the pool (\"4GB\" syntax)."),
	OPT("master_server_address", MC_OPT_STRING, master_server_address,
	    "127.0.0.1:50051", 0, 0,
	    "host:port of mooncake_master, or etcd://h1:2379;h2:2379 for HA "
	    "masters."),
	OPT("metadata_server", MC_OPT_STRING, metadata_server,
	    "http://127.0.0.1:8080/metadata", 0, 0,
	    "Transfer-engine metadata: http://h:p/metadata, etcd://h:p or "
	    "P2PHANDSHAKE."),
	OPT("protocol", MC_OPT_STRING, protocol, "tcp", 0, 0,
	    "Transport: tcp or rdma (one-sided RDMA between hosts, shared "
	    "memory within one; refused with the reason where no RDMA "
	    "device serves, or served by tcp with MC_RDMA_FALLBACK_TCP=1)."),
	OPT("device_names", MC_OPT_STRING, device_names, "", 0, 0,
	    "RDMA devices to use, a comma list (rdma only; \"\": all)."),
	OPT("threads", MC_OPT_INT, threads, "1", 1, 1024,
	    "Accepted for upstream compatibility; the transfer engine "
	    "sizes its own threads."),
	OPT("segment_name", MC_OPT_STRING, segment_name, "", 0, 0,
	    "Name of the kept segment (/dev/shm/mooncake.seg.NAME; fails "
	    "when /dev/shm cannot hold it); empty: host_port, or private "
	    "memory with a warning when /dev/shm cannot hold it."),
	{ .name = "auth_token_file",
	  .env = "MOONCAKE_AUTH_TOKEN_FILE",
	  .type = MC_OPT_STRING,
	  .offset = offsetof(struct client_cfg, auth_token_file),
	  .def = "",
	  .help = "The pool's token when the master has one (a file of mode "
		  "0600; docs/operations.md); empty: none." },
	OPT("tenant_id", MC_OPT_STRING, tenant_id, NULL, 0, 0,
	    "Upstream's tenant of this client (1-64 of [A-Za-z0-9_.-]); "
	    "its segment still serves every tenant: a segment is pool "
	    "memory, not a tenant's (docs/design.md \"Tenants\")."),
	OPT("port_file", MC_OPT_STRING, port_file, NULL, 0, 0,
	    "Write the port to this file once in the pool."),
	OPT("log_file", MC_OPT_STRING, log_file, NULL, 0, 0,
	    "Append logs to this file instead of stderr."),
	OPT("config_path", MC_OPT_STRING, config_path, NULL, 0, 0,
	    "JSON file with any of these options as keys."),
	OPT("enable_offload", MC_OPT_BOOL, enable_offload, "false", 0, 0,
	    "Upstream's SSD offload: not supported yet (refused when on)."),
	OPT("enable_http_server", MC_OPT_BOOL, enable_http_server, "false", 0,
	    0,
	    "Upstream's client HTTP server: not supported (refused when "
	    "on)."),
	OPT("http_port", MC_OPT_INT, http_port, "9300", 0, 65535,
	    "Upstream's client HTTP port: accepted, no effect here."),
	OPT("v", MC_OPT_VERBOSITY, v, "0", 0, 9,
	    "Verbosity: -v or -v=1 debug, -v=2 trace (MC_LOG_LEVEL also)."),
};

static const struct mc_cfg_spec client_spec = {
	.prog = "mooncake_client",
	.summary = "Standalone Mooncake pool member: contributes a memory "
		   "segment to the pool until stopped.",
	.opts = client_opts,
	.n_opts = sizeof(client_opts) / sizeof(client_opts[0]),
	.strict = true,
	.env_prefix = "MOONCAKE_CLIENT_",
	.config_opt = "config_path",
	.config_env = "MOONCAKE_CLIENT_CONFIG_PATH",
};

/* --port 0: a port free right now (the engine binds it just after). */
static int free_port(const char *host, int *port)
{
	int fd, rc;

	rc = mc_net_listen(host, 0, 1, 0, &fd, port);
	if (rc)
		return rc;
	close(fd);
	return 0;
}

static int join(struct mooncake_store *s, const struct client_cfg *cfg,
		const char *host, int *port_out)
{
	char name[300];
	int port = (int)cfg->port, rc = 0;

	for (int attempt = 0; attempt < 5; attempt++) {
		struct mcs_cfg_args a = {
			.local_hostname = name,
			.metadata_server = cfg->metadata_server,
			.global_segment_size = cfg->global_segment_size,
			.protocol = cfg->protocol,
			.device_name = cfg->device_names,
			.master_server_address = cfg->master_server_address,
			.segment_name = cfg->segment_name &&
							*cfg->segment_name ?
						cfg->segment_name :
						NULL,
			.auth_token_file =
				cfg->auth_token_file && *cfg->auth_token_file ?
					cfg->auth_token_file :
					NULL,
			.keep_segment = true,
			.tenant_id = cfg->tenant_id,
		};

		if (!cfg->port) {
			rc = free_port(host, &port);
			if (rc) {
				mc_log_err("client", "--host %s: %s", host,
					   mc_strerror(rc));
				return rc;
			}
		}
		(void)mc_fmt_hostport(name, sizeof(name), host, port);
		rc = mcs_store_setup(s, &a);
		/* Someone took the free port between our probe and bind. */
		if (rc != -EADDRINUSE || cfg->port)
			break;
	}
	*port_out = port;
	return rc;
}

/* A token file that cannot be used (missing, too open, empty) is a
 * configuration error, exit 2, as for the master and metad; the join
 * would fail with the file's errno as if the pool had refused it. */
static int check_token(const char *path)
{
	char err[MC_ERR_LEN] = "";
	struct mc_auth_key key;
	bool have;
	int rc = mc_auth_key_load_opt(path, &have, &key, err, sizeof(err));

	mc_auth_key_clear(&key);
	if (!rc)
		return 0;
	mc_log_err("client", "--auth_token_file: %s", err);
	return rc == -ENOMEM ? rc : MC_EBADCONFIG;
}

int main(int argc, char **argv)
{
	struct client_cfg cfg = { 0 };
	struct mooncake_store *s = NULL;
	char host[64];
	sigset_t sigs;
	int rc, code, port = 0;

	if (mc_daemon_load_config(&client_spec, &cfg, argc, argv, &code)) {
		mc_cfg_release(&client_spec, &cfg);
		return code;
	}
	rc = mc_daemon_setup_logging("mooncake_client", cfg.v, cfg.log_file,
				     false);
	if (rc) {
		fprintf(stderr, "mooncake_client: log file %s: %s\n",
			cfg.log_file, mc_strerror(rc));
		rc = MC_EBADCONFIG; /* exit 2: the flag names what cannot be */
		goto out;
	}
	if (cfg.enable_offload || cfg.enable_http_server) {
		mc_log_err("client", "--%s is not supported by this member yet",
			   cfg.enable_offload ? "enable_offload" :
						"enable_http_server");
		rc = -EINVAL; /* exit 2 */
		goto out;
	}
	rc = check_token(cfg.auth_token_file);
	if (rc)
		goto out;
	mc_daemon_block_signals(&sigs);

	rc = mc_net_advertised(cfg.host, host, sizeof(host));
	if (rc) {
		mc_log_err("client",
			   "--host %s: %s; pass --host ADDRESS (one peers "
			   "reach)",
			   cfg.host,
			   rc == -ENAMETOOLONG ?
				   "too long" :
				   "this host has no non-loopback address of "
				   "that family to advertise");
		rc = -EINVAL;
		goto out;
	}
	if (strcmp(host, cfg.host))
		mc_log_info("client", "--host %s: advertising %s", cfg.host,
			    host);

	s = mooncake_store_create();
	if (!s) {
		rc = -ENOMEM;
		goto out;
	}
	rc = join(s, &cfg, host, &port);
	if (rc) {
		mc_log_err("client", "cannot join the pool: %s (%s)",
			   mc_strerror(rc),
			   mc_store_err_name(mc_err_to_store(rc)));
		goto out;
	}
	mc_log_notice("client",
		      "in the pool as %s: segment of %llu bytes, master %s, "
		      "metadata %s",
		      mooncake_store_get_hostname(s),
		      (unsigned long long)cfg.global_segment_size,
		      cfg.master_server_address, cfg.metadata_server);
	if (cfg.port_file && *cfg.port_file) {
		rc = mc_daemon_write_port_file(cfg.port_file, port);
		if (rc) {
			mc_log_err("client", "port file %s: %s", cfg.port_file,
				   mc_strerror(rc));
			goto out;
		}
	}
	rc = mc_daemon_wait_signal(&sigs);
	mc_log_notice("client", "signal %d: leaving the pool", rc);
	rc = 0;
out:
	mooncake_store_destroy(s);
	mc_cfg_release(&client_spec, &cfg);
	return mc_daemon_exit_code(rc);
}
