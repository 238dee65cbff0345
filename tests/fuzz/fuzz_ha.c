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
 * entries carry one. 2: the leader's stream as a standby takes it
 * (master/ha_sbuf.c): the rest is a run of HaAppend request bodies, each
 * a u16 little-endian length and that many bytes; each that decodes is
 * applied to one buffer: 0, -600 or -1011, and on 0 the buffer holds a
 * contiguous run ending at the answered entry; taking the buffer hands
 * over a list in order. 3: the value of the in-sync key (read from
 * etcd): ha_isr_parse() returns 0 or -EBADMSG, and on 0 every member has
 * a non-empty address. 4: the value of a standby key (read from etcd),
 * matched against an in-sync line: an old-format value (no space) matches
 * by the key's lease alone.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "etcd_kv.h"
#include "ha_int.h"
#include "mc_rpc.h"
#include "mooncake/mc_err.h"
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

	if (mst_db_open("memory", 0, &db, err, sizeof(err)))
		return;
	rc = mst_db_log_apply(db, 1, data, size);
	FUZZ_CHECK(mst_db_log_seq(db) == (rc == 0 ? 1u : 0u));
	FUZZ_CHECK(!mst_db_list(db, "", 0, NULL, 0, "", 0, 100, true, count, &n,
				&trunc));
	mst_db_close(db);
}

static void stream(const uint8_t *data, size_t size)
{
	struct ha_sbuf sb;
	struct ship_ent *list;
	uint64_t epoch = 0;

	ha_sbuf_init(&sb);
	ha_sbuf_set_open(&sb, true);
	while (size >= 2) {
		size_t len = (size_t)data[0] | (size_t)data[1] << 8;
		Mcrpc__HaAppendRequest *q;

		data += 2;
		size -= 2;
		if (len > size)
			len = size;
		q = (Mcrpc__HaAppendRequest *)mc_rpc_unpack(
			&mcrpc__ha_append_request__descriptor, data, len);
		data += len;
		size -= len;
		if (q) {
			struct ha_sbuf_ent ents[64];
			size_t n = q->n_entries < 64 ? q->n_entries : 64;
			uint64_t held = 0;
			int rc;

			for (size_t i = 0; i < n; i++) {
				ents[i].data = q->entries[i].data;
				ents[i].len = q->entries[i].len;
			}
			rc = ha_sbuf_append(&sb, q->epoch, q->first, q->logged,
					    q->reset, ents, n, &held);
			FUZZ_CHECK(rc == 0 || rc == MC_STORE_INVALID_PARAMS ||
				   rc == MC_STORE_UNAVAILABLE_IN_CURRENT_MODE);
			if (!rc)
				FUZZ_CHECK(held == sb.first + sb.n - 1);
			protobuf_c_message_free_unpacked(&q->base, NULL);
		}
	}
	list = ha_sbuf_take(&sb, 0, &epoch);
	for (uint64_t want = list ? list->seq : 0; list; want++) {
		struct ship_ent *next = list->next;

		FUZZ_CHECK(list->seq == want);
		free(list->data);
		free(list);
		list = next;
	}
	ha_sbuf_fini(&sb);
}

static void isr(const uint8_t *data, size_t size)
{
	struct ha_isr r;
	int rc = ha_isr_parse((const char *)data, size, &r);

	FUZZ_CHECK(rc == 0 || rc == -EBADMSG);
	if (!rc) {
		FUZZ_CHECK(r.n <= MEMBERS_MAX);
		for (size_t i = 0; i < r.n; i++)
			FUZZ_CHECK(r.m[i].addr[0] != '\0');
	}
}

static void standby_key(const uint8_t *data, size_t size)
{
	struct mc_etcd_kv kv = { .val = malloc(size + 1), .len = size };

	if (!kv.val)
		return;
	memcpy(kv.val, data, size);
	kv.val[size] = '\0';
	/* An old-format value (no space) matches by its lease alone. */
	if (!memchr(kv.val, ' ', size))
		FUZZ_CHECK(!ha_standby_matches(&kv, 1));
	(void)ha_standby_matches(&kv, 0x1a2b);
	free(kv.val);
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
	else if (data[0] == 2)
		stream(data + 1, size - 1);
	else if (data[0] == 3)
		isr(data + 1, size - 1);
	else if (data[0] == 4)
		standby_key(data + 1, size - 1);
	else
		changeset(data + 1, size - 1);
	return 0;
}
