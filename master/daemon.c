/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's running parts (daemon.h): each started in turn, and on any
 * failure every part already started is stopped again, in reverse.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "daemon.h"
#include "lifecycle.h"
#include "mc_auth.h"
#include "mc_auth_http.h"
#include "mc_daemon.h"
#include "mc_http.h"
#include "mc_log.h"
#include "mc_parse.h"
#include "mc_rpc_server.h"
#include "ha.h"
#include "metad.h"
#include "mooncake/mc_err.h"
#include "mst_util.h"
#include "prefault.h"
#include "segments.h"
#include "service.h"
#include "slots.h"

struct mst_daemon {
	struct master *m;
	struct metad *meta;
	struct mc_http_server *meta_srv, *admin;
	struct mc_rpc_server *rpc;
	struct mst_ha *ha; /* NULL without --enable_ha */
	bool auth; /* key holds the pool's key */
	struct mc_auth_key key;
	struct mst_admin admin_ctx;
	char leader_addr[300]; /* HA: what master_view names (/leader) */
	bool report; /* a metrics summary every 10 s */
	bool ticking;
	atomic_bool stop;
	pthread_t ticker;
	struct mst_gone_engine *forget; /* the ticker's: waiting their grace */
	uint64_t forget_grace_ms; /* MC_METADATA_CLEANUP_GRACE_MS */
};

/* How long after its client was dropped an engine's entries wait before
 * they go: a client only paused or cut off past client_ttl (its peers
 * mid-transfer look it up again) comes back, re-mounts and publishes
 * them again meanwhile (a writer's put failed -800 while they were gone
 * for the moments between the drop and the re-mount). */
#define FORGET_GRACE_MS 60000

/* MC_METADATA_CLEANUP_GRACE_MS, else FORGET_GRACE_MS; at most a day ("-5"
 * was read as 2^64 - 5: never cleaned; "10s" as the default). */
static int forget_grace_ms(uint64_t *ms)
{
	char err[256];
	int rc = mc_parse_env_ms("MC_METADATA_CLEANUP_GRACE_MS",
				 FORGET_GRACE_MS, 0, 86400000, ms, err,
				 sizeof(err));

	if (rc)
		mc_log_err("master", "%s", err);
	return rc;
}

/*
 * The engines of clients the master dropped for good: the embedded
 * metadata service forgets their entries, unless they were published again
 * since the client was last heard (it came back, or a successor took the
 * name; metad_drop_engine), once a grace has passed (FORGET_GRACE_MS).
 * Outside the master's lock: a client that comes back publishes before it
 * re-mounts, so a late removal finds new stamps.
 */
static void forget_engines(struct mst_daemon *d, struct mst_gone_engine *g,
			   bool all)
{
	uint64_t now, grace;
	struct mst_gone_engine **pp;

	if (!g && !d->forget)
		return; /* every tick (10 ms): nothing to read or walk */
	now = mst_now();
	grace = d->forget_grace_ms;

	/* The newly dropped wait their grace (a name dropped again waits
	 * anew, from its latest drop). */
	while (g) {
		struct mst_gone_engine *next = g->next, *x;

		for (x = d->forget; x && strcmp(x->name, g->name); x = x->next)
			;
		if (x) {
			x->seen = x->seen > g->seen ? x->seen : g->seen;
			x->due = now + grace;
			free(g);
		} else {
			g->due = now + grace;
			g->next = d->forget;
			d->forget = g;
		}
		g = next;
	}
	for (pp = &d->forget; *pp;) {
		struct mst_gone_engine *x = *pp;

		if (!all && x->due > now) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		if (d->meta && !all)
			(void)metad_drop_engine(d->meta, x->name, x->seen);
		free(x);
	}
}

static void *tick_main(void *arg)
{
	struct mst_daemon *d = arg;
	uint64_t last_report = mst_now();

	while (!atomic_load(&d->stop)) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		struct mst_gone_engine *gone;
		char *s = NULL;

		nanosleep(&ts, NULL);
		pthread_mutex_lock(&d->m->lock);
		mst_tick(d->m);
		if (d->report && mst_now() - last_report >= 10000) {
			last_report = mst_now();
			s = mst_admin_summary(d->m);
		}
		gone = mst_take_gone_engines(d->m);
		pthread_mutex_unlock(&d->m->lock);
		forget_engines(d, gone, false);
		if (s)
			mc_log_info("master", "%s", s);
		free(s);
	}
	return NULL;
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

/* The record's open flags (db.h) from the options. */
static unsigned db_flags(const struct master_cfg *cfg)
{
	return (cfg->db_full_sync ? MST_DB_FULL_SYNC : 0) |
	       (cfg->db_checkpoint_thread ? MST_DB_CKPT_THREAD : 0);
}

/* The metadata service keeps its entries beside the master's record. */
static int start_metadata(struct mst_daemon *d, const struct master_cfg *cfg)
{
	bool mem = !cfg->db_path || !*cfg->db_path ||
		   !strcmp(cfg->db_path, "memory");
	char err[MC_ERR_LEN] = "", store[4200], at[300];
	struct metad_options mo = {
		.store = store,
		.full_sync = cfg->db_full_sync,
		.max_body = METAD_DEFAULT_MAX_BODY,
		.max_key = METAD_DEFAULT_MAX_KEY,
		.auth = d->auth ? &d->key : NULL,
	};
	int rc;

	snprintf(store, sizeof(store), "%s%s%s",
		 mem ? "memory" : "sqlite:", mem ? "" : cfg->db_path,
		 mem ? "" : "-metadata");
	rc = metad_create(&mo, &d->meta, err, sizeof(err));
	if (!rc)
		rc = metad_serve(d->meta, cfg->http_metadata_server_host,
				 (int)cfg->http_metadata_server_port, 4,
				 &d->meta_srv, err, sizeof(err));
	if (rc) {
		mc_log_err("master", "metadata service: %s", err);
		return rc;
	}
	(void)mc_fmt_hostport(at, sizeof(at), cfg->http_metadata_server_host,
			      mc_http_server_port(d->meta_srv));
	mc_log_notice("master", "metadata service on http://%s/metadata", at);
	return write_port(cfg->metadata_port_file,
			  mc_http_server_port(d->meta_srv), "metadata");
}

static int start_admin(struct mst_daemon *d, const struct master_cfg *cfg)
{
	char err[MC_ERR_LEN] = "";
	struct mc_http_server_cfg hc = {
		.host = cfg->metrics_host,
		.port = (int)cfg->metrics_port,
		.threads = 2,
		.max_body = 4096,
		.idle_timeout_s = 60,
		.handler = mst_admin_handle,
		.arg = &d->admin_ctx,
		.name = "admin",
	};
	int rc;

	d->admin_ctx.started = mst_now();
	if (d->auth) {
		d->admin_ctx.key = &d->key;
		rc = mc_auth_replay_create(&d->admin_ctx.replay);
		if (rc)
			return rc;
	}
	rc = mc_http_server_start(&hc, &d->admin, err, sizeof(err));
	if (rc) {
		mc_log_err("master", "admin HTTP: %s", err);
		return rc;
	}
	return write_port(cfg->metrics_port_file, mc_http_server_port(d->admin),
			  "admin");
}

/* The pool's key, when --auth_token_file names one. */
static int load_key(struct mst_daemon *d, const struct master_cfg *cfg)
{
	char err[MC_ERR_LEN] = "";
	int rc;

	rc = mc_auth_key_load_opt(cfg->auth_token_file, &d->auth, &d->key, err,
				  sizeof(err));
	if (rc) {
		mc_log_err("master", "--auth_token_file: %s", err);
		/* The file named is wrong (mode, owner, length, missing):
		 * a configuration error, exit 2. */
		return rc == -ENOMEM ? rc : MC_EBADCONFIG;
	}
	if (!d->auth) {
		mc_log_info("master", "no --auth_token_file: RPC, admin and "
				      "metadata HTTP are not authenticated");
		return 0;
	}
	mc_log_notice("master", "authentication on (token file %s)",
		      cfg->auth_token_file);
	return 0;
}

/* The RPC server's handler: the master's service. */
static int rpc_call(void *arg, const struct mc_rpc_hdr *h, const uint8_t *body,
		    uint8_t **frame, size_t *len)
{
	return mst_service_call(arg, h, body, frame, len);
}

/* The RPC server is stopping: Watch long polls wait on the feed
 * condition, wake them. */
static void rpc_stopping(void *arg)
{
	struct master *m = arg;

	pthread_mutex_lock(&m->lock);
	m->stopping = true;
	pthread_cond_broadcast(&m->feed.cond);
	pthread_mutex_unlock(&m->lock);
}

static int start_rpc(struct mst_daemon *d, const struct master_cfg *cfg)
{
	char err[MC_ERR_LEN] = "";
	struct mc_rpc_server_cfg rc_cfg = {
		.name = "master",
		.host = cfg->rpc_address,
		.port = (int)cfg->rpc_port,
		.max_connections = (unsigned)cfg->rpc_max_connections,
		.idle_timeout_s = (unsigned)cfg->rpc_conn_timeout_seconds,
		.frame_timeout_s = (unsigned)cfg->rpc_frame_timeout_seconds,
		.max_body = (size_t)cfg->max_request_size,
		.max_inflight = (size_t)cfg->rpc_max_inflight_bytes,
		.busy_poll_us = (unsigned)cfg->rpc_busy_poll_us,
		.auth = d->auth ? &d->key : NULL,
		.on_stop = rpc_stopping,
	};
	int rc = mc_rpc_server_start(&rc_cfg, rpc_call, d->m, &d->rpc, err,
				     sizeof(err));

	if (rc)
		mc_log_err("master", "%s", err);
	return rc;
}

/* --enable_ha: follow the leader's op log until elected (ha.h); the
 * admin port answers as a standby's meanwhile (admin_standby.c). */
static int ha_follow(struct mst_daemon *d, const struct master_cfg *cfg,
		     const sigset_t *sigs, char *const *argv)
{
	char err[MC_ERR_LEN] = "", addr[300], at[300];
	struct mst_ha_cfg hc = {
		.etcd = mst_ha_etcd(cfg),
		.cluster_id = cfg->cluster_id,
		.advertise = addr,
		.listen_host = cfg->rpc_address,
		.listen_port = (int)cfg->rpc_port,
		.lease_ttl_s = (unsigned)cfg->ha_lease_ttl_sec,
		.argv = argv,
		.key = d->auth ? &d->key : NULL,
		.prefault = cfg->ha_standby_prefault,
	};
	int rc;

	(void)mc_fmt_hostport(addr, sizeof(addr), cfg->rpc_address,
			      (int)cfg->rpc_port);
	rc = mst_ha_open(&hc, &d->ha, err, sizeof(err));
	if (rc) {
		mc_log_err("master", "%s", err);
		return rc;
	}
	d->admin_ctx.ha = d->ha;
	rc = start_admin(d, cfg);
	if (rc)
		return rc;
	(void)mc_fmt_hostport(at, sizeof(at), cfg->metrics_host,
			      mc_http_server_port(d->admin));
	mc_log_notice("master", "admin HTTP on %s (a standby's until elected)",
		      at);
	rc = mst_ha_follow(d->ha, cfg->db_path, db_flags(cfg), sigs, err,
			   sizeof(err));
	if (rc && rc != -EINTR)
		mc_log_err("master", "%s", err);
	return rc;
}

int mst_daemon_start(const struct master_cfg *cfg, const struct mst_config *mc,
		     const sigset_t *sigs, char *const *argv,
		     struct mst_daemon **out)
{
	struct mst_daemon *d = calloc(1, sizeof(*d));
	char err[MC_ERR_LEN] = "";
	uint64_t elected;
	int rc;

	*out = NULL;
	if (!d)
		return -ENOMEM;
	/* GET /ha/snapshot: a standby's copy, and an operator's backup of a
	 * running master, HA or not (not of a record in memory only). */
	if (cfg->db_path && *cfg->db_path && strcmp(cfg->db_path, "memory"))
		d->admin_ctx.db_path = cfg->db_path;
	rc = forget_grace_ms(&d->forget_grace_ms);
	if (!rc)
		rc = load_key(d, cfg);
	if (!rc && cfg->enable_ha)
		rc = ha_follow(d, cfg, sigs, argv);
	elected = mst_now();
	if (!rc) {
		/* A standby's memory made ready for this load (prefault.h). */
		mst_prefault_use();
		rc = mst_create(mc, cfg->db_path, db_flags(cfg), &d->m, err,
				sizeof(err));
		mst_prefault_end();
		if (rc)
			mc_log_err("master", "%s", err);
	}
	/* A takeover: the run before answered its last call before its
	 * lease ended (or before it stepped down), so before this election,
	 * and its clients stop writing into its slots within 200 ms of that:
	 * the fence counts from the election, not from the end of the load
	 * (seconds at millions of objects, which puts would wait out on top). */
	if (!rc && d->ha && d->m->fence_until &&
	    elected + MST_SLOT_FENCE_MS < d->m->fence_until)
		d->m->fence_until = elected + MST_SLOT_FENCE_MS;
	if (!rc && d->ha && elected + MST_SLOT_FENCE_MS < d->m->run_fence_until)
		d->m->run_fence_until = elected + MST_SLOT_FENCE_MS;
	if (!rc && d->ha) {
		rc = mst_ha_lead(d->ha, d->m->db, &d->m->ha_until);
		d->m->ha_settle_until = mst_now() + 3000;
	}
	if (!rc && cfg->enable_http_metadata_server) {
		rc = start_metadata(d, cfg);
		d->m->track_gone_engines =
			!rc && cfg->enable_metadata_cleanup_on_timeout;
	}
	if (!rc) {
		if (d->ha) {
			(void)mc_fmt_hostport(d->leader_addr,
					      sizeof(d->leader_addr),
					      cfg->rpc_address,
					      (int)cfg->rpc_port);
			d->admin_ctx.leader_addr = d->leader_addr;
		}
		/* The admin pages of the pool from here on (without HA, before
		 * the server starts: it has no standby's pages to show). */
		atomic_store(&d->admin_ctx.m, d->m);
	}
	if (!rc && !d->admin)
		rc = start_admin(d, cfg);
	if (!rc && d->ha) {
		char a[300];

		(void)mc_fmt_hostport(a, sizeof(a), cfg->rpc_address,
				      mc_http_server_port(d->admin));
		(void)mst_ha_publish_admin(d->ha, a);
	}
	if (!rc)
		rc = start_rpc(d, cfg);
	if (!rc) {
		d->report = cfg->enable_metric_reporting;
		rc = -pthread_create(&d->ticker, NULL, tick_main, d);
		d->ticking = !rc;
	}
	if (!rc) {
		char rpc[300], admin[300];

		(void)mc_fmt_hostport(rpc, sizeof(rpc), cfg->rpc_address,
				      mc_rpc_server_port(d->rpc));
		(void)mc_fmt_hostport(admin, sizeof(admin), cfg->metrics_host,
				      mc_http_server_port(d->admin));
		mc_log_notice(
			"master",
			"serving RPC on %s, admin HTTP on %s, database %s", rpc,
			admin, cfg->db_path);
		rc = write_port(cfg->port_file, mc_rpc_server_port(d->rpc),
				"RPC");
	}
	if (rc) {
		mst_daemon_stop(d);
		return rc;
	}
	*out = d;
	return 0;
}

void mst_daemon_stop(struct mst_daemon *d)
{
	if (!d)
		return;
	mst_ha_stopping(d->ha);
	if (d->ticking) {
		atomic_store(&d->stop, true);
		pthread_join(d->ticker, NULL);
	}
	forget_engines(d, NULL, true); /* freed: their grace not over */
	mc_rpc_server_stop(d->rpc);
	/* Before mst_ha_close(): its pages read d->ha. */
	mc_http_server_stop(d->admin);
	mst_ha_close(d->ha); /* after the last change: steps down */
	mc_auth_replay_destroy(d->admin_ctx.replay);
	mc_http_server_stop(d->meta_srv);
	metad_destroy(d->meta);
	mst_destroy(d->m);
	mc_auth_key_clear(&d->key);
	free(d);
}
