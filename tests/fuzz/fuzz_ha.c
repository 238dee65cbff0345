/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for what the master's HA reads from etcd (master/ha.c):
 * range answers (common/etcd/etcd_kv.c: the op log, master_view, standby
 * keys) and op log entries, sqlite changesets applied to a standby's
 * record (master/db_log.c).
 *
 * Byte 0 picks the use of the rest. 0: JSON of a range answer:
 * mc_etcd_range_parse() returns 0, -EBADMSG or -ENOMEM; on 0 every kv has
 * a NUL-terminated key without inner NUL and a value NUL-terminated past
 * its length, and no kvs means a NULL array. Otherwise: an op log entry
 * (a changeset and its CRC-32C) applied as entry 1 to a fresh in-memory
 * record: 0 or a code, the record's entry is 1 exactly when it returned
 * 0, and the record still answers a listing afterwards. sqlite's own
 * changeset reader is not fuzzed past the checksum: 3.40 loops forever on
 * some malformed changesets (a lone table header "T"), which is why
 * entries carry one.
 */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "db.h"
#include "etcd_kv.h"
#include "fuzz_common.h"
#include "mc_log.h"

static void range(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
	struct mc_etcd_kv *kvs = NULL;
	size_t n = 0;
	bool more = false;
	long long rev = 0;
	int rc;

	if (!j)
		return;
	rc = mc_etcd_range_parse(j, &kvs, &n, &more, &rev);
	FUZZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -ENOMEM);
	if (!rc) {
		FUZZ_CHECK((n == 0) == (kvs == NULL));
		for (size_t i = 0; i < n; i++) {
			FUZZ_CHECK(kvs[i].key && kvs[i].val);
			FUZZ_CHECK(kvs[i].val[kvs[i].len] == '\0');
		}
	} else {
		FUZZ_CHECK(!kvs && !n);
	}
	mc_etcd_kvs_free(kvs, n);
	json_decref(j);
}

static void count(void *arg, const struct mst_db_entry *e)
{
	(void)e;
	(*(unsigned *)arg)++;
}

static void changeset(const uint8_t *data, size_t size)
{
	struct mst_db *db = NULL;
	char err[256];
	unsigned n = 0;
	bool trunc = false;
	int rc;

	if (mst_db_open("memory", false, &db, err, sizeof(err)))
		return;
	rc = mst_db_log_apply(db, 1, data, size);
	FUZZ_CHECK(mst_db_log_seq(db) == (rc == 0 ? 1u : 0u));
	FUZZ_CHECK(!mst_db_list(db, "", 0, NULL, 0, "", 0, 100, true, count, &n,
				&trunc));
	mst_db_close(db);
}

static void drop(int level, const char *line, void *arg)
{
	(void)level;
	(void)line;
	(void)arg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool quiet;

	if (!quiet) {
		/* A bad changeset is logged as an error: not news here. */
		mc_log_set_sink(drop, NULL);
		quiet = true;
	}
	if (!size)
		return 0;
	if (data[0] == 0)
		range(data + 1, size - 1);
	else
		changeset(data + 1, size - 1);
	return 0;
}
