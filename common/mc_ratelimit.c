/* SPDX-License-Identifier: Apache-2.0 */
/* One event per interval: see mc_ratelimit.h. */
#include <stdatomic.h>
#include <time.h>

#include "mc_ratelimit.h"

bool mc_ratelimit_ok(struct mc_ratelimit *rl, unsigned interval_ms,
		     unsigned *dropped)
{
	struct timespec ts;
	uint64_t now, next;
	unsigned n;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	next = atomic_load_explicit(&rl->next_ms, memory_order_relaxed);
	if (now < next || !atomic_compare_exchange_strong(&rl->next_ms, &next,
							  now + interval_ms)) {
		atomic_fetch_add_explicit(&rl->dropped, 1,
					  memory_order_relaxed);
		return false;
	}
	n = atomic_exchange_explicit(&rl->dropped, 0, memory_order_relaxed);
	if (dropped)
		*dropped = n;
	return true;
}
