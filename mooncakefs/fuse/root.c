/* SPDX-License-Identifier: Apache-2.0 */
/*
 * "/": kv/, ckpt/ and .mooncake/, fixed (ckpt/'s contents: ckpt.c).
 */
#include <errno.h>
#include <string.h>

#include "mcfs.h"

int mcfs_root_lookup(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		     struct mcfs_node **out)
{
	struct mcfs_node *n = NULL;

	*out = NULL;
	n = !strcmp(name, "kv")	       ? fs->kv :
	    !strcmp(name, "ckpt")      ? fs->ckpt :
	    !strcmp(name, ".mooncake") ? fs->vdir :
					 NULL;
	if (!n)
		return 0;
	*out = mcfs_node_child(fs, fs->root, n->name, n->kind, n->key, 0, 0, 0,
			       NULL);
	return *out ? 0 : -ENOMEM;
}

int mcfs_root_list(struct mcfs *fs, struct mcfs_node *dir,
		   struct mcfs_dirlist *d)
{
	int rc = 0;

	(void)fs;
	if (dir->kind == MCFS_ROOT) {
		rc = mcfs_dirent_add(d, "kv", "", MCFS_KV_DIR, 0, 0, 0, NULL);
		if (!rc)
			rc = mcfs_dirent_add(d, "ckpt", "", MCFS_CKPT_DIR, 0, 0,
					     0, NULL);
		if (!rc)
			rc = mcfs_dirent_add(d, ".mooncake", "", MCFS_VDIR, 0,
					     0, 0, NULL);
	}
	d->eof = true;
	return rc;
}
