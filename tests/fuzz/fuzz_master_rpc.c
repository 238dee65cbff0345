/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the master's RPC path from raw bytes: frame headers
 * (mc_rpc_hdr_decode), protobuf bodies (the generated codec) and every
 * handler that a decoded request reaches (master/service.c), against a
 * fresh in-memory master per input. Input: a sequence of frames as a
 * client would send them on one connection. Watch requests are answered
 * without waiting (wait_ms is forced to 0 by the harness's config).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "lifecycle.h"
#include "master.h"
#include "mc_log.h"
#include "mc_rpc.h"
#include "service.h"

static const struct mst_config cfg = {
	.lease_ttl_ms = 10000,
	.soft_pin_ttl_ms = 60000,
	.max_soft_pin_ttl_ms = 120000,
	.allow_evict_soft_pinned = true,
	.eviction_ratio = 0.05,
	.high_watermark = 0.9,
	.client_ttl_ms = 10000,
	.discard_timeout_ms = 30000,
	.release_timeout_ms = 600000,
	.restore_grace_ms = 60000,
	.exist_max_idle_ms = 20000,
	.hold_ttl_ms = 30000,
	.max_key_len = 4096,
	.ckpt_holder_slots = 4,
	.reserve_slots = 4,
	.reserve_max_size = 1 << 20,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct master *m;
	char err[256];

	mc_log_set_level(MC_LOG_ERROR); /* mounts and drops are notices */
	if (mst_create(&cfg, "memory", 0, &m, err, sizeof(err)))
		abort();
	while (size >= MC_RPC_HDR_LEN) {
		struct mc_rpc_hdr h;
		uint8_t *frame = NULL;
		size_t len = 0;

		if (mc_rpc_hdr_decode(data, 1u << 20, &h))
			break;
		data += MC_RPC_HDR_LEN;
		size -= MC_RPC_HDR_LEN;
		if (h.length > size || h.kind != MC_RPC_REQUEST)
			break;
		if (h.method == MCRPC__METHOD__WATCH)
			m->stopping = true; /* never block */
		if (mst_service_call(m, &h, data, &frame, &len) == 0) {
			struct mc_rpc_hdr rh;
			if (len < MC_RPC_HDR_LEN ||
			    mc_rpc_hdr_decode(frame, MC_RPC_MAX_BODY, &rh) ||
			    rh.req_id != h.req_id ||
			    rh.kind != MC_RPC_RESPONSE ||
			    rh.length + MC_RPC_HDR_LEN != len)
				abort();
			free(frame);
		}
		pthread_mutex_lock(&m->lock);
		mst_tick(m);
		pthread_mutex_unlock(&m->lock);
		data += h.length;
		size -= h.length;
	}
	mst_destroy(m);
	return 0;
}
