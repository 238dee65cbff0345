/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Master RPC server: an accept thread and one detached-but-counted thread
 * per connection. Stopping shuts every connection down and waits for the
 * threads to leave.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "master.h"
#include "mc_busy_poll.h"
#include "mc_log.h"
#include "mc_net.h"
#include "mc_rpc.h"
#include "rpc_server.h"
#include "service.h"

struct conn {
	struct mst_rpc_server *srv;
	int fd;
	struct mc_busy_poll bp; /* waiting for the next request */
	struct conn *prev, *next;
};

struct mst_rpc_server {
	struct master *m;
	struct mst_rpc_server_cfg cfg;
	int lfd, port;
	int stop_pipe[2];
	pthread_t acceptor;
	pthread_mutex_t lock;
	pthread_cond_t gone;
	struct conn *conns;
	unsigned n_conns;
	bool stopping;
};

static void conn_close(struct conn *c)
{
	struct mst_rpc_server *s = c->srv;

	pthread_mutex_lock(&s->lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->n_conns--;
	close(c->fd);
	pthread_cond_broadcast(&s->gone);
	pthread_mutex_unlock(&s->lock);
	free(c);
}

static int read_frame_hdr(struct conn *c, uint8_t *hb)
{
	struct mst_rpc_server *s = c->srv;
	int tmo = s->cfg.idle_timeout_s ? (int)s->cfg.idle_timeout_s * 1000 :
					  -1;
	int rc = mc_busy_poll_wait(&c->bp, c->fd, tmo);

	if (rc)
		return rc;
	return mc_net_read_all(c->fd, hb, MC_RPC_HDR_LEN);
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct mst_rpc_server *s = c->srv;
	uint8_t hb[MC_RPC_HDR_LEN], *body = NULL;
	size_t body_cap = 0;

	for (;;) {
		struct mc_rpc_hdr h;
		uint8_t *frame;
		size_t len;
		int rc = read_frame_hdr(c, hb);

		if (rc)
			break;
		rc = mc_rpc_hdr_decode(hb, (uint32_t)s->cfg.max_body, &h);
		if (rc || h.kind != MC_RPC_REQUEST) {
			mc_log_info("rpc", "closing a connection: %s",
				    rc == -EMSGSIZE ?
					    "frame over the size limit" :
					    "not a request frame");
			break;
		}
		if (h.length + 1 > body_cap) {
			uint8_t *nb = realloc(body, h.length + 1);
			if (!nb)
				break;
			body = nb;
			body_cap = h.length + 1;
		}
		if (mc_net_read_all(c->fd, body, h.length))
			break;
		rc = mst_service_call(s->m, &h, body, &frame, &len);
		if (rc) {
			mc_log_info("rpc", "closing a connection: %s",
				    rc == -EPROTO ? "request does not decode" :
						    strerror(-rc));
			break;
		}
		rc = mc_net_write_all(c->fd, frame, len);
		free(frame);
		if (rc)
			break;
		if (body_cap > (1u << 20)) {
			free(body);
			body = NULL;
			body_cap = 0;
		}
	}
	free(body);
	conn_close(c);
	return NULL;
}

static void *accept_main(void *arg)
{
	struct mst_rpc_server *s = arg;

	for (;;) {
		struct pollfd p[2] = { { .fd = s->lfd, .events = POLLIN },
				       { .fd = s->stop_pipe[0],
					 .events = POLLIN } };
		pthread_attr_t attr;
		pthread_t t;
		struct conn *c;
		int fd;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		pthread_mutex_lock(&s->lock);
		if (s->n_conns >= s->cfg.max_connections) {
			pthread_mutex_unlock(&s->lock);
			mc_log_warn("rpc", "connection limit %u reached",
				    s->cfg.max_connections);
			close(fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			pthread_mutex_unlock(&s->lock);
			close(fd);
			continue;
		}
		(void)mc_net_set_nodelay(fd);
		c->srv = s;
		c->fd = fd;
		mc_busy_poll_init(&c->bp, s->cfg.busy_poll_us);
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		s->n_conns++;
		pthread_mutex_unlock(&s->lock);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 256 * 1024);
		if (pthread_create(&t, &attr, conn_main, c)) {
			mc_log_warn("rpc", "no thread for a connection");
			conn_close(c);
		}
		pthread_attr_destroy(&attr);
	}
	return NULL;
}

int mst_rpc_server_start(struct master *m, const struct mst_rpc_server_cfg *cfg,
			 struct mst_rpc_server **out, char *err, size_t errlen)
{
	struct mst_rpc_server *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return -ENOMEM;
	s->m = m;
	s->cfg = *cfg;
	if (!s->cfg.max_connections)
		s->cfg.max_connections = 4096;
	if (!s->cfg.max_body)
		s->cfg.max_body = MC_RPC_MAX_BODY;
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
			 cfg->port, strerror(-rc));
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

int mst_rpc_server_port(const struct mst_rpc_server *s)
{
	return s->port;
}

void mst_rpc_server_stop(struct mst_rpc_server *s)
{
	if (!s)
		return;
	if (write(s->stop_pipe[1], "x", 1) < 0)
		mc_log_warn("rpc", "stop pipe: %s", strerror(errno));
	pthread_join(s->acceptor, NULL);
	close(s->lfd);
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	for (struct conn *c = s->conns; c; c = c->next)
		shutdown(c->fd, SHUT_RDWR);
	/* Long polls wait on the feed condition: wake them. */
	pthread_mutex_lock(&s->m->lock);
	s->m->stopping = true;
	pthread_cond_broadcast(&s->m->feed.cond);
	pthread_mutex_unlock(&s->m->lock);
	while (s->n_conns)
		pthread_cond_wait(&s->gone, &s->lock);
	pthread_mutex_unlock(&s->lock);
	close(s->stop_pipe[0]);
	close(s->stop_pipe[1]);
	pthread_cond_destroy(&s->gone);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
