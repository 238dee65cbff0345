/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_crc32c.h
 * CRC-32C (Castagnoli, iSCSI's polynomial 0x1EDC6F41, reflected): the
 * checksum of a checkpoint's shards (docs/design.md, "Checkpoints") and of
 * the HA op log's entries (master/ha.c).
 * The SSE4.2 instruction where the CPU has it, a table otherwise; both
 * give the same values (crc32c("123456789") == 0xE3069283).
 */
#ifndef MC_CRC32C_H
#define MC_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/** Continue crc (0 to start) over len bytes of p. */
uint32_t mc_crc32c(uint32_t crc, const void *p, size_t len);
/** The same with the tables only (tests compare the two). */
uint32_t mc_crc32c_table(uint32_t crc, const void *p, size_t len);

#endif
