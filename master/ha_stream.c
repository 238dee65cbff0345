/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The leader's stream of entries to its standbys, and the in-sync set
 * (ha_int.h; docs/design.md, "Entries straight to standbys").
 *
 * One thread per standby sends the window's entries in HaAppend calls
 * and notes what the standby holds. A standby that answers is put in the
 * in-sync key (P insync, written fenced by the epoch, no lease: it must
 * outlive the leader); one that fails is taken out. A change is
 * acknowledged once it is in etcd or once every standby the key may name
 * holds it (and the key names one): whoever is elected next is one of
 * them (ha_isr_may_campaign) and writes what it holds into the log first.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcd_kv.h"
#include "ha_int.h"
#include "mc_cfg.h"
#include "mc_log.h"
#include "mc_rpc.h"
#include "mc_rpc_client.h"
#include "mc_time.h"
#include "mooncake/mc_err.h"
#include "mst_util.h"

#define CALL_MS 1000u /* an HaAppend's timeout */
#define BEAT_MS 1000u /* an empty HaAppend when idle this long */
#define CALL_BYTES (16u << 20) /* entries per call (one may be bigger) */
#define ENTRY_MAX (56u << 20) /* bigger entries reach standbys by etcd */
#define CALL_ENTRIES 1024u
#define INLINE_ENTRIES 64u /* entries per call a waiter makes */
#define OUT_MS 2000u /* failing this long: out of the in-sync set */

/* ---- the in-sync key ---------------------------------------------------- */

int ha_isr_parse(const char *val, size_t len, struct ha_isr *out)
{
	char buf[MEMBERS_MAX * 240 + 64], *line, *save = NULL;
	bool head = true;

	memset(out, 0, sizeof(*out));
	if (len >= sizeof(buf))
		return -EBADMSG;
	memcpy(buf, val, len);
	buf[len] = '\0';
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sp, *end;

		if (head) {
			out->epoch = strtoull(line, &end, 10);
			if (*end || end == line)
				return -EBADMSG;
			head = false;
			continue;
		}
		sp = strchr(line, ' ');
		if (!sp || out->n == MEMBERS_MAX ||
		    (size_t)(sp - line) >= sizeof(out->m[0].addr) || sp == line)
			return -EBADMSG;
		memcpy(out->m[out->n].addr, line, (size_t)(sp - line));
		out->m[out->n].addr[sp - line] = '\0';
		out->m[out->n].inc = strtoll(sp + 1, &end, 16);
		if (*end || end == sp + 1)
			return -EBADMSG;
		out->n++;
	}
	return head ? -EBADMSG : 0;
}

/* Write the set of members that want in (serialized by isr_mu). Before
 * the write every member it names is waited for; after a successful one
 * exactly those are; after a failure none is sure. */
static void isr_publish(struct mst_ha *ha)
{
	struct mc_etcd_cmp cmp = { .key = ha->view,
				   .create_rev = atomic_load(&ha->epoch) };
	char v[MEMBERS_MAX * 240 + 64], err[MC_ERR_LEN] = "";
	struct mc_etcd_op put = { .kind = MC_ETCD_OP_PUT,
				  .key = ha->insync,
				  .val = v };
	bool in[MEMBERS_MAX] = { false };
	long long inc[MEMBERS_MAX] = { 0 };
	size_t len;
	int rc;

	pthread_mutex_lock(&ha->isr_mu);
	len = (size_t)snprintf(v, sizeof(v), "%lld\n",
			       (long long)atomic_load(&ha->epoch));
	pthread_mutex_lock(&ha->q_mu);
	for (size_t i = 0; i < ha->n_members; i++) {
		struct ha_member *m = ha->members[i];

		in[i] = m->want && m->inc;
		inc[i] = m->inc;
		if (!in[i])
			continue;
		m->req = true;
		len += (size_t)snprintf(v + len, sizeof(v) - len, "%s %llx\n",
					m->addr, (unsigned long long)m->inc);
	}
	pthread_mutex_unlock(&ha->q_mu);
	put.len = len;
	rc = mc_etcd_txn(&ha->cli, &cmp, 1, &put, 1, NULL, err, sizeof(err));
	pthread_mutex_lock(&ha->q_mu);
	for (size_t i = 0; i < ha->n_members; i++) {
		struct ha_member *m = ha->members[i];

		if (rc == 1) {
			m->sure = in[i] && m->inc == inc[i];
			m->req = in[i] || (m->want && m->inc);
		} else {
			m->sure = false;
		}
	}
	pthread_cond_broadcast(&ha->done_cv);
	pthread_mutex_unlock(&ha->q_mu);
	pthread_mutex_unlock(&ha->isr_mu);
	if (rc < 0)
		mc_log_warn("master", "HA: writing the in-sync set: %s", err);
}

bool ha_stream_acked(struct mst_ha *ha, uint64_t seq)
{
	bool any = false;

	for (size_t i = 0; i < ha->n_members; i++) {
		const struct ha_member *m = ha->members[i];

		if (m->req && m->held < seq)
			return false;
		any |= m->sure;
	}
	return any && mst_now() < atomic_load(&ha->deadline);
}

bool ha_stream_healthy(const struct mst_ha *ha)
{
	bool any = false;

	for (size_t i = 0; i < ha->n_members; i++) {
		const struct ha_member *m = ha->members[i];

		if (m->req && (m->fail_ms || !m->sure))
			return false;
		any |= m->sure;
	}
	return any;
}

uint64_t ha_stream_pinned(const struct mst_ha *ha)
{
	uint64_t low = UINT64_MAX;

	for (size_t i = 0; i < ha->n_members; i++)
		if (ha->members[i]->pin && ha->members[i]->pin < low)
			low = ha->members[i]->pin;
	return low;
}

/* ---- one member --------------------------------------------------------- */

/* Under q_mu: entry seq in the window, or NULL. From where the last
 * look-up ended when that is not past seq: calls move forward, so this
 * costs a step or two instead of a walk over the window. */
static struct ship_ent *find(struct mst_ha *ha, uint64_t seq)
{
	struct ship_ent *e = ha->find_hint;

	if (!e || e->seq > seq)
		e = ha->win_head;
	for (; e; e = e->next)
		if (e->seq >= seq) {
			ha->find_hint = e;
			return e->seq == seq ? e : NULL;
		}
	return NULL;
}

static bool quitting(struct mst_ha *ha)
{
	return ha->ship_stop || atomic_load(&ha->lost);
}

/*
 * Under q_mu: the call to make now into q (entries pointing into the
 * window, pinned), or false to wait. A member starting over (next 0)
 * gets every entry not yet in etcd.
 */
static bool next_call(struct ha_member *m, Mcrpc__HaAppendRequest *q,
		      ProtobufCBinaryData *bins, size_t max, uint64_t beat_due)
{
	struct mst_ha *ha = m->ha;
	/* Entries in etcd need not be sent (they may have left the window). */
	uint64_t from = m->next > ha->shipped ? m->next : ha->shipped + 1;
	struct ship_ent *e = find(ha, from);
	size_t bytes = 0;

	q->epoch = (uint64_t)atomic_load(&ha->epoch);
	q->first = from;
	q->logged = ha->shipped;
	q->reset = !m->next;
	q->n_entries = 0;
	q->entries = bins;
	if (e && e->len > ENTRY_MAX) {
		/* Too big for a call: once in etcd, start over past it. */
		m->next = 0;
		return false;
	}
	for (; e && q->n_entries < max; e = e->next) {
		if (q->n_entries && bytes + e->len > CALL_BYTES)
			break;
		if (e->len > ENTRY_MAX)
			break;
		bins[q->n_entries].data = e->data;
		bins[q->n_entries].len = e->len;
		q->n_entries++;
		bytes += e->len;
	}
	if (!q->n_entries && !q->reset && mst_now() < beat_due)
		return false;
	m->pin = q->n_entries ? from : 0;
	return true;
}

/* After a call: note what the member holds; true when its membership
 * must be written. */
static bool after_call(struct ha_member *m, int rc,
		       const Mcrpc__HaAppendResponse *r, uint64_t sent_to)
{
	struct mst_ha *ha = m->ha;
	bool ok = !rc && r->code == 0 && r->held >= sent_to - 1 && r->lease;
	uint64_t now = mst_now();

	m->pin = 0;
	if (ok) {
		if (m->inc != r->lease) {
			/* Another incarnation (or lease): list it anew. */
			m->inc = r->lease;
			m->sure = false;
		}
		m->held = r->held;
		m->next = r->held + 1;
		m->fail_ms = 0;
		if (!m->want)
			mc_log_notice("master",
				      "HA: standby %s is in sync (entry "
				      "%" PRIu64 ")",
				      m->addr, m->held);
		m->want = true;
		pthread_cond_broadcast(&ha->done_cv);
		return !m->sure;
	}
	m->next = 0;
	if (!m->fail_ms)
		m->fail_ms = now;
	/* Never in sync: say why once (a token it does not share, ...),
	 * or the operator sees only "streaming entries to standby". */
	if (!m->want && !m->said && now - m->fail_ms >= OUT_MS) {
		mc_log_warn("master",
			    "HA: standby %s does not take the stream (%s): "
			    "it follows the etcd log only",
			    m->addr,
			    rc ? mc_strerror(rc) : mc_strerror(r->code));
		m->said = true;
	}
	if (m->want && now - m->fail_ms >= OUT_MS) {
		mc_log_warn("master",
			    "HA: standby %s out of sync (%s): acknowledging "
			    "through etcd without it",
			    m->addr,
			    rc ? mc_strerror(rc) : mc_strerror(r->code));
		m->want = false;
	}
	return m->req && !m->want;
}

/* Under q_mu (released meanwhile): make the call q that next_call()
 * prepared and note its answer. */
static void call(struct ha_member *m, Mcrpc__HaAppendRequest *q)
{
	struct mst_ha *ha = m->ha;
	Mcrpc__HaAppendResponse *r = NULL;
	uint64_t sent_to = q->first + q->n_entries;
	bool publish;
	int rc;

	m->busy = true;
	pthread_mutex_unlock(&ha->q_mu);
	rc = mc_rpc_call(m->cli, MCRPC__METHOD__HA_APPEND, &q->base,
			 (ProtobufCMessage **)&r);
	pthread_mutex_lock(&ha->q_mu);
	publish = after_call(m, rc, r, sent_to);
	if (r)
		protobuf_c_message_free_unpacked(&r->base, NULL);
	m->busy = false;
	/* Waiters may send next (the member's thread, had it waited for
	 * this call, looks again within BEAT_MS / 4: no wake-up per call). */
	pthread_cond_broadcast(&ha->done_cv);
	if (publish) {
		pthread_mutex_unlock(&ha->q_mu);
		isr_publish(ha);
		pthread_mutex_lock(&ha->q_mu);
	}
}

/* Under q_mu: the one member acknowledgements wait for, when it is in
 * sync and the stream is its usual self; NULL otherwise (several: their
 * threads send to them at once). */
static struct ha_member *inline_member(struct mst_ha *ha)
{
	struct ha_member *one = NULL;

	for (size_t i = 0; i < ha->n_members; i++) {
		struct ha_member *m = ha->members[i];

		if (!m->req && !m->want)
			continue;
		if (one)
			return NULL;
		one = m;
	}
	return one && one->want && one->next && !one->fail_ms ? one : NULL;
}

bool ha_stream_inline(struct mst_ha *ha)
{
	return inline_member(ha) != NULL;
}

bool ha_stream_send(struct mst_ha *ha, uint64_t seq)
{
	Mcrpc__HaAppendRequest q = MCRPC__HA_APPEND_REQUEST__INIT;
	ProtobufCBinaryData bins[INLINE_ENTRIES];
	struct ha_member *m = inline_member(ha);

	if (!m || m->busy || m->held >= seq || quitting(ha) ||
	    !next_call(m, &q, bins, INLINE_ENTRIES, UINT64_MAX))
		return false;
	call(m, &q);
	return true;
}

static void *member_main(void *arg)
{
	struct ha_member *m = arg;
	struct mst_ha *ha = m->ha;
	ProtobufCBinaryData *bins = calloc(CALL_ENTRIES, sizeof(*bins));
	uint64_t beat_due = 0;

	if (!bins)
		return NULL;
	pthread_mutex_lock(&ha->q_mu);
	while (!quitting(ha) && !(m->gone && !m->req && !m->want)) {
		Mcrpc__HaAppendRequest q = MCRPC__HA_APPEND_REQUEST__INIT;

		if (m->busy ||
		    !next_call(m, &q, bins, CALL_ENTRIES, beat_due)) {
			struct timespec ts = mc_mono_deadline(BEAT_MS / 4);

			(void)pthread_cond_timedwait(&ha->mem_cv, &ha->q_mu,
						     &ts);
			continue;
		}
		call(m, &q);
		beat_due = mst_now() + BEAT_MS;
		if (m->next == 0 && !quitting(ha)) {
			/* Failed: try again in a while (a dead standby costs
			 * a connect every 200 ms). */
			struct timespec ts = mc_mono_deadline(200);

			(void)pthread_cond_timedwait(&ha->done_cv, &ha->q_mu,
						     &ts);
		}
	}
	m->done = true;
	pthread_mutex_unlock(&ha->q_mu);
	free(bins);
	return NULL;
}

static void add_member(struct mst_ha *ha, const char *addr)
{
	struct ha_member *m;

	if (ha->n_members == MEMBERS_MAX || strlen(addr) >= sizeof(m->addr) ||
	    !strcmp(addr, ha->advertise))
		return;
	for (size_t i = 0; i < ha->n_members; i++)
		if (!strcmp(ha->members[i]->addr, addr))
			return;
	m = calloc(1, sizeof(*m));
	if (!m || mc_rpc_client_create(addr, CALL_MS, &m->cli)) {
		free(m);
		return;
	}
	if (ha->key)
		mc_rpc_client_set_auth(m->cli, ha->key);
	/* No spinning for answers: the standby may need this very CPU. */
	mc_rpc_client_set_busy_poll(m->cli, 0);
	m->ha = ha;
	snprintf(m->addr, sizeof(m->addr), "%s", addr);
	pthread_mutex_lock(&ha->q_mu);
	ha->members[ha->n_members++] = m;
	pthread_mutex_unlock(&ha->q_mu);
	m->running = !pthread_create(&m->thr, NULL, member_main, m);
	mc_log_info("master", "HA: streaming entries to standby %s", addr);
}

static void free_member(struct ha_member *m)
{
	if (m->running)
		pthread_join(m->thr, NULL);
	mc_rpc_client_destroy(m->cli);
	free(m);
}

void ha_stream_discover(struct mst_ha *ha)
{
	struct mc_etcd_kv *kvs = NULL;
	size_t n = 0, pl = strlen(ha->standby), k = 0;
	bool more;
	char err[MC_ERR_LEN] = "";

	if (mc_etcd_range(&ha->cli, ha->standby, ha->standby_end, 0, &kvs, &n,
			  &more, NULL, err, sizeof(err)))
		return;
	for (size_t i = 0; i < n; i++)
		if (strlen(kvs[i].key) > pl)
			add_member(ha, kvs[i].key + pl);
	/* Standbys gone for good (their key expired) leave once out of the
	 * set; one that comes back is added again. */
	pthread_mutex_lock(&ha->isr_mu);
	pthread_mutex_lock(&ha->q_mu);
	for (size_t i = 0; i < ha->n_members; i++) {
		struct ha_member *m = ha->members[i];
		bool seen = false;

		for (size_t j = 0; j < n && !seen; j++)
			seen = strlen(kvs[j].key) > pl &&
			       !strcmp(kvs[j].key + pl, m->addr);
		m->gone = !seen && !more;
		if (m->done) {
			mc_log_info("master", "HA: no longer streaming to %s",
				    m->addr);
			free_member(m); /* its thread has ended */
			continue;
		}
		ha->members[k++] = m;
	}
	ha->n_members = k;
	pthread_mutex_unlock(&ha->q_mu);
	pthread_mutex_unlock(&ha->isr_mu);
	mc_etcd_kvs_free(kvs, n);
}

void ha_stream_stop(struct mst_ha *ha)
{
	pthread_mutex_lock(&ha->q_mu);
	ha->ship_stop = true;
	pthread_cond_broadcast(&ha->q_cv);
	pthread_cond_broadcast(&ha->mem_cv);
	pthread_cond_broadcast(&ha->done_cv);
	pthread_mutex_unlock(&ha->q_mu);
	for (size_t i = 0; i < ha->n_members; i++)
		free_member(ha->members[i]);
	ha->n_members = 0;
}

/* ---- campaigning -------------------------------------------------------- */

bool ha_standby_matches(const struct mc_etcd_kv *kv, long long named)
{
	const char *sp = kv->val ? memchr(kv->val, ' ', kv->len) : NULL;
	char *end;

	if (!sp)
		return kv->lease == named;
	return strtoll(sp + 1, &end, 16) == named && end != sp + 1;
}

int ha_isr_may_campaign(struct mst_ha *ha, char *err, size_t errlen)
{
	struct mc_etcd_kv kv = { 0 };
	struct ha_isr isr;
	long long me = atomic_load(&ha->incarnation);
	int rc = mc_etcd_get(&ha->cli, ha->insync, &kv, err, errlen);

	ha->isr_epoch = 0;
	if (rc <= 0)
		return rc ? rc : 1; /* no key: no leader streamed */
	rc = ha_isr_parse(kv.val, kv.len, &isr);
	mc_etcd_kv_clear(&kv);
	if (rc) {
		snprintf(err, errlen, "%s does not parse", ha->insync);
		return rc;
	}
	ha->isr_epoch = isr.epoch;
	if (!isr.n)
		return 1;
	for (size_t i = 0; i < isr.n; i++)
		if (!strcmp(isr.m[i].addr, ha->advertise) && me &&
		    isr.m[i].inc == me)
			return 1;
	for (size_t i = 0; i < isr.n; i++) {
		char key[KEY_MAX];

		snprintf(key, sizeof(key), "%s%s", ha->standby, isr.m[i].addr);
		rc = mc_etcd_get(&ha->cli, key, &kv, err, errlen);
		if (rc < 0)
			return rc;
		if (rc == 1 && ha_standby_matches(&kv, isr.m[i].inc)) {
			mc_etcd_kv_clear(&kv);
			return 0; /* it holds what was acknowledged: it wins */
		}
		mc_etcd_kv_clear(&kv);
	}
	return 2; /* every in-sync standby is gone */
}
