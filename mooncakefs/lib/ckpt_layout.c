/* SPDX-License-Identifier: Apache-2.0 */
/* A checkpoint's files and shards (see ckpt_layout.h). */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_layout.h"

static int rm_one(const char *p, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

int mcs_ckpt_mkparents(const char *path)
{
	char p[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, path, n + 1);
	for (char *c = p + 1; *c; c++) {
		if (*c != '/')
			continue;
		*c = 0;
		if (mkdir(p, 0755) && errno != EEXIST)
			return -errno;
		*c = '/';
	}
	return 0;
}

int mcs_ckpt_mkdirs(const char *path)
{
	int rc = mcs_ckpt_mkparents(path);

	return rc ? rc : mkdir(path, 0700) && errno != EEXIST ? -errno : 0;
}

void mcs_ckpt_default_dir(const char *leaf, char *out, size_t n)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");

	if (geteuid() && xdg && *xdg == '/')
		snprintf(out, n, "%s/mooncakefs/%s", xdg, leaf);
	else if (geteuid() && home && *home == '/')
		snprintf(out, n, "%s/.cache/mooncakefs/%s", home, leaf);
	else
		snprintf(out, n, "/var/cache/mooncakefs/%s", leaf);
}

int mcs_ckpt_usable_dir(const char *path)
{
	int rc = mcs_ckpt_mkdirs(path);

	return rc ? rc : access(path, W_OK | X_OK) ? -errno : 0;
}

void mcs_ckpt_rm_tree(const char *path)
{
	(void)nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int mcs_ckpt_join(char *out, const char *root, const char *rel)
{
	size_t a = strlen(root), b = strlen(rel);

	if (a + 1 + b + 1 > PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(out, root, a);
	out[a] = '/';
	memcpy(out + a + 1, rel, b + 1);
	return 0;
}

void mcs_ckpt_layout_free(struct mcs_ckpt_layout *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->nfiles; i++) {
		free(l->files[i].path);
		free(l->files[i].link);
	}
	free(l->files);
	free(l->shards);
	free(l->crcs);
	free(l->name);
	free(l->link);
	free(l);
}

static int add_file(struct mcs_ckpt_layout *l, const Mcrpc__CkptFile *f,
		    uint64_t *shard)
{
	struct mcs_ckpt_file *x = &l->files[l->nfiles];
	uint32_t type = f->mode & S_IFMT;

	if (!mc_ckpt_path_ok(f->path) ||
	    (type != S_IFREG && type != S_IFDIR && type != S_IFLNK) ||
	    (type == S_IFLNK && (!f->link || !*f->link)))
		return -EPROTO;
	x->path = strdup(f->path);
	x->link = type == S_IFLNK ? strdup(f->link) : NULL;
	if (!x->path || (type == S_IFLNK && !x->link)) {
		free(x->path);
		free(x->link);
		return -ENOMEM;
	}
	x->mode = f->mode;
	x->mtime_ns = f->mtime_ns;
	x->size = type == S_IFREG ? f->size : 0;
	x->first_shard = (uint32_t)*shard;
	x->nshards = (uint32_t)mc_ckpt_nshards(x->size, l->shard_size);
	l->total += x->size;
	*shard += x->nshards;
	l->nfiles++;
	return *shard > UINT32_MAX - 1 ? -EPROTO : 0;
}

int mcs_ckpt_layout_from(const Mcrpc__Ckpt *ck, struct mcs_ckpt_layout **out)
{
	struct mcs_ckpt_layout *l = calloc(1, sizeof(*l));
	uint64_t shard = 0;
	int rc = -ENOMEM;

	*out = NULL;
	if (!l)
		return -ENOMEM;
	l->id = ck->id;
	l->shard_size = ck->shard_size;
	/* A link has no files; a checkpoint a shard size in range. */
	if (!mc_ckpt_name_ok(ck->name) ||
	    (ck->link[0] && (ck->n_files || ck->n_crcs)) ||
	    (!ck->link[0] && (l->shard_size < MCS_CKPT_SHARD_MIN ||
			      l->shard_size > MCS_CKPT_SHARD_MAX))) {
		rc = -EPROTO;
		goto fail;
	}
	l->name = strdup(ck->name);
	l->link = ck->link[0] ? strdup(ck->link) : NULL;
	l->files = calloc(ck->n_files ? ck->n_files : 1, sizeof(*l->files));
	if (!l->name || (ck->link[0] && !l->link) || !l->files)
		goto fail;
	for (size_t i = 0; i < ck->n_files; i++) {
		rc = add_file(l, ck->files[i], &shard);
		if (rc)
			goto fail;
	}
	rc = -EPROTO;
	if (shard != ck->n_crcs)
		goto fail;
	l->nshards = (uint32_t)shard;
	rc = -ENOMEM;
	l->shards = calloc(shard ? shard : 1, sizeof(*l->shards));
	l->crcs = calloc(shard ? shard : 1, sizeof(*l->crcs));
	if (!l->shards || !l->crcs)
		goto fail;
	if (shard)
		memcpy(l->crcs, ck->crcs, shard * sizeof(*l->crcs));
	for (size_t i = 0; i < l->nfiles; i++) {
		const struct mcs_ckpt_file *f = &l->files[i];
		for (uint32_t k = 0; k < f->nshards; k++) {
			struct mcs_ckpt_shard *s =
				&l->shards[f->first_shard + k];
			uint64_t off = (uint64_t)k * l->shard_size;
			s->file = (uint32_t)i;
			s->off = off;
			s->len = (uint32_t)(f->size - off < l->shard_size ?
						    f->size - off :
						    l->shard_size);
		}
	}
	*out = l;
	return 0;
fail:
	mcs_ckpt_layout_free(l);
	return rc;
}

long mcs_ckpt_layout_find(const struct mcs_ckpt_layout *l, const char *path)
{
	for (size_t i = 0; i < l->nfiles; i++)
		if (!strcmp(l->files[i].path, path))
			return (long)i;
	return -1;
}
