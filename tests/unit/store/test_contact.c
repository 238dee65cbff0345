/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the client's contact with the master's run
 * (mooncakefs/lib/contact.c): which answers move it, when a write into
 * placed space may start, and what a master that does not answer gives.
 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "contact.h"
#include "master_client.h"
#include "mc_time.h"
#include "mooncake/mc_err.h"

/* Port 1: nothing listens, every Ping is refused at once. */
static struct mcs_master *dead_master(void)
{
	struct mcs_master *m;

	cr_assert_eq(mcs_master_create("127.0.0.1:1", 200, NULL, &m), 0);
	return m;
}

Test(contact, fresh_contact_of_the_run_lets_a_write_start)
{
	struct mcs_master *m = dead_master();
	struct mcs_contact c;
	uint64_t t0;
	int rc;

	mcs_contact_init(&c);
	mcs_contact_note(&c, 7, mc_mono_ms());
	/* Fresh contact asks nobody. */
	cr_assert_eq(mcs_contact_check(&c, m, 7, mc_mono_ms() + 1000), 0);
	/* A master that does not say its run: nothing to check. */
	cr_assert_eq(mcs_contact_check(&c, m, 0, mc_mono_ms() + 1000), 0);
	/* A put placed by another run than the one noted: only the master's
	 * own word says it is gone; without an answer, no write. */
	t0 = mc_mono_ms();
	rc = mcs_contact_check(&c, m, 5, t0 + 200);
	cr_assert(rc < 0 && rc != MC_EMASTERGONE, "rc %d", rc);
	cr_assert_geq(mc_mono_ms() - t0, 200);
	mcs_master_destroy(m);
	mcs_contact_destroy(&c);
}

Test(contact, an_old_runs_late_answer_is_ignored)
{
	struct mcs_contact c;
	uint64_t now = mc_mono_ms();

	mcs_contact_init(&c);
	mcs_contact_note(&c, 1, now - 50);
	mcs_contact_note(&c, 2, now - 10); /* a new run answers */
	/* The old run's answer to a call sent before that arrives late. */
	mcs_contact_note(&c, 1, now - 30);
	cr_assert_eq(c.run, 2);
	cr_assert_eq(c.sent_ms, now - 10);
	/* An older call of the same run does not move contact back. */
	mcs_contact_note(&c, 2, now - 40);
	cr_assert_eq(c.sent_ms, now - 10);
	mcs_contact_note(&c, 0, now); /* no run: ignored */
	cr_assert_eq(c.run, 2);
	mcs_contact_destroy(&c);
}

Test(contact, stale_contact_and_no_master_waits_out_the_deadline)
{
	struct mcs_contact c;
	struct mcs_master *m;
	uint64_t t0;
	int rc;

	mcs_contact_init(&c);
	mcs_contact_note(&c, 3, mc_mono_ms() - MCS_WRITE_CONTACT_MS);
	m = dead_master();
	t0 = mc_mono_ms();
	rc = mcs_contact_check(&c, m, 3, t0 + 300);
	cr_assert(rc < 0 && rc != MC_EMASTERGONE, "rc %d", rc);
	cr_assert_geq(mc_mono_ms() - t0, 300, "gave up before the deadline");
	cr_assert_lt(mc_mono_ms() - t0, 3000);
	mcs_master_destroy(m);
	mcs_contact_destroy(&c);
}
