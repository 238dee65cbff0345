/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checkpoints (ckpt.h; master.proto, "checkpoints"). Each is kept as its
 * sealed record (the unpacked Ckpt, as written to sqlite), with its
 * holders: which client serves which shards from where, how many sources
 * each was handed (each expires after SOURCE_TTL_MS unless CkptDone comes
 * first) and until when it counts as unreachable. Per shard: how many
 * holders have it and how many fetches of it are in flight (rarity).
 * Checkpoints are found by name and by id through two sorted arrays.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt.h"
#include "db.h"
#include "feed.h"
#include "mc_ckpt_name.h"
#include "mc_log.h"
#include "mooncake/mc_err.h"
#include "mst_util.h"
#include "segments.h"

#define SOURCE_TTL_MS 60000u
#define UNREACHABLE_MS 5000u
#define RETRY_MS 200u
#define MAX_FILES 1000000u
#define MAX_SHARDS 16777216u
#define DEFAULT_SHARD (64ull << 20)
#define MIN_SHARD (64ull << 10)
#define MAX_SHARD (1ull << 30)

struct source {
	uint64_t expires; /* mono ms */
	uint32_t shard;
	uint8_t reader[MST_ID_LEN]; /* zeros: unnamed */
};

struct holder {
	uint8_t client[MST_ID_LEN];
	char *endpoint;
	bool publisher;
	bool restored; /* from the record; its client not seen since */
	uint8_t *bitmap; /* ckpt.nbytes */
	uint32_t shards;
	uint64_t served_bytes;
	uint64_t unreachable_until; /* mono ms */
	struct source *src;
	size_t n_src, cap_src;
	struct holder *next;
};

struct ckpt {
	Mcrpc__Ckpt *rec; /* owned (protobuf-c unpacked) */
	uint32_t *nh; /* per shard: holders */
	uint32_t *inflight; /* per shard: sources handed out */
	size_t nbytes; /* of a bitmap */
	struct holder *holders;
};

struct mst_ckpts {
	struct ckpt **by_name, **by_id;
	size_t n, cap;
	uint64_t last_id;
	uint64_t restore_until; /* mono ms, while restoring */
	bool restoring;
};

static bool bit(const uint8_t *b, size_t len, uint32_t i)
{
	return i / 8 < len && (b[i / 8] >> (i % 8) & 1);
}

static bool same_id(const uint8_t *a, const uint8_t *b)
{
	return !memcmp(a, b, MST_ID_LEN);
}

static struct mst_ckpts *set_of(struct master *m)
{
	if (!m->ckpts)
		m->ckpts = calloc(1, sizeof(*m->ckpts));
	return m->ckpts;
}

/* ---- the two indexes ------------------------------------------------------ */

/* First index whose name is >= name (strict: > name). */
static size_t name_bound(const struct mst_ckpts *s, const char *name,
			 bool strict)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->by_name[mid]->rec->name, name);
		if (c < 0 || (strict && !c))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static size_t id_bound(const struct mst_ckpts *s, uint64_t id)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->by_id[mid]->rec->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct ckpt *by_name(struct master *m, const char *name)
{
	struct mst_ckpts *s = set_of(m);
	size_t i = s ? name_bound(s, name, false) : 0;

	return s && i < s->n && !strcmp(s->by_name[i]->rec->name, name) ?
		       s->by_name[i] :
		       NULL;
}

static struct ckpt *by_id(struct master *m, uint64_t id)
{
	struct mst_ckpts *s = set_of(m);
	size_t i = s ? id_bound(s, id) : 0;

	return s && i < s->n && s->by_id[i]->rec->id == id ? s->by_id[i] : NULL;
}

static int reserve(struct mst_ckpts *s)
{
	size_t cap = s->cap ? 2 * s->cap : 16;
	struct ckpt **a, **b;

	if (s->n < s->cap)
		return 0;
	a = realloc(s->by_name, cap * sizeof(*a));
	if (a)
		s->by_name = a;
	b = a ? realloc(s->by_id, cap * sizeof(*b)) : NULL;
	if (!b)
		return -1;
	s->by_id = b;
	s->cap = cap;
	return 0;
}

/* Room reserved; ids only grow, so the id index appends. */
static void insert(struct mst_ckpts *s, struct ckpt *ck)
{
	size_t i = name_bound(s, ck->rec->name, false);

	memmove(s->by_name + i + 1, s->by_name + i,
		(s->n - i) * sizeof(*s->by_name));
	s->by_name[i] = ck;
	i = id_bound(s, ck->rec->id);
	memmove(s->by_id + i + 1, s->by_id + i, (s->n - i) * sizeof(*s->by_id));
	s->by_id[i] = ck;
	s->n++;
}

static void unlink_ckpt(struct mst_ckpts *s, struct ckpt *ck)
{
	size_t i = name_bound(s, ck->rec->name, false);

	memmove(s->by_name + i, s->by_name + i + 1,
		(s->n - i - 1) * sizeof(*s->by_name));
	i = id_bound(s, ck->rec->id);
	memmove(s->by_id + i, s->by_id + i + 1,
		(s->n - i - 1) * sizeof(*s->by_id));
	s->n--;
}

static void holder_free(struct holder *h)
{
	free(h->endpoint);
	free(h->bitmap);
	free(h->src);
	free(h);
}

static void ckpt_free(struct ckpt *ck)
{
	while (ck->holders) {
		struct holder *h = ck->holders;
		ck->holders = h->next;
		holder_free(h);
	}
	if (ck->rec)
		mcrpc__ckpt__free_unpacked(ck->rec, NULL);
	free(ck->nh);
	free(ck->inflight);
	free(ck);
}

void mst_ckpt_free(struct master *m)
{
	struct mst_ckpts *s = m->ckpts;

	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		ckpt_free(s->by_id[i]);
	free(s->by_name);
	free(s->by_id);
	free(s);
	m->ckpts = NULL;
}

/* A checkpoint from its packed record: NULL when out of memory or the
 * record does not decode. */
static struct ckpt *ckpt_new(const void *rec, size_t len)
{
	struct ckpt *ck = calloc(1, sizeof(*ck));
	uint32_t n;

	if (!ck)
		return NULL;
	ck->rec = mcrpc__ckpt__unpack(NULL, len, rec);
	if (!ck->rec || !ck->rec->name || !ck->rec->link) {
		ckpt_free(ck);
		return NULL;
	}
	n = ck->rec->shards;
	ck->nbytes = (n + 7) / 8;
	ck->nh = calloc(n ? n : 1, sizeof(*ck->nh));
	ck->inflight = calloc(n ? n : 1, sizeof(*ck->inflight));
	if (!ck->nh || !ck->inflight) {
		ckpt_free(ck);
		return NULL;
	}
	return ck;
}

/* ---- holders ---------------------------------------------------------------- */

static struct holder *holder_find(struct ckpt *ck, const uint8_t *client)
{
	for (struct holder *h = ck->holders; h; h = h->next)
		if (same_id(h->client, client))
			return h;
	return NULL;
}

static void drop_source(struct ckpt *ck, struct holder *h, size_t i)
{
	if (ck->inflight[h->src[i].shard])
		ck->inflight[h->src[i].shard]--;
	h->src[i] = h->src[--h->n_src];
}

static void prune(struct ckpt *ck, struct holder *h, uint64_t now)
{
	for (size_t i = 0; i < h->n_src;)
		if (now >= h->src[i].expires)
			drop_source(ck, h, i);
		else
			i++;
}

/* The holder's bitmap becomes bm (ck->nbytes bytes, bits past the last
 * shard clear): the per-shard counts follow. */
static uint32_t apply_bitmap(struct ckpt *ck, struct holder *h,
			     const uint8_t *bm)
{
	uint32_t count = 0;

	for (size_t b = 0; b < ck->nbytes; b++) {
		uint8_t was = h ? h->bitmap[b] : 0, now = bm[b];
		count += (uint32_t)__builtin_popcount(now);
		if (was == now)
			continue;
		for (unsigned k = 0; k < 8; k++) {
			uint32_t i = (uint32_t)(b * 8 + k);
			if ((was >> k & 1) && !(now >> k & 1))
				ck->nh[i]--;
			else if (!(was >> k & 1) && (now >> k & 1))
				ck->nh[i]++;
		}
	}
	return count;
}

static void holder_unlink(struct ckpt *ck, struct holder *h)
{
	struct holder **pp = &ck->holders;

	while (*pp != h)
		pp = &(*pp)->next;
	*pp = h->next;
	while (h->n_src)
		drop_source(ck, h, 0);
	for (uint32_t i = 0; i < ck->rec->shards; i++)
		if (bit(h->bitmap, ck->nbytes, i))
			ck->nh[i]--;
}

static int txn_end(struct master *m, int rc)
{
	if (rc) {
		mst_db_rollback(m->db);
		return rc;
	}
	return mst_db_commit(m->db);
}

static uint32_t popcount(const uint8_t *bm, size_t len)
{
	uint32_t n = 0;

	for (size_t i = 0; i < len; i++)
		n += (uint32_t)__builtin_popcount(bm[i]);
	return n;
}

/* A change of one holder record, prepared (memory allocated) before it
 * is written, applied once it is committed. */
struct hchange {
	const uint8_t *client;
	struct holder *h; /* the record now, NULL none */
	struct holder *fresh; /* allocated for a new record */
	uint8_t *bitmap; /* ck->nbytes; NULL: the record goes */
	char *endpoint;
	bool publisher;
};

static void hc_free(struct hchange *hc)
{
	free(hc->fresh);
	free(hc->bitmap);
	free(hc->endpoint);
}

/* client's record of ck to become bm (ck->nbytes bytes), serving at
 * endpoint (NULL: where it did); no shard left: the record goes. */
static int hc_prepare(struct ckpt *ck, const uint8_t *client,
		      const char *endpoint, const uint8_t *bm,
		      struct hchange *hc)
{
	*hc = (struct hchange){ .client = client,
				.h = holder_find(ck, client) };
	if (!popcount(bm, ck->nbytes))
		return 0;
	if (!endpoint)
		endpoint = hc->h ? hc->h->endpoint : "";
	hc->publisher = ck->rec->publisher.len == MST_ID_LEN &&
			same_id(ck->rec->publisher.data, client);
	hc->bitmap = malloc(ck->nbytes);
	hc->endpoint = strdup(endpoint);
	if (!hc->h)
		hc->fresh = calloc(1, sizeof(*hc->fresh));
	if (!hc->bitmap || !hc->endpoint || (!hc->h && !hc->fresh)) {
		hc_free(hc);
		*hc = (struct hchange){ .client = client };
		return MC_STORE_INTERNAL_ERROR;
	}
	memcpy(hc->bitmap, bm, ck->nbytes);
	return 0;
}

/* Inside the caller's transaction. */
static int hc_write(struct master *m, struct ckpt *ck, struct hchange *hc)
{
	if (!hc->bitmap)
		return hc->h ? mst_db_holder_del(m->db, ck->rec->id,
						 hc->client) :
			       0;
	return mst_db_holder_put(m->db, ck->rec->id, hc->client, hc->endpoint,
				 hc->publisher, hc->bitmap, ck->nbytes);
}

static void hc_apply(struct ckpt *ck, struct hchange *hc)
{
	struct holder *h = hc->h;

	if (!hc->bitmap) {
		if (h) {
			holder_unlink(ck, h);
			holder_free(h);
		}
		return;
	}
	if (!h) {
		h = hc->fresh;
		hc->fresh = NULL;
		memcpy(h->client, hc->client, MST_ID_LEN);
		h->next = ck->holders;
		ck->holders = h;
	}
	h->shards = apply_bitmap(ck, h->bitmap ? h : NULL, hc->bitmap);
	free(h->bitmap);
	h->bitmap = hc->bitmap;
	hc->bitmap = NULL;
	free(h->endpoint);
	h->endpoint = hc->endpoint;
	hc->endpoint = NULL;
	h->publisher = hc->publisher;
	h->restored = false;
}

/* One holder record changed in its own transaction (hc_prepare). */
static int holder_set(struct master *m, struct ckpt *ck, const uint8_t *client,
		      const char *endpoint, const uint8_t *bm)
{
	struct hchange hc;
	int rc = hc_prepare(ck, client, endpoint, bm, &hc);

	if (!rc && !hc.h && !hc.bitmap)
		return 0; /* no record, and none to make */
	if (!rc)
		rc = mst_db_begin(m->db);
	if (!rc)
		rc = txn_end(m, hc_write(m, ck, &hc));
	if (!rc)
		hc_apply(ck, &hc);
	hc_free(&hc);
	return rc;
}

/* ---- validation ------------------------------------------------------------ */

static int cmp_path(const void *a, const void *b)
{
	return strcmp((*(Mcrpc__CkptFile *const *)a)->path,
		      (*(Mcrpc__CkptFile *const *)b)->path);
}

/* The request's files made canonical into out[] (first_shard numbered,
 * size only for regular files, link only for symlinks): 0, -600 or
 * MC_STORE_INTERNAL_ERROR. */
static int files_of(const Mcrpc__Ckpt *in, uint64_t ss, Mcrpc__CkptFile *out,
		    uint64_t *shards, uint64_t *total)
{
	Mcrpc__CkptFile **sorted;
	int rc = 0;

	*shards = *total = 0;
	for (size_t i = 0; i < in->n_files; i++) {
		const Mcrpc__CkptFile *f = in->files[i];
		Mcrpc__CkptFile *o = &out[i];
		mcrpc__ckpt_file__init(o);
		if (!mc_ckpt_path_ok(f->path))
			return MC_STORE_INVALID_PARAMS;
		o->path = f->path;
		o->mode = f->mode;
		o->mtime_ns = f->mtime_ns;
		switch (f->mode & S_IFMT) {
		case S_IFREG:
			o->size = f->size;
			o->first_shard = (uint32_t)*shards;
			*shards += mc_ckpt_nshards(f->size, ss);
			if (*total + f->size < *total || *shards > MAX_SHARDS)
				return MC_STORE_INVALID_PARAMS;
			*total += f->size;
			break;
		case S_IFLNK:
			if (!f->link || !*f->link ||
			    strlen(f->link) > MC_CKPT_PATH_MAX)
				return MC_STORE_INVALID_PARAMS;
			o->link = f->link;
			break;
		case S_IFDIR:
			break;
		default:
			return MC_STORE_INVALID_PARAMS;
		}
	}
	sorted = malloc((in->n_files ? in->n_files : 1) * sizeof(*sorted));
	if (!sorted)
		return MC_STORE_INTERNAL_ERROR;
	for (size_t i = 0; i < in->n_files; i++)
		sorted[i] = &out[i];
	qsort(sorted, in->n_files, sizeof(*sorted), cmp_path);
	for (size_t i = 1; !rc && i < in->n_files; i++)
		if (!strcmp(sorted[i - 1]->path, sorted[i]->path))
			rc = MC_STORE_INVALID_PARAMS;
	free(sorted);
	return rc;
}

/* ---- create and remove ---------------------------------------------------- */

/* The record of a valid request, packed into *buf. */
static int pack_record(struct master *m, const Mcrpc__CkptCreateRequest *q,
		       uint8_t **buf, size_t *len)
{
	const Mcrpc__Ckpt *in = q->ckpt;
	bool is_link = in->link && *in->link;
	uint64_t ss = in->shard_size ? in->shard_size : DEFAULT_SHARD;
	uint64_t shards = 0, total = 0;
	Mcrpc__CkptFile *files = NULL, **fp = NULL;
	Mcrpc__Ckpt r = MCRPC__CKPT__INIT;
	int rc = 0;

	if (is_link ?
		    in->n_files || strlen(in->link) > MC_CKPT_PATH_MAX :
		    ss < MIN_SHARD || ss > MAX_SHARD || in->n_files > MAX_FILES)
		return MC_STORE_INVALID_PARAMS;
	if (in->n_files) {
		files = calloc(in->n_files, sizeof(*files));
		fp = calloc(in->n_files, sizeof(*fp));
		if (!files || !fp) {
			rc = MC_STORE_INTERNAL_ERROR;
			goto out;
		}
		rc = files_of(in, ss, files, &shards, &total);
		for (size_t i = 0; i < in->n_files; i++)
			fp[i] = &files[i];
	}
	if (!rc && in->n_crcs != shards)
		rc = MC_STORE_INVALID_PARAMS;
	if (rc)
		goto out;
	r.id = m->ckpts->last_id + 1;
	r.name = in->name;
	r.shard_size = is_link ? 0 : ss;
	r.total_size = total;
	r.n_files = in->n_files;
	r.files = fp;
	r.n_crcs = in->n_crcs;
	r.crcs = in->crcs;
	r.created_ns = mst_wall_ns();
	r.publisher = q->client_id;
	r.link = is_link ? in->link : (char *)"";
	r.shards = (uint32_t)shards;
	/* What `ls` shows as files: regular ones, not the directories and
	 * links among the entries. */
	for (size_t i = 0; i < in->n_files; i++)
		r.nfiles += S_ISREG(files[i].mode);
	*len = mcrpc__ckpt__get_packed_size(&r);
	*buf = malloc(*len ? *len : 1);
	if (!*buf)
		rc = MC_STORE_INTERNAL_ERROR;
	else
		mcrpc__ckpt__pack(&r, *buf);
out:
	free(files);
	free(fp);
	return rc;
}

int mst_ckpt_create(struct master *m, const Mcrpc__CkptCreateRequest *q,
		    uint64_t *id)
{
	struct mst_ckpts *s = set_of(m);
	const Mcrpc__Ckpt *in = q->ckpt;
	struct ckpt *old, *ck;
	uint8_t *buf = NULL, *all;
	struct hchange hc;
	size_t len = 0;
	bool hold;
	int rc;

	if (!s || reserve(s))
		return MC_STORE_INTERNAL_ERROR;
	if (!in || q->client_id.len != MST_ID_LEN || !mc_ckpt_name_ok(in->name))
		return MC_STORE_INVALID_PARAMS;
	rc = pack_record(m, q, &buf, &len);
	if (rc)
		return rc;
	old = by_name(m, in->name);
	if (old && !(q->replace && *old->rec->link && in->link && *in->link)) {
		free(buf);
		return MC_STORE_OBJECT_ALREADY_EXISTS;
	}
	ck = ckpt_new(buf, len);
	if (!ck) {
		free(buf);
		return MC_STORE_INTERNAL_ERROR;
	}
	hold = q->endpoint && *q->endpoint && ck->rec->shards;
	hc = (struct hchange){ 0 };
	if (hold) {
		all = malloc(ck->nbytes);
		if (all) {
			memset(all, 0xff, ck->nbytes);
			if (ck->rec->shards % 8)
				all[ck->nbytes - 1] =
					(uint8_t)((1u << ck->rec->shards % 8) -
						  1);
		}
		rc = all ? hc_prepare(ck, q->client_id.data, q->endpoint, all,
				      &hc) :
			   MC_STORE_INTERNAL_ERROR;
		free(all);
	}
	if (!rc)
		rc = mst_db_begin(m->db);
	if (!rc) {
		if (old)
			rc = mst_db_ckpt_del(m->db, old->rec->id);
		if (!rc)
			rc = mst_db_ckpt_put(m->db, ck->rec->id, ck->rec->name,
					     buf, len, ck->rec->created_ns);
		if (!rc && hold)
			rc = hc_write(m, ck, &hc);
		rc = txn_end(m, rc);
	}
	free(buf);
	if (rc) {
		hc_free(&hc);
		ckpt_free(ck);
		return rc;
	}
	if (old) {
		unlink_ckpt(s, old);
		ckpt_free(old);
	}
	insert(s, ck);
	s->last_id = ck->rec->id;
	*id = ck->rec->id;
	if (hold) {
		hc_apply(ck, &hc);
		hc_free(&hc);
		(void)mst_client_touch(m, q->client_id.data);
	}
	mst_feed_emit(m, MCRPC__EVENT_TYPE__EV_CKPT_PUT, ck->rec->name,
		      strlen(ck->rec->name), NULL, 0, 0);
	return 0;
}

int mst_ckpt_remove(struct master *m, const char *name)
{
	struct ckpt *ck = name ? by_name(m, name) : NULL;
	int rc;

	if (!ck)
		return MC_STORE_OBJECT_NOT_FOUND;
	rc = mst_db_begin(m->db);
	if (!rc)
		rc = txn_end(m, mst_db_ckpt_del(m->db, ck->rec->id));
	if (rc)
		return rc;
	unlink_ckpt(m->ckpts, ck);
	mst_feed_emit(m, MCRPC__EVENT_TYPE__EV_CKPT_REMOVE, ck->rec->name,
		      strlen(ck->rec->name), NULL, 0, 0);
	ckpt_free(ck);
	return 0;
}

/* ---- list and info ------------------------------------------------------ */

/* A copy of the record for a response: counts filled, files and crcs
 * only when full. */
static Mcrpc__Ckpt *ckpt_msg(struct arena *a, struct ckpt *ck, bool full)
{
	Mcrpc__Ckpt *c = arena_alloc(a, sizeof(*c));

	if (!c)
		return NULL;
	*c = *ck->rec;
	if (!full) {
		c->n_files = c->n_crcs = 0;
		c->files = NULL;
		c->crcs = NULL;
	}
	c->holders = c->lost_shards = 0;
	for (struct holder *h = ck->holders; h; h = h->next)
		c->holders += h->shards > 0;
	for (uint32_t i = 0; i < ck->rec->shards; i++)
		c->lost_shards += !ck->nh[i];
	return c;
}

int mst_ckpt_list(struct master *m, struct arena *a,
		  const Mcrpc__CkptListRequest *q, Mcrpc__CkptListResponse *r)
{
	struct mst_ckpts *s = set_of(m);
	const char *prefix = q->prefix ? q->prefix : "";
	size_t pl = strlen(prefix), limit = q->limit ? q->limit : 1000, i;

	if (!s)
		return MC_STORE_INTERNAL_ERROR;
	i = name_bound(s, prefix, false);
	if (q->start_after && *q->start_after) {
		size_t j = name_bound(s, q->start_after, true);
		i = j > i ? j : i;
	}
	r->ckpts = arena_alloc(a, sizeof(*r->ckpts) *
					  (limit < s->n ? limit : s->n + 1));
	if (!r->ckpts)
		return MC_STORE_INTERNAL_ERROR;
	for (; i < s->n && !strncmp(s->by_name[i]->rec->name, prefix, pl);
	     i++) {
		if (r->n_ckpts == limit) {
			r->truncated = true;
			break;
		}
		r->ckpts[r->n_ckpts] = ckpt_msg(a, s->by_name[i], false);
		if (!r->ckpts[r->n_ckpts++])
			return MC_STORE_INTERNAL_ERROR;
	}
	return 0;
}

int mst_ckpt_info(struct master *m, struct arena *a,
		  const Mcrpc__CkptInfoRequest *q, Mcrpc__CkptInfoResponse *r)
{
	struct ckpt *ck = q->name && *q->name ? by_name(m, q->name) :
						by_id(m, q->id);
	uint64_t now = mst_now();
	size_t n = 0;

	if (!ck)
		return MC_STORE_OBJECT_NOT_FOUND;
	r->ckpt = ckpt_msg(a, ck, true);
	if (!r->ckpt)
		return MC_STORE_INTERNAL_ERROR;
	if (!q->holders)
		return 0;
	for (struct holder *h = ck->holders; h; h = h->next)
		n++;
	r->ckpt->holder_list = arena_alloc(a, (n + 1) * sizeof(void *));
	if (!r->ckpt->holder_list)
		return MC_STORE_INTERNAL_ERROR;
	for (struct holder *h = ck->holders; h; h = h->next) {
		Mcrpc__CkptHolder *x = arena_alloc(a, sizeof(*x));
		if (!x)
			return MC_STORE_INTERNAL_ERROR;
		mcrpc__ckpt_holder__init(x);
		prune(ck, h, now);
		x->client_id.data = h->client;
		x->client_id.len = MST_ID_LEN;
		x->endpoint = h->endpoint;
		x->publisher = h->publisher;
		x->shards = h->shards;
		x->bitmap.data = h->bitmap;
		x->bitmap.len = ck->nbytes;
		x->active = (uint32_t)h->n_src;
		x->served_bytes = h->served_bytes;
		r->ckpt->holder_list[r->ckpt->n_holder_list++] = x;
	}
	return 0;
}

/* ---- holding and sources ------------------------------------------------- */

/* A bitmap of ck from a request's: NULL (code in *rc) when it names a
 * shard past the last. */
static uint8_t *bitmap_of(struct ckpt *ck, const uint8_t *base,
			  const ProtobufCBinaryData *b, bool drop, int *rc)
{
	uint8_t *bm = calloc(ck->nbytes ? ck->nbytes : 1, 1);

	*rc = bm ? 0 : MC_STORE_INTERNAL_ERROR;
	if (!bm)
		return NULL;
	if (base)
		memcpy(bm, base, ck->nbytes);
	for (size_t i = 0; i < b->len; i++) {
		uint8_t v = b->data[i];
		if (v && (i >= ck->nbytes ||
			  ((uint64_t)i * 8 + 8 > ck->rec->shards &&
			   v >> (ck->rec->shards - i * 8)))) {
			*rc = MC_STORE_INVALID_PARAMS;
			free(bm);
			return NULL;
		}
		if (i < ck->nbytes)
			bm[i] = drop ? bm[i] & ~v : bm[i] | v;
	}
	return bm;
}

int mst_ckpt_hold(struct master *m, const Mcrpc__CkptHoldRequest *q)
{
	struct ckpt *ck = by_id(m, q->id);
	struct holder *h;
	uint8_t *bm;
	int rc;

	if (q->client_id.len != MST_ID_LEN ||
	    (!q->drop && (!q->endpoint || !*q->endpoint)))
		return MC_STORE_INVALID_PARAMS;
	if (!ck)
		return MC_STORE_OBJECT_NOT_FOUND;
	h = holder_find(ck, q->client_id.data);
	if (q->drop && !q->bitmap.len) {
		bm = calloc(ck->nbytes ? ck->nbytes : 1, 1);
		rc = bm ? 0 : MC_STORE_INTERNAL_ERROR;
	} else {
		bm = bitmap_of(ck, h ? h->bitmap : NULL, &q->bitmap, q->drop,
			       &rc);
	}
	if (!rc && (h || !q->drop))
		rc = holder_set(m, ck, q->client_id.data,
				q->drop ? NULL : q->endpoint, bm);
	free(bm);
	if (!rc && !q->drop)
		(void)mst_client_touch(m, q->client_id.data);
	return rc;
}

static bool excluded(const Mcrpc__CkptSourceRequest *q, const char *ep)
{
	for (size_t i = 0; i < q->n_exclude; i++)
		if (q->exclude[i] && !strcmp(q->exclude[i], ep))
			return true;
	return false;
}

/* The best of the shard's holders by the proto's rule: class 0 a
 * non-publisher with a free slot, 1 the publisher with a free slot, 2
 * any (only when full is allowed); least active first, ties at random.
 * *eligible: whether any holder could serve it at all. */
static struct holder *pick(struct master *m, struct ckpt *ck,
			   const Mcrpc__CkptSourceRequest *q, uint32_t shard,
			   bool full, uint64_t now, bool *eligible)
{
	uint32_t slots = m->cfg.ckpt_holder_slots ? m->cfg.ckpt_holder_slots :
						    4;
	const uint8_t *self =
		q->client_id.len == MST_ID_LEN ? q->client_id.data : NULL;
	struct holder *best[3] = { 0 };
	uint64_t ties[3] = { 0 };

	*eligible = false;
	for (struct holder *h = ck->holders; h; h = h->next) {
		int k;
		if (!bit(h->bitmap, ck->nbytes, shard) ||
		    (self && same_id(self, h->client)) ||
		    now < h->unreachable_until || excluded(q, h->endpoint))
			continue;
		*eligible = true;
		k = h->n_src >= slots ? 2 : h->publisher ? 1 : 0;
		for (; k < 3; k += k ? 1 : 2) {
			if (!best[k] || h->n_src < best[k]->n_src) {
				best[k] = h;
				ties[k] = 1;
			} else if (h->n_src == best[k]->n_src &&
				   mst_rand(m) % ++ties[k] == 0) {
				best[k] = h;
			}
		}
	}
	return best[0] ? best[0] : best[1] ? best[1] : full ? best[2] : NULL;
}

/* Is shard on its way to a reader other than the caller (a holder of
 * it soon)? */
static bool coming(const struct ckpt *ck, uint32_t shard,
		   const ProtobufCBinaryData *caller)
{
	if (!ck->inflight[shard])
		return false;
	for (const struct holder *h = ck->holders; h; h = h->next)
		for (size_t i = 0; i < h->n_src; i++)
			if (h->src[i].shard == shard &&
			    (caller->len != MST_ID_LEN ||
			     !same_id(h->src[i].reader, caller->data)))
				return true;
	return false;
}

int mst_ckpt_source(struct master *m, const Mcrpc__CkptSourceRequest *q,
		    Mcrpc__CkptSourceResponse *r)
{
	struct ckpt *ck = by_id(m, q->id);
	uint64_t now = mst_now(), best_rarity = 0, ties = 0;
	struct holder *h = NULL;
	uint32_t shard = 0;
	bool wanted = false, live = false, eligible;
	struct source *src;

	if (!ck)
		return MC_STORE_OBJECT_NOT_FOUND;
	for (struct holder *x = ck->holders; x; x = x->next)
		prune(ck, x, now);
	if (!q->any) {
		if (q->shard >= ck->rec->shards)
			return MC_STORE_INVALID_PARAMS;
		shard = q->shard;
		h = pick(m, ck, q, shard, false, now, &eligible);
		if (!h && !eligible)
			return MC_STORE_REPLICA_NOT_FOUND;
		if (!h && coming(ck, shard, &q->client_id)) {
			/* Every holder is full, and the shard is on its way
			 * to another reader: a holder with free slots soon,
			 * rather than one more share of a saturated link. */
			r->retry_ms = RETRY_MS;
			return 0;
		}
		if (!h)
			h = pick(m, ck, q, shard, true, now, &eligible);
	} else {
		for (uint32_t i = 0; i < ck->rec->shards; i++) {
			struct holder *b;
			uint64_t rarity;
			if (bit(q->have.data, q->have.len, i))
				continue;
			wanted = true;
			b = pick(m, ck, q, i, false, now, &eligible);
			live |= eligible;
			if (!b)
				continue;
			rarity = (uint64_t)ck->nh[i] + ck->inflight[i];
			if (!h || rarity < best_rarity ||
			    (rarity == best_rarity && b->n_src < h->n_src)) {
				h = b;
				shard = i;
				best_rarity = rarity;
				ties = 1;
			} else if (rarity == best_rarity &&
				   b->n_src == h->n_src &&
				   mst_rand(m) % ++ties == 0) {
				h = b;
				shard = i;
			}
		}
		if (!wanted) {
			r->done = true;
			return 0;
		}
		if (!live)
			return MC_STORE_REPLICA_NOT_FOUND;
		if (!h) {
			r->retry_ms = RETRY_MS;
			return 0;
		}
	}
	if (h->n_src == h->cap_src) {
		size_t cap = h->cap_src ? 2 * h->cap_src : 4;
		src = realloc(h->src, cap * sizeof(*src));
		if (!src)
			return MC_STORE_INTERNAL_ERROR;
		h->src = src;
		h->cap_src = cap;
	}
	src = &h->src[h->n_src++];
	*src = (struct source){ .expires = now + SOURCE_TTL_MS,
				.shard = shard };
	if (q->client_id.len == MST_ID_LEN)
		memcpy(src->reader, q->client_id.data, MST_ID_LEN);
	ck->inflight[shard]++;
	r->shard = shard;
	r->endpoint = h->endpoint;
	r->holder.data = h->client;
	r->holder.len = MST_ID_LEN;
	return 0;
}

/* The source of shard handed to reader from h is done. */
static void source_done(struct ckpt *ck, struct holder *h, uint32_t shard,
			const ProtobufCBinaryData *reader)
{
	size_t any = h->n_src;

	for (size_t i = 0; i < h->n_src; i++) {
		if (h->src[i].shard != shard)
			continue;
		if (reader->len == MST_ID_LEN &&
		    same_id(h->src[i].reader, reader->data)) {
			drop_source(ck, h, i);
			return;
		}
		any = i;
	}
	if (any < h->n_src)
		drop_source(ck, h, any);
}

int mst_ckpt_done(struct master *m, const Mcrpc__CkptDoneRequest *q)
{
	struct ckpt *ck = by_id(m, q->id);
	bool hold = q->hold_endpoint && *q->hold_endpoint;
	struct holder *h;
	uint8_t *bm;
	int rc = 0;

	if (q->holder.len != MST_ID_LEN || q->result < 0 || q->result > 2 ||
	    (hold && (q->result || q->client_id.len != MST_ID_LEN)))
		return MC_STORE_INVALID_PARAMS;
	if (!ck)
		return MC_STORE_OBJECT_NOT_FOUND;
	if (q->shard >= ck->rec->shards)
		return MC_STORE_INVALID_PARAMS;
	h = holder_find(ck, q->holder.data);
	if (h) {
		source_done(ck, h, q->shard, &q->client_id);
		if (q->result == 0) {
			h->served_bytes += q->bytes;
		} else if (q->result == 1) {
			h->unreachable_until = mst_now() + UNREACHABLE_MS;
		} else {
			bm = malloc(ck->nbytes);
			if (!bm)
				return MC_STORE_INTERNAL_ERROR;
			memcpy(bm, h->bitmap, ck->nbytes);
			bm[q->shard / 8] &= (uint8_t) ~(1u << (q->shard % 8));
			rc = holder_set(m, ck, h->client, NULL, bm);
			free(bm);
		}
	}
	if (rc || !hold)
		return rc;
	h = holder_find(ck, q->client_id.data);
	bm = calloc(ck->nbytes, 1);
	if (!bm)
		return MC_STORE_INTERNAL_ERROR;
	if (h)
		memcpy(bm, h->bitmap, ck->nbytes);
	bm[q->shard / 8] |= (uint8_t)(1u << (q->shard % 8));
	rc = holder_set(m, ck, q->client_id.data, q->hold_endpoint, bm);
	free(bm);
	if (!rc)
		(void)mst_client_touch(m, q->client_id.data);
	return rc;
}

/* ---- clients, restore ------------------------------------------------------ */

/* Drop the holders that match (persisted in one transaction; memory goes
 * either way: their client is gone). */
static void drop_holders(struct master *m,
			 bool (*match)(struct master *m, struct holder *h,
				       const void *arg),
			 const void *arg, const char *why)
{
	struct mst_ckpts *s = m->ckpts;
	size_t n = 0;
	int rc;

	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		for (struct holder *h = s->by_id[i]->holders; h; h = h->next)
			n += match(m, h, arg);
	if (!n)
		return;
	rc = mst_db_begin(m->db);
	for (size_t i = 0; !rc && i < s->n; i++)
		for (struct holder *h = s->by_id[i]->holders; !rc && h;
		     h = h->next)
			if (match(m, h, arg))
				rc = mst_db_holder_del(
					m->db, s->by_id[i]->rec->id, h->client);
	rc = txn_end(m, rc);
	if (rc)
		mc_log_warn("master",
			    "%zu checkpoint holder records (%s) could not be "
			    "deleted: after a restart they wait for their "
			    "client again",
			    n, why);
	for (size_t i = 0; i < s->n; i++) {
		struct ckpt *ck = s->by_id[i];
		for (struct holder *h = ck->holders, *next; h; h = next) {
			next = h->next;
			if (match(m, h, arg)) {
				holder_unlink(ck, h);
				holder_free(h);
			}
		}
	}
}

static bool of_client(struct master *m, struct holder *h, const void *arg)
{
	(void)m;
	return same_id(h->client, arg);
}

static bool unclaimed(struct master *m, struct holder *h, const void *arg)
{
	(void)arg;
	if (h->restored && mst_client_find(m, h->client))
		h->restored = false;
	return h->restored;
}

void mst_ckpt_client_gone(struct master *m, const uint8_t *client)
{
	drop_holders(m, of_client, client, "client gone");
}

void mst_ckpt_tick(struct master *m, uint64_t now)
{
	struct mst_ckpts *s = m->ckpts;

	if (!s || !s->restoring || now <= s->restore_until)
		return;
	s->restoring = false;
	drop_holders(m, unclaimed, NULL, "client not back after a restart");
}

bool mst_ckpt_restored_client(struct master *m, const uint8_t *client)
{
	struct mst_ckpts *s = m->ckpts;

	if (!s || !s->restoring)
		return false;
	for (size_t i = 0; i < s->n; i++)
		for (struct holder *h = s->by_id[i]->holders; h; h = h->next)
			if (h->restored && same_id(h->client, client))
				return true;
	return false;
}

static int on_ckpt(void *arg, uint64_t id, const void *rec, size_t len)
{
	struct master *m = arg;
	struct ckpt *ck;

	if (reserve(m->ckpts))
		return MC_STORE_INTERNAL_ERROR;
	ck = ckpt_new(rec, len);
	if (!ck || ck->rec->id != id || by_name(m, ck->rec->name)) {
		mc_log_warn("master",
			    "checkpoint record %llu unreadable: "
			    "skipped",
			    (unsigned long long)id);
		if (ck)
			ckpt_free(ck);
		return 0;
	}
	insert(m->ckpts, ck);
	return 0;
}

static int on_holder(void *arg, const struct mst_db_holder *d)
{
	struct master *m = arg;
	struct ckpt *ck = by_id(m, d->ckpt);
	struct holder *h;

	if (!ck || d->len > ck->nbytes || holder_find(ck, d->client))
		return 0;
	h = calloc(1, sizeof(*h));
	if (!h || !(h->bitmap = calloc(ck->nbytes ? ck->nbytes : 1, 1)) ||
	    !(h->endpoint = strdup(d->endpoint))) {
		if (h)
			holder_free(h);
		return MC_STORE_INTERNAL_ERROR;
	}
	memcpy(h->client, d->client, MST_ID_LEN);
	memcpy(h->bitmap, d->bitmap, d->len);
	h->publisher = d->publisher;
	h->restored = true;
	h->shards = apply_bitmap(ck, NULL, h->bitmap);
	h->next = ck->holders;
	ck->holders = h;
	m->ckpts->restoring = true;
	return 0;
}

int mst_ckpt_restore(struct master *m)
{
	struct mst_ckpts *s = set_of(m);
	int rc;

	if (!s)
		return MC_STORE_INTERNAL_ERROR;
	rc = mst_db_ckpt_load(m->db, &s->last_id, on_ckpt, on_holder, m);
	if (!rc && s->restoring) {
		s->restore_until = mst_now() + m->cfg.restore_grace_ms;
		mc_log_notice("master",
			      "restored %zu checkpoints; their holders have "
			      "%llu ms to come back",
			      s->n,
			      (unsigned long long)m->cfg.restore_grace_ms);
	}
	return rc;
}
