/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for the authentication parsers of peer bytes: the master
 * RPC's AUTH frame header (mc_rpc_hdr_decode + mc_rpc_auth_len_ok, as
 * common/rpc/rpc_conn.c applies them) and the admin HTTP's Authorization
 * header (common/mc_auth_http.c).
 *
 * Input: the whole of it is tried as a frame header (when long enough)
 * and as an Authorization value. Checks: only documented return codes; an
 * accepted AUTH header has a length its step allows; no header made of
 * fuzz bytes passes the signature check, and a header signed with the key
 * for the same request does (once).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "mc_auth_http.h"
#include "mc_rpc_auth.h"

static struct mc_auth_key key;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (mc_auth_init())
		abort();
	mc_auth_key_of("fuzz-token-0123456789", 21, &key);
	return 0;
}

static void frame(const uint8_t *data, size_t size)
{
	struct mc_rpc_hdr h;
	int rc;

	if (size < MC_RPC_HDR_LEN)
		return;
	rc = mc_rpc_hdr_decode(data, MC_RPC_AUTH_MAX_BODY, &h);
	FUZZ_CHECK(rc == 0 || rc == -EPROTO || rc == -EMSGSIZE);
	if (!rc && h.kind == MC_RPC_AUTH &&
	    mc_rpc_auth_len_ok(h.method, h.length))
		FUZZ_CHECK(h.length <= MC_RPC_AUTH_MAX_BODY);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mc_http_request req = { .method = "GET",
				       .path = "/get_all_keys",
				       .body = "" };
	char *auth = malloc(size + 1);
	char signed_h[MC_AUTH_HTTP_HDR_LEN];
	const char *why;

	if (!auth)
		return 0;
	frame(data, size);
	memcpy(auth, data, size);
	auth[size] = 0;
	req.authorization = auth;
	/* No replay cache: the same input may come again. */
	FUZZ_CHECK(mc_auth_http_check(&key, NULL, &req, 1800000000u, &why) ==
		   -EACCES);
	free(auth);
	mc_auth_http_sign(&key, "GET", "/get_all_keys", NULL, "", 0,
			  1800000000u, signed_h);
	req.authorization = signed_h;
	FUZZ_CHECK(mc_auth_http_check(&key, NULL, &req, 1800000000u, &why) ==
		   0);
	return 0;
}
