/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master RPC's AUTH frames and the client's side of the exchange
 * (mc_rpc_auth.h). The server's side is a state of its connection thread
 * (rpc_conn_auth.c), built on the same codec.
 */
#include <errno.h>
#include <sodium.h>
#include <string.h>

#include "mc_net.h"
#include "mc_rpc_auth.h"
#include "mooncake/mc_err.h"

bool mc_rpc_auth_len_ok(uint16_t step, uint32_t len)
{
	switch (step) {
	case MC_RPC_AUTH_HELLO:
		return len == MC_AUTH_NONCE_LEN;
	case MC_RPC_AUTH_CHALLENGE:
		return len == MC_AUTH_NONCE_LEN + MC_AUTH_MAC_LEN;
	case MC_RPC_AUTH_PROOF:
		return len == MC_AUTH_MAC_LEN;
	case MC_RPC_AUTH_OK:
		return len == 0;
	case MC_RPC_AUTH_DENIED:
		return len <= MC_RPC_AUTH_REASON_MAX;
	}
	return false;
}

size_t mc_rpc_auth_frame(uint16_t step, const void *body, size_t len,
			 uint8_t *out)
{
	struct mc_rpc_hdr h = { .version = MC_RPC_VERSION,
				.kind = MC_RPC_AUTH,
				.method = step,
				.length = (uint32_t)len };

	mc_rpc_hdr_encode(&h, out);
	if (len)
		memcpy(out + MC_RPC_HDR_LEN, body, len);
	return MC_RPC_HDR_LEN + len;
}

static int io_errno(int rc)
{
	return rc == -EAGAIN || rc == -EWOULDBLOCK ? -ETIMEDOUT : rc;
}

/* Read the next AUTH frame: its step and body (up to the max). */
static int read_step(int fd, uint16_t *step, uint8_t *body, uint32_t *len)
{
	uint8_t hb[MC_RPC_HDR_LEN];
	struct mc_rpc_hdr h;
	int rc = mc_net_read_all(fd, hb, sizeof(hb));

	if (rc)
		return io_errno(rc);
	if (mc_rpc_hdr_decode(hb, MC_RPC_AUTH_MAX_BODY, &h) ||
	    h.kind != MC_RPC_AUTH || !mc_rpc_auth_len_ok(h.method, h.length))
		return -EPROTO;
	rc = mc_net_read_all(fd, body, h.length);
	if (rc)
		return io_errno(rc);
	*step = h.method;
	*len = h.length;
	return 0;
}

static int send_step(int fd, uint16_t step, const void *body, size_t len)
{
	uint8_t f[MC_RPC_HDR_LEN + MC_RPC_AUTH_MAX_BODY];

	return io_errno(
		mc_net_write_all(fd, f, mc_rpc_auth_frame(step, body, len, f)));
}

int mc_rpc_auth_client(int fd, const struct mc_auth_key *key)
{
	uint8_t nc[MC_AUTH_NONCE_LEN], mac[MC_AUTH_MAC_LEN];
	uint8_t body[MC_RPC_AUTH_MAX_BODY];
	uint16_t step;
	uint32_t len;
	int rc;

	mc_auth_nonce(nc);
	rc = send_step(fd, MC_RPC_AUTH_HELLO, nc, sizeof(nc));
	if (!rc)
		rc = read_step(fd, &step, body, &len);
	if (rc)
		return rc;
	if (step == MC_RPC_AUTH_DENIED)
		return MC_EAUTHOFF;
	if (step != MC_RPC_AUTH_CHALLENGE)
		return -EPROTO;
	/* body: ns | the master's proof. */
	if (!mc_auth_proof_ok(key, MC_AUTH_SERVER, nc, body,
			      body + MC_AUTH_NONCE_LEN))
		return MC_EAUTHFAILED;
	mc_auth_proof(key, MC_AUTH_CLIENT, nc, body, mac);
	rc = send_step(fd, MC_RPC_AUTH_PROOF, mac, sizeof(mac));
	sodium_memzero(mac, sizeof(mac));
	if (!rc)
		rc = read_step(fd, &step, body, &len);
	if (rc)
		return rc;
	if (step == MC_RPC_AUTH_DENIED)
		return MC_EAUTHFAILED;
	return step == MC_RPC_AUTH_OK ? 0 : -EPROTO;
}
