/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Typed master RPC wrappers (see master_client.h): build the request, call
 * through the pooled RPC client, check the answer's shape and translate
 * every store code in it to an internal code.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "master_client.h"
#include "mc_log.h"
#include "mc_rpc_client.h"
#include "mc_time.h"
#include "mooncake/mc_err.h"
#include "store_err.h"

#define WATCH_MAX_WAIT_MS 30000u
#define RESTART_WAIT_MS 3000u /* a master refusing after it answered */
/* Endpoints this client could not reach, told to the master in every
 * PutStart for this long after the last failure (mcs_master_note_
 * unreachable), at most this many at once. */
#define UNREACH_MS 5000u
#define UNREACH_MAX 8
#define UNREACH_NAME 256

struct unreach {
	char ep[UNREACH_NAME];
	uint64_t until; /* mono ms; 0: a free entry */
};

struct mcs_master {
	struct mc_rpc_client *rpc;
	char *addr;
	uint8_t client_id[MCS_CLIENT_ID_LEN];
	pthread_mutex_t long_lock;
	struct mc_rpc_client *rpc_long; /* Watch long polls, made lazily */
	atomic_bool watch_stopped; /* mcs_master_watch_stop() was called */
	bool auth;
	struct mc_auth_key key;
	/* Tenants (docs/design.md "Tenants"): ".tenants/T/" of a non-default
	 * tenant, added to every key sent and stripped from every key
	 * received; NULL: the default tenant, keys as they are. */
	char *tenant;
	size_t tenant_len;
	/* The master honours RemoveAllRequest.prefix: 1 yes, -1 no, 0 not
	 * asked yet. */
	atomic_int scoped;
	/* PingResponse.view_version of the last ping answered (0: none yet):
	 * it moves whenever a segment joins, leaves or is re-adopted. */
	_Atomic uint64_t view;
	pthread_mutex_t unreach_lock;
	struct unreach unreach[UNREACH_MAX];
	atomic_bool any_unreach; /* an entry may be live: lock to look */
};

int mcs_master_create(const char *addr, unsigned timeout_ms,
		      const uint8_t *client_id, struct mcs_master **out)
{
	struct mcs_master *m = calloc(1, sizeof(*m));
	int rc;

	if (!m)
		return -ENOMEM;
	m->addr = strdup(addr);
	if (!m->addr) {
		free(m);
		return -ENOMEM;
	}
	rc = mc_rpc_client_create(addr, timeout_ms, &m->rpc);
	if (rc) {
		free(m->addr);
		free(m);
		return rc;
	}
	/* Calls carry on across a quick restart of the master (docs/
	 * operations.md "Calls while the master restarts"). */
	mc_rpc_client_set_restart_wait(m->rpc, RESTART_WAIT_MS);
	if (client_id)
		memcpy(m->client_id, client_id, MCS_CLIENT_ID_LEN);
	pthread_mutex_init(&m->long_lock, NULL);
	pthread_mutex_init(&m->unreach_lock, NULL);
	*out = m;
	return 0;
}

void mcs_master_set_auth(struct mcs_master *m, const struct mc_auth_key *key)
{
	m->auth = true;
	m->key = *key;
	mc_rpc_client_set_auth(m->rpc, key);
}

bool mcs_tenant_default(const char *tenant_id)
{
	return !tenant_id || !*tenant_id || !strcmp(tenant_id, "default");
}

const char *mcs_tenant_invalid(const char *tenant_id)
{
	size_t n = 0;

	if (mcs_tenant_default(tenant_id))
		return NULL;
	for (const char *p = tenant_id; *p; p++, n++)
		if (!strchr("abcdefghijklmnopqrstuvwxyz"
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-",
			    *p))
			return "only letters, digits, '_', '.' and '-' are "
			       "allowed";
	if (n > MCS_TENANT_MAX)
		return "longer than 64 characters";
	if (!strcmp(tenant_id, ".") || !strcmp(tenant_id, ".."))
		return "'.' and '..' are not tenant names";
	return NULL;
}

int mcs_master_set_tenant(struct mcs_master *m, const char *tenant_id)
{
	char *t = NULL;
	size_t n = 0;

	if (mcs_tenant_invalid(tenant_id))
		return -EINVAL;
	if (!mcs_tenant_default(tenant_id)) {
		n = strlen(MCS_TENANT_ROOT) + strlen(tenant_id) + 1;
		t = malloc(n + 1);
		if (!t)
			return -ENOMEM;
		snprintf(t, n + 1, "%s%s/", MCS_TENANT_ROOT, tenant_id);
	}
	free(m->tenant);
	m->tenant = t;
	m->tenant_len = n;
	return 0;
}

void mcs_master_set_busy_poll(struct mcs_master *m, unsigned max_us)
{
	mc_rpc_client_set_busy_poll(m->rpc, max_us);
}

void mcs_master_destroy(struct mcs_master *m)
{
	if (!m)
		return;
	mc_rpc_client_destroy(m->rpc);
	mc_rpc_client_destroy(m->rpc_long);
	pthread_mutex_destroy(&m->long_lock);
	pthread_mutex_destroy(&m->unreach_lock);
	mc_auth_key_clear(&m->key);
	free(m->tenant);
	free(m->addr);
	free(m);
}

void mcs_master_set_timeout(struct mcs_master *m, unsigned timeout_ms)
{
	mc_rpc_client_set_timeout(m->rpc, timeout_ms);
	pthread_mutex_lock(&m->long_lock);
	if (m->rpc_long && timeout_ms)
		mc_rpc_client_set_timeout(m->rpc_long,
					  timeout_ms + WATCH_MAX_WAIT_MS);
	pthread_mutex_unlock(&m->long_lock);
}

unsigned mcs_master_timeout(const struct mcs_master *m)
{
	return mc_rpc_client_timeout(m->rpc);
}

const uint8_t *mcs_master_client_id(const struct mcs_master *m)
{
	return m->client_id;
}

void mcs_master_free(void *msg)
{
	if (msg)
		protobuf_c_message_free_unpacked(msg, NULL);
}

/* One call: transport errors as they are, else the answer's own code. */
static int call_on(struct mc_rpc_client *c, uint16_t method, const void *req,
		   void *resp_out)
{
	ProtobufCMessage **resp = resp_out;
	int32_t code;
	int rc;

	rc = mc_rpc_call(c, method, req, resp);
	if (rc) {
		const struct mc_rpc_method *mm = mc_rpc_method(method);
		mc_log_debug("store", "%s: %s", mm ? mm->name : "rpc",
			     mc_strerror(rc));
		return rc;
	}
	code = mc_rpc_resp_code(*resp);
	if (code) {
		protobuf_c_message_free_unpacked(*resp, NULL);
		*resp = NULL;
		return mcs_err_from_store(code);
	}
	return 0;
}

static int call(struct mcs_master *m, uint16_t method, const void *req,
		void *resp_out)
{
	return call_on(m->rpc, method, req, resp_out);
}

int mcs_master_call(struct mcs_master *m, uint16_t method, const void *req,
		    void *resp_out)
{
	return call(m, method, req, resp_out);
}

/* ---- the tenant's key mapping ------------------------------------------ */

/* Keys as the master stores them: v[i] is keys[i] with the tenant's
 * prefix; blk (free() it) holds them all, NULL with no tenant (v is keys
 * itself then). A NULL key stays NULL. */
struct tkeys {
	char **v;
	void *blk;
};

static int tk_map(struct mcs_master *m, const char *const *keys, size_t n,
		  struct tkeys *t)
{
	size_t sz = n * sizeof(char *), tl = m->tenant_len;
	char *p;

	t->v = (char **)keys;
	t->blk = NULL;
	if (!m->tenant || !n)
		return 0;
	for (size_t i = 0; i < n; i++)
		sz += keys[i] ? tl + strlen(keys[i]) + 1 : 0;
	t->blk = malloc(sz);
	if (!t->blk)
		return -ENOMEM;
	t->v = t->blk;
	p = (char *)(t->v + n);
	for (size_t i = 0; i < n; i++) {
		size_t kl = keys[i] ? strlen(keys[i]) + 1 : 0;

		if (!keys[i]) {
			t->v[i] = NULL;
			continue;
		}
		t->v[i] = p;
		memcpy(p, m->tenant, tl);
		memcpy(p + tl, keys[i], kl);
		p += tl + kl;
	}
	return 0;
}

/* A key from the master as the tenant sees it: the prefix removed in
 * place. false: not the tenant's (or the tenant's root itself). */
static bool tk_strip(struct mcs_master *m, char *key)
{
	size_t tl = m->tenant_len;

	if (!m->tenant)
		return true;
	if (!key || strncmp(key, m->tenant, tl) || !key[tl])
		return false;
	memmove(key, key + tl, strlen(key + tl) + 1);
	return true;
}

/* List entries outside the tenant dropped, the others stripped. */
static void tk_list(struct mcs_master *m, Mcrpc__ListResponse *r)
{
	size_t k = 0;

	if (!m->tenant)
		return;
	for (size_t i = 0; i < r->n_entries; i++) {
		if (r->entries[i] && tk_strip(m, r->entries[i]->name))
			r->entries[k++] = r->entries[i];
		else
			mcs_master_free(r->entries[i]);
	}
	r->n_entries = k;
}

/* Events likewise; a rename across the tenant's border is a remove (out
 * of it) or a put (into it). */
static void tk_events(struct mcs_master *m, Mcrpc__WatchResponse *r)
{
	size_t k = 0;

	if (!m->tenant)
		return;
	for (size_t i = 0; i < r->n_events; i++) {
		Mcrpc__Event *e = r->events[i];
		bool in = e && tk_strip(m, e->key), to_in = false;

		if (e && e->type == MCRPC__EVENT_TYPE__EV_RENAME) {
			to_in = tk_strip(m, e->to);
			if (in && !to_in) {
				e->type = MCRPC__EVENT_TYPE__EV_REMOVE;
				if (*e->to) /* "" may be protobuf-c's own */
					e->to[0] = '\0';
			} else if (!in && to_in) {
				char *x = e->key;

				e->key = e->to;
				e->to = x;
				if (*e->to)
					e->to[0] = '\0';
				e->type = MCRPC__EVENT_TYPE__EV_PUT;
				in = true;
			}
		}
		if (in)
			r->events[k++] = e;
		else
			mcs_master_free(e);
	}
	r->n_events = k;
}

static ProtobufCBinaryData client_id(struct mcs_master *m)
{
	return (ProtobufCBinaryData){ .len = MCS_CLIENT_ID_LEN,
				      .data = m->client_id };
}

/* A KeysRequest of the keys in tk (tk_map). */
static Mcrpc__KeysRequest keys_req(struct mcs_master *m, const struct tkeys *tk,
				   size_t n)
{
	Mcrpc__KeysRequest r = MCRPC__KEYS_REQUEST__INIT;

	r.client_id = client_id(m);
	r.n_keys = n;
	r.keys = tk->v;
	return r;
}

/* ReplicaList codes to internal codes; -EPROTO when the count is off. */
static int fix_lists(Mcrpc__ReplicaList **lists, size_t got, size_t want)
{
	if (got != want)
		return -EPROTO;
	for (size_t i = 0; i < got; i++) {
		if (!lists[i])
			return -EPROTO;
		lists[i]->code = mcs_err_from_store(lists[i]->code);
	}
	return 0;
}

/* ---- liveness and segments --------------------------------------------- */

int mcs_master_service_ready(struct mcs_master *m,
			     Mcrpc__ServiceReadyResponse **out)
{
	Mcrpc__ServiceReadyRequest req = MCRPC__SERVICE_READY_REQUEST__INIT;
	Mcrpc__ServiceReadyResponse *resp = NULL;
	int rc;

	rc = call(m, MCRPC__METHOD__SERVICE_READY, &req, &resp);
	if (out)
		*out = resp;
	else
		mcs_master_free(resp);
	return rc;
}

int mcs_master_ping(struct mcs_master *m, int *client_status,
		    uint64_t *fence_ms, uint64_t *run)
{
	Mcrpc__PingRequest req = MCRPC__PING_REQUEST__INIT;
	Mcrpc__PingResponse *resp = NULL;
	int rc;

	req.client_id = client_id(m);
	rc = call(m, MCRPC__METHOD__PING, &req, &resp);
	if (rc)
		return rc;
	*client_status = resp->client_status;
	atomic_store(&m->view, resp->view_version);
	if (fence_ms)
		*fence_ms = resp->fence_ms;
	if (run)
		*run = resp->run;
	mcs_master_free(resp);
	return 0;
}

uint64_t mcs_master_view(struct mcs_master *m)
{
	return atomic_load(&m->view);
}

int mcs_master_leave(struct mcs_master *m)
{
	Mcrpc__PingRequest req = MCRPC__PING_REQUEST__INIT;
	Mcrpc__PingResponse *resp = NULL;
	int rc;

	req.client_id = client_id(m);
	req.leaving = true;
	rc = call(m, MCRPC__METHOD__PING, &req, &resp);
	mcs_master_free(resp);
	return rc;
}

int mcs_master_mount(struct mcs_master *m, const Mcrpc__Segment *seg)
{
	Mcrpc__MountSegmentRequest req = MCRPC__MOUNT_SEGMENT_REQUEST__INIT;
	Mcrpc__MountSegmentResponse *resp = NULL;
	int rc;

	req.client_id = client_id(m);
	req.segment = (Mcrpc__Segment *)seg;
	rc = call(m, MCRPC__METHOD__MOUNT_SEGMENT, &req, &resp);
	mcs_master_free(resp);
	return rc;
}

int mcs_master_remount(struct mcs_master *m, Mcrpc__Segment *const *segs,
		       size_t n, Mcrpc__ReMountSegmentResponse **out)
{
	Mcrpc__ReMountSegmentRequest req =
		MCRPC__RE_MOUNT_SEGMENT_REQUEST__INIT;
	Mcrpc__ReMountSegmentResponse *resp = NULL;
	int rc;

	*out = NULL;
	req.client_id = client_id(m);
	req.n_segments = n;
	req.segments = (Mcrpc__Segment **)segs;
	rc = call(m, MCRPC__METHOD__REMOUNT_SEGMENT, &req, &resp);
	if (rc)
		return rc;
	if (resp->n_results != n ||
	    (resp->n_objects != n && resp->n_objects != 0)) {
		mcs_master_free(resp);
		return -EPROTO;
	}
	for (size_t i = 0; i < n; i++)
		if (resp->results[i] < 0)
			resp->results[i] = mcs_err_from_store(resp->results[i]);
	*out = resp;
	return 0;
}

int mcs_master_unmount(struct mcs_master *m, const uint8_t *segment_id)
{
	Mcrpc__UnmountSegmentRequest req = MCRPC__UNMOUNT_SEGMENT_REQUEST__INIT;
	Mcrpc__UnmountSegmentResponse *resp = NULL;
	int rc;

	req.client_id = client_id(m);
	req.segment_id = (ProtobufCBinaryData){ .len = MCS_CLIENT_ID_LEN,
						.data = (uint8_t *)segment_id };
	rc = call(m, MCRPC__METHOD__UNMOUNT_SEGMENT, &req, &resp);
	mcs_master_free(resp);
	return rc;
}

int mcs_master_get_status(struct mcs_master *m, Mcrpc__GetStatusResponse **out)
{
	Mcrpc__GetStatusRequest req = MCRPC__GET_STATUS_REQUEST__INIT;

	*out = NULL;
	return call(m, MCRPC__METHOD__GET_STATUS, &req, out);
}

/* ---- objects ----------------------------------------------------------- */

void mcs_master_note_unreachable(struct mcs_master *m, const char *endpoint)
{
	uint64_t now = mc_mono_ms();
	struct unreach *u = NULL;

	if (!endpoint || strlen(endpoint) >= UNREACH_NAME)
		return;
	pthread_mutex_lock(&m->unreach_lock);
	/* Its own entry, else a free or expired one, else the oldest. */
	for (size_t i = 0; i < UNREACH_MAX; i++) {
		struct unreach *e = &m->unreach[i];

		if (e->until && !strcmp(e->ep, endpoint)) {
			u = e;
			break;
		}
		if (!u || (u->until > now && e->until < u->until))
			u = e;
	}
	if (u->until <= now || strcmp(u->ep, endpoint))
		mc_log_info("store",
			    "could not reach %s: the master is told to "
			    "place new replicas elsewhere, and its "
			    "replicas are read last, for %u s",
			    endpoint, UNREACH_MS / 1000);
	snprintf(u->ep, sizeof(u->ep), "%s", endpoint);
	u->until = now + UNREACH_MS;
	atomic_store(&m->any_unreach, true);
	pthread_mutex_unlock(&m->unreach_lock);
}

bool mcs_master_unreachable(struct mcs_master *m, const char *endpoint)
{
	uint64_t now;
	bool yes = false, live = false;

	if (!endpoint || !atomic_load(&m->any_unreach))
		return false;
	now = mc_mono_ms();
	pthread_mutex_lock(&m->unreach_lock);
	for (size_t i = 0; i < UNREACH_MAX; i++) {
		if (m->unreach[i].until <= now)
			continue;
		live = true;
		yes |= !strcmp(m->unreach[i].ep, endpoint);
	}
	/* All expired: a client that only reads takes the lock no more. */
	if (!live)
		atomic_store(&m->any_unreach, false);
	pthread_mutex_unlock(&m->unreach_lock);
	return yes;
}

/* The live entries into eps (UNREACH_MAX of UNREACH_NAME); how many. */
static size_t unreachable(struct mcs_master *m, char (*eps)[UNREACH_NAME])
{
	uint64_t now;
	size_t n = 0;

	if (!atomic_load(&m->any_unreach))
		return 0;
	now = mc_mono_ms();
	pthread_mutex_lock(&m->unreach_lock);
	for (size_t i = 0; i < UNREACH_MAX; i++)
		if (m->unreach[i].until > now)
			memcpy(eps[n++], m->unreach[i].ep, UNREACH_NAME);
	if (!n)
		atomic_store(&m->any_unreach, false);
	pthread_mutex_unlock(&m->unreach_lock);
	return n;
}

int mcs_master_put_start(struct mcs_master *m, bool batch,
			 const char *const *keys, const uint64_t *sizes,
			 size_t n, const Mcrpc__ReplicateConfig *cfg,
			 const Mcrpc__Attr *attr, const char *const *groups,
			 uint32_t reserve, bool publish,
			 Mcrpc__PutStartResponse **out)
{
	Mcrpc__PutStartRequest req = MCRPC__PUT_START_REQUEST__INIT;
	Mcrpc__PutStartResponse *resp = NULL;
	char eps[UNREACH_MAX][UNREACH_NAME], *ep[UNREACH_MAX];
	struct tkeys tk;
	int rc;

	*out = NULL;
	rc = tk_map(m, keys, n, &tk);
	if (rc)
		return rc;
	req.client_id = client_id(m);
	req.n_keys = n;
	req.keys = tk.v;
	req.n_sizes = n;
	req.sizes = (uint64_t *)sizes;
	req.config = (Mcrpc__ReplicateConfig *)cfg;
	req.attr = (Mcrpc__Attr *)attr;
	req.reserve = reserve;
	req.publish = publish;
	req.n_unreachable = unreachable(m, eps);
	for (size_t i = 0; i < req.n_unreachable; i++)
		ep[i] = eps[i];
	req.unreachable = ep;
	if (groups) {
		req.n_group_ids = n;
		req.group_ids = (char **)groups;
	}
	rc = call(m,
		  batch ? MCRPC__METHOD__BATCH_PUT_START :
			  MCRPC__METHOD__PUT_START,
		  &req, &resp);
	free(tk.blk);
	if (rc)
		return rc;
	rc = fix_lists(resp->results, resp->n_results, n);
	if (rc) {
		mcs_master_free(resp);
		return rc;
	}
	*out = resp;
	return 0;
}

int mcs_master_put_commit(struct mcs_master *m, const char *key, uint64_t slot,
			  uint32_t reserve, const uint64_t *release,
			  size_t n_release, Mcrpc__PutCommitResponse **out)
{
	Mcrpc__PutCommitRequest req = MCRPC__PUT_COMMIT_REQUEST__INIT;
	struct tkeys tk = { 0 };
	int rc;

	*out = NULL;
	if (key) {
		rc = tk_map(m, &key, 1, &tk);
		if (rc)
			return rc;
		req.key = tk.v[0];
	}
	req.client_id = client_id(m);
	req.slot = slot;
	req.reserve = reserve;
	req.n_release = n_release;
	req.release = (uint64_t *)release;
	/* Not call(): the answer's code is the key's, kept for the caller. */
	rc = mc_rpc_call(m->rpc, MCRPC__METHOD__PUT_COMMIT, &req.base,
			 (ProtobufCMessage **)out);
	free(tk.blk);
	return rc;
}

/* KeysRequest flags of tk_call. */
enum { TK_FORCE = 1, TK_HOLD = 2 };

/* A KeysRequest of keys as the tenant names them (force: Remove; hold:
 * GetReplicaList; ages: NULL, or n read_age_ms of a GetReplicaList) and
 * its response, of the method's type. */
static int tk_call_aged(struct mcs_master *m, uint16_t method,
			const char *const *keys, size_t n, unsigned flags,
			const uint32_t *ages, void *resp_out)
{
	Mcrpc__KeysRequest req;
	struct tkeys tk;
	int rc;

	rc = tk_map(m, keys, n, &tk);
	if (rc)
		return rc;
	req = keys_req(m, &tk, n);
	req.force = flags & TK_FORCE;
	req.hold = flags & TK_HOLD;
	if (ages) {
		req.n_read_age_ms = n;
		req.read_age_ms = (uint32_t *)ages;
	}
	rc = call(m, method, &req, resp_out);
	free(tk.blk);
	return rc;
}

static int tk_call(struct mcs_master *m, uint16_t method,
		   const char *const *keys, size_t n, unsigned flags,
		   void *resp_out)
{
	return tk_call_aged(m, method, keys, n, flags, NULL, resp_out);
}

/* A KeysResponse's per-key codes into results (internal codes), then
 * freed; -EPROTO when the count is off. */
static int keys_results(Mcrpc__KeysResponse *resp, size_t n, int *results)
{
	int rc = 0;

	if (resp->n_results != n) {
		rc = -EPROTO;
	} else {
		for (size_t i = 0; i < n; i++)
			results[i] = resp->results[i] ?
					     mcs_err_from_store(
						     resp->results[i]->code) :
					     -EPROTO;
	}
	mcs_master_free(resp);
	return rc;
}

/* A KeysResponse call of keys as the tenant names them (force: Remove):
 * results[i] the internal code of key i. */
static int tk_keys_call(struct mcs_master *m, uint16_t method,
			const char *const *keys, size_t n, bool force,
			int *results)
{
	Mcrpc__KeysResponse *resp = NULL;
	int rc = tk_call(m, method, keys, n, force ? TK_FORCE : 0, &resp);

	return rc ? rc : keys_results(resp, n, results);
}

int mcs_master_put_end(struct mcs_master *m, bool batch,
		       const char *const *keys, size_t n, int *results,
		       uint64_t *versions)
{
	Mcrpc__KeysResponse *resp = NULL;
	int rc = tk_call(m,
			 batch ? MCRPC__METHOD__BATCH_PUT_END :
				 MCRPC__METHOD__PUT_END,
			 keys, n, 0, &resp);

	if (rc)
		return rc;
	for (size_t i = 0; versions && i < n; i++)
		versions[i] = i < resp->n_results && resp->results[i] ?
				      resp->results[i]->version :
				      0;
	return keys_results(resp, n, results);
}

int mcs_master_put_revoke(struct mcs_master *m, bool batch,
			  const char *const *keys, size_t n, int *results)
{
	return tk_keys_call(m,
			    batch ? MCRPC__METHOD__BATCH_PUT_REVOKE :
				    MCRPC__METHOD__PUT_REVOKE,
			    keys, n, false, results);
}

static int get_lists(struct mcs_master *m, bool batch, const char *const *keys,
		     size_t n, unsigned flags, const uint32_t *ages,
		     Mcrpc__GetReplicaListResponse **out)
{
	Mcrpc__GetReplicaListResponse *resp = NULL;
	int rc;

	*out = NULL;
	rc = tk_call_aged(m,
			  batch ? MCRPC__METHOD__BATCH_GET_REPLICA_LIST :
				  MCRPC__METHOD__GET_REPLICA_LIST,
			  keys, n, flags, ages, &resp);
	if (rc)
		return rc;
	rc = fix_lists(resp->results, resp->n_results, n);
	if (rc) {
		mcs_master_free(resp);
		return rc;
	}
	*out = resp;
	return 0;
}

int mcs_master_get_replicas(struct mcs_master *m, bool batch,
			    const char *const *keys, size_t n, bool hold,
			    Mcrpc__GetReplicaListResponse **out)
{
	return get_lists(m, batch, keys, n, hold ? TK_HOLD : 0, NULL, out);
}

int mcs_master_renew_reads(struct mcs_master *m, const char *const *keys,
			   const uint32_t *ages_ms, size_t n,
			   Mcrpc__GetReplicaListResponse **out)
{
	return get_lists(m, true, keys, n, 0, ages_ms, out);
}

int mcs_master_exist(struct mcs_master *m, bool batch, const char *const *keys,
		     size_t n, int *results)
{
	Mcrpc__ExistResponse *resp = NULL;
	int rc;

	rc = tk_call(m,
		     batch ? MCRPC__METHOD__BATCH_EXIST_KEY :
			     MCRPC__METHOD__EXIST_KEY,
		     keys, n, 0, &resp);
	if (rc)
		return rc;
	if (resp->n_results != n) {
		rc = -EPROTO;
	} else {
		for (size_t i = 0; i < n; i++) {
			int v = resp->results[i];
			results[i] = v < 0 ? mcs_err_from_store(v) : !!v;
		}
	}
	mcs_master_free(resp);
	return rc;
}

int mcs_master_get_size(struct mcs_master *m, const char *const *keys, size_t n,
			int64_t *sizes)
{
	Mcrpc__GetSizeResponse *resp = NULL;
	int rc;

	rc = tk_call(m, MCRPC__METHOD__GET_SIZE, keys, n, 0, &resp);
	if (rc)
		return rc;
	if (resp->n_sizes != n) {
		rc = -EPROTO;
	} else {
		for (size_t i = 0; i < n; i++) {
			int64_t v = resp->sizes[i];
			sizes[i] = v < 0 ? mcs_err_from_store((int)v) : v;
		}
	}
	mcs_master_free(resp);
	return rc;
}

int mcs_master_remove(struct mcs_master *m, bool batch, const char *const *keys,
		      size_t n, bool force, int *results)
{
	return tk_keys_call(
		m, batch ? MCRPC__METHOD__BATCH_REMOVE : MCRPC__METHOD__REMOVE,
		keys, n, force, results);
}

/* A tenant's RemoveAll needs a master that honours its prefix: an older
 * one would remove every tenant's keys. */
static int scoped_remove_ok(struct mcs_master *m)
{
	Mcrpc__ServiceReadyResponse *r = NULL;
	int s = atomic_load(&m->scoped), rc;

	if (!s) {
		rc = mcs_master_service_ready(m, &r);
		if (rc)
			return rc;
		s = r->scoped_remove ? 1 : -1;
		mcs_master_free(r);
		atomic_store(&m->scoped, s);
	}
	if (s > 0)
		return 0;
	mc_log_err("store",
		   "master %s cannot remove one tenant's keys "
		   "(an older version): refused",
		   m->addr);
	return MC_ENOTSUPPORTED;
}

static int count_call(struct mcs_master *m, uint16_t method, const char *regex,
		      bool force, uint64_t *count)
{
	Mcrpc__RemoveAllRequest req = MCRPC__REMOVE_ALL_REQUEST__INIT;
	Mcrpc__CountResponse *resp = NULL;
	int rc;

	req.force = force;
	req.regex = (char *)(regex ? regex : "");
	/* A tenant: its keys only, matched without the prefix; the default
	 * tenant: everything but the tenants' keys. */
	if (m->tenant) {
		rc = scoped_remove_ok(m);
		if (rc)
			return rc;
		req.prefix = m->tenant;
	} else {
		req.exclude_prefix = (char *)MCS_TENANT_ROOT;
	}
	rc = call(m, method, &req, &resp);
	if (rc)
		return rc;
	*count = resp->count;
	mcs_master_free(resp);
	return 0;
}

int mcs_master_remove_all(struct mcs_master *m, bool force, uint64_t *count)
{
	return count_call(m, MCRPC__METHOD__REMOVE_ALL, NULL, force, count);
}

int mcs_master_remove_by_regex(struct mcs_master *m, const char *regex,
			       bool force, uint64_t *count)
{
	return count_call(m, MCRPC__METHOD__REMOVE_BY_REGEX, regex, force,
			  count);
}

/* ---- filesystem support ------------------------------------------------ */

int mcs_master_stat(struct mcs_master *m, const char *key, bool dir,
		    Mcrpc__StatResponse **out)
{
	Mcrpc__KeysRequest req;
	struct tkeys tk;
	int rc;

	*out = NULL;
	rc = tk_map(m, &key, 1, &tk);
	if (rc)
		return rc;
	req = keys_req(m, &tk, 1);
	req.dir = dir;
	rc = call(m, MCRPC__METHOD__STAT, &req, out);
	free(tk.blk);
	return rc;
}

int mcs_master_list(struct mcs_master *m, const char *prefix,
		    const char *delimiter, const char *start_after,
		    unsigned limit, bool dirs, Mcrpc__ListResponse **out)
{
	Mcrpc__ListRequest req = MCRPC__LIST_REQUEST__INIT;
	const char *ks[2] = { prefix ? prefix : "",
			      start_after && *start_after ? start_after :
							    NULL };
	struct tkeys tk;
	int rc;

	req.dirs = dirs;
	*out = NULL;
	rc = tk_map(m, ks, 2, &tk);
	if (rc)
		return rc;
	req.prefix = tk.v[0];
	req.delimiter = (char *)(delimiter ? delimiter : "");
	req.start_after = tk.v[1] ? tk.v[1] : "";
	req.limit = limit;
	rc = call(m, MCRPC__METHOD__LIST, &req, out);
	free(tk.blk);
	if (!rc)
		tk_list(m, *out);
	return rc;
}

static int lease_call(struct mcs_master *m, uint16_t method,
		      const uint64_t *ids, size_t n, int *results)
{
	Mcrpc__LeaseRequest req = MCRPC__LEASE_REQUEST__INIT;
	Mcrpc__KeysResponse *resp = NULL;
	int rc;

	req.n_hold_ids = n;
	req.hold_ids = (uint64_t *)ids;
	rc = call(m, method, &req, &resp);
	return rc ? rc : keys_results(resp, n, results);
}

int mcs_master_lease_renew(struct mcs_master *m, const uint64_t *hold_ids,
			   size_t n, int *results)
{
	return lease_call(m, MCRPC__METHOD__LEASE_RENEW, hold_ids, n, results);
}

int mcs_master_lease_release(struct mcs_master *m, const uint64_t *hold_ids,
			     size_t n, int *results)
{
	return lease_call(m, MCRPC__METHOD__LEASE_RELEASE, hold_ids, n,
			  results);
}

/* A KeysResponse's outcome: its code, or its one per-key result. */
static int keys_outcome(int rc, Mcrpc__KeysResponse *resp)
{
	if (!rc && resp->n_results == 1 && resp->results[0])
		rc = mcs_err_from_store(resp->results[0]->code);
	mcs_master_free(resp);
	return rc;
}

int mcs_master_setattr(struct mcs_master *m, const char *key, bool dir,
		       unsigned mask, const Mcrpc__Attr *attr,
		       Mcrpc__StatResponse **out)
{
	Mcrpc__SetAttrRequest req = MCRPC__SET_ATTR_REQUEST__INIT;
	struct tkeys tk;
	int rc;

	*out = NULL;
	rc = tk_map(m, &key, 1, &tk);
	if (rc)
		return rc;
	req.key = tk.v[0];
	req.dir = dir;
	req.mask = mask;
	req.attr = (Mcrpc__Attr *)attr;
	rc = call(m, MCRPC__METHOD__SET_ATTR, &req, out);
	free(tk.blk);
	return rc;
}

int mcs_master_mkdir(struct mcs_master *m, const char *path,
		     const Mcrpc__Attr *attr)
{
	Mcrpc__MkdirRequest req = MCRPC__MKDIR_REQUEST__INIT;
	Mcrpc__KeysResponse *resp = NULL;
	struct tkeys tk;
	int rc;

	rc = tk_map(m, &path, 1, &tk);
	if (rc)
		return rc;
	req.path = tk.v[0];
	req.attr = (Mcrpc__Attr *)attr;
	rc = call(m, MCRPC__METHOD__MKDIR, &req, &resp);
	free(tk.blk);
	return keys_outcome(rc, resp);
}

int mcs_master_rmdir(struct mcs_master *m, const char *path)
{
	Mcrpc__KeysRequest req;
	Mcrpc__KeysResponse *resp = NULL;
	struct tkeys tk;
	int rc;

	rc = tk_map(m, &path, 1, &tk);
	if (rc)
		return rc;
	req = keys_req(m, &tk, 1);
	req.dir = true;
	rc = call(m, MCRPC__METHOD__RMDIR, &req, &resp);
	free(tk.blk);
	return keys_outcome(rc, resp);
}

int mcs_master_rename(struct mcs_master *m, const char *from, const char *to,
		      bool no_replace, bool prefix, bool version)
{
	Mcrpc__RenameRequest req = MCRPC__RENAME_REQUEST__INIT;
	Mcrpc__KeysResponse *resp = NULL;
	const char *ks[2] = { from, to };
	struct tkeys tk;
	int rc;

	rc = tk_map(m, ks, 2, &tk);
	if (rc)
		return rc;
	req.from = tk.v[0];
	req.to = tk.v[1];
	req.no_replace = no_replace;
	req.prefix = prefix;
	req.version = version;
	rc = call(m, MCRPC__METHOD__RENAME, &req, &resp);
	free(tk.blk);
	return keys_outcome(rc, resp);
}

void mcs_master_watch_stop(struct mcs_master *m)
{
	pthread_mutex_lock(&m->long_lock);
	atomic_store(&m->watch_stopped, true);
	if (m->rpc_long)
		mc_rpc_client_abort(m->rpc_long);
	pthread_mutex_unlock(&m->long_lock);
}

int mcs_master_watch(struct mcs_master *m, uint64_t epoch, uint64_t after,
		     unsigned wait_ms, unsigned max, Mcrpc__WatchResponse **out)
{
	Mcrpc__WatchRequest req = MCRPC__WATCH_REQUEST__INIT;
	struct mc_rpc_client *c;
	int rc = 0;

	*out = NULL;
	if (wait_ms > WATCH_MAX_WAIT_MS)
		wait_ms = WATCH_MAX_WAIT_MS;
	req.epoch = epoch;
	req.after = after;
	req.wait_ms = wait_ms;
	req.max = max;
	if (!wait_ms) {
		rc = call(m, MCRPC__METHOD__WATCH, &req, out);
		if (!rc)
			tk_events(m, *out);
		return rc;
	}
	/* Long polls get their own pool, with a timeout that covers them. */
	pthread_mutex_lock(&m->long_lock);
	if (atomic_load(&m->watch_stopped)) {
		rc = -ECANCELED;
	} else if (!m->rpc_long) {
		rc = mc_rpc_client_create(m->addr,
					  mc_rpc_client_timeout(m->rpc) +
						  WATCH_MAX_WAIT_MS,
					  &m->rpc_long);
		if (!rc) {
			mc_rpc_client_set_busy_poll(m->rpc_long, 0);
			mc_rpc_client_set_connect_timeout(
				m->rpc_long, mc_rpc_client_timeout(m->rpc));
		}
		if (!rc && m->auth)
			mc_rpc_client_set_auth(m->rpc_long, &m->key);
	}
	c = m->rpc_long;
	pthread_mutex_unlock(&m->long_lock);
	if (rc)
		return rc;
	rc = call_on(c, MCRPC__METHOD__WATCH, &req, out);
	if (!rc)
		tk_events(m, *out);
	else if (atomic_load(&m->watch_stopped))
		rc = -ECANCELED; /* the poll was cut short on purpose */
	return rc;
}
