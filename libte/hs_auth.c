/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Authentication on a handshake connection (docs/wire-protocol.md,
 * "Handshake authentication"), when the engine has the pool's key. Before
 * its request, the client runs
 *
 *   C: AUTH {"nonce": nc}
 *   S: AUTH {"nonce": ns, "proof": server proof over (nc, ns)}
 *   C: AUTH {"proof": client proof over (nc, ns)}     then the request
 *
 * (mc_auth.h: the token never crosses the wire; the two roles' proofs
 * differ, so neither can be reflected). A server with a key answers any
 * other first frame, and a wrong proof, with a refusal of that frame's
 * type ({"reply_msg": why, "mc_error": MC_EAUTH*}) and closes; a server
 * without one answers an AUTH frame with MC_EAUTHOFF, and a client with a
 * key refuses to go on (authentication is mutual, as for the master RPC).
 *
 * Calls down only: handshake.c (frames and bodies), mc_auth.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_log.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

#define AUTH_FRAME_MAX 4096

static int send_body(int fd, uint8_t type, char *body)
{
	int rc = body ? te__hs_send(fd, type, body, strlen(body)) : -ENOMEM;

	free(body);
	return rc;
}

/* Read one AUTH-sized frame of the given type and parse its body. */
static int recv_auth(int fd, uint8_t want, struct te_hs_auth_msg *m)
{
	const char *json;
	uint8_t *buf, type;
	size_t len, jlen;
	int rc;

	rc = te__hs_recv(fd, AUTH_FRAME_MAX, &buf, &len);
	if (rc)
		return rc;
	rc = te__hs_decode(buf, len, AUTH_FRAME_MAX, &type, &json, &jlen);
	if (!rc)
		rc = te__hs_parse_auth(json, jlen, m);
	if (!rc && type != want && !m->mc_error)
		rc = -EPROTO;
	free(buf);
	return rc;
}

int te__hs_auth_client(int fd, const struct mc_auth_key *key, char *err,
		       size_t errlen)
{
	uint8_t nc[MC_AUTH_NONCE_LEN], proof[MC_AUTH_MAC_LEN];
	struct te_hs_auth_msg m;
	int rc;

	mc_auth_nonce(nc);
	rc = send_body(fd, TE_HS_AUTH, te__hs_auth_body(nc, NULL));
	if (!rc)
		rc = recv_auth(fd, TE_HS_AUTH, &m);
	if (rc == -ECONNRESET || rc == -EPIPE || rc == -EPROTO ||
	    rc == -EBADMSG) {
		/* Upstream's engines, and ours before authentication, close
		 * on a frame type they do not know. */
		snprintf(err, errlen,
			 "the peer does not authenticate (an engine without "
			 "a token, or upstream's): %s",
			 mc_strerror(rc));
		return MC_EAUTHOFF;
	}
	if (rc) {
		snprintf(err, errlen, "authentication: %s", mc_strerror(rc));
		return rc;
	}
	if (m.mc_error) {
		snprintf(err, errlen, "the peer refused: %s", m.reply_msg);
		return m.mc_error;
	}
	if (!m.has_nonce || !m.has_proof ||
	    !mc_auth_proof_ok(key, MC_AUTH_SERVER, nc, m.nonce, m.proof)) {
		snprintf(err, errlen,
			 "the peer could not prove the pool's token (it holds "
			 "another one)");
		return MC_EAUTHFAILED;
	}
	mc_auth_proof(key, MC_AUTH_CLIENT, nc, m.nonce, proof);
	return send_body(fd, TE_HS_AUTH, te__hs_auth_body(NULL, proof));
}

static int refuse(int fd, uint8_t type, int code, const char *why)
{
	(void)send_body(fd, type, te__hs_refusal(code, why));
	return code;
}

int te__hs_auth_server(int fd, const struct mc_auth_key *key, uint8_t type,
		       const char *json, size_t len)
{
	uint8_t nc[MC_AUTH_NONCE_LEN], ns[MC_AUTH_NONCE_LEN];
	uint8_t proof[MC_AUTH_MAC_LEN];
	struct te_hs_auth_msg m;
	int rc;

	if (!key)
		return type == TE_HS_AUTH ?
			       refuse(fd, type, MC_EAUTHOFF,
				      "authentication is off on this engine "
				      "(it has no token)") :
			       0;
	if (type != TE_HS_AUTH)
		return refuse(fd, type, MC_EAUTHREQUIRED,
			      "authentication required: this engine "
			      "needs the pool's token (" MC_AUTH_HINT ")");
	if (te__hs_parse_auth(json, len, &m) || !m.has_nonce)
		return refuse(fd, type, MC_EAUTHFAILED,
			      "authentication failed: malformed first step");
	memcpy(nc, m.nonce, sizeof(nc));
	mc_auth_nonce(ns);
	mc_auth_proof(key, MC_AUTH_SERVER, nc, ns, proof);
	rc = send_body(fd, TE_HS_AUTH, te__hs_auth_body(ns, proof));
	if (!rc)
		rc = recv_auth(fd, TE_HS_AUTH, &m);
	if (rc)
		return rc;
	if (!m.has_proof ||
	    !mc_auth_proof_ok(key, MC_AUTH_CLIENT, nc, ns, m.proof)) {
		mc_log_warn("te", "handshake: a client failed to prove the "
				  "pool's token");
		return refuse(fd, TE_HS_AUTH, MC_EAUTHFAILED,
			      "authentication failed: the proof is not made "
			      "with this pool's token");
	}
	return 0;
}
