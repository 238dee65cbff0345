/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A file open for writing (struct mcfs_fh of kind FH_WRITE): its bytes and
 * their publication as the name's new version.
 *
 * The handle stays writable until its release, whatever flushes, dups and
 * forks happen. Each publish (a flush, that is every close of a copy of
 * the descriptor; an fsync; the release) that follows a change writes the
 * whole content to a hidden temporary key and renames it over the name,
 * atomically: a reader sees the previous version or this one, never a mix,
 * and a failed publish leaves the previous version as it was and returns
 * the error (the content stays, and the next publish tries again). A
 * publish with nothing new does nothing. Later writes build the next
 * version on top of the published content. A publish from the stage
 * whose writes failed (a member died, or the master restarted and the
 * space it placed is not the put's any more: libmooncake's writer stops
 * writing then) writes it once more into space placed afresh.
 *
 * Where the content is:
 *  - staged (stage.c): in memory, within the mount's staging_limit
 *    (-ENOSPC beyond it), for writes of unknown size. A publish writes the
 *    whole stage; the stage stays for the next version.
 *  - direct: a handle whose size is set (ftruncate/fallocate) before any
 *    data writes straight into the replicas of a writer (libmooncake
 *    fills what is never written with zeros at commit). Once published,
 *    or when a write or truncate needs other bytes than the writer's size
 *    allows, or an O_RDWR handle reads, the content moves to the stage: a
 *    writer not yet published is committed under its temporary key and
 *    copied back from there; a published one is copied from the name.
 *
 * A lock granted through a handle that has changed nothing yet (not
 * written, truncated or opened O_TRUNC) rebases it on the name's current
 * version (mcfs_file_locked): its open copied the version of that moment,
 * and the lock's previous holder may have published a newer one since.
 * A handle that changed its content before locking keeps it, and its
 * publish replaces whatever was published meanwhile, as without locks.
 *
 * A write that fails (the staging limit, the pool full, a transfer) spoils
 * the version being built: the handle then fails every call with that
 * error and publishes nothing more, so a reader never finds a file with a
 * hole where a write failed; the last published version stays.
 *
 * Errors are negative errno. Locking: fh->lock guards everything here;
 * it is held across the store calls (the kernel serializes a file's
 * writes anyway), so a publish never runs beside a write of its handle.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_log.h"
#include "mcfs.h"
#include "mooncake/mc_err.h"

#define CHUNK (16u << 20) /* one writer_write from the stage */
#define STAGE_TRIES 2 /* a publish from the stage after a failed write */
#define COPY_BUF (1u << 20)

#define ZEROS (1u << 20)
static const char zeros[ZEROS]; /* what reads of a stage's holes return */

static char *tmp_key(struct mcfs *fs)
{
	char host[64] = "host", *k;
	size_t n;

	gethostname(host, sizeof(host) - 1);
	n = strlen(MCFS_TMP_PREFIX) + strlen(host) + 64;
	k = malloc(n);
	if (k)
		snprintf(k, n, "%s%s-%d-%llu", MCFS_TMP_PREFIX, host,
			 (int)getpid(),
			 (unsigned long long)atomic_fetch_add(&fs->tmp_seq, 1));
	return k;
}

/* The content's size, which a stat of the inode without the handle shows
 * too. */
static void set_size(struct mcfs_fh *fh, uint64_t size)
{
	fh->size = size;
	if (fh->node)
		atomic_store(&fh->node->written_size, size);
}

/* EFBIG for a size beyond the largest object the pool can place (the
 * largest segment: an object is stored whole in one segment per replica),
 * which no eviction could make room for (and asking the master for it
 * would evict what it can first); else rc. The library asks the master
 * only after the segments changed (mooncake_store_largest_segment). */
static int space_error(struct mcfs *fs, int rc, uint64_t size)
{
	uint64_t largest = 0;

	(void)mooncake_store_largest_segment(fs->store, &largest);
	if (!largest)
		return rc; /* no segment at all (yet): not known */
	return size > largest ? -EFBIG : rc;
}

/* A writer of size bytes under a new temporary key. */
static int open_writer(struct mcfs *fs, struct mcfs_fh *fh, uint64_t size)
{
	mooncake_replicate_config_t cfg = { .replica_num = fs->o.replicas };

	free(fh->tmp_key);
	fh->tmp_key = tmp_key(fs);
	if (!fh->tmp_key)
		return -ENOMEM;
	/* The file's attributes go with the object (none for a file that
	 * was put through the API and has none). */
	fh->sent = fh->node ? mcfs_node_attr(fs, fh->node) :
			      (mooncake_fs_attr_t){ 0 };
	if (space_error(fs, 0, size))
		return -EFBIG;
	return mcfs_errno(mooncake_store_writer_open_publish(
		fs->store, fh->tmp_key, size, &cfg,
		fh->sent.mode ? &fh->sent : NULL, &fh->writer));
}

/* Attributes changed while the object was written (fchmod, futimens
 * after a direct writer was opened): set them on what was published. */
static void publish_attr(struct mcfs *fs, struct mcfs_fh *fh)
{
	mooncake_fs_attr_t a = mcfs_node_attr(fs, fh->node), out;
	unsigned mask = MOONCAKE_SET_MODE | MOONCAKE_SET_UID | MOONCAKE_SET_GID;

	if (!a.mode || !memcmp(&a, &fh->sent, sizeof(a)))
		return;
	if (a.flags & MOONCAKE_ATTR_ATIME_SET)
		mask |= MOONCAKE_SET_ATIME;
	if (a.flags & MOONCAKE_ATTR_MTIME_SET)
		mask |= MOONCAKE_SET_MTIME;
	if (mooncake_store_setattr(fs->store, fh->key, false, mask, &a, &out))
		mc_log_info("mcfs", "attributes of %s not stored", fh->key);
}

/* A file keeps its inode number while written: its node stands for the
 * version about to be published, the committed temporary object that the
 * rename will move under the name (a rename keeps the version). Bound
 * before the rename, so that a lookup the rename's change event causes
 * finds it (and for a created file the event, naming that version, leaves
 * the kernel's entry alone); a later publish by anyone else makes the
 * node stale the usual way. What the kernel keeps of the inode goes: its
 * size is the last writer's (another writer's O_TRUNC and writes since
 * this one's), not this version's, and a reader's open after the writers'
 * releases would read this version's bytes up to that size (torn), and
 * pages of the version before may be cached. */
static void rebind(struct mcfs *fs, struct mcfs_fh *fh, uint64_t version)
{
	struct mcfs_inos readers = { 0 };
	mooncake_obj_stat_t st;

	fh->bound = false;
	if (!fh->node)
		return;
	/* NULL attributes: the node's are the writer's already. The commit
	 * said the version (the object's mtime is its ms): no Stat. */
	if (version)
		fh->bound = mcfs_node_rebind(fs, fh->node, version, fh->size,
					     version / 1000000, NULL, &readers);
	else if (!mooncake_store_stat(fs->store, fh->tmp_key, &st))
		fh->bound = mcfs_node_rebind(fs, fh->node, st.version, st.size,
					     st.mtime_ms, NULL, &readers);
	fuse_lowlevel_notify_inval_inode(fs->se, fh->ino, 0, 0);
	/* Readers' inodes that showed this one's number show their own now
	 * (inode.c): another file since this publish. */
	for (size_t i = 0; i < readers.n; i++)
		fuse_lowlevel_notify_inval_inode(fs->se, readers.v[i], -1, 0);
	free(readers.v);
}

/* Written: the content's time is the publish's, not an earlier utimensat. */
static void content_changed(struct mcfs *fs, struct mcfs_fh *fh)
{
	if (!fh->node || !atomic_load(&fh->node->mtime_pending))
		return; /* the usual case: one load per write */
	pthread_mutex_lock(&fs->itab_lock);
	fh->node->attr.flags &= ~MOONCAKE_ATTR_MTIME_SET;
	atomic_store(&fh->node->mtime_pending, false);
	pthread_mutex_unlock(&fs->itab_lock);
}

/* The open file was renamed through this mount (mv of a file still being
 * written: logrotate's rename before its HUP, a download moved to its
 * final name): its node has the new key, and the handle publishes there,
 * not under the old name, where a new file may be by now. 0 unchanged, 1
 * moved (fh->key, name and parent_ino now the node's), -ENOMEM. Under
 * fh->lock. */
static int follow_rename(struct mcfs *fs, struct mcfs_fh *fh)
{
	char *key = NULL, *name = NULL;
	uint64_t parent = 0;
	int rc = 0;

	if (!fh->node)
		return 0;
	pthread_mutex_lock(&fs->itab_lock);
	if (strcmp(fh->node->key, fh->key)) {
		key = strdup(fh->node->key);
		name = strdup(fh->node->name);
		parent = fh->node->parent ? fh->node->parent->ino : 0;
		rc = key && name ? 1 : -ENOMEM;
	}
	pthread_mutex_unlock(&fs->itab_lock);
	if (rc <= 0) {
		free(key);
		free(name);
		return rc;
	}
	free(fh->key);
	free(fh->name);
	fh->key = key;
	fh->name = name;
	fh->parent_ino = parent;
	return 1;
}

/* The handle's name (following renames) with its stripe of
 * fs->name_locks locked (*stripe): a rename through the mount of that name
 * takes the stripe too, so the name stays the handle's until the caller
 * unlocks. Under fh->lock. */
static int lock_name(struct mcfs *fs, struct mcfs_fh *fh, unsigned *stripe)
{
	for (;;) {
		int rc;

		*stripe = mcfs_name_lock(fs, fh->key);
		rc = follow_rename(fs, fh);
		if (!rc)
			return 0;
		pthread_mutex_unlock(&fs->name_locks[*stripe]);
		if (rc < 0)
			return rc;
	}
}

/* The stage becomes a copy of the open object obj. */
static int stage_copy(struct mcfs *fs, struct mcfs_fh *fh,
		      mooncake_object_t obj)
{
	uint64_t size = mooncake_store_object_size(obj), off = 0;
	char *b;
	int rc;

	b = malloc(COPY_BUF);
	rc = b ? mcfs_stage_truncate(&fs->stage_pool, &fh->stage, 0) : -ENOMEM;
	while (!rc && off < size) {
		size_t want = size - off < COPY_BUF ? (size_t)(size - off) :
						      COPY_BUF;
		const void *p = b;
		int64_t n = mooncake_store_object_peek(obj, off, want, &p);

		if (n <= 0) {
			p = b;
			n = mooncake_store_object_read(obj, off, b, want);
		}
		if (n <= 0) {
			rc = n < 0 ? mcfs_errno((int)n) : -EIO;
			break;
		}
		rc = mcfs_stage_write(&fs->stage_pool, &fh->stage, off, p,
				      (size_t)n);
		off += (uint64_t)n;
	}
	free(b);
	set_size(fh, fh->stage.size);
	return rc;
}

/* The stage becomes a copy of the object under key. */
static int stage_from(struct mcfs *fs, struct mcfs_fh *fh, const char *key)
{
	mooncake_object_t obj;
	int rc = mcfs_errno(mooncake_store_object_open(fs->store, key, &obj));

	if (rc)
		return rc;
	rc = stage_copy(fs, fh, obj);
	mooncake_store_object_close(obj);
	return rc;
}

/* Move the content of a direct handle to the stage. */
static int to_stage(struct mcfs *fs, struct mcfs_fh *fh)
{
	int rc;

	if (fh->writer) {
		/* Not yet published: commit it where it is (hidden), copy it
		 * back, drop it. */
		rc = mcfs_errno(mooncake_store_writer_close(fh->writer, true));
		fh->writer = NULL;
		if (!rc)
			rc = stage_from(fs, fh, fh->tmp_key);
		(void)mooncake_store_remove(fs->store, fh->tmp_key, true);
		if (rc) /* the bytes written are gone */
			fh->error = rc;
		return rc;
	}
	if (fh->published_direct) {
		rc = follow_rename(fs, fh);
		if (rc >= 0)
			rc = stage_from(fs, fh, fh->key);
		if (!rc)
			fh->published_direct = false;
		return rc;
	}
	return 0;
}

int mcfs_file_init(struct mcfs *fs, struct mcfs_fh *fh, mooncake_object_t base)
{
	if (!base) {
		/* A new or emptied file: empty until written, and published
		 * as such by the first flush. */
		set_size(fh, 0);
		fh->dirty = true;
		return 0;
	}
	/* The current bytes are the start of the next version. */
	fh->base_version = mooncake_store_object_version(base);
	return stage_copy(fs, fh, base);
}

/* The rebase of mcfs_file_locked(), under fh->lock: 1 when the content
 * changed. */
static int rebase(struct mcfs *fs, struct mcfs_fh *fh)
{
	mooncake_object_t obj;
	uint64_t version;
	int rc;

	if (fh->modified || fh->error || fh->writer || fh->published_direct ||
	    (fh->node && atomic_load(&fh->node->unlinked)))
		return 0;
	rc = follow_rename(fs, fh);
	if (rc < 0)
		return rc;
	rc = mooncake_store_object_open(fs->store, fh->key, &obj);
	if (rc == MC_STORE_OBJECT_NOT_FOUND)
		return 0; /* not published yet (or removed on another mount) */
	if (rc)
		return mcfs_errno(rc);
	version = mooncake_store_object_version(obj);
	if (version != fh->base_version)
		rc = stage_copy(fs, fh, obj);
	mooncake_store_object_close(obj);
	if (rc || version == fh->base_version)
		return rc;
	fh->base_version = version;
	/* Nothing of its own to publish: what it started from (empty for a
	 * name not published when it was opened or created) is gone. */
	fh->dirty = false;
	fh->if_absent = false;
	return 1;
}

void mcfs_file_locked(struct mcfs *fs, struct mcfs_fh *fh)
{
	int rc;

	if (!fh || fh->kind != FH_WRITE)
		return;
	pthread_mutex_lock(&fh->lock);
	rc = rebase(fs, fh);
	if (rc < 0 && !fh->error) {
		/* The stage may be half copied: publishing it would lose
		 * the version it was copied from. */
		fh->error = rc;
		mc_log_warn("mcfs",
			    "%s: not rebased on its current version under "
			    "a lock: %s; the handle fails from now on",
			    fh->key, mc_strerror(rc));
	}
	pthread_mutex_unlock(&fh->lock);
	/* The kernel's size of the inode is the version opened: stat asks
	 * again (O_APPEND goes by the handle's size, mcfs_file_write). */
	if (rc > 0)
		fuse_lowlevel_notify_inval_inode(fs->se, fh->ino, -1, 0);
}

int mcfs_file_truncate(struct mcfs *fs, struct mcfs_fh *fh, uint64_t size)
{
	int rc = 0;

	pthread_mutex_lock(&fh->lock);
	fh->modified = true;
	if (fh->error) {
		rc = fh->error;
		goto out;
	}
	/* Beyond what the pool can place: not even asked (eviction), and
	 * the file stays as it was. */
	rc = size > fh->size ? space_error(fs, 0, size) : 0;
	if (!rc && (fh->writer || fh->published_direct) && size != fh->size)
		rc = to_stage(fs, fh);
	if (rc || fh->writer || fh->published_direct)
		goto out; /* the direct writer's own size: nothing to do */
	if (!fh->stage.size && !fh->stage.n && size) {
		/* Size known before any data: allocate the replicas now. */
		rc = open_writer(fs, fh, size);
		if (!rc) {
			set_size(fh, size);
			fh->dirty = true;
			fh->if_absent = false;
			goto out;
		}
		fh->writer = NULL;
		if (rc == -ENOSPC)
			goto out;
		mc_log_info("mcfs", "direct write of %s: %s; staging", fh->key,
			    mc_strerror(rc));
	}
	rc = mcfs_stage_truncate(&fs->stage_pool, &fh->stage, size);
	set_size(fh, fh->stage.size);
	fh->dirty = true;
	fh->if_absent = false;
	content_changed(fs, fh);
out:
	pthread_mutex_unlock(&fh->lock);
	return rc;
}

int mcfs_file_write(struct mcfs *fs, struct mcfs_fh *fh, const char *buf,
		    size_t len, uint64_t off, bool append)
{
	int rc = 0;

	pthread_mutex_lock(&fh->lock);
	fh->modified = true;
	if (append)
		off = fh->size;
	if (fh->error) {
		rc = fh->error;
		goto out;
	}
	/* A write that can never fit, past the largest object the pool can
	 * place (EFBIG) or what the stage can hold (ENOSPC), fails before it
	 * changes anything, and spoils the version being built as any failed
	 * write does: published, it would lack this write's bytes (cp, dd,
	 * tar and shells report the write's error and exit; what they leave
	 * must not look complete). */
	if (len && off + len > fh->size)
		rc = off + len < off ? -EFBIG : space_error(fs, 0, off + len);
	if (!rc && (!fh->writer || off + len > fh->size))
		rc = mcfs_stage_fits(&fs->stage_pool, off, len);
	if (rc) {
		fh->error = rc;
		goto out;
	}
	if (fh->published_direct || (fh->writer && off + len > fh->size))
		rc = to_stage(fs, fh);
	if (rc)
		goto out;
	fh->dirty = true;
	fh->if_absent = false;
	content_changed(fs, fh);
	if (fh->writer) {
		rc = mcfs_errno(
			mooncake_store_writer_write(fh->writer, off, buf, len));
		if (rc) /* the writer is spoiled: its bytes are lost */
			fh->error = rc;
	} else {
		rc = mcfs_stage_write(&fs->stage_pool, &fh->stage, off, buf,
				      len);
		set_size(fh, fh->stage.size);
		if (rc) /* a version with a hole where this write failed */
			fh->error = rc;
	}
out:
	pthread_mutex_unlock(&fh->lock);
	return rc;
}

/* The stage into a new writer; its holes are left to the writer, which
 * fills every byte never written with zeros at commit. */
static int write_stage(struct mcfs_fh *fh)
{
	uint64_t off = 0;
	int rc = 0;

	while (!rc && off < fh->stage.size) {
		const char *p;
		size_t n = mcfs_stage_span(&fh->stage, off, CHUNK, &p);

		if (p)
			rc = mcfs_errno(mooncake_store_writer_write(fh->writer,
								    off, p, n));
		off += n;
	}
	return rc;
}

/* The committed temporary object becomes the name's version. It is not
 * evicted before this rename (the publish lease its writer asked for:
 * writer_open_publish), unless the rename comes later than the master's
 * lease time after the commit or the master predates the lease. Not found
 * is only ever the temporary object (a rename over a name needs none
 * there), evicted so: ENOSPC (until 2026-12-07 the close said ENOENT). */
static int rename_over(struct mcfs *fs, struct mcfs_fh *fh)
{
	int rc = mcfs_errno(mooncake_store_rename_version(
		fs->store, fh->tmp_key, fh->key, fh->if_absent));

	return rc == -ENOENT ? -ENOSPC : rc;
}

/* Commit (PutEnd) or revoke the handle's writer; *version: the committed
 * object's, 0 when not said. */
static int end_writer(struct mcfs_fh *fh, bool commit, uint64_t *version)
{
	mooncake_writer_t w = fh->writer;

	fh->writer = NULL;
	*version = 0;
	return mcfs_errno(commit ? mooncake_store_writer_commit(w, version) :
				   mooncake_store_writer_close(w, false));
}

static int publish_locked(struct mcfs *fs, struct mcfs_fh *fh)
{
	bool direct = fh->writer != NULL;
	uint64_t version = 0;
	int rc;

	if (fh->node && atomic_load(&fh->node->unlinked)) {
		/* Unlinked or replaced meanwhile: nothing to publish. */
		if (fh->writer)
			(void)mooncake_store_writer_close(fh->writer, false);
		fh->writer = NULL;
		fh->dirty = false;
		return 0;
	}
	if (fh->error)
		return fh->error;
	if (!fh->dirty)
		return 0;
	rc = 0;
	for (int t = 0; !direct && t < STAGE_TRIES; t++) {
		bool opened;

		rc = open_writer(fs, fh, fh->size);
		opened = !rc;
		if (!rc)
			rc = write_stage(fh);
		if (fh->writer) {
			int c = end_writer(fh, rc == 0, &version);
			if (!rc)
				rc = c;
		}
		/* Nothing written when it could not be opened (the master
		 * unreachable): the error is the publish's. */
		if (rc != -EIO || !opened || t + 1 == STAGE_TRIES)
			break;
		/* A write or its end failed (a member died, the master
		 * restarted: the space is not ours any more). The stage holds
		 * every byte: once more, into space placed afresh. */
		mc_log_info("mcfs", "publishing %s: %s; writing it again",
			    fh->key, mc_strerror(rc));
		/* In case its end went through after all. */
		(void)mooncake_store_remove(fs->store, fh->tmp_key, true);
	}
	if (fh->writer) { /* direct */
		int c = end_writer(fh, rc == 0, &version);
		if (!rc)
			rc = c;
		if (rc && direct) /* what was written is gone */
			fh->error = rc;
	}
	if (!rc) {
		unsigned stripe;

		rc = lock_name(fs, fh, &stripe);
		if (rc)
			return rc;
		if (fh->node && atomic_load(&fh->node->unlinked)) {
			/* Unlinked or renamed over while it was written. */
			pthread_mutex_unlock(&fs->name_locks[stripe]);
			(void)mooncake_store_remove(fs->store, fh->tmp_key,
						    true);
			fh->dirty = false;
			return 0;
		}
		rebind(fs, fh, version);
		rc = rename_over(fs, fh);
		pthread_mutex_unlock(&fs->name_locks[stripe]);
		if (rc && fh->node)
			mcfs_node_retire(fs, fh->node);
		if (rc && direct) {
			/* Keep the bytes: back into the stage, retried at the
			 * next publish. */
			int c = stage_from(fs, fh, fh->tmp_key);
			if (c)
				fh->error = rc;
			direct = false;
		}
		if (rc)
			(void)mooncake_store_remove(fs->store, fh->tmp_key,
						    true);
		/* Made empty for a name someone published meanwhile: theirs
		 * stays, and this handle published nothing (no attributes
		 * of its own on their object, no version of its own bound). */
		if (rc == -EEXIST && fh->if_absent) {
			fh->bound = false;
			fh->dirty = false;
			return fh->excl ? -EEXIST : 0;
		}
	}
	if (rc) {
		atomic_fetch_add(&fs->n_errors, 1);
		mc_log_info("mcfs", "publishing %s failed: %s", fh->key,
			    mc_strerror(rc));
		return rc;
	}
	publish_attr(fs, fh);
	fh->dirty = false;
	fh->if_absent = fh->excl = false; /* the name is this version now */
	fh->published = true;
	fh->published_direct = direct;
	atomic_fetch_add(&fs->n_writes, 1);
	atomic_fetch_add(&fs->n_write_bytes, fh->size);
	return 0;
}

int mcfs_file_publish(struct mcfs *fs, struct mcfs_fh *fh, bool *changed)
{
	int rc;

	pthread_mutex_lock(&fh->lock);
	*changed = fh->dirty && !fh->error;
	rc = publish_locked(fs, fh);
	*changed = *changed && !rc && fh->published;
	if (fh->node && fh->node->created)
		atomic_store(&fh->node->create_failed, rc && !fh->published);
	pthread_mutex_unlock(&fh->lock);
	return rc;
}

uint64_t mcfs_file_size(struct mcfs_fh *fh)
{
	uint64_t size;

	pthread_mutex_lock(&fh->lock);
	size = fh->size;
	pthread_mutex_unlock(&fh->lock);
	return size;
}

int mcfs_file_read(struct mcfs *fs, struct mcfs_fh *fh, uint64_t off,
		   size_t size, struct iovec *iov, int max_iov, size_t *total)
{
	int n = 0, rc;

	*total = 0;
	pthread_mutex_lock(&fh->lock);
	rc = fh->error ? fh->error : to_stage(fs, fh);
	if (rc) {
		pthread_mutex_unlock(&fh->lock);
		return rc;
	}
	while (size && n < max_iov) {
		const char *p;
		size_t k = mcfs_stage_span(&fh->stage, off, size, &p);

		if (!k)
			break;
		if (!p && k > ZEROS)
			k = ZEROS;
		iov[n].iov_base = (void *)(p ? p : zeros);
		iov[n].iov_len = k;
		n++;
		off += k;
		size -= k;
		*total += k;
	}
	/* The caller replies and then calls mcfs_file_read_done(). */
	return n;
}

void mcfs_file_read_done(struct mcfs_fh *fh)
{
	pthread_mutex_unlock(&fh->lock);
}

void mcfs_file_free(struct mcfs *fs, struct mcfs_fh *fh)
{
	if (fh->writer)
		(void)mooncake_store_writer_close(fh->writer, false);
	mcfs_stage_release(&fs->stage_pool, &fh->stage);
	free(fh->key);
	free(fh->tmp_key);
	free(fh->name);
}
