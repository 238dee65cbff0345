/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Writing a file. A new file goes to a hidden temporary key and, at
 * close (flush), is renamed over its name atomically, so readers see the
 * old object or the new one, never a mix, and a failed write leaves
 * nothing behind.
 *  - Size known in advance (ftruncate/fallocate before any data): the
 *    replicas are allocated at once and writes go straight into them;
 *    ranges never written are zeroed at close.
 *  - Otherwise bytes are staged in memory (stage.c), within the mount's
 *    staging_limit (beyond it: ENOSPC, never out-of-memory), and put at
 *    close.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_log.h"
#include "mcfs.h"

#define CHUNK (16u << 20) /* one writer_write from staged memory */

/* Written ranges of a direct writer: sorted, disjoint, merged. */
struct range {
	uint64_t start, end;
};

struct ranges {
	struct range *r;
	size_t n, cap;
};

static int ranges_add(struct ranges *rs, uint64_t s, uint64_t e)
{
	size_t i = 0, j;

	while (i < rs->n && rs->r[i].end < s)
		i++;
	j = i;
	while (j < rs->n && rs->r[j].start <= e) {
		if (rs->r[j].start < s)
			s = rs->r[j].start;
		if (rs->r[j].end > e)
			e = rs->r[j].end;
		j++;
	}
	if (j == i) { /* insert at i */
		if (rs->n == rs->cap) {
			size_t nc = rs->cap ? rs->cap * 2 : 8;
			struct range *nr = realloc(rs->r, nc * sizeof(*nr));
			if (!nr)
				return ENOMEM;
			rs->r = nr;
			rs->cap = nc;
		}
		memmove(&rs->r[i + 1], &rs->r[i], (rs->n - i) * sizeof(*rs->r));
		rs->n++;
	} else if (j > i + 1) { /* merged several: close the gap */
		memmove(&rs->r[i + 1], &rs->r[j], (rs->n - j) * sizeof(*rs->r));
		rs->n -= j - i - 1;
	}
	rs->r[i] = (struct range){ s, e };
	return 0;
}

static struct ranges *fh_ranges(struct mcfs_fh *fh)
{
	return fh->ranges;
}

static int store_err(int code)
{
	return mcfs_errno(code);
}

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

static int open_writer(struct mcfs *fs, struct mcfs_fh *fh, uint64_t size)
{
	mooncake_replicate_config_t cfg = { .replica_num = fs->o.replicas };
	int rc;

	if (!fh->tmp_key) {
		fh->tmp_key = tmp_key(fs);
		if (!fh->tmp_key)
			return ENOMEM;
	}
	rc = mooncake_store_writer_open(fs->store, fh->tmp_key, size, &cfg,
					&fh->writer);
	return store_err(rc);
}

int mcfs_write_truncate(struct mcfs *fs, struct mcfs_fh *fh, uint64_t size)
{
	int rc = 0;

	pthread_mutex_lock(&fh->lock);
	fh->dirty = true;
	if (fh->committed) {
		rc = EPERM;
	} else if (fh->writer) {
		rc = size == fh->size ? 0 : EPERM;
	} else if (!fh->stage.size && !fh->stage.n && size) {
		/* Size known before any data: allocate the replicas now. */
		rc = open_writer(fs, fh, size);
		if (!rc) {
			fh->size = size;
			fh->ranges = calloc(1, sizeof(struct ranges));
			if (!fh->ranges)
				rc = ENOMEM;
		} else if (rc != ENOSPC) {
			mc_log_info("mcfs", "direct write of %s: %s; staging",
				    fh->key, strerror(rc));
			fh->writer = NULL;
			rc = 0;
			goto stage;
		}
	} else {
	stage:
		rc = mcfs_stage_truncate(&fs->stage_pool, &fh->stage, size);
		fh->size = fh->stage.size;
	}
	pthread_mutex_unlock(&fh->lock);
	return rc;
}

int mcfs_write_data(struct mcfs *fs, struct mcfs_fh *fh, const char *buf,
		    size_t len, uint64_t off)
{
	int rc = 0;

	pthread_mutex_lock(&fh->lock);
	fh->dirty = true;
	if (fh->committed || fh->failed) {
		rc = fh->failed ? (fh->error ? fh->error : EIO) : EBADF;
	} else if (fh->writer) {
		if (off + len > fh->size) {
			rc = EFBIG; /* past the size given by ftruncate */
		} else {
			pthread_mutex_unlock(&fh->lock);
			rc = store_err(mooncake_store_writer_write(
				fh->writer, off, buf, len));
			pthread_mutex_lock(&fh->lock);
			if (!rc)
				rc = ranges_add(fh_ranges(fh), off, off + len);
		}
	} else {
		rc = mcfs_stage_write(&fs->stage_pool, &fh->stage, off, buf,
				      len);
		fh->size = fh->stage.size;
	}
	if (rc && rc != EFBIG) {
		fh->failed = true;
		fh->error = rc;
	}
	pthread_mutex_unlock(&fh->lock);
	return rc;
}

const char mcfs_zeros[MCFS_ZEROS];

/* Write n zero bytes at pos, 1 MiB per call. */
static int write_zeros(struct mcfs_fh *fh, uint64_t pos, uint64_t n)
{
	while (n) {
		size_t k = n > MCFS_ZEROS ? MCFS_ZEROS : (size_t)n;
		int rc = mooncake_store_writer_write(fh->writer, pos,
						     mcfs_zeros, k);
		if (rc)
			return store_err(rc);
		pos += k;
		n -= k;
	}
	return 0;
}

/* Write the staged bytes out, holes as zeros (the replica may hold old
 * bytes). */
static int write_staged(struct mcfs_fh *fh)
{
	uint64_t off = 0;
	int rc = 0;

	while (!rc && off < fh->stage.size) {
		const char *p;
		size_t n = mcfs_stage_span(&fh->stage, off, CHUNK, &p);

		rc = p ? store_err(mooncake_store_writer_write(fh->writer, off,
							       p, n)) :
			 write_zeros(fh, off, n);
		off += n;
	}
	return rc;
}

int mcfs_write_read(struct mcfs_fh *fh, uint64_t off, size_t size,
		    struct iovec *iov, int max_iov, size_t *total)
{
	int n = 0;

	*total = 0;
	while (size && n < max_iov) {
		const char *p;
		size_t k = mcfs_stage_span(&fh->stage, off, size, &p);

		if (!k)
			break;
		if (!p && k > MCFS_ZEROS)
			k = MCFS_ZEROS;
		iov[n].iov_base = (void *)(p ? p : mcfs_zeros);
		iov[n].iov_len = k;
		n++;
		off += k;
		size -= k;
		*total += k;
	}
	return n;
}

/* Zero what a direct writer never wrote (it may hold old bytes). */
static int zero_gaps(struct mcfs_fh *fh)
{
	struct ranges *rs = fh_ranges(fh);
	uint64_t pos = 0;

	for (size_t i = 0; i <= rs->n; i++) {
		uint64_t end = i < rs->n ? rs->r[i].start : fh->size;
		int rc = end > pos ? write_zeros(fh, pos, end - pos) : 0;

		if (rc)
			return rc;
		if (i < rs->n)
			pos = rs->r[i].end;
	}
	return 0;
}

int mcfs_write_commit(struct mcfs *fs, struct mcfs_fh *fh)
{
	int rc = 0;

	pthread_mutex_lock(&fh->lock);
	if (fh->committed) {
		pthread_mutex_unlock(&fh->lock);
		return 0;
	}
	if (fh->failed) {
		rc = fh->error ? fh->error : EIO;
		goto out;
	}
	if (fh->copied && !fh->dirty) {
		/* Opened for writing, never written: the object stays. */
		fh->committed = true;
		mcfs_stage_release(&fs->stage_pool, &fh->stage);
		pthread_mutex_unlock(&fh->lock);
		return 0;
	}
	if (!fh->writer) {
		rc = open_writer(fs, fh, fh->size);
		if (!rc)
			rc = write_staged(fh);
	} else {
		rc = zero_gaps(fh);
	}
	if (fh->writer) {
		int c = mooncake_store_writer_close(fh->writer, rc == 0);
		fh->writer = NULL;
		if (!rc)
			rc = store_err(c);
	}
	if (!rc)
		rc = store_err(mooncake_store_rename(fs->store, fh->tmp_key,
						     fh->key, false));
	if (rc && fh->tmp_key)
		(void)mooncake_store_remove(fs->store, fh->tmp_key, true);
out:
	fh->committed = true;
	if (rc) {
		fh->failed = true;
		fh->error = rc;
		atomic_fetch_add(&fs->n_errors, 1);
		mc_log_info("mcfs", "writing %s failed: %s", fh->key,
			    strerror(rc));
	} else {
		atomic_fetch_add(&fs->n_writes, 1);
		atomic_fetch_add(&fs->n_write_bytes, fh->size);
	}
	mcfs_stage_release(&fs->stage_pool, &fh->stage);
	pthread_mutex_unlock(&fh->lock);
	return rc;
}

void mcfs_write_free(struct mcfs *fs, struct mcfs_fh *fh)
{
	if (fh->writer)
		(void)mooncake_store_writer_close(fh->writer, false);
	mcfs_stage_release(&fs->stage_pool, &fh->stage);
	if (fh->ranges) {
		free(fh_ranges(fh)->r);
		free(fh->ranges);
	}
	free(fh->key);
	free(fh->tmp_key);
	free(fh->name);
}
