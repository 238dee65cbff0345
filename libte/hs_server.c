/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The handshake (RPC) listener: answers peers' Probe, Metadata (our
 * descriptor, desc.c) and Notify (queued by notify.c) requests, and hands
 * Connection (RDMA) requests to the transport that serves them (its
 * serve_handshake op; refused in upstream's form where none does). Frames are read and written by the
 * codec in handshake.c; with the pool's key, a connection is served only
 * after the client proved it (hs_auth.c).
 *
 * Calls down only: handshake.c, hs_auth.c, desc.c (te__describe), notify.c
 * (te__notif_push). engine.c starts and stops it.
 *
 * Threads: one listener thread serves requests one at a time; each is
 * small, and a connection gets 2 s in all to send its frames (a peer
 * dripping one byte a second held every other caller's Probe, Notify and
 * RDMA connection set-up before).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mc_log.h"
#include "mc_net.h"
#include "mc_time.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

#define HS_SERVE_TIMEOUT_MS 2000

/* Read and decode one frame; *buf is the caller's to free. */
static int recv_frame(int fd, uint8_t **buf, uint8_t *type, const char **json,
		      size_t *jlen)
{
	size_t len;
	int rc = te__hs_recv(fd, te__hs_max_length(), buf, &len);

	if (rc)
		return rc;
	rc = te__hs_decode(*buf, len, te__hs_max_length(), type, json, jlen);
	if (rc) {
		mc_log_debug("te", "handshake: bad frame: %s", mc_strerror(rc));
		free(*buf);
		*buf = NULL;
	}
	return rc;
}

/* A request the core does not serve: the transport that does (rdma's
 * Connection), or a refusal in upstream's form. */
static void serve_transport(struct te_engine *eng, int fd, uint8_t type,
			    const char *json, size_t jlen)
{
	static const char no_rdma[] = "{\"reply_msg\":\"RDMA is not enabled "
				      "in this mooncakefs engine\"}";

	for (int i = 0; i < TE_TP_COUNT; i++) {
		struct te_transport *tp = eng->tps[i];
		char *reply = NULL;
		int rc;

		if (!tp || !tp->ops->serve_handshake)
			continue;
		rc = tp->ops->serve_handshake(tp, type, json, jlen, &reply);
		if (rc == MC_ENOTSUPPORTED)
			continue;
		if (!rc && reply)
			(void)te__hs_send(fd, type, reply, strlen(reply));
		free(reply);
		return;
	}
	(void)te__hs_send(fd, type, no_rdma, sizeof(no_rdma) - 1);
}

static void serve_one(struct te_engine *eng, int fd)
{
	static const char probe_ok[] = "{\"status\":\"success\"}";
	static const char notify_ok[] =
		"{\"name\":\"\",\"notify_msg\":\"success\"}";
	const char *json;
	size_t jlen;
	uint8_t *buf, type;
	char *name, *msg, *desc;

	if (mc_net_set_timeouts(fd, HS_SERVE_TIMEOUT_MS))
		return;
	if (recv_frame(fd, &buf, &type, &json, &jlen))
		return;
	/* With a key, the first frames are the authentication steps. */
	if (te__hs_auth_server(fd, eng->auth, type, json, jlen)) {
		free(buf);
		return;
	}
	if (eng->auth) {
		free(buf);
		if (recv_frame(fd, &buf, &type, &json, &jlen))
			return;
		if (type == TE_HS_AUTH) {
			free(buf);
			return;
		}
	}
	switch (type) {
	case TE_HS_PROBE:
		(void)te__hs_send(fd, type, probe_ok, sizeof(probe_ok) - 1);
		break;
	case TE_HS_NOTIFY:
		if (te__hs_parse_notify(json, jlen, &name, &msg) == 0) {
			te__notif_push(eng, name, msg);
			(void)te__hs_send(fd, type, notify_ok,
					  sizeof(notify_ok) - 1);
		}
		break;
	case TE_HS_METADATA:
		desc = te__describe(eng);
		if (desc)
			(void)te__hs_send(fd, type, desc, strlen(desc));
		free(desc);
		break;
	default: /* TE_HS_CONNECTION: a transport's (rdma) */
		serve_transport(eng, fd, type, json, jlen);
		break;
	}
	free(buf);
}

static void *rpc_thread(void *arg)
{
	struct te_engine *eng = arg;

	while (!atomic_load(&eng->stopping)) {
		struct pollfd p = { .fd = eng->rpc_fd, .events = POLLIN };
		int fd;

		if (poll(&p, 1, 200) <= 0)
			continue;
		fd = accept4(eng->rpc_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		te__hs_recv_deadline(mc_mono_ms() + HS_SERVE_TIMEOUT_MS);
		serve_one(eng, fd);
		te__hs_recv_deadline(0);
		close(fd);
	}
	return NULL;
}

static int env_int(const char *name, int def)
{
	const char *s = getenv(name);
	return s && *s ? atoi(s) : def;
}

int te__rpc_start(struct te_engine *eng, int port, char *err, size_t errlen)
{
	int lo = env_int("MC_MIN_RPC_PORT", 15000);
	int hi = env_int("MC_MAX_RPC_PORT", 17000);
	unsigned seed = (unsigned)(mc_mono_ns() ^ (uint64_t)getpid());
	int rc = -EADDRINUSE;

	if (port > 0) {
		rc = mc_net_listen(eng->ip, port, 128, 0, &eng->rpc_fd,
				   &eng->rpc_port);
	} else {
		if (lo < 1 || hi > 65535 || lo > hi) {
			lo = 15000;
			hi = 17000;
		}
		/* Upstream picks a random free port in the range. */
		for (int i = 0; i < 500 && rc == -EADDRINUSE; i++) {
			int p = lo +
				(int)(rand_r(&seed) % (unsigned)(hi - lo + 1));
			rc = mc_net_listen(eng->ip, p, 128, 0, &eng->rpc_fd,
					   &eng->rpc_port);
		}
	}
	if (rc) {
		snprintf(err, errlen,
			 "transfer engine: cannot listen on %s "
			 "(RPC port %d): %s",
			 eng->ip, port, strerror(-rc));
		return rc;
	}
	snprintf(eng->rpc_address, sizeof(eng->rpc_address), "%s:%d", eng->ip,
		 eng->rpc_port);
	rc = pthread_create(&eng->rpc_thread, NULL, rpc_thread, eng);
	if (rc) {
		close(eng->rpc_fd);
		eng->rpc_fd = -1;
		return -rc;
	}
	return 0;
}

void te__rpc_stop(struct te_engine *eng)
{
	if (eng->rpc_fd < 0)
		return;
	atomic_store(&eng->stopping, true);
	shutdown(eng->rpc_fd, SHUT_RD); /* wakes the thread's poll now */
	pthread_join(eng->rpc_thread, NULL);
	close(eng->rpc_fd);
	eng->rpc_fd = -1;
}
