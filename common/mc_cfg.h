/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_cfg.h
 * Table-driven configuration: one row per option drives parsing, --help,
 * validation, --dump_config and docs/config.md (Redis static_configs[]).
 *
 * Precedence, lowest first: the row's default, the JSON config file, the
 * environment, the command line. Each layer is parsed by the same code, so
 * a value means the same wherever it is written.
 *
 * Command lines use gflags syntax, as upstream users type it:
 *   --name=value  --name value  -name=value  -name value
 *   --flag  --flag=true|false|1|0|yes|no  --noflag      (booleans)
 *   -v  -v=2  -v 2                                      (verbosity)
 *   --help  --version  --dump_config  --help_markdown  --   (built-ins)
 * Underscores and dashes in names are interchangeable (--rpc-port).
 *
 * Strict specs (our daemons) refuse unknown flags, unknown JSON keys and
 * positional arguments beyond max_positional, naming the culprit. Lenient
 * specs (client configuration shared with vLLM/SGLang/LMCache) ignore
 * unknown JSON keys with a warning. Bad values of known options are refused
 * in both modes.
 *
 * Ownership: string options are heap copies owned by the config struct and
 * freed by mc_cfg_release(). Not thread-safe; parse once at start-up.
 */
#ifndef MC_CFG_H
#define MC_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mc_compiler.h"

#define MC_ERR_LEN 512

enum mc_opt_type {
	MC_OPT_BOOL, /* bool */
	MC_OPT_INT, /* int64_t, bounded by [min, max] */
	MC_OPT_SIZE, /* uint64_t bytes, "4G" syntax, bounded */
	MC_OPT_DOUBLE, /* double, bounded */
	MC_OPT_STRING, /* char *, heap, may be NULL when default is NULL */
	MC_OPT_DURATION, /* uint64_t ms; bare numbers in `unit_ms` units */
	MC_OPT_VERBOSITY /* int; the -v flag: bare means 1 */
};

struct mc_opt {
	const char *name; /* flag and JSON key */
	const char *alias; /* deprecated alias (flag and key), or NULL */
	const char *env; /* environment variable, NULL: spec prefix+NAME */
	enum mc_opt_type type;
	size_t offset; /* of the field inside the config struct */
	const char *def; /* default, as text; NULL only for strings */
	double min, max; /* bounds for numbers (both 0: unbounded) */
	uint64_t unit_ms; /* MC_OPT_DURATION: unit of a bare number */
	const char *help;
};

struct mc_cfg_spec {
	const char *prog;
	const char *summary; /* one line for --help */
	const struct mc_opt *opts;
	size_t n_opts;
	bool strict;
	/* Keys other programs keep in the same file (NULL-terminated, or
	 * NULL): not ours, ignored without a warning (others are warned of:
	 * a misspelt key of ours). */
	const char *const *foreign;
	const char *env_prefix; /* e.g. "MOONCAKE_METAD_"; NULL: no env */
	const char *config_opt; /* option naming the JSON file, or NULL */
	const char *config_env; /* env naming the JSON file, or NULL */
	int max_positional; /* positional arguments allowed */
	const char *positional_help;
};

/* Outcome of mc_cfg_load() besides errors. */
enum mc_cfg_action {
	MC_CFG_RUN = 0,
	MC_CFG_HELP, /* --help was given: print mc_cfg_print_help() */
	MC_CFG_VERSION, /* --version */
	MC_CFG_DUMP, /* --dump_config */
	MC_CFG_DOC, /* --help_markdown: the table for docs/config.md */
};

struct mc_cfg_result {
	enum mc_cfg_action action;
	int n_positional;
	/* Borrowed from argv: the positional arguments, in order. Flags may
	 * come between them (as getopt, argv is then reordered: the
	 * positionals moved next to each other, the same pointers). */
	char **positional;
};

/**
 * Fill cfg from defaults, file, environment and argv, in that order.
 * @return 0, or a negative code with a message in err that names the
 *         option, the source and the bad value: -EINVAL (bad flag or
 *         value), -ERANGE (out of bounds), MC_EBADCONFIG (bad file
 *         content), -errno (config file unreadable).
 */
int mc_cfg_load(const struct mc_cfg_spec *spec, void *cfg, int argc,
		char **argv, struct mc_cfg_result *res, char *err,
		size_t errlen) MC_MUST_CHECK;

/* The individual layers, for tests and special callers. */
int mc_cfg_defaults(const struct mc_cfg_spec *spec, void *cfg, char *err,
		    size_t errlen) MC_MUST_CHECK;
int mc_cfg_load_json(const struct mc_cfg_spec *spec, void *cfg,
		     const char *text, size_t len, const char *source,
		     char *err, size_t errlen) MC_MUST_CHECK;
int mc_cfg_load_file(const struct mc_cfg_spec *spec, void *cfg,
		     const char *path, char *err, size_t errlen) MC_MUST_CHECK;
int mc_cfg_load_env(const struct mc_cfg_spec *spec, void *cfg, char *err,
		    size_t errlen) MC_MUST_CHECK;
int mc_cfg_parse_args(const struct mc_cfg_spec *spec, void *cfg, int argc,
		      char **argv, struct mc_cfg_result *res, char *err,
		      size_t errlen) MC_MUST_CHECK;

/** Set one option from text, as if given on the command line. */
int mc_cfg_set(const struct mc_cfg_spec *spec, void *cfg, const char *name,
	       const char *value, char *err, size_t errlen) MC_MUST_CHECK;

/** Free string options and zero cfg's string fields. */
void mc_cfg_release(const struct mc_cfg_spec *spec, void *cfg);

void mc_cfg_print_help(const struct mc_cfg_spec *spec, FILE *out);
/** Effective configuration as a JSON object, one key per option. */
void mc_cfg_dump_json(const struct mc_cfg_spec *spec, const void *cfg,
		      FILE *out);
/** A markdown table of the options, for docs/config.md. */
void mc_cfg_doc_markdown(const struct mc_cfg_spec *spec, FILE *out);

/** Map a log verbosity (-v N) onto a log level. */
int mc_cfg_verbosity_level(int v);

#endif
