/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file metad_bench_opts.h
 * metad_bench's command line (metad_bench --help).
 */
#ifndef METAD_BENCH_OPTS_H
#define METAD_BENCH_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#define BENCH_MAX_URLS 8
#define BENCH_MAX_CLIENT_COUNTS 8
#define BENCH_MAX_CLIENTS 256

enum bench_op { OP_GET, OP_PUT, N_OPS };
extern const char *const bench_op_name[N_OPS];

struct bench_opts {
	char label[BENCH_MAX_URLS][32];
	const char *url[BENCH_MAX_URLS];
	unsigned n_urls;
	unsigned clients[BENCH_MAX_CLIENT_COUNTS], n_clients, max_clients;
	bool run_op[N_OPS];
	double seconds;
	uint64_t ops, warmup, value_size, keys;
	int client_cpu, server_cpu; /* -1: not pinned */
	bool no_raw; /* skip the raw TCP baseline */
};

/** Parse argv (exits 0 on --help); -EINVAL after printing the usage. */
int bench_opts_parse(int argc, char **argv, struct bench_opts *o);

#endif
