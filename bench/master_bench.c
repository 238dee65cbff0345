/* SPDX-License-Identifier: Apache-2.0 */
/*
 * master_bench: the master alone over its RPC (common/rpc/master.proto),
 * with no data moved. It mounts a fake segment (1 TiB at 0x100000000,
 * endpoint "bench:1") so that allocations succeed without memory -- the
 * master never touches segment memory -- keeps its client alive with a
 * Ping every second, and measures from --procs client processes (fork),
 * each with its own connection and one call at a time:
 *
 *   put    PutStart + PutEnd of one key (the metadata of a put), or
 *          BatchPutStart + BatchPutEnd of --batch keys; fresh keys
 *   get    GetReplicaList of one key, or BatchGetReplicaList of --batch
 *   exist  ExistKey of one key, or BatchExistKey of --batch
 *   commit PutCommit of one key into space reserved ahead (a slot,
 *          docs/design.md "Reserved space for puts"): what a client's
 *          single put of a size it put before costs the master. A worker
 *          without a slot puts the usual way asking for two (PutStart
 *          with reserve, PutEnd); each PutCommit asks for one more. The
 *          master caps slots per client (--put_reserve_slots, 4) and the
 *          workers share one client, so with more than a few processes
 *          some puts are the usual two calls. Single form only.
 *
 * Gets and exists pick random keys among those loaded first. The load is
 * also the memory figure: the RSS of the master (--master_pid, from
 * /proc/PID/status) before and after putting --mem_keys keys of
 * --value_size bytes in batches.
 *
 * Every case is followed by a raw loopback TCP ping-pong with the same
 * bytes per call (bench/raw_tcp.h), the same processes and round trips,
 * so a latency reads against what the kernel and the VM cost alone.
 *
 * Loopback only by intent; nothing here asserts a timing.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "mc_daemon.h"
#include "mc_parse.h"
#include "mc_rpc_client.h"
#include "mooncake/mc_err.h"
#include "raw_tcp.h"

#define MB_MAX_PROCS 64
#define MB_MAX_LIST 16
#define MB_KEY_LEN 64
#define MB_ID_LEN 16
#define MB_RPC_TIMEOUT_MS 30000

struct mb_cfg {
	char *master_server_address;
	int64_t master_pid;
	char *procs;
	char *cases;
	char *forms;
	int64_t batch;
	double seconds;
	int64_t warmup;
	int64_t mem_keys;
	int64_t load_keys;
	uint64_t value_size;
	char *label;
	char *pin;
	bool no_raw;
	int64_t rpc_busy_poll_us;
	char *auth_token_file;
};

#define OPT(n, t, f, d, lo, hi, h)                                          \
	{                                                                   \
		.name = n, .type = t, .offset = offsetof(struct mb_cfg, f), \
		.def = d, .min = lo, .max = hi, .help = h                   \
	}

static const struct mc_opt mb_opts[] = {
	OPT("master_server_address", MC_OPT_STRING, master_server_address,
	    "127.0.0.1:50051", 0, 0,
	    "host:port of a mooncake_master of its own: the bench mounts a "
	    "fake segment there that no real client could use."),
	OPT("master_pid", MC_OPT_INT, master_pid, "0", 0, 4194304,
	    "The master's pid, for its RSS (0: no memory figure)."),
	OPT("procs", MC_OPT_STRING, procs, "1,4", 0, 0,
	    "Client process counts, comma-separated."),
	OPT("cases", MC_OPT_STRING, cases, "put,commit,get,exist", 0, 0,
	    "put, commit, get, exist (comma-separated; commit: single "
	    "form only)."),
	OPT("forms", MC_OPT_STRING, forms, "single,batch", 0, 0,
	    "single (one key per RPC), batch (--batch keys) or both."),
	OPT("batch", MC_OPT_INT, batch, "128", 1, 65536, "Keys per batch RPC."),
	OPT("seconds", MC_OPT_DOUBLE, seconds, "3", 0.1, 3600,
	    "Measured time per case."),
	OPT("warmup", MC_OPT_INT, warmup, "50", 0, 1000000,
	    "Unrecorded calls per process before each case."),
	OPT("mem_keys", MC_OPT_INT, mem_keys, "1000000", 0, 100000000,
	    "Keys put (batched) between the two RSS readings (0: none)."),
	OPT("load_keys", MC_OPT_INT, load_keys, "100000", 1, 100000000,
	    "Keys to load for get/exist when --mem_keys is 0."),
	OPT("value_size", MC_OPT_SIZE, value_size, "4KiB", 1, 1099511627776.0,
	    "Object size the puts declare."),
	OPT("label", MC_OPT_STRING, label, "sqlite", 0, 0,
	    "Names the master's configuration in the table."),
	OPT("pin", MC_OPT_STRING, pin, "", 0, 0,
	    "C,S: run the client processes on CPU C and the raw TCP server "
	    "on CPU S (pin the master to S yourself, e.g. taskset)."),
	OPT("no_raw", MC_OPT_BOOL, no_raw, "false", 0, 0,
	    "Skip the raw TCP baseline."),
	OPT("rpc_busy_poll_us", MC_OPT_INT, rpc_busy_poll_us, "200", 0, 10000,
	    "The RPC client's busy-polling window for answers (us, 0: "
	    "sleep at once), as libmooncake's rpc_busy_poll_us."),
	{ .name = "auth_token_file",
	  .env = "MOONCAKE_AUTH_TOKEN_FILE",
	  .type = MC_OPT_STRING,
	  .offset = offsetof(struct mb_cfg, auth_token_file),
	  .def = "",
	  .help = "The pool's token when the master has one (each "
		  "connection authenticates once, before the warm-up; the "
		  "raw TCP baseline is unauthenticated)." },
};

static const struct mc_cfg_spec mb_spec = {
	.prog = "master_bench",
	.summary = "Master RPC throughput and latency (no data movement), "
		   "and the master's memory per key.",
	.opts = mb_opts,
	.n_opts = sizeof(mb_opts) / sizeof(mb_opts[0]),
	.strict = true,
};

enum mb_op { OP_PUT, OP_GET, OP_EXIST, OP_COMMIT, N_OPS };
static const char *const op_name[N_OPS] = { "put", "get", "exist", "commit" };
#define MB_SLOTS 8

struct mb_case {
	enum mb_op op;
	bool batch;
	bool raw; /* the raw TCP ping-pong of the same bytes */
	bool load; /* the memory load: fixed keys, no time limit */
	unsigned n; /* keys per RPC */
	unsigned id;
	uint64_t warmup, dur_ns;
	uint64_t load_count; /* load: keys per process */
	uint64_t n_loaded; /* keys get/exist choose from */
	/* raw: bytes of each round trip (put: 2 round trips) */
	size_t req[2], resp[2];
	unsigned trips;
	int raw_port;
};

struct mb_res {
	uint64_t calls, errors, t0, t1;
	int first_error;
	size_t req[2], resp[2]; /* frame bytes seen, for the raw case */
	char msg[256];
	struct bench_hist hist;
};

struct mb_shared {
	struct mb_case c;
	struct mb_res res[MB_MAX_PROCS];
};

struct mb_ctx {
	const struct mb_cfg *cfg;
	uint8_t client_id[MB_ID_LEN];
	int client_cpu, server_cpu;
	int raw_port;
	struct mb_shared *sh;
	int tag; /* our pid: keeps our keys apart from other runs' */
	uint64_t n_loaded;
	bool auth; /* key holds the pool's key */
	struct mc_auth_key key;
};

/* An RPC client of the master, authenticating when the pool has a key. */
static int mb_client(const struct mb_ctx *x, unsigned tmo,
		     struct mc_rpc_client **out)
{
	int rc = mc_rpc_client_create(x->cfg->master_server_address, tmo, out);

	if (!rc && x->auth)
		mc_rpc_client_set_auth(*out, &x->key);
	return rc;
}

struct mb_lists {
	unsigned procs[MB_MAX_LIST], n_procs;
	bool op[N_OPS];
	bool form[2];
};

/* ---- lists ----------------------------------------------------------------- */

static int each_item(const char *list,
		     int (*fn)(struct mb_lists *, const char *),
		     struct mb_lists *l)
{
	char item[64];

	while (*list) {
		const char *end = strchr(list, ',');
		size_t n = end ? (size_t)(end - list) : strlen(list);

		if (n == 0 || n >= sizeof(item))
			return -EINVAL;
		memcpy(item, list, n);
		item[n] = '\0';
		if (fn(l, item))
			return -EINVAL;
		list += n + (end != NULL);
	}
	return 0;
}

static int add_procs(struct mb_lists *l, const char *s)
{
	int64_t v;

	if (l->n_procs == MB_MAX_LIST || mc_parse_i64(s, &v) || v < 1 ||
	    v > MB_MAX_PROCS)
		return -EINVAL;
	l->procs[l->n_procs++] = (unsigned)v;
	return 0;
}

static int add_case(struct mb_lists *l, const char *s)
{
	for (int i = 0; i < N_OPS; i++) {
		if (!strcmp(s, op_name[i])) {
			l->op[i] = true;
			return 0;
		}
	}
	return -EINVAL;
}

static int add_form(struct mb_lists *l, const char *s)
{
	if (!strcmp(s, "single"))
		l->form[0] = true;
	else if (!strcmp(s, "batch"))
		l->form[1] = true;
	else
		return -EINVAL;
	return 0;
}

static int parse_pin(const char *s, int *c, int *srv)
{
	char a[16], b[16];
	const char *comma = strchr(s, ',');
	int64_t x, y;

	*c = *srv = -1;
	if (!*s)
		return 0;
	if (!comma || (size_t)(comma - s) >= sizeof(a) ||
	    strlen(comma + 1) >= sizeof(b))
		return -EINVAL;
	memcpy(a, s, (size_t)(comma - s));
	a[comma - s] = '\0';
	memcpy(b, comma + 1, strlen(comma + 1) + 1);
	if (mc_parse_i64(a, &x) || mc_parse_i64(b, &y) || x < 0 || y < 0 ||
	    x > 1023 || y > 1023)
		return -EINVAL;
	*c = (int)x;
	*srv = (int)y;
	return 0;
}

/* ---- RPCs -------------------------------------------------------------------- */

struct mb_worker {
	struct mb_ctx *x;
	unsigned idx;
	struct mc_rpc_client *cli;
	struct raw_conn *raw[2];
	const struct mb_case *c;
	char (*keys)[MB_KEY_LEN];
	char **kp;
	uint64_t *sizes;
	uint64_t next, rnd;
	struct mb_res *r;
	char err[256];
	uint64_t slots[MB_SLOTS]; /* commit: slot ids held */
	unsigned n_slots;
	bool commit_sized; /* commit: a PutCommit's frame sizes noted */
};

/* rc: an errno or internal code (transport), or a store code when store. */
static void set_err_as(struct mb_worker *w, const char *what, int rc,
		       bool store)
{
	if (!w->err[0])
		snprintf(w->err, sizeof(w->err), "%s: %s", what,
			 store ? mc_store_strerror(rc) : mc_strerror(rc));
}

static void set_err(struct mb_worker *w, const char *what, int rc)
{
	set_err_as(w, what, rc, false);
}

static void set_store_err(struct mb_worker *w, const char *what, int rc)
{
	set_err_as(w, what, rc, true);
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t v = *s;

	v ^= v << 13;
	v ^= v >> 7;
	v ^= v << 17;
	*s = v;
	return v;
}

/* The bytes of a frame carrying msg. */
static size_t frame_len(const ProtobufCMessage *msg)
{
	return MC_RPC_HDR_LEN + protobuf_c_message_get_packed_size(msg);
}

static void note_sizes(struct mb_worker *w, unsigned trip,
		       const ProtobufCMessage *req,
		       const ProtobufCMessage *resp)
{
	w->r->req[trip] = frame_len(req);
	w->r->resp[trip] = frame_len(resp);
}

static void name_keys(struct mb_worker *w)
{
	const struct mb_case *c = w->c;
	int tag = w->x->tag;

	for (unsigned j = 0; j < c->n; j++) {
		if (c->load)
			snprintf(w->keys[j], MB_KEY_LEN, "mb/%d/L/%" PRIu64,
				 tag, w->idx * c->load_count + w->next++);
		else if (c->op == OP_PUT || c->op == OP_COMMIT)
			snprintf(w->keys[j], MB_KEY_LEN,
				 "mb/%d/c%u/p%u/%" PRIu64, tag, c->id, w->idx,
				 w->next++);
		else
			snprintf(w->keys[j], MB_KEY_LEN, "mb/%d/L/%" PRIu64,
				 tag, xorshift(&w->rnd) % c->n_loaded);
		w->kp[j] = w->keys[j];
		w->sizes[j] = w->x->cfg->value_size;
	}
}

static int call(struct mb_worker *w, uint16_t method,
		const ProtobufCMessage *req, ProtobufCMessage **resp,
		const char *what)
{
	int rc = mc_rpc_call(w->cli, method, req, resp);

	if (rc) {
		set_err(w, what, rc);
		return rc;
	}
	rc = mc_rpc_resp_code(*resp);
	if (rc)
		set_store_err(w, what, rc);
	return rc;
}

static void take_slots(struct mb_worker *w, Mcrpc__Slot **slots, size_t n)
{
	for (size_t i = 0; i < n && w->n_slots < MB_SLOTS; i++)
		w->slots[w->n_slots++] = slots[i]->id;
}

static int op_put(struct mb_worker *w, bool sizes)
{
	const struct mb_case *c = w->c;
	Mcrpc__PutStartRequest q = MCRPC__PUT_START_REQUEST__INIT;
	Mcrpc__ReplicateConfig rc_cfg = MCRPC__REPLICATE_CONFIG__INIT;
	Mcrpc__KeysRequest e = MCRPC__KEYS_REQUEST__INIT;
	Mcrpc__PutStartResponse *ps = NULL;
	Mcrpc__KeysResponse *pe = NULL;
	int rc;

	rc_cfg.replica_num = 1;
	q.client_id.data = w->x->client_id;
	q.client_id.len = MB_ID_LEN;
	q.n_keys = q.n_sizes = c->n;
	q.keys = w->kp;
	q.sizes = w->sizes;
	q.config = &rc_cfg;
	q.reserve = c->op == OP_COMMIT ? 2 : 0;
	rc = call(w,
		  c->batch ? MCRPC__METHOD__BATCH_PUT_START :
			     MCRPC__METHOD__PUT_START,
		  &q.base, (ProtobufCMessage **)&ps, "PutStart");
	if (!rc && ps->n_results != c->n) {
		set_err(w, "PutStart: wrong number of results", -EPROTO);
		rc = -EPROTO;
	}
	for (size_t i = 0; !rc && i < c->n; i++) {
		rc = ps->results[i]->code;
		if (rc)
			set_store_err(w, "PutStart", rc);
	}
	if (!rc && sizes)
		note_sizes(w, 0, &q.base, &ps->base);
	if (!rc)
		take_slots(w, ps->slots, ps->n_slots);
	if (ps)
		protobuf_c_message_free_unpacked(&ps->base, NULL);
	if (rc)
		return rc;
	e.client_id = q.client_id;
	e.n_keys = c->n;
	e.keys = w->kp;
	rc = call(w,
		  c->batch ? MCRPC__METHOD__BATCH_PUT_END :
			     MCRPC__METHOD__PUT_END,
		  &e.base, (ProtobufCMessage **)&pe, "PutEnd");
	if (!rc && pe->n_results != c->n) {
		set_err(w, "PutEnd: wrong number of results", -EPROTO);
		rc = -EPROTO;
	}
	for (size_t i = 0; !rc && i < c->n; i++) {
		rc = pe->results[i]->code;
		if (rc)
			set_store_err(w, "PutEnd", rc);
	}
	if (!rc && sizes)
		note_sizes(w, 1, &e.base, &pe->base);
	if (pe)
		protobuf_c_message_free_unpacked(&pe->base, NULL);
	return rc;
}

/* PutCommit into a held slot, or a put the usual way asking for slots. */
static int op_commit(struct mb_worker *w)
{
	Mcrpc__PutCommitRequest q = MCRPC__PUT_COMMIT_REQUEST__INIT;
	Mcrpc__PutCommitResponse *pc = NULL;
	int rc;

	if (!w->n_slots)
		return op_put(w, false);
	q.client_id.data = w->x->client_id;
	q.client_id.len = MB_ID_LEN;
	q.key = w->kp[0];
	q.slot = w->slots[--w->n_slots];
	q.reserve = 1;
	rc = call(w, MCRPC__METHOD__PUT_COMMIT, &q.base,
		  (ProtobufCMessage **)&pc, "PutCommit");
	if (!rc) {
		if (!w->commit_sized)
			note_sizes(w, 0, &q.base, &pc->base);
		w->commit_sized = true;
		take_slots(w, pc->slots, pc->n_slots);
	}
	if (pc)
		protobuf_c_message_free_unpacked(&pc->base, NULL);
	return rc;
}

static int op_get(struct mb_worker *w, bool sizes)
{
	const struct mb_case *c = w->c;
	Mcrpc__KeysRequest q = MCRPC__KEYS_REQUEST__INIT;
	Mcrpc__GetReplicaListResponse *r = NULL;
	int rc;

	q.client_id.data = w->x->client_id;
	q.client_id.len = MB_ID_LEN;
	q.n_keys = c->n;
	q.keys = w->kp;
	rc = call(w,
		  c->batch ? MCRPC__METHOD__BATCH_GET_REPLICA_LIST :
			     MCRPC__METHOD__GET_REPLICA_LIST,
		  &q.base, (ProtobufCMessage **)&r, "GetReplicaList");
	if (!rc && r->n_results != c->n) {
		set_err(w, "GetReplicaList: wrong number of results", -EPROTO);
		rc = -EPROTO;
	}
	for (size_t i = 0; !rc && i < c->n; i++) {
		rc = r->results[i]->code;
		if (!rc && r->results[i]->n_replicas < 1)
			rc = MC_STORE_REPLICA_IS_NOT_READY;
		if (rc)
			set_store_err(w, "GetReplicaList", rc);
	}
	if (!rc && sizes)
		note_sizes(w, 0, &q.base, &r->base);
	if (r)
		protobuf_c_message_free_unpacked(&r->base, NULL);
	return rc;
}

static int op_exist(struct mb_worker *w, bool sizes)
{
	const struct mb_case *c = w->c;
	Mcrpc__KeysRequest q = MCRPC__KEYS_REQUEST__INIT;
	Mcrpc__ExistResponse *r = NULL;
	int rc;

	q.client_id.data = w->x->client_id;
	q.client_id.len = MB_ID_LEN;
	q.n_keys = c->n;
	q.keys = w->kp;
	rc = call(w,
		  c->batch ? MCRPC__METHOD__BATCH_EXIST_KEY :
			     MCRPC__METHOD__EXIST_KEY,
		  &q.base, (ProtobufCMessage **)&r, "ExistKey");
	if (!rc && r->n_results != c->n) {
		set_err(w, "ExistKey: wrong number of results", -EPROTO);
		rc = -EPROTO;
	}
	for (size_t i = 0; !rc && i < c->n; i++) {
		if (r->results[i] != 1) {
			rc = r->results[i] < 0 ? r->results[i] :
						 MC_STORE_OBJECT_NOT_FOUND;
			set_store_err(w, "ExistKey", rc);
		}
	}
	if (!rc && sizes)
		note_sizes(w, 0, &q.base, &r->base);
	if (r)
		protobuf_c_message_free_unpacked(&r->base, NULL);
	return rc;
}

static int one_call(struct mb_worker *w, bool sizes)
{
	const struct mb_case *c = w->c;
	int rc = 0;

	if (c->raw) {
		for (unsigned t = 0; t < c->trips && !rc; t++)
			rc = raw_conn_call(w->raw[t]);
		if (rc)
			set_err(w, "raw TCP", rc);
		return rc;
	}
	name_keys(w);
	switch (c->op) {
	case OP_PUT:
		return op_put(w, sizes);
	case OP_GET:
		return op_get(w, sizes);
	case OP_COMMIT:
		return op_commit(w);
	default:
		return op_exist(w, sizes);
	}
}

/* ---- worker processes ---------------------------------------------------------- */

static int worker_setup(struct mb_worker *w)
{
	const struct mb_case *c = w->c;
	int rc;

	if (w->x->client_cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(w->x->client_cpu, &set);
		(void)sched_setaffinity(0, sizeof(set), &set);
	}
	w->keys = calloc(c->n, sizeof(*w->keys));
	w->kp = calloc(c->n, sizeof(*w->kp));
	w->sizes = calloc(c->n, sizeof(*w->sizes));
	if (!w->keys || !w->kp || !w->sizes)
		return -ENOMEM;
	w->rnd = 0x9e3779b97f4a7c15ull ^ ((uint64_t)(w->idx + 1) << 32) ^ c->id;
	if (c->raw) {
		for (unsigned t = 0; t < c->trips; t++) {
			rc = raw_conn_open(c->raw_port, c->req[t], c->resp[t],
					   &w->raw[t]);
			if (rc) {
				set_err(w, "raw TCP connect", rc);
				return rc;
			}
		}
		return 0;
	}
	rc = mb_client(w->x, MB_RPC_TIMEOUT_MS, &w->cli);
	if (rc)
		set_err(w, "master address", rc);
	else
		mc_rpc_client_set_busy_poll(
			w->cli, (unsigned)w->x->cfg->rpc_busy_poll_us);
	return rc;
}

static void worker_run(struct mb_worker *w)
{
	const struct mb_case *c = w->c;
	struct mb_res *r = w->r;
	uint64_t deadline, t;
	int rc;

	r->t0 = bench_now_ns();
	deadline = r->t0 + c->dur_ns;
	for (;;) {
		if (c->load && w->next >= c->load_count)
			break;
		t = bench_now_ns();
		rc = one_call(w, false);
		r->t1 = bench_now_ns();
		if (rc) {
			r->errors++;
			if (!r->first_error)
				r->first_error = rc;
			if (r->errors > 100)
				break;
		} else {
			r->calls++;
			bench_hist_add(&r->hist, r->t1 - t);
		}
		if (!c->load && r->t1 >= deadline)
			break;
	}
}

static MC_NORETURN void worker_main(struct mb_worker *w, int go_fd, int ack_fd)
{
	char b = 'E';
	int rc;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	rc = worker_setup(w);
	/* Warm-up; the first successful call also records the frame sizes. */
	for (uint64_t i = 0; !rc && i < w->c->warmup + 1; i++)
		rc = one_call(w, i == 0);
	if (!rc)
		b = 'R';
	if (write(ack_fd, &b, 1) != 1 || rc)
		goto out;
	if (read(go_fd, &b, 1) != 1)
		goto out;
	w->err[0] = '\0';
	worker_run(w);
out:
	if (w->err[0])
		snprintf(w->r->msg, sizeof(w->r->msg), "%s", w->err);
	if (rc && !w->r->first_error)
		w->r->first_error = rc;
	for (unsigned t = 0; t < 2; t++)
		if (w->raw[t])
			raw_conn_close(w->raw[t]);
	mc_rpc_client_destroy(w->cli);
	_exit(rc ? 1 : 0);
}

struct mb_row {
	double keys_s, calls_s;
	uint64_t p50, p99, errors, calls;
	double secs;
	char msg[256];
};

/* Fork procs workers for case c, start them together, wait for them. */
static int run_case(struct mb_ctx *x, const struct mb_case *c, unsigned procs,
		    struct mb_row *row)
{
	struct mb_shared *sh = x->sh;
	pid_t pid[MB_MAX_PROCS];
	int go[2], acks[2], failed = 0;
	struct bench_hist *h = calloc(1, sizeof(*h));
	uint64_t t0 = UINT64_MAX, t1 = 0;

	memset(row, 0, sizeof(*row));
	if (!h)
		return -ENOMEM;
	memset(sh, 0, sizeof(*sh));
	sh->c = *c;
	if (pipe(go)) {
		free(h);
		return -errno;
	}
	if (pipe(acks)) {
		close(go[0]);
		close(go[1]);
		free(h);
		return -errno;
	}
	fflush(NULL);
	for (unsigned i = 0; i < procs; i++) {
		pid[i] = fork();
		if (pid[i] < 0) {
			failed = -errno;
			procs = i;
			break;
		}
		if (pid[i] == 0) {
			struct mb_worker w = {
				.x = x, .idx = i, .c = &sh->c, .r = &sh->res[i]
			};

			close(go[1]);
			close(acks[0]);
			worker_main(&w, go[0], acks[1]);
		}
	}
	close(go[0]);
	close(acks[1]);
	for (unsigned i = 0; i < procs && !failed; i++) {
		char b = 0;

		if (read(acks[0], &b, 1) != 1 || b != 'R')
			failed = -EIO;
	}
	if (!failed) {
		char gos[MB_MAX_PROCS];

		memset(gos, 'G', sizeof(gos));
		if (write(go[1], gos, procs) != (ssize_t)procs)
			failed = -EIO;
	}
	close(go[1]); /* a worker still waiting reads EOF and leaves */
	close(acks[0]);
	for (unsigned i = 0; i < procs; i++)
		(void)waitpid(pid[i], NULL, 0);
	for (unsigned i = 0; i < procs; i++) {
		const struct mb_res *r = &sh->res[i];

		if (r->msg[0] && !row->msg[0])
			snprintf(row->msg, sizeof(row->msg), "%s", r->msg);
		row->errors += r->errors;
		row->calls += r->calls;
		bench_hist_merge(h, &r->hist);
		if (r->t0 && r->t0 < t0)
			t0 = r->t0;
		if (r->t1 > t1)
			t1 = r->t1;
	}
	if (failed || (row->errors && !row->calls)) {
		fprintf(stderr, "master_bench: %s%s %s: %s\n",
			c->raw ? "raw TCP for " : "", op_name[c->op],
			c->batch ? "batch" : "single",
			row->msg[0] ? row->msg : "a worker failed");
		free(h);
		return failed ? failed : -EIO;
	}
	row->secs = t1 > t0 ? (double)(t1 - t0) / 1e9 : 0;
	row->calls_s = row->secs > 0 ? (double)row->calls / row->secs : 0;
	row->keys_s = row->calls_s * c->n;
	row->p50 = bench_hist_quantile(h, 0.50);
	row->p99 = bench_hist_quantile(h, 0.99);
	free(h);
	return 0;
}

/* ---- the master's side: mount, ping, RSS ----------------------------------------- */

static int mount_fake(struct mb_ctx *x, struct mc_rpc_client *cli,
		      const uint8_t *seg_id)
{
	Mcrpc__Segment seg = MCRPC__SEGMENT__INIT;
	Mcrpc__MountSegmentRequest q = MCRPC__MOUNT_SEGMENT_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	int rc;

	seg.id.data = (uint8_t *)seg_id;
	seg.id.len = MB_ID_LEN;
	seg.name = "master_bench";
	seg.endpoint = "bench:1";
	seg.base_addr = 0x100000000ull;
	seg.size = 1ull << 40;
	seg.protocol = "tcp";
	seg.host_id = "master_bench";
	q.client_id.data = x->client_id;
	q.client_id.len = MB_ID_LEN;
	q.segment = &seg;
	rc = mc_rpc_call(cli, MCRPC__METHOD__MOUNT_SEGMENT, &q.base, &resp);
	if (rc) {
		fprintf(stderr, "master_bench: MountSegment at %s: %s\n",
			x->cfg->master_server_address, mc_strerror(rc));
		return rc;
	}
	rc = mc_rpc_resp_code(resp);
	if (rc)
		fprintf(stderr, "master_bench: MountSegment at %s: %s\n",
			x->cfg->master_server_address, mc_store_strerror(rc));
	protobuf_c_message_free_unpacked(resp, NULL);
	return rc;
}

static void unmount_fake(struct mb_ctx *x, struct mc_rpc_client *cli,
			 const uint8_t *seg_id)
{
	Mcrpc__UnmountSegmentRequest q = MCRPC__UNMOUNT_SEGMENT_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;

	q.client_id.data = x->client_id;
	q.client_id.len = MB_ID_LEN;
	q.segment_id.data = (uint8_t *)seg_id;
	q.segment_id.len = MB_ID_LEN;
	if (!mc_rpc_call(cli, MCRPC__METHOD__UNMOUNT_SEGMENT, &q.base, &resp))
		protobuf_c_message_free_unpacked(resp, NULL);
}

/* A process that pings for our client id every second until killed:
 * the master drops a client silent for --client_ttl (10 s). */
static pid_t start_pinger(struct mb_ctx *x)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid != 0)
		return pid;
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	struct mc_rpc_client *cli;

	if (mb_client(x, 5000, &cli))
		_exit(1);
	for (;;) {
		Mcrpc__PingRequest q = MCRPC__PING_REQUEST__INIT;
		ProtobufCMessage *resp = NULL;

		q.client_id.data = x->client_id;
		q.client_id.len = MB_ID_LEN;
		if (!mc_rpc_call(cli, MCRPC__METHOD__PING, &q.base, &resp))
			protobuf_c_message_free_unpacked(resp, NULL);
		sleep(1);
	}
}

/* Resident memory of a process, bytes (/proc/PID/status): all of it, and
 * its anonymous, file-backed and shared-memory parts. */
struct mb_rss {
	uint64_t total, anon, file, shmem;
};

/* false when pid is 0 or unreadable. */
static bool rss_of(int64_t pid, struct mb_rss *r)
{
	char path[64], line[256];
	uint64_t kb;
	FILE *f;

	memset(r, 0, sizeof(*r));
	if (pid <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%" PRId64 "/status", pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "VmRSS: %" SCNu64 " kB", &kb) == 1)
			r->total = kb * 1024;
		else if (sscanf(line, "RssAnon: %" SCNu64 " kB", &kb) == 1)
			r->anon = kb * 1024;
		else if (sscanf(line, "RssFile: %" SCNu64 " kB", &kb) == 1)
			r->file = kb * 1024;
		else if (sscanf(line, "RssShmem: %" SCNu64 " kB", &kb) == 1)
			r->shmem = kb * 1024;
	}
	fclose(f);
	return r->total != 0;
}

static double per_key(uint64_t before, uint64_t after, uint64_t keys)
{
	return ((double)after - (double)before) / (double)keys;
}

/* ---- the run ----------------------------------------------------------------------- */

/* Put n keys mb/<pid>/L/<i> in batches from procs processes, each its
 * own range; the keys get and exist choose from. */
static int load_keys(struct mb_ctx *x, uint64_t n, unsigned procs,
		     struct mb_row *row)
{
	struct mb_case c = { .op = OP_PUT,
			     .batch = true,
			     .load = true,
			     .n = (unsigned)x->cfg->batch };
	uint64_t per = (n + procs - 1) / procs;
	int rc;

	c.load_count = (per + c.n - 1) / c.n * c.n;
	rc = run_case(x, &c, procs, row);
	if (!rc)
		x->n_loaded = c.load_count * procs;
	return rc;
}

static void print_row(const struct mb_ctx *x, const struct mb_case *c,
		      unsigned procs, const struct mb_row *r,
		      const struct mb_row *raw)
{
	const char *rpcs[N_OPS][2] = {
		{ "PutStart+PutEnd", "BatchPutStart+BatchPutEnd" },
		{ "GetReplicaList", "BatchGetReplicaList" },
		{ "ExistKey", "BatchExistKey" },
		{ "PutCommit", "-" },
	};
	char per[32], goal[48] = "-";
	double p50 = (double)r->p50 / 1e3;

	if (c->batch)
		snprintf(per, sizeof(per), "batch of %u", c->n);
	else
		snprintf(per, sizeof(per),
			 c->op == OP_PUT || c->op == OP_COMMIT ? "put" : "RPC");
	if (c->batch && c->op == OP_PUT)
		snprintf(goal, sizeof(goal), ">= 80k keys/s: %s",
			 r->keys_s >= 80000 ? "met" : "MISSED");
	else if (c->batch)
		snprintf(goal, sizeof(goal), ">= 470k keys/s: %s",
			 r->keys_s >= 470000 ? "met" : "MISSED");
	else if (c->op == OP_PUT)
		snprintf(goal, sizeof(goal), "p50 < 150 us: %s",
			 p50 < 150 ? "met" : "MISSED");
	else if (c->op == OP_GET)
		snprintf(goal, sizeof(goal), "p50 < 60 us: %s",
			 p50 < 60 ? "met" : "MISSED");
	printf("| %s | %s | %s | %u | %.0f | %.0f | %.1f | %.1f | %s |",
	       op_name[c->op], rpcs[c->op][c->batch], x->cfg->label, procs,
	       r->keys_s, r->calls_s, p50, (double)r->p99 / 1e3, per);
	if (raw)
		printf(" %.1f | %.1f | %.2fx |", (double)raw->p50 / 1e3,
		       (double)raw->p99 / 1e3,
		       raw->calls_s > 0 ? r->calls_s / raw->calls_s : 0);
	else
		printf(" - | - | - |");
	printf(" %s |", goal);
	if (r->errors)
		printf(" %" PRIu64 " errors (%s)", r->errors, r->msg);
	printf("\n");
	fflush(stdout);
}

static void print_header(const struct mb_ctx *x)
{
	const struct mb_cfg *cfg = x->cfg;
	double load[3] = { 0 };

	(void)getloadavg(load, 3);
	printf("Master %s (%s); %.1f s per case after %" PRId64
	       " warm-up calls per process; batch %" PRId64 "; values %" PRIu64
	       " B; %ld CPUs online; load average %.2f at the start",
	       cfg->master_server_address, cfg->label, cfg->seconds,
	       cfg->warmup, cfg->batch, cfg->value_size,
	       sysconf(_SC_NPROCESSORS_ONLN), load[0]);
	if (x->client_cpu >= 0)
		printf("; clients on CPU %d, raw TCP server on CPU %d",
		       x->client_cpu, x->server_cpu);
	printf(".\nLatency is per call: a put is PutStart+PutEnd (two round "
	       "trips); raw TCP makes the same round trips with the same "
	       "bytes.\n\n");
}

static void print_table_header(void)
{
	printf("| op | RPCs | master | procs | keys/s | calls/s | p50 (us) | "
	       "p99 (us) | latency per | raw TCP p50 (us) | raw TCP p99 (us) "
	       "| calls/s vs raw | target |\n"
	       "|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"
	       "\n");
}

static int run_pair(struct mb_ctx *x, unsigned procs, enum mb_op op, bool batch)
{
	static unsigned next_id;
	const struct mb_cfg *cfg = x->cfg;
	struct mb_case c = { .op = op,
			     .batch = batch,
			     .n = batch ? (unsigned)cfg->batch : 1,
			     .id = next_id++,
			     .warmup = (uint64_t)cfg->warmup,
			     .dur_ns = (uint64_t)(cfg->seconds * 1e9),
			     .n_loaded = x->n_loaded,
			     .trips = op == OP_PUT ? 2 : 1,
			     .raw_port = x->raw_port };
	struct mb_row r, raw;
	int rc;

	rc = run_case(x, &c, procs, &r);
	if (rc)
		return rc;
	if (cfg->no_raw) {
		print_row(x, &c, procs, &r, NULL);
		return 0;
	}
	/* The same bytes per round trip as the first worker that noted
	 * them saw (raw TCP's own 8-byte header counts in its request
	 * length; commit: a worker that never held a slot noted none). */
	for (unsigned i = 0; i < procs; i++) {
		const struct mb_res *w = &x->sh->res[i];

		if (!w->req[0])
			continue;
		for (unsigned t = 0; t < c.trips; t++) {
			c.req[t] = w->req[t];
			c.resp[t] = w->resp[t];
		}
		break;
	}
	c.raw = true;
	rc = run_case(x, &c, procs, &raw);
	if (rc)
		return rc;
	c.raw = false;
	print_row(x, &c, procs, &r, &raw);
	return 0;
}

static int run_all(struct mb_ctx *x, const struct mb_lists *l)
{
	const struct mb_cfg *cfg = x->cfg;
	unsigned max_procs = 1;
	struct mb_row r;
	int rc = 0;

	for (unsigned i = 0; i < l->n_procs; i++)
		if (l->procs[i] > max_procs)
			max_procs = l->procs[i];
	if (cfg->mem_keys > 0) {
		struct mb_rss b, a;
		bool have = rss_of(cfg->master_pid, &b);

		rc = load_keys(x, (uint64_t)cfg->mem_keys, max_procs, &r);
		if (rc)
			return rc;
		have = rss_of(cfg->master_pid, &a) && have;
		printf("Memory: %" PRIu64 " keys of %" PRIu64
		       " B put in batches of %" PRId64 " from %u processes "
		       "at %.0f keys/s (%.1f s). ",
		       x->n_loaded, cfg->value_size, cfg->batch, max_procs,
		       r.keys_s, r.secs);
		if (have)
			printf("Master RSS %.1f MiB before, %.1f MiB after: "
			       "%.0f bytes per key (%.0f MiB per million "
			       "keys); of which anonymous %.0f, file %.0f, "
			       "shared memory %.0f bytes per key.\n\n",
			       (double)b.total / 1048576.0,
			       (double)a.total / 1048576.0,
			       per_key(b.total, a.total, x->n_loaded),
			       per_key(b.total, a.total, x->n_loaded) * 1e6 /
				       1048576.0,
			       per_key(b.anon, a.anon, x->n_loaded),
			       per_key(b.file, a.file, x->n_loaded),
			       per_key(b.shmem, a.shmem, x->n_loaded));
		else
			printf("No RSS figure (--master_pid not given or "
			       "unreadable).\n\n");
	} else if (l->op[OP_GET] || l->op[OP_EXIST]) {
		rc = load_keys(x, (uint64_t)cfg->load_keys, max_procs, &r);
		if (rc)
			return rc;
	}
	print_table_header();
	for (unsigned p = 0; p < l->n_procs && !rc; p++)
		for (int op = 0; op < N_OPS && !rc; op++)
			for (int f = 0; f < 2 && !rc; f++)
				if (l->op[op] && l->form[f] &&
				    !(op == OP_COMMIT && f == 1))
					rc = run_pair(x, l->procs[p],
						      (enum mb_op)op, f == 1);
	return rc;
}

int main(int argc, char **argv)
{
	struct mb_cfg cfg = { 0 };
	struct mb_ctx x = { .cfg = &cfg,
			    .client_cpu = -1,
			    .server_cpu = -1,
			    .tag = (int)getpid() };
	struct mc_rpc_client *cli = NULL;
	struct raw_server *srv = NULL;
	struct mb_lists l;
	uint8_t seg_id[MB_ID_LEN];
	pid_t pinger = -1;
	char err[MC_ERR_LEN];
	int code, rc;

	if (mc_daemon_load_config(&mb_spec, &cfg, argc, argv, &code))
		return code;
	memset(&l, 0, sizeof(l));
	if (each_item(cfg.procs, add_procs, &l) || !l.n_procs ||
	    each_item(cfg.cases, add_case, &l) ||
	    each_item(cfg.forms, add_form, &l) ||
	    parse_pin(cfg.pin, &x.client_cpu, &x.server_cpu)) {
		fprintf(stderr, "master_bench: bad --procs, --cases, --forms "
				"or --pin (see --help)\n");
		mc_cfg_release(&mb_spec, &cfg);
		return MC_EXIT_USAGE;
	}
	signal(SIGPIPE, SIG_IGN);
	x.sh = mmap(NULL, sizeof(*x.sh), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (x.sh == MAP_FAILED ||
	    getrandom(x.client_id, sizeof(x.client_id), 0) !=
		    (ssize_t)sizeof(x.client_id) ||
	    getrandom(seg_id, sizeof(seg_id), 0) != (ssize_t)sizeof(seg_id)) {
		fprintf(stderr, "master_bench: out of memory or entropy\n");
		mc_cfg_release(&mb_spec, &cfg);
		return MC_EXIT_FAILURE;
	}
	rc = mc_auth_key_load_opt(cfg.auth_token_file, &x.auth, &x.key, err,
				  sizeof(err));
	if (rc) {
		fprintf(stderr, "master_bench: auth_token_file: %s\n", err);
		goto out;
	}
	rc = mb_client(&x, MB_RPC_TIMEOUT_MS, &cli);
	if (rc) {
		fprintf(stderr,
			"master_bench: --master_server_address %s: %s\n",
			cfg.master_server_address, mc_strerror(rc));
		goto out;
	}
	rc = mount_fake(&x, cli, seg_id);
	if (rc)
		goto out;
	pinger = start_pinger(&x);
	if (!cfg.no_raw) {
		rc = raw_server_start(x.server_cpu, &srv, &x.raw_port);
		if (rc) {
			fprintf(stderr, "master_bench: raw TCP server: %s\n",
				mc_strerror(rc));
			goto out;
		}
	}
	print_header(&x);
	rc = run_all(&x, &l);
out:
	if (pinger > 0) {
		kill(pinger, SIGKILL);
		(void)waitpid(pinger, NULL, 0);
	}
	raw_server_stop(srv);
	if (cli) {
		unmount_fake(&x, cli, seg_id);
		mc_rpc_client_destroy(cli);
	}
	mc_cfg_release(&mb_spec, &cfg);
	return rc ? MC_EXIT_FAILURE : MC_EXIT_OK;
}
