/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Engine lifetime: configuration, then the parts in order (copy helpers,
 * transports, the handshake listener, our own peer, the published
 * entries), and their release in reverse.
 *
 * The top of libte's call graph (docs/design.md, "libte layering"):
 * engine.c calls publish.c, hs_server.c, transport.c, peer.c, memreg.c,
 * notify.c, copy.c and handshake.c (the frame size setting) to start and
 * stop them; nothing in libte calls into it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mc_auth.h"
#include "mc_log.h"
#include "mc_net.h"
#include "mc_parse.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

const char *te_engine_name(const struct te_engine *eng)
{
	return eng->name;
}

const char *te_engine_rpc_address(const struct te_engine *eng)
{
	return eng->rpc_address;
}

static bool env_on(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0");
}

/*
 * "rdma": the rdma transport opens its NICs and serves peers on other
 * hosts (same-host peers keep shm, this engine's own memory the local
 * copy); MC_FORCE_HCA=1 sends every peer's requests over the NICs, as
 * tests and benchmarks on one host need. Where rdma cannot serve, tcp
 * does only if the user allows it (te_rdma_check).
 */
static int parse_rdma(struct te_engine *eng, const char *devices, char *err,
		      size_t errlen)
{
	int rc = te_rdma_check(devices, err, errlen);

	eng->forced_tp = TE_TP_TCP;
	if (rc)
		return rc == TE_RDMA_FALLBACK ? 0 : rc;
	eng->rdma_on = true;
	eng->forced_tp = env_on("MC_FORCE_HCA") ? te__transport_index("rdma") :
						  -1;
	return 0;
}

static int parse_transport(struct te_engine *eng, const char *t,
			   const char *devices, char *err, size_t errlen)
{
	if (!t || !*t) {
		const char *force = getenv("MC_FORCE_TCP");
		eng->forced_tp = force && *force && *force != '0' ? TE_TP_TCP :
								    -1;
		return 0;
	}
	if (!strcmp(t, "rdma"))
		return parse_rdma(eng, devices, err, errlen);
	eng->forced_tp = te__transport_index(t);
	if (eng->forced_tp < 0) {
		snprintf(err, errlen,
			 "unknown transport '%s' (tcp, rdma, shm, "
			 "local)",
			 t);
		return -EINVAL;
	}
	return 0;
}

/*
 * A wildcard host ("0.0.0.0", "::") is where to listen, not what to tell
 * peers: on another host it is that host. The engine takes this host's
 * first non-loopback address of that family instead (as upstream
 * advertises its LAN address), in its ip and its name.
 */
static int advertise(struct te_engine *eng, const char *given, int port,
		     char *err, size_t errlen)
{
	char adv[TE_NAME_MAX];
	int rc = mc_net_advertised(eng->ip, adv, sizeof(adv));

	if (rc) {
		snprintf(err, errlen,
			 "local_server_name '%s': no non-loopback address of "
			 "this host to give peers in place of %s (%s); give "
			 "one",
			 given, eng->ip, mc_strerror(rc));
		return -EINVAL;
	}
	if (!strcmp(adv, eng->ip))
		return 0;
	mc_log_notice("te", "local_server_name '%s': advertising %s", given,
		      adv);
	snprintf(eng->ip, sizeof(eng->ip), "%s", adv);
	if (port)
		(void)mc_fmt_hostport(eng->name, sizeof(eng->name), adv, port);
	else
		snprintf(eng->name, sizeof(eng->name),
			 strchr(adv, ':') ? "[%s]" : "%s", adv);
	return 0;
}

/*
 * MC_TCP_BIND_ADDRESS (upstream's): the address the engine listens on and
 * gives peers (rpc_meta's ip_or_host_name) whatever its name says; the
 * name stays local_server_name, except with P2PHANDSHAKE, where the name
 * is that address and the RPC port. A host or an address without a port;
 * a wildcard is this host's first non-loopback address, as for a name.
 */
static int bind_address(struct te_engine *eng, const char *bind, char *err,
			size_t errlen)
{
	char adv[TE_NAME_MAX];
	int port = 0, rc;

	if (mc_parse_hostport(bind, eng->ip, sizeof(eng->ip), 0, &port) ||
	    port || !*eng->ip) {
		snprintf(err, errlen,
			 "MC_TCP_BIND_ADDRESS='%s': expected an address or "
			 "host name, without a port",
			 bind);
		return -EINVAL;
	}
	rc = mc_net_advertised(eng->ip, adv, sizeof(adv));
	if (rc) {
		snprintf(err, errlen,
			 "MC_TCP_BIND_ADDRESS='%s': no non-loopback address "
			 "of this host to give peers (%s)",
			 bind, mc_strerror(rc));
		return -EINVAL;
	}
	snprintf(eng->ip, sizeof(eng->ip), "%s", adv);
	mc_log_info("te",
		    "MC_TCP_BIND_ADDRESS: listening on and advertising %s",
		    eng->ip);
	return 0;
}

/*
 * A loopback name ("localhost", 127.0.0.1) with a metadata service on
 * another host: the pool spans hosts, and a peer there given this address
 * would reach itself. The engine listens on and gives peers this host's
 * address on the route to the service instead (upstream gives its LAN
 * address); its name stays as given. With P2PHANDSHAKE there is no service
 * to go by, and a service on loopback means one host: nothing changes.
 */
static void toward_metadata(struct te_engine *eng, const char *metadata)
{
	char host[256], src[64];
	int port = 0, rc;

	if (!mc_net_is_loopback(eng->ip) ||
	    te_meta_host(metadata, host, sizeof(host), &port) ||
	    mc_net_is_loopback(host))
		return;
	rc = mc_net_source_addr(host, port, src, sizeof(src));
	if (rc || strlen(src) >= sizeof(eng->ip)) {
		mc_log_warn("te",
			    "local_server_name '%s' names this host only, and "
			    "no address of this host on the way to the "
			    "metadata service %s was found (%s): peers on "
			    "other hosts cannot reach this engine",
			    eng->name, host,
			    mc_strerror(rc ? rc : -ENAMETOOLONG));
		return;
	}
	mc_log_notice("te",
		      "local_server_name '%s' names this host only and the "
		      "metadata service %s is not on loopback: listening on "
		      "and giving peers %s, this host's address on the way "
		      "to it (MC_TCP_BIND_ADDRESS chooses another)",
		      eng->name, host, src);
	snprintf(eng->ip, sizeof(eng->ip), "%s", src);
}

static int setup_names(struct te_engine *eng, const struct te_engine_cfg *cfg,
		       char *err, size_t errlen)
{
	const char *bind = getenv("MC_TCP_BIND_ADDRESS");
	int port = 0;

	if (!cfg->local_server_name || !*cfg->local_server_name ||
	    strlen(cfg->local_server_name) >= TE_NAME_MAX) {
		snprintf(err, errlen,
			 "local_server_name is missing or too "
			 "long");
		return -EINVAL;
	}
	snprintf(eng->name, sizeof(eng->name), "%s", cfg->local_server_name);
	if (cfg->ip_or_host_name && *cfg->ip_or_host_name) {
		snprintf(eng->ip, sizeof(eng->ip), "%s", cfg->ip_or_host_name);
	} else if (bind && *bind) {
		return bind_address(eng, bind, err, errlen);
	} else if (mc_parse_hostport(cfg->local_server_name, eng->ip,
				     sizeof(eng->ip), 0, &port)) {
		snprintf(err, errlen,
			 "local_server_name '%s': expected "
			 "host, host:port or [IPv6]:port",
			 cfg->local_server_name);
		return -EINVAL;
	} else {
		int rc = advertise(eng, cfg->local_server_name, port, err,
				   errlen);
		if (!rc)
			toward_metadata(eng, cfg->metadata);
		return rc;
	}
	return 0;
}

/*
 * The pool's key, when there is one: the engine keeps it to authenticate
 * its handshakes and data connections, and the metadata backend signs
 * with it.
 */
static int open_meta(struct te_engine *eng, const struct te_engine_cfg *cfg,
		     char *err, size_t errlen)
{
	const char *path = cfg->auth_token_file ? cfg->auth_token_file :
						  getenv(MC_AUTH_ENV);
	bool have = false;
	int rc;

	rc = mc_auth_key_load_opt(path, &have, &eng->auth_key, err, errlen);
	if (rc) {
		char why[TE_ERR_LEN];

		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errlen, "auth_token_file: %s", why);
		return rc;
	}
	eng->auth = have ? &eng->auth_key : NULL;
	return te_meta_open_key(cfg->metadata, eng->auth, &eng->meta, err,
				errlen);
}

int te_engine_create(const struct te_engine_cfg *cfg, struct te_engine **out,
		     char *err, size_t errlen)
{
	struct te_engine *eng;
	char ebuf[TE_ERR_LEN] = "";
	uint64_t timeout_ms, keep_ms;
	int rc;

	if (!err) {
		err = ebuf;
		errlen = sizeof(ebuf);
	}
	if (!cfg->metadata || !*cfg->metadata) {
		snprintf(err, errlen, "no metadata connection string");
		return -EINVAL;
	}
	rc = te__hs_check_env(err, errlen);
	/* Ours, and refused rather than read as their leading digits
	 * ("10s" was a check every 10 ms, "abc" none at all). */
	if (!rc)
		rc = mc_parse_env_ms("MC_TRANSFER_TIMEOUT_MS", 30000, 1,
				     3600000, &timeout_ms, err, errlen);
	if (!rc)
		rc = mc_parse_env_ms("MC_TE_META_CHECK_MS", 10000, 0, 86400000,
				     &keep_ms, err, errlen);
	if (rc)
		return rc;
	eng = calloc(1, sizeof(*eng));
	if (!eng)
		return -ENOMEM;
	eng->rpc_fd = -1;
	eng->forks = mc_fork_count();
	pthread_rwlock_init(&eng->reg_lock, NULL);
	pthread_mutex_init(&eng->peer_lock, NULL);
	pthread_mutex_init(&eng->notif_lock, NULL);
	pthread_mutex_init(&eng->publish_lock, NULL);
	pthread_mutex_init(&eng->stage_lock, NULL);
	eng->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms :
					    (unsigned)timeout_ms;
	snprintf(eng->meta_conn, sizeof(eng->meta_conn), "%s", cfg->metadata);

	rc = setup_names(eng, cfg, err, errlen);
	if (!rc)
		rc = parse_transport(eng, cfg->transport, cfg->rdma_devices,
				     err, errlen);
	if (!rc)
		rc = mc_host_id(eng->host_id, sizeof(eng->host_id));
	if (!rc)
		rc = open_meta(eng, cfg, err, errlen);
	if (rc)
		goto err_free;
	eng->p2p = eng->meta == NULL;
	rc = te__copier_create(&eng->copier);
	if (rc)
		goto err_meta;
	rc = te__transports_init(eng, cfg, err, errlen);
	if (rc)
		goto err_meta;
	rc = te__rpc_start(eng, cfg->rpc_port, err, errlen);
	if (rc)
		goto err_tps;
	/* With P2PHANDSHAKE peers address us by our RPC address. */
	if (eng->p2p &&
	    (size_t)snprintf(eng->name, sizeof(eng->name), "%s",
			     eng->rpc_address) >= sizeof(eng->name)) {
		rc = -ENAMETOOLONG;
		goto err_rpc;
	}

	eng->self = te__peer_new(eng);
	if (!eng->self) {
		rc = -ENOMEM;
		goto err_rpc;
	}
	eng->self->is_self = true;
	snprintf(eng->self->name, sizeof(eng->self->name), "%s", eng->name);

	if (!eng->p2p) {
		rc = te__claim_name(eng, err, errlen);
		if (!rc)
			rc = te__publish(eng);
		if (rc)
			goto err_self;
	}
	rc = te__keeper_start(eng, (unsigned)keep_ms);
	if (rc) {
		te__keeper_stop(eng);
		te__unpublish(eng);
		snprintf(err, errlen, "metadata keeper: %s", mc_strerror(rc));
		goto err_self;
	}
	mc_log_debug("te", "engine '%s' up: rpc %s, metadata %s", eng->name,
		     eng->rpc_address, cfg->metadata);
	*out = eng;
	return 0;

err_self:
	te__peer_put(eng->self);
err_rpc:
	te__rpc_stop(eng);
err_tps:
	te__transports_fini(eng);
err_meta:
	te__copier_destroy(eng->copier);
	te_meta_close(eng->meta);
err_free:
	pthread_rwlock_destroy(&eng->reg_lock);
	pthread_mutex_destroy(&eng->peer_lock);
	pthread_mutex_destroy(&eng->notif_lock);
	pthread_mutex_destroy(&eng->publish_lock);
	pthread_mutex_destroy(&eng->stage_lock);
	mc_auth_key_clear(&eng->auth_key);
	free(eng);
	return rc;
}

void te_engine_destroy(struct te_engine *eng)
{
	if (!eng)
		return;
	/* The parent's, in a child: its threads are not here to join, and
	 * unpublishing or closing connections would be done to the parent.
	 * Forgotten (its memory stays, as the parent's copy). */
	if (te__forked(eng))
		return;
	te__keeper_stop(eng); /* before it could publish them again */
	te__unpublish(eng);
	te__rpc_stop(eng);
	/* Peers first: their per-transport state belongs to the transports. */
	te__stage_stop(eng);
	te__peers_free(eng);
	te__peer_put(eng->self);
	te__transports_fini(eng);
	te__copier_destroy(eng->copier);
	te__regs_free(eng);
	te__notifications_free(eng);
	te_meta_close(eng->meta);
	pthread_rwlock_destroy(&eng->reg_lock);
	pthread_mutex_destroy(&eng->peer_lock);
	pthread_mutex_destroy(&eng->notif_lock);
	pthread_mutex_destroy(&eng->publish_lock);
	pthread_mutex_destroy(&eng->stage_lock);
	mc_auth_key_clear(&eng->auth_key);
	free(eng);
}
