/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file dirs.h
 * Directory records (dirs.c).
 * Locking, time and codes as master.h says.
 */
#ifndef MST_DIRS_H
#define MST_DIRS_H

#include "master.h"

/**
 * Directory records (Mkdir) live in sqlite only: they are few, and only
 * the mount's lookups, listings and namespace changes read them. A
 * directory exists when it has a record or anything under its prefix.
 * Paths are prefixes ending in '/'.
 */
/** 1 with *a (may be NULL) when path has a record, 0 when not, or a code. */
int mst_dir_record(struct master *m, const char *path, size_t len,
		   mst_attr_t *a);
/** 1 when any key or record other than path's own lies under path. */
int mst_dir_has_entries(struct master *m, const char *path, size_t len);
/** The directory records one level below path (a directory's link count
 *  is 2 + this); 0 or a code. */
int mst_dir_subdirs(struct master *m, const char *path, size_t len,
		    uint32_t *n);
int mst_mkdir(struct master *m, const char *path, size_t len,
	      const mst_attr_t *a);
int mst_rmdir(struct master *m, const char *path, size_t len);
int mst_dir_setattr(struct master *m, const char *path, size_t len,
		    unsigned mask, const mst_attr_t *a, mst_attr_t *out);
/** In the caller's transaction: the record of key's parent directory (if
 *  any) gets mtime and ctime now. */
int mst_dir_touch_parent(struct master *m, const char *key, size_t len);
/** Apply the fields of mask from a onto t (MOONCAKE_SET_*); ctime now. */
void mst_attr_apply(mst_attr_t *t, unsigned mask, const mst_attr_t *a);

#endif
