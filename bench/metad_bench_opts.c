/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metad_bench's command line: getopt_long, the list-valued flags
 * (--clients 1,8, --cases get,put), and defaults.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "mc_parse.h"
#include "metad_bench_opts.h"
#include "raw_tcp.h"

const char *const bench_op_name[N_OPS] = { "GET", "PUT" };

static void usage(FILE *f)
{
	fprintf(f,
		"usage: metad_bench [--url [LABEL=]URL]... [options]\n"
		"  --url [LABEL=]URL  metadata endpoint, e.g. "
		"memory=http://127.0.0.1:8080/metadata\n"
		"                     (repeatable; none: raw TCP only)\n"
		"  --clients LIST     client thread counts (default 1,8)\n"
		"  --seconds S        per case (default 2)\n"
		"  --ops N            per client thread instead of --seconds\n"
		"  --warmup N         unrecorded ops per client (default 200)\n"
		"  --value_size B     value bytes (default 300, a segment "
		"descriptor)\n"
		"  --keys N           distinct keys per client (default 64)\n"
		"  --cases LIST       get,put (default both)\n"
		"  --pin C,S          run client threads on CPU C and the raw "
		"TCP server on S\n"
		"                     (pin the metadata server to S yourself, "
		"e.g. taskset)\n"
		"  --no_raw           skip the raw TCP baseline (no ratios)\n");
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	int64_t v;

	if (mc_parse_i64(s, &v) || v < 0 || (uint64_t)v < lo ||
	    (uint64_t)v > hi)
		return -EINVAL;
	*out = (uint64_t)v;
	return 0;
}

/* Call fn on each comma-separated item of list (at most 63 bytes each). */
static int each_item(const char *list,
		     int (*fn)(struct bench_opts *, const char *),
		     struct bench_opts *o)
{
	char item[64];

	while (*list) {
		const char *end = strchr(list, ',');
		size_t n = end ? (size_t)(end - list) : strlen(list);

		if (n == 0 || n >= sizeof(item))
			return -EINVAL;
		memcpy(item, list, n);
		item[n] = '\0';
		if (fn(o, item))
			return -EINVAL;
		list += n + (end != NULL);
	}
	return 0;
}

static int add_clients(struct bench_opts *o, const char *s)
{
	uint64_t v;

	if (o->n_clients == BENCH_MAX_CLIENT_COUNTS ||
	    parse_u64(s, 1, BENCH_MAX_CLIENTS, &v))
		return -EINVAL;
	o->clients[o->n_clients++] = (unsigned)v;
	if (v > o->max_clients)
		o->max_clients = (unsigned)v;
	return 0;
}

static int add_case(struct bench_opts *o, const char *s)
{
	for (int i = 0; i < N_OPS; i++) {
		if (!strcasecmp(s, bench_op_name[i])) {
			o->run_op[i] = true;
			return 0;
		}
	}
	return -EINVAL;
}

static int parse_pin(struct bench_opts *o, const char *s)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	char *end;
	long c, v;

	errno = 0;
	c = strtol(s, &end, 10);
	if (end == s || *end != ',')
		return -EINVAL;
	s = end + 1;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || c < 0 || v < 0 || c >= cpus ||
	    v >= cpus)
		return -EINVAL;
	o->client_cpu = (int)c;
	o->server_cpu = (int)v;
	return 0;
}

static int add_url(struct bench_opts *o, const char *arg)
{
	const char *eq = strchr(arg, '=');
	char *label;
	size_t n;

	if (o->n_urls == BENCH_MAX_URLS)
		return -EINVAL;
	label = o->label[o->n_urls];
	if (strncmp(arg, "http", 4) != 0 && eq) {
		n = (size_t)(eq - arg);
		if (n == 0 || n >= sizeof(o->label[0]))
			return -EINVAL;
		snprintf(label, sizeof(o->label[0]), "%.*s", (int)n, arg);
		arg = eq + 1;
	} else {
		snprintf(label, sizeof(o->label[0]), "metad");
	}
	o->url[o->n_urls++] = arg;
	return 0;
}

int bench_opts_parse(int argc, char **argv, struct bench_opts *o)
{
	static const struct option lo[] = {
		{ "url", required_argument, NULL, 'u' },
		{ "clients", required_argument, NULL, 'c' },
		{ "seconds", required_argument, NULL, 's' },
		{ "ops", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "value_size", required_argument, NULL, 'v' },
		{ "keys", required_argument, NULL, 'k' },
		{ "cases", required_argument, NULL, 'C' },
		{ "pin", required_argument, NULL, 'p' },
		{ "no_raw", no_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bool any_case = false;
	int c, li = 0, rc = 0;

	*o = (struct bench_opts){ .seconds = 2,
				  .warmup = 200,
				  .value_size = 300,
				  .keys = 64,
				  .client_cpu = -1,
				  .server_cpu = -1 };
	while (!rc && (c = getopt_long(argc, argv, "", lo, &li)) != -1) {
		switch (c) {
		case 'u':
			rc = add_url(o, optarg);
			break;
		case 'c':
			o->n_clients = o->max_clients = 0;
			rc = each_item(optarg, add_clients, o);
			break;
		case 's':
			rc = mc_parse_double(optarg, &o->seconds);
			if (!rc && (o->seconds <= 0 || o->seconds > 3600))
				rc = -EINVAL;
			break;
		case 'n':
			rc = parse_u64(optarg, 1, UINT64_MAX >> 1, &o->ops);
			break;
		case 'w':
			rc = parse_u64(optarg, 0, UINT64_MAX >> 1, &o->warmup);
			break;
		case 'v':
			rc = mc_parse_size(optarg, &o->value_size);
			if (!rc && o->value_size > RAW_TCP_MAX_MSG / 2)
				rc = -EINVAL;
			break;
		case 'k':
			rc = parse_u64(optarg, 1, 1u << 20, &o->keys);
			break;
		case 'C':
			any_case = true;
			memset(o->run_op, 0, sizeof(o->run_op));
			rc = each_item(optarg, add_case, o);
			break;
		case 'p':
			rc = parse_pin(o, optarg);
			break;
		case 'R':
			o->no_raw = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			rc = -EINVAL;
		}
		if (rc && c != '?')
			fprintf(stderr, "metad_bench: bad value for --%s: %s\n",
				lo[li].name, optarg);
	}
	if (rc || optind != argc) {
		usage(stderr);
		return -EINVAL;
	}
	if (!o->n_clients) {
		o->clients[0] = 1;
		o->clients[1] = 8;
		o->n_clients = 2;
		o->max_clients = 8;
	}
	if (!any_case)
		o->run_op[OP_GET] = o->run_op[OP_PUT] = true;
	return 0;
}
