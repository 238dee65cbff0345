/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Directory records (master.h, "directories"): made by the mount's mkdir,
 * kept in sqlite only, with their attributes. A directory also exists
 * without a record while keys lie under its prefix (an implicit
 * directory, the only kind objects put through the API make).
 */
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "dirs.h"
#include "feed.h"
#include "master.h"
#include "master.pb-c.h"
#include "mooncake/mc_err.h"
#include "mooncake/store_fs.h"
#include "mst_util.h"
#include "objmap.h"

static bool dir_path_ok(const char *path, size_t len)
{
	return len >= 2 && path[len - 1] == '/';
}

int mst_dir_record(struct master *m, const char *path, size_t len,
		   mst_attr_t *a)
{
	return mst_db_dir_get(m->db, path, len, a);
}

int mst_dir_has_entries(struct master *m, const char *path, size_t len)
{
	return mst_db_has_under(m->db, path, len);
}

int mst_dir_subdirs(struct master *m, const char *path, size_t len, uint32_t *n)
{
	return mst_db_subdirs(m->db, path, len, n);
}

/* Run one change in its own transaction. */
static int in_txn(struct master *m, int rc)
{
	if (rc) {
		mst_db_rollback(m->db);
		return rc;
	}
	return mst_db_commit(m->db);
}

/* Make (put) or remove path's record, touch its parent's, tell the feed:
 * one transaction. */
static int record_change(struct master *m, const char *path, size_t len,
			 const mst_attr_t *a, bool put)
{
	int rc = mst_db_begin(m->db);

	if (rc)
		return rc;
	rc = put ? mst_db_dir_put(m->db, path, len, a) :
		   mst_db_dir_del(m->db, path, len);
	if (!rc)
		rc = mst_dir_touch_parent(m, path, len - 1);
	rc = in_txn(m, rc);
	if (!rc)
		mst_feed_emit(m,
			      put ? MCRPC__EVENT_TYPE__EV_MKDIR :
				    MCRPC__EVENT_TYPE__EV_RMDIR,
			      path, len, NULL, 0, 0);
	return rc;
}

int mst_mkdir(struct master *m, const char *path, size_t len,
	      const mst_attr_t *a)
{
	int rc;

	if (!dir_path_ok(path, len))
		return MC_STORE_INVALID_PARAMS;
	if (len - 1 > m->cfg.max_key_len)
		return MC_STORE_INVALID_KEY;
	if (mst_objmap_get(&m->objs, path, len - 1))
		return MC_STORE_OBJECT_ALREADY_EXISTS;
	rc = mst_dir_record(m, path, len, NULL);
	if (!rc)
		rc = mst_dir_has_entries(m, path, len);
	if (rc)
		return rc == 1 ? MC_STORE_OBJECT_ALREADY_EXISTS : rc;
	return record_change(m, path, len, a, true);
}

int mst_rmdir(struct master *m, const char *path, size_t len)
{
	int rc;

	if (!dir_path_ok(path, len))
		return MC_STORE_INVALID_PARAMS;
	rc = mst_dir_has_entries(m, path, len);
	if (rc)
		return rc == 1 ? MC_STORE_INVALID_WRITE : rc;
	rc = mst_dir_record(m, path, len, NULL);
	if (rc <= 0)
		return rc ? rc : MC_STORE_OBJECT_NOT_FOUND;
	return record_change(m, path, len, NULL, false);
}

int mst_dir_setattr(struct master *m, const char *path, size_t len,
		    unsigned mask, const mst_attr_t *a, mst_attr_t *out)
{
	mst_attr_t t;
	int rc;

	if (!dir_path_ok(path, len))
		return MC_STORE_INVALID_PARAMS;
	rc = mst_dir_record(m, path, len, &t);
	if (rc == 0) {
		/* An implicit directory gets a record. */
		rc = mst_dir_has_entries(m, path, len);
		if (rc == 0)
			return MC_STORE_OBJECT_NOT_FOUND;
		t.mode = 0;
	}
	if (rc < 0)
		return rc;
	if (!t.mode) {
		t = *a;
		t.flags &= MOONCAKE_ATTR_ATIME_SET | MOONCAKE_ATTR_MTIME_SET |
			   MOONCAKE_ATTR_CTIME_SET;
	}
	mst_attr_apply(&t, mask, a);
	rc = mst_db_begin(m->db);
	if (!rc)
		rc = in_txn(m, mst_db_dir_put(m->db, path, len, &t));
	if (rc)
		return rc;
	*out = t;
	mst_feed_emit(m, MCRPC__EVENT_TYPE__EV_ATTR, path, len, NULL, 0, 0);
	return 0;
}

int mst_dir_touch_parent(struct master *m, const char *key, size_t len)
{
	size_t pl = len;

	while (pl && key[pl - 1] != '/')
		pl--;
	if (!pl)
		return 0; /* at the top: kv/ itself has no record */
	return mst_db_dir_touch(m->db, key, pl, mst_wall_ns());
}
