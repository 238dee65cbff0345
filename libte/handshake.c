/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The handshake (RPC) socket, upstream's protocol (reference 1.6): one
 * request and one reply per connection, each framed as
 *
 *   u64 length (native byte order) | u8 type | JSON text
 *
 * where length counts the type byte and the JSON. Types: 0 Connection
 * (RDMA QP exchange: refused here until RDMA lands), 1 Metadata (P2P
 * descriptor exchange), 2 Notify, 3 Probe. Frames over
 * MC_HANDSHAKE_MAX_LENGTH bytes (default 1 MiB) are refused. te__hs_decode() is the
 * codec for both sides and is fuzzed (tests/fuzz/fuzz_te_handshake.c).
 *
 * Threads: one listener thread serves requests one at a time; each is
 * small and bounded by a 2 s socket timeout.
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

/*
 * MC_HANDSHAKE_MAX_LENGTH: bytes, as upstream reads it (1 MiB to 128 MiB,
 * default 1 MiB). Decimal digits only: a unit or a value out of range is
 * refused when an engine is created (te__hs_check_env), never silently
 * replaced by the default.
 */
#define HS_MAX_MIN (1ull << 20)
#define HS_MAX_MAX (128ull << 20)

static int hs_parse_max(const char *s, size_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !*s) {
		*out = HS_MAX_MIN;
		return 0;
	}
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < HS_MAX_MIN || v > HS_MAX_MAX)
		return -EINVAL;
	*out = (size_t)v;
	return 0;
}

size_t te__hs_max_length(void)
{
	size_t v;

	return hs_parse_max(getenv("MC_HANDSHAKE_MAX_LENGTH"), &v) ?
		       HS_MAX_MIN :
		       v;
}

int te__hs_check_env(char *err, size_t errlen)
{
	const char *s = getenv("MC_HANDSHAKE_MAX_LENGTH");
	size_t v;

	if (!hs_parse_max(s, &v))
		return 0;
	snprintf(err, errlen,
		 "MC_HANDSHAKE_MAX_LENGTH='%s': must be a number of bytes from "
		 "%llu (1 MiB) to %llu (128 MiB)",
		 s, HS_MAX_MIN, HS_MAX_MAX);
	return -EINVAL;
}

int te__hs_decode(const uint8_t *buf, size_t len, size_t max, uint8_t *type,
		  const char **json, size_t *json_len)
{
	uint64_t n;

	if (len < 8)
		return -EBADMSG;
	memcpy(&n, buf, 8);
	if (n < 1 || n > max)
		return -EMSGSIZE;
	if (n != len - 8)
		return -EBADMSG;
	*type = buf[8];
	if (*type > TE_HS_PROBE)
		return -EPROTO; /* upstream's legacy untyped format */
	*json = (const char *)buf + 9;
	*json_len = (size_t)n - 1;
	return 0;
}

static int hs_send(int fd, uint8_t type, const char *json, size_t len)
{
	uint8_t hdr[9];
	uint64_t n = len + 1;
	int rc;

	memcpy(hdr, &n, 8);
	hdr[8] = type;
	rc = mc_net_write_all(fd, hdr, sizeof(hdr));
	return rc ? rc : mc_net_write_all(fd, json, len);
}

/* Read one frame into a malloc'd buffer (header included). */
static int hs_recv(int fd, size_t max, uint8_t **buf, size_t *len)
{
	uint64_t n;
	uint8_t *b;
	int rc;

	rc = mc_net_read_all(fd, &n, 8);
	if (rc)
		return rc;
	if (n < 1 || n > max)
		return -EMSGSIZE;
	b = malloc(8 + n);
	if (!b)
		return -ENOMEM;
	memcpy(b, &n, 8);
	rc = mc_net_read_all(fd, b + 8, n);
	if (rc) {
		free(b);
		return rc;
	}
	*buf = b;
	*len = 8 + n;
	return 0;
}

int te__hs_parse_notify(const char *json, size_t len, char **name, char **msg)
{
	json_t *root = json_loadb(json, len, 0, NULL);
	json_t *n = json_object_get(root, "name");
	json_t *m = json_object_get(root, "notify_msg");
	int rc = -EBADMSG;

	if (json_is_string(n) && json_is_string(m)) {
		*name = strdup(json_string_value(n));
		*msg = strdup(json_string_value(m));
		rc = *name && *msg ? 0 : -ENOMEM;
		if (rc) {
			free(*name);
			free(*msg);
		}
	}
	json_decref(root);
	return rc;
}

static void queue_notification(struct te_engine *eng, char *name, char *msg)
{
	struct te_notif *n = calloc(1, sizeof(*n));

	if (!n) {
		free(name);
		free(msg);
		return;
	}
	n->name = name;
	n->msg = msg;
	pthread_mutex_lock(&eng->notif_lock);
	if (eng->notif_tail)
		eng->notif_tail->next = n;
	else
		eng->notif_head = n;
	eng->notif_tail = n;
	pthread_mutex_unlock(&eng->notif_lock);
}

static void serve_one(struct te_engine *eng, int fd)
{
	static const char probe_ok[] = "{\"status\":\"success\"}";
	static const char notify_ok[] =
		"{\"name\":\"\",\"notify_msg\":\"success\"}";
	static const char no_rdma[] = "{\"reply_msg\":\"RDMA is not supported "
				      "by this mooncakefs engine\"}";
	const char *json;
	size_t jlen, len;
	uint8_t *buf, type;
	char *name, *msg, *desc;
	int rc;

	if (mc_net_set_timeouts(fd, HS_SERVE_TIMEOUT_MS))
		return;
	rc = hs_recv(fd, te__hs_max_length(), &buf, &len);
	if (rc)
		return;
	rc = te__hs_decode(buf, len, te__hs_max_length(), &type, &json, &jlen);
	if (rc) {
		mc_log_debug("te", "handshake: bad frame: %s", mc_strerror(rc));
		free(buf);
		return;
	}
	switch (type) {
	case TE_HS_PROBE:
		(void)hs_send(fd, type, probe_ok, sizeof(probe_ok) - 1);
		break;
	case TE_HS_NOTIFY:
		if (te__hs_parse_notify(json, jlen, &name, &msg) == 0) {
			queue_notification(eng, name, msg);
			(void)hs_send(fd, type, notify_ok,
				      sizeof(notify_ok) - 1);
		}
		break;
	case TE_HS_METADATA:
		desc = te__describe(eng);
		if (desc)
			(void)hs_send(fd, type, desc, strlen(desc));
		free(desc);
		break;
	default: /* TE_HS_CONNECTION */
		(void)hs_send(fd, type, no_rdma, sizeof(no_rdma) - 1);
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
		serve_one(eng, fd);
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
	pthread_join(eng->rpc_thread, NULL);
	close(eng->rpc_fd);
	eng->rpc_fd = -1;
}

/* One request/reply exchange with a peer's RPC listener. */
static int exchange(const char *ip, int port, int timeout_ms, uint8_t type,
		    const char *json, size_t len, char **reply, size_t *rlen)
{
	const char *rj;
	uint8_t *buf, rtype;
	size_t blen, rjl;
	int fd, rc;

	rc = mc_net_connect(ip, port, timeout_ms, &fd);
	if (rc)
		return rc;
	rc = mc_net_set_timeouts(fd, timeout_ms);
	if (!rc)
		rc = hs_send(fd, type, json, len);
	if (!rc)
		rc = hs_recv(fd, te__hs_max_length(), &buf, &blen);
	close(fd);
	if (rc)
		return rc == -EAGAIN ? -ETIMEDOUT : rc;
	rc = te__hs_decode(buf, blen, te__hs_max_length(), &rtype, &rj, &rjl);
	if (!rc && rtype != type)
		rc = -EPROTO;
	if (!rc && reply) {
		*reply = malloc(rjl + 1);
		if (*reply) {
			memcpy(*reply, rj, rjl);
			(*reply)[rjl] = '\0';
			*rlen = rjl;
		} else {
			rc = -ENOMEM;
		}
	}
	free(buf);
	return rc;
}

int te__rpc_probe(const char *ip, int port, int timeout_ms)
{
	char *reply = NULL;
	size_t len;
	int rc = exchange(ip, port, timeout_ms, TE_HS_PROBE, "{}", 2, &reply,
			  &len);

	free(reply);
	return rc;
}

int te__rpc_fetch_desc(struct te_engine *eng, const char *ip, int port,
		       char **json, size_t *len, char *err, size_t errlen)
{
	char *mine = te__describe(eng);
	int rc;

	if (!mine)
		return -ENOMEM;
	rc = exchange(ip, port, 5000, TE_HS_METADATA, mine, strlen(mine), json,
		      len);
	free(mine);
	if (rc && err)
		snprintf(err, errlen, "handshake with %s:%d: %s", ip, port,
			 mc_strerror(rc));
	return rc;
}

int te__rpc_notify(struct te_engine *eng, const char *ip, int port,
		   const char *name, const char *msg)
{
	json_t *o = json_pack("{s:s, s:s}", "name", name, "notify_msg", msg);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	char *reply = NULL;
	size_t len;
	int rc;

	json_decref(o);
	if (!text)
		return -ENOMEM;
	rc = exchange(ip, port, (int)eng->timeout_ms, TE_HS_NOTIFY, text,
		      strlen(text), &reply, &len);
	free(text);
	free(reply);
	return rc;
}

int te_notify(struct te_engine *eng, struct te_segment *target,
	      const char *name, const char *msg)
{
	struct te_peer *p = te__segment_peer(target);
	int rc;

	if (!p)
		return -EHOSTUNREACH;
	if (p->is_self) {
		char *n = strdup(name), *m = strdup(msg);
		if (!n || !m) {
			free(n);
			free(m);
			te__peer_put(p);
			return -ENOMEM;
		}
		queue_notification(eng, n, m);
		rc = 0;
	} else {
		rc = te__rpc_notify(eng, p->ip, p->rpc_port, name, msg);
	}
	te__peer_put(p);
	return rc;
}

int te_notifications(struct te_engine *eng, char **names, char **msgs, int max)
{
	int n = 0;

	pthread_mutex_lock(&eng->notif_lock);
	while (n < max && eng->notif_head) {
		struct te_notif *x = eng->notif_head;
		eng->notif_head = x->next;
		if (!eng->notif_head)
			eng->notif_tail = NULL;
		names[n] = x->name;
		msgs[n] = x->msg;
		free(x);
		n++;
	}
	pthread_mutex_unlock(&eng->notif_lock);
	return n;
}

void te__notifications_free(struct te_engine *eng)
{
	char *n, *m;

	while (te_notifications(eng, &n, &m, 1) == 1) {
		free(n);
		free(m);
	}
}
