/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The raw loopback TCP baseline (see raw_tcp.h). The server reads each
 * request with as few recv() calls as it takes (one, normally) and writes
 * the reply with one send(), which is what an HTTP server at its best does.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_util.h"
#include "mc_net.h"
#include "raw_tcp.h"

#define MAX_CONNS 256

struct raw_server {
	int listen_fd, cpu;
	pthread_t acceptor;
	pthread_mutex_t mu;
	unsigned n_conns;
	int conn_fd[MAX_CONNS];
	pthread_t conn_tid[MAX_CONNS];
};

struct raw_conn {
	int fd;
	size_t req_len, resp_len;
	unsigned char *req, *resp;
};

static void put_u32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, sizeof(v));
}

static uint32_t get_u32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Read one whole frame into buf; returns its response length or < 0. */
static long read_frame(int fd, unsigned char *buf, size_t cap)
{
	size_t have = 0, want = RAW_TCP_HDR;

	while (have < want) {
		ssize_t n = recv(fd, buf + have, cap - have, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n ? -errno : -ECONNRESET;
		have += (size_t)n;
		if (want == RAW_TCP_HDR && have >= RAW_TCP_HDR) {
			want = get_u32(buf);
			if (want < RAW_TCP_HDR || want > cap ||
			    get_u32(buf + 4) > cap)
				return -EPROTO;
		}
	}
	return (long)get_u32(buf + 4);
}

static void *conn_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	unsigned char *buf = calloc(1, RAW_TCP_MAX_MSG);
	long resp;

	if (!buf)
		return NULL;
	while ((resp = read_frame(fd, buf, RAW_TCP_MAX_MSG)) >= 0) {
		if (mc_net_write_all(fd, buf, (size_t)resp))
			break;
	}
	free(buf);
	return NULL;
}

static void *accept_main(void *arg)
{
	struct raw_server *s = arg;

	/* Connection threads inherit this thread's affinity. */
	(void)bench_pin_self(s->cpu);
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL; /* shut down by raw_server_stop */
		}
		if (mc_net_set_nodelay(fd)) {
			close(fd);
			continue;
		}
		pthread_mutex_lock(&s->mu);
		if (s->n_conns == MAX_CONNS ||
		    pthread_create(&s->conn_tid[s->n_conns], NULL, conn_main,
				   (void *)(intptr_t)fd)) {
			close(fd);
		} else {
			s->conn_fd[s->n_conns++] = fd;
		}
		pthread_mutex_unlock(&s->mu);
	}
}

int raw_server_start(int cpu, struct raw_server **out, int *port)
{
	struct raw_server *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return -ENOMEM;
	s->cpu = cpu;
	pthread_mutex_init(&s->mu, NULL);
	rc = mc_net_listen("127.0.0.1", 0, 64, 0, &s->listen_fd, port);
	if (rc) {
		free(s);
		return rc;
	}
	rc = -pthread_create(&s->acceptor, NULL, accept_main, s);
	if (rc) {
		close(s->listen_fd);
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void raw_server_stop(struct raw_server *s)
{
	if (!s)
		return;
	/* Wakes accept() with EINVAL, and every recv() with 0. */
	shutdown(s->listen_fd, SHUT_RDWR);
	pthread_join(s->acceptor, NULL);
	close(s->listen_fd);
	for (unsigned i = 0; i < s->n_conns; i++) {
		shutdown(s->conn_fd[i], SHUT_RDWR);
		pthread_join(s->conn_tid[i], NULL);
		close(s->conn_fd[i]);
	}
	pthread_mutex_destroy(&s->mu);
	free(s);
}

int raw_conn_open(int port, size_t req_len, size_t resp_len,
		  struct raw_conn **out)
{
	struct raw_conn *c;
	int rc;

	if (req_len < RAW_TCP_HDR)
		req_len = RAW_TCP_HDR;
	if (req_len > RAW_TCP_MAX_MSG || resp_len > RAW_TCP_MAX_MSG)
		return -EMSGSIZE;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->req_len = req_len;
	c->resp_len = resp_len;
	c->req = calloc(1, req_len);
	c->resp = malloc(resp_len ? resp_len : 1);
	if (!c->req || !c->resp) {
		rc = -ENOMEM;
		goto err;
	}
	put_u32(c->req, (uint32_t)req_len);
	put_u32(c->req + 4, (uint32_t)resp_len);
	rc = mc_net_connect("127.0.0.1", port, 2000, &c->fd);
	if (rc)
		goto err;
	rc = mc_net_set_nodelay(c->fd);
	if (rc) {
		close(c->fd);
		goto err;
	}
	*out = c;
	return 0;
err:
	free(c->req);
	free(c->resp);
	free(c);
	return rc;
}

void raw_conn_close(struct raw_conn *c)
{
	if (!c)
		return;
	close(c->fd);
	free(c->req);
	free(c->resp);
	free(c);
}

int raw_conn_call(struct raw_conn *c)
{
	int rc = mc_net_write_all(c->fd, c->req, c->req_len);

	if (rc)
		return rc;
	return mc_net_read_all(c->fd, c->resp, c->resp_len);
}
