/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The handshake's wire client: one request/reply exchange with a peer's
 * RPC listener per call (Probe, Metadata, Notify), framed by the codec in
 * handshake.c. It knows no engine: callers pass the address, the timeout
 * and what to send (our descriptor for a Metadata exchange), so peer.c,
 * publish.c and notify.c call down into it and nothing here calls back.
 *
 * Threads: any; each call opens and closes its own connection.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_net.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

#define HS_FETCH_TIMEOUT_MS 5000

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
		rc = te__hs_send(fd, type, json, len);
	if (!rc)
		rc = te__hs_recv(fd, te__hs_max_length(), &buf, &blen);
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

int te__rpc_fetch_desc(const char *ip, int port, const char *mine, char **json,
		       size_t *len, char *err, size_t errlen)
{
	int rc = exchange(ip, port, HS_FETCH_TIMEOUT_MS, TE_HS_METADATA, mine,
			  strlen(mine), json, len);

	if (rc && err)
		snprintf(err, errlen, "handshake with %s:%d: %s", ip, port,
			 mc_strerror(rc));
	return rc;
}

int te__rpc_notify(const char *ip, int port, int timeout_ms, const char *name,
		   const char *msg)
{
	json_t *o = json_pack("{s:s, s:s}", "name", name, "notify_msg", msg);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	char *reply = NULL;
	size_t len;
	int rc;

	json_decref(o);
	if (!text)
		return -ENOMEM;
	rc = exchange(ip, port, timeout_ms, TE_HS_NOTIFY, text, strlen(text),
		      &reply, &len);
	free(text);
	free(reply);
	return rc;
}
