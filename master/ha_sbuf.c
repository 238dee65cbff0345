/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A standby's side of the leader's stream (ha_int.h): HaAppend calls
 * land in a buffer of the entries the record does not have yet. The
 * buffer is what lets the leader acknowledge a change once its in-sync
 * standbys hold it, before etcd does: on taking over, a standby writes
 * what it holds beyond the etcd log into the log (ha.c, take_over).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ha_int.h"
#include "mc_cfg.h"
#include "mc_crc32c.h"
#include "mc_le.h"
#include "mc_log.h"
#include "mc_parse.h"
#include "mc_rpc.h"
#include "mc_rpc_server.h"
#include "mooncake/mc_err.h"

#define SBUF_MAX (256u << 20) /* bytes held: beyond, refuse (-1011) */

void ha_sbuf_init(struct ha_sbuf *sb)
{
	memset(sb, 0, sizeof(*sb));
	pthread_mutex_init(&sb->mu, NULL);
}

static void drop_front(struct ha_sbuf *sb, size_t k)
{
	for (size_t i = 0; i < k; i++) {
		sb->bytes -= sb->ent[i].len;
		free(sb->ent[i].data);
	}
	if (sb->n > k)
		memmove(sb->ent, sb->ent + k, (sb->n - k) * sizeof(sb->ent[0]));
	sb->n -= k;
	sb->first += k;
}

void ha_sbuf_fini(struct ha_sbuf *sb)
{
	drop_front(sb, sb->n);
	free(sb->ent);
	sb->ent = NULL;
	sb->cap = 0;
	pthread_mutex_destroy(&sb->mu);
}

void ha_sbuf_set_open(struct ha_sbuf *sb, bool open)
{
	pthread_mutex_lock(&sb->mu);
	sb->open = open;
	pthread_mutex_unlock(&sb->mu);
}

/* Entries up to seq are elsewhere (the record, the etcd log). */
static void trim_locked(struct ha_sbuf *sb, uint64_t seq)
{
	if (seq >= sb->first) {
		uint64_t k = seq - sb->first + 1;

		drop_front(sb, k < sb->n ? (size_t)k : sb->n);
		if (sb->first <= seq)
			sb->first = seq + 1;
	}
}

void ha_sbuf_trim(struct ha_sbuf *sb, uint64_t seq)
{
	pthread_mutex_lock(&sb->mu);
	trim_locked(sb, seq);
	pthread_mutex_unlock(&sb->mu);
}

static bool entry_ok(const struct ha_sbuf_ent *e)
{
	const uint8_t *p = e->data;

	return e->len >= 4 &&
	       mc_crc32c(0, p, e->len - 4) == mc_get_le32(p + e->len - 4);
}

int ha_sbuf_append(struct ha_sbuf *sb, uint64_t epoch, uint64_t first,
		   uint64_t logged, bool reset, const struct ha_sbuf_ent *ents,
		   size_t n, uint64_t *held)
{
	size_t add = 0, skip;

	if (!epoch || !first || first + n < first)
		return MC_STORE_INVALID_PARAMS;
	for (size_t i = 0; i < n; i++) {
		if (!entry_ok(&ents[i]))
			return MC_STORE_INVALID_PARAMS;
		add += ents[i].len;
	}
	if (!sb->open || epoch < sb->epoch)
		return MC_STORE_UNAVAILABLE_IN_CURRENT_MODE;
	if (reset) {
		/* The stream starts over: everything before first is in the
		 * etcd log, so nothing held before it is needed. */
		if (first > logged + 1)
			return MC_STORE_INVALID_PARAMS;
		drop_front(sb, sb->n);
		sb->epoch = epoch;
		sb->first = first;
	} else if (epoch != sb->epoch) {
		return MC_STORE_INVALID_PARAMS; /* another leader: start over */
	}
	trim_locked(sb, logged);
	if (first > sb->first + sb->n)
		return MC_STORE_INVALID_PARAMS; /* a gap: start over */
	if (sb->bytes + add > SBUF_MAX)
		return MC_STORE_UNAVAILABLE_IN_CURRENT_MODE;
	/* Entries already held (a call sent again) are skipped. */
	skip = first + n <= sb->first + sb->n ? n :
	       first < sb->first + sb->n ? (size_t)(sb->first + sb->n - first) :
					   0;
	if (sb->n + (n - skip) > sb->cap) {
		size_t cap = (sb->n + (n - skip)) * 2 + 16;
		void *p = realloc(sb->ent, cap * sizeof(sb->ent[0]));

		if (!p)
			return MC_STORE_UNAVAILABLE_IN_CURRENT_MODE;
		sb->ent = p;
		sb->cap = cap;
	}
	for (size_t i = skip; i < n; i++) {
		uint64_t seq = first + i;
		void *d;

		if (seq <= logged)
			continue; /* in the log already */
		if (seq != sb->first + sb->n)
			return MC_STORE_INVALID_PARAMS;
		d = malloc(ents[i].len);
		if (!d)
			return MC_STORE_UNAVAILABLE_IN_CURRENT_MODE;
		memcpy(d, ents[i].data, ents[i].len);
		sb->ent[sb->n].data = d;
		sb->ent[sb->n].len = ents[i].len;
		sb->n++;
		sb->bytes += ents[i].len;
	}
	*held = sb->first + sb->n - 1;
	return 0;
}

struct ship_ent *ha_sbuf_take(struct ha_sbuf *sb, uint64_t seq, uint64_t *epoch)
{
	struct ship_ent *head = NULL, **tail = &head;

	pthread_mutex_lock(&sb->mu);
	sb->open = false;
	trim_locked(sb, seq);
	*epoch = sb->epoch;
	for (size_t i = 0; i < sb->n; i++) {
		struct ship_ent *e = calloc(1, sizeof(*e));

		if (!e)
			break; /* the rest stays out: the log lacks it */
		e->seq = sb->first + i;
		e->len = sb->ent[i].len;
		e->data = sb->ent[i].data;
		sb->ent[i].data = NULL;
		*tail = e;
		tail = &e->next;
	}
	sb->n = 0;
	sb->bytes = 0;
	pthread_mutex_unlock(&sb->mu);
	return head;
}

void ha_sbuf_restore(struct ha_sbuf *sb, uint64_t epoch, struct ship_ent *list)
{
	size_t n = 0;

	pthread_mutex_lock(&sb->mu);
	for (struct ship_ent *e = list; e; e = e->next)
		n++;
	if (!sb->n && n > sb->cap) {
		void *p = realloc(sb->ent, n * sizeof(*sb->ent));

		if (p) {
			sb->ent = p;
			sb->cap = n;
		}
	}
	if (!sb->n && n && n <= sb->cap) {
		/* As it was before ha_sbuf_take (nothing came meanwhile: it
		 * was closed). */
		sb->epoch = epoch;
		sb->first = list->seq;
		for (struct ship_ent *e = list; e; e = e->next) {
			sb->ent[sb->n].data = e->data;
			sb->ent[sb->n].len = e->len;
			sb->bytes += e->len;
			sb->n++;
			e->data = NULL;
		}
	}
	sb->open = true;
	pthread_mutex_unlock(&sb->mu);
	ha_free_list(list); /* what was taken above has data NULL */
}

static int handle(void *arg, const struct mc_rpc_hdr *h, const uint8_t *body,
		  uint8_t **frame, size_t *len)
{
	struct ha_sbuf *sb = arg;
	Mcrpc__HaAppendRequest *q;
	Mcrpc__HaAppendResponse r = MCRPC__HA_APPEND_RESPONSE__INIT;
	struct mc_rpc_hdr rh = *h;
	struct ha_sbuf_ent *ents = NULL;
	uint64_t held = 0;
	int rc;

	if (h->method != MCRPC__METHOD__HA_APPEND)
		/* Clients that reach a standby look for the leader again. */
		return mc_rpc_pack_code(h, MC_STORE_UNAVAILABLE_IN_CURRENT_MODE,
					0, frame, len);
	q = (Mcrpc__HaAppendRequest *)mc_rpc_unpack(
		&mcrpc__ha_append_request__descriptor, body, h->length);
	if (!q)
		return -EPROTO;
	if (q->n_entries) {
		ents = calloc(q->n_entries, sizeof(*ents));
		if (!ents) {
			protobuf_c_message_free_unpacked(&q->base, NULL);
			return -ENOMEM;
		}
		for (size_t i = 0; i < q->n_entries; i++) {
			ents[i].data = q->entries[i].data;
			ents[i].len = q->entries[i].len;
		}
	}
	pthread_mutex_lock(&sb->mu);
	r.code = ha_sbuf_append(sb, q->epoch, q->first, q->logged, q->reset,
				ents, q->n_entries, &held);
	pthread_mutex_unlock(&sb->mu);
	free(ents);
	protobuf_c_message_free_unpacked(&q->base, NULL);
	r.held = held;
	r.lease = sb->incarnation ? sb->incarnation(sb->inc_arg) : 0;
	rh.kind = MC_RPC_RESPONSE;
	rc = mc_rpc_pack_frame(&rh, &r.base, frame, len);
	return rc;
}

static long long incarnation_of(void *arg)
{
	struct mst_ha *ha = arg;

	return atomic_load(&ha->lease) ? atomic_load(&ha->incarnation) : 0;
}

int ha_sbuf_start(struct mst_ha *ha, char *errbuf, size_t errlen)
{
	struct mc_rpc_server_cfg cfg = {
		.name = "standby",
		.host = ha->listen_host,
		.port = ha->listen_port,
		.max_connections = 64,
		.idle_timeout_s = 300,
		.auth = ha->key,
	};
	char err[MC_ERR_LEN] = "";
	int rc;

	ha->sb.incarnation = incarnation_of;
	ha->sb.inc_arg = ha;
	if (!ha->listen_port)
		return 0; /* tests of ha.c alone: no RPC address */
	rc = mc_rpc_server_start(&cfg, handle, &ha->sb, &ha->sb.srv, err,
				 sizeof(err));
	/* The same port serves RPC once this master leads: a standby that
	 * cannot have it would be elected, then fail to serve, and leave
	 * the pool without a leader. */
	if (rc) {
		char at[300];

		(void)mc_fmt_hostport(at, sizeof(at), ha->listen_host,
				      ha->listen_port);
		snprintf(errbuf, errlen,
			 "HA: cannot listen on the RPC address %s (%s): "
			 "not joining as a standby",
			 at, err);
	}
	return rc;
}

void ha_sbuf_stop(struct mst_ha *ha)
{
	ha_sbuf_set_open(&ha->sb, false);
	mc_rpc_server_stop(ha->sb.srv);
	ha->sb.srv = NULL;
}
