/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by transfer_engine_bench, tcp_pump and memcpy_bench:
 * pre-faulted buffers, the target's byte pattern and throughput units
 * (see te_bench.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "te_bench.h"

#define HUGE_2M (2u << 20)
#define PERIOD 256u

void teb_fill_pattern(void *buf, size_t len, uint64_t base)
{
	uint8_t period[PERIOD], *p = buf;
	size_t done = 0;

	for (unsigned i = 0; i < PERIOD; i++)
		period[i] = teb_pattern(base + i);
	/* The pattern repeats every 256 bytes: copy whole periods. */
	while (len - done >= PERIOD) {
		memcpy(p + done, period, PERIOD);
		done += PERIOD;
	}
	memcpy(p + done, period, len - done);
}

int64_t teb_check_pattern(const void *buf, size_t len, uint64_t base)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i] != teb_pattern(base + i))
			return (int64_t)i;
	return -1;
}

void *teb_alloc(size_t len)
{
	size_t round = (len + HUGE_2M - 1) & ~(size_t)(HUGE_2M - 1);
	void *p = aligned_alloc(HUGE_2M, round);

	if (!p)
		return NULL;
	/* Before the first touch, so the faults below take huge pages. */
	(void)madvise(p, round, MADV_HUGEPAGE);
	memset(p, 0, round);
	return p;
}

void teb_free(void *p, size_t len)
{
	(void)len;
	free(p);
}

double teb_rate(double bytes_per_s, const char *unit)
{
	static const struct {
		const char *name;
		double div;
	} units[] = {
		{ "GB", 1e9 }, { "GiB", 1073741824.0 }, { "Gb", 1e9 / 8 },
		{ "MB", 1e6 }, { "MiB", 1048576.0 },	{ "Mb", 1e6 / 8 },
		{ "KB", 1e3 }, { "KiB", 1024.0 },	{ "Kb", 1e3 / 8 },
	};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(unit, units[i].name))
			return bytes_per_s / units[i].div;
	return NAN;
}
