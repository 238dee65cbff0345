/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/mc_cfg.c against a small option table defined
 * here: gflags command-line syntax, the JSON file layer (strict and
 * lenient), the environment layer, precedence of the layers, locating the
 * config file, error messages naming the option, help/dump/doc output.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_cfg.h"
#include "mc_log.h"
#include "mooncake/mc_err.h"

struct tcfg {
	bool enable_foo;
	bool feature;
	int64_t port;
	int64_t offset;
	uint64_t max_size;
	double ratio;
	char *name;
	uint64_t ttl_ms;
	int v;
	char *config;
	char *token;
};

#define OPT(n, t, f, d, lo, hi, h)                                        \
	{                                                                 \
		.name = n, .type = t, .offset = offsetof(struct tcfg, f), \
		.def = d, .min = lo, .max = hi, .help = h                 \
	}

static const struct mc_opt topts[] = {
	OPT("enable_foo", MC_OPT_BOOL, enable_foo, "false", 0, 0,
	    "Enable foo."),
	OPT("feature", MC_OPT_BOOL, feature, "true", 0, 0, "A feature."),
	{ .name = "port",
	  .alias = "listen_port",
	  .type = MC_OPT_INT,
	  .offset = offsetof(struct tcfg, port),
	  .def = "8080",
	  .min = 1,
	  .max = 65535,
	  .help = "TCP port." },
	OPT("offset", MC_OPT_INT, offset, "0", 0, 0, "Unbounded integer."),
	OPT("max_size", MC_OPT_SIZE, max_size, "1GiB", 4096, 1099511627776.0,
	    "Bytes."),
	OPT("ratio", MC_OPT_DOUBLE, ratio, "0.5", 0, 1, "A fraction."),
	OPT("name", MC_OPT_STRING, name, "mc", 0, 0, "A name."),
	{ .name = "ttl",
	  .type = MC_OPT_DURATION,
	  .offset = offsetof(struct tcfg, ttl_ms),
	  .def = "5",
	  .unit_ms = 1000,
	  .help = "Lease TTL; bare numbers are seconds." },
	OPT("v", MC_OPT_VERBOSITY, v, "0", 0, 9, "Verbosity."),
	OPT("config", MC_OPT_STRING, config, NULL, 0, 0, "JSON file."),
	{ .name = "token",
	  .env = "MCTEST_SECRET_TOKEN",
	  .type = MC_OPT_STRING,
	  .offset = offsetof(struct tcfg, token),
	  .help = "Own environment variable." },
};

static const struct mc_cfg_spec strict_spec = {
	.prog = "mctest",
	.summary = "A test program.",
	.opts = topts,
	.n_opts = MC_ARRAY_SIZE(topts),
	.strict = true,
	.env_prefix = "MCTEST_",
	.config_opt = "config",
	.config_env = "MCTEST_CONFIG_FILE",
	.max_positional = 1,
	.positional_help = "[FILE]",
};

/* Client-style: lenient about JSON keys, no environment prefix. */
static const struct mc_cfg_spec lenient_spec = {
	.prog = "mclenient",
	.summary = "A lenient test program.",
	.opts = topts,
	.n_opts = MC_ARRAY_SIZE(topts),
	.strict = false,
	.env_prefix = NULL,
	.config_opt = "config",
	.max_positional = 0,
};

static struct tcfg cfg;
static struct mc_cfg_result res;
static char err[MC_ERR_LEN];

/* Log lines captured from the config layer's warnings. */
static char warnings[4096];

static void warn_sink(int level, const char *line, void *arg)
{
	size_t n = strlen(warnings);

	snprintf(warnings + n, sizeof(warnings) - n, "%s\n", line);
}

static const char *const env_names[] = {
	"MCTEST_ENABLE_FOO",  "MCTEST_FEATURE",	 "MCTEST_PORT",
	"MCTEST_OFFSET",      "MCTEST_MAX_SIZE", "MCTEST_RATIO",
	"MCTEST_NAME",	      "MCTEST_TTL",	 "MCTEST_V",
	"MCTEST_CONFIG",      "MCTEST_TOKEN",	 "MCTEST_SECRET_TOKEN",
	"MCTEST_CONFIG_FILE",
};

static void cfg_setup(void)
{
	for (size_t i = 0; i < MC_ARRAY_SIZE(env_names); i++)
		unsetenv(env_names[i]);
	memset(&cfg, 0, sizeof(cfg));
	memset(&res, 0, sizeof(res));
	err[0] = '\0';
	warnings[0] = '\0';
	mc_log_set_sink(warn_sink, NULL);
	cr_assert_eq(mc_cfg_defaults(&strict_spec, &cfg, err, sizeof(err)), 0,
		     "defaults: %s", err);
}

static void cfg_teardown(void)
{
	mc_cfg_release(&strict_spec, &cfg);
}

TestSuite(cfg, .init = cfg_setup, .fini = cfg_teardown);

#define ARGV(...) ((char *[]){ "prog", __VA_ARGS__, NULL })
#define ARGC(...) \
	((int)(sizeof((char *[]){ "prog", __VA_ARGS__ }) / sizeof(char *)))
#define PARSE(spec, ...)                                                    \
	mc_cfg_parse_args(spec, &cfg, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), \
			  &res, err, sizeof(err))
#define LOAD_JSON(spec, text)                                              \
	mc_cfg_load_json(spec, &cfg, text, strlen(text), "test.json", err, \
			 sizeof(err))

#define expect_err_has(s) \
	cr_expect(strstr(err, s) != NULL, "error '%s' lacks '%s'", err, s)

/* ---- defaults ---- */

Test(cfg, defaults)
{
	cr_expect(!cfg.enable_foo);
	cr_expect(cfg.feature);
	cr_expect_eq(cfg.port, 8080);
	cr_expect_eq(cfg.offset, 0);
	cr_expect_eq(cfg.max_size, 1ULL << 30);
	cr_expect_float_eq(cfg.ratio, 0.5, 1e-12);
	cr_assert_not_null(cfg.name);
	cr_expect_str_eq(cfg.name, "mc");
	cr_expect_eq(cfg.ttl_ms, 5000);
	cr_expect_eq(cfg.v, 0);
	cr_expect_null(cfg.config);
	cr_expect_null(cfg.token);
}

Test(cfg, bad_default_names_option)
{
	static const struct mc_opt bad[] = {
		OPT("port", MC_OPT_INT, port, "eighty", 0, 0, "x"),
	};
	static const struct mc_cfg_spec spec = {
		.prog = "bad",
		.summary = "",
		.opts = bad,
		.n_opts = 1,
	};
	struct tcfg c = { 0 };

	cr_expect_neq(mc_cfg_defaults(&spec, &c, err, sizeof(err)), 0);
	expect_err_has("port");
	expect_err_has("eighty");
}

/* ---- command line ---- */

Test(cfg, flag_forms)
{
	cr_assert_eq(PARSE(&strict_spec, "--port=1"), 0, "%s", err);
	cr_expect_eq(cfg.port, 1);
	cr_assert_eq(PARSE(&strict_spec, "--port", "2"), 0, "%s", err);
	cr_expect_eq(cfg.port, 2);
	cr_assert_eq(PARSE(&strict_spec, "-port", "3"), 0, "%s", err);
	cr_expect_eq(cfg.port, 3);
	cr_assert_eq(PARSE(&strict_spec, "-port=4"), 0, "%s", err);
	cr_expect_eq(cfg.port, 4);
	cr_expect_eq(res.action, MC_CFG_RUN);
	cr_expect_eq(res.n_positional, 0);
}

Test(cfg, every_type_from_flags)
{
	cr_assert_eq(PARSE(&strict_spec, "--max_size", "4G", "--ratio=0.25",
			   "--name", "hello", "--ttl=250ms", "--offset=-7"),
		     0, "%s", err);
	cr_expect_eq(cfg.max_size, 4ULL << 30);
	cr_expect_float_eq(cfg.ratio, 0.25, 1e-12);
	cr_expect_str_eq(cfg.name, "hello");
	cr_expect_eq(cfg.ttl_ms, 250);
	cr_expect_eq(cfg.offset, -7);

	/* A bare duration is in the option's unit (seconds here). */
	cr_assert_eq(PARSE(&strict_spec, "--ttl", "3"), 0, "%s", err);
	cr_expect_eq(cfg.ttl_ms, 3000);
}

Test(cfg, negative_number_is_a_value)
{
	cr_assert_eq(PARSE(&strict_spec, "--offset", "-5"), 0, "%s", err);
	cr_expect_eq(cfg.offset, -5);
	cr_expect_eq(res.n_positional, 0);
}

Test(cfg, dashes_equal_underscores)
{
	cr_assert_eq(PARSE(&strict_spec, "--max-size=2G", "--enable-foo"), 0,
		     "%s", err);
	cr_expect_eq(cfg.max_size, 2ULL << 30);
	cr_expect(cfg.enable_foo);
}

Test(cfg, bool_forms)
{
	cr_assert_eq(PARSE(&strict_spec, "--enable_foo"), 0, "%s", err);
	cr_expect(cfg.enable_foo);
	cr_assert_eq(PARSE(&strict_spec, "--enable_foo=false"), 0, "%s", err);
	cr_expect(!cfg.enable_foo);
	cr_assert_eq(PARSE(&strict_spec, "--enable_foo=yes"), 0, "%s", err);
	cr_expect(cfg.enable_foo);
	cr_assert_eq(PARSE(&strict_spec, "--enable_foo=0"), 0, "%s", err);
	cr_expect(!cfg.enable_foo);
	cr_assert_eq(PARSE(&strict_spec, "-enable_foo"), 0, "%s", err);
	cr_expect(cfg.enable_foo);
	/* "--flag false" consumes the word; it is not a positional. */
	cr_assert_eq(PARSE(&strict_spec, "--enable_foo", "false"), 0, "%s",
		     err);
	cr_expect(!cfg.enable_foo);
	cr_expect_eq(res.n_positional, 0);
	cr_assert_eq(PARSE(&strict_spec, "--enable_foo", "true"), 0, "%s", err);
	cr_expect(cfg.enable_foo);
	cr_expect_eq(res.n_positional, 0);
}

Test(cfg, nobool)
{
	cr_assert(cfg.feature);
	cr_assert_eq(PARSE(&strict_spec, "--nofeature"), 0, "%s", err);
	cr_expect(!cfg.feature);
	cr_assert_eq(PARSE(&strict_spec, "--feature"), 0, "%s", err);
	cr_assert_eq(PARSE(&strict_spec, "-nofeature"), 0, "%s", err);
	cr_expect(!cfg.feature);
	/* Only booleans have a --no form. */
	cr_expect_eq(PARSE(&strict_spec, "--noport"), -EINVAL);
	expect_err_has("noport");
}

Test(cfg, bool_bad_value)
{
	cr_expect_neq(PARSE(&strict_spec, "--enable_foo=maybe"), 0);
	expect_err_has("enable_foo");
	expect_err_has("maybe");
}

Test(cfg, verbosity_forms)
{
	cr_assert_eq(PARSE(&strict_spec, "-v"), 0, "%s", err);
	cr_expect_eq(cfg.v, 1);
	cr_assert_eq(PARSE(&strict_spec, "-v=2"), 0, "%s", err);
	cr_expect_eq(cfg.v, 2);
	cr_assert_eq(PARSE(&strict_spec, "-v", "3"), 0, "%s", err);
	cr_expect_eq(cfg.v, 3);
	cr_expect_eq(res.n_positional, 0);
	cr_assert_eq(PARSE(&strict_spec, "--v=4"), 0, "%s", err);
	cr_expect_eq(cfg.v, 4);
}

Test(cfg, bare_verbosity_before_positional)
{
	cr_assert_eq(PARSE(&strict_spec, "-v", "file.txt"), 0, "%s", err);
	cr_expect_eq(cfg.v, 1);
	cr_assert_eq(res.n_positional, 1);
	cr_expect_str_eq(res.positional[0], "file.txt");
}

Test(cfg, verbosity_before_flag)
{
	cr_assert_eq(PARSE(&strict_spec, "-v", "--port=9"), 0, "%s", err);
	cr_expect_eq(cfg.v, 1);
	cr_expect_eq(cfg.port, 9);
}

Test(cfg, builtins)
{
	cr_assert_eq(PARSE(&strict_spec, "--help"), 0, "%s", err);
	cr_expect_eq(res.action, MC_CFG_HELP);
	cr_assert_eq(PARSE(&strict_spec, "-h"), 0, "%s", err);
	cr_expect_eq(res.action, MC_CFG_HELP);
	cr_assert_eq(PARSE(&strict_spec, "-help"), 0, "%s", err);
	cr_expect_eq(res.action, MC_CFG_HELP);
	cr_assert_eq(PARSE(&strict_spec, "--version"), 0, "%s", err);
	cr_expect_eq(res.action, MC_CFG_VERSION);
	cr_assert_eq(PARSE(&strict_spec, "--port=5"), 0, "%s", err);
	cr_expect_eq(res.action, MC_CFG_RUN);
}

Test(cfg, dump_config_still_applies_flags)
{
	cr_assert_eq(PARSE(&strict_spec, "--dump_config", "--port=5"), 0, "%s",
		     err);
	cr_expect_eq(res.action, MC_CFG_DUMP);
	cr_expect_eq(cfg.port, 5);
	cr_assert_eq(PARSE(&strict_spec, "--dump-config"), 0, "%s", err);
	cr_expect_eq(res.action, MC_CFG_DUMP);
}

Test(cfg, unknown_flag_named)
{
	cr_expect_eq(PARSE(&strict_spec, "--port=1", "--bogus_flag=3"),
		     -EINVAL);
	expect_err_has("bogus_flag");
	err[0] = '\0';
	cr_expect_eq(PARSE(&strict_spec, "-x"), -EINVAL);
	expect_err_has("'x'");
}

Test(cfg, bad_value_names_option)
{
	cr_expect_neq(PARSE(&strict_spec, "--port=eighty"), 0);
	expect_err_has("port");
	expect_err_has("eighty");
	cr_expect_eq(cfg.port, 8080, "bad value was stored");

	err[0] = '\0';
	cr_expect_neq(PARSE(&strict_spec, "--max_size=4Q"), 0);
	expect_err_has("max_size");
	expect_err_has("4Q");

	err[0] = '\0';
	cr_expect_neq(PARSE(&strict_spec, "--ttl", "soon"), 0);
	expect_err_has("ttl");

	err[0] = '\0';
	cr_expect_neq(PARSE(&strict_spec, "--ratio=half"), 0);
	expect_err_has("ratio");
}

Test(cfg, out_of_range_names_option)
{
	cr_expect_neq(PARSE(&strict_spec, "--port=70000"), 0);
	expect_err_has("port");
	expect_err_has("70000");
	cr_expect_eq(cfg.port, 8080);

	err[0] = '\0';
	cr_expect_neq(PARSE(&strict_spec, "--port", "0"), 0);
	expect_err_has("port");

	err[0] = '\0';
	cr_expect_neq(PARSE(&strict_spec, "--ratio=1.5"), 0);
	expect_err_has("ratio");

	err[0] = '\0';
	cr_expect_neq(PARSE(&strict_spec, "--max_size=1K"), 0);
	expect_err_has("max_size");

	err[0] = '\0';
	cr_expect_neq(PARSE(&strict_spec, "-v=12"), 0);
	cr_expect(strstr(err, "'v'") != NULL, "error '%s' lacks 'v'", err);

	/* The bounds are inclusive. */
	cr_expect_eq(PARSE(&strict_spec, "--port=65535", "--ratio=1"), 0, "%s",
		     err);
	cr_expect_eq(PARSE(&strict_spec, "--port=1", "--ratio=0"), 0, "%s",
		     err);
}

Test(cfg, missing_value_names_option)
{
	cr_expect_eq(PARSE(&strict_spec, "--name"), -EINVAL);
	expect_err_has("name");
	err[0] = '\0';
	cr_expect_eq(PARSE(&strict_spec, "--enable_foo", "--port"), -EINVAL);
	expect_err_has("port");
}

Test(cfg, deprecated_alias_warns)
{
	cr_assert_eq(PARSE(&strict_spec, "--listen_port=9"), 0, "%s", err);
	cr_expect_eq(cfg.port, 9);
	cr_expect(strstr(warnings, "listen_port") != NULL, "warnings: '%s'",
		  warnings);
	cr_expect(strstr(warnings, "--port") != NULL, "warnings: '%s'",
		  warnings);

	warnings[0] = '\0';
	cr_assert_eq(PARSE(&strict_spec, "--listen-port", "10"), 0, "%s", err);
	cr_expect_eq(cfg.port, 10);
	cr_expect_neq(warnings[0], '\0', "no warning for the dashed alias");

	/* The real name does not warn. */
	warnings[0] = '\0';
	cr_assert_eq(PARSE(&strict_spec, "--port=11"), 0, "%s", err);
	cr_expect_str_eq(warnings, "");
}

Test(cfg, positionals)
{
	cr_assert_eq(PARSE(&strict_spec, "--port=1", "file"), 0, "%s", err);
	cr_assert_eq(res.n_positional, 1);
	cr_expect_str_eq(res.positional[0], "file");

	cr_expect_eq(PARSE(&strict_spec, "one", "two"), -EINVAL);
	expect_err_has("two");

	/* After "--" everything is positional, even a dash word. */
	cr_assert_eq(PARSE(&strict_spec, "--", "-x"), 0, "%s", err);
	cr_assert_eq(res.n_positional, 1);
	cr_expect_str_eq(res.positional[0], "-x");

	/* "-" alone is a value (stdin), hence a positional. */
	cr_assert_eq(PARSE(&strict_spec, "-"), 0, "%s", err);
	cr_assert_eq(res.n_positional, 1);
	cr_expect_str_eq(res.positional[0], "-");

	cr_expect_eq(PARSE(&lenient_spec, "extra"), -EINVAL);
	expect_err_has("extra");
}

/* Flags between positionals, as gflags and getopt take them ("mooncake
 * rm --force KEY", "put --replicas 2 FILE KEY"): the positionals come
 * out in order, contiguous, and the flags between apply. */
Test(cfg, flags_between_positionals)
{
	static const struct mc_cfg_spec three = {
		.prog = "mcthree",
		.summary = "Three positionals.",
		.opts = topts,
		.n_opts = MC_ARRAY_SIZE(topts),
		.strict = true,
		.max_positional = 3,
	};

	cr_assert_eq(PARSE(&three, "put", "--port", "7", "a", "--name=n", "b"),
		     0, "%s", err);
	cr_assert_eq(res.n_positional, 3);
	cr_expect_str_eq(res.positional[0], "put");
	cr_expect_str_eq(res.positional[1], "a");
	cr_expect_str_eq(res.positional[2], "b");
	cr_expect_eq(cfg.port, 7);
	cr_expect_str_eq(cfg.name, "n");

	cr_assert_eq(PARSE(&three, "rm", "--enable-foo", "k", "--", "-z"), 0,
		     "%s", err);
	cr_assert_eq(res.n_positional, 3);
	cr_expect_str_eq(res.positional[1], "k");
	cr_expect_str_eq(res.positional[2], "-z");
	cr_expect(cfg.enable_foo);

	cr_expect_eq(PARSE(&three, "a", "--port=1", "b", "c", "d"), -EINVAL);
	expect_err_has("'d'");
}

Test(cfg, string_replaced_without_leak)
{
	cr_assert_eq(PARSE(&strict_spec, "--name=a", "--name=b", "--name", ""),
		     0, "%s", err);
	cr_expect_str_eq(cfg.name, "");
}

/* ---- mc_cfg_set / release ---- */

Test(cfg, set_by_name)
{
	cr_assert_eq(mc_cfg_set(&strict_spec, &cfg, "max-size", "2M", err,
				sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(cfg.max_size, 2ULL << 20);
	cr_assert_eq(mc_cfg_set(&strict_spec, &cfg, "listen_port", "81", err,
				sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(cfg.port, 81);
	cr_expect_eq(mc_cfg_set(&strict_spec, &cfg, "nosuch", "1", err,
				sizeof(err)),
		     -EINVAL);
	expect_err_has("nosuch");
	cr_expect_neq(mc_cfg_set(&strict_spec, &cfg, "port", "x", err,
				 sizeof(err)),
		      0);
	expect_err_has("port");
}

Test(cfg, release_frees_strings)
{
	cr_assert_eq(PARSE(&strict_spec, "--config=/x", "--token=t"), 0);
	cr_assert_not_null(cfg.name);
	mc_cfg_release(&strict_spec, &cfg);
	cr_expect_null(cfg.name);
	cr_expect_null(cfg.config);
	cr_expect_null(cfg.token);
	/* Releasing twice is harmless. */
	mc_cfg_release(&strict_spec, &cfg);
}

/* ---- JSON layer ---- */

Test(cfg, json_every_type)
{
	cr_assert_eq(LOAD_JSON(&strict_spec,
			       "{\"enable_foo\": true, \"feature\": false,"
			       " \"port\": 1234, \"offset\": -3,"
			       " \"max_size\": \"4G\", \"ratio\": 0.25,"
			       " \"name\": \"n\", \"ttl\": 7, \"v\": 2,"
			       " \"token\": \"tok\"}"),
		     0, "%s", err);
	cr_expect(cfg.enable_foo);
	cr_expect(!cfg.feature);
	cr_expect_eq(cfg.port, 1234);
	cr_expect_eq(cfg.offset, -3);
	cr_expect_eq(cfg.max_size, 4ULL << 30);
	cr_expect_float_eq(cfg.ratio, 0.25, 1e-12);
	cr_expect_str_eq(cfg.name, "n");
	cr_expect_eq(cfg.ttl_ms, 7000);
	cr_expect_eq(cfg.v, 2);
	cr_expect_str_eq(cfg.token, "tok");
}

Test(cfg, json_values_as_strings)
{
	/* A value means the same wherever it is written. */
	cr_assert_eq(LOAD_JSON(&strict_spec,
			       "{\"port\": \"4321\", \"enable_foo\": \"yes\","
			       " \"max_size\": 8192, \"ttl\": \"2m\"}"),
		     0, "%s", err);
	cr_expect_eq(cfg.port, 4321);
	cr_expect(cfg.enable_foo);
	cr_expect_eq(cfg.max_size, 8192);
	cr_expect_eq(cfg.ttl_ms, 120000);
}

Test(cfg, json_strict_unknown_key_named)
{
	cr_expect_eq(LOAD_JSON(&strict_spec,
			       "{\"port\": 1, \"no_such_key\": 2}"),
		     MC_EBADCONFIG);
	expect_err_has("no_such_key");
	expect_err_has("test.json");
}

Test(cfg, json_lenient_unknown_key_warns)
{
	cr_assert_eq(LOAD_JSON(&lenient_spec,
			       "{\"vllm_thing\": 2, \"port\": 77}"),
		     0, "%s", err);
	cr_expect_eq(cfg.port, 77);
	cr_expect(strstr(warnings, "vllm_thing") != NULL, "warnings: '%s'",
		  warnings);
}

Test(cfg, json_bad_value_refused_in_both_modes)
{
	const struct mc_cfg_spec *specs[] = { &strict_spec, &lenient_spec };

	for (size_t i = 0; i < 2; i++) {
		err[0] = '\0';
		cr_expect_neq(LOAD_JSON(specs[i], "{\"port\": \"eighty\"}"), 0);
		expect_err_has("port");
		expect_err_has("eighty");
		err[0] = '\0';
		cr_expect_neq(LOAD_JSON(specs[i], "{\"port\": 99999}"), 0);
		expect_err_has("port");
		err[0] = '\0';
		cr_expect_neq(LOAD_JSON(specs[i], "{\"port\": true}"), 0);
		expect_err_has("port");
		err[0] = '\0';
		cr_expect_neq(LOAD_JSON(specs[i], "{\"port\": 1.5}"), 0);
		expect_err_has("port");
		err[0] = '\0';
		cr_expect_neq(LOAD_JSON(specs[i], "{\"enable_foo\": 2}"), 0);
		expect_err_has("enable_foo");
		err[0] = '\0';
		cr_expect_eq(LOAD_JSON(specs[i], "{\"port\": [1]}"),
			     MC_EBADCONFIG);
		expect_err_has("port");
		err[0] = '\0';
		cr_expect_eq(LOAD_JSON(specs[i], "{\"name\": {\"a\": 1}}"),
			     MC_EBADCONFIG);
		expect_err_has("name");
		err[0] = '\0';
		cr_expect_eq(LOAD_JSON(specs[i], "{\"port\": null}"),
			     MC_EBADCONFIG);
		expect_err_has("port");
	}
	cr_expect_eq(cfg.port, 8080);
}

/* --dump_config writes an unset string as null: it loads as the
 * option's default (NULL for one without). */
Test(cfg, json_null_string_is_its_default)
{
	cr_assert_eq(LOAD_JSON(&strict_spec, "{\"name\": \"x\", "
					     "\"token\": \"t\"}"),
		     0, "%s", err);
	cr_assert_eq(LOAD_JSON(&strict_spec, "{\"name\": null, "
					     "\"token\": null}"),
		     0, "%s", err);
	cr_expect_str_eq(cfg.name, "mc");
	cr_expect_null(cfg.token);
}

Test(cfg, json_malformed)
{
	cr_expect_eq(LOAD_JSON(&strict_spec, "{\"port\": "), MC_EBADCONFIG);
	expect_err_has("test.json");
	cr_expect_eq(LOAD_JSON(&strict_spec, "[1, 2]"), MC_EBADCONFIG);
	cr_expect_eq(LOAD_JSON(&strict_spec, "\"port\""), MC_EBADCONFIG);
	cr_expect_eq(LOAD_JSON(&strict_spec, ""), MC_EBADCONFIG);
	/* A repeated key is ambiguous. */
	cr_expect_eq(LOAD_JSON(&strict_spec, "{\"port\": 1, \"port\": 2}"),
		     MC_EBADCONFIG);
	cr_expect_eq(LOAD_JSON(&lenient_spec, "{\"port\": 1, \"port\": 2}"),
		     MC_EBADCONFIG);
}

Test(cfg, json_alias_warns)
{
	cr_assert_eq(LOAD_JSON(&strict_spec, "{\"listen_port\": 4444}"), 0,
		     "%s", err);
	cr_expect_eq(cfg.port, 4444);
	cr_expect(strstr(warnings, "listen_port") != NULL, "warnings: '%s'",
		  warnings);
}

/* ---- environment layer ---- */

Test(cfg, env_prefix_and_upper_case)
{
	cr_assert_eq(setenv("MCTEST_PORT", "4321", 1), 0);
	cr_assert_eq(setenv("MCTEST_MAX_SIZE", "64k", 1), 0);
	cr_assert_eq(setenv("MCTEST_ENABLE_FOO", "true", 1), 0);
	cr_assert_eq(setenv("MCTEST_NAME", "from env", 1), 0);
	cr_assert_eq(mc_cfg_load_env(&strict_spec, &cfg, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_eq(cfg.port, 4321);
	cr_expect_eq(cfg.max_size, 65536);
	cr_expect(cfg.enable_foo);
	cr_expect_str_eq(cfg.name, "from env");
}

Test(cfg, env_per_option_name)
{
	cr_assert_eq(setenv("MCTEST_TOKEN", "wrong", 1), 0);
	cr_assert_eq(mc_cfg_load_env(&strict_spec, &cfg, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_null(cfg.token, "prefix name used for an option with env");
	cr_assert_eq(setenv("MCTEST_SECRET_TOKEN", "right", 1), 0);
	cr_assert_eq(mc_cfg_load_env(&strict_spec, &cfg, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_not_null(cfg.token);
	cr_expect_str_eq(cfg.token, "right");
}

Test(cfg, env_without_prefix)
{
	/* The lenient spec has no prefix: only per-option names apply. */
	cr_assert_eq(setenv("MCTEST_PORT", "4321", 1), 0);
	cr_assert_eq(setenv("MCTEST_SECRET_TOKEN", "tok", 1), 0);
	cr_assert_eq(mc_cfg_load_env(&lenient_spec, &cfg, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_eq(cfg.port, 8080);
	cr_assert_not_null(cfg.token);
	cr_expect_str_eq(cfg.token, "tok");
}

Test(cfg, env_bad_value_names_option_and_variable)
{
	cr_assert_eq(setenv("MCTEST_PORT", "abc", 1), 0);
	cr_expect_neq(mc_cfg_load_env(&strict_spec, &cfg, err, sizeof(err)), 0);
	expect_err_has("port");
	expect_err_has("MCTEST_PORT");
	expect_err_has("abc");
}

/* ---- files and precedence ---- */

static char tmpdir[64];

static void tmp_setup(void)
{
	cfg_setup();
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/mc_cfg_test.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void tmp_teardown(void)
{
	static const char *const files[] = { "a.json", "b.json", "bad.json",
					     "strict.json" };
	char p[128];

	for (size_t i = 0; i < MC_ARRAY_SIZE(files); i++) {
		snprintf(p, sizeof(p), "%s/%s", tmpdir, files[i]);
		unlink(p);
	}
	rmdir(tmpdir);
	cfg_teardown();
}

/* Write text to tmpdir/name; the path goes to path. */
static void write_file(const char *name, const char *text, char *path,
		       size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f, "create %s", path);
	cr_assert_eq(fputs(text, f) >= 0, true);
	cr_assert_eq(fclose(f), 0);
}

#define LOAD(spec, ...)                                                     \
	mc_cfg_load(spec, &cfg, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), &res, \
		    err, sizeof(err))

Test(cfg_file, load_file, .init = tmp_setup, .fini = tmp_teardown)
{
	char path[128];

	write_file("a.json", "{\"port\": 1111, \"name\": \"file\"}\n", path,
		   sizeof(path));
	cr_assert_eq(mc_cfg_load_file(&strict_spec, &cfg, path, err,
				      sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(cfg.port, 1111);
	cr_expect_str_eq(cfg.name, "file");
}

Test(cfg_file, missing_file_named, .init = tmp_setup, .fini = tmp_teardown)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/absent.json", tmpdir);
	cr_expect_eq(mc_cfg_load_file(&strict_spec, &cfg, path, err,
				      sizeof(err)),
		     -ENOENT);
	expect_err_has(path);
}

Test(cfg_file, precedence, .init = tmp_setup, .fini = tmp_teardown)
{
	char path[128], flag[160];

	write_file("a.json",
		   "{\"port\": 1111, \"name\": \"file\", \"ratio\": 0.25,"
		   " \"ttl\": \"1m\", \"offset\": 5}",
		   path, sizeof(path));
	cr_assert_eq(setenv("MCTEST_PORT", "2222", 1), 0);
	cr_assert_eq(setenv("MCTEST_NAME", "env", 1), 0);
	cr_assert_eq(setenv("MCTEST_OFFSET", "6", 1), 0);
	snprintf(flag, sizeof(flag), "--config=%s", path);

	cr_assert_eq(LOAD(&strict_spec, flag, "--port=3333"), 0, "%s", err);
	cr_expect_eq(res.action, MC_CFG_RUN);
	cr_expect_eq(cfg.port, 3333); /* flag > env > file */
	cr_expect_str_eq(cfg.name, "env"); /* env > file */
	cr_expect_eq(cfg.offset, 6); /* env > file */
	cr_expect_float_eq(cfg.ratio, 0.25, 1e-12); /* file > default */
	cr_expect_eq(cfg.ttl_ms, 60000); /* file > default */
	cr_expect_eq(cfg.max_size, 1ULL << 30); /* default */
	cr_expect(!cfg.enable_foo); /* default */
	cr_assert_not_null(cfg.config);
	cr_expect_str_eq(cfg.config, path);
}

Test(cfg_file, config_flag_forms, .init = tmp_setup, .fini = tmp_teardown)
{
	char path[128], flag[160];

	write_file("a.json", "{\"port\": 1111}", path, sizeof(path));
	cr_assert_eq(LOAD(&strict_spec, "--config", path), 0, "%s", err);
	cr_expect_eq(cfg.port, 1111);

	mc_cfg_release(&strict_spec, &cfg);
	snprintf(flag, sizeof(flag), "-config=%s", path);
	cr_assert_eq(LOAD(&strict_spec, "--name=x", flag), 0, "%s", err);
	cr_expect_eq(cfg.port, 1111);
	cr_expect_str_eq(cfg.name, "x");
}

Test(cfg_file, config_from_env_variable, .init = tmp_setup,
     .fini = tmp_teardown)
{
	char path[128];

	write_file("a.json", "{\"port\": 1212}", path, sizeof(path));
	cr_assert_eq(setenv("MCTEST_CONFIG_FILE", path, 1), 0);
	cr_assert_eq(LOAD(&strict_spec, "--enable_foo"), 0, "%s", err);
	cr_expect_eq(cfg.port, 1212);
	cr_expect(cfg.enable_foo);
}

Test(cfg_file, config_flag_beats_env_variable, .init = tmp_setup,
     .fini = tmp_teardown)
{
	char a[128], b[128];

	write_file("a.json", "{\"port\": 1, \"name\": \"only-in-a\"}", a,
		   sizeof(a));
	write_file("b.json", "{\"port\": 2}", b, sizeof(b));
	cr_assert_eq(setenv("MCTEST_CONFIG_FILE", a, 1), 0);
	cr_assert_eq(LOAD(&strict_spec, "--config", b), 0, "%s", err);
	cr_expect_eq(cfg.port, 2);
	cr_expect_str_eq(cfg.name, "mc", "env-named file was loaded too");
}

Test(cfg_file, no_config_no_file, .init = tmp_setup, .fini = tmp_teardown)
{
	cr_assert_eq(LOAD(&strict_spec, "--port=7"), 0, "%s", err);
	cr_expect_eq(cfg.port, 7);
	cr_expect_null(cfg.config);
}

Test(cfg_file, load_errors_name_file_and_option, .init = tmp_setup,
     .fini = tmp_teardown)
{
	char path[128], flag[160];

	write_file("bad.json", "{\"port\": \"eighty\"}", path, sizeof(path));
	snprintf(flag, sizeof(flag), "--config=%s", path);
	cr_expect_neq(LOAD(&strict_spec, flag), 0);
	expect_err_has(path);
	expect_err_has("port");

	write_file("strict.json", "{\"surprise\": 1}", path, sizeof(path));
	snprintf(flag, sizeof(flag), "--config=%s", path);
	err[0] = '\0';
	cr_expect_eq(LOAD(&strict_spec, flag), MC_EBADCONFIG);
	expect_err_has("surprise");
	expect_err_has(path);

	snprintf(flag, sizeof(flag), "--config=%s/absent.json", tmpdir);
	err[0] = '\0';
	cr_expect_eq(LOAD(&strict_spec, flag), -ENOENT);
	expect_err_has("absent.json");
}

Test(cfg_file, load_reports_help, .init = tmp_setup, .fini = tmp_teardown)
{
	cr_assert_eq(LOAD(&strict_spec, "--port=5", "--help"), 0, "%s", err);
	cr_expect_eq(res.action, MC_CFG_HELP);
}

Test(cfg_file, env_error_stops_load, .init = tmp_setup, .fini = tmp_teardown)
{
	cr_assert_eq(setenv("MCTEST_RATIO", "2", 1), 0);
	cr_expect_neq(LOAD(&strict_spec, "--port=5"), 0);
	expect_err_has("ratio");
	expect_err_has("MCTEST_RATIO");
}

/* ---- output ---- */

static char *capture(void (*fn)(const struct mc_cfg_spec *, FILE *),
		     const struct mc_cfg_spec *spec)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_not_null(f);
	fn(spec, f);
	fclose(f);
	cr_assert_not_null(buf);
	return buf;
}

Test(cfg, help_lists_options)
{
	char *out = capture(mc_cfg_print_help, &strict_spec);

	cr_expect(strstr(out, "mctest") != NULL);
	cr_expect(strstr(out, "[FILE]") != NULL);
	for (size_t i = 0; i < strict_spec.n_opts; i++) {
		char want[64];

		snprintf(want, sizeof(want), "--%s ", topts[i].name);
		cr_expect(strstr(out, want) != NULL, "help lacks %s", want);
	}
	cr_expect(strstr(out, "listen_port") != NULL);
	cr_expect(strstr(out, "MCTEST_PORT") != NULL);
	cr_expect(strstr(out, "MCTEST_SECRET_TOKEN") != NULL);
	cr_expect(strstr(out, "--help") != NULL);
	free(out);
}

Test(cfg, doc_markdown_lists_options)
{
	char *out = capture(mc_cfg_doc_markdown, &strict_spec);

	for (size_t i = 0; i < strict_spec.n_opts; i++) {
		char want[64];

		snprintf(want, sizeof(want), "`--%s`", topts[i].name);
		cr_expect(strstr(out, want) != NULL, "doc lacks %s", want);
	}
	cr_expect(strstr(out, "`MCTEST_MAX_SIZE`") != NULL);
	cr_expect(strstr(out, "1..65535") != NULL);
	free(out);
}

static json_t *dump_to_json(char **text)
{
	size_t len = 0;
	FILE *f = open_memstream(text, &len);
	json_error_t jerr;
	json_t *root;

	cr_assert_not_null(f);
	mc_cfg_dump_json(&strict_spec, &cfg, f);
	fclose(f);
	root = json_loads(*text, 0, &jerr);
	cr_assert_not_null(root, "dump is not JSON: %s\n%s", jerr.text, *text);
	return root;
}

Test(cfg, dump_json_values)
{
	char *text = NULL;
	json_t *root;

	cr_assert_eq(PARSE(&strict_spec, "--port=99", "--name=dump",
			   "--enable_foo", "-v=2"),
		     0, "%s", err);
	root = dump_to_json(&text);
	cr_expect_eq(json_object_size(root), strict_spec.n_opts);
	cr_expect_eq(json_integer_value(json_object_get(root, "port")), 99);
	cr_expect_str_eq(json_string_value(json_object_get(root, "name")),
			 "dump");
	cr_expect(json_is_true(json_object_get(root, "enable_foo")));
	cr_expect(json_is_true(json_object_get(root, "feature")));
	cr_expect_eq(json_integer_value(json_object_get(root, "max_size")),
		     1LL << 30);
	cr_expect_eq(json_integer_value(json_object_get(root, "v")), 2);
	cr_expect(json_is_real(json_object_get(root, "ratio")));
	cr_expect(json_is_null(json_object_get(root, "config")));
	json_decref(root);
	free(text);
}

/*
 * --dump_config output, fed back as a config file, must give the same
 * configuration. Durations are the trap: the dump holds milliseconds but a
 * bare number in the file is read in the option's unit (seconds here).
 */
Test(cfg, dump_json_is_loadable)
{
	struct tcfg c2 = { 0 };
	char *text = NULL, *again, *ttl;
	json_t *root;

	cr_assert_eq(PARSE(&strict_spec, "--port=99", "--name=dump", "--ttl=2s",
			   "--max_size=3M", "--ratio=0.75", "--nofeature",
			   "-v=3"),
		     0, "%s", err);
	root = dump_to_json(&text);
	ttl = json_dumps(json_object_get(root, "ttl"), JSON_ENCODE_ANY);
	cr_assert_not_null(ttl);
	/* The dump as is: its nulls (unset strings) load back as unset. */
	cr_expect(json_is_null(json_object_get(root, "token")));
	again = json_dumps(root, 0);
	cr_assert_not_null(again);

	cr_assert_eq(mc_cfg_defaults(&strict_spec, &c2, err, sizeof(err)), 0);
	c2.token = strdup("set before");
	cr_expect_eq(mc_cfg_load_json(&strict_spec, &c2, again, strlen(again),
				      "dump", err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(c2.port, 99);
	cr_expect_str_eq(c2.name, "dump");
	cr_expect_eq(c2.max_size, 3ULL << 20);
	cr_expect_float_eq(c2.ratio, 0.75, 1e-12);
	cr_expect(!c2.feature);
	cr_expect_eq(c2.v, 3);
	cr_expect_eq(c2.ttl_ms, 2000,
		     "ttl of 2000 ms dumped as %s, read back as %llu ms", ttl,
		     (unsigned long long)c2.ttl_ms);
	cr_expect_null(c2.token);
	/* null is "unset" for strings only. */
	cr_expect_neq(mc_cfg_load_json(&strict_spec, &c2, "{\"port\": null}",
				       14, "dump", err, sizeof(err)),
		      0);
	cr_expect(strstr(err, "'port'") != NULL, "%s", err);
	mc_cfg_release(&strict_spec, &c2);
	free(ttl);
	free(again);
	json_decref(root);
	free(text);
}

Test(cfg, verbosity_level_mapping)
{
	cr_expect_eq(mc_cfg_verbosity_level(-1), MC_LOG_INFO);
	cr_expect_eq(mc_cfg_verbosity_level(0), MC_LOG_INFO);
	cr_expect_eq(mc_cfg_verbosity_level(1), MC_LOG_DEBUG);
	cr_expect_eq(mc_cfg_verbosity_level(2), MC_LOG_TRACE);
	cr_expect_eq(mc_cfg_verbosity_level(9), MC_LOG_TRACE);
}
