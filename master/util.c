/* SPDX-License-Identifier: Apache-2.0 */
/* Clocks, the master's PRNG and id formatting. */
#include <time.h>

#include "master.h"
#include "mc_parse.h"
#include "mst_util.h"
#include "mc_time.h"

uint64_t mst_now(void)
{
	return mc_mono_ms();
}

uint64_t mst_wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int64_t mst_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t mst_next_version(struct master *m)
{
	struct timespec ts;
	uint64_t v;

	clock_gettime(CLOCK_REALTIME, &ts);
	v = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (v <= m->last_version)
		v = m->last_version +
		    1; /* the clock stepped back, or two in 1 ns */
	m->last_version = v;
	return v;
}

/* xorshift64*: placement randomness only, never security. */
uint64_t mst_rand(struct master *m)
{
	uint64_t x = m->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	m->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

void mst_id_hex(const uint8_t *id, char out[2 * MST_ID_LEN + 1])
{
	mc_hex(id, MST_ID_LEN, out);
}
