/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metad_bench: metadata GET and PUT ops/s and p50/p99 latency against
 * running HTTP metadata servers (mooncake_metad or any upstream-compatible
 * one), through the transfer engine's own client (te_meta_http, pooled
 * keep-alive connections), with 1 and N client threads. In the same run it
 * measures a raw loopback TCP ping-pong of the same wire sizes
 * (raw_tcp.h), and prints one markdown table with metad/raw ratios.
 *
 * Loopback only by intent; nothing here asserts a timing.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_run.h"
#include "meta_http.h"
#include "metad_bench_opts.h"
#include "mooncake/mc_err.h"
#include "raw_tcp.h"

/*
 * What te_meta_http and mooncake_metad put on the wire around a value,
 * measured with strace: a GET request is ~100 bytes and its response 110
 * bytes of headers before the value; a PUT request has ~150 bytes of
 * headers before the value and its response is ~120 bytes.
 */
#define HTTP_GET_REQ 100
#define HTTP_GET_RESP_HDR 110
#define HTTP_PUT_REQ_HDR 150
#define HTTP_PUT_RESP 120

struct row {
	enum bench_op op;
	unsigned clients;
	const char *server;
	struct bench_result r;
	const struct row *base; /* the raw TCP row to compare with */
};

/* Per-thread state of a metad case (err keeps neighbours' keys apart). */
struct meta_thread {
	char key[160];
	char *value;
	char err[256];
};

struct meta_ctx {
	struct te_meta_http *cli;
	const char *label;
	size_t value_size;
	uint64_t keys, epoch;
	struct meta_thread *t;
	pthread_mutex_t err_mu;
	char first_err[256];
};

struct raw_ctx {
	struct raw_conn **conn;
};

/* ---- metad cases ---- */

#define SEQ_HEAD "{\"seq\":\"0000000000000000\",\"pad\":\""
#define SEQ_OFF 8 /* where the 16 hex digits start in SEQ_HEAD */

/* A JSON object of exactly n bytes whose "seq" field value_stamp sets. */
static void value_init(char *v, size_t n)
{
	size_t head = sizeof(SEQ_HEAD) - 1;

	memset(v, 'x', n);
	if (n >= head + 2) {
		memcpy(v, SEQ_HEAD, head);
		v[n - 2] = '"';
		v[n - 1] = '}';
	}
	v[n] = '\0';
}

/* Make the value differ from any earlier one (else PUT is a no-op). */
static void value_stamp(char *v, size_t n, uint64_t stamp)
{
	size_t off = n >= sizeof(SEQ_HEAD) + 1 ? SEQ_OFF : 0;
	char hex[17];

	snprintf(hex, sizeof(hex), "%016" PRIx64, stamp);
	memcpy(v + off, hex, n - off < 16 ? n - off : 16);
}

static const char *meta_key(struct meta_ctx *m, unsigned t, uint64_t seq)
{
	snprintf(m->t[t].key, sizeof(m->t[t].key),
		 "mooncake/bench/%s/t%u/k%" PRIu64, m->label, t, seq % m->keys);
	return m->t[t].key;
}

static void meta_error(struct meta_ctx *m, unsigned t)
{
	pthread_mutex_lock(&m->err_mu);
	if (!m->first_err[0])
		snprintf(m->first_err, sizeof(m->first_err), "%s", m->t[t].err);
	pthread_mutex_unlock(&m->err_mu);
}

static int op_get(void *arg, unsigned t, uint64_t seq)
{
	struct meta_ctx *m = arg;
	char *val;
	size_t len;
	int rc;

	rc = te_meta_http_get(m->cli, meta_key(m, t, seq), &val, &len,
			      m->t[t].err, sizeof(m->t[t].err));
	if (!rc) {
		if (len != m->value_size) {
			snprintf(m->t[t].err, sizeof(m->t[t].err),
				 "GET %s: %zu bytes, expected %zu", m->t[t].key,
				 len, m->value_size);
			rc = -EBADMSG;
		}
		free(val);
	}
	if (rc)
		meta_error(m, t);
	return rc;
}

static int op_put(void *arg, unsigned t, uint64_t seq)
{
	struct meta_ctx *m = arg;
	char *v = m->t[t].value;
	int rc;

	value_stamp(v, m->value_size, (m->epoch << 40) | seq);
	rc = te_meta_http_put(m->cli, meta_key(m, t, seq), v, m->value_size,
			      m->t[t].err, sizeof(m->t[t].err));
	if (rc)
		meta_error(m, t);
	return rc;
}

static void meta_ctx_free(struct meta_ctx *m)
{
	if (m->t)
		for (unsigned i = 0; i < BENCH_MAX_CLIENTS; i++)
			free(m->t[i].value);
	free(m->t);
	te_meta_http_destroy(m->cli);
	pthread_mutex_destroy(&m->err_mu);
}

static int meta_ctx_init(struct meta_ctx *m, const struct bench_opts *o,
			 const char *label, const char *url)
{
	struct te_meta_http_cfg cfg = { .base_url = url,
					.max_idle = o->max_clients };
	int rc;

	*m = (struct meta_ctx){ .label = label,
				.value_size = o->value_size,
				.keys = o->keys };
	/* Stamps differ from those of any other run against the server. */
	m->epoch = ((uint64_t)getpid() & 0xffff) << 8;
	pthread_mutex_init(&m->err_mu, NULL);
	m->t = calloc(BENCH_MAX_CLIENTS, sizeof(*m->t));
	if (!m->t)
		return -ENOMEM;
	for (unsigned i = 0; i < o->max_clients; i++) {
		m->t[i].value = malloc(o->value_size + 1);
		if (!m->t[i].value)
			return -ENOMEM;
		value_init(m->t[i].value, o->value_size);
	}
	rc = te_meta_http_create(&cfg, &m->cli);
	if (rc)
		return rc;
	/* Every key a GET will read, once. */
	for (unsigned t = 0; t < o->max_clients; t++)
		for (uint64_t k = 0; k < o->keys; k++)
			if ((rc = op_put(m, t, k)))
				return rc;
	return 0;
}

/* ---- running and reporting ---- */

static int run_case(const struct bench_opts *o, unsigned clients,
		    bench_op_fn fn, void *arg, struct bench_result *r)
{
	struct bench_spec spec = {
		.threads = clients,
		.seconds = o->seconds,
		.ops = o->ops,
		.warmup = o->warmup,
		.cpu = o->client_cpu,
		.op = fn,
		.arg = arg,
	};

	return bench_run(&spec, r);
}

static int op_raw(void *arg, unsigned t, uint64_t seq)
{
	struct raw_ctx *x = arg;

	return raw_conn_call(x->conn[t]);
}

static int run_raw(const struct bench_opts *o, int port, enum bench_op op,
		   unsigned clients, struct bench_result *r)
{
	size_t req = op == OP_GET ? HTTP_GET_REQ :
				    HTTP_PUT_REQ_HDR + o->value_size;
	size_t resp = op == OP_GET ? HTTP_GET_RESP_HDR + o->value_size :
				     HTTP_PUT_RESP;
	struct raw_conn *conn[BENCH_MAX_CLIENTS] = { 0 };
	struct raw_ctx x = { .conn = conn };
	int rc = 0;

	for (unsigned i = 0; i < clients && !rc; i++)
		rc = raw_conn_open(port, req, resp, &conn[i]);
	if (!rc)
		rc = run_case(o, clients, op_raw, &x, r);
	for (unsigned i = 0; i < clients; i++)
		raw_conn_close(conn[i]);
	return rc;
}

static double ops_per_s(const struct bench_result *r)
{
	return r->secs > 0 ? (double)r->ops / r->secs : 0;
}

static double us(uint64_t ns)
{
	return (double)ns / 1000.0;
}

static const char raw_name[] = "raw TCP";

static void print_row(const struct row *w)
{
	uint64_t p50 = bench_hist_quantile(&w->r.hist, 0.50);
	uint64_t p99 = bench_hist_quantile(&w->r.hist, 0.99);

	printf("| %s | %s | %u | %.0f | %.1f | %.1f |", bench_op_name[w->op],
	       w->server, w->clients, ops_per_s(&w->r), us(p50), us(p99));
	if (w->base) {
		uint64_t b99 = bench_hist_quantile(&w->base->r.hist, 0.99);
		double b = ops_per_s(&w->base->r);

		printf(" %.2fx | %.1fx |", b > 0 ? ops_per_s(&w->r) / b : 0,
		       b99 ? (double)p99 / (double)b99 : 0);
	} else if (w->server == raw_name) {
		printf(" baseline | baseline |");
	} else {
		printf(" - | - |");
	}
	if (w->r.errors)
		printf(" %" PRIu64 " errors (%s)", w->r.errors,
		       mc_strerror(w->r.first_error));
	printf("\n");
}

static void print_header(const struct bench_opts *o)
{
	printf("Value %" PRIu64 " B. Wire sizes: GET ~%d B request, ~%" PRIu64
	       " B response; PUT ~%" PRIu64 " B request, ~%d B response "
	       "(raw TCP uses the same). ",
	       o->value_size, HTTP_GET_REQ, HTTP_GET_RESP_HDR + o->value_size,
	       HTTP_PUT_REQ_HDR + o->value_size, HTTP_PUT_RESP);
	if (o->ops)
		printf("%" PRIu64 " ops", o->ops);
	else
		printf("%.1f s", o->seconds);
	printf(" per client per case after %" PRIu64 " warm-up ops; %ld "
	       "CPUs online",
	       o->warmup, sysconf(_SC_NPROCESSORS_ONLN));
	if (o->client_cpu >= 0)
		printf("; clients on CPU %d, raw TCP server on CPU %d",
		       o->client_cpu, o->server_cpu);
	printf(".\n\n");
	printf("| op | server | clients | ops/s | p50 (us) | p99 (us) | "
	       "ops/s vs raw TCP | p99 vs raw TCP |\n"
	       "|---|---|---:|---:|---:|---:|---:|---:|\n");
}

/* One (op, clients) pair: raw TCP first, then each URL against it. */
static int run_pair(const struct bench_opts *o, struct meta_ctx *ctx, int port,
		    enum bench_op op, unsigned clients)
{
	struct row raw = { .op = op, .clients = clients, .server = raw_name };
	struct row w;
	int failed = 0, rc;

	if (!o->no_raw) {
		rc = run_raw(o, port, op, clients, &raw.r);
		if (rc) {
			fprintf(stderr, "raw TCP: %s\n", mc_strerror(rc));
			return rc;
		}
		print_row(&raw);
	}
	for (unsigned u = 0; u < o->n_urls; u++) {
		w = (struct row){ .op = op,
				  .clients = clients,
				  .server = o->label[u],
				  .base = o->no_raw ? NULL : &raw };
		ctx[u].epoch++;
		rc = run_case(o, clients, op == OP_GET ? op_get : op_put,
			      &ctx[u], &w.r);
		if (rc)
			return rc;
		print_row(&w);
		fflush(stdout);
		if (w.r.errors) {
			fprintf(stderr, "%s: %s\n", o->url[u],
				ctx[u].first_err);
			failed = MC_EHTTP;
		}
	}
	return failed;
}

static int run_all(const struct bench_opts *o, struct meta_ctx *ctx, int port)
{
	int failed = 0, rc;

	print_header(o);
	for (int op = 0; op < N_OPS; op++) {
		if (!o->run_op[op])
			continue;
		for (unsigned c = 0; c < o->n_clients; c++) {
			rc = run_pair(o, ctx, port, op, o->clients[c]);
			if (rc < 0 && rc != MC_EHTTP)
				return rc;
			if (rc)
				failed = rc;
		}
	}
	return failed;
}

int main(int argc, char **argv)
{
	struct meta_ctx ctx[BENCH_MAX_URLS] = { 0 };
	struct raw_server *srv = NULL;
	struct bench_opts o;
	unsigned u = 0;
	int port, rc;

	if (bench_opts_parse(argc, argv, &o))
		return 2;
	rc = raw_server_start(o.server_cpu, &srv, &port);
	if (rc) {
		fprintf(stderr, "metad_bench: raw TCP server: %s\n",
			mc_strerror(rc));
		return 1;
	}
	for (; u < o.n_urls; u++) {
		rc = meta_ctx_init(&ctx[u], &o, o.label[u], o.url[u]);
		if (rc) {
			fprintf(stderr, "metad_bench: %s: %s\n", o.url[u],
				ctx[u].first_err[0] ? ctx[u].first_err :
						      mc_strerror(rc));
			u++;
			goto out;
		}
	}
	rc = run_all(&o, ctx, port);
out:
	while (u--)
		meta_ctx_free(&ctx[u]);
	raw_server_stop(srv);
	return rc ? 1 : 0;
}
