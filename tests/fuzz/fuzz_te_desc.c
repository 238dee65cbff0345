/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for the transfer engine's segment-descriptor codec
 * (libte/desc.c, with each transport's desc_decode op for its own fields):
 * te__desc_decode() of arbitrary bytes into a zeroed
 * struct te_peer, then te__desc_release(), and te__rpc_meta_decode() of
 * the same bytes. Descriptors come from the metadata service or straight
 * from a peer's handshake, so every byte is untrusted.
 *
 * Checks: only documented return codes; a decoded descriptor has a
 * NUL-terminated non-overflowing name, location and host id, at most
 * TE_MAX_BUFFERS buffers whose ranges do not wrap, ports and versions in
 * range, and shm paths only under /dev/shm/ without "/.."; decoding is
 * deterministic (twice gives the same result); release leaves no buffers
 * and no transport's fields.
 * rpc_meta: a decoded ip is non-empty and fits its buffer (also a small
 * one), the port is 1..65535, and a larger buffer gives the same answer.
 */
#include <errno.h>
#include <string.h>

#include "fuzz_common.h"
#include "mc_log.h"
#include "te_int.h"
#include "transport/tcp/tcp_int.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	mc_log_set_level(MC_LOG_ERROR);
	return 0;
}

static void check_str(const char *s, size_t cap)
{
	FUZZ_CHECK(memchr(s, '\0', cap) != NULL);
}

static void check_peer(const struct te_peer *p)
{
	const struct tcp_peer_desc *tcp = p->tp_desc[TE_TP_TCP];

	check_str(p->name, sizeof(p->name));
	check_str(p->host_id, sizeof(p->host_id));
	FUZZ_CHECK(tcp != NULL);
	FUZZ_CHECK(tcp->data_port >= 0 && tcp->data_port <= 65535);
	FUZZ_CHECK(tcp->proto_version >= 0 && tcp->proto_version < 256);
	FUZZ_CHECK(p->n_buffers <= TE_MAX_BUFFERS);
	FUZZ_CHECK(p->n_buffers == 0 || p->buffers != NULL);
	for (unsigned i = 0; i < p->n_buffers; i++) {
		const struct te_buffer_desc *b = &p->buffers[i];

		check_str(b->location, sizeof(b->location));
		FUZZ_CHECK(b->addr + b->length >= b->addr);
		if (b->shm_path) {
			/* A kept file, or a memfd by its descriptor, which
			 * counts only with its inode. */
			if (!strncmp(b->shm_path, "/proc/", 6)) {
				FUZZ_CHECK(b->shm_ino != 0);
				FUZZ_CHECK(strstr(b->shm_path, "/fd/") != NULL);
			} else {
				FUZZ_CHECK(!strncmp(b->shm_path,
						    "/dev/shm/mooncake.", 18));
			}
			FUZZ_CHECK(!strstr(b->shm_path, "/.."));
		}
	}
}

static bool same_peer(const struct te_peer *a, const struct te_peer *b)
{
	const struct tcp_peer_desc *ta = a->tp_desc[TE_TP_TCP];
	const struct tcp_peer_desc *tb = b->tp_desc[TE_TP_TCP];

	if (strcmp(a->name, b->name) || strcmp(a->host_id, b->host_id) ||
	    !ta != !tb ||
	    (ta && (ta->data_port != tb->data_port ||
		    ta->proto_version != tb->proto_version)) ||
	    a->n_buffers != b->n_buffers)
		return false;
	for (unsigned i = 0; i < a->n_buffers; i++) {
		const struct te_buffer_desc *x = &a->buffers[i];
		const struct te_buffer_desc *y = &b->buffers[i];

		if (x->addr != y->addr || x->length != y->length ||
		    strcmp(x->location, y->location) ||
		    !x->shm_path != !y->shm_path ||
		    (x->shm_path && (strcmp(x->shm_path, y->shm_path) ||
				     x->shm_offset != y->shm_offset)))
			return false;
	}
	return true;
}

static void fuzz_desc(const char *json, size_t len)
{
	struct te_peer p, q;
	char err[TE_ERR_LEN];
	int rc, rc2;

	memset(&p, 0, sizeof(p));
	memset(&q, 0, sizeof(q));
	memset(err, 0, sizeof(err));
	rc = te__desc_decode(json, len, &p, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -ENOMEM);
	check_str(err, sizeof(err));
	if (rc == -EBADMSG)
		FUZZ_CHECK(!strncmp(err, "bad segment descriptor: ", 24));
	if (rc == 0)
		check_peer(&p);
	/* A NULL err is allowed too, and the answer does not change. */
	rc2 = te__desc_decode(json, len, &q, NULL, 0);
	FUZZ_CHECK(rc2 == rc);
	if (rc == 0)
		FUZZ_CHECK(same_peer(&p, &q));
	te__desc_release(&p);
	te__desc_release(&q);
	FUZZ_CHECK(p.n_buffers == 0 && p.buffers == NULL);
	for (int i = 0; i < TE_TP_COUNT; i++)
		FUZZ_CHECK(p.tp_desc[i] == NULL);
	/* Releasing twice is harmless. */
	te__desc_release(&p);
}

static void fuzz_rpc_meta(const char *json, size_t len)
{
	char ip[TE_NAME_MAX], small[16];
	int port = -1, port2 = -1, rc, rc2;

	rc = te__rpc_meta_decode(json, len, ip, sizeof(ip), &port);
	FUZZ_CHECK(rc == 0 || rc == -EBADMSG);
	if (rc == 0) {
		check_str(ip, sizeof(ip));
		FUZZ_CHECK(ip[0] != '\0');
		FUZZ_CHECK(port >= 1 && port <= 65535);
	}
	rc2 = te__rpc_meta_decode(json, len, small, sizeof(small), &port2);
	FUZZ_CHECK(rc2 == 0 || rc2 == -EBADMSG);
	if (rc2 == 0) {
		/* What fits a small buffer fits a large one identically. */
		check_str(small, sizeof(small));
		FUZZ_CHECK(rc == 0 && !strcmp(ip, small) && port == port2);
	} else if (rc == 0) {
		FUZZ_CHECK(strlen(ip) >= sizeof(small));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_desc((const char *)data, size);
	fuzz_rpc_meta((const char *)data, size);
	return 0;
}
