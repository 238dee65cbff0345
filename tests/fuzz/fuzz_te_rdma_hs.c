/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for the rdma transport's Connection handshake body
 * (libte/transport/rdma/rdma_desc.c: rdma_hs_parse), which the handshake
 * listener hands any process connecting to an engine's RPC port, and
 * which the active side reads from the peer's reply. (The transport's
 * descriptor fields are fuzzed through fuzz_te_desc.)
 *
 * Checks: only 0 or -EBADMSG; a parsed body that is not a refusal has
 * both NIC paths, 1..16 QP numbers below 2^24; re-encoding a parsed body
 * and parsing it again gives the same fields.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "mc_log.h"
#include "transport/rdma/rdma_int.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	mc_log_set_level(MC_LOG_ERROR);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdma_hs_msg m, back;
	char *text;
	int rc = rdma_hs_parse((const char *)data, size, &m);

	FUZZ_CHECK(rc == 0 || rc == -EBADMSG);
	if (rc)
		return 0;
	if (!m.reply_msg[0]) {
		FUZZ_CHECK(m.local_nic_path[0] && m.peer_nic_path[0]);
		FUZZ_CHECK(m.n_qp >= 1 && m.n_qp <= RDMA_MAX_QP_PER_EP);
		for (unsigned i = 0; i < m.n_qp; i++)
			FUZZ_CHECK(m.qp_num[i] <= 0xffffff);
	}
	text = rdma_hs_encode(&m);
	if (!text)
		return 0; /* out of memory, or strings jansson refuses */
	rc = rdma_hs_parse(text, strlen(text), &back);
	FUZZ_CHECK(rc == 0);
	FUZZ_CHECK(!strcmp(back.local_nic_path, m.local_nic_path));
	FUZZ_CHECK(!strcmp(back.peer_nic_path, m.peer_nic_path));
	FUZZ_CHECK(!strcmp(back.reply_msg, m.reply_msg));
	if (!m.reply_msg[0]) {
		FUZZ_CHECK(back.n_qp == m.n_qp && back.lid == m.lid);
		FUZZ_CHECK(!memcmp(back.qp_num, m.qp_num,
				   m.n_qp * sizeof(m.qp_num[0])));
		FUZZ_CHECK(!memcmp(&back.gid, &m.gid, sizeof(m.gid)));
		FUZZ_CHECK(back.mtu == m.mtu);
	}
	free(text);
	return 0;
}
