/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Table-driven configuration (see mc_cfg.h for the syntax and precedence).
 * Every layer ends in set_value(), so a value is checked the same way
 * whether it came from a file, the environment or argv, and every error
 * names the option and where the value came from.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "mc_cfg.h"
#include "mc_log.h"
#include "mc_parse.h"
#include "mooncake/mc_err.h"
#include "mooncake/mc_version.h"

#define FIELD(cfg, opt, type) ((type *)((char *)(cfg) + (opt)->offset))

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
	MC_PRINTF(4, 5);

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* Names compare with '-' and '_' treated alike, as --rpc-port. */
static bool name_eq(const char *a, size_t alen, const char *b)
{
	size_t i;

	for (i = 0; i < alen && b[i]; i++) {
		char x = a[i] == '-' ? '_' : a[i];
		char y = b[i] == '-' ? '_' : b[i];
		if (x != y)
			return false;
	}
	return i == alen && b[i] == '\0';
}

static const struct mc_opt *find_opt(const struct mc_cfg_spec *spec,
				     const char *name, size_t len,
				     bool *is_alias)
{
	for (size_t i = 0; i < spec->n_opts; i++) {
		const struct mc_opt *o = &spec->opts[i];
		if (name_eq(name, len, o->name)) {
			*is_alias = false;
			return o;
		}
		if (o->alias && name_eq(name, len, o->alias)) {
			*is_alias = true;
			return o;
		}
	}
	return NULL;
}

static const char *type_name(enum mc_opt_type t)
{
	switch (t) {
	case MC_OPT_BOOL:
		return "bool";
	case MC_OPT_INT:
		return "int";
	case MC_OPT_SIZE:
		return "size";
	case MC_OPT_DOUBLE:
		return "double";
	case MC_OPT_STRING:
		return "string";
	case MC_OPT_DURATION:
		return "duration";
	case MC_OPT_VERBOSITY:
		return "int";
	}
	return "?";
}

static bool bounded(const struct mc_opt *o)
{
	return o->min != 0 || o->max != 0;
}

static int set_value(const struct mc_opt *o, void *cfg, const char *text,
		     const char *src, char *err, size_t errlen)
{
	int64_t i64 = 0;
	uint64_t u64 = 0;
	double d = 0;
	bool b = false;
	int rc = 0;

	switch (o->type) {
	case MC_OPT_BOOL:
		rc = mc_parse_bool(text, &b);
		break;
	case MC_OPT_INT:
	case MC_OPT_VERBOSITY:
		rc = mc_parse_i64(text, &i64);
		d = (double)i64;
		break;
	case MC_OPT_SIZE:
		rc = mc_parse_size(text, &u64);
		d = (double)u64;
		break;
	case MC_OPT_DURATION:
		rc = mc_parse_duration_ms(text, o->unit_ms ? o->unit_ms : 1,
					  &u64);
		d = (double)u64;
		break;
	case MC_OPT_DOUBLE:
		rc = mc_parse_double(text, &d);
		break;
	case MC_OPT_STRING:
		break;
	}
	if (rc)
		return fail(err, errlen, rc,
			    "%s: invalid value '%s' for '%s' (expected %s)",
			    src, text, o->name, type_name(o->type));
	if (bounded(o) && o->type != MC_OPT_BOOL && o->type != MC_OPT_STRING &&
	    (d < o->min || d > o->max))
		return fail(
			err, errlen, -ERANGE,
			"%s: value '%s' for '%s' is out of range [%.15g, %.15g]%s",
			src, text, o->name, o->min, o->max,
			o->type == MC_OPT_DURATION ? " ms" : "");

	switch (o->type) {
	case MC_OPT_BOOL:
		*FIELD(cfg, o, bool) = b;
		break;
	case MC_OPT_INT:
		*FIELD(cfg, o, int64_t) = i64;
		break;
	case MC_OPT_VERBOSITY:
		*FIELD(cfg, o, int) = (int)(i64 < 0 ? 0 : i64 > 9 ? 9 : i64);
		break;
	case MC_OPT_SIZE:
	case MC_OPT_DURATION:
		*FIELD(cfg, o, uint64_t) = u64;
		break;
	case MC_OPT_DOUBLE:
		*FIELD(cfg, o, double) = d;
		break;
	case MC_OPT_STRING: {
		char **slot = FIELD(cfg, o, char *);
		char *copy = strdup(text);
		if (!copy)
			return fail(err, errlen, -ENOMEM, "out of memory");
		free(*slot);
		*slot = copy;
		break;
	}
	}
	return 0;
}

int mc_cfg_defaults(const struct mc_cfg_spec *spec, void *cfg, char *err,
		    size_t errlen)
{
	for (size_t i = 0; i < spec->n_opts; i++) {
		const struct mc_opt *o = &spec->opts[i];
		int rc;

		if (!o->def) {
			MC_BUG_ON(o->type != MC_OPT_STRING);
			continue;
		}
		rc = set_value(o, cfg, o->def, "default", err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

int mc_cfg_set(const struct mc_cfg_spec *spec, void *cfg, const char *name,
	       const char *value, char *err, size_t errlen)
{
	bool alias;
	const struct mc_opt *o = find_opt(spec, name, strlen(name), &alias);

	if (!o)
		return fail(err, errlen, -EINVAL, "unknown option '%s'", name);
	return set_value(o, cfg, value, "set", err, errlen);
}

/* A string option back to its default (NULL when it has none). */
static int unset_string(const struct mc_opt *o, void *cfg, const char *src,
			char *err, size_t errlen)
{
	char **slot = FIELD(cfg, o, char *);

	if (o->def)
		return set_value(o, cfg, o->def, src, err, errlen);
	free(*slot);
	*slot = NULL;
	return 0;
}

/* A JSON scalar as the text the flag parser would see. */
static int json_scalar_text(json_t *v, char *buf, size_t len)
{
	switch (json_typeof(v)) {
	case JSON_STRING:
		snprintf(buf, len, "%s", json_string_value(v));
		return strlen(json_string_value(v)) < len ? 0 : -E2BIG;
	case JSON_INTEGER:
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT,
			 json_integer_value(v));
		return 0;
	case JSON_REAL:
		snprintf(buf, len, "%.17g", json_real_value(v));
		return 0;
	case JSON_TRUE:
		snprintf(buf, len, "true");
		return 0;
	case JSON_FALSE:
		snprintf(buf, len, "false");
		return 0;
	default:
		return -EINVAL;
	}
}

static bool is_foreign(const struct mc_cfg_spec *spec, const char *key)
{
	for (const char *const *f = spec->foreign; f && *f; f++)
		if (!strcmp(*f, key))
			return true;
	return false;
}

int mc_cfg_load_json(const struct mc_cfg_spec *spec, void *cfg,
		     const char *text, size_t len, const char *source,
		     char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root, *val;
	const char *key;
	char src[256], buf[4096];
	int rc = 0;

	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return fail(err, errlen, MC_EBADCONFIG,
			    "%s: invalid JSON at line %d column %d: %s", source,
			    jerr.line, jerr.column, jerr.text);
	if (!json_is_object(root)) {
		json_decref(root);
		return fail(err, errlen, MC_EBADCONFIG,
			    "%s: expected a JSON object at the top level",
			    source);
	}
	json_object_foreach(root, key, val) {
		bool alias;
		const struct mc_opt *o =
			find_opt(spec, key, strlen(key), &alias);

		if (!o) {
			if (spec->strict) {
				rc = fail(err, errlen, MC_EBADCONFIG,
					  "%s: unknown key '%s'", source, key);
				break;
			}
			if (is_foreign(spec, key))
				mc_log_debug("config",
					     "%s: '%s' is not ours: ignored",
					     source, key);
			else
				mc_log_warn("config",
					    "%s: ignoring unknown key '%s'",
					    source, key);
			continue;
		}
		snprintf(src, sizeof(src), "%s: key '%s'", source, key);
		if (json_is_null(val) && o->type == MC_OPT_STRING) {
			/* As --dump_config writes an unset string: unset. */
			rc = unset_string(o, cfg, src, err, errlen);
			if (rc)
				break;
			continue;
		}
		if (json_scalar_text(val, buf, sizeof(buf))) {
			rc = fail(err, errlen, MC_EBADCONFIG,
				  "%s: expected a %s value for '%s'", source,
				  type_name(o->type), key);
			break;
		}
		if (alias)
			mc_log_warn("config",
				    "%s: '%s' is deprecated, use '%s'", source,
				    key, o->name);
		rc = set_value(o, cfg, buf, src, err, errlen);
		if (rc)
			break;
	}
	json_decref(root);
	return rc;
}

int mc_cfg_load_file(const struct mc_cfg_spec *spec, void *cfg,
		     const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char *text = NULL;
	size_t cap = 0, len = 0;
	int rc;

	if (!f)
		return fail(err, errlen, -errno, "config file %s: %s", path,
			    mc_strerror(-errno));
	for (;;) {
		if (len == cap) {
			/* Config files are small; refuse anything absurd. */
			if (cap >= (16u << 20)) {
				fclose(f);
				free(text);
				return fail(
					err, errlen, -EFBIG,
					"config file %s: larger than 16 MiB",
					path);
			}
			cap = cap ? cap * 2 : 4096;
			char *n = realloc(text, cap);
			if (!n) {
				fclose(f);
				free(text);
				return fail(err, errlen, -ENOMEM,
					    "out of memory");
			}
			text = n;
		}
		size_t got = fread(text + len, 1, cap - len, f);
		len += got;
		if (got == 0)
			break;
	}
	rc = ferror(f) ? -EIO : 0;
	fclose(f);
	if (rc) {
		free(text);
		return fail(err, errlen, rc, "config file %s: read error",
			    path);
	}
	rc = mc_cfg_load_json(spec, cfg, text, len, path, err, errlen);
	free(text);
	return rc;
}

static void env_name(const struct mc_cfg_spec *spec, const struct mc_opt *o,
		     char *buf, size_t len)
{
	size_t n;

	if (o->env) {
		snprintf(buf, len, "%s", o->env);
		return;
	}
	if (!spec->env_prefix) {
		buf[0] = '\0';
		return;
	}
	n = (size_t)snprintf(buf, len, "%s", spec->env_prefix);
	for (const char *p = o->name; *p && n + 1 < len; p++)
		buf[n++] = (char)toupper((unsigned char)*p);
	buf[n < len ? n : len - 1] = '\0';
}

int mc_cfg_load_env(const struct mc_cfg_spec *spec, void *cfg, char *err,
		    size_t errlen)
{
	char name[128], src[160];

	for (size_t i = 0; i < spec->n_opts; i++) {
		const struct mc_opt *o = &spec->opts[i];
		const char *v;
		int rc;

		env_name(spec, o, name, sizeof(name));
		if (!name[0] || !(v = getenv(name)))
			continue;
		snprintf(src, sizeof(src), "environment %s", name);
		rc = set_value(o, cfg, v, src, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

/* One command-line token split into a flag name and an inline value. */
struct flag_tok {
	const char *name;
	size_t len;
	const char *value; /* after '=', or NULL */
};

static bool is_flag(const char *a)
{
	/* "-" alone and negative numbers are values, not flags. */
	return a[0] == '-' && a[1] != '\0' && !isdigit((unsigned char)a[1]);
}

static void split_flag(const char *a, struct flag_tok *t)
{
	const char *eq;

	a += (a[1] == '-') ? 2 : 1;
	eq = strchr(a, '=');
	t->name = a;
	t->len = eq ? (size_t)(eq - a) : strlen(a);
	t->value = eq ? eq + 1 : NULL;
}

static bool is_int_text(const char *s)
{
	int64_t v;
	return s && mc_parse_i64(s, &v) == 0;
}

int mc_cfg_parse_args(const struct mc_cfg_spec *spec, void *cfg, int argc,
		      char **argv, struct mc_cfg_result *res, char *err,
		      size_t errlen)
{
	bool only_positional = false;
	char src[160];

	res->action = MC_CFG_RUN;
	res->n_positional = 0;
	res->positional = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const struct mc_opt *o;
		struct flag_tok t;
		const char *value;
		bool alias = false;
		int rc;

		if (only_positional || !is_flag(a)) {
			if (res->n_positional >= spec->max_positional)
				return fail(err, errlen, -EINVAL,
					    "unexpected argument '%s'", a);
			if (!res->positional)
				res->positional = &argv[i];
			/* Flags may come anywhere, as with gflags and getopt
			 * ("rm --force KEY"): the argument moves down next to
			 * the others, over flags already parsed, so that the
			 * positionals share argv. */
			if (res->positional + res->n_positional != &argv[i]) {
				char **dst =
					res->positional + res->n_positional;
				char *arg = argv[i];

				memmove(dst + 1, dst,
					(size_t)(&argv[i] - dst) *
						sizeof(*dst));
				*dst = arg;
			}
			res->n_positional++;
			continue;
		}
		if (!strcmp(a, "--")) {
			only_positional = true;
			continue;
		}
		split_flag(a, &t);
		o = find_opt(spec, t.name, t.len, &alias);
		if (!o) {
			if (name_eq(t.name, t.len, "help") ||
			    name_eq(t.name, t.len, "h")) {
				res->action = MC_CFG_HELP;
				return 0;
			}
			if (name_eq(t.name, t.len, "version")) {
				res->action = MC_CFG_VERSION;
				return 0;
			}
			if (name_eq(t.name, t.len, "dump_config")) {
				res->action = MC_CFG_DUMP;
				continue;
			}
			if (name_eq(t.name, t.len, "help_markdown")) {
				res->action = MC_CFG_DOC;
				return 0;
			}
			/* gflags' --noflag form for booleans. */
			if (t.len > 2 && !strncmp(t.name, "no", 2) &&
			    !t.value) {
				o = find_opt(spec, t.name + 2, t.len - 2,
					     &alias);
				if (o && o->type == MC_OPT_BOOL) {
					*FIELD(cfg, o, bool) = false;
					continue;
				}
			}
			return fail(err, errlen, -EINVAL,
				    "unknown flag '%.*s' (see --help)",
				    (int)t.len, t.name);
		}
		if (alias)
			mc_log_warn("config",
				    "flag '%.*s' is deprecated, use "
				    "'--%s'",
				    (int)t.len, t.name, o->name);
		value = t.value;
		if (!value) {
			const char *next = i + 1 < argc ? argv[i + 1] : NULL;
			if (o->type == MC_OPT_BOOL) {
				value = "true";
				if (next && (!strcmp(next, "true") ||
					     !strcmp(next, "false")))
					value = argv[++i];
			} else if (o->type == MC_OPT_VERBOSITY) {
				value = is_int_text(next) ? argv[++i] : "1";
			} else if (next) {
				value = argv[++i];
			} else {
				return fail(err, errlen, -EINVAL,
					    "flag '--%s' needs a value",
					    o->name);
			}
		}
		snprintf(src, sizeof(src), "flag --%.*s", (int)t.len, t.name);
		rc = set_value(o, cfg, value, src, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

/* Find --<config_opt> in argv without applying anything else. */
static const char *scan_config_path(const struct mc_cfg_spec *spec, int argc,
				    char **argv)
{
	for (int i = 1; i < argc; i++) {
		struct flag_tok t;

		if (!strcmp(argv[i], "--"))
			break;
		if (!is_flag(argv[i]))
			continue;
		split_flag(argv[i], &t);
		if (!name_eq(t.name, t.len, spec->config_opt))
			continue;
		if (t.value)
			return t.value;
		return i + 1 < argc ? argv[i + 1] : NULL;
	}
	return NULL;
}

int mc_cfg_load(const struct mc_cfg_spec *spec, void *cfg, int argc,
		char **argv, struct mc_cfg_result *res, char *err,
		size_t errlen)
{
	const char *path = NULL;
	int rc;

	if (err && errlen)
		err[0] = '\0';
	rc = mc_cfg_defaults(spec, cfg, err, errlen);
	if (rc)
		return rc;
	if (spec->config_opt)
		path = scan_config_path(spec, argc, argv);
	if (!path && spec->config_env)
		path = getenv(spec->config_env);
	if (path && *path) {
		rc = mc_cfg_load_file(spec, cfg, path, err, errlen);
		if (rc)
			return rc;
	}
	rc = mc_cfg_load_env(spec, cfg, err, errlen);
	if (rc)
		return rc;
	return mc_cfg_parse_args(spec, cfg, argc, argv, res, err, errlen);
}

void mc_cfg_release(const struct mc_cfg_spec *spec, void *cfg)
{
	for (size_t i = 0; i < spec->n_opts; i++) {
		const struct mc_opt *o = &spec->opts[i];
		if (o->type == MC_OPT_STRING) {
			free(*FIELD(cfg, o, char *));
			*FIELD(cfg, o, char *) = NULL;
		}
	}
}

void mc_cfg_print_help(const struct mc_cfg_spec *spec, FILE *out)
{
	char env[128];

	fprintf(out,
		"Usage: %s [flags]%s%s\n%s\n\nFlags (gflags syntax: "
		"--name=value, --name value, -name value):\n",
		spec->prog, spec->positional_help ? " " : "",
		spec->positional_help ? spec->positional_help : "",
		spec->summary);
	for (size_t i = 0; i < spec->n_opts; i++) {
		const struct mc_opt *o = &spec->opts[i];
		env_name(spec, o, env, sizeof(env));
		fprintf(out, "  --%s (%s, default %s)%s%s%s%s\n      %s\n",
			o->name, type_name(o->type), o->def ? o->def : "unset",
			o->alias ? " alias --" : "", o->alias ? o->alias : "",
			env[0] ? " env " : "", env, o->help);
	}
	fprintf(out, "  --help, --version, --dump_config\n");
}

void mc_cfg_dump_json(const struct mc_cfg_spec *spec, const void *cfg,
		      FILE *out)
{
	json_t *root = json_object();
	char *text;

	for (size_t i = 0; i < spec->n_opts; i++) {
		const struct mc_opt *o = &spec->opts[i];
		const void *p = (const char *)cfg + o->offset;
		json_t *v = NULL;

		switch (o->type) {
		case MC_OPT_BOOL:
			v = json_boolean(*(const bool *)p);
			break;
		case MC_OPT_INT:
			v = json_integer(*(const int64_t *)p);
			break;
		case MC_OPT_VERBOSITY:
			v = json_integer(*(const int *)p);
			break;
		case MC_OPT_SIZE:
			/* Sizes beyond JSON's integers stay exact as text. */
			if (*(const uint64_t *)p <= INT64_MAX)
				v = json_integer((json_int_t) *
						 (const uint64_t *)p);
			else
				v = json_sprintf("%" PRIu64,
						 *(const uint64_t *)p);
			break;
		case MC_OPT_DURATION:
			/* With its unit, so that the dump loads back as is. */
			v = json_sprintf("%" PRIu64 "ms", *(const uint64_t *)p);
			break;
		case MC_OPT_DOUBLE:
			v = json_real(*(const double *)p);
			break;
		case MC_OPT_STRING:
			v = *(char *const *)p ? json_string(*(char *const *)p) :
						json_null();
			break;
		}
		json_object_set_new(root, o->name, v);
	}
	text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (text)
		fprintf(out, "%s\n", text);
	free(text);
	json_decref(root);
}

void mc_cfg_doc_markdown(const struct mc_cfg_spec *spec, FILE *out)
{
	char env[128];

	fprintf(out, "### `%s`\n\n%s\n\n", spec->prog, spec->summary);
	fprintf(out, "| flag / JSON key | type | default | environment | "
		     "description |\n|---|---|---|---|---|\n");
	for (size_t i = 0; i < spec->n_opts; i++) {
		const struct mc_opt *o = &spec->opts[i];
		env_name(spec, o, env, sizeof(env));
		fprintf(out, "| `--%s`%s%s%s | %s | %s%s%s | %s%s%s | %s",
			o->name, o->alias ? " (deprecated alias `--" : "",
			o->alias ? o->alias : "", o->alias ? "`)" : "",
			type_name(o->type), o->def ? "`" : "",
			o->def ? (*o->def ? o->def : "\"\"") : "unset",
			o->def ? "`" : "", env[0] ? "`" : "", env,
			env[0] ? "`" : "", o->help);
		if (bounded(o))
			fprintf(out, " Range %.15g..%.15g.", o->min, o->max);
		fprintf(out, " |\n");
	}
	fprintf(out, "\n");
}

int mc_cfg_verbosity_level(int v)
{
	if (v <= 0)
		return MC_LOG_INFO;
	return v == 1 ? MC_LOG_DEBUG : MC_LOG_TRACE;
}
