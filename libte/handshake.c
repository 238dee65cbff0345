/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The handshake (RPC) codec, upstream's protocol (reference 1.6): one
 * request and one reply per connection, each framed as
 *
 *   u64 length (native byte order) | u8 type | JSON text
 *
 * where length counts the type byte and the JSON. Types: 0 Connection
 * (RDMA QP exchange: refused here until RDMA lands), 1 Metadata (P2P
 * descriptor exchange), 2 Notify, 3 Probe. Frames over
 * MC_HANDSHAKE_MAX_LENGTH bytes (default 1 MiB) are refused. Type 16
 * (AUTH, ours) carries the authentication steps (hs_auth.c), and a
 * refusal of any type carries upstream's reply_msg plus our mc_error.
 *
 * This file is the one codec of both sides and is fuzzed
 * (tests/fuzz/fuzz_te_handshake.c): framing on a socket, decoding a
 * frame, and the Notify body. It knows no engine; hs_server.c (the
 * listener) and hs_client.c (requests to peers) sit on top of it.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "mc_net.h"
#include "mc_time.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

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
	if (*type > TE_HS_PROBE && *type != TE_HS_AUTH)
		return -EPROTO; /* upstream's legacy untyped format */
	*json = (const char *)buf + 9;
	*json_len = (size_t)n - 1;
	return 0;
}

int te__hs_send(int fd, uint8_t type, const char *json, size_t len)
{
	uint8_t hdr[9];
	uint64_t n = len + 1;
	int rc;

	memcpy(hdr, &n, 8);
	hdr[8] = type;
	rc = mc_net_write_all(fd, hdr, sizeof(hdr));
	return rc ? rc : mc_net_write_all(fd, json, len);
}

/* The calling thread's deadline for te__hs_recv (mono ms, 0: none). */
static _Thread_local uint64_t recv_deadline;

void te__hs_recv_deadline(uint64_t deadline_ms)
{
	recv_deadline = deadline_ms;
}

/* mc_net_read_all(), ending at the thread's deadline: -ETIMEDOUT. */
static int read_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	if (!recv_deadline)
		return mc_net_read_all(fd, buf, len);
	while (len) {
		uint64_t now = mc_mono_ms();
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ssize_t n;
		int r;

		if (now >= recv_deadline)
			return -ETIMEDOUT;
		r = poll(&pf, 1, (int)(recv_deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r ? -errno : -ETIMEDOUT;
		n = read(fd, p, len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int te__hs_recv(int fd, size_t max, uint8_t **buf, size_t *len)
{
	uint64_t n;
	uint8_t *b;
	int rc;

	rc = read_all(fd, &n, 8);
	if (rc)
		return rc;
	if (n < 1 || n > max)
		return -EMSGSIZE;
	b = malloc(8 + n);
	if (!b)
		return -ENOMEM;
	memcpy(b, &n, 8);
	rc = read_all(fd, b + 8, n);
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

/* A hex string of exactly n bytes into out: true when it is one. */
static bool hex_field(json_t *v, uint8_t *out, size_t n)
{
	const char *s = json_string_value(v);
	size_t got = 0;

	if (!s || strlen(s) != 2 * n)
		return false;
	return sodium_hex2bin(out, n, s, 2 * n, NULL, &got, NULL) == 0 &&
	       got == n;
}

int te__hs_parse_auth(const char *json, size_t len, struct te_hs_auth_msg *m)
{
	json_t *root = json_loadb(json, len, 0, NULL);
	json_t *v;
	int rc = -EBADMSG;

	memset(m, 0, sizeof(*m));
	if (!json_is_object(root))
		goto out;
	if ((v = json_object_get(root, "nonce"))) {
		if (!hex_field(v, m->nonce, sizeof(m->nonce)))
			goto out;
		m->has_nonce = true;
	}
	if ((v = json_object_get(root, "proof"))) {
		if (!hex_field(v, m->proof, sizeof(m->proof)))
			goto out;
		m->has_proof = true;
	}
	if ((v = json_object_get(root, "reply_msg"))) {
		if (!json_is_string(v))
			goto out;
		snprintf(m->reply_msg, sizeof(m->reply_msg), "%s",
			 json_string_value(v));
	}
	if ((v = json_object_get(root, "mc_error"))) {
		json_int_t c = json_is_integer(v) ? json_integer_value(v) : 0;

		if (c != MC_EAUTHREQUIRED && c != MC_EAUTHFAILED &&
		    c != MC_EAUTHOFF)
			goto out;
		m->mc_error = (int)c;
	}
	rc = 0;
out:
	json_decref(root);
	return rc;
}

char *te__hs_auth_body(const uint8_t *nonce, const uint8_t *proof)
{
	char hn[2 * MC_AUTH_NONCE_LEN + 1], hp[2 * MC_AUTH_MAC_LEN + 1];
	json_t *o = json_object();
	char *text = NULL;

	if (!o)
		return NULL;
	if (nonce)
		json_object_set_new(
			o, "nonce",
			json_string(sodium_bin2hex(hn, sizeof(hn), nonce,
						   MC_AUTH_NONCE_LEN)));
	if (proof)
		json_object_set_new(
			o, "proof",
			json_string(sodium_bin2hex(hp, sizeof(hp), proof,
						   MC_AUTH_MAC_LEN)));
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return text;
}

char *te__hs_refusal(int mc_error, const char *msg)
{
	json_t *o =
		json_pack("{s:s, s:i}", "reply_msg", msg, "mc_error", mc_error);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	return text;
}
