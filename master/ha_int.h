/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HA internals shared by ha.c (election, op log, following),
 * ha_stream.c (the leader's stream of entries to its standbys, and the
 * in-sync set in etcd) and ha_sbuf.c (a standby's side of the stream).
 * docs/design.md, "Entries straight to standbys".
 */
#ifndef MST_HA_INT_H
#define MST_HA_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd_client.h"
#include "etcd_kv.h"
#include "db.h"
#include "ha.h"

#define KEY_MAX 512
#define SUB_MAX 256
#define MEMBERS_MAX 8 /* standbys a leader streams to */

struct mc_rpc_client;
struct mc_rpc_server;

/* An op log entry: its patchset and CRC-32C (db_rec.c, db_log.c). */
struct ship_ent {
	struct ship_ent *next;
	uint64_t seq;
	size_t len;
	void *data;
};

/* Leading: one standby the entries stream to. Fields below `mu:` are
 * under the leader's q_mu. */
struct ha_member {
	struct mst_ha *ha;
	char addr[200]; /* its RPC "host:port" (its standby key) */
	struct mc_rpc_client *cli;
	pthread_t thr;
	bool running;
	/* mu: */
	uint64_t next; /* the next entry to send; 0: start over (reset) */
	uint64_t held; /* the last entry it holds, as it answered */
	uint64_t pin; /* the first entry of the call in flight, 0: none */
	bool busy; /* a call is in flight (its thread's, or a waiter's) */
	long long inc; /* its incarnation as it answered (0: not yet) */
	bool want; /* answers: it belongs in the in-sync set */
	bool req; /* acknowledgements wait for it (it may be listed) */
	bool sure; /* listed in the in-sync key, with this incarnation */
	uint64_t fail_ms; /* mono ms of the first failed call in a row */
	bool said; /* a failure before it was ever in sync was logged */
	bool gone; /* its standby key is gone: end once out of the set */
	bool done; /* its thread ended */
};

/* Following: what the leader streamed that the record lacks yet. */
struct ha_sbuf {
	pthread_mutex_t mu;
	struct mc_rpc_server *srv;
	bool open; /* taking entries */
	uint64_t epoch; /* the stream's leader */
	uint64_t first; /* seq of ent[0] */
	struct ha_sbuf_ent {
		void *data;
		size_t len;
	} * ent;
	size_t n, cap, bytes;
	/* This standby's incarnation while its lease is alive, else 0 (the
	 * answer's field `lease`). */
	long long (*incarnation)(void *arg);
	void *inc_arg;
};

struct mst_ha {
	struct etcd_client cli;
	bool cli_ok;
	unsigned ttl_s, poll_ms;
	struct { /* following: memory for the takeover (prefault.h) */
		bool on; /* mst_ha_cfg's prefault */
		unsigned char told; /* 1: ready was logged, 2: short too */
		size_t ready; /* bytes made ready so far */
		size_t goal; /* what the rounds grow it to */
		bool goal_capped; /* the goal is what memory allows */
		size_t refused; /* the want when malloc refused, else 0 */
		struct mst_db_count count; /* the count under way */
		uint64_t count_size; /* the record's size when it began */
		uint64_t objects, size; /* the last count's, and that size */
	} pf;
	char *const *argv;
	char prefix[240]; /* "mooncake-store/<cluster_id>/" */
	char view[SUB_MAX], oplog[SUB_MAX], oplog_end[SUB_MAX];
	char base_key[SUB_MAX], standby[SUB_MAX], standby_end[SUB_MAX];
	char insync[SUB_MAX];
	char me[KEY_MAX]; /* this master's standby key */
	char admin_key[SUB_MAX];
	const struct mc_auth_key *key;
	char advertise[200];
	char listen_host[200];
	int listen_port;
	atomic_llong lease; /* renewed by one thread, read by others */
	/* The first lease this process was granted: it names the process
	 * (its stream buffer) in the in-sync key and its standby key, and
	 * stays when an expired lease is granted anew. */
	atomic_llong incarnation;
	uint64_t ka_at; /* mono ms of the last keepalive sent that succeeded */
	atomic_llong epoch;
	atomic_ullong deadline; /* mono ms: lead until then at most */
	atomic_bool lost, stop;
	_Atomic(const char *) lost_why; /* a static string: why lost */
	uint64_t renew_said; /* mono ms a failed renewal was last logged */
	atomic_bool stopping; /* the master is shutting down (mst_ha_stopping) */
	struct mst_db *db; /* leading */
	_Atomic uint64_t *until; /* the master's ha_until */
	pthread_t thr;
	bool running;
	char leaders[SUB_MAX], leaders_end[SUB_MAX];
	/* Group commit (leading): entries committed here stay in the window
	 * (win_head..win_tail, in seq order) until they are in etcd and no
	 * stream call uses them. The shipper writes those from ship_next on
	 * in fenced etcd transactions; shipped is the last entry in etcd.
	 * The members stream them to the standbys. */
	pthread_mutex_t q_mu;
	pthread_cond_t q_cv; /* shipper: entries, or stop */
	/* members: entries no waiter sends itself (ha_stream_inline), or
	 * stop */
	pthread_cond_t mem_cv;
	pthread_cond_t done_cv; /* waiters: shipped or held moved, room, lost */
	struct ship_ent *win_head, *win_tail, *ship_next;
	/* Where the last look-up by seq ended (ha_stream.c, find): stream
	 * calls move forward, and the window can hold thousands of entries
	 * while etcd lags; NULL once pruned. */
	struct ship_ent *find_hint;
	size_t q_bytes; /* in the window */
	uint64_t shipped;
	bool ship_stop;
	pthread_t ship_thr;
	bool shipping;
	char *stage; /* one transaction's values */
	struct ha_member *members[MEMBERS_MAX];
	size_t n_members;
	pthread_mutex_t isr_mu; /* one in-sync key write at a time */
	struct ha_sbuf sb; /* following */
	/* Elected, until leading: the lease renewed while the record loads
	 * (mst_ha_follow's caller restores it: seconds at millions of
	 * objects, longer than the lease). */
	pthread_t hold_thr;
	bool holding;
	atomic_bool hold_stop;
	uint64_t isr_epoch; /* following: the in-sync key's leader */
	/* What the admin pages show until this master serves
	 * (mst_ha_status): set by the follow loop. */
	pthread_mutex_t st_mu;
	const char *st_state; /* a static string, upstream's words */
	uint64_t st_applied, st_epoch;
	char st_leader[200]; /* master_view's value, "" when none */
};

/* ha.c */
void ha_sleep_ms(unsigned ms);
/** Free a list of entries and their data. */
void ha_free_list(struct ship_ent *e);

/* ha_stream.c: leading. */
/** Start streaming to standbys that appeared under standby/, and end it
 *  for those gone and out of the in-sync set (lead_main calls it now and
 *  then). */
void ha_stream_discover(struct mst_ha *ha);
/** Stop every member (q_mu not held). */
void ha_stream_stop(struct mst_ha *ha);
/** Under q_mu: entry seq is held by every standby the in-sync key may
 *  name, and the key names at least one, within the lease. */
bool ha_stream_acked(struct mst_ha *ha, uint64_t seq);
/** Under q_mu: every standby acknowledgements wait for answers, and the
 *  in-sync key names one (changes are acknowledged through the stream). */
bool ha_stream_healthy(const struct mst_ha *ha);
/** Under q_mu: the lowest entry a stream call in flight uses (UINT64_MAX
 *  none). */
uint64_t ha_stream_pinned(const struct mst_ha *ha);
/** Under q_mu: acknowledgements wait for one standby only, in sync: the
 *  thread that waits for an entry sends it itself (ha_stream_send), so
 *  append() need not wake the member's thread. */
bool ha_stream_inline(struct mst_ha *ha);
/** Under q_mu (released during the call): a thread waiting for entry seq
 *  sends the window, from the standby's next entry on, to that one
 *  standby itself when no call to it is in flight; true when it made a
 *  call (whatever its outcome), false when it should wait instead. Saves
 *  two thread hand-offs per change (to the member's thread and back). */
bool ha_stream_send(struct mst_ha *ha, uint64_t seq);

/* The in-sync key: "<epoch>\n" then "<host:port> <incarnation>\n" a
 * member (its first lease, hex; a master before 2026-12-05 wrote its
 * lease then). */
struct ha_isr {
	uint64_t epoch;
	size_t n;
	struct {
		char addr[200];
		long long inc; /* the standby's incarnation */
	} m[MEMBERS_MAX];
};
/** Parse the key's value: 0 or -EBADMSG. */
int ha_isr_parse(const char *val, size_t len, struct ha_isr *out);
/** Whether a standby key read from etcd (kv: its value NUL-terminated
 *  past len) is the process that an in-sync line names (named: its
 *  incarnation): the value "<seq> <incarnation hex>", or, written before
 *  2026-12-05, "<seq>" alone under the lease the line names. */
bool ha_standby_matches(const struct mc_etcd_kv *kv, long long named);
/**
 * Following, master_view gone: whether this master may campaign. 1: the
 * in-sync key is absent or empty, or names this master (its incarnation);
 * 2: it names only masters whose standby key is gone or names another
 * incarnation (entries acknowledged through them only are lost unless
 * the record that led comes back: the caller gives that record a head
 * start); 0: an in-sync
 * standby is alive and should win; or a code. ha->isr_epoch: the key's
 * leader (0 none).
 */
int ha_isr_may_campaign(struct mst_ha *ha, char *err, size_t errlen);

/* ha_sbuf.c: following. */
/** Listen on the RPC address for the leader's stream (a failure to
 *  listen is logged: the standby then follows the etcd log only). */
/** Listen for the leader's stream on the master's RPC address: 0, or a
 *  code with the reason in err (the port is taken). */
int ha_sbuf_start(struct mst_ha *ha, char *err, size_t errlen);
void ha_sbuf_stop(struct mst_ha *ha);
/** Take entries or not (a record that led takes none until reconciled). */
void ha_sbuf_set_open(struct ha_sbuf *sb, bool open);
/** The record reached seq: entries up to it go. */
void ha_sbuf_trim(struct ha_sbuf *sb, uint64_t seq);
/** Close the stream and hand over what it holds beyond seq (a list, in
 *  order, NULL none) and its epoch. */
struct ship_ent *ha_sbuf_take(struct ha_sbuf *sb, uint64_t seq,
			      uint64_t *epoch);
/**
 * One HaAppend (the codec's decoded fields): 0 (*held set), -1011 (not
 * taking entries: closed, an older epoch, or full) or -600 (a gap, an
 * entry that fails its CRC: start over with reset). Fuzzed.
 */
/** Taking over failed: the list goes back (taken) and entries are taken
 *  again. */
void ha_sbuf_restore(struct ha_sbuf *sb, uint64_t epoch, struct ship_ent *list);
int ha_sbuf_append(struct ha_sbuf *sb, uint64_t epoch, uint64_t first,
		   uint64_t logged, bool reset, const struct ha_sbuf_ent *ents,
		   size_t n, uint64_t *held);
void ha_sbuf_init(struct ha_sbuf *sb);
void ha_sbuf_fini(struct ha_sbuf *sb);

#endif
