/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for the transfer engine's handshake framing
 * (libte/handshake.c): te__hs_decode() and te__hs_parse_notify(), which
 * parse what any process connecting to an engine's RPC port sends, and
 * te__hs_parse_auth(), the body of the authentication steps and of
 * refusals (hs_auth.c).
 *
 * Each input is used twice:
 *  1. as a whole frame, "u64 length (native order) | u8 type | JSON",
 *     decoded with the real limit (1 MiB) and with a small one (64);
 *  2. as "u8 type | JSON", wrapped in a correct length header, so the
 *     fuzzer reaches the JSON parsers without guessing the length.
 * When a frame decodes, its JSON goes through te__hs_parse_notify().
 *
 * Checks: only documented return codes; a decoded frame has a type of at
 * most 3 or AUTH (16), its JSON starts right after the header and runs to the end of
 * the input, and its length is within the limit; a wrapped frame decodes
 * exactly when the type is at most 3 or AUTH (else -EPROTO); a parsed
 * notification has both strings, and a notification rebuilt from them
 * parses back to the same strings; a parsed AUTH body rebuilt with
 * te__hs_auth_body() parses back to the same nonce and proof, and a
 * refusal's code is one of MC_EAUTH*.
 */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "fuzz_common.h"
#include "mc_log.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

#define MAX_FRAME (1u << 20)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	mc_log_set_level(MC_LOG_ERROR);
	return 0;
}

static void fuzz_notify(const char *json, size_t len)
{
	char *name = NULL, *msg = NULL, *name2 = NULL, *msg2 = NULL, *text;
	json_t *o;
	int rc = te__hs_parse_notify(json, len, &name, &msg);

	FUZZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -ENOMEM);
	if (rc)
		return;
	FUZZ_CHECK(name && msg);
	/* What the sender side (te__rpc_notify) would send for it. */
	o = json_pack("{s:s, s:s}", "name", name, "notify_msg", msg);
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (text) {
		rc = te__hs_parse_notify(text, strlen(text), &name2, &msg2);
		FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
		if (!rc)
			FUZZ_CHECK(!strcmp(name, name2) && !strcmp(msg, msg2));
		free(text);
	}
	free(name);
	free(msg);
	free(name2);
	free(msg2);
}

static void fuzz_auth_body(const char *json, size_t len)
{
	struct te_hs_auth_msg m, m2;
	char *text;
	int rc = te__hs_parse_auth(json, len, &m);

	FUZZ_CHECK(rc == 0 || rc == -EBADMSG);
	if (rc)
		return;
	FUZZ_CHECK(m.mc_error == 0 || m.mc_error == MC_EAUTHREQUIRED ||
		   m.mc_error == MC_EAUTHFAILED || m.mc_error == MC_EAUTHOFF);
	FUZZ_CHECK(memchr(m.reply_msg, 0, sizeof(m.reply_msg)));
	text = te__hs_auth_body(m.has_nonce ? m.nonce : NULL,
				m.has_proof ? m.proof : NULL);
	if (!text)
		return;
	FUZZ_CHECK(te__hs_parse_auth(text, strlen(text), &m2) == 0);
	FUZZ_CHECK(m2.has_nonce == m.has_nonce && m2.has_proof == m.has_proof);
	FUZZ_CHECK(!m.has_nonce || !memcmp(m.nonce, m2.nonce, sizeof(m.nonce)));
	FUZZ_CHECK(!m.has_proof || !memcmp(m.proof, m2.proof, sizeof(m.proof)));
	free(text);
}

static int decode(const uint8_t *buf, size_t len, size_t max)
{
	const char *json = NULL;
	size_t jlen = 0;
	uint8_t type = 0xff;
	int rc = te__hs_decode(buf, len, max, &type, &json, &jlen);

	FUZZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -EMSGSIZE ||
		   rc == -EPROTO);
	if (rc)
		return rc;
	FUZZ_CHECK(len >= 9 && (type <= TE_HS_PROBE || type == TE_HS_AUTH));
	FUZZ_CHECK(json == (const char *)buf + 9 && jlen == len - 9);
	FUZZ_CHECK(jlen + 1 <= max);
	return 0;
}

static void fuzz_frame(const uint8_t *data, size_t size)
{
	int rc = decode(data, size, MAX_FRAME);
	int small = decode(data, size, 64);

	/* A smaller limit only refuses more, with -EMSGSIZE. */
	FUZZ_CHECK(small == rc || small == -EMSGSIZE);
	if (!rc) {
		fuzz_notify((const char *)data + 9, size - 9);
		fuzz_auth_body((const char *)data + 9, size - 9);
	}
}

static void fuzz_wrapped(const uint8_t *data, size_t size)
{
	uint64_t n = size;
	uint8_t *frame;
	int rc;

	if (size == 0 || size > MAX_FRAME)
		return;
	frame = malloc(8 + size);
	FUZZ_CHECK(frame);
	memcpy(frame, &n, 8);
	memcpy(frame + 8, data, size);
	rc = decode(frame, 8 + size, MAX_FRAME);
	FUZZ_CHECK(rc == (data[0] <= TE_HS_PROBE || data[0] == TE_HS_AUTH ?
				  0 :
				  -EPROTO));
	if (!rc) {
		fuzz_notify((const char *)frame + 9, size - 1);
		fuzz_auth_body((const char *)frame + 9, size - 1);
	}
	free(frame);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_frame(data, size);
	fuzz_wrapped(data, size);
	return 0;
}
