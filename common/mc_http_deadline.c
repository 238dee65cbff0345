/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Requests' deadlines in the HTTP server (see mc_http_deadline.h). The
 * watcher thread looks at the armed connections once a second and shuts
 * down the socket of one past its deadline: libmicrohttpd then sees the
 * end of the stream and closes it as usual (the descriptor stays its to
 * close).
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
	bool stop;
	pthread_t thread;
	struct mc_ratelimit rl;
	char name[32];
};

static void *watch_main(void *arg)
{
	struct mc_http_deadlines *d = arg;

	pthread_mutex_lock(&d->lock);
	while (!d->stop) {
		struct timespec ts;
		uint64_t now = mc_mono_ms();
		unsigned shut = 0, dropped;
		char peer[64] = "";

		for (struct mc_http_watched *w = d->head.next; w != &d->head;
		     w = w->next) {
			if (!w->since || w->shut ||
			    now - w->since < d->deadline_ms)
				continue;
			(void)shutdown(w->fd, SHUT_RDWR);
			w->shut = true;
			if (!shut++)
				snprintf(peer, sizeof(peer), "%s", w->peer);
		}
		if (shut && mc_ratelimit_ok(&d->rl, 10000, &dropped))
			mc_log_warn("http",
				    "%s: closed %u connection(s) (%s, ...) "
				    "that did not send a whole request within "
				    "%u s (%u more closings not logged)",
				    d->name, shut, peer, d->deadline_ms / 1000,
				    dropped);
		ts = mc_mono_deadline(1000);
		pthread_cond_timedwait(&d->cond, &d->lock, &ts);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

struct mc_http_deadlines *mc_http_deadlines_start(const char *name,
						  unsigned deadline_ms)
{
	struct mc_http_deadlines *d = calloc(1, sizeof(*d));
	pthread_condattr_t ca;

	if (!d)
		return NULL;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, &ca);
	pthread_condattr_destroy(&ca);
	d->head.next = d->head.prev = &d->head;
	d->deadline_ms = deadline_ms;
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
	pthread_mutex_unlock(&d->lock);
	return w;
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
	pthread_mutex_unlock(&d->lock);
	free(w);
}
