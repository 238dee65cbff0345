/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The RPC server (mc_rpc_server.h): an accept thread and one detached-but-counted thread
 * per connection (rpc_conn.c). The acceptor admits a connection within
 * max_connections, shedding the longest-waiting connection when at the
 * limit (rpc_conn.h). Stopping shuts every connection down and waits for
 * the threads to leave.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mc_daemon.h"
#include "mc_log.h"
#include "mc_net.h"
#include "mc_rpc.h"
#include "rpc_conn.h"
#include "mooncake/mc_err.h"

#define RL_MS 10000u

void mc_rpc_conn_close(struct conn *c)
{
	struct mc_rpc_server *s = c->srv;

	pthread_mutex_lock(&s->lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->n_conns--;
	if (atomic_load(&c->state) == CONN_SHED)
		s->n_shed--;
	close(c->fd);
	pthread_cond_broadcast(&s->gone);
	pthread_mutex_unlock(&s->lock);
	free(c);
}

/* Shed the connection that has waited longest (s->lock held): false when
 * every connection is being served. */
static bool shed_one(struct mc_rpc_server *s)
{
	for (;;) {
		struct conn *victim = NULL;
		uint64_t oldest = UINT64_MAX;
		int expect = CONN_WAITING;
		unsigned dropped;

		for (struct conn *c = s->conns; c; c = c->next) {
			uint64_t t = atomic_load(&c->since_ms);
			if (atomic_load(&c->state) == CONN_WAITING &&
			    t < oldest) {
				oldest = t;
				victim = c;
			}
		}
		if (!victim)
			return false;
		if (!atomic_compare_exchange_strong(&victim->state, &expect,
						    CONN_SHED))
			continue; /* it became busy: look again */
		s->n_shed++;
		shutdown(victim->fd, SHUT_RDWR);
		if (mc_ratelimit_ok(&s->rl_shed, RL_MS, &dropped))
			mc_log_notice(
				"rpc",
				"%u connections (--rpc_max_connections): "
				"closed the connection from %s, waiting "
				"%llu ms (%u more in the last %u s not "
				"logged)",
				s->cfg.max_connections, victim->peer,
				(unsigned long long)(mc_rpc_now_ms() - oldest),
				dropped, RL_MS / 1000);
		return true;
	}
}

/* The new connection's record, linked in; NULL when refused. */
static struct conn *admit(struct mc_rpc_server *s, int fd)
{
	struct conn *c;
	unsigned dropped;

	pthread_mutex_lock(&s->lock);
	if (s->n_conns - s->n_shed >= s->cfg.max_connections && !shed_one(s)) {
		pthread_mutex_unlock(&s->lock);
		if (mc_ratelimit_ok(&s->rl_refused, RL_MS, &dropped))
			mc_log_warn("rpc",
				    "refused a connection: all %u connections "
				    "(--rpc_max_connections) are being served "
				    "(%u more in the last %u s not logged)",
				    s->cfg.max_connections, dropped,
				    RL_MS / 1000);
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		pthread_mutex_unlock(&s->lock);
		return NULL;
	}
	c->srv = s;
	c->fd = fd;
	atomic_init(&c->state, CONN_WAITING);
	c->auth = s->auth ? CONN_AUTH_HELLO : CONN_AUTHED;
	atomic_init(&c->since_ms, mc_rpc_now_ms());
	mc_busy_poll_init(&c->bp, s->cfg.busy_poll_us);
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->n_conns++;
	pthread_mutex_unlock(&s->lock);
	return c;
}

/* Out of descriptors: make room by shedding, and pause for a moment
 * instead of spinning on a listener that stays readable. */
static void accept_failed(struct mc_rpc_server *s, int err)
{
	struct pollfd p = { .fd = s->stop_pipe[0], .events = POLLIN };
	unsigned dropped;

	if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM)
		return;
	pthread_mutex_lock(&s->lock);
	(void)shed_one(s);
	pthread_mutex_unlock(&s->lock);
	if (mc_ratelimit_ok(&s->rl_refused, RL_MS, &dropped))
		mc_log_warn("rpc", "accept: %s (%u more in the last %u s)",
			    mc_strerror(-err), dropped, RL_MS / 1000);
	(void)poll(&p, 1, 10);
}

static void *accept_main(void *arg)
{
	struct mc_rpc_server *s = arg;

	for (;;) {
		struct pollfd p[2] = { { .fd = s->lfd, .events = POLLIN },
				       { .fd = s->stop_pipe[0],
					 .events = POLLIN } };
		struct timeval snd = { .tv_sec = s->cfg.frame_timeout_s };
		pthread_attr_t attr;
		pthread_t t;
		struct sockaddr_storage from = { 0 };
		socklen_t sl;
		struct conn *c;
		int fd;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		sl = sizeof(from);
		fd = accept4(s->lfd, (struct sockaddr *)&from, &sl,
			     SOCK_CLOEXEC);
		if (fd < 0) {
			accept_failed(s, errno);
			continue;
		}
		(void)mc_net_set_keepalive(fd); /* a client host that died */
		c = admit(s, fd);
		if (!c) {
			close(fd);
			continue;
		}
		(void)mc_net_set_nodelay(fd);
		/* An answer the peer does not take fails the write. */
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &snd,
				 sizeof(snd));
		/* From accept: a peer that already left has no name to ask
		 * for (its close was logged as "?:0"). */
		mc_net_addr_name(&from, c->peer, sizeof(c->peer));
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 256 * 1024);
		if (pthread_create(&t, &attr, mc_rpc_conn_main, c)) {
			unsigned dropped;

			if (mc_ratelimit_ok(&s->rl_refused, RL_MS, &dropped))
				mc_log_warn("rpc",
					    "no thread for a connection (%u "
					    "more in the last %u s)",
					    dropped, RL_MS / 1000);
			mc_rpc_conn_close(c);
		}
		pthread_attr_destroy(&attr);
	}
	return NULL;
}

/* Raise the descriptor limit to fit max_connections (and what else the
 * process opens), or lower max_connections to what fits. */
static void fit_fd_limit(struct mc_rpc_server *s)
{
	const uint64_t spare = 256; /* sqlite, HTTP servers, logs */
	uint64_t want = (uint64_t)s->cfg.max_connections + spare;
	uint64_t cur = mc_daemon_raise_fd_limit(want);
	uint64_t fit = cur > 2 * spare ? cur - spare : cur / 2;

	if (cur >= want)
		return;
	mc_log_warn("rpc",
		    "descriptor limit %llu (ulimit -n) leaves room for %llu of "
		    "%u RPC connections (--rpc_max_connections)",
		    (unsigned long long)cur, (unsigned long long)fit,
		    s->cfg.max_connections);
	s->cfg.max_connections = (unsigned)fit;
}

int mc_rpc_server_start(const struct mc_rpc_server_cfg *cfg,
			mc_rpc_handler_fn fn, void *arg,
			struct mc_rpc_server **out, char *err, size_t errlen)
{
	struct mc_rpc_server *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->fn = fn;
	s->arg = arg;
	if (!s->cfg.name)
		s->cfg.name = "server";
	s->cfg.auth = NULL;
	s->auth = cfg->auth != NULL;
	if (cfg->auth)
		s->key = *cfg->auth;
	if (!s->cfg.max_connections)
		s->cfg.max_connections = 4096;
	if (!s->cfg.max_body)
		s->cfg.max_body = MC_RPC_MAX_BODY;
	if (!s->cfg.frame_timeout_s)
		s->cfg.frame_timeout_s = 30;
	if (!s->cfg.max_inflight)
		s->cfg.max_inflight = s->cfg.max_body;
	if (s->cfg.max_inflight + MC_RPC_CONN_FREE_BYTES < s->cfg.max_body)
		mc_log_warn("rpc",
			    "requests over %zu bytes cannot be received: "
			    "--rpc_max_inflight_bytes is below "
			    "--max_request_size",
			    s->cfg.max_inflight + MC_RPC_CONN_FREE_BYTES);
	fit_fd_limit(s);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->gone, NULL);
	if (pipe2(s->stop_pipe, O_CLOEXEC)) {
		rc = -errno;
		free(s);
		return rc;
	}
	rc = mc_net_listen(cfg->host, cfg->port, 512, 0, &s->lfd, &s->port);
	if (rc) {
		snprintf(err, errlen, "RPC listener on %s:%d: %s", cfg->host,
			 cfg->port, mc_strerror(rc));
		close(s->stop_pipe[0]);
		close(s->stop_pipe[1]);
		free(s);
		return rc;
	}
	rc = pthread_create(&s->acceptor, NULL, accept_main, s);
	if (rc) {
		close(s->lfd);
		close(s->stop_pipe[0]);
		close(s->stop_pipe[1]);
		free(s);
		return -rc;
	}
	*out = s;
	return 0;
}

int mc_rpc_server_port(const struct mc_rpc_server *s)
{
	return s->port;
}

void mc_rpc_server_stop(struct mc_rpc_server *s)
{
	if (!s)
		return;
	if (write(s->stop_pipe[1], "x", 1) < 0)
		mc_log_warn("rpc", "stop pipe: %s", mc_strerror(-errno));
	pthread_join(s->acceptor, NULL);
	close(s->lfd);
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	for (struct conn *c = s->conns; c; c = c->next)
		shutdown(c->fd, SHUT_RDWR);
	/* Handlers in long polls: wake them. */
	if (s->cfg.on_stop)
		s->cfg.on_stop(s->arg);
	while (s->n_conns)
		pthread_cond_wait(&s->gone, &s->lock);
	pthread_mutex_unlock(&s->lock);
	close(s->stop_pipe[0]);
	close(s->stop_pipe[1]);
	pthread_cond_destroy(&s->gone);
	pthread_mutex_destroy(&s->lock);
	mc_auth_key_clear(&s->key);
	free(s);
}
