/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metad_cli: drives a metadata service through the C client
 * (libte/meta/meta_http.h) for the integration tests.
 *
 *   metad_cli URL get KEY            print the value
 *   metad_cli URL put KEY VALUE
 *   metad_cli URL del KEY
 *   metad_cli URL write-seq PREFIX N  PUT PREFIX<i> for i < N, print "ack i"
 *                                     after each acknowledged PUT
 *   metad_cli URL stress CLIENTS OPS  mixed operations from CLIENTS threads,
 *                                     then check every write is accounted for
 *
 * With MOONCAKE_AUTH_TOKEN_FILE set, requests are signed with that token.
 *
 * Exit status: 0 success, 3 not found, 4 rpc_meta conflict, 1 other error,
 * 2 usage; the error message (URL and status) goes to stderr.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_auth.h"
#include "meta/meta_http.h"
#include "mooncake/mc_err.h"

#define KEYS_PER_CLIENT 64
#define SHARED_KEYS 4

struct stress {
	struct te_meta_http *c;
	unsigned id;
	unsigned ops;
	unsigned puts, gets, dels, errors;
	int version[KEYS_PER_CLIENT]; /* -1: absent, else version number */
};

static atomic_int shared_winner[SHARED_KEYS];

static int exit_for(int rc)
{
	if (rc == 0)
		return 0;
	if (rc == -ENOENT)
		return 3;
	if (rc == MC_EMETACONFLICT)
		return 4;
	return 1;
}

static void fmt_key(char *buf, size_t len, unsigned client, unsigned i)
{
	snprintf(buf, len, "stress/c%u/k%u:%%/x", client, i);
}

static void fmt_val(char *buf, size_t len, unsigned client, unsigned i,
		    int version)
{
	snprintf(buf, len, "{\"client\":%u,\"key\":%u,\"version\":%d}", client,
		 i, version);
}

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void mismatch(struct stress *st, const char *what, const char *key)
{
	fprintf(stderr, "client %u: %s for %s\n", st->id, what, key);
	st->errors++;
}

static void stress_one(struct stress *st, uint64_t *rnd)
{
	char key[128], val[256], err[512];
	unsigned i = (unsigned)(next_rand(rnd) % KEYS_PER_CLIENT);
	unsigned op = (unsigned)(next_rand(rnd) % 100);
	char *got;
	size_t len;
	int rc;

	fmt_key(key, sizeof(key), st->id, i);
	if (op < 45) {
		int v = st->version[i] + 1;
		fmt_val(val, sizeof(val), st->id, i, v);
		rc = te_meta_http_put(st->c, key, val, strlen(val), err,
				      sizeof(err));
		if (rc)
			mismatch(st, err, key);
		else
			st->version[i] = v;
		st->puts++;
	} else if (op < 80) {
		rc = te_meta_http_get(st->c, key, &got, &len, err, sizeof(err));
		if (st->version[i] < 0 && rc != -ENOENT)
			mismatch(st, "expected 404", key);
		if (st->version[i] >= 0) {
			fmt_val(val, sizeof(val), st->id, i, st->version[i]);
			if (rc || strcmp(got, val))
				mismatch(st, "stale or missing value", key);
		}
		if (!rc)
			free(got);
		st->gets++;
	} else if (op < 97) {
		rc = te_meta_http_del(st->c, key, err, sizeof(err));
		if (rc != (st->version[i] >= 0 ? 0 : -ENOENT))
			mismatch(st, "unexpected DELETE result", key);
		if (!rc)
			st->version[i] = -1;
		st->dels++;
	} else {
		/* Exclusive rpc_meta keys: exactly one client may win each. */
		unsigned k = i % SHARED_KEYS;
		snprintf(key, sizeof(key), "mooncake/rpc_meta/shared%u", k);
		snprintf(val, sizeof(val), "{\"winner\":%u}", st->id);
		rc = te_meta_http_put(st->c, key, val, strlen(val), err,
				      sizeof(err));
		if (rc == 0) {
			int expected = -1;
			if (!atomic_compare_exchange_strong(&shared_winner[k],
							    &expected,
							    (int)st->id) &&
			    expected != (int)st->id)
				mismatch(st, "second winner", key);
		} else if (rc != MC_EMETACONFLICT) {
			mismatch(st, err, key);
		}
		st->puts++;
	}
}

static void *stress_thread(void *arg)
{
	struct stress *st = arg;
	uint64_t rnd = 0x9e3779b97f4a7c15ULL * (st->id + 1);

	for (unsigned n = 0; n < st->ops; n++)
		stress_one(st, &rnd);
	return NULL;
}

/* After the run, the service must hold exactly what each client last did. */
static unsigned verify(struct te_meta_http *c, struct stress *st,
		       unsigned clients)
{
	char key[128], val[256], err[512];
	unsigned bad = 0;
	char *got;
	size_t len;
	int rc;

	for (unsigned t = 0; t < clients; t++) {
		for (unsigned i = 0; i < KEYS_PER_CLIENT; i++) {
			fmt_key(key, sizeof(key), t, i);
			rc = te_meta_http_get(c, key, &got, &len, err,
					      sizeof(err));
			if (st[t].version[i] < 0) {
				bad += rc != -ENOENT;
			} else {
				fmt_val(val, sizeof(val), t, i,
					st[t].version[i]);
				bad += rc != 0 || strcmp(got, val) != 0;
			}
			if (!rc)
				free(got);
		}
	}
	for (unsigned k = 0; k < SHARED_KEYS; k++) {
		int w = atomic_load(&shared_winner[k]);
		snprintf(key, sizeof(key), "mooncake/rpc_meta/shared%u", k);
		rc = te_meta_http_get(c, key, &got, &len, err, sizeof(err));
		if (w < 0) {
			bad += rc != -ENOENT;
		} else {
			snprintf(val, sizeof(val), "{\"winner\":%d}", w);
			bad += rc != 0 || strcmp(got, val) != 0;
		}
		if (!rc)
			free(got);
	}
	return bad;
}

static int run_stress(struct te_meta_http *c, unsigned clients, unsigned ops)
{
	struct stress *st = calloc(clients, sizeof(*st));
	pthread_t *th = calloc(clients, sizeof(*th));
	unsigned puts = 0, gets = 0, dels = 0, errors = 0, bad;

	if (!st || !th)
		return 1;
	for (unsigned k = 0; k < SHARED_KEYS; k++)
		atomic_store(&shared_winner[k], -1);
	for (unsigned t = 0; t < clients; t++) {
		st[t].c = c;
		st[t].id = t;
		st[t].ops = ops;
		for (unsigned i = 0; i < KEYS_PER_CLIENT; i++)
			st[t].version[i] = -1;
		if (pthread_create(&th[t], NULL, stress_thread, &st[t])) {
			fprintf(stderr, "pthread_create failed\n");
			return 1;
		}
	}
	for (unsigned t = 0; t < clients; t++) {
		pthread_join(th[t], NULL);
		puts += st[t].puts;
		gets += st[t].gets;
		dels += st[t].dels;
		errors += st[t].errors;
	}
	bad = verify(c, st, clients);
	printf("{\"clients\":%u,\"ops\":%u,\"puts\":%u,\"gets\":%u,"
	       "\"dels\":%u,\"errors\":%u,\"final_mismatches\":%u}\n",
	       clients, clients * ops, puts, gets, dels, errors, bad);
	free(st);
	free(th);
	return errors || bad ? 1 : 0;
}

static int write_seq(struct te_meta_http *c, const char *prefix, long n)
{
	char key[512], val[128], err[512];
	int rc;

	for (long i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "%s%ld", prefix, i);
		snprintf(val, sizeof(val), "{\"seq\":%ld}", i);
		rc = te_meta_http_put(c, key, val, strlen(val), err,
				      sizeof(err));
		if (rc) {
			fprintf(stderr, "%s\n", err);
			return exit_for(rc);
		}
		printf("ack %ld\n", i);
		fflush(stdout);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct te_meta_http_cfg cfg = { 0 };
	struct te_meta_http *c;
	struct mc_auth_key key;
	bool have;
	char err[1024] = "";
	const char *cmd;
	char *val;
	size_t len;
	int rc;

	if (argc < 3) {
		fprintf(stderr, "usage: metad_cli URL get|put|del|write-seq|"
				"stress ...\n");
		return 2;
	}
	cfg.base_url = argv[1];
	cmd = argv[2];
	if (mc_auth_key_load_opt(getenv(MC_AUTH_ENV), &have, &key, err,
				 sizeof(err))) {
		fprintf(stderr, "metad_cli: %s\n", err);
		return 2;
	}
	cfg.auth = have ? &key : NULL;
	if (te_meta_http_create(&cfg, &c)) {
		fprintf(stderr, "bad URL %s\n", argv[1]);
		return 2;
	}
	if (!strcmp(cmd, "get") && argc == 4) {
		rc = te_meta_http_get(c, argv[3], &val, &len, err, sizeof(err));
		if (!rc) {
			fwrite(val, 1, len, stdout);
			free(val);
		}
	} else if (!strcmp(cmd, "put") && argc == 5) {
		rc = te_meta_http_put(c, argv[3], argv[4], strlen(argv[4]), err,
				      sizeof(err));
	} else if (!strcmp(cmd, "del") && argc == 4) {
		rc = te_meta_http_del(c, argv[3], err, sizeof(err));
	} else if (!strcmp(cmd, "write-seq") && argc == 5) {
		rc = write_seq(c, argv[3], strtol(argv[4], NULL, 10));
		te_meta_http_destroy(c);
		return rc;
	} else if (!strcmp(cmd, "stress") && argc == 5) {
		rc = run_stress(c, (unsigned)strtoul(argv[3], NULL, 10),
				(unsigned)strtoul(argv[4], NULL, 10));
		te_meta_http_destroy(c);
		return rc;
	} else {
		fprintf(stderr, "metad_cli: bad command line\n");
		te_meta_http_destroy(c);
		return 2;
	}
	if (rc)
		fprintf(stderr, "%s: %s\n", mc_err_name(rc), err);
	te_meta_http_destroy(c);
	return exit_for(rc);
}
