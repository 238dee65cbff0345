/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Authentication of a TCP data connection (docs/wire-protocol.md, "TCP
 * data: authentication"), run once when a lane connects, before any READ
 * or WRITE, when the engine has the pool's key:
 *
 *   C: header {AUTH | v2, size 32, addr TCP_AUTH_VERSION} + nc (32)
 *   S: status OK + ns (32) + server proof (32)
 *   C: client proof (32)
 *   S: status OK, or AUTH_FAILED and close
 *
 * Proofs are mc_auth_proof() over (nc, ns): the token never crosses the
 * wire and requests pay nothing afterwards. A server with a key answers a
 * READ or WRITE on a connection that has not authenticated with
 * AUTH_REQUIRED (version 2) and closes it; one without a key answers AUTH
 * with AUTH_OFF, and a client with a key then refuses the peer.
 */
#include <errno.h>
#include <string.h>

#include "mc_log.h"
#include "tcp_int.h"
#include "mooncake/mc_err.h"

/* The peer's status frame: its code, or -EPROTO. */
static int recv_status(int fd, uint64_t deadline, uint32_t *code)
{
	uint8_t st[TCP_STATUS_LEN];
	int rc = tcp_io_recv(fd, st, sizeof(st), deadline);

	return rc ? rc : tcp_status_decode(st, code);
}

static int status_error(uint32_t code, char *why, size_t n)
{
	switch (code) {
	case TCP_STATUS_AUTH_OFF:
		snprintf(why, n,
			 "the peer does not authenticate (it has no "
			 "token)");
		return MC_EAUTHOFF;
	case TCP_STATUS_AUTH_FAILED:
		snprintf(why, n,
			 "the peer refused our proof (it holds another "
			 "token)");
		return MC_EAUTHFAILED;
	default:
		snprintf(why, n, "unexpected status %u during authentication",
			 code);
		return -EPROTO;
	}
}

int tcp_auth_client(int fd, const struct mc_auth_key *key, uint64_t deadline,
		    char *why, size_t n)
{
	struct tcp_hdr h = { .size = MC_AUTH_NONCE_LEN,
			     .addr = TCP_AUTH_VERSION,
			     .op = TCP_OP_AUTH,
			     .v2 = true };
	uint8_t raw[TCP_HDR_LEN], nc[MC_AUTH_NONCE_LEN];
	uint8_t reply[MC_AUTH_NONCE_LEN + MC_AUTH_MAC_LEN];
	uint8_t proof[MC_AUTH_MAC_LEN];
	uint32_t code;
	int rc;

	mc_auth_nonce(nc);
	tcp_hdr_encode(&h, raw);
	rc = tcp_io_send2(fd, raw, sizeof(raw), nc, sizeof(nc), deadline);
	if (!rc)
		rc = recv_status(fd, deadline, &code);
	if (rc == -ECONNRESET || rc == -EPIPE || rc == -EPROTO) {
		/* Upstream's servers close on an opcode they do not know. */
		snprintf(why, n,
			 "the peer closed the connection (an engine without "
			 "authentication, or upstream's)");
		return MC_EAUTHOFF;
	}
	if (rc) {
		snprintf(why, n, "authentication: %s", mc_strerror(rc));
		return rc;
	}
	if (code != TCP_STATUS_OK)
		return status_error(code, why, n);
	rc = tcp_io_recv(fd, reply, sizeof(reply), deadline);
	if (rc) {
		snprintf(why, n, "authentication: %s", mc_strerror(rc));
		return rc;
	}
	if (!mc_auth_proof_ok(key, MC_AUTH_SERVER, nc, reply,
			      reply + MC_AUTH_NONCE_LEN)) {
		snprintf(why, n,
			 "the peer could not prove the pool's token "
			 "(it holds another one)");
		return MC_EAUTHFAILED;
	}
	mc_auth_proof(key, MC_AUTH_CLIENT, nc, reply, proof);
	rc = tcp_io_send(fd, proof, sizeof(proof), deadline);
	if (!rc)
		rc = recv_status(fd, deadline, &code);
	if (rc) {
		snprintf(why, n, "authentication: %s", mc_strerror(rc));
		return rc;
	}
	return code == TCP_STATUS_OK ? 0 : status_error(code, why, n);
}

static int send_status(int fd, uint32_t code, uint64_t deadline)
{
	uint8_t st[TCP_STATUS_LEN];

	tcp_status_encode(code, st);
	return tcp_io_send(fd, st, sizeof(st), deadline);
}

int tcp_auth_server(int fd, const struct mc_auth_key *key,
		    const struct tcp_hdr *h, uint64_t deadline)
{
	uint8_t nc[MC_AUTH_NONCE_LEN], ns[MC_AUTH_NONCE_LEN];
	uint8_t reply[TCP_STATUS_LEN + MC_AUTH_NONCE_LEN + MC_AUTH_MAC_LEN];
	uint8_t proof[MC_AUTH_MAC_LEN];
	int rc;

	if (h->size != MC_AUTH_NONCE_LEN || h->addr != TCP_AUTH_VERSION)
		return -EPROTO;
	rc = tcp_io_recv(fd, nc, sizeof(nc), deadline);
	if (rc)
		return rc;
	if (!key) {
		(void)send_status(fd, TCP_STATUS_AUTH_OFF, deadline);
		return MC_EAUTHOFF;
	}
	mc_auth_nonce(ns);
	tcp_status_encode(TCP_STATUS_OK, reply);
	memcpy(reply + TCP_STATUS_LEN, ns, sizeof(ns));
	mc_auth_proof(key, MC_AUTH_SERVER, nc, ns,
		      reply + TCP_STATUS_LEN + MC_AUTH_NONCE_LEN);
	rc = tcp_io_send(fd, reply, sizeof(reply), deadline);
	if (!rc)
		rc = tcp_io_recv(fd, proof, sizeof(proof), deadline);
	if (rc)
		return rc;
	if (!mc_auth_proof_ok(key, MC_AUTH_CLIENT, nc, ns, proof)) {
		(void)send_status(fd, TCP_STATUS_AUTH_FAILED, deadline);
		return MC_EAUTHFAILED;
	}
	return send_status(fd, TCP_STATUS_OK, deadline);
}
