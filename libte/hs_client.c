/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The handshake's wire client: one request/reply exchange with a peer's
 * RPC listener per call (Probe, Metadata, Notify, Connection), framed by the codec in
 * handshake.c. It knows no engine: callers pass the address, the timeout,
 * the pool's key (each exchange authenticates first when there is one,
 * hs_auth.c) and what to send (our descriptor for a Metadata exchange),
 * so peer.c,
 * publish.c and notify.c call down into it and nothing here calls back.
 *
 * Threads: any; each call opens and closes its own connection.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_log.h"
#include "mc_net.h"
#include "mc_parse.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

#define HS_FETCH_TIMEOUT_MS 5000

/*
 * A reply that is a refusal ({"reply_msg", "mc_error"}): its code, with
 * the peer's reason logged. Replies are small except a descriptor, which
 * is parsed once more here (once per peer).
 */
static int refusal_of(const char *ip, int port, uint8_t rtype, const char *rj,
		      size_t rjl)
{
	struct te_hs_auth_msg m;
	char at[300];

	if (rtype != TE_HS_AUTH && !memmem(rj, rjl, "\"mc_error\"", 10))
		return 0;
	if (te__hs_parse_auth(rj, rjl, &m) || !m.mc_error)
		return rtype == TE_HS_AUTH ? -EPROTO : 0;
	(void)mc_fmt_hostport(at, sizeof(at), ip, port);
	mc_log_warn("te", "handshake with %s refused: %s", at, m.reply_msg);
	return m.mc_error;
}

/* One request/reply exchange with a peer's RPC listener, authenticated
 * first when we have a key. */
static int exchange(const char *ip, int port, int timeout_ms,
		    const struct mc_auth_key *key, uint8_t type,
		    const char *json, size_t len, char **reply, size_t *rlen)
{
	char why[256] = "";
	const char *rj;
	uint8_t *buf, rtype;
	size_t blen, rjl;
	int fd, rc;

	rc = mc_net_connect(ip, port, timeout_ms, &fd);
	if (rc)
		return rc;
	rc = mc_net_set_timeouts(fd, timeout_ms);
	if (!rc && key) {
		rc = te__hs_auth_client(fd, key, why, sizeof(why));
		if (rc) {
			char at[300];

			(void)mc_fmt_hostport(at, sizeof(at), ip, port);
			mc_log_warn("te", "handshake with %s: %s", at, why);
		}
	}
	if (!rc)
		rc = te__hs_send(fd, type, json, len);
	if (!rc)
		rc = te__hs_recv(fd, te__hs_max_length(), &buf, &blen);
	close(fd);
	if (rc)
		return rc == -EAGAIN ? -ETIMEDOUT : rc;
	rc = te__hs_decode(buf, blen, te__hs_max_length(), &rtype, &rj, &rjl);
	if (!rc)
		rc = refusal_of(ip, port, rtype, rj, rjl);
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

int te__rpc_probe(const char *ip, int port, int timeout_ms,
		  const struct mc_auth_key *key)
{
	char *reply = NULL;
	size_t len;
	int rc = exchange(ip, port, timeout_ms, key, TE_HS_PROBE, "{}", 2,
			  &reply, &len);

	free(reply);
	/* An engine that refuses us is alive all the same. */
	if (rc == MC_EAUTHREQUIRED || rc == MC_EAUTHFAILED || rc == MC_EAUTHOFF)
		rc = 0;
	return rc;
}

int te__rpc_fetch_desc(const char *ip, int port, const char *mine,
		       const struct mc_auth_key *key, char **json, size_t *len,
		       char *err, size_t errlen)
{
	int rc = exchange(ip, port, HS_FETCH_TIMEOUT_MS, key, TE_HS_METADATA,
			  mine, strlen(mine), json, len);

	if (rc && err) {
		char at[300];

		(void)mc_fmt_hostport(at, sizeof(at), ip, port);
		snprintf(err, errlen, "handshake with %s: %s", at,
			 mc_strerror(rc));
	}
	return rc;
}

int te__rpc_connect(const char *ip, int port, int timeout_ms,
		    const struct mc_auth_key *key, const char *json,
		    char **reply, size_t *len)
{
	return exchange(ip, port, timeout_ms, key, TE_HS_CONNECTION, json,
			strlen(json), reply, len);
}

int te__rpc_notify(const char *ip, int port, int timeout_ms,
		   const struct mc_auth_key *key, const char *name,
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
	rc = exchange(ip, port, timeout_ms, key, TE_HS_NOTIFY, text,
		      strlen(text), &reply, &len);
	free(text);
	free(reply);
	return rc;
}
