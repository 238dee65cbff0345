/* SPDX-License-Identifier: Apache-2.0 */
/* Compiler attributes and tiny helpers shared by every component. */
#ifndef MC_COMPILER_H
#define MC_COMPILER_H

#include <stddef.h>

#define MC_MUST_CHECK __attribute__((warn_unused_result))
#define MC_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define MC_UNUSED __attribute__((unused))
#define MC_NORETURN __attribute__((noreturn))
#define MC_LIKELY(x) __builtin_expect(!!(x), 1)
#define MC_UNLIKELY(x) __builtin_expect(!!(x), 0)

#define MC_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define mc_container_of(ptr, type, member) \
	((type *)((char *)(ptr)-offsetof(type, member)))

/* An internal invariant broke (git's BUG()): never for bad input. */
#define MC_BUG_ON(cond)                                    \
	do {                                               \
		if (MC_UNLIKELY(cond))                     \
			mc_bug(__FILE__, __LINE__, #cond); \
	} while (0)

MC_NORETURN void mc_bug(const char *file, int line, const char *what);

#endif
