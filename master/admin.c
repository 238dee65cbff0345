/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Admin and Prometheus HTTP of the master (see admin.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "ghosts.h"
#include "ha.h"
#include "master.h"
#include "mc_auth_http.h"
#include "mc_log.h"
#include "mc_rpc.h"
#include "mc_sbuf.h"
#include "mooncake/mc_err.h"
#include "mooncake/mc_version.h"
#include "mst_util.h"
#include "noroom.h"
#include "objects.h"
#include "segments.h"
#include "slots.h"
#include "admin_int.h"

void mst_admin_reply_sb(struct mc_http_response *resp, struct mc_sbuf *b,
			const char *type)
{
	if (b->oom) {
		free(b->p);
		(void)mc_http_replyf(resp, 500, "out of memory\n");
		return;
	}
	resp->status = 200;
	resp->content_type = type;
	resp->body = b->p ? b->p : strdup("");
	resp->body_len = b->len;
}

void mst_admin_reply_json(struct mc_http_response *resp, int status, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	if (!s) {
		(void)mc_http_replyf(resp, 500, "out of memory\n");
		return;
	}
	resp->status = status;
	resp->content_type = "application/json";
	resp->body = s;
	resp->body_len = strlen(s);
}

#define COUNTER(b, name, help, v)                               \
	mc_sbuf_printf(b,                                       \
		       "# HELP " name " " help "\n# TYPE " name \
		       " counter\n" name " %llu\n",             \
		       (unsigned long long)(v))

static void metrics(struct master *m, struct mc_sbuf *b)
{
	uint64_t soft = 0, value_bytes = 0, wall = mst_wall(), now = mst_now();
	uint64_t orphans = 0, orphan_bytes = 0, holds = 0;

	for (struct mst_object *o = m->lru_head; o; o = o->lru_next) {
		soft += o->soft_pin_until > wall;
		value_bytes += o->size;
	}
	for (struct mst_object *o = m->orphans; o; o = o->onext) {
		orphans++;
		orphan_bytes += o->size * o->n_repl;
	}
	for (struct mst_hold *h = m->holds; h; h = h->next)
		holds++;
	GAUGE(b, "master_active_clients", "Clients alive.",
	      mst_client_count(m));
	GAUGE(b, "master_total_capacity_bytes",
	      "Bytes of all mounted segments.", m->capacity);
	GAUGE(b, "master_allocated_bytes", "Bytes allocated to replicas.",
	      m->allocated);
	GAUGE(b, "master_key_count", "Complete objects.", m->n_complete);
	GAUGE(b, "master_soft_pin_key_count", "Soft-pinned objects.", soft);
	GAUGE(b, "master_value_size_bytes",
	      "Bytes of complete objects (one replica each).", value_bytes);
	GAUGE(b, "master_orphan_count",
	      "Removed objects whose memory readers may still use.", orphans);
	GAUGE(b, "master_orphan_bytes", "Bytes those orphans keep.",
	      orphan_bytes);
	GAUGE(b, "master_hold_count", "Holds of open objects.", holds);
	{
		uint64_t n, bytes;

		mst_given_up_count(m, &n, &bytes);
		GAUGE(b, "master_put_given_up_count",
		      "Unfinished puts given up (writer gone or pre-empted) "
		      "whose memory waits for release.",
		      n);
		GAUGE(b, "master_put_given_up_bytes",
		      "Bytes those given-up puts keep.", bytes);
		GAUGE(b, "master_largest_free_bytes",
		      "The longest free range of any segment: the largest "
		      "object a put can place without eviction.",
		      mst_largest_free(m));
	}
	GAUGE(b, "master_restart_quarantine_remaining_ms",
	      "Time left in which removals keep memory and eviction waits "
	      "after a restart.",
	      m->quarantine_until > now ? m->quarantine_until - now : 0);
	GAUGE(b, "master_put_fence_remaining_ms",
	      "Time left in which puts wait after a restart or takeover (the "
	      "run before may have reserved space).",
	      m->fence_until > now ? m->fence_until - now : 0);
	{
		struct mst_db_wal_stats w;

		(void)mst_db_wal_stats(m->db, &w);
		GAUGE(b, "master_db_wal_frames",
		      "Pages in the record's WAL after the last commit.",
		      w.frames);
		COUNTER(b, "master_db_checkpoints_total",
			"WAL checkpoints of the checkpoint thread.", w.runs);
		COUNTER(b, "master_db_checkpoint_failures_total",
			"WAL checkpoints that failed.", w.failures);
		COUNTER(b, "master_db_checkpoint_us_total",
			"Time the checkpoint thread spent checkpointing (us).",
			w.us);
		GAUGE(b, "master_db_checkpoint_max_us",
		      "The longest checkpoint so far (us).", w.max_us);
		COUNTER(b, "master_db_tail_checkpoints_total",
			"Short tails of the WAL that commits copied.",
			w.tail_runs);
		GAUGE(b, "master_db_tail_checkpoint_max_us",
		      "The longest such tail (us).", w.tail_max_us);
		COUNTER(b, "master_db_inline_checkpoints_total",
			"WAL checkpoints made by a commit (the thread far "
			"behind).",
			w.inline_runs);
	}
	COUNTER(b, "master_evicted_key_count", "Objects evicted.",
		m->stats.evicted_keys);
	COUNTER(b, "master_evicted_size_bytes", "Bytes evicted.",
		m->stats.evicted_bytes);
	COUNTER(b, "master_attempted_evictions_total", "Eviction runs.",
		m->stats.eviction_attempts);
	COUNTER(b, "master_successful_evictions_total",
		"Eviction runs that evicted something.",
		m->stats.eviction_successes);
	COUNTER(b, "master_put_start_alloc_failures_total",
		"PutStarts that found no space.", m->stats.alloc_failures);
	COUNTER(b, "master_put_start_partial_allocations_total",
		"PutStarts that got fewer replicas than asked.",
		m->stats.partial_allocations);
	COUNTER(b, "master_unreachable_segment_reports_total",
		"Segments a writer reported it could not reach (new replicas "
		"went elsewhere until their owner pinged).",
		m->stats.unreachable_reports);
	COUNTER(b, "master_put_start_discard_cnt",
		"Unfinished puts pre-empted by a new put.", m->stats.discarded);
	COUNTER(b, "master_put_start_release_cnt",
		"Abandoned puts whose memory was reclaimed.",
		m->stats.released);
	COUNTER(b, "master_put_start_discarded_staging_size",
		"Bytes of pre-empted puts.", m->stats.discarded_bytes);
	{
		uint64_t n, bytes;

		mst_slots_count(m, &n, &bytes);
		GAUGE(b, "master_put_slots",
		      "Space reserved ahead for clients' next puts: slots.", n);
		GAUGE(b, "master_put_slot_bytes",
		      "Space reserved ahead for clients' next puts: bytes.",
		      bytes);
		mst_ghosts_count(m, &n, &bytes);
		GAUGE(b, "master_put_ghosts",
		      "Puts in flight on segments that were dropped, whose "
		      "ranges new objects avoid: puts.",
		      n);
		GAUGE(b, "master_put_ghost_bytes",
		      "Puts in flight on segments that were dropped, whose "
		      "ranges new objects avoid: bytes.",
		      bytes);
	}
	GAUGE(b, "master_db_write_failing",
	      "1 while the record cannot be written (changes fail).",
	      (uint64_t)mst_db_failing(m->db));
	{
		bool low;
		uint64_t free_b = mst_db_disk_free(m->db, &low);

		if (free_b != UINT64_MAX) {
			GAUGE(b, "master_db_disk_free_bytes",
			      "Bytes free on the record's filesystem.", free_b);
			GAUGE(b, "master_db_disk_low",
			      "1 while the record's filesystem has less "
			      "free than 64 MiB or a twentieth of its size "
			      "(changes fail when it is full).",
			      (uint64_t)low);
		}
	}
	COUNTER(b, "master_put_slot_grants_total",
		"Slots of reserved space handed out.", m->stats.slot_grants);
	COUNTER(b, "master_put_slot_commits_total",
		"Puts completed by PutCommit into a slot.",
		m->stats.slot_commits);
	COUNTER(b, "master_put_slot_returns_total",
		"Slots given back unused by their client.",
		m->stats.slot_returns);
	COUNTER(b, "master_put_slot_reclaimed_total",
		"Slots freed because their client went away.",
		m->stats.slot_reclaimed);
	for (size_t i = 0; i < mc_rpc_method_count(); i++) {
		const struct mc_rpc_method *md = mc_rpc_method_at(i);
		/* One TYPE and one sample per name: requests_total is
		 * below, for every method. */
		if (md->batch && !strncmp(md->metric, "batch_", 6)) {
			mc_sbuf_printf(
				b,
				"# TYPE master_%s_items_total counter\n"
				"master_%s_items_total %llu\n"
				"# TYPE master_%s_failed_items_total counter\n"
				"master_%s_failed_items_total %llu\n",
				md->metric, md->metric,
				(unsigned long long)m->stats.batch_items[i],
				md->metric, md->metric,
				(unsigned long long)
					m->stats.batch_failed_items[i]);
		}
		mc_sbuf_printf(b,
			       "# TYPE master_%s_requests_total counter\n"
			       "master_%s_requests_total %llu\n"
			       "# TYPE master_%s_failures_total counter\n"
			       "master_%s_failures_total %llu\n",
			       md->metric, md->metric,
			       (unsigned long long)m->stats.requests[i],
			       md->metric, md->metric,
			       (unsigned long long)m->stats.failures[i]);
	}
}

char *mst_admin_summary(struct master *m)
{
	struct mc_sbuf b = { 0 };

	mc_sbuf_printf(
		&b,
		"clients %zu, segments capacity %llu bytes, allocated %llu "
		"(%.1f%%), keys %llu, evicted %llu",
		mst_client_count(m), (unsigned long long)m->capacity,
		(unsigned long long)m->allocated,
		m->capacity ?
			100.0 * (double)m->allocated / (double)m->capacity :
			0.0,
		(unsigned long long)m->n_complete,
		(unsigned long long)m->stats.evicted_keys);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

/* GET /ha/snapshot: the record as an sqlite file, copied aside then sent
 * from the open (already unlinked) copy. */
static void snapshot(const struct mst_admin *a, struct master *m,
		     struct mc_http_response *resp)
{
	static atomic_uint n;
	char path[PATH_MAX], err[512] = "";
	uint64_t seq = 0;
	struct stat st;
	int fd, rc;

	if (snprintf(path, sizeof(path), "%s.snapshot.%d.%u", a->db_path,
		     (int)getpid(),
		     atomic_fetch_add(&n, 1)) >= (int)sizeof(path)) {
		(void)mc_http_replyf(resp, 500, "path too long\n");
		return;
	}
	rc = mst_db_snapshot(m->db, &m->lock, path, &seq, err, sizeof(err));
	/* Group commit: the copy may hold changes not yet in the log; it
	 * goes out only once they are (a standby must never hold a change
	 * the log may lose). */
	if (!rc && mst_db_log_wait_logged(m->db, seq)) {
		rc = MC_STORE_UNAVAILABLE_IN_CURRENT_MODE;
		snprintf(err, sizeof(err),
			 "this master stopped leading while copying");
	}
	fd = rc ? -1 : open(path, O_RDONLY | O_CLOEXEC);
	(void)unlink(path);
	mst_db_unlink_sides(path); /* the copy's closed -wal and -shm */
	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		mc_log_err("master", "HA snapshot: %s",
			   rc ? err : mc_strerror(-errno));
		(void)mc_http_replyf(resp, 500, "%s\n",
				     rc ? err : mc_strerror(-errno));
		return;
	}
	mc_log_notice("master",
		      "record copied for a standby or a backup (%lld "
		      "bytes, op log entry %llu)",
		      (long long)st.st_size, (unsigned long long)seq);
	resp->status = 200;
	resp->content_type = "application/vnd.sqlite3";
	resp->has_fd = true;
	resp->fd = fd;
	resp->fd_len = (size_t)st.st_size;
}

/* Whether req may be served; answers 401 when not. */
static bool authorized(const struct mst_admin *a,
		       const struct mc_http_request *req,
		       struct mc_http_response *resp)
{
	const char *why;

	if (!a->key || !strcmp(req->path, "/health") ||
	    !strcmp(req->path, "/metrics"))
		return true;
	if (!mc_auth_http_check(a->key, a->replay, req, (uint64_t)time(NULL),
				&why))
		return true;
	(void)mc_http_replyf(resp, 401, "%s\n", why);
	return false;
}

void mst_admin_handle(void *arg, const struct mc_http_request *req,
		      struct mc_http_response *resp)
{
	const struct mst_admin *a = arg;
	struct master *m = atomic_load(&((struct mst_admin *)arg)->m);
	struct mc_sbuf b = { 0 };

	if (strcmp(req->method, "GET")) {
		resp->allow = "GET";
		(void)mc_http_replyf(resp, 405, "only GET\n");
		return;
	}
	if (!authorized(a, req, resp))
		return;
	if (!m) {
		mst_admin_standby(a, req, resp);
		return;
	}
	if (!strcmp(req->path, "/metrics")) {
		pthread_mutex_lock(&m->lock);
		metrics(m, &b);
		pthread_mutex_unlock(&m->lock);
		if (a->ha) {
			GAUGE(&b, "master_ha_is_leader",
			      "1 on the HA leader that serves, else 0.", 1);
			GAUGE(&b, "master_ha_op_log_entry",
			      "The last op log entry the record holds.",
			      mst_db_log_seq(m->db));
		}
		mst_admin_reply_sb(resp, &b, "text/plain; version=0.0.4");
	} else if (!strcmp(req->path, "/metrics/summary")) {
		pthread_mutex_lock(&m->lock);
		char *s = mst_admin_summary(m);
		pthread_mutex_unlock(&m->lock);
		(void)mc_http_replyf(resp, s ? 200 : 500, "%s\n",
				     s ? s : "out of memory");
		free(s);
	} else if (!strcmp(req->path, "/health")) {
		pthread_mutex_lock(&m->lock);
		uint64_t up = mst_now() - m->started;
		pthread_mutex_unlock(&m->lock);
		/* Reads go on; changes fail until the record can be written
		 * (its disk full): "degraded", still 200 (a restart would not
		 * help; a liveness probe must not kill it). */
		bool failing = mst_db_failing(m->db), low;
		uint64_t free_b = mst_db_disk_free(m->db, &low);
		char why[160];

		/* Commits fail and pass by turns on a disk that stays full
		 * (and an idle master tries none): its free space says so
		 * too, between failures. */
		if (failing)
			snprintf(why, sizeof(why),
				 "not writable (see the log): changes fail");
		else if (low)
			snprintf(why, sizeof(why),
				 "its disk has %llu KiB free: changes fail "
				 "once it is full",
				 (unsigned long long)(free_b >> 10));
		else
			snprintf(why, sizeof(why), "ok");
		json_t *j = json_pack(
			"{s:s,s:s,s:s,s:I,s:s}", "status",
			failing || low ? "degraded" : "ok", "role",
			/* With HA only the leader serves this port. */
			a->ha ? "leader" : "master", "version",
			MC_VERSION_STRING, "uptime_ms", (json_int_t)up,
			"record", why);

		if (j && a->ha) {
			json_object_set_new(
				j, "epoch",
				json_integer((json_int_t)mst_ha_epoch(a->ha)));
			/* What standbys' keys are compared with (upgrades). */
			json_object_set_new(
				j, "op_log_entry",
				json_integer(
					(json_int_t)mst_db_log_seq(m->db)));
		}
		mst_admin_reply_json(resp, 200, j);
	} else if (!strcmp(req->path, "/get_all_segments")) {
		pthread_mutex_lock(&m->lock);
		for (struct mst_segment *s = m->segments; s; s = s->next)
			if (s->owner)
				mc_sbuf_printf(&b, "%s\n", s->name);
		pthread_mutex_unlock(&m->lock);
		mst_admin_reply_sb(resp, &b, "text/plain");
	} else if (!strcmp(req->path, "/get_all_keys")) {
		mst_admin_all_keys(m, req->query, resp);
	} else if (!strcmp(req->path, "/ha/snapshot") && a->db_path) {
		snapshot(a, m, resp);
	} else if (!strcmp(req->path, "/role") ||
		   !strcmp(req->path, "/ha_status")) {
		/* Only a serving master answers; an HA leader whose lease
		 * ran out serves nothing until it restarts as a standby. */
		uint64_t until = atomic_load(&m->ha_until);
		bool lapsed = until && mst_now() >= until;
		(void)mc_http_replyf(resp, 200,
				     lapsed		 ? "standby" :
				     req->path[1] == 'r' ? "leader" :
							   "serving");
	} else if (!strcmp(req->path, "/leader")) {
		mst_admin_leader(a, resp);
	} else if (!strcmp(req->path, "/query_segment")) {
		mst_admin_query_segment(m, req->query, resp);
	} else if (!strcmp(req->path, "/get_segments_detail")) {
		mst_admin_segments_detail(m, resp);
	} else if (!strcmp(req->path, "/query_key")) {
		mst_admin_query_key(m, req->query, resp);
	} else if (!strcmp(req->path, "/batch_query_keys")) {
		mst_admin_batch_query(m, req->query, resp);
	} else {
		(void)mc_http_replyf(resp, 404, "no such page: %s\n",
				     req->path);
	}
}
