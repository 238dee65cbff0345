/* SPDX-License-Identifier: Apache-2.0 */
/*
 * High availability on etcd (ha.h): election, fencing, the op log and
 * the standby that follows it.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "curl_body.h"
#include "etcd_kv.h"
#include "ha_int.h"
#include "mc_auth_http.h"
#include "mc_cfg.h"
#include "mc_daemon.h"
#include "mc_log.h"
#include "mc_time.h"
#include "mooncake/mc_err.h"
#include "mst_util.h"
#include "prefault.h"

#define PART_MAX (1u << 20) /* bytes of an entry per etcd key */
#define TAIL_BATCH 256u
#define TRIM_EVERY_MS 5000u
#define DISCOVER_EVERY_MS 1000u
#define CLUSTER_MAX 200
#define TXN_OPS 120 /* etcd's default --max-txn-ops is 128 */
#define QUEUE_MAX (64u << 20) /* bytes committed, not shipped: then wait */
#define SHIP_LAZY_MS 100u /* gather entries this long when in sync */
#define PREFAULT_STEP (128u << 20) /* bytes touched per round at most */
#define PREFAULT_SLACK (64u << 20) /* grow once short by this much */
#define PREFAULT_COUNT 200000u /* objects counted per round at most */

/* One transaction of the shipper: parts of entries, each an etcd put. */
struct txn {
	struct mc_etcd_op ops[TXN_OPS];
	char keys[TXN_OPS][KEY_MAX];
	size_t n, bytes;
	uint64_t done; /* the last entry whose last part is in it, 0 none */
};

void ha_free_list(struct ship_ent *e)
{
	while (e) {
		struct ship_ent *next = e->next;

		free(e->data);
		free(e);
		e = next;
	}
}

void ha_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* While leading, no etcd call may outlast the lease: a leader cut off
 * from etcd must not sit on the master's lock past it. */
static long time_left(void *arg)
{
	struct mst_ha *ha = arg;
	uint64_t d = atomic_load(&ha->deadline), now = mst_now();

	if (!atomic_load(&ha->epoch))
		return 5000;
	return d > now ? (long)(d - now) : 0;
}

int mst_ha_open(const struct mst_ha_cfg *cfg, struct mst_ha **out, char *err,
		size_t errlen)
{
	struct mst_ha *ha;
	int rc;

	*out = NULL;
	if (!cfg->advertise || !*cfg->advertise || !cfg->lease_ttl_s) {
		snprintf(err, errlen, "HA: no RPC address to advertise");
		return -EINVAL;
	}
	if (cfg->cluster_id && strlen(cfg->cluster_id) > CLUSTER_MAX) {
		snprintf(err, errlen, "HA: cluster_id longer than %d bytes",
			 CLUSTER_MAX);
		return -EINVAL;
	}
	if (strlen(cfg->advertise) >= 200) {
		snprintf(err, errlen, "HA: RPC address too long");
		return -EINVAL;
	}
	ha = calloc(1, sizeof(*ha));
	if (!ha)
		return -ENOMEM;
	{
		pthread_mutex_init(&ha->q_mu, NULL);
		pthread_mutex_init(&ha->isr_mu, NULL);
		pthread_mutex_init(&ha->st_mu, NULL);
		ha_sbuf_init(&ha->sb);
		mc_cond_init_mono(&ha->q_cv);
		mc_cond_init_mono(&ha->done_cv);
		mc_cond_init_mono(&ha->mem_cv);
	}
	rc = mc_etcd_client_init(&ha->cli, cfg->etcd, err, errlen);
	ha->cli_ok = true;
	if (rc) {
		mst_ha_close(ha);
		return rc;
	}
	ha->cli.time_left = time_left;
	ha->cli.time_arg = ha;
	ha->ttl_s = cfg->lease_ttl_s;
	ha->poll_ms = ha->ttl_s * 1000 / 10;
	if (ha->poll_ms < 50)
		ha->poll_ms = 50;
	if (ha->poll_ms > 250)
		ha->poll_ms = 250;
	ha->argv = cfg->argv;
	ha->st_state = "starting";
	ha->pf.on = cfg->prefault;
	snprintf(ha->advertise, sizeof(ha->advertise), "%s", cfg->advertise);
	snprintf(ha->listen_host, sizeof(ha->listen_host), "%s",
		 cfg->listen_host ? cfg->listen_host : "");
	ha->listen_port = cfg->listen_port;
	ha->stage = malloc(PART_MAX + TXN_OPS);
	if (!ha->stage) {
		mst_ha_close(ha);
		return -ENOMEM;
	}
	snprintf(ha->prefix, sizeof(ha->prefix), "mooncake-store/%s/",
		 cfg->cluster_id && *cfg->cluster_id ? cfg->cluster_id :
						       "mooncake_cluster");
	snprintf(ha->view, SUB_MAX, "%smaster_view", ha->prefix);
	snprintf(ha->oplog, SUB_MAX, "%soplog/", ha->prefix);
	snprintf(ha->base_key, SUB_MAX, "%soplog_base", ha->prefix);
	snprintf(ha->admin_key, SUB_MAX, "%smaster_admin", ha->prefix);
	snprintf(ha->insync, SUB_MAX, "%sinsync", ha->prefix);
	ha->key = cfg->key;
	snprintf(ha->leaders, SUB_MAX, "%sleaders/", ha->prefix);
	snprintf(ha->standby, SUB_MAX, "%sstandby/", ha->prefix);
	snprintf(ha->me, KEY_MAX, "%s%s", ha->standby, ha->advertise);
	if (mc_etcd_prefix_end(ha->oplog, ha->oplog_end, SUB_MAX) ||
	    mc_etcd_prefix_end(ha->leaders, ha->leaders_end, SUB_MAX) ||
	    mc_etcd_prefix_end(ha->standby, ha->standby_end, SUB_MAX)) {
		snprintf(err, errlen, "HA: cluster id too long");
		mst_ha_close(ha);
		return -EINVAL;
	}
	*out = ha;
	return 0;
}

static void hold_stop(struct mst_ha *ha);

void mst_ha_close(struct mst_ha *ha)
{
	char err[256];

	if (!ha)
		return;
	hold_stop(ha);
	if (ha->shipping) {
		/* What was committed goes to the log before stepping down. */
		pthread_mutex_lock(&ha->q_mu);
		ha->ship_stop = true;
		pthread_cond_broadcast(&ha->q_cv);
		pthread_mutex_unlock(&ha->q_mu);
		pthread_join(ha->ship_thr, NULL);
	}
	ha_stream_stop(ha);
	ha_sbuf_stop(ha);
	if (ha->running) {
		atomic_store(&ha->stop, true);
		pthread_join(ha->thr, NULL);
	}
	/* Stepping down: the lease's keys go now, a standby need not wait
	 * for the TTL. */
	if (atomic_load(&ha->lease) &&
	    mc_etcd_lease_revoke(&ha->cli, atomic_load(&ha->lease), err,
				 sizeof(err)))
		mc_log_warn("master", "HA: revoking the lease: %s", err);
	if (ha->cli_ok)
		mc_etcd_client_fini(&ha->cli);
	while (ha->win_head) {
		struct ship_ent *e = ha->win_head;

		ha->win_head = e->next;
		free(e->data);
		free(e);
	}
	free(ha->stage);
	ha_sbuf_fini(&ha->sb);
	pthread_mutex_destroy(&ha->isr_mu);
	pthread_mutex_destroy(&ha->st_mu);
	pthread_cond_destroy(&ha->q_cv);
	pthread_cond_destroy(&ha->done_cv);
	pthread_cond_destroy(&ha->mem_cv);
	pthread_mutex_destroy(&ha->q_mu);
	free(ha);
}

void mst_ha_stopping(struct mst_ha *ha)
{
	if (ha)
		atomic_store(&ha->stopping, true);
}

long long mst_ha_epoch(const struct mst_ha *ha)
{
	return ha ? atomic_load(&ha->epoch) : 0;
}

void mst_ha_status(struct mst_ha *ha, struct mst_ha_status *out)
{
	pthread_mutex_lock(&ha->st_mu);
	*out = (struct mst_ha_status){
		.state = ha->st_state,
		.elected = atomic_load(&ha->epoch) != 0,
		.applied = ha->st_applied,
		.leader_epoch = ha->st_epoch,
	};
	memcpy(out->leader, ha->st_leader, sizeof(out->leader));
	pthread_mutex_unlock(&ha->st_mu);
}

/* The follow loop: what the admin pages show. state NULL: unchanged;
 * view NULL: no leader in master_view (epoch 0), else its value. */
static void set_status(struct mst_ha *ha, const char *state, uint64_t applied,
		       const struct mc_etcd_kv *view, bool view_seen)
{
	pthread_mutex_lock(&ha->st_mu);
	if (state)
		ha->st_state = state;
	ha->st_applied = applied;
	if (view_seen) {
		ha->st_epoch = view ? (uint64_t)view->create_rev : 0;
		snprintf(ha->st_leader, sizeof(ha->st_leader), "%.*s",
			 view && view->val ? (int)view->len : 0,
			 view && view->val ? view->val : "");
	}
	pthread_mutex_unlock(&ha->st_mu);
}

static void entry_key(const struct mst_ha *ha, uint64_t seq, unsigned part,
		      char *out)
{
	snprintf(out, KEY_MAX, "%s%020" PRIu64 "/%04u", ha->oplog, seq, part);
}

/* seq and part of an op log key; -EBADMSG for anything else. */
static int parse_key(const struct mst_ha *ha, const char *key, uint64_t *seq,
		     unsigned *part)
{
	size_t pl = strlen(ha->oplog);
	char *end;

	if (strncmp(key, ha->oplog, pl) || strlen(key + pl) != 25 ||
	    key[pl + 20] != '/')
		return -EBADMSG;
	*seq = strtoull(key + pl, &end, 10);
	if (end != key + pl + 20)
		return -EBADMSG;
	*part = (unsigned)strtoul(key + pl + 21, &end, 10);
	return *end ? -EBADMSG : 0;
}

/* ---- the lease ---------------------------------------------------------- */

/* Keep the lease (granting one when there is none or it expired); the
 * deadline moves to the send time plus the TTL, less a margin. */
static int keepalive(struct mst_ha *ha, char *err, size_t errlen)
{
	uint64_t t0 = mst_now();
	long long ttl = 0, id = atomic_load(&ha->lease);
	int rc;

	if (id) {
		rc = mc_etcd_lease_keepalive(&ha->cli, id, &ttl, err, errlen);
		if (rc)
			return rc;
		if (ttl <= 0) {
			snprintf(err, errlen, "lease %llx expired",
				 (unsigned long long)id);
			atomic_store(&ha->lease, 0);
			return -ETIMEDOUT;
		}
	} else {
		rc = mc_etcd_lease_grant(&ha->cli, ha->ttl_s, &id, err, errlen);
		if (rc)
			return rc;
		atomic_store(&ha->lease, id);
		if (!atomic_load(&ha->incarnation))
			atomic_store(&ha->incarnation, id);
		ttl = ha->ttl_s;
	}
	if ((unsigned long long)ttl > ha->ttl_s)
		ttl = ha->ttl_s;
	ha->ka_at = t0;
	{
		uint64_t ms = (uint64_t)ttl * 1000, margin = ms / 10;

		if (margin > 500)
			margin = 500;
		atomic_store(&ha->deadline, t0 + ms - margin);
		if (ha->until)
			atomic_store(ha->until, t0 + ms - margin);
	}
	return 0;
}

/* Renew the lease if *next is due; the next renewal a third of the lease
 * on, or 100 ms on after a failure (logged, "when" saying while what).
 * -ETIMEDOUT: the lease ended (err says so); else 0. */
static int renew_due(struct mst_ha *ha, uint64_t *next, const char *when,
		     char *err, size_t errlen)
{
	uint64_t now = mst_now();
	int rc;

	if (now < *next)
		return 0;
	rc = keepalive(ha, err, errlen);
	*next = now + (rc ? 100 : ha->ttl_s * 1000 / 3);
	if (rc == -ETIMEDOUT)
		return rc;
	/* Retried every 100 ms: said once a second. */
	if (rc && now - ha->renew_said >= 1000) {
		mc_log_warn("master", "HA: renewing the lease%s: %s", when,
			    err);
		ha->renew_said = now;
	}
	return 0;
}

/* ---- following the log -------------------------------------------------- */

struct tail {
	uint64_t seq; /* being gathered */
	unsigned parts;
	char *buf;
	size_t len, cap;
};

static int gather(struct tail *t, const struct mc_etcd_kv *kv, bool *last)
{
	size_t n;

	if (!kv->len)
		return -EBADMSG;
	n = kv->len - 1;
	if (t->len + n > t->cap) {
		size_t cap = (t->len + n) * 2;
		char *p = realloc(t->buf, cap);

		if (!p)
			return -ENOMEM;
		t->buf = p;
		t->cap = cap;
	}
	memcpy(t->buf + t->len, kv->val + 1, n);
	t->len += n;
	t->parts++;
	*last = kv->val[0] == 1;
	return 0;
}

/* The first entry the log still holds (entries below were trimmed). */
static int log_base(struct mst_ha *ha, uint64_t *base, char *err, size_t errlen)
{
	struct mc_etcd_kv kv;
	int rc = mc_etcd_get(&ha->cli, ha->base_key, &kv, err, errlen);

	*base = 1;
	if (rc == 1) {
		*base = strtoull(kv.val, NULL, 10);
		mc_etcd_kv_clear(&kv);
		rc = 0;
	}
	return rc;
}

/* Apply every complete entry after the record's; *more: a batch was
 * full. 0, -ESPIPE (the log was trimmed past the record), or a code. */
static int tail_once(struct mst_ha *ha, struct mst_db *db, bool *more,
		     char *err, size_t errlen)
{
	struct tail t = { 0 };
	struct mc_etcd_kv *kvs = NULL;
	struct mst_db_log_ref *refs = NULL;
	char from[KEY_MAX], **owned = NULL;
	size_t n = 0, nref = 0, nown = 0;
	uint64_t next = mst_db_log_seq(db) + 1, base;
	int rc;

	*more = false;
	entry_key(ha, next, 0, from);
	rc = mc_etcd_range(&ha->cli, from, ha->oplog_end, TAIL_BATCH, &kvs, &n,
			   more, NULL, err, errlen);
	if (rc)
		return rc;
	if (n == 0 || strcmp(kvs[0].key, from)) {
		/* Nothing at the next entry: was it trimmed? */
		uint64_t first = 0;
		unsigned part;

		rc = log_base(ha, &base, err, errlen);
		if (!rc && n && !parse_key(ha, kvs[0].key, &first, &part) &&
		    first > next)
			base = first > base ? first : base; /* a hole */
		if (!rc && base > next) {
			snprintf(err, errlen,
				 "the op log goes on at entry %" PRIu64
				 " but this record is at %" PRIu64,
				 base, next - 1);
			rc = -ESPIPE;
		}
		if (rc || n == 0)
			goto out;
	}
	t.seq = next;
	refs = calloc(n, sizeof(*refs));
	owned = calloc(n, sizeof(*owned));
	if (!refs || !owned) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t seq;
		unsigned part;
		bool last = false;

		rc = parse_key(ha, kvs[i].key, &seq, &part);
		if (rc || seq != t.seq || part != t.parts) {
			/* A gap or a stray key: stop before it (an unfinished
			 * entry of a leader that died is replaced by the next
			 * leader's). */
			rc = 0;
			*more = false;
			break;
		}
		if (!part && kvs[i].len && kvs[i].val[0] == 1) {
			/* A whole entry in one part: used where it is. */
			refs[nref].cs = kvs[i].val + 1;
			refs[nref++].len = kvs[i].len - 1;
			t.seq = seq + 1;
			continue;
		}
		rc = gather(&t, &kvs[i], &last);
		if (rc)
			break;
		if (!last)
			continue;
		owned[nown++] = t.buf;
		refs[nref].cs = t.buf;
		refs[nref++].len = t.len;
		t = (struct tail){ .seq = seq + 1 };
	}
	if (!rc && nref) {
		/* The batch as one sqlite transaction (and one statement
		 * preparation): a standby keeps up with a busy leader. */
		rc = mst_db_log_apply_many(db, next, refs, nref);
		if (rc) {
			snprintf(err, errlen,
				 "applying op log entry %" PRIu64 ": %s",
				 mst_db_log_seq(db) + 1, mc_strerror(rc));
			/* An entry this record cannot take: copy the
			 * leader's (the caller does). */
			rc = rc == -ENOMEM ? rc : -EBADMSG;
		}
	}
out:
	for (size_t i = 0; owned && i < nown; i++)
		free(owned[i]);
	free(owned);
	free(refs);
	free(t.buf);
	mc_etcd_kvs_free(kvs, n);
	return rc;
}

static int tail_all(struct mst_ha *ha, struct mst_db *db, char *err,
		    size_t errlen)
{
	bool more = true;
	int rc = 0;

	while (!rc && more)
		rc = tail_once(ha, db, &more, err, errlen);
	return rc;
}

static bool signalled(const sigset_t *sigs)
{
	struct timespec zero = { 0, 0 };
	int sig;

	while (sigs && (sig = sigtimedwait(sigs, NULL, &zero)) > 0)
		if (mc_daemon_signal_stops(sig))
			return true;
	return false;
}

/* Campaign once: 1 elected, 0 someone else leads, or a code. */
static int campaign(struct mst_ha *ha, char *err, size_t errlen)
{
	struct mc_etcd_cmp cmp = { .key = ha->view, .create_rev = 0 };
	struct mc_etcd_op put = { .kind = MC_ETCD_OP_PUT,
				  .key = ha->view,
				  .val = ha->advertise,
				  .len = strlen(ha->advertise),
				  .lease = atomic_load(&ha->lease) };
	long long rev = 0;
	int rc;

	if (!put.lease) /* never a master_view without a lease */
		return 0;
	rc = mc_etcd_txn(&ha->cli, &cmp, 1, &put, 1, &rev, err, errlen);
	if (rc == 1)
		atomic_store(&ha->epoch, rev);
	return rc;
}

static int put_standby(struct mst_ha *ha, uint64_t seq, char *err,
		       size_t errlen)
{
	char v[48];
	struct mc_etcd_op put = { .kind = MC_ETCD_OP_PUT,
				  .key = ha->me,
				  .val = v,
				  .lease = atomic_load(&ha->lease) };
	int rc;

	/* "<seq> <incarnation>": readers before 2026-12-05 take the number
	 * and ignore the rest. */
	put.len = (size_t)snprintf(
		v, sizeof(v), "%" PRIu64 " %llx", seq,
		(unsigned long long)atomic_load(&ha->incarnation));
	rc = mc_etcd_txn(&ha->cli, NULL, 0, &put, 1, NULL, err, errlen);
	return rc < 0 ? rc : 0;
}

static void leader_key(const struct mst_ha *ha, uint64_t epoch, char *out)
{
	snprintf(out, KEY_MAX, "%s%020" PRIu64, ha->leaders, epoch);
}

/* 1 when entry seq is whole in the log or below its base (so it was
 * shipped), 0 when not, or a code. */
static int in_log(struct mst_ha *ha, uint64_t seq, char *err, size_t errlen)
{
	struct mc_etcd_kv *kvs = NULL;
	char from[KEY_MAX], to[KEY_MAX];
	size_t n = 0;
	bool more, whole = false;
	uint64_t base;
	int rc = log_base(ha, &base, err, errlen);

	if (rc || seq < base)
		return rc ? rc : 1;
	entry_key(ha, seq, 0, from);
	entry_key(ha, seq + 1, 0, to);
	rc = mc_etcd_range(&ha->cli, from, to, 0, &kvs, &n, &more, NULL, err,
			   errlen);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		if (kvs[i].len && kvs[i].val[0] == 1)
			whole = true;
	mc_etcd_kvs_free(kvs, n);
	return whole;
}

/* The first leader's key in [from_epoch, to_epoch) (to 0: no end) into
 * *kv: 1, 0 when there is none, or a code. */
static int first_leader(struct mst_ha *ha, uint64_t from_epoch,
			uint64_t to_epoch, struct mc_etcd_kv **kv, size_t *n,
			char *err, size_t errlen)
{
	char from[KEY_MAX], to[KEY_MAX];
	bool more;
	int rc;

	*kv = NULL;
	*n = 0;
	leader_key(ha, from_epoch, from);
	if (to_epoch)
		leader_key(ha, to_epoch, to);
	rc = mc_etcd_range(&ha->cli, from, to_epoch ? to : ha->leaders_end, 1,
			   kv, n, &more, NULL, err, errlen);
	return rc ? rc : *n > 0;
}

/*
 * The key of the leader of `epoch`: "<first entry> <token>", the token a
 * random number of that leadership (written by take_over()). etcd's epochs
 * start again low when etcd is rebuilt, so an epoch alone does not name a
 * leadership; with its token it does. 1 with *tok (0: a key from before
 * tokens), 0 when there is no such key, or a code.
 */
static int leader_token(struct mst_ha *ha, uint64_t epoch, uint64_t *tok,
			char *err, size_t errlen)
{
	struct mc_etcd_kv *kvs;
	size_t n;
	int rc = first_leader(ha, epoch, epoch + 1, &kvs, &n, err, errlen);

	*tok = 0;
	if (rc == 1) {
		const char *sp = memchr(kvs[0].val, ' ', kvs[0].len);

		if (sp)
			*tok = strtoull(sp + 1, NULL, 16);
	}
	mc_etcd_kvs_free(kvs, n);
	return rc;
}

/* Whether any leader's key is there (1), none (0), or a code. */
static int any_leader(struct mst_ha *ha, char *err, size_t errlen)
{
	struct mc_etcd_kv *kvs;
	size_t n;
	int rc = first_leader(ha, 0, 0, &kvs, &n, err, errlen);

	mc_etcd_kvs_free(kvs, n);
	return rc;
}

/*
 * A record that led at epoch `led` (group commit: it may hold changes
 * committed there that never reached the log). 0: it holds none (the
 * mark is cleared; follow the log as usual); 1: not known yet, no later
 * leader has started (do not follow; campaigning is safe: take_over()
 * makes every standby copy this record); -ESPIPE: it holds changes a
 * later leader's log contradicts (copy the leader's record); or a code.
 */
static int resolve_led(struct mst_ha *ha, struct mst_db *db, uint64_t led,
		       char *err, size_t errlen)
{
	struct mc_etcd_kv *kvs;
	size_t n;
	uint64_t seq = mst_db_log_seq(db);
	int rc = first_leader(ha, led + 1, 0, &kvs, &n, err, errlen);

	if (rc <= 0)
		mc_etcd_kvs_free(kvs, n);
	if (rc < 0)
		return rc;
	if (rc) {
		/* The next leader wrote from entry `first` on: everything
		 * this record holds below it is the log's. */
		uint64_t first = strtoull(kvs[0].val, NULL, 10);

		mc_etcd_kvs_free(kvs, n);
		if (seq >= first) {
			snprintf(err, errlen,
				 "this record led (epoch %" PRIu64
				 ") up to entry %" PRIu64
				 ", but the next leader's log goes on from "
				 "%" PRIu64,
				 led, seq, first);
			return -ESPIPE;
		}
	} else {
		/* Every leader keeps its key: a log whose leaders do not
		 * include this record's epoch, though others led since etcd
		 * began, is another history (etcd was reset, or restored from
		 * a backup older than that election). Its entries are not
		 * this record's, whatever their numbers: applied on top, they
		 * would name memory this record gave to other objects. */
		uint64_t tok, mine = mst_db_meta_u64(db, "ha_led_tok");

		rc = leader_token(ha, led, &tok, err, errlen);
		if (rc == 1 && mine && tok && tok != mine)
			rc = 0; /* that epoch's leader is another's */
		if (!rc) {
			rc = any_leader(ha, err, errlen);
			rc = rc > 0 ? 2 : rc;
		}
		if (rc == 2) {
			snprintf(err, errlen,
				 "this record led (epoch %" PRIu64
				 "), but etcd's log knows no such leader: etcd "
				 "was reset or restored from an older backup, "
				 "and what this record holds past the log is "
				 "lost",
				 led);
			return -ESPIPE;
		}
		if (rc < 0)
			return rc;
		rc = in_log(ha, seq, err, errlen);
		if (rc <= 0)
			return rc < 0 ? rc : 1;
	}
	rc = mst_db_set_ha_led(db, 0);
	if (!rc)
		mc_log_notice("master",
			      "HA: this record led (epoch %" PRIu64
			      "); all its changes are in the log (entry "
			      "%" PRIu64 ")",
			      led, seq);
	return rc;
}

static int ship_list(struct mst_ha *ha, struct txn *t, struct ship_ent *e,
		     const struct ship_ent *last);

/*
 * Elected, holding entries of the last leader's stream that the log
 * lacks (some may have been acknowledged: the in-sync standbys held
 * them): they go into the log, fenced by this epoch, then into the record
 * (read back from the log like any entry), before anything else.
 */
static int adopt_stream(struct mst_ha *ha, struct mst_db *db, char *err,
			size_t errlen)
{
	uint64_t seq = mst_db_log_seq(db), epoch = 0, n = 0;
	struct ship_ent *list = ha_sbuf_take(&ha->sb, seq, &epoch), *last;
	struct mc_etcd_cmp cmp = { .key = ha->view,
				   .create_rev = atomic_load(&ha->epoch) };
	struct mc_etcd_op del = { .kind = MC_ETCD_OP_DEL,
				  .end = ha->oplog_end };
	char from[KEY_MAX];
	struct txn *t;
	int rc;

	if (!list)
		return 0;
	if (epoch != ha->isr_epoch || list->seq != seq + 1) {
		mc_log_warn("master",
			    "HA: not taking the stream's entries from "
			    "%" PRIu64 " (epoch %" PRIu64
			    "; the in-sync set's is %" PRIu64
			    ", the record is at %" PRIu64 ")",
			    list->seq, epoch, ha->isr_epoch, seq);
		ha_free_list(list);
		return 0;
	}
	for (last = list, n = 1; last->next; last = last->next)
		n++;
	/* An unfinished entry of the last leader goes first. */
	entry_key(ha, seq + 1, 0, from);
	del.key = from;
	rc = mc_etcd_txn(&ha->cli, &cmp, 1, &del, 1, NULL, err, errlen);
	t = rc == 1 ? calloc(1, sizeof(*t)) : NULL;
	if (rc == 1 && (!t || ship_list(ha, t, list, last))) {
		atomic_store(&ha->lost, false);
		snprintf(err, errlen,
			 "writing the stream's entries into the log failed");
		rc = -EAGAIN;
	} else if (rc == 0) {
		snprintf(err, errlen, "lost the election while taking over");
		rc = -EAGAIN;
	}
	free(t);
	if (rc < 0) {
		/* Kept for the next try (or for whoever wins instead). */
		ha_sbuf_restore(&ha->sb, epoch, list);
		return rc;
	}
	ha_free_list(list);
	rc = tail_all(ha, db, err, errlen);
	if (!rc && mst_db_log_seq(db) < seq + n) {
		snprintf(err, errlen,
			 "the stream's entries did not apply (record at "
			 "%" PRIu64 ")",
			 mst_db_log_seq(db));
		rc = -EAGAIN;
	}
	if (!rc)
		mc_log_notice("master",
			      "HA: wrote %" PRIu64 " entries of the last "
			      "leader's stream into the log (%" PRIu64
			      "..%" PRIu64 ")",
			      n, seq + 1, seq + n);
	return rc;
}

/* Elected: the record takes the whole log, the unfinished entry of the
 * last leader (if any) goes, and this master's standby key too; this
 * leader's first entry is noted under leaders/. A record that led before
 * with changes the log may lack (led) replaces the log: it is emptied
 * and its base set past the record, so every standby copies the record. */
static int take_over(struct mst_ha *ha, struct mst_db *db, uint64_t *led_p,
		     char *err, size_t errlen)
{
	uint64_t epoch = (uint64_t)atomic_load(&ha->epoch), next, tok = 0;
	struct mc_etcd_cmp cmp = { .key = ha->view,
				   .create_rev = (long long)epoch };
	char from[KEY_MAX], lkey[KEY_MAX], v[48], b[32];
	char isr[32];
	struct mc_etcd_op ops[5] = {
		{ .kind = MC_ETCD_OP_DEL, .end = ha->oplog_end },
		{ .kind = MC_ETCD_OP_DEL, .key = ha->me },
		{ .kind = MC_ETCD_OP_PUT, .key = lkey, .val = v },
		{ .kind = MC_ETCD_OP_PUT, .key = ha->insync, .val = isr },
		{ .kind = MC_ETCD_OP_PUT, .key = ha->base_key, .val = b },
	};
	bool led = *led_p != 0;
	int rc;

	if (led) {
		/* Once more now that no one else can be elected: a leader
		 * may have come and gone since the last look. */
		rc = resolve_led(ha, db, *led_p, err, errlen);
		if (rc == 0)
			*led_p = 0;
		led = rc == 1;
		if (rc < 0) {
			struct mc_etcd_op del = { .kind = MC_ETCD_OP_DEL,
						  .key = ha->view };
			char e2[MC_ERR_LEN];

			if (mc_etcd_txn(&ha->cli, &cmp, 1, &del, 1, NULL, e2,
					sizeof(e2)) < 0)
				mc_log_warn("master", "HA: stepping down: %s",
					    e2);
			atomic_store(&ha->epoch, 0);
			return rc == -ESPIPE ? -EAGAIN : rc;
		}
	}
	rc = tail_all(ha, db, err, errlen);
	if (!rc)
		rc = adopt_stream(ha, db, err, errlen);
	if (rc)
		return rc;
	next = mst_db_log_seq(db) + 1;
	entry_key(ha, next, 0, from);
	ops[0].key = led ? ha->oplog : from;
	leader_key(ha, epoch, lkey);
	if (getrandom(&tok, sizeof(tok), 0) != sizeof(tok))
		tok = (uint64_t)mst_now() * 2654435761u ^ (uint64_t)getpid();
	tok |= 1;
	ops[2].len = (size_t)snprintf(v, sizeof(v), "%" PRIu64 " %" PRIx64,
				      next, tok);
	ops[3].len = (size_t)snprintf(isr, sizeof(isr), "%" PRIu64 "\n", epoch);
	ops[4].len = (size_t)snprintf(b, sizeof(b), "%" PRIu64, next);
	rc = mc_etcd_txn(&ha->cli, &cmp, 1, ops, led ? 5 : 4, NULL, err,
			 errlen);
	if (rc == 0) {
		snprintf(err, errlen, "lost the election while taking over");
		return -EAGAIN;
	}
	if (rc < 0)
		return rc;
	if (led)
		mc_log_notice("master",
			      "HA: this record led before and may hold changes "
			      "the log lacks: the log now starts after it "
			      "(entry %" PRIu64 "); standbys copy the record",
			      next);
	rc = mst_db_set_ha_led(db, epoch);
	if (!rc)
		rc = mst_db_set_meta_u64(db, "ha_led_tok", tok);
	if (!rc)
		rc = mst_db_set_meta_u64(db, "ha_seen", epoch);
	if (!rc)
		rc = mst_db_set_meta_u64(db, "ha_seen_tok", tok);
	if (rc)
		snprintf(err, errlen, "marking the record as leading failed");
	return rc;
}

static size_t write_file(char *p, size_t size, size_t n, void *arg)
{
	return fwrite(p, size, n, arg);
}

/* GET url into path; 0 or a code with err. */
static int http_get_file(struct mst_ha *ha, const char *url, const char *path,
			 char *err, size_t errlen)
{
	char auth[MC_AUTH_HTTP_HDR_LEN + 32];
	struct curl_slist *hdrs = NULL;
	/* 0600 as the record it becomes (fopen's would be 0644: every key
	 * readable by other local users, for good once renamed). */
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	/* One left by an older build (0644, killed mid-download) keeps
	 * its mode through O_TRUNC. */
	FILE *f = fd >= 0 && !fchmod(fd, 0600) ? fdopen(fd, "w") : NULL;
	CURL *cu = curl_easy_init();
	long status = 0;
	CURLcode cc = CURLE_FAILED_INIT;

	if (fd >= 0 && !f)
		close(fd);

	if (f && cu) {
		if (ha->key) {
			char v[MC_AUTH_HTTP_HDR_LEN];

			mc_auth_http_sign(ha->key, "GET", "/ha/snapshot", NULL,
					  NULL, 0, (uint64_t)time(NULL), v);
			snprintf(auth, sizeof(auth), "Authorization: %s", v);
			hdrs = curl_slist_append(NULL, auth);
		}
		curl_easy_setopt(cu, CURLOPT_URL, url);
		curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, write_file);
		curl_easy_setopt(cu, CURLOPT_WRITEDATA, f);
		curl_easy_setopt(cu, CURLOPT_NOSIGNAL, 1L);
		mc_curl_cloexec(cu);
		curl_easy_setopt(cu, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
		/* A leader that stalls (stopped, cut off) is given up. */
		curl_easy_setopt(cu, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(cu, CURLOPT_LOW_SPEED_TIME, 10L);
		if (hdrs)
			curl_easy_setopt(cu, CURLOPT_HTTPHEADER, hdrs);
		cc = curl_easy_perform(cu);
		curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, &status);
	}
	if (cu)
		curl_easy_cleanup(cu);
	curl_slist_free_all(hdrs);
	if (!f || fclose(f)) {
		snprintf(err, errlen, "%.300s: %s", path, mc_strerror(-errno));
		return -errno;
	}
	if (cc != CURLE_OK || status != 200) {
		snprintf(err, errlen, "GET %.300s: %s", url,
			 cc != CURLE_OK ? curl_easy_strerror(cc) : "not 200");
		return MC_EHTTP;
	}
	return 0;
}

/* The log no longer reaches this record: replace it with a copy of the
 * leader's, then follow the log from there. */
static int copy_record(struct mst_ha *ha, struct mst_db **db,
		       const char *db_path, unsigned db_flags, char *err,
		       size_t errlen)
{
	struct mc_etcd_kv kv;
	char url[300], tmp[PATH_MAX];
	uint64_t seq = 0;
	int rc = mc_etcd_get(&ha->cli, ha->admin_key, &kv, err, errlen);

	if (rc <= 0) {
		if (!rc)
			snprintf(err, errlen,
				 "no leader to copy the record "
				 "from yet");
		return rc ? rc : -EAGAIN;
	}
	snprintf(url, sizeof(url), "http://%s/ha/snapshot", kv.val);
	mc_etcd_kv_clear(&kv);
	if (snprintf(tmp, sizeof(tmp), "%s.incoming", db_path) >=
	    (int)sizeof(tmp))
		return -ENAMETOOLONG;
	rc = http_get_file(ha, url, tmp, err, errlen);
	if (!rc)
		rc = mst_db_file_seq(tmp, &seq);
	if (rc) {
		unlink(tmp);
		return rc;
	}
	mst_db_close(*db);
	*db = NULL;
	mst_db_unlink_sides(db_path);
	mst_db_unlink_sides(tmp); /* left by reading its op log entry */
	if (rename(tmp, db_path)) {
		snprintf(err, errlen, "%.300s: %s", db_path,
			 mc_strerror(-errno));
		return -errno;
	}
	mc_log_notice("master",
		      "HA: record replaced by the leader's copy (%s) at op "
		      "log entry %" PRIu64,
		      url, seq);
	rc = mst_db_open(db_path, db_flags, db, err, errlen);
	/* The copy carries the leader's mark: this record never led. */
	if (!rc && mst_db_set_ha_led(*db, 0)) {
		snprintf(err, errlen, "%.300s: clearing the copy's mark",
			 db_path);
		return MC_EDB;
	}
	return rc;
}

int mst_ha_publish_admin(struct mst_ha *ha, const char *hostport)
{
	struct mc_etcd_cmp cmp = { .key = ha->view,
				   .create_rev = atomic_load(&ha->epoch) };
	struct mc_etcd_op put = { .kind = MC_ETCD_OP_PUT,
				  .key = ha->admin_key,
				  .val = hostport,
				  .len = strlen(hostport),
				  .lease = atomic_load(&ha->lease) };
	char err[MC_ERR_LEN] = "";
	int rc =
		mc_etcd_txn(&ha->cli, &cmp, 1, &put, 1, NULL, err, sizeof(err));

	if (rc < 0)
		mc_log_warn("master", "HA: publishing %s: %s", ha->admin_key,
			    err);
	return rc < 0 ? rc : 0;
}

/*
 * Every in-sync standby is gone with the leader. The record that led
 * (led) holds every change acknowledged through them, and campaigns a
 * lease's time after master_view went; any other master waits twice that,
 * so a former leader that comes back in time wins, and otherwise some
 * master leads, without what only the stream held. 1: campaign now.
 */
static int unclean(struct mst_ha *ha, uint64_t led, uint64_t absent_ms)
{
	if (!led && absent_ms < 2000ull * ha->ttl_s)
		return 0;
	mc_log_warn("master",
		    "HA: every in-sync standby of epoch %" PRIu64
		    " is gone%s: changes acknowledged through them but not "
		    "yet in the etcd log may be lost",
		    ha->isr_epoch,
		    led ? "" : " and the last leader did not come back");
	return 1;
}

/*
 * Elected, a master applies the log's tail (take_over), then the caller
 * loads the record before leading (mst_ha_lead): seconds at millions of
 * objects. The lease is renewed meanwhile, as lead_main renews it, or a
 * takeover longer than the TTL would lose the lead it was done for (and,
 * restarting, load again: never serving). A lease found expired is not
 * granted anew: the deadline then lies in the past and lead_main
 * restarts as a standby at once (or take_over's fenced writes fail).
 */
static void *hold_main(void *arg)
{
	struct mst_ha *ha = arg;
	/* A third of the lease after its last renewal, as lead_main does. */
	uint64_t next = ha->ka_at + ha->ttl_s * 1000 / 3;
	char err[MC_ERR_LEN] = "";

	while (!atomic_load(&ha->hold_stop)) {
		if (renew_due(ha, &next, " while taking over", err,
			      sizeof(err))) {
			mc_log_err("master",
				   "HA: renewing the lease while taking over: "
				   "%s",
				   err);
			atomic_store(&ha->deadline, 1);
			break;
		}
		ha_sleep_ms(20);
	}
	return NULL;
}

static int hold_start(struct mst_ha *ha, char *err, size_t errlen)
{
	int rc;

	atomic_store(&ha->hold_stop, false);
	rc = pthread_create(&ha->hold_thr, NULL, hold_main, ha);
	if (rc) {
		snprintf(err, errlen, "HA: starting the lease's renewal: %s",
			 mc_strerror(-rc));
		return -rc;
	}
	ha->holding = true;
	return 0;
}

static void hold_stop(struct mst_ha *ha)
{
	if (!ha->holding)
		return;
	atomic_store(&ha->hold_stop, true);
	pthread_join(ha->hold_thr, NULL);
	ha->holding = false;
}

/* Following: memory for the takeover's load of the record made ready as
 * the record grows (prefault.h). Its objects are counted PREFAULT_COUNT a
 * round whenever its size moved by a quarter since the last count, and
 * PREFAULT_STEP bytes touched a round at most (by the last count, scaled
 * by the size): a fraction of a second each, the loop's keepalives and
 * tailing go on between. */
static void prefault_step(struct mst_ha *ha, struct mst_db *db,
			  const char *db_path)
{
	struct stat st;
	uint64_t size, objects;
	size_t want, ready;
	bool capped, lacking, refused;

	if (!ha->pf.on || stat(db_path, &st))
		return;
	size = (uint64_t)st.st_size;
	if (!ha->pf.count_size && (!ha->pf.size || size > ha->pf.size / 4 * 5 ||
				   size < ha->pf.size / 4 * 3))
		ha->pf.count_size = size; /* a new count */
	if (ha->pf.count_size &&
	    !mst_db_count_objects(db, &ha->pf.count, PREFAULT_COUNT) &&
	    ha->pf.count.done) {
		ha->pf.objects = ha->pf.count.n;
		ha->pf.size = ha->pf.count_size;
		ha->pf.count_size = 0;
		mst_db_count_free(&ha->pf.count);
	}
	/* Objects now by the record's growth since the last count, while
	 * the next one goes on (a standby that follows a growing record
	 * would otherwise lag by a quarter, and wait for each count). */
	objects = ha->pf.size ? (uint64_t)((double)ha->pf.objects *
					   (double)size / (double)ha->pf.size) :
				0;
	want = mst_prefault_want(objects, size, &capped);
	/* Once a goal is reached, a new one only PREFAULT_SLACK further
	 * (not a step per page of growth); a goal is pursued to its end. */
	if (ha->pf.ready >= ha->pf.goal &&
	    (want < ha->pf.ready + PREFAULT_SLACK ||
	     (ha->pf.refused && want < ha->pf.refused + PREFAULT_SLACK)))
		return;
	if (ha->pf.ready >= ha->pf.goal || want < ha->pf.goal) {
		ha->pf.goal = want;
		ha->pf.goal_capped = capped;
	}
	want = ha->pf.goal;
	ready = mst_prefault_grow(want, PREFAULT_STEP, &refused);
	/* Short: capped by the memory available, or malloc refused more
	 * (then no more until a new goal: not a refusal every round). */
	ha->pf.refused = refused ? want : 0;
	if (refused)
		ha->pf.goal = ready;
	lacking = (ha->pf.goal_capped && ready >= want) || refused;
	/* Said once when first ready, once when memory runs short. */
	if ((ready >= want && !ha->pf.told) || (lacking && ha->pf.told < 2))
		mc_log_info("master",
			    "HA: standby: %zu MiB of memory ready for loading "
			    "the record (%" PRIu64 " objects, %" PRIu64
			    " MiB) when taking over%s",
			    ready >> 20, ha->pf.objects, ha->pf.size >> 20,
			    lacking ? ": short of memory for more" : "");
	if (lacking)
		ha->pf.told = 2;
	else if (ready >= want && !ha->pf.told)
		ha->pf.told = 1;
	ha->pf.ready = ready;
}

/*
 * The leader named in master_view is at epoch e (0: none). One older than
 * the newest this record followed or led (`seen`) means etcd's history
 * was reset or restored: this record's entries past the log are another
 * history, and applying the log on top would make a record that names
 * memory given to other objects: -ESPIPE (copy the leader's record). A
 * newer one is remembered.
 */
static int check_epoch(struct mst_ha *ha, struct mst_db *db, uint64_t e,
		       uint64_t *checked, char *err, size_t errlen)
{
	uint64_t seen, seen_tok, tok;
	int rc;

	if (!e || e == *checked)
		return 0; /* every poll: nothing read from the record */
	seen = mst_db_meta_u64(db, "ha_seen");
	seen_tok = mst_db_meta_u64(db, "ha_seen_tok");
	if (e < seen) {
		snprintf(err, errlen,
			 "the leader's epoch %" PRIu64 " is older than the "
			 "newest this record followed (%" PRIu64 "): etcd "
			 "was reset or restored from an older backup",
			 e, seen);
		return -ESPIPE;
	}
	rc = leader_token(ha, e, &tok, err, errlen);
	if (rc <= 0)
		return rc; /* not written yet: again next time */
	if (e == seen && seen_tok && tok && tok != seen_tok) {
		snprintf(err, errlen,
			 "the leader of epoch %" PRIu64 " is not the one this "
			 "record followed: etcd was rebuilt or restored",
			 e);
		return -ESPIPE;
	}
	if (mst_db_set_meta_u64(db, "ha_seen", e) ||
	    mst_db_set_meta_u64(db, "ha_seen_tok", tok))
		return MC_EDB;
	*checked = e;
	return 0;
}

int mst_ha_follow(struct mst_ha *ha, const char *db_path, unsigned db_flags,
		  const sigset_t *sigs, char *err, size_t errlen)
{
	struct mst_db *db = NULL;
	struct mc_etcd_kv view = { 0 };
	uint64_t next_ka = 0, shown = UINT64_MAX, logged = 0, led;
	long long shown_lease = 0;
	uint64_t absent_since = 0; /* mono ms master_view was first seen gone */
	/* master_view's epoch, last seen, and the last checked against the
	 * record's (check_epoch()). */
	uint64_t leader_epoch = 0, checked = 0;
	/* master_view read once at least: until then the leader's epoch is
	 * unknown and the log is not applied (it may be another history). */
	bool view_read = false;
	char e2[MC_ERR_LEN] = "";
	int rc;

	rc = mst_db_open(db_path, db_flags, &db, err, errlen);
	if (rc)
		return rc;
	led = mst_db_ha_led(db);
	rc = ha_sbuf_start(ha, err, errlen);
	if (rc) {
		mst_db_close(db);
		return rc;
	}
	ha_sbuf_set_open(&ha->sb, !led);
	mc_log_notice("master",
		      "HA: standby %s (cluster key %s, lease %u s), record "
		      "at op log entry %" PRIu64,
		      ha->advertise, ha->view, ha->ttl_s, mst_db_log_seq(db));
	set_status(ha, "standby", mst_db_log_seq(db), NULL, false);
	for (;;) {
		uint64_t now = mst_now();
		int view_rc =
			-1; /* master_view: 1 there, 0 gone, < 0 unknown */

		if (signalled(sigs)) {
			rc = -EINTR;
			break;
		}
		rc = 0;
		if (now >= next_ka) {
			rc = keepalive(ha, e2, sizeof(e2));
			next_ka =
				now + (rc ? ha->poll_ms : ha->ttl_s * 1000 / 3);
		}
		if (!rc && led) {
			rc = resolve_led(ha, db, led, e2, sizeof(e2));
			if (!rc) {
				led = 0;
				ha_sbuf_set_open(&ha->sb, true);
			}
		}
		if (!rc && !led && view_read)
			rc = check_epoch(ha, db, leader_epoch, &checked, e2,
					 sizeof(e2));
		if (!rc && !led && view_read) {
			rc = tail_all(ha, db, e2, sizeof(e2));
			ha_sbuf_trim(&ha->sb, mst_db_log_seq(db));
		}
		if (rc == -ESPIPE) {
			/* A record that led, or holds another history, loses
			 * what it holds past the log; a trimmed log loses
			 * nothing (the copy has it all). */
			mc_log(led || checked != leader_epoch ? MC_LOG_WARN :
								MC_LOG_NOTICE,
			       "master", "HA: %s: copying the leader's record",
			       e2);
			set_status(ha, "recovering", mst_db_log_seq(db), NULL,
				   false);
			rc = copy_record(ha, &db, db_path, db_flags, e2,
					 sizeof(e2));
			if (db)
				set_status(ha, "standby", mst_db_log_seq(db),
					   NULL, false);
			if (!db) {
				snprintf(err, errlen, "HA: %s", e2);
				ha_sbuf_stop(ha);
				return rc ? rc : MC_EDB;
			}
			if (!rc) {
				led = 0;
				/* The copy follows the leader's history. */
				checked = 0;
				if (mst_db_set_meta_u64(db, "ha_seen", 0))
					rc = MC_EDB;
				ha_sbuf_set_open(&ha->sb, true);
			}
		}
		if (rc == -ESPIPE || rc == MC_EDB) {
			snprintf(err, errlen, "HA: %s", e2);
			break;
		}
		if (rc == 1) /* led, not resolved: campaign, do not follow */
			rc = 0;
		else if (!rc && (shown != mst_db_log_seq(db) ||
				 shown_lease != atomic_load(&ha->lease))) {
			/* Again under a new lease too: the key is what tells
			 * others this standby (its buffer) is alive. */
			rc = put_standby(ha, mst_db_log_seq(db), e2,
					 sizeof(e2));
			if (!rc) {
				shown = mst_db_log_seq(db);
				shown_lease = atomic_load(&ha->lease);
			}
		}
		if (!rc) {
			mc_etcd_kv_clear(&view);
			rc = mc_etcd_get(&ha->cli, ha->view, &view, e2,
					 sizeof(e2));
			view_rc = rc;
			if (rc >= 0)
				view_read = true;
			if (rc == 1)
				leader_epoch = (uint64_t)view.create_rev;
			if (rc != 0)
				absent_since = 0;
			else if (!absent_since)
				absent_since = now;
			/* A record that led (unresolved) gives standbys that
			 * follow the log a lease's time to win first: if it
			 * wins, each of them must copy its record. */
			if (rc == 0 && led &&
			    now - absent_since < ha->ttl_s * 1000ull)
				rc = 0;
			else if (rc == 0) {
				/* Only a master that holds every change
				 * acknowledged through the stream may win. */
				rc = ha_isr_may_campaign(ha, e2, sizeof(e2));
				if (rc == 2)
					rc = unclean(ha, led,
						     now - absent_since);
			} else if (rc == 1 && atomic_load(&ha->epoch) &&
				   view.create_rev == atomic_load(&ha->epoch))
				rc = 2; /* ours: a takeover that failed */
			else
				rc = rc > 0 ? 0 : rc;
			if (rc == 1)
				rc = campaign(ha, e2, sizeof(e2));
			if (rc == 1 || rc == 2) {
				/* The lease renewed from here on: the log's
				 * tail, then the caller's load of the record,
				 * may outlast it. */
				set_status(ha, "leader_warmup",
					   mst_db_log_seq(db), NULL, false);
				rc = hold_start(ha, e2, sizeof(e2));
				if (!rc)
					rc = take_over(ha, db, &led, e2,
						       sizeof(e2));
				if (!rc)
					break;
				hold_stop(ha);
				set_status(ha, "standby", mst_db_log_seq(db),
					   NULL, false);
				if (rc == -ESPIPE || rc == MC_EDB) {
					snprintf(err, errlen, "HA: %s", e2);
					break;
				}
			}
		}
		if (rc && now - logged >= 5000) {
			mc_log_warn("master", "HA: etcd: %s", e2);
			logged = now;
		}
		set_status(ha, NULL, mst_db_log_seq(db),
			   view_rc == 1 ? &view : NULL, view_rc >= 0);
		prefault_step(ha, db, db_path);
		ha_sleep_ms(ha->poll_ms);
	}
	mc_etcd_kv_clear(&view);
	ha_sbuf_stop(ha);
	if (!rc)
		mc_log_notice("master",
			      "HA: elected leader (epoch %lld) at op log "
			      "entry %" PRIu64,
			      atomic_load(&ha->epoch), mst_db_log_seq(db));
	mst_db_count_free(&ha->pf.count);
	mst_db_close(db);
	if (rc)
		hold_stop(ha);
	return rc;
}

/* ---- leading ------------------------------------------------------------ */

/* Stop leading now: start again as a standby. */
static void set_lost(struct mst_ha *ha, const char *why);

static void restart(struct mst_ha *ha, const char *why)
{
	if (atomic_load(&ha->stopping)) {
		/* Shutting down: stop leading, let the shutdown finish (an
		 * execv now would swallow the SIGTERM). */
		if (!atomic_exchange(&ha->lost, true))
			mc_log_err("master", "HA: no longer the leader (%s)",
				   why);
		set_lost(ha, why);
		return;
	}
	mc_log_err("master",
		   "HA: no longer the leader (%s): restarting as a "
		   "standby",
		   why);
	if (ha->argv) {
		mc_daemon_exec_self(ha->argv);
		mc_log_err("master", "HA: execv: %s", mc_strerror(-errno));
	}
	_exit(75);
}

/* Leading no more: nothing more is committed or served, waiters are
 * answered, and lead_main restarts the process as a standby. */
static void set_lost(struct mst_ha *ha, const char *why)
{
	const char *none = NULL;

	/* The first reason stays: it is what ended the leadership. */
	atomic_compare_exchange_strong(&ha->lost_why, &none, why);
	atomic_store(&ha->lost, true);
	if (ha->until)
		atomic_store(ha->until, 1);
	pthread_mutex_lock(&ha->q_mu);
	pthread_cond_broadcast(&ha->done_cv);
	pthread_mutex_unlock(&ha->q_mu);
}

static int may_commit(void *arg)
{
	struct mst_ha *ha = arg;

	if (atomic_load(&ha->lost) || mst_now() >= atomic_load(&ha->deadline))
		return MC_STORE_UNAVAILABLE_IN_CURRENT_MODE;
	return 0;
}

/* After the local COMMIT of entry seq (under the master's lock, so in
 * sequence order): queue it for the shipper. Past QUEUE_MAX bytes not yet
 * shipped this waits, and so does the master: etcd sets the pace. */
static void append(void *arg, uint64_t seq, void *entry, size_t len)
{
	struct mst_ha *ha = arg;
	struct ship_ent *e = malloc(sizeof(*e));

	pthread_mutex_lock(&ha->q_mu);
	while (ha->q_bytes > QUEUE_MAX && !atomic_load(&ha->lost))
		pthread_cond_wait(&ha->done_cv, &ha->q_mu);
	if (!e || atomic_load(&ha->lost)) {
		/* Committed here, never in the log: this record now has a
		 * change the log lacks, and the restart reconciles it. */
		pthread_mutex_unlock(&ha->q_mu);
		if (!e)
			set_lost(ha, "out of memory for the op log");
		free(entry);
		free(e);
		return;
	}
	*e = (struct ship_ent){ .seq = seq, .len = len, .data = entry };
	if (ha->win_tail)
		ha->win_tail->next = e;
	else
		ha->win_head = e;
	ha->win_tail = e;
	if (!ha->ship_next)
		ha->ship_next = e;
	ha->q_bytes += len;
	pthread_cond_broadcast(&ha->q_cv);
	/* The committer that waits for it sends it itself when it can; the
	 * members' threads send the rest within BEAT_MS / 4. */
	if (!ha_stream_inline(ha))
		pthread_cond_broadcast(&ha->mem_cv);
	pthread_mutex_unlock(&ha->q_mu);
}

/* Under q_mu: entries in etcd that no stream call uses leave the window. */
static void prune(struct mst_ha *ha)
{
	uint64_t pin = ha_stream_pinned(ha);

	while (ha->win_head && ha->win_head->seq <= ha->shipped &&
	       ha->win_head->seq < pin) {
		struct ship_ent *e = ha->win_head;

		ha->win_head = e->next;
		if (!ha->win_head)
			ha->win_tail = NULL;
		if (ha->find_hint == e)
			ha->find_hint = NULL;
		ha->q_bytes -= e->len;
		free(e->data);
		free(e);
	}
	pthread_cond_broadcast(&ha->done_cv);
}

static int wait_shipped(void *arg, uint64_t seq)
{
	struct mst_ha *ha = arg;
	int rc;

	pthread_mutex_lock(&ha->q_mu);
	while (ha->shipped < seq && !ha_stream_acked(ha, seq) &&
	       !atomic_load(&ha->lost)) {
		struct timespec ts = mc_mono_deadline(100);

		/* No hand-off to a member's thread and back when this
		 * thread can make the call (q_mu released meanwhile). */
		if (ha_stream_send(ha, seq))
			continue;
		(void)pthread_cond_timedwait(&ha->done_cv, &ha->q_mu, &ts);
	}
	rc = ha->shipped >= seq || ha_stream_acked(ha, seq) ?
		     0 :
		     MC_STORE_UNAVAILABLE_IN_CURRENT_MODE;
	pthread_mutex_unlock(&ha->q_mu);
	return rc;
}

/* The entries up to seq are in the etcd log itself (a copy of the record
 * for a standby must never hold a change the log may still lose). */
static int wait_logged(void *arg, uint64_t seq)
{
	struct mst_ha *ha = arg;
	int rc;

	pthread_mutex_lock(&ha->q_mu);
	while (ha->shipped < seq && !atomic_load(&ha->lost))
		pthread_cond_wait(&ha->done_cv, &ha->q_mu);
	rc = ha->shipped >= seq ? 0 : MC_STORE_UNAVAILABLE_IN_CURRENT_MODE;
	pthread_mutex_unlock(&ha->q_mu);
	return rc;
}

static const struct mst_db_log_ops log_ops = {
	.may_commit = may_commit,
	.append = append,
	.wait = wait_shipped,
	.wait_logged = wait_logged,
};

/* Write t, fenced by master_view's create revision, retrying etcd errors
 * until the lease's deadline. 0, or -1 with the leadership lost. */
static int send_txn(struct mst_ha *ha, struct txn *t)
{
	struct mc_etcd_cmp cmp = { .key = ha->view,
				   .create_rev = atomic_load(&ha->epoch) };
	char err[MC_ERR_LEN] = "";
	uint64_t logged = 0;

	for (;;) {
		int rc;

		if (atomic_load(&ha->lost))
			return -1;
		rc = mc_etcd_txn(&ha->cli, &cmp, 1, t->ops, t->n, NULL, err,
				 sizeof(err));
		if (rc == 1)
			break;
		if (rc == 0) {
			mc_log_err("master",
				   "HA: op log write refused: master_view is "
				   "no longer ours");
			set_lost(ha, "etcd refused the op log's write: "
				     "master_view is no longer ours");
			return -1;
		}
		if (mst_now() >= atomic_load(&ha->deadline)) {
			mc_log_err("master", "HA: op log write: %s", err);
			set_lost(ha, "the op log could not be written to etcd "
				     "within the lease");
			return -1;
		}
		if (mst_now() - logged >= 1000) {
			mc_log_warn("master", "HA: op log write (retrying): %s",
				    err);
			logged = mst_now();
		}
		ha_sleep_ms(20);
	}
	if (t->done) {
		pthread_mutex_lock(&ha->q_mu);
		ha->shipped = t->done;
		pthread_cond_broadcast(&ha->done_cv);
		pthread_mutex_unlock(&ha->q_mu);
	}
	t->n = t->bytes = 0;
	t->done = 0;
	return 0;
}

/* Ship a list of entries in as few transactions as fit: at most TXN_OPS
 * parts and PART_MAX bytes of values each. 0 or -1 (lost). */
static int ship_list(struct mst_ha *ha, struct txn *t, struct ship_ent *e,
		     const struct ship_ent *last)
{
	for (; e; e = e == last ? NULL : e->next) {
		size_t off = 0;
		unsigned part = 0;

		do {
			size_t n = e->len - off < PART_MAX ? e->len - off :
							     PART_MAX;
			struct mc_etcd_op *op;
			char *v;

			if (t->n == TXN_OPS ||
			    (t->n && t->bytes + n + 1 > PART_MAX + TXN_OPS))
				if (send_txn(ha, t))
					return -1;
			op = &t->ops[t->n];
			v = ha->stage + t->bytes;
			v[0] = off + n == e->len ? 1 : 0;
			memcpy(v + 1, (const char *)e->data + off, n);
			entry_key(ha, e->seq, part++, t->keys[t->n]);
			*op = (struct mc_etcd_op){ .kind = MC_ETCD_OP_PUT,
						   .key = t->keys[t->n],
						   .val = v,
						   .len = n + 1 };
			t->n++;
			t->bytes += n + 1;
			off += n;
			if (off == e->len)
				t->done = e->seq;
		} while (off < e->len);
	}
	return t->n ? send_txn(ha, t) : 0;
}

/* The shipper: whatever is committed goes out together; commits made
 * while one transaction is in flight go in the next. */
static void *ship_main(void *arg)
{
	struct mst_ha *ha = arg;
	struct txn *t = calloc(1, sizeof(*t));

	if (!t) {
		set_lost(ha, "out of memory for the op log");
		return NULL;
	}
	pthread_mutex_lock(&ha->q_mu);
	for (;;) {
		struct ship_ent *first, *last;
		int rc;

		while (!ha->ship_next && !ha->ship_stop &&
		       !atomic_load(&ha->lost))
			pthread_cond_wait(&ha->q_cv, &ha->q_mu);
		if (atomic_load(&ha->lost) || !ha->ship_next)
			break; /* lost, or stopping with nothing left */
		if (!ha->ship_stop && ha_stream_healthy(ha)) {
			/* Changes are acknowledged through the stream: no
			 * hurry, so fewer and bigger etcd writes. */
			pthread_mutex_unlock(&ha->q_mu);
			ha_sleep_ms(SHIP_LAZY_MS);
			pthread_mutex_lock(&ha->q_mu);
		}
		/* Entries from ship_next on stay in the window (and are not
		 * changed) until shipped is past them. */
		first = ha->ship_next;
		last = ha->win_tail;
		pthread_mutex_unlock(&ha->q_mu);
		rc = ship_list(ha, t, first, last);
		pthread_mutex_lock(&ha->q_mu);
		if (rc)
			break;
		ha->ship_next = last->next;
		prune(ha);
	}
	pthread_mutex_unlock(&ha->q_mu);
	free(t);
	return NULL;
}

/* Trim the log below the lowest entry a live standby still needs. */
static void trim(struct mst_ha *ha)
{
	struct mc_etcd_kv *kvs = NULL;
	size_t n = 0;
	bool more;
	char err[MC_ERR_LEN] = "", to[KEY_MAX], v[32];
	uint64_t low = UINT64_MAX, base = 1;
	int rc = mc_etcd_range(&ha->cli, ha->standby, ha->standby_end, 0, &kvs,
			       &n, &more, NULL, err, sizeof(err));

	if (rc)
		return;
	for (size_t i = 0; i < n; i++) {
		uint64_t s = strtoull(kvs[i].val, NULL, 10);

		if (s < low)
			low = s;
	}
	mc_etcd_kvs_free(kvs, n);
	/* With no standby the log keeps everything: one may come later
	 * with an empty record and needs it all (until snapshots). */
	if (low == UINT64_MAX || log_base(ha, &base, err, sizeof(err)) ||
	    low + 1 <= base)
		return;
	{
		struct mc_etcd_cmp cmp = {
			.key = ha->view, .create_rev = atomic_load(&ha->epoch)
		};
		struct mc_etcd_op ops[2] = {
			{ .kind = MC_ETCD_OP_DEL, .key = ha->oplog, .end = to },
			{ .kind = MC_ETCD_OP_PUT,
			  .key = ha->base_key,
			  .val = v },
		};

		entry_key(ha, low + 1, 0, to);
		ops[1].len =
			(size_t)snprintf(v, sizeof(v), "%" PRIu64, low + 1);
		if (mc_etcd_txn(&ha->cli, &cmp, 1, ops, 2, NULL, err,
				sizeof(err)) == 1)
			mc_log_debug("master",
				     "HA: op log trimmed below %" PRIu64,
				     low + 1);
	}
}

static void *lead_main(void *arg)
{
	struct mst_ha *ha = arg;
	uint64_t next_ka = mst_now() + ha->ttl_s * 1000 / 3, next_trim = 0;
	uint64_t next_discover = 0;
	char err[MC_ERR_LEN] = "";

	while (!atomic_load(&ha->stop)) {
		uint64_t now = mst_now();

		if (atomic_load(&ha->lost)) {
			const char *why = atomic_load(&ha->lost_why);

			restart(ha, why ? why :
					  "the op log refused a change or the "
					  "record fell behind it");
		}
		if (renew_due(ha, &next_ka, "", err, sizeof(err)))
			restart(ha, err);
		if (mst_now() >= atomic_load(&ha->deadline))
			restart(ha, "the lease could not be renewed within its "
				    "TTL");
		if (now >= next_trim) {
			trim(ha);
			next_trim = now + TRIM_EVERY_MS;
		}
		if (now >= next_discover) {
			ha_stream_discover(ha);
			next_discover = now + DISCOVER_EVERY_MS;
		}
		ha_sleep_ms(50);
	}
	return NULL;
}

int mst_ha_lead(struct mst_ha *ha, struct mst_db *db, _Atomic uint64_t *until)
{
	int rc;

	hold_stop(ha); /* lead_main renews the lease from here on */
	/* The lease ran out during the takeover (a load longer than it
	 * whose renewal failed, a process stopped meanwhile): another master
	 * may lead by now, so this one serves nothing, not even for the
	 * moment lead_main would take to notice. */
	if (mst_now() >= atomic_load(&ha->deadline)) {
		restart(ha, "the lease ran out while taking over");
		return -ETIMEDOUT; /* shutting down: no restart */
	}
	ha->db = db;
	ha->until = until;
	ha->shipped = mst_db_log_seq(db);
	atomic_store(until, atomic_load(&ha->deadline));
	rc = -pthread_create(&ha->ship_thr, NULL, ship_main, ha);
	ha->shipping = !rc;
	if (!rc)
		rc = -pthread_create(&ha->thr, NULL, lead_main, ha);
	ha->running = !rc;
	if (!rc)
		mst_db_set_log(db, &log_ops, ha);
	return rc;
}
