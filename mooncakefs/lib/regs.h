/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file regs.h
 * The buffers a user registered with mooncake_store_register_buffer(): a
 * sorted table of non-overlapping ranges, so the zero-copy calls refuse
 * unregistered memory per key (-EINVAL) before asking the master for
 * anything. Thread-safe (a reader-writer lock).
 */
#ifndef MCS_REGS_H
#define MCS_REGS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mc_compiler.h"

struct mcs_range {
	uintptr_t addr;
	size_t len;
};

struct mcs_regs {
	pthread_rwlock_t lock;
	struct mcs_range *r;
	size_t n, cap;
};

void mcs_regs_init(struct mcs_regs *g);
void mcs_regs_free(struct mcs_regs *g);
/** 0, -EEXIST (overlaps a registered range), -ENOMEM, -EINVAL. */
int mcs_regs_add(struct mcs_regs *g, const void *addr,
		 size_t len) MC_MUST_CHECK;
/** 0 or -ENOENT (addr does not start a registered range); *len gets
 *  the range's length (len may be NULL). */
int mcs_regs_del(struct mcs_regs *g, const void *addr, size_t *len);
/** A registered range overlapping [addr, addr+len) (the lowest), if any. */
bool mcs_regs_overlap(struct mcs_regs *g, const void *addr, size_t len,
		      struct mcs_range *out);
/** [addr, addr+len) lies inside one registered range. */
bool mcs_regs_contains(struct mcs_regs *g, const void *addr, size_t len);

#endif
