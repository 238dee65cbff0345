/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The option table fuzz_cfg_json and fuzz_flags parse into: every option
 * type, bounded and unbounded numbers, aliases, a NULL and a non-NULL
 * string default, and a strict and a lenient spec over the same rows.
 * Everything here has internal linkage; each target includes it once.
 */
#ifndef MC_FUZZ_CFG_SPEC_H
#define MC_FUZZ_CFG_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "mc_cfg.h"

struct fuzz_cfg {
	bool flag;
	bool other_flag;
	int64_t count; /* [-5, 1000] */
	int64_t any_int; /* unbounded */
	int64_t rpc_port; /* [1, 65535] */
	uint64_t size; /* [1, 1 TiB] */
	uint64_t big_size;
	double ratio; /* [0, 1] */
	double any_double;
	char *name; /* default NULL */
	char *dir; /* default "/tmp" */
	uint64_t ttl_ms; /* bare numbers are seconds */
	uint64_t wait_ms; /* bare numbers are ms, [0, 60000] */
	int v;
};

#define FUZZ_OPT(n, a, t, field, d, lo, hi, unit)                       \
	{                                                               \
		.name = (n), .alias = (a), .type = (t),                 \
		.offset = offsetof(struct fuzz_cfg, field), .def = (d), \
		.min = (lo), .max = (hi), .unit_ms = (unit),            \
		.help = "fuzzed option " n,                             \
	}

static const struct mc_opt fuzz_opts[] = {
	FUZZ_OPT("flag", "old_flag", MC_OPT_BOOL, flag, "false", 0, 0, 0),
	FUZZ_OPT("other_flag", NULL, MC_OPT_BOOL, other_flag, "true", 0, 0, 0),
	FUZZ_OPT("count", NULL, MC_OPT_INT, count, "3", -5, 1000, 0),
	FUZZ_OPT("any_int", "anyint", MC_OPT_INT, any_int, "0", 0, 0, 0),
	FUZZ_OPT("rpc_port", "port", MC_OPT_INT, rpc_port, "50051", 1, 65535,
		 0),
	FUZZ_OPT("size", NULL, MC_OPT_SIZE, size, "4G", 1, 1099511627776.0, 0),
	FUZZ_OPT("big_size", NULL, MC_OPT_SIZE, big_size, "0", 0, 0, 0),
	FUZZ_OPT("ratio", NULL, MC_OPT_DOUBLE, ratio, "0.5", 0, 1, 0),
	FUZZ_OPT("any_double", NULL, MC_OPT_DOUBLE, any_double, "-1.5", 0, 0,
		 0),
	FUZZ_OPT("name", NULL, MC_OPT_STRING, name, NULL, 0, 0, 0),
	FUZZ_OPT("dir", "data_dir", MC_OPT_STRING, dir, "/tmp", 0, 0, 0),
	FUZZ_OPT("ttl", NULL, MC_OPT_DURATION, ttl_ms, "5s", 0, 0, 1000),
	FUZZ_OPT("wait_ms", NULL, MC_OPT_DURATION, wait_ms, "100", 0, 60000, 1),
	FUZZ_OPT("v", NULL, MC_OPT_VERBOSITY, v, "0", 0, 0, 0),
};

static const struct mc_cfg_spec fuzz_strict_spec = {
	.prog = "fuzz_strict",
	.summary = "strict spec for fuzzing",
	.opts = fuzz_opts,
	.n_opts = sizeof(fuzz_opts) / sizeof(fuzz_opts[0]),
	.strict = true,
	.max_positional = 2,
	.positional_help = "[A [B]]",
};

static const struct mc_cfg_spec fuzz_lenient_spec = {
	.prog = "fuzz_lenient",
	.summary = "lenient spec for fuzzing",
	.opts = fuzz_opts,
	.n_opts = sizeof(fuzz_opts) / sizeof(fuzz_opts[0]),
	.strict = false,
	.max_positional = 0,
};

/* Whatever the input, a loaded config respects every row's bounds. */
static inline void fuzz_cfg_check(const struct fuzz_cfg *c)
{
	FUZZ_CHECK(c->count >= -5 && c->count <= 1000);
	FUZZ_CHECK(c->rpc_port >= 1 && c->rpc_port <= 65535);
	FUZZ_CHECK(c->size >= 1 && c->size <= 1099511627776ULL);
	FUZZ_CHECK(c->ratio >= 0 && c->ratio <= 1);
	FUZZ_CHECK(c->any_double == c->any_double); /* not NaN */
	FUZZ_CHECK(c->wait_ms <= 60000);
	FUZZ_CHECK(c->v >= 0 && c->v <= 9);
	FUZZ_CHECK(c->dir != NULL);
}

/* A failure always explains itself in a terminated message. */
static inline void fuzz_cfg_check_err(int rc, const char *err, size_t len)
{
	FUZZ_CHECK(rc < 0);
	FUZZ_CHECK(memchr(err, '\0', len) != NULL);
	FUZZ_CHECK(err[0] != '\0');
}

/* mc_cfg_release() frees and clears every string. */
static inline void fuzz_cfg_release(const struct mc_cfg_spec *spec,
				    struct fuzz_cfg *c)
{
	mc_cfg_release(spec, c);
	FUZZ_CHECK(c->name == NULL && c->dir == NULL);
}

#endif
