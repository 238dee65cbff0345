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
 * MC_HANDSHAKE_MAX_LENGTH bytes (default 1 MiB) are refused.
 *
 * This file is the one codec of both sides and is fuzzed
 * (tests/fuzz/fuzz_te_handshake.c): framing on a socket, decoding a
 * frame, and the Notify body. It knows no engine; hs_server.c (the
 * listener) and hs_client.c (requests to peers) sit on top of it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_net.h"
#include "te_int.h"

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

int te__hs_recv(int fd, size_t max, uint8_t **buf, size_t *len)
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
