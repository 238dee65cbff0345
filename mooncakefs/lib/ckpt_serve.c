/* SPDX-License-Identifier: Apache-2.0 */
/* Served checkpoints and their CkptRead server (see ckpt_serve.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_crc32c.h"
#include "mc_parse.h"
#include "ckpt_master.h"
#include "ckpt_serve.h"
#include "mc_log.h"
#include "mc_rpc.h"
#include "mc_rpc_server.h"
#include "mooncake/mc_err.h"

#define CHECK_CHUNK (1u << 20)

struct mcs_ckpt_srv {
	struct mc_rpc_server *rpc;
	struct mcs_master *master;
	char endpoint[300];
	pthread_mutex_t lock;
	struct mcs_ckpt_served *list;
};

static void free_parts(struct mcs_ckpt_served *sv)
{
	free(sv->fds);
	free(sv->mem);
	free(sv->st);
	free(sv->have);
	free(sv->verified);
	free(sv->root);
	free(sv);
}

struct mcs_ckpt_served *mcs_ckpt_served_new(struct mcs_ckpt_layout *lay,
					    const char *root, bool writable)
{
	struct mcs_ckpt_served *sv = calloc(1, sizeof(*sv));
	size_t nf = lay->nfiles ? lay->nfiles : 1;
	size_t bl = mcs_bitmap_len(lay->nshards) + 1;

	if (!sv)
		return NULL;
	sv->fds = malloc(nf * sizeof(*sv->fds));
	sv->mem = calloc(nf, sizeof(*sv->mem));
	sv->st = calloc(nf, sizeof(*sv->st));
	sv->have = calloc(bl, 1);
	sv->verified = calloc(bl, 1);
	sv->root = root ? strdup(root) : NULL;
	if (!sv->fds || !sv->mem || !sv->st || !sv->have || !sv->verified ||
	    (root && !sv->root)) {
		free_parts(sv);
		return NULL;
	}
	for (size_t i = 0; i < nf; i++)
		sv->fds[i] = -1;
	sv->lay = lay;
	sv->writable = writable;
	pthread_mutex_init(&sv->lock, NULL);
	atomic_init(&sv->refs, 1);
	return sv;
}

void mcs_ckpt_served_put(struct mcs_ckpt_served *sv)
{
	if (!sv || atomic_fetch_sub(&sv->refs, 1) != 1)
		return;
	for (size_t i = 0; i < sv->lay->nfiles; i++)
		if (sv->fds[i] >= 0)
			close(sv->fds[i]);
	if (sv->owns_root && sv->root)
		mcs_ckpt_rm_tree(sv->root);
	pthread_mutex_destroy(&sv->lock);
	mcs_ckpt_layout_free(sv->lay);
	free_parts(sv);
}

/*
 * Under sv->lock: an fd of file (-errno when it cannot be opened); *tmp
 * when the caller closes it after use (MCS_CKPT_OPEN_FILES are open).
 * Paths are the layout's (checked: no "..", no empty component) under
 * root; a file replaced by a symlink is not followed.
 */
static int file_fd(struct mcs_ckpt_served *sv, uint32_t file, bool *tmp)
{
	char path[PATH_MAX];
	int fd;

	*tmp = false;
	if (sv->fds[file] >= 0)
		return sv->fds[file];
	if (!sv->root)
		return -EBADF;
	if (mcs_ckpt_join(path, sv->root, sv->lay->files[file].path))
		return -ENAMETOOLONG;
	fd = open(path,
		  (sv->writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (sv->nopen >= MCS_CKPT_OPEN_FILES) {
		*tmp = true;
		return fd;
	}
	sv->nopen++;
	sv->fds[file] = fd;
	return fd;
}

void mcs_ckpt_served_mark(struct mcs_ckpt_served *sv, uint32_t shard,
			  bool verified)
{
	const struct mcs_ckpt_shard *sh = &sv->lay->shards[shard];

	pthread_mutex_lock(&sv->lock);
	mcs_bit_set(sv->have, shard);
	if (verified) {
		bool tmp;
		int fd = sv->mem[sh->file] ? -1 : file_fd(sv, sh->file, &tmp);
		mcs_bit_set(sv->verified, shard);
		if (fd >= 0) {
			/* Our own write changed the file: the other shards'
			 * checks stand. */
			(void)fstat(fd, &sv->st[sh->file]);
			if (tmp)
				close(fd);
		}
	}
	pthread_mutex_unlock(&sv->lock);
}

uint8_t *mcs_ckpt_served_mem(struct mcs_ckpt_served *sv, uint32_t shard)
{
	const struct mcs_ckpt_shard *sh = &sv->lay->shards[shard];

	return sv->mem[sh->file] ? sv->mem[sh->file] + sh->off : NULL;
}

/* pread or pwrite all of len bytes at off of fd: 0, -errno, MC_ECHECKSUM
 * when the file ends first (it got shorter than published). */
static int full_io(int fd, bool wr, void *buf, size_t len, off_t off)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = wr ? pwrite(fd, (char *)buf + done, len - done,
					off + (off_t)done) :
				 pread(fd, (char *)buf + done, len - done,
				       off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return MC_ECHECKSUM;
		done += (size_t)n;
	}
	return 0;
}

static int raw_io(struct mcs_ckpt_served *sv, const struct mcs_ckpt_shard *sh,
		  bool wr, uint64_t off, uint32_t len, void *buf)
{
	bool tmp;
	int fd, rc;

	if (sv->mem[sh->file]) {
		uint8_t *m = sv->mem[sh->file] + sh->off + off;
		if (wr) {
			if (m != buf)
				memmove(m, buf, len);
		} else {
			memcpy(buf, m, len);
		}
		return 0;
	}
	pthread_mutex_lock(&sv->lock);
	fd = file_fd(sv, sh->file, &tmp);
	pthread_mutex_unlock(&sv->lock);
	if (fd < 0)
		return fd;
	/* A cached fd stays open until the served checkpoint is freed, and
	 * that waits for our reference: safe to use unlocked. */
	rc = full_io(fd, wr, buf, len, (off_t)(sh->off + off));
	if (tmp)
		close(fd);
	return rc;
}

int mcs_ckpt_served_write(struct mcs_ckpt_served *sv, uint32_t shard,
			  const void *buf)
{
	const struct mcs_ckpt_shard *sh = &sv->lay->shards[shard];

	if (!sv->mem[sh->file] && !sv->writable)
		return -EBADF;
	return raw_io(sv, sh, true, 0, sh->len, (void *)buf);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev &&
	       a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Under sv->lock: forget the checks of a file that changed since. */
static void recheck_file(struct mcs_ckpt_served *sv, uint32_t file)
{
	const struct mcs_ckpt_file *f = &sv->lay->files[file];
	struct stat st;
	bool tmp;
	int fd;

	if (sv->mem[file])
		return;
	fd = file_fd(sv, file, &tmp);
	if (fd < 0 || fstat(fd, &st) || same_file(&st, &sv->st[file])) {
		if (fd >= 0 && tmp)
			close(fd);
		return;
	}
	if (tmp)
		close(fd);
	for (uint32_t k = 0; k < f->nshards; k++)
		mcs_bit_clear(sv->verified, f->first_shard + k);
	sv->st[file] = st;
}

/* Compute the crc of a held shard from its backing: 0 and *crc, or a
 * code. */
static int shard_crc(struct mcs_ckpt_served *sv, uint32_t shard, uint32_t *crc)
{
	const struct mcs_ckpt_shard *sh = &sv->lay->shards[shard];
	uint8_t *buf;
	uint32_t c = 0;
	int rc = 0;

	if (sv->mem[sh->file]) {
		*crc = mc_crc32c(0, sv->mem[sh->file] + sh->off, sh->len);
		return 0;
	}
	buf = malloc(CHECK_CHUNK);
	if (!buf)
		return -ENOMEM;
	for (uint32_t off = 0; off < sh->len && !rc; off += CHECK_CHUNK) {
		uint32_t n = sh->len - off < CHECK_CHUNK ? sh->len - off :
							   CHECK_CHUNK;
		rc = raw_io(sv, sh, false, off, n, buf);
		if (!rc)
			c = mc_crc32c(c, buf, n);
	}
	free(buf);
	*crc = c;
	return rc;
}

/* 0 when shard is held and (now) checked; -ENODATA when not held;
 * MC_ECHECKSUM when the check failed (the shard is dropped). */
static int check_shard(struct mcs_ckpt_served *sv, uint32_t shard)
{
	const struct mcs_ckpt_shard *sh = &sv->lay->shards[shard];
	uint32_t crc;
	int rc;

	pthread_mutex_lock(&sv->lock);
	if (!mcs_bit(sv->have, shard)) {
		pthread_mutex_unlock(&sv->lock);
		return -ENODATA;
	}
	recheck_file(sv, sh->file);
	rc = mcs_bit(sv->verified, shard) ? 1 : 0;
	pthread_mutex_unlock(&sv->lock);
	if (rc)
		return 0;
	/* Checked outside the lock: two threads may both check; the verdict
	 * is the same. */
	rc = shard_crc(sv, shard, &crc);
	if (!rc && crc != sv->lay->crcs[shard])
		rc = MC_ECHECKSUM;
	pthread_mutex_lock(&sv->lock);
	if (!rc) {
		mcs_bit_set(sv->verified, shard);
	} else if (rc == MC_ECHECKSUM) {
		mcs_bit_clear(sv->have, shard);
		mcs_bit_clear(sv->verified, shard);
	}
	pthread_mutex_unlock(&sv->lock);
	if (rc == MC_ECHECKSUM)
		mc_log_warn("ckpt",
			    "%s: shard %u (%s at %llu) no longer matches its "
			    "crc: not served any more",
			    sv->lay->name, shard, sv->lay->files[sh->file].path,
			    (unsigned long long)sh->off);
	return rc;
}

int mcs_ckpt_served_read(struct mcs_ckpt_served *sv, uint32_t shard,
			 uint64_t off, uint32_t len, void *buf)
{
	const struct mcs_ckpt_shard *sh;
	int rc;

	if (shard >= sv->lay->nshards)
		return -EINVAL;
	sh = &sv->lay->shards[shard];
	if (off > sh->len || len > sh->len - off)
		return -EINVAL;
	rc = check_shard(sv, shard);
	return rc ? rc : raw_io(sv, sh, false, off, len, buf);
}

/* ---- the server -------------------------------------------------------- */

static void drop_shard(struct mcs_ckpt_srv *s, struct mcs_ckpt_served *sv,
		       uint32_t shard)
{
	uint8_t *map = calloc(mcs_bitmap_len(sv->lay->nshards), 1);
	int rc;

	if (!map || !s->master) {
		free(map);
		return;
	}
	mcs_bit_set(map, shard);
	rc = mcs_ckpt_hold(s->master, sv->lay->id, s->endpoint, map,
			   mcs_bitmap_len(sv->lay->nshards), true);
	if (rc && rc != -ENOENT)
		mc_log_warn("ckpt",
			    "%s: telling the master shard %u is gone: %s",
			    sv->lay->name, shard, mc_strerror(rc));
	free(map);
}

static int answer(const struct mc_rpc_hdr *h, Mcrpc__CkptReadResponse *r,
		  uint8_t **frame, size_t *len)
{
	struct mc_rpc_hdr rh = *h;

	rh.kind = MC_RPC_RESPONSE;
	return mc_rpc_pack_frame(&rh, &r->base, frame, len);
}

static int serve_read(struct mcs_ckpt_srv *s, const struct mc_rpc_hdr *h,
		      const Mcrpc__CkptReadRequest *q, uint8_t **frame,
		      size_t *len)
{
	Mcrpc__CkptReadResponse r = MCRPC__CKPT_READ_RESPONSE__INIT;
	struct mcs_ckpt_served *sv = mcs_ckpt_srv_find(s, q->id);
	void *buf = NULL;
	int rc;

	if (!sv) {
		r.code = MC_STORE_REPLICA_NOT_FOUND;
		return answer(h, &r, frame, len);
	}
	if (q->length > MCS_CKPT_READ_MAX || q->shard >= sv->lay->nshards) {
		r.code = MC_STORE_INVALID_PARAMS;
		goto out;
	}
	buf = malloc(q->length ? q->length : 1);
	if (!buf) {
		r.code = MC_STORE_INTERNAL_ERROR;
		goto out;
	}
	rc = mcs_ckpt_served_read(sv, q->shard, q->offset, q->length, buf);
	if (rc == MC_ECHECKSUM)
		drop_shard(s, sv, q->shard);
	if (rc == -ENODATA)
		r.code = MC_STORE_REPLICA_NOT_FOUND;
	else if (rc)
		r.code = mc_err_to_store(rc);
	if (!rc) {
		r.data.data = buf;
		r.data.len = q->length;
		r.crc = sv->lay->crcs[q->shard];
	}
out:
	rc = answer(h, &r, frame, len);
	free(buf);
	mcs_ckpt_served_put(sv);
	return rc;
}

int mcs_ckpt_srv_handle(void *arg, const struct mc_rpc_hdr *h,
			const uint8_t *body, uint8_t **frame, size_t *len)
{
	struct mcs_ckpt_srv *s = arg;
	Mcrpc__CkptReadRequest *q;
	int rc;

	if (h->method != MCRPC__METHOD__CKPT_READ)
		return mc_rpc_pack_code(h, MC_STORE_NOT_SUPPORTED, 0, frame,
					len);
	q = (Mcrpc__CkptReadRequest *)mc_rpc_unpack(
		&mcrpc__ckpt_read_request__descriptor, body, h->length);
	if (!q)
		return -EPROTO;
	rc = serve_read(s, h, q, frame, len);
	protobuf_c_message_free_unpacked(&q->base, NULL);
	return rc;
}

int mcs_ckpt_srv_start(const struct mcs_ckpt_srv_cfg *cfg,
		       struct mcs_ckpt_srv **out, char *err, size_t errlen)
{
	struct mcs_ckpt_srv *s = calloc(1, sizeof(*s));
	struct mc_rpc_server_cfg rc_cfg = {
		.name = "holder",
		.host = cfg->host,
		.port = cfg->port,
		.max_connections = 1024,
		.idle_timeout_s = 300,
		.auth = cfg->auth,
	};
	int rc;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	s->master = cfg->master;
	rc = mc_rpc_server_start(&rc_cfg, mcs_ckpt_srv_handle, s, &s->rpc, err,
				 errlen);
	if (rc) {
		pthread_mutex_destroy(&s->lock);
		free(s);
		return rc;
	}
	(void)mc_fmt_hostport(s->endpoint, sizeof(s->endpoint), cfg->host,
			      mc_rpc_server_port(s->rpc));
	*out = s;
	return 0;
}

void mcs_ckpt_srv_stop(struct mcs_ckpt_srv *s)
{
	if (!s)
		return;
	mc_rpc_server_stop(s->rpc);
	while (s->list) {
		struct mcs_ckpt_served *sv = s->list;
		s->list = sv->next;
		mcs_ckpt_served_put(sv);
	}
	pthread_mutex_destroy(&s->lock);
	free(s);
}

const char *mcs_ckpt_srv_endpoint(const struct mcs_ckpt_srv *s)
{
	return s->endpoint;
}

int mcs_ckpt_srv_add(struct mcs_ckpt_srv *s, struct mcs_ckpt_served *sv)
{
	pthread_mutex_lock(&s->lock);
	for (struct mcs_ckpt_served *x = s->list; x; x = x->next) {
		if (x->lay->id == sv->lay->id) {
			pthread_mutex_unlock(&s->lock);
			return -EEXIST;
		}
	}
	atomic_fetch_add(&sv->refs, 1);
	sv->next = s->list;
	s->list = sv;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static struct mcs_ckpt_served *find(struct mcs_ckpt_srv *s, uint64_t id,
				    const char *name)
{
	struct mcs_ckpt_served *x;

	pthread_mutex_lock(&s->lock);
	for (x = s->list; x; x = x->next)
		if (name ? !strcmp(x->lay->name, name) : x->lay->id == id)
			break;
	if (x)
		atomic_fetch_add(&x->refs, 1);
	pthread_mutex_unlock(&s->lock);
	return x;
}

struct mcs_ckpt_served *mcs_ckpt_srv_find(struct mcs_ckpt_srv *s, uint64_t id)
{
	return find(s, id, NULL);
}

struct mcs_ckpt_served *mcs_ckpt_srv_find_name(struct mcs_ckpt_srv *s,
					       const char *name)
{
	return find(s, 0, name);
}

int mcs_ckpt_srv_remove(struct mcs_ckpt_srv *s, uint64_t id)
{
	struct mcs_ckpt_served **pp, *sv = NULL;

	pthread_mutex_lock(&s->lock);
	for (pp = &s->list; *pp; pp = &(*pp)->next) {
		if ((*pp)->lay->id == id) {
			sv = *pp;
			*pp = sv->next;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (!sv)
		return -ENOENT;
	mcs_ckpt_served_put(sv);
	return 0;
}

void mcs_ckpt_srv_each(struct mcs_ckpt_srv *s,
		       void (*fn)(void *arg, struct mcs_ckpt_served *sv),
		       void *arg)
{
	struct mcs_ckpt_served **v;
	size_t n = 0, i = 0;

	pthread_mutex_lock(&s->lock);
	for (struct mcs_ckpt_served *x = s->list; x; x = x->next)
		n++;
	v = calloc(n ? n : 1, sizeof(*v));
	if (v)
		for (struct mcs_ckpt_served *x = s->list; x; x = x->next) {
			atomic_fetch_add(&x->refs, 1);
			v[i++] = x;
		}
	pthread_mutex_unlock(&s->lock);
	for (size_t k = 0; k < i; k++) {
		fn(arg, v[k]);
		mcs_ckpt_served_put(v[k]);
	}
	free(v);
}
