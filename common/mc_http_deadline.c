/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Requests' deadlines and the connection limit in the HTTP server (see
 * mc_http_deadline.h). The watcher thread looks at the armed connections
 * once a second and shuts down the socket of one past its deadline:
 * libmicrohttpd then sees the end of the stream and closes it as usual
 * (the descriptor stays its to close). A new connection over the limit
 * shuts down the one that has waited longest for a request the same way.
 * Only under the lock, and only a connection still watched (the library
 * tells us before it closes the descriptor), is a socket shut down, so a
 * descriptor number reused by another connection is never touched.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "mc_http_deadline.h"
#include "mc_log.h"
#include "mc_ratelimit.h"
#include "mc_time.h"

struct mc_http_watched {
	struct mc_http_watched *prev, *next;
	int fd;
	uint64_t since; /* mono ms the request began; 0: disarmed */
	bool shut;
	char peer[64];
};

struct mc_http_deadlines {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct mc_http_watched head; /* a ring */
	unsigned deadline_ms;
	unsigned max_conns; /* 0: no limit of ours */
	unsigned n; /* watched */
	unsigned n_shut; /* of them, shut down and not yet closed */
	bool stop;
	pthread_t thread;
	struct mc_ratelimit rl;
	struct mc_ratelimit rl_evict;
	struct mc_ratelimit rl_full;
	char name[32];
};

#define RL_MS 10000u

static void shut(struct mc_http_deadlines *d, struct mc_http_watched *w)
{
	(void)shutdown(w->fd, SHUT_RDWR);
	w->shut = true;
	d->n_shut++;
}

/*
 * Shut down the connection that has waited longest for a request (armed:
 * none is being handled or answered), but not `except` (d->lock held).
 * False when every connection is being served.
 */
static bool evict_locked(struct mc_http_deadlines *d,
			 const struct mc_http_watched *except, const char *why)
{
	struct mc_http_watched *victim = NULL;
	uint64_t now = mc_mono_ms();
	unsigned dropped;

	for (struct mc_http_watched *w = d->head.next; w != &d->head;
	     w = w->next)
		if (w != except && w->since && !w->shut &&
		    (!victim || w->since < victim->since))
			victim = w;
	if (!victim) {
		if (mc_ratelimit_ok(&d->rl_full, RL_MS, &dropped))
			mc_log_warn("http",
				    "%s: %s, and all %u connections are being "
				    "served: none closed (%u more in the last "
				    "%u s not logged)",
				    d->name, why, d->n - d->n_shut, dropped,
				    RL_MS / 1000);
		return false;
	}
	shut(d, victim);
	if (mc_ratelimit_ok(&d->rl_evict, RL_MS, &dropped))
		mc_log_notice("http",
			      "%s: %s: closed the connection from %s, "
			      "waiting %llu ms for a request (%u more in the "
			      "last %u s not logged)",
			      d->name, why, victim->peer,
			      (unsigned long long)(now - victim->since),
			      dropped, RL_MS / 1000);
	return true;
}

static void *watch_main(void *arg)
{
	struct mc_http_deadlines *d = arg;

	pthread_mutex_lock(&d->lock);
	while (!d->stop) {
		struct timespec ts;
		uint64_t now = mc_mono_ms();
		unsigned n_closed = 0, dropped;
		char peer[64] = "";

		for (struct mc_http_watched *w = d->head.next; w != &d->head;
		     w = w->next) {
			if (!w->since || w->shut ||
			    now - w->since < d->deadline_ms)
				continue;
			shut(d, w);
			if (!n_closed++)
				snprintf(peer, sizeof(peer), "%s", w->peer);
		}
		if (n_closed && mc_ratelimit_ok(&d->rl, RL_MS, &dropped))
			mc_log_warn("http",
				    "%s: closed %u connection(s) (%s, ...) "
				    "that did not send a whole request within "
				    "%u s (%u more closings not logged)",
				    d->name, n_closed, peer,
				    d->deadline_ms / 1000, dropped);
		ts = mc_mono_deadline(1000);
		pthread_cond_timedwait(&d->cond, &d->lock, &ts);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

struct mc_http_deadlines *mc_http_deadlines_start(const char *name,
						  unsigned deadline_ms,
						  unsigned max_conns)
{
	struct mc_http_deadlines *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	pthread_mutex_init(&d->lock, NULL);
	mc_cond_init_mono(&d->cond);
	d->head.next = d->head.prev = &d->head;
	d->deadline_ms = deadline_ms;
	d->max_conns = max_conns;
	snprintf(d->name, sizeof(d->name), "%s", name ? name : "http");
	if (pthread_create(&d->thread, NULL, watch_main, d)) {
		pthread_cond_destroy(&d->cond);
		pthread_mutex_destroy(&d->lock);
		free(d);
		return NULL;
	}
	return d;
}

void mc_http_deadlines_stop(struct mc_http_deadlines *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->thread, NULL);
	while (d->head.next != &d->head) {
		struct mc_http_watched *w = d->head.next;

		d->head.next = w->next;
		free(w);
	}
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

struct mc_http_watched *mc_http_watch(struct mc_http_deadlines *d, int fd,
				      const char *peer)
{
	struct mc_http_watched *w;

	if (!d || fd < 0 || !(w = calloc(1, sizeof(*w))))
		return NULL;
	w->fd = fd;
	w->since = mc_mono_ms();
	snprintf(w->peer, sizeof(w->peer), "%s", peer ? peer : "?");
	pthread_mutex_lock(&d->lock);
	w->next = d->head.next;
	w->prev = &d->head;
	d->head.next->prev = w;
	d->head.next = w;
	d->n++;
	if (d->max_conns && d->n - d->n_shut > d->max_conns) {
		char why[64];

		snprintf(why, sizeof(why), "%u connections", d->max_conns);
		(void)evict_locked(d, w, why);
	}
	pthread_mutex_unlock(&d->lock);
	return w;
}

bool mc_http_deadlines_evict(struct mc_http_deadlines *d, const char *why)
{
	bool ok;

	if (!d)
		return false;
	pthread_mutex_lock(&d->lock);
	ok = evict_locked(d, NULL, why);
	pthread_mutex_unlock(&d->lock);
	return ok;
}

static void set_since(struct mc_http_deadlines *d, struct mc_http_watched *w,
		      uint64_t since)
{
	if (!d || !w)
		return;
	pthread_mutex_lock(&d->lock);
	w->since = since;
	pthread_mutex_unlock(&d->lock);
}

void mc_http_watch_arm(struct mc_http_deadlines *d, struct mc_http_watched *w)
{
	set_since(d, w, mc_mono_ms());
}

void mc_http_watch_disarm(struct mc_http_deadlines *d,
			  struct mc_http_watched *w)
{
	set_since(d, w, 0);
}

void mc_http_unwatch(struct mc_http_deadlines *d, struct mc_http_watched *w)
{
	if (!d || !w)
		return;
	pthread_mutex_lock(&d->lock);
	w->prev->next = w->next;
	w->next->prev = w->prev;
	d->n--;
	if (w->shut)
		d->n_shut--;
	pthread_mutex_unlock(&d->lock);
	free(w);
}
