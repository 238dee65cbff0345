/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store handle's lifecycle: create, setup (engine, master, staging
 * buffer, segment, heartbeat), close (a clean leave), destroy, plus the
 * calls that are about the handle itself: health, timeouts, buffer
 * registration, names of codes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "holds.h"
#include "locs.h"
#include "mc_etcd_conn.h"
#include "mc_fork.h"
#include "mc_log.h"
#include "mc_memcg.h"
#include "mc_net.h"
#include "mc_parse.h"
#include "mooncake/te.h"
#include "ping.h"
#include "segment.h"
#include "staging.h"
#include "store_int.h"
#include "util.h"
#include "xfer.h"

/*
 * fork(): the child has none of a handle's threads, and shares its
 * connections and its segment with the parent. A handle made or set up
 * before a fork is unusable in the child (-1010: set one up there), and
 * its close() there only forgets it: it must not unmount the parent's
 * segment, nor wait for threads the child lacks or for locks they held
 * (it hung for good). A handle set up in the child works there.
 */
static bool forked(const struct mooncake_store *s)
{
	return mc_forked_since(
		atomic_load_explicit(&s->forks, memory_order_relaxed));
}

bool mcs_store_forked(const struct mooncake_store *s)
{
	return s && forked(s);
}

/* The parent's handle, in a child: set up (or closed) before the fork,
 * so its lock may be held by a thread the child does not have. A handle
 * never set up may be set up in the child. */
static bool parents(const struct mooncake_store *s)
{
	return forked(s) && s->state != MCS_NEW;
}

static int refuse_forked(void)
{
	static atomic_bool said;

	if (!atomic_exchange(&said, true))
		mc_log_warn("store",
			    "a store set up before fork() is used in the "
			    "child: refused (-1010); set one up in the child");
	return MC_STORE_UNAVAILABLE_IN_CURRENT_STATUS;
}

MOONCAKE_API mooncake_store_t mooncake_store_create(void)
{
	struct mooncake_store *s = calloc(1, sizeof(*s));
	pthread_rwlockattr_t a;

	if (!s)
		return NULL;
	s->forks = mc_fork_count();
	pthread_rwlockattr_init(&a);
	/* close() must not starve behind a steady stream of calls. */
	pthread_rwlockattr_setkind_np(
		&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&s->lock, &a);
	pthread_rwlockattr_destroy(&a);
	pthread_mutex_init(&s->mount_lock, NULL);
	mcs_regs_init(&s->regs);
	mcs_slots_init(&s->slots, false);
	mcs_contact_init(&s->contact);
	s->state = MCS_NEW;
	return s;
}

int mcs_enter(struct mooncake_store *s)
{
	if (!s)
		return MC_STORE_INVALID_PARAMS;
	if (forked(s))
		return refuse_forked();
	pthread_rwlock_rdlock(&s->lock);
	if (s->state != MCS_READY) {
		pthread_rwlock_unlock(&s->lock);
		return MC_STORE_UNAVAILABLE_IN_CURRENT_STATUS;
	}
	return 0;
}

void mcs_leave(struct mooncake_store *s)
{
	pthread_rwlock_unlock(&s->lock);
}

bool mcs_key_ok(const char *key)
{
	return key && *key;
}

/* ---- mounting ---------------------------------------------------------- */

/* How long a re-mount waits for peers' requests into our segment to end. */
#define FENCE_MS 1000u
/* A re-mount's fence comes when the master's put fence has at most this
 * long to go (ping_remount). */
#define REMOUNT_LEAD_MS 150u
#define REMOUNT_WAIT_MAX_MS 750u
_Static_assert(MCS_WRITE_CONTACT_MS + MCS_XFER_WRITE_WINDOW_MS +
			       REMOUNT_LEAD_MS <=
		       750,
	       "a member's fence follows the last piece of the run before");

static void segment_desc(struct mooncake_store *s, Mcrpc__Segment *d)
{
	*d = (Mcrpc__Segment)MCRPC__SEGMENT__INIT;
	d->id = (ProtobufCBinaryData){ .len = sizeof(s->seg->id),
				       .data = s->seg->id };
	d->name = s->name; /* the effective local_hostname (with its port) */
	d->endpoint = s->name;
	d->base_addr = (uint64_t)(uintptr_t)s->seg->pool;
	d->size = s->seg->size;
	d->protocol = (char *)s->protocol;
	d->host_id = s->host_id;
}

/*
 * Make the master know us and our segment: MountSegment for a segment it
 * cannot know, ReMountSegment otherwise (0 re-adopted with its objects, 1
 * mounted as new). A client without a segment registers with an empty
 * ReMountSegment.
 */
static int do_mount(struct mooncake_store *s)
{
	Mcrpc__ReMountSegmentResponse *resp = NULL;
	Mcrpc__Segment d, *list[1] = { &d };
	int rc;

	pthread_mutex_lock(&s->mount_lock);
	if (!s->seg) {
		rc = mcs_master_remount(s->master, NULL, 0, &resp);
		mcs_master_free(resp);
		goto out;
	}
	segment_desc(s, &d);
	if (!s->seg->reused && !atomic_load(&s->seg_mounted)) {
		rc = mcs_master_mount(s->master, &d);
		if (!rc) {
			mc_log_notice("store",
				      "mounted new segment %s (%llu bytes at "
				      "%s)",
				      s->seg->name,
				      (unsigned long long)s->seg->size,
				      s->name);
			/* From now on the master may hold objects in it. */
			s->seg->reused = true;
		}
		goto out;
	}
	rc = mcs_master_remount(s->master, list, 1, &resp);
	if (!rc) {
		rc = resp->results[0];
		if (rc == 0)
			mc_log_notice(
				"store", "re-adopted segment %s (%llu objects)",
				s->seg->name,
				(unsigned long long)(resp->n_objects ?
							     resp->objects[0] :
							     0));
		else if (rc == 1)
			mc_log_notice("store",
				      "mounted new segment %s (%llu bytes at "
				      "%s; the master did not know it)",
				      s->seg->name,
				      (unsigned long long)s->seg->size,
				      s->name);
		rc = rc == 1 ? 0 : rc;
	}
	mcs_master_free(resp);
out:
	if (!rc && s->seg)
		atomic_store(&s->seg_mounted, true);
	pthread_mutex_unlock(&s->mount_lock);
	return rc;
}

/*
 * The master does not know us (it restarted, a standby took the lead, or
 * it dropped us): what it placed in our segment before is forgotten, and
 * once we re-mount it places afresh there. Writes of that time which the
 * network still holds must not land on the new objects, so the
 * connections peers opened before end first (te_fence_inbound), and not
 * before the writers of the run before have stopped starting pieces: a
 * writer starts a part only within 200 ms of that run's last answer and
 * its pieces within MCS_XFER_WRITE_WINDOW_MS of the part, so a fence
 * 600 ms or more after the new run began (its fence of 750 ms, fence_ms
 * of it left, has at most 150 ms to go) sees every connection they went
 * on (docs/design.md "Writes into placed space"). A fence that cannot
 * finish leaves the re-mount to the next heartbeat.
 */
static int ping_remount(void *arg, uint64_t fence_ms)
{
	struct mooncake_store *s = arg;
	int rc;

	atomic_store(&s->seg_mounted, false);
	if (fence_ms > REMOUNT_WAIT_MAX_MS)
		fence_ms = REMOUNT_WAIT_MAX_MS; /* what any master may ask */
	if (s->seg && !s->remount_fenced && fence_ms > REMOUNT_LEAD_MS)
		usleep((useconds_t)(fence_ms - REMOUNT_LEAD_MS) * 1000u);
	/* Once per re-mount: a fence per retry would only fail the
	 * requests of peers that reconnected meanwhile. */
	if (s->seg && !s->remount_fenced &&
	    (rc = te_fence_inbound(s->eng, FENCE_MS))) {
		mc_log_warn("store",
			    "not re-mounting yet: a peer's request into our "
			    "segment is still under way after %u ms",
			    FENCE_MS);
		return rc;
	}
	s->remount_fenced = true;
	/* A master that restarted keeping nothing (`--db_path memory`) lost
	 * its embedded metadata service's entries too: without ours, peers
	 * can no longer reach us (nor we them, once they do the same). */
	rc = te_publish_again(s->eng);
	if (rc) /* the engine's keeper tries again; the mount goes on */
		mc_log_warn("store",
			    "publishing this client's transfer-engine entries "
			    "again: %s",
			    mc_strerror(rc));
	rc = do_mount(s);
	if (!rc)
		s->remount_fenced = false;
	return rc;
}

/* Give back the slots queued (put_slots.h); all: every slot held. */
static void give_slots(struct mooncake_store *s, bool all)
{
	uint64_t ids[MCS_SLOTS_GIVE_MAX];
	size_t n;

	if (all)
		mcs_slots_clear(&s->slots);
	else
		mcs_slots_expire(&s->slots);
	n = mcs_slots_drain(&s->slots, ids, MCS_SLOTS_GIVE_MAX);
	if (n && s->master) {
		Mcrpc__PutCommitResponse *resp = NULL;
		int rc = mcs_master_put_commit(s->master, NULL, 0, 0, ids, n,
					       &resp);

		mcs_master_free(resp);
		if (rc && !all)
			mcs_slots_requeue(&s->slots, ids, n);
	}
}

static void ping_tick(void *arg)
{
	give_slots(arg, false);
}

static bool ping_owed(void *arg)
{
	struct mooncake_store *s = arg;

	return s->seg && !atomic_load(&s->seg_mounted);
}

/* ---- setup and teardown ------------------------------------------------ */

/* Undo whatever setup built; `leave`: also drop the segment's name. */
static void teardown(struct mooncake_store *s, bool leave)
{
	bool dropped = false, registered = s->ping != NULL;
	int rc;

	/* Leaving calls the master a few times (slots, unmount, leave): a
	 * master out of reach is not waited for long by any of them (a
	 * member's exit took the RPC timeout several times over). */
	if (s->master && mcs_master_timeout(s->master) > 1000)
		mcs_master_set_timeout(s->master, 1000);
	mcs_ping_stop(s->ping);
	s->ping = NULL;
	/* Objects left open lose their holds now (released, not expired). */
	mcs_holds_destroy(s->holds);
	s->holds = NULL;
	mcs_locs_destroy(s->locs);
	s->locs = NULL;
	give_slots(s, true);
	if (s->seg && atomic_load(&s->seg_mounted)) {
		rc = mcs_master_unmount(s->master, s->seg->id);
		if (rc)
			mc_log_info("store",
				    "unmount segment %s: %s (the master "
				    "drops it when this client expires)",
				    s->seg->name, mc_strerror(rc));
		dropped = !rc;
		registered = dropped;
		atomic_store(&s->seg_mounted, false);
	}
	/* Stop counting among the master's clients now, not client_ttl
	 * from now; a master out of reach is not waited for long. */
	if (registered && s->master)
		(void)mcs_master_leave(s->master);
	/* te.h: batches and segments before the engine. */
	mcs_xfer_destroy(s->xfer);
	s->xfer = NULL;
	/* A segment the master may still hold objects in keeps its name,
	 * for the next process of this name to re-adopt. */
	if (s->seg)
		mcs_segment_free(s->seg, s->eng,
				 leave || dropped || !s->seg->reused);
	s->seg = NULL;
	mcs_staging_destroy(s->staging, s->eng);
	s->staging = NULL;
	te_engine_destroy(s->eng);
	s->eng = NULL;
	mcs_master_destroy(s->master);
	s->master = NULL;
	mcs_cfg_release(&s->cfg);
}

/* The protocol asked for: rdma where this host has a device, tcp where
 * the user allows the fallback (te_rdma_check). *used: what the segment
 * says it speaks and what the engine is created for. */
static int check_protocol(const char *p, const char *devices, const char **used)
{
	char err[TE_ERR_LEN] = "";
	int rc;

	*used = p ? p : "";
	if (!p || !*p || !strcmp(p, "tcp"))
		return 0;
	if (!strcmp(p, "rdma")) {
		rc = te_rdma_check(devices, err, sizeof(err));
		*used = rc == TE_RDMA_FALLBACK ? "tcp" : "rdma";
		if (rc == TE_RDMA_FALLBACK)
			return 0;
		if (rc)
			mc_log_err("store",
				   "protocol rdma: NOT_SUPPORTED "
				   "(-1012): %s",
				   err);
		return rc;
	}
	mc_log_err("store", "protocol '%s': NOT_SUPPORTED (-1012); use tcp", p);
	return MC_ENOTSUPPORTED;
}

static unsigned env_uint(const char *name, unsigned def)
{
	const char *v = getenv(name);
	int64_t n;

	if (!v || mc_parse_i64(v, &n) || n < 0 || n > 65535)
		return def;
	return (unsigned)n;
}

/* Where the master is reached: master_server_address's host and port, or
 * for HA masters (etcd://[user@]h1:p1;h2:p2) the first etcd endpoint's,
 * read by the one parser of etcd strings. */
static int master_host(const char *addr, char *host, size_t len, int *port)
{
	if (strncmp(addr, "etcd://", 7))
		return mc_parse_hostport(addr, host, len, 0, port);
	return mc_etcd_conn_first_host(addr, host, len, port);
}

/*
 * A loopback local_hostname (the library's default "localhost", the
 * mount's 127.0.0.1) names this host only: a peer on another host given
 * it reaches itself, so what this node holds could not be read (or
 * written) from anywhere else. With the master not on loopback the pool
 * may span hosts: the engine is named (and listens) at this host's
 * address on the route to the master instead. true when host changed.
 * With MC_TCP_BIND_ADDRESS set the engine listens on and gives peers that
 * address (libte/engine.c): the name stays as given.
 */
static bool host_for_peers(const struct mooncake_store *s, char *host,
			   size_t len)
{
	const char *bind = getenv("MC_TCP_BIND_ADDRESS");
	char mhost[256], src[64];
	int mport = 0, rc;

	if ((bind && *bind) || !mc_net_is_loopback(host) ||
	    master_host(s->cfg.master_server_address, mhost, sizeof(mhost),
			&mport) ||
	    mc_net_is_loopback(mhost))
		return false;
	rc = mc_net_source_addr(mhost, mport, src, sizeof(src));
	if (rc || strlen(src) >= len) {
		mc_log_warn("store",
			    "local_hostname '%s' names this host only, and "
			    "no address of this host on the way to the "
			    "master %s was found (%s): peers on other hosts "
			    "cannot reach this node; set local_hostname",
			    host, s->cfg.master_server_address,
			    mc_strerror(rc ? rc : -ENAMETOOLONG));
		return false;
	}
	mc_log_notice("store",
		      "local_hostname '%s' names this host only and the "
		      "master %s is not on loopback: peers are given %s, "
		      "this host's address on the way to it (set "
		      "local_hostname to choose another)",
		      host, s->cfg.master_server_address, src);
	snprintf(host, len, "%s", src);
	return true;
}

/*
 * A name without a port gets one, as upstream's client does: a random
 * port in MC_STORE_CLIENT_MIN_PORT..MAX_PORT (12300..14300), which is also
 * the engine's RPC port, retried (MC_STORE_CLIENT_SETUP_RETRIES, 20) while
 * the name is taken or the port busy. With P2PHANDSHAKE the engine names
 * itself ip:rpcport anyway.
 */
static int create_engine(struct mooncake_store *s)
{
	struct te_engine_cfg ec = { 0 };
	char host[256], name[300], err[TE_ERR_LEN] = "";
	const char *los = getenv("MC_STORE_CLIENT_MIN_PORT");
	const char *his = getenv("MC_STORE_CLIENT_MAX_PORT");
	unsigned tries = env_uint("MC_STORE_CLIENT_SETUP_RETRIES", 20);
	bool pick;
	int port = 0, rc, lo = 12300, hi = 14300;

	rc = mc_parse_hostport(s->cfg.local_hostname, host, sizeof(host), 0,
			       &port);
	if (rc) {
		mc_log_err("store",
			   "local_hostname '%s': expected host, host:port or "
			   "[IPv6]:port",
			   s->cfg.local_hostname);
		return -EINVAL;
	}
	ec.local_server_name = s->cfg.local_hostname;
	if (host_for_peers(s, host, sizeof(host))) {
		if (port)
			(void)mc_fmt_hostport(name, sizeof(name), host, port);
		else
			snprintf(name, sizeof(name),
				 strchr(host, ':') ? "[%s]" : "%s", host);
		ec.local_server_name = name;
	}
	pick = !port && strcmp(s->cfg.metadata_server, "P2PHANDSHAKE");
	if (pick && mc_parse_port_range(los, his, &lo, &hi)) {
		mc_log_err("store",
			   "MC_STORE_CLIENT_MIN_PORT='%s', "
			   "MC_STORE_CLIENT_MAX_PORT='%s': expected ports "
			   "1..65535, the minimum not above the maximum",
			   los ? los : "", his ? his : "");
		return -EINVAL;
	}
	if (!pick || !tries)
		tries = 1;
	ec.metadata = s->cfg.metadata_server;
	ec.timeout_ms = atomic_load(&s->transfer_ms);
	/* rdma between hosts (shm within one, MC_FORCE_HCA for every peer);
	 * otherwise the engine picks per request. */
	if (s->protocol && !strcmp(s->protocol, "rdma")) {
		ec.transport = "rdma";
		ec.rdma_devices = s->cfg.device_name;
	}
	/* The store's own chain (flag, config, environment) decided it. */
	ec.auth_token_file = s->cfg.auth_token_file ? s->cfg.auth_token_file :
						      "";
	for (unsigned i = 0; i < tries; i++) {
		uint32_t r = 0;

		if (pick) {
			if (mcs_random(&r, sizeof(r)))
				r = (uint32_t)mcs_now_ms() + i;
			port = lo + (int)(r % (uint32_t)(hi - lo + 1));
			(void)mc_fmt_hostport(name, sizeof(name), host, port);
			ec.local_server_name = name;
		}
		ec.rpc_port = port;
		rc = te_engine_create(&ec, &s->eng, err, sizeof(err));
		if (!pick || (rc != MC_EMETACONFLICT && rc != -EADDRINUSE))
			break;
		mc_log_debug("store", "engine name %s: %s; another port", name,
			     err);
	}
	if (rc) {
		mc_log_err("store", "transfer engine %s (metadata %s): %s",
			   ec.local_server_name, s->cfg.metadata_server, err);
		return rc;
	}
	s->name = strdup(te_engine_name(s->eng));
	return s->name ? 0 : -ENOMEM;
}

/* The pool's token (auth_token_file), when configured. */
static int set_auth(struct mooncake_store *s)
{
	char err[MC_ERR_LEN] = "";
	struct mc_auth_key key;
	bool have;
	int rc = mc_auth_key_load_opt(s->cfg.auth_token_file, &have, &key, err,
				      sizeof(err));

	if (rc) {
		mc_log_err("store", "auth_token_file: %s", err);
		return rc == -ENOMEM ? rc : -EINVAL;
	}
	if (have)
		mcs_master_set_auth(s->master, &key);
	mc_auth_key_clear(&key);
	return 0;
}

/* The key namespace (tenant_id, or set_tenant's): docs/design.md. */
static int set_tenant(struct mooncake_store *s)
{
	const char *t = s->tenant ? s->tenant : s->cfg.tenant_id;
	const char *why = mcs_tenant_invalid(t);
	int rc;

	if (why) {
		mc_log_err("store", "tenant_id '%s': %s", t, why);
		return -EINVAL;
	}
	rc = mcs_master_set_tenant(s->master, t);
	if (!rc && !mcs_tenant_default(t))
		mc_log_info("store", "tenant %s: keys under %s%s/", t,
			    MCS_TENANT_ROOT, t);
	return rc;
}

static int connect_master(struct mooncake_store *s)
{
	int rc;

	rc = mcs_random(s->client_id, sizeof(s->client_id));
	if (rc)
		return rc;
	rc = mcs_master_create(s->cfg.master_server_address,
			       atomic_load(&s->rpc_ms), s->client_id,
			       &s->master);
	if (rc) {
		mc_log_err("store", "master_server_address '%s': %s",
			   s->cfg.master_server_address, mc_strerror(rc));
		return rc == -ENOMEM ? rc : -EINVAL;
	}
	mcs_master_set_busy_poll(s->master, (unsigned)s->cfg.rpc_busy_poll_us);
	rc = set_tenant(s);
	if (rc)
		return rc;
	rc = set_auth(s);
	if (rc)
		return rc;
	rc = mcs_master_service_ready(s->master, NULL);
	if (rc)
		mc_log_err("store", "master %s %s: %s",
			   s->cfg.master_server_address,
			   rc <= MC_EAUTHREQUIRED && rc >= MC_EAUTHOFF ?
				   "refused this client" :
				   "unreachable",
			   mc_strerror(rc));
	return rc;
}

static int create_staging(struct mooncake_store *s)
{
	int rc;

	if (!s->cfg.local_buffer_size)
		return 0;
	rc = mcs_staging_create(s->eng, (size_t)s->cfg.local_buffer_size,
				&s->staging);
	if (rc)
		mc_log_err("store", "local_buffer_size %llu: %s",
			   (unsigned long long)s->cfg.local_buffer_size,
			   mc_strerror(rc));
	return rc;
}

/*
 * Which memory the segment is (store_cfg.h): a segment_name asks for a kept
 * segment in /dev/shm and fails without room there; a pool member
 * (keep_segment) keeps one where /dev/shm has room and otherwise warns and
 * uses unnamed memory, as an embedded client always does.
 */
static int create_segment(struct mooncake_store *s)
{
	char name[MCS_SEG_NAME_MAX + 1], err[MC_ERR_LEN] = "";
	const char *n = s->cfg.segment_name;
	bool asked = n && *n, keep = asked || s->cfg.keep_segment;
	int rc;

	if (!s->cfg.global_segment_size)
		return 0;
	if (!asked)
		n = s->cfg.default_segment_name;
	if (!n || !*n) {
		rc = mcs_segment_name(s->name, name, sizeof(name));
		if (rc) {
			mc_log_err("store",
				   "engine name %s: too long for a "
				   "segment name (set segment_name)",
				   s->name);
			return -EINVAL;
		}
		n = name;
	}
	rc = mcs_segment_open(s->eng, n, s->cfg.global_segment_size, keep,
			      &s->seg, err, sizeof(err));
	/* A default name's file that cannot be had: /dev/shm full, read-only
	 * or absent (containers), or the name taken by another local user
	 * (anyone may create the file first: it stopped the member). */
	if ((rc == -ENOSPC || rc == -EROFS || rc == -ENOENT || rc == -EACCES ||
	     rc == -EPERM) &&
	    keep && !asked) {
		mc_log_warn("store",
			    "%s; using private memory meanwhile: this "
			    "segment's objects are lost when the process ends",
			    err);
		rc = mcs_segment_open(s->eng, n, s->cfg.global_segment_size,
				      false, &s->seg, err, sizeof(err));
	}
	if (rc)
		mc_log_err("store", "%s", err);
	return rc;
}

/* A setup step that logs nothing itself failed: say which, and which of
 * the process's limits it likely met (a thread under ulimit -v). */
static int step_failed(const char *step, int rc)
{
	char buf[160];
	const char *hint = mcs_limit_hint(rc, buf, sizeof(buf));

	mc_log_err("store", "setup: cannot %s: %s%s%s%s", step, mc_strerror(rc),
		   hint ? " (" : "", hint ? hint : "", hint ? ")" : "");
	return rc;
}

static int do_setup(struct mooncake_store *s)
{
	int rc;

	/* set_timeouts() before setup wins over the configuration. */
	if (!atomic_load(&s->rpc_ms))
		atomic_store(&s->rpc_ms, (unsigned)s->cfg.rpc_timeout_ms);
	else
		s->rpc_ms_set = true;
	if (!atomic_load(&s->transfer_ms))
		atomic_store(&s->transfer_ms,
			     (unsigned)s->cfg.transfer_timeout_ms);
	else
		s->transfer_ms_set = true;
	rc = check_protocol(s->cfg.protocol, s->cfg.device_name, &s->protocol);
	if (!rc)
		rc = create_engine(s);
	s->slots.off = !s->cfg.put_reserve;
	if (!rc && (rc = mc_host_id(s->host_id, sizeof(s->host_id))))
		return step_failed("read the host's id", rc);
	if (!rc)
		rc = connect_master(s);
	if (!rc && (rc = mcs_holds_create(s->master, &s->holds)))
		return step_failed("start the hold renewer", rc);
	if (!rc && s->cfg.location_cache_keys > 0 &&
	    (rc = mcs_locs_create(s->master, (size_t)s->cfg.location_cache_keys,
				  &s->locs)))
		return step_failed("create the location cache", rc);
	if (!rc)
		rc = create_staging(s);
	if (!rc)
		rc = create_segment(s);
	if (!rc && (rc = mcs_xfer_create(s->eng, &s->xfer)))
		return step_failed("start the transfer pool", rc);
	if (rc)
		return rc;
	rc = do_mount(s);
	if (rc == MC_ESEGEXISTS && s->seg) {
		/* A previous process of ours has not expired at the master
		 * yet: the heartbeat retries until it has. */
		mc_log_notice("store",
			      "segment %s is still held by a previous client "
			      "at the master; retrying",
			      s->seg->name);
		rc = 0;
	} else if (rc && !s->seg) {
		/* Registration of a client without a segment is a courtesy:
		 * the master also learns of us from the first ping. */
		mc_log_debug("store", "register client: %s", mc_strerror(rc));
		rc = 0;
	} else if (rc) {
		mc_log_err("store", "mount segment %s: %s", s->seg->name,
			   mc_strerror(rc));
		return rc;
	}
	rc = mcs_ping_start(s->master, (unsigned)s->cfg.ping_interval_ms,
			    ping_remount, ping_owed, ping_tick, s, &s->ping);
	return rc ? step_failed("start the heartbeat", rc) : 0;
}

int mcs_store_setup(struct mooncake_store *s, const struct mcs_cfg_args *a)
{
	char err[MC_ERR_LEN] = "";
	int rc;

	if (parents(s))
		return MCS_EBADSTATE;
	pthread_rwlock_wrlock(&s->lock);
	if (s->state != MCS_NEW) {
		pthread_rwlock_unlock(&s->lock);
		return MCS_EBADSTATE;
	}
	rc = mcs_cfg_load(&s->cfg, a, err, sizeof(err));
	if (rc) {
		mc_log_err("store", "configuration: %s", err);
		mcs_cfg_release(&s->cfg);
		pthread_rwlock_unlock(&s->lock);
		return rc == -ENOMEM ? rc : -EINVAL;
	}
	if (s->cfg.storage_root_dir && *s->cfg.storage_root_dir)
		mc_log_warn("store",
			    "storage_root_dir %s: disk replicas (upstream's) "
			    "are not supported here; objects live in the "
			    "pool's memory only and nothing is written there",
			    s->cfg.storage_root_dir);
	rc = do_setup(s);
	if (rc) {
		teardown(s, false);
		free(s->name);
		s->name = NULL;
		/* A retry reads the configuration afresh. */
		if (!s->rpc_ms_set)
			atomic_store(&s->rpc_ms, 0);
		if (!s->transfer_ms_set)
			atomic_store(&s->transfer_ms, 0);
	} else {
		s->state = MCS_READY;
		atomic_store(&s->forks, mc_fork_count());
		mc_log_info("store",
			    "joined the pool as %s (master %s, segment %llu "
			    "bytes, staging %llu bytes)",
			    s->name, s->cfg.master_server_address,
			    (unsigned long long)s->cfg.global_segment_size,
			    (unsigned long long)s->cfg.local_buffer_size);
	}
	pthread_rwlock_unlock(&s->lock);
	return rc;
}

/* The machine's physical memory in bytes (UINT64_MAX when unknown). */
static uint64_t mcs_phys_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);

	return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size :
				       UINT64_MAX;
}

/* The limit of this process's memory cgroup (UINT64_MAX: none). */
static uint64_t limit_of_memcg(void)
{
	uint64_t limit = UINT64_MAX;

	(void)mc_memcg_room(&limit);
	return limit;
}

int mcs_join_check(const struct mcs_cfg_args *a, char *err, size_t errlen)
{
	struct mcs_cfg_args quiet = a ? *a : (struct mcs_cfg_args){ 0 };
	struct mcs_cfg cfg = { 0 };
	const char *n;
	bool asked;
	int rc;

	quiet.quiet = true;
	rc = mcs_cfg_load(&cfg, a ? &quiet : NULL, err, errlen);
	if (rc) {
		mcs_cfg_release(&cfg);
		return rc == -ENOMEM ? rc : -EINVAL;
	}
	rc = te_metadata_check(cfg.metadata_server, err, errlen);
	if (!rc && cfg.global_segment_size > mcs_phys_bytes()) {
		snprintf(err, errlen,
			 "global_segment_size %llu MiB: more than this "
			 "machine's memory (%llu MiB)",
			 (unsigned long long)(cfg.global_segment_size >> 20),
			 (unsigned long long)(mcs_phys_bytes() >> 20));
		rc = -EINVAL;
	}
	if (!rc && cfg.global_segment_size > limit_of_memcg()) {
		snprintf(err, errlen,
			 "global_segment_size %llu MiB: more than this "
			 "process's memory cgroup allows (limit %llu MiB: a "
			 "container's --memory, a unit's MemoryMax)",
			 (unsigned long long)(cfg.global_segment_size >> 20),
			 (unsigned long long)(limit_of_memcg() >> 20));
		rc = -EINVAL;
	}
	asked = cfg.segment_name && *cfg.segment_name;
	n = asked ? cfg.segment_name : cfg.default_segment_name;
	if (!rc && cfg.global_segment_size && cfg.keep_segment && n && *n) {
		rc = mcs_segment_check(n, cfg.global_segment_size, err, errlen);
		if (rc == -ENOSPC && !asked)
			rc = 0; /* private memory instead, with a warning */
	}
	mcs_cfg_release(&cfg);
	return rc;
}

MOONCAKE_API int
mooncake_store_setup(mooncake_store_t store, const char *local_hostname,
		     const char *metadata_server, uint64_t global_segment_size,
		     uint64_t local_buffer_size, const char *protocol,
		     const char *device_name, const char *master_server_addr)
{
	struct mcs_cfg_args a = {
		.local_hostname = local_hostname,
		.metadata_server = metadata_server,
		.global_segment_size = global_segment_size,
		.local_buffer_size = local_buffer_size,
		.protocol = protocol,
		.device_name = device_name,
		.master_server_address = master_server_addr,
	};

	if (!store)
		return MC_STORE_INVALID_PARAMS;
	return mc_err_to_store(mcs_store_setup(store, &a));
}

MOONCAKE_API int mooncake_store_close(mooncake_store_t s)
{
	if (!s)
		return MC_STORE_INVALID_PARAMS;
	if (forked(s)) { /* the parent's: left alone (no lock taken) */
		s->state = MCS_CLOSED;
		return 0;
	}
	/* A watch holds the handle for its long poll: end it first. */
	(void)mooncake_store_watch_stop(s);
	pthread_rwlock_wrlock(&s->lock);
	if (s->state == MCS_READY) {
		teardown(s, true);
		mc_log_info("store", "left the pool (%s)", s->name);
	}
	s->state = MCS_CLOSED;
	pthread_rwlock_unlock(&s->lock);
	return 0;
}

MOONCAKE_API void mooncake_store_destroy(mooncake_store_t s)
{
	if (!s)
		return;
	(void)mooncake_store_close(s);
	pthread_rwlock_destroy(&s->lock);
	mcs_slots_destroy(&s->slots);
	mcs_contact_destroy(&s->contact);
	pthread_mutex_destroy(&s->mount_lock);
	mcs_regs_free(&s->regs);
	free(s->tenant);
	free(s->name);
	free(s);
}

/* ---- the handle itself ------------------------------------------------- */

MOONCAKE_API int mooncake_store_health_check(mooncake_store_t s)
{
	int rc;

	if (mcs_enter(s))
		return 1;
	rc = mcs_master_service_ready(s->master, NULL);
	mcs_leave(s);
	return rc ? 2 : 0;
}

MOONCAKE_API int mooncake_store_transfer_stats(mooncake_store_t s,
					       const char *transport,
					       mooncake_transfer_stats_t *out)
{
	struct te_counters c;
	int rc;

	if (!transport || !out)
		return MC_STORE_INVALID_PARAMS;
	rc = mcs_enter(s);
	if (rc)
		return rc;
	rc = te_counters(s->eng, transport, &c);
	mcs_leave(s);
	if (rc)
		return MC_STORE_INVALID_PARAMS;
	*out = (mooncake_transfer_stats_t){
		.read_bytes = c.read_bytes,
		.write_bytes = c.write_bytes,
		.read_requests = c.read_requests,
		.write_requests = c.write_requests,
		.failed_requests = c.failed_requests,
		.served_bytes = c.served_bytes,
		.connections = c.connections,
		.registrations = c.registrations,
		.inflight = c.inflight,
		.caller_requests = c.caller_requests,
	};
	return 0;
}

MOONCAKE_API int
mooncake_store_location_cache_stats(mooncake_store_t s,
				    mooncake_location_cache_stats_t *out)
{
	struct mcs_locs_stats st;
	int rc;

	if (!out)
		return MC_STORE_INVALID_PARAMS;
	rc = mcs_enter(s);
	if (rc)
		return rc;
	mcs_locs_stats(s->locs, &st);
	mcs_leave(s);
	*out = (mooncake_location_cache_stats_t){ .keys = st.keys,
						  .hits = st.hits,
						  .misses = st.misses,
						  .stale = st.stale,
						  .touched = st.touched,
						  .dropped = st.dropped };
	return 0;
}

MOONCAKE_API int mooncake_store_set_timeouts(mooncake_store_t s,
					     unsigned rpc_ms,
					     unsigned transfer_ms)
{
	int rc = 0;

	if (!s)
		return MC_STORE_INVALID_PARAMS;
	if (parents(s))
		return refuse_forked();
	pthread_rwlock_rdlock(&s->lock);
	if (s->state == MCS_CLOSED) {
		rc = MC_STORE_UNAVAILABLE_IN_CURRENT_STATUS;
	} else {
		if (rpc_ms) {
			atomic_store(&s->rpc_ms, rpc_ms);
			if (s->master)
				mcs_master_set_timeout(s->master, rpc_ms);
		}
		if (transfer_ms)
			atomic_store(&s->transfer_ms, transfer_ms);
	}
	pthread_rwlock_unlock(&s->lock);
	return rc;
}

MOONCAKE_API int mooncake_store_set_tenant(mooncake_store_t s,
					   const char *tenant_id)
{
	const char *why = mcs_tenant_invalid(tenant_id);
	char *t = NULL;
	int rc = 0;

	if (!s)
		return MC_STORE_INVALID_PARAMS;
	if (parents(s))
		return refuse_forked();
	if (why) {
		mc_log_err("store", "tenant_id '%s': %s", tenant_id, why);
		return MC_STORE_INVALID_PARAMS;
	}
	if (tenant_id) {
		t = strdup(tenant_id);
		if (!t)
			return MC_STORE_INTERNAL_ERROR;
	}
	pthread_rwlock_wrlock(&s->lock);
	if (s->state != MCS_NEW) {
		rc = MC_STORE_UNAVAILABLE_IN_CURRENT_STATUS;
	} else {
		free(s->tenant);
		s->tenant = t;
		t = NULL;
	}
	pthread_rwlock_unlock(&s->lock);
	free(t);
	return rc;
}

MOONCAKE_API const char *mooncake_store_get_hostname(mooncake_store_t s)
{
	const char *name;

	if (!s || parents(s))
		return NULL;
	pthread_rwlock_rdlock(&s->lock);
	name = s->state == MCS_READY ? s->name : NULL;
	pthread_rwlock_unlock(&s->lock);
	return name;
}

/*
 * Register [buffer, buffer+size), replacing registrations it overlaps: two
 * live buffers never overlap, so an overlapped one names memory that was
 * freed without unregistering and reused by the allocator (connectors do
 * so). Kept, it would make every copy of the new buffer fail. A
 * registration a transfer still uses is not replaced (-EBUSY).
 *
 * Except a range inside one registration: a view into a live buffer (a
 * slice of a connector's pool) as likely as reused memory, and the
 * registration covers it either way, for transports that read the memory
 * where it is now (tcp, shared memory): nothing changes, 0. RDMA's memory
 * regions pin the pages they were made on, so there it is replaced.
 */
static int register_over(struct mooncake_store *s, void *buffer, size_t size)
{
	struct mcs_range old;
	int rc;

	if (mcs_regs_overlap(&s->regs, buffer, size, &old) &&
	    old.addr <= (uintptr_t)buffer &&
	    (uintptr_t)buffer + size <= old.addr + old.len &&
	    !(s->protocol && !strcmp(s->protocol, "rdma"))) {
		mc_log_debug("store",
			     "register_buffer %p (%zu bytes): inside the "
			     "registration of %p (%zu bytes), kept",
			     buffer, size, (void *)old.addr, old.len);
		return 0;
	}
	while ((rc = te_register(s->eng, buffer, size, "cpu:0", false)) ==
		       -EEXIST &&
	       mcs_regs_overlap(&s->regs, buffer, size, &old)) {
		rc = te_unregister(s->eng, (void *)old.addr);
		if (rc) {
			mc_log_warn("store",
				    "register_buffer %p (%zu bytes): it "
				    "overlaps buffer %p (%zu bytes), which a "
				    "transfer still uses",
				    buffer, size, (void *)old.addr, old.len);
			return rc;
		}
		(void)mcs_regs_del(&s->regs, (void *)old.addr, NULL);
		mc_log_info("store",
			    "register_buffer %p (%zu bytes) replaces the "
			    "registration of %p (%zu bytes) it overlaps",
			    buffer, size, (void *)old.addr, old.len);
	}
	if (rc)
		return rc;
	rc = mcs_regs_add(&s->regs, buffer, size);
	if (rc)
		(void)te_unregister(s->eng, buffer);
	return rc;
}

MOONCAKE_API int mooncake_store_register_buffer(mooncake_store_t s,
						void *buffer, size_t size)
{
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	if (!buffer || !size) {
		mcs_leave(s);
		return MC_STORE_INVALID_PARAMS;
	}
	rc = register_over(s, buffer, size);
	mcs_leave(s);
	/* Overlapping a registration still in use is a bad argument. */
	return mc_err_to_store(rc == -EEXIST || rc == -EBUSY ? -EINVAL : rc);
}

MOONCAKE_API int mooncake_store_unregister_buffer(mooncake_store_t s,
						  void *buffer)
{
	size_t len = 0;
	int rc = mcs_enter(s);

	if (rc)
		return rc;
	rc = mcs_regs_del(&s->regs, buffer, &len);
	if (!rc) {
		rc = te_unregister(s->eng, buffer);
		/* Still in use by a transfer: it stays registered. */
		if (rc && mcs_regs_add(&s->regs, buffer, len))
			mc_log_debug("store", "unregister: cannot restore %p",
				     buffer);
	}
	mcs_leave(s);
	return mc_err_to_store(rc == -ENOENT ? -EINVAL : rc);
}

MOONCAKE_API const char *mooncake_store_strerror(int code)
{
	switch (code) {
#define X(name, value, msg) \
	case value:         \
		return #name ": " msg;
		MC_STORE_ERR_MAP(X)
#undef X
	}
	return "UNKNOWN: unknown error code";
}

int mcs_staging_take(struct mooncake_store *s, const char *what,
		     const char *key, uint64_t n, void **out)
{
	if (!s->staging || n > mcs_staging_size(s->staging)) {
		mc_log_warn("store",
			    "%s %s: %llu bytes do not fit the staging buffer "
			    "(local_buffer_size %llu); use a registered buffer "
			    "or raise local_buffer_size",
			    what, key, (unsigned long long)n,
			    (unsigned long long)s->cfg.local_buffer_size);
		return -EINVAL;
	}
	return mcs_staging_alloc(s->staging, (size_t)n,
				 atomic_load(&s->transfer_ms), out);
}
