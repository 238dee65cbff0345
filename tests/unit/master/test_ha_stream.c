/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the HA stream's pure parts (master/ha_int.h): the
 * in-sync key's codec, and a standby's buffer as HaAppend calls fill it:
 * starting over, contiguous runs, gaps, other epochs, damaged entries,
 * entries already in the log, handing over and giving back.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ha_int.h"
#include "mc_crc32c.h"
#include "mc_le.h"
#include "mooncake/mc_err.h"

#define INVAL MC_STORE_INVALID_PARAMS
#define UNAVAIL MC_STORE_UNAVAILABLE_IN_CURRENT_MODE

static struct ha_sbuf sb;
static uint8_t blobs[16][8];

/* Entry i: 4 payload bytes and their CRC-32C. */
static struct ha_sbuf_ent ent(unsigned i)
{
	memset(blobs[i], (int)i + 1, 4);
	mc_put_le32(blobs[i] + 4, mc_crc32c(0, blobs[i], 4));
	return (struct ha_sbuf_ent){ .data = blobs[i], .len = 8 };
}

static void init(void)
{
	ha_sbuf_init(&sb);
	ha_sbuf_set_open(&sb, true);
}

static void fini(void)
{
	ha_sbuf_fini(&sb);
}

TestSuite(ha_sbuf, .init = init, .fini = fini);

Test(ha_sbuf, reset_then_runs_and_gaps)
{
	struct ha_sbuf_ent e[4] = { ent(0), ent(1), ent(2), ent(3) };
	uint64_t held = 0;

	/* Not started: only a reset is taken. */
	cr_assert_eq(ha_sbuf_append(&sb, 7, 10, 9, false, e, 1, &held), INVAL);
	/* A reset must not skip entries the log lacks. */
	cr_assert_eq(ha_sbuf_append(&sb, 7, 10, 8, true, e, 1, &held), INVAL);
	cr_assert_eq(ha_sbuf_append(&sb, 7, 10, 9, true, e, 2, &held), 0);
	cr_assert_eq(held, 11);
	/* The same entries again (a retried call), then the next ones. */
	cr_assert_eq(ha_sbuf_append(&sb, 7, 10, 9, false, e, 2, &held), 0);
	cr_assert_eq(held, 11);
	cr_assert_eq(ha_sbuf_append(&sb, 7, 12, 9, false, e + 2, 1, &held), 0);
	cr_assert_eq(held, 12);
	/* A gap is refused (start over). */
	cr_assert_eq(ha_sbuf_append(&sb, 7, 14, 9, false, e + 3, 1, &held),
		     INVAL);
	/* ... unless the log holds what is missing. */
	cr_assert_eq(ha_sbuf_append(&sb, 7, 14, 13, false, e + 3, 1, &held), 0);
	cr_assert_eq(held, 14);
	cr_assert_eq(sb.first, 14);
	cr_assert_eq(sb.n, 1);
}

Test(ha_sbuf, epochs_closed_and_damage)
{
	struct ha_sbuf_ent e[2] = { ent(0), ent(1) };
	uint8_t bad[8];
	struct ha_sbuf_ent b = { .data = bad, .len = 8 };
	uint64_t held = 0;

	cr_assert_eq(ha_sbuf_append(&sb, 7, 1, 0, true, e, 1, &held), 0);
	/* An older leader is refused; a newer one must start over. */
	cr_assert_eq(ha_sbuf_append(&sb, 6, 1, 0, true, e, 1, &held), UNAVAIL);
	cr_assert_eq(ha_sbuf_append(&sb, 8, 2, 0, false, e + 1, 1, &held),
		     INVAL);
	cr_assert_eq(ha_sbuf_append(&sb, 8, 1, 0, true, e, 2, &held), 0);
	cr_assert_eq(sb.epoch, 8);
	/* A damaged entry is refused whole. */
	memcpy(bad, blobs[0], 8);
	bad[0] ^= 1;
	cr_assert_eq(ha_sbuf_append(&sb, 8, 3, 0, false, &b, 1, &held), INVAL);
	cr_assert_eq(sb.n, 2);
	/* Closed (taking over): nothing is taken. */
	ha_sbuf_set_open(&sb, false);
	cr_assert_eq(ha_sbuf_append(&sb, 8, 3, 0, false, e, 1, &held), UNAVAIL);
}

Test(ha_sbuf, take_trims_and_restore_gives_back)
{
	struct ha_sbuf_ent e[3] = { ent(0), ent(1), ent(2) };
	struct ship_ent *list, *x;
	uint64_t held = 0, epoch = 0, want = 6;

	cr_assert_eq(ha_sbuf_append(&sb, 9, 5, 4, true, e, 3, &held), 0);
	/* The record reached 5: entries 6 and 7 are handed over. */
	list = ha_sbuf_take(&sb, 5, &epoch);
	cr_assert_eq(epoch, 9);
	for (x = list; x; x = x->next, want++) {
		cr_assert_eq(x->seq, want);
		cr_assert_eq(memcmp(x->data, blobs[want - 5], 8), 0);
	}
	cr_assert_eq(want, 8);
	cr_assert_eq(ha_sbuf_append(&sb, 9, 8, 4, false, e, 1, &held), UNAVAIL,
		     "closed by take");
	/* Taking over failed: the entries come back, and it takes more. */
	ha_sbuf_restore(&sb, epoch, list);
	cr_assert_eq(sb.first, 6);
	cr_assert_eq(sb.n, 2);
	cr_assert_eq(ha_sbuf_append(&sb, 9, 8, 4, false, e, 1, &held), 0);
	cr_assert_eq(held, 8);
}

Test(ha_isr, parse)
{
	struct ha_isr r;
	const char *ok = "42\n10.0.0.1:50051 1a2b\n[::1]:7 ff\n";
	const char *bad[] = { "", "x\n", "42\nhost\n", "42\nhost zz\n",
			      "42\n 1\n" };

	cr_assert_eq(ha_isr_parse(ok, strlen(ok), &r), 0);
	cr_assert_eq(r.epoch, 42);
	cr_assert_eq(r.n, 2);
	cr_assert_str_eq(r.m[0].addr, "10.0.0.1:50051");
	cr_assert_eq(r.m[0].inc, 0x1a2b);
	cr_assert_str_eq(r.m[1].addr, "[::1]:7");
	cr_assert_eq(ha_isr_parse("5\n", 2, &r), 0);
	cr_assert_eq(r.n, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(ha_isr_parse(bad[i], strlen(bad[i]), &r), -EBADMSG,
			     "%s", bad[i]);
}

static bool matches(const char *val, long long lease, long long named)
{
	struct mc_etcd_kv kv = { .val = (char *)val,
				 .len = strlen(val),
				 .lease = lease };

	return ha_standby_matches(&kv, named);
}

/* A standby key names its process by incarnation, whatever lease it is on
 * now; one written before incarnations by the lease it is on. */
Test(ha_isr, standby_key_names_its_incarnation)
{
	cr_assert(matches("17 1a2b", 0x99, 0x1a2b), "renewed lease");
	cr_assert(!matches("17 1a2b", 0x1a2b, 0x99), "another process");
	cr_assert(matches("17", 0x1a2b, 0x1a2b), "old format, its lease");
	cr_assert(!matches("17", 0x99, 0x1a2b), "old format, another lease");
	cr_assert(!matches("17 ", 0x1a2b, 0x1a2b), "no digits");
	cr_assert(!matches("17 zz", 0x1a2b, 0), "junk");
}
