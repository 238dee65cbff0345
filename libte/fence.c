/* SPDX-License-Identifier: Apache-2.0 */
/*
 * te_fence_inbound(): every transport ends the connections peers opened
 * to us (the fence_inbound op), and when one had to change what our
 * descriptor says (tcp's listener on another port), it is published
 * again for peers to find. Calls down: the transports' ops, publish.c.
 */
#include "mc_time.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

int te_fence_inbound(struct te_engine *eng, int timeout_ms)
{
	uint64_t deadline = mc_mono_ns() + (uint64_t)timeout_ms * 1000000ULL;
	bool changed = false;
	int rc = 0;

	if (te__forked(eng))
		return MC_EFORKED;
	for (int i = 0; i < TE_TP_COUNT; i++) {
		struct te_transport *tp = eng->tps[i];
		int r;

		if (!tp || !tp->ops->fence_inbound)
			continue;
		r = tp->ops->fence_inbound(tp, deadline);
		changed |= r == 1;
		if (r < 0 && !rc)
			rc = r;
	}
	if (changed)
		(void)te__publish(eng);
	return rc;
}
