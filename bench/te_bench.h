/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file te_bench.h
 * transfer_engine_bench's parts: options (te_bench_opts.c), the target
 * (te_bench_target.c), the initiator (te_bench_initiator.c) and the
 * helpers they share (te_bench_mem.c): pre-faulted buffers, the target's
 * byte pattern, throughput units.
 *
 * The pattern: byte i of the target's buffer is (uint8_t)(i * 131 + 7).
 * It repeats every 256 bytes, so a block written at any offset that is a
 * multiple of 256 with the pattern of its own first byte leaves the target
 * unchanged. The initiator places blocks at such offsets and fills its
 * local blocks with the pattern, so WRITE runs keep the target verifiable
 * for the READ runs after them.
 */
#ifndef TE_BENCH_H
#define TE_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mc_cfg.h"

#define TEB_SLOT_ALIGN 256u

struct teb_cfg {
	char *mode;
	char *metadata_server;
	char *local_server_name;
	char *segment_id;
	char *protocol;
	char *operation;
	uint64_t buffer_size;
	int64_t batch_size;
	uint64_t block_size;
	int64_t duration;
	int64_t threads;
	char *report_unit;
	int64_t report_precision;
	bool json;
	char *ready_file;
	int64_t lanes;
	bool print_topology;
	bool verify;
	int v;
};

extern const struct mc_cfg_spec teb_cfg_spec;

/** Check values the table cannot (choices, combinations); 0 or -EINVAL. */
int teb_cfg_check(const struct teb_cfg *c, char *err, size_t errlen);

static inline uint8_t teb_pattern(uint64_t i)
{
	return (uint8_t)(i * 131u + 7u);
}

/** Fill buf with the pattern of bytes [base, base + len). */
void teb_fill_pattern(void *buf, size_t len, uint64_t base);

/** Offset of the first byte of buf that differs from the pattern of
 *  [base, base + len), or -1 when all match. */
int64_t teb_check_pattern(const void *buf, size_t len, uint64_t base);

/**
 * Anonymous memory for a benchmark: 2 MiB aligned, transparent huge pages
 * asked for, then every page touched (first-touch faults cost ~16 us per
 * 4 KiB page on the VMs we measure on: never inside a timed loop).
 * NULL when out of memory. Free with teb_free().
 */
void *teb_alloc(size_t len);
void teb_free(void *p, size_t len);

/** Scale bytes/s into unit ("GB", "GiB", "Gb", "MB", ...); NAN if the
 *  unit is unknown. */
double teb_rate(double bytes_per_s, const char *unit);

/** "cpu:N" for the NUMA node of addr, "*" when unknown. */
void teb_location(const void *addr, char *buf, size_t len);

int teb_run_target(const struct teb_cfg *c);
int teb_run_initiator(const struct teb_cfg *c);

#endif
