/* SPDX-License-Identifier: Apache-2.0 */
/* Heartbeat thread (see ping.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "master_client.h"
#include "mc_log.h"
#include "mc_time.h"
#include "mooncake/mc_err.h"
#include "ping.h"
#include "util.h"

struct mcs_ping {
	struct mcs_master *m;
	unsigned interval_ms;
	mcs_remount_fn remount;
	mcs_owed_fn owed;
	mcs_tick_fn tick;
	void *arg;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	bool outage;
};

static void once(struct mcs_ping *p)
{
	uint64_t fence_ms = 0;
	int status = 0, rc;

	rc = mcs_master_ping(p->m, &status, &fence_ms, NULL);
	if (rc) {
		if (!p->outage)
			mc_log_warn("store",
				    "master unreachable: ping: %s (retrying "
				    "every %u ms)",
				    mc_strerror(rc), p->interval_ms);
		p->outage = true;
		return;
	}
	if (p->outage)
		mc_log_notice("store", "master reachable again");
	p->outage = false;
	if (p->tick)
		p->tick(p->arg);
	if (status == MCS_CLIENT_NEED_REMOUNT || (p->owed && p->owed(p->arg))) {
		if (status == MCS_CLIENT_NEED_REMOUNT)
			mc_log_info("store", "master asks for a remount");
		rc = p->remount(p->arg, fence_ms);
		if (rc)
			mc_log_debug("store", "remount: %s", mc_strerror(rc));
	}
}

static void *thread_main(void *arg)
{
	struct mcs_ping *p = arg;
	struct timespec ts;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		ts = mc_mono_deadline(p->interval_ms);
		while (!p->stop && pthread_cond_timedwait(&p->cond, &p->lock,
							  &ts) != ETIMEDOUT)
			;
		if (p->stop)
			break;
		pthread_mutex_unlock(&p->lock);
		once(p);
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int mcs_ping_start(struct mcs_master *m, unsigned interval_ms,
		   mcs_remount_fn remount, mcs_owed_fn owed, mcs_tick_fn tick,
		   void *arg, struct mcs_ping **out)
{
	struct mcs_ping *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return -ENOMEM;
	p->m = m;
	p->interval_ms = interval_ms ? interval_ms : 1000;
	p->remount = remount;
	p->owed = owed;
	p->tick = tick;
	p->arg = arg;
	pthread_mutex_init(&p->lock, NULL);
	mc_cond_init_mono(&p->cond);
	rc = mcs_thread_start(&p->thread, thread_main, p);
	if (rc) {
		pthread_cond_destroy(&p->cond);
		pthread_mutex_destroy(&p->lock);
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void mcs_ping_stop(struct mcs_ping *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
