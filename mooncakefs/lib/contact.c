/* SPDX-License-Identifier: Apache-2.0 */
/* The master's run and this client's latest contact with it (contact.h). */
#include <errno.h>
#include <time.h>

#include "contact.h"
#include "master_client.h"
#include "mc_log.h"
#include "mc_time.h"
#include "mooncake/mc_err.h"
#include "store_int.h"
#include "util.h"
#include "xfer.h"

#define RETRY_MS 20 /* between Pings while the master does not answer */

void mcs_contact_init(struct mcs_contact *c)
{
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->ping, NULL);
	c->run = 0;
	c->sent_ms = 0;
}

void mcs_contact_destroy(struct mcs_contact *c)
{
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->ping);
}

void mcs_contact_note(struct mcs_contact *c, uint64_t run, uint64_t sent_ms)
{
	if (!run)
		return;
	pthread_mutex_lock(&c->lock);
	if (run == c->run) {
		if (sent_ms > c->sent_ms)
			c->sent_ms = sent_ms;
	} else if (sent_ms >= c->sent_ms) {
		c->run = run;
		c->sent_ms = sent_ms;
	}
	pthread_mutex_unlock(&c->lock);
}

/* 0: go; MC_EMASTERGONE; -EAGAIN: contact too old. */
static int state(struct mcs_contact *c, uint64_t run)
{
	uint64_t now = mc_mono_ms();
	int rc;

	pthread_mutex_lock(&c->lock);
	if (c->run != run)
		rc = MC_EMASTERGONE;
	else if (now - c->sent_ms < MCS_WRITE_CONTACT_MS)
		rc = 0;
	else
		rc = -EAGAIN;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

uint64_t mcs_contact_send_by(struct mcs_contact *c, uint64_t run)
{
	uint64_t by;

	pthread_mutex_lock(&c->lock);
	by = c->run == run ? c->sent_ms + MCS_WRITE_CONTACT_MS +
				     MCS_XFER_WRITE_WINDOW_MS :
			     mc_mono_ms();
	pthread_mutex_unlock(&c->lock);
	return by;
}

static void pause_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)ms * 1000000L };

	nanosleep(&ts, NULL);
}

int mcs_contact_check(struct mcs_contact *c, struct mcs_master *m, uint64_t run,
		      uint64_t deadline)
{
	int rc, status;
	bool logged = false;

	if (!run)
		return 0;
	for (;;) {
		uint64_t sent, got = 0;

		if (!state(c, run))
			return 0;
		/* Contact is stale, or another run was noted: a Ping of our
		 * own tells (that run's answer may be to a call the RPC layer
		 * sent again to a new leader, after an old run's answer to a
		 * later call). One at a time: a writer that waited here may
		 * find contact renewed. */
		pthread_mutex_lock(&c->ping);
		if (!state(c, run)) {
			pthread_mutex_unlock(&c->ping);
			return 0;
		}
		sent = mc_mono_ms();
		rc = mcs_master_ping(m, &status, NULL, &got);
		if (!rc)
			mcs_contact_note(c, got, sent);
		pthread_mutex_unlock(&c->ping);
		if (!rc && !got)
			return 0; /* a master without runs answered */
		if (!rc && got != run) {
			rc = MC_EMASTERGONE;
			break;
		}
		if (mc_mono_ms() >= deadline) {
			rc = rc ? rc : -ETIMEDOUT; /* answers too slow */
			break;
		}
		if (!rc)
			continue;
		if (!logged)
			mc_log_info("store",
				    "a put's writes wait for the master that "
				    "placed them: ping: %s",
				    mc_strerror(rc));
		logged = true;
		pause_ms(RETRY_MS);
	}
	if (rc == MC_EMASTERGONE)
		mc_log_info("store", "%s", mc_strerror(rc));
	else
		mc_log_info("store",
			    "a put's writes gave up waiting for the master "
			    "that placed them: %s",
			    mc_strerror(rc));
	return rc;
}

struct guard {
	struct mooncake_store *s;
	uint64_t run;
};

static int guard_check(void *arg, uint64_t *send_by_ms)
{
	const struct guard *g = arg;
	struct mooncake_store *s = g->s;
	int rc = mcs_contact_check(&s->contact, s->master, g->run,
				   mc_mono_ms() + atomic_load(&s->transfer_ms));

	if (!rc && g->run)
		*send_by_ms = mcs_contact_send_by(&s->contact, g->run);
	return rc;
}

int mcs_write_placed(struct mooncake_store *s, uint64_t run,
		     struct mcs_xfer_op *ops, size_t n)
{
	struct guard arg = { .s = s, .run = run };
	struct mcs_xfer_guard g = { .check = guard_check, .arg = &arg };
	int rc = mcs_xfer_write(s->xfer, ops, n, atomic_load(&s->transfer_ms),
				&g);

	for (size_t i = 0; i < n; i++)
		mcs_note_transfer(s, ops[i].endpoint, ops[i].result);
	return rc;
}

void mcs_note_transfer(struct mooncake_store *s, const char *endpoint, int rc)
{
	/* A member killed or cut off: the master is told (the next puts go
	 * elsewhere); this client's slots there are given back. */
	if (!endpoint || !mcs_peer_unreachable(rc))
		return;
	mcs_master_note_unreachable(s->master, endpoint);
	mcs_slots_drop_endpoint(&s->slots, endpoint);
}

int mcs_contact_blame(struct mooncake_store *s, uint64_t run, int rc)
{
	uint64_t now_run = 0, sent = mc_mono_ms();
	int status;

	if (!rc || !run || mcs_master_ping(s->master, &status, NULL, &now_run))
		return rc;
	mcs_contact_note(&s->contact, now_run, sent);
	if (!now_run || now_run == run)
		return rc;
	mc_log_info("store", "%s (%s)", mc_strerror(MC_EMASTERGONE),
		    mc_strerror(rc));
	return MC_EMASTERGONE;
}
