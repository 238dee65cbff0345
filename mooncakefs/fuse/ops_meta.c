/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Metadata operations: lookup, getattr/setattr, statfs, unlink, rename,
 * mkdir/rmdir and the user.mooncake.* extended attributes. None of them
 * takes a lease: stat storms and `ls -l` never pin objects.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "mc_log.h"
#include "mcfs.h"

/* The one table from store codes to errno (docs/design.md). */
int mcfs_errno(int code)
{
	switch (code) {
	case 0:
		return 0;
	case -704: /* OBJECT_NOT_FOUND */
		return ENOENT;
	case -705: /* OBJECT_ALREADY_EXISTS */
		return EEXIST;
	case -706: /* OBJECT_HAS_LEASE */
	case -703: /* REPLICA_IS_NOT_READY: being written */
	case -714: /* OBJECT_REPLICA_BUSY */
		return EBUSY;
	case -200: /* NO_AVAILABLE_HANDLE: the pool is full */
		return ENOSPC;
	case -400: /* INVALID_KEY: too long */
		return ENAMETOOLONG;
	case -600: /* INVALID_PARAMS */
		return EINVAL;
	case -1012: /* NOT_SUPPORTED */
		return EOPNOTSUPP;
	default: /* transfer, RPC, lease expiry, internal: the I/O failed */
		return EIO;
	}
}

int mcfs_wait_ready(struct mcfs *fs)
{
	struct timespec ts;
	int r;

	pthread_mutex_lock(&fs->ready_lock);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 60; /* pre-faulting a large segment takes a while */
	while (!fs->ready && pthread_cond_timedwait(&fs->ready_cond,
						    &fs->ready_lock, &ts) == 0)
		;
	r = fs->ready;
	pthread_mutex_unlock(&fs->ready_lock);
	return r == 1 ? 0 : EIO;
}

static double entry_timeout(struct mcfs *fs, const struct mcfs_node *n)
{
	return n->kind == MCFS_VFILE ? 0 : fs->o.entry_timeout;
}

static void reply_node(fuse_req_t req, struct mcfs *fs, struct mcfs_node *n)
{
	struct fuse_entry_param e = { .ino = n->ino };

	mcfs_fill_attr(fs, n, &e.attr);
	e.attr_timeout = n->kind == MCFS_VFILE ? 0 : fs->o.attr_timeout;
	e.entry_timeout = entry_timeout(fs, n);
	if (fuse_reply_entry(req, &e) == -ENOENT)
		mcfs_node_forget(fs, n->ino, 1); /* the caller went away */
}

static void reply_negative(fuse_req_t req, struct mcfs *fs)
{
	struct fuse_entry_param e = { .ino = 0 };

	e.entry_timeout = fs->o.negative_timeout;
	fuse_reply_entry(req, &e);
}

/* key of name inside the kv directory dir; NULL (errno set) if the name
 * cannot be a key. */
static char *child_key(const struct mcfs_node *dir, const char *name,
		       bool *hidden)
{
	size_t clen, plen = strlen(dir->key);
	char *comp = mcfs_unescape(name, &clen), *key;

	*hidden = false;
	if (!comp) {
		errno = ENOENT;
		return NULL;
	}
	key = malloc(plen + clen + 2);
	if (!key) {
		free(comp);
		errno = ENOMEM;
		return NULL;
	}
	memcpy(key, dir->key, plen);
	memcpy(key + plen, comp, clen);
	key[plen + clen] = 0;
	free(comp);
	*hidden = mcfs_hidden_key(key);
	return key;
}

/* The directory prefix of key: key + "/", malloc'd (NULL: ENOMEM). */
static char *prefix_of(const char *key)
{
	size_t kl = strlen(key);
	char *p = malloc(kl + 2);

	if (p) {
		memcpy(p, key, kl);
		memcpy(p + kl, "/", 2);
	}
	return p;
}

void mcfs_count_entry(void *arg, const mooncake_list_entry_t *e)
{
	(void)e;
	(*(int *)arg)++;
}

/* Does a directory exist at prefix (keys under it, or made by mkdir)? */
static int dir_exists(struct mcfs *fs, const char *key, bool *yes)
{
	size_t len = strlen(key);
	char *prefix = malloc(len + 2);
	bool trunc;
	int n = 0, rc;

	if (!prefix)
		return ENOMEM;
	memcpy(prefix, key, len);
	prefix[len] = '/';
	prefix[len + 1] = 0;
	*yes = mcfs_mkdir_has(fs, prefix);
	if (*yes) {
		free(prefix);
		return 0;
	}
	rc = mooncake_store_list(fs->store, prefix, "/", NULL, 1,
				 mcfs_count_entry, &n, &trunc);
	free(prefix);
	if (rc < 0)
		return mcfs_errno(rc);
	*yes = n > 0;
	return 0;
}

void mcfs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *p = mcfs_node_get(fs, parent), *n = NULL;
	mooncake_obj_stat_t st;
	bool hidden, dir;
	char *key;
	int rc;

	atomic_fetch_add(&fs->n_lookups, 1);
	if (!p) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	switch (p->kind) {
	case MCFS_ROOT:
		n = !strcmp(name, "kv")	       ? fs->kv :
		    !strcmp(name, "ckpt")      ? fs->ckpt :
		    !strcmp(name, ".mooncake") ? fs->vdir :
						 NULL;
		if (n)
			n = mcfs_node_child(fs, fs->root, n->name, n->kind,
					    n->key, 0, 0);
		break;
	case MCFS_VDIR:
		for (int i = 0; mcfs_vfiles[i]; i++)
			if (!strcmp(name, mcfs_vfiles[i]))
				n = mcfs_node_child(fs, p, name, MCFS_VFILE,
						    name, 0, 0);
		break;
	case MCFS_KV_DIR:
		if ((rc = mcfs_wait_ready(fs))) {
			fuse_reply_err(req, rc);
			return;
		}
		key = child_key(p, name, &hidden);
		if (!key) {
			reply_negative(req, fs);
			return;
		}
		if (hidden) {
			free(key);
			reply_negative(req, fs);
			return;
		}
		rc = mooncake_store_stat(fs->store, key, &st);
		if (rc == 0) {
			n = mcfs_node_child(fs, p, name, MCFS_KV_FILE, key,
					    st.size, st.mtime_ms);
		} else if (rc == -704) {
			rc = dir_exists(fs, key, &dir);
			if (rc) {
				free(key);
				fuse_reply_err(req, rc);
				return;
			}
			if (dir) {
				char *prefix = prefix_of(key);
				if (prefix) {
					n = mcfs_node_child(fs, p, name,
							    MCFS_KV_DIR, prefix,
							    0, 0);
					free(prefix);
				}
			}
		} else {
			free(key);
			fuse_reply_err(req, mcfs_errno(rc));
			return;
		}
		free(key);
		if (!n) {
			reply_negative(req, fs);
			return;
		}
		break;
	default:
		break;
	}
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	reply_node(req, fs, n);
}

void mcfs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	mcfs_node_forget(fuse_req_userdata(req), ino, nlookup);
	fuse_reply_none(req);
}

void mcfs_op_forget_multi(fuse_req_t req, size_t count,
			  struct fuse_forget_data *forgets)
{
	struct mcfs *fs = fuse_req_userdata(req);

	for (size_t i = 0; i < count; i++)
		mcfs_node_forget(fs, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

void mcfs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *n = mcfs_node_get(fs, ino);
	struct stat st;

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	mcfs_fill_attr(fs, n, &st);
	if (fi && fi->fh) {
		struct mcfs_fh *fh = (struct mcfs_fh *)(uintptr_t)fi->fh;
		if (fh->kind == FH_WRITE) {
			pthread_mutex_lock(&fh->lock);
			st.st_size = (off_t)fh->size;
			pthread_mutex_unlock(&fh->lock);
		}
	}
	fuse_reply_attr(req, &st,
			n->kind == MCFS_VFILE ? 0 : fs->o.attr_timeout);
}

void mcfs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		     int to_set, struct fuse_file_info *fi)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *n = mcfs_node_get(fs, ino);
	struct mcfs_fh *fh = fi ? (struct mcfs_fh *)(uintptr_t)fi->fh : NULL;
	struct stat st;

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		int rc;
		if (!fh || fh->kind != FH_WRITE) {
			/* Objects are immutable: only a file being written
			 * (or already empty) may change size. */
			if (n->kind == MCFS_KV_FILE && n->size == 0 &&
			    attr->st_size == 0)
				goto ok;
			fuse_reply_err(req, n->kind == MCFS_KV_FILE ? EPERM :
								      EISDIR);
			return;
		}
		rc = mcfs_write_truncate(fs, fh, (uint64_t)attr->st_size);
		if (rc) {
			fuse_reply_err(req, rc);
			return;
		}
	}
	/* mode, owner and times are those of the mount (cp -p must not
	 * fail): accepted and not stored. */
ok:
	mcfs_fill_attr(fs, n, &st);
	if (fh && fh->kind == FH_WRITE) {
		pthread_mutex_lock(&fh->lock);
		st.st_size = (off_t)fh->size;
		pthread_mutex_unlock(&fh->lock);
	}
	fuse_reply_attr(req, &st, fs->o.attr_timeout);
}

void mcfs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct mcfs *fs = fuse_req_userdata(req);
	mooncake_pool_stat_t ps;
	struct statvfs sv = { 0 };
	int rc = mcfs_wait_ready(fs);

	(void)ino;
	if (!rc)
		rc = mcfs_errno(mooncake_store_pool_stat(fs->store, &ps));
	if (rc) {
		fuse_reply_err(req, rc);
		return;
	}
	/* df's total and used are the master's capacity and allocation. */
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_blocks = ps.capacity / 4096;
	sv.f_bfree = sv.f_bavail = ps.capacity > ps.allocated ?
					   (ps.capacity - ps.allocated) / 4096 :
					   0;
	sv.f_files = ps.keys + 1000000;
	sv.f_ffree = sv.f_favail = 1000000;
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}

static struct mcfs_node *kv_parent(fuse_req_t req, struct mcfs *fs,
				   fuse_ino_t parent)
{
	struct mcfs_node *p = mcfs_node_get(fs, parent);
	int rc;

	if (!p || p->kind != MCFS_KV_DIR) {
		fuse_reply_err(req, p && (p->kind == MCFS_VDIR ||
					  p->kind == MCFS_ROOT) ?
					    EPERM :
					    ENOENT);
		return NULL;
	}
	if (fs->o.read_only) {
		fuse_reply_err(req, EROFS);
		return NULL;
	}
	rc = mcfs_wait_ready(fs);
	if (rc) {
		fuse_reply_err(req, rc);
		return NULL;
	}
	return p;
}

void mcfs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *p = kv_parent(req, fs, parent);
	bool hidden;
	char *key;
	int rc;

	if (!p)
		return;
	key = child_key(p, name, &hidden);
	if (!key || hidden) {
		free(key);
		fuse_reply_err(req, ENOENT);
		return;
	}
	/* Forced: a reader holding the object keeps it until it closes. */
	rc = mooncake_store_remove(fs->store, key, true);
	if (rc == -704) {
		bool dir = false;
		if (!dir_exists(fs, key, &dir) && dir)
			rc = -1; /* EISDIR below */
	}
	free(key);
	fuse_reply_err(req, rc == -1 ? EISDIR : mcfs_errno(rc));
}

void mcfs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		    fuse_ino_t newparent, const char *newname,
		    unsigned int flags)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *p = kv_parent(req, fs, parent), *np;
	char *from = NULL, *to = NULL;
	bool h1, h2, dir = false;
	int rc;

	if (!p)
		return;
	if (flags & RENAME_EXCHANGE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	np = mcfs_node_get(fs, newparent);
	if (!np || np->kind != MCFS_KV_DIR) {
		fuse_reply_err(req, np ? EXDEV : ENOENT);
		return;
	}
	from = child_key(p, name, &h1);
	to = child_key(np, newname, &h2);
	if (!from || !to || h1 || h2) {
		fuse_reply_err(req, !from || h1 ? ENOENT : EINVAL);
		goto out;
	}
	rc = mooncake_store_rename(fs->store, from, to,
				   (flags & RENAME_NOREPLACE) != 0);
	if (rc == -704 && !dir_exists(fs, from, &dir) && dir) {
		/* Directories are prefixes of many keys: no atomic rename.
		 * EXDEV makes mv copy and delete instead. */
		fuse_reply_err(req, EXDEV);
		goto out;
	}
	if (!rc)
		mcfs_node_renamed(fs, p, name, np, newname, to);
	fuse_reply_err(req, mcfs_errno(rc));
out:
	free(from);
	free(to);
}

/* ---- directories made with mkdir ------------------------------------- */

bool mcfs_mkdir_has(struct mcfs *fs, const char *prefix)
{
	bool yes = false;

	pthread_mutex_lock(&fs->itab_lock);
	for (size_t i = 0; i < fs->n_mkdirs && !yes; i++)
		yes = !strcmp(fs->mkdirs[i], prefix);
	pthread_mutex_unlock(&fs->itab_lock);
	return yes;
}

static int mkdir_set(struct mcfs *fs, const char *prefix, bool add)
{
	int rc = add ? 0 : ENOENT;

	pthread_mutex_lock(&fs->itab_lock);
	for (size_t i = 0; i < fs->n_mkdirs; i++) {
		if (strcmp(fs->mkdirs[i], prefix))
			continue;
		if (add) {
			rc = EEXIST;
		} else {
			free(fs->mkdirs[i]);
			fs->mkdirs[i] = fs->mkdirs[--fs->n_mkdirs];
			rc = 0;
		}
		break;
	}
	if (add && !rc) {
		char **n = realloc(fs->mkdirs,
				   (fs->n_mkdirs + 1) * sizeof(*fs->mkdirs));
		char *s = strdup(prefix);
		if (n)
			fs->mkdirs = n;
		if (!n || !s) {
			free(s);
			rc = ENOMEM;
		} else {
			fs->mkdirs[fs->n_mkdirs++] = s;
		}
	}
	pthread_mutex_unlock(&fs->itab_lock);
	return rc;
}

void mcfs_mkdir_forget(struct mcfs *fs, const char *prefix)
{
	(void)mkdir_set(fs, prefix, false);
}

void mcfs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		   mode_t mode)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *p = kv_parent(req, fs, parent), *n;
	mooncake_obj_stat_t st;
	bool hidden, dir;
	char *key, *prefix;
	int rc;

	(void)mode;
	if (!p)
		return;
	key = child_key(p, name, &hidden);
	if (!key || hidden) {
		free(key);
		fuse_reply_err(req, EINVAL);
		return;
	}
	rc = mooncake_store_stat(fs->store, key, &st);
	if (rc == 0 || (rc == -704 && !dir_exists(fs, key, &dir) && dir)) {
		free(key);
		fuse_reply_err(req, EEXIST);
		return;
	}
	prefix = prefix_of(key);
	free(key);
	if (!prefix) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = mkdir_set(fs, prefix, true);
	n = rc ? NULL : mcfs_node_child(fs, p, name, MCFS_KV_DIR, prefix, 0, 0);
	free(prefix);
	if (!n) {
		fuse_reply_err(req, rc ? rc : ENOMEM);
		return;
	}
	reply_node(req, fs, n);
}

void mcfs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *p = kv_parent(req, fs, parent);
	bool hidden, trunc;
	char *key, *prefix;
	int n = 0, rc;

	if (!p)
		return;
	key = child_key(p, name, &hidden);
	if (!key || hidden) {
		free(key);
		fuse_reply_err(req, ENOENT);
		return;
	}
	prefix = prefix_of(key);
	free(key);
	if (!prefix) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = mooncake_store_list(fs->store, prefix, "", NULL, 1,
				 mcfs_count_entry, &n, &trunc);
	if (rc < 0)
		rc = mcfs_errno(rc);
	else if (n)
		rc = ENOTEMPTY;
	else
		rc = mkdir_set(fs, prefix, false);
	free(prefix);
	fuse_reply_err(req, rc);
}

/* ---- extended attributes ---------------------------------------------- */

static const char xattr_names[] = "user.mooncake.key\0"
				  "user.mooncake.replicas\0"
				  "user.mooncake.lease_ms\0"
				  "user.mooncake.holds\0"
				  "user.mooncake.pins\0";

static void reply_xattr(fuse_req_t req, const char *v, size_t len, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, v, len);
}

void mcfs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *n = mcfs_node_get(fs, ino);

	if (!n || n->kind != MCFS_KV_FILE) {
		reply_xattr(req, "", 0, size);
		return;
	}
	reply_xattr(req, xattr_names, sizeof(xattr_names) - 1, size);
}

void mcfs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		      size_t size)
{
	struct mcfs *fs = fuse_req_userdata(req);
	struct mcfs_node *n;
	mooncake_obj_stat_t st;
	char buf[8192];
	int rc;

	/* ls -l asks every file for security.* and system.posix_acl_*:
	 * answer those before touching the inode table. */
	if (strncmp(name, "user.mooncake.", 14)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	n = mcfs_node_get(fs, ino);
	if (!n || n->kind != MCFS_KV_FILE) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (!strcmp(name, "user.mooncake.key")) {
		reply_xattr(req, n->key, strlen(n->key), size);
		return;
	}
	rc = mcfs_wait_ready(fs);
	if (rc) {
		fuse_reply_err(req, rc);
		return;
	}
	if (!strcmp(name, "user.mooncake.replicas")) {
		rc = mooncake_store_replica_text(fs->store, n->key, buf,
						 sizeof(buf));
		if (rc < 0) {
			fuse_reply_err(req, mcfs_errno(rc));
			return;
		}
		reply_xattr(req, buf, strlen(buf), size);
		return;
	}
	rc = mooncake_store_stat(fs->store, n->key, &st);
	if (rc) {
		fuse_reply_err(req, mcfs_errno(rc));
		return;
	}
	if (!strcmp(name, "user.mooncake.lease_ms"))
		snprintf(buf, sizeof(buf), "%" PRIu64, st.lease_ms);
	else if (!strcmp(name, "user.mooncake.holds"))
		snprintf(buf, sizeof(buf), "%u", st.holds);
	else if (!strcmp(name, "user.mooncake.pins"))
		snprintf(buf, sizeof(buf), "%s%s%s", st.hard_pin ? "hard" : "",
			 st.hard_pin && st.soft_pin_ms ? "," : "",
			 st.soft_pin_ms ? "soft" :
			 st.hard_pin	? "" :
					  "none");
	else {
		fuse_reply_err(req, ENODATA);
		return;
	}
	reply_xattr(req, buf, strlen(buf), size);
}

void mcfs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		      const char *value, size_t size, int flags)
{
	(void)ino;
	(void)name;
	(void)value;
	(void)size;
	(void)flags;
	fuse_reply_err(req, ENOTSUP);
}

void mcfs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino;
	(void)name;
	fuse_reply_err(req, ENOTSUP);
}
