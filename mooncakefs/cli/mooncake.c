/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake: the pool from a shell.
 *   mooncake status            segments, capacity, use, keys, clients
 *   mooncake ls [PREFIX]       keys (paged through the master, no lease)
 *   mooncake info KEY          size, replicas, lease, pins
 *   mooncake put FILE KEY      store a file (zero-copy from its mapping)
 *   mooncake get KEY FILE      fetch an object into a file
 *   mooncake rm KEY            remove (--force: even while leased)
 *   mooncake ckpt ...          checkpoints shared peer to peer (ckpt_cmd.c)
 * status/ls/info speak RPC to the master only; put/get/rm join the pool as
 * a client without a segment. Errors are printed in words with upstream's
 * code, and the exit status is 1 (2 for usage errors).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mc_auth.h"
#include "mc_cfg.h"
#include "mc_daemon.h"
#include "mc_log.h"
#include "mc_net.h"
#include "mc_rpc_client.h"
#include "mooncake/mc_err.h"
#include "mooncake/mc_version.h"
#include "mooncake/store.h"
#include "cli.h"
#include "store_int.h"

#define OPT(n, e, t, f, d, lo, hi, h)                                       \
	{                                                                   \
		.name = n, .env = e, .type = t,                             \
		.offset = offsetof(struct cli_cfg, f), .def = d, .min = lo, \
		.max = hi, .help = h                                        \
	}

static const struct mc_opt cli_opts[] = {
	/* Unset here: the MOONCAKE_CONFIG_PATH file's, else DEF_* (pool()). */
	OPT("master", "MOONCAKE_MASTER", MC_OPT_STRING, master, NULL, 0, 0,
	    "Master RPC address host:port, or etcd://h1:2379;h2:2379 for HA "
	    "masters (the leader is read from etcd); unset: the "
	    "MOONCAKE_CONFIG_PATH file's master_server_address, else "
	    "127.0.0.1:50051."),
	OPT("metadata", "MOONCAKE_TE_META_DATA_SERVER", MC_OPT_STRING, metadata,
	    NULL, 0, 0,
	    "Transfer engine metadata service (put, get, ckpt); unset: the "
	    "MOONCAKE_CONFIG_PATH file's metadata_server, else "
	    "http://127.0.0.1:8080/metadata."),
	OPT("local_hostname", "MOONCAKE_LOCAL_HOSTNAME", MC_OPT_STRING,
	    local_hostname, NULL, 0, 0,
	    "This client's address (put, get, ckpt); unset: the file's "
	    "local_hostname, else 127.0.0.1."),
	OPT("protocol", "MOONCAKE_PROTOCOL", MC_OPT_STRING, protocol, NULL, 0,
	    0,
	    "Transfer protocol (put, get, ckpt); unset: the file's "
	    "protocol, else tcp."),
	OPT("replicas", NULL, MC_OPT_INT, replicas, "1", 0, 0,
	    "put: replicas on distinct segments, 1 to 8 (else -600, as "
	    "libmooncake answers)."),
	OPT("hard_pin", NULL, MC_OPT_BOOL, hard_pin, "false", 0, 0,
	    "put: never evict this object."),
	OPT("force", NULL, MC_OPT_BOOL, force, "false", 0, 0,
	    "rm: remove even while leased."),
	OPT("limit", NULL, MC_OPT_INT, limit, "0", 0, 1e12,
	    "ls: stop after this many keys (0 = all)."),
	{ .name = "rpc_timeout",
	  .env = "MC_RPC_TIMEOUT_MS",
	  .type = MC_OPT_DURATION,
	  .offset = offsetof(struct cli_cfg, rpc_timeout),
	  .def = "5000",
	  .unit_ms = 1,
	  .help = "RPC timeout (ms)." },
	OPT("auth_token_file", "MOONCAKE_AUTH_TOKEN_FILE", MC_OPT_STRING,
	    auth_token_file, "", 0, 0,
	    "The pool's token when the master has one (every command; "
	    "put, get and rm also find it in the MOONCAKE_CONFIG_PATH "
	    "file, as every libmooncake client)."),
	OPT("serve", NULL, MC_OPT_BOOL, serve, "false", 0, 0,
	    "ckpt get: keep serving the fetched checkpoint to other readers "
	    "until interrupted."),
	{ .name = "shard_size",
	  .type = MC_OPT_SIZE,
	  .offset = offsetof(struct cli_cfg, shard_size),
	  .def = "64MiB",
	  .min = 65536,
	  .max = 1073741824,
	  .help = "ckpt publish: shard size (64 KiB to 1 GiB)." },
	OPT("copy", NULL, MC_OPT_BOOL, copy, "false", 0, 0,
	    "ckpt publish: serve a copy of DIR (kept under --cache_dir "
	    "while serving) instead of DIR's files, so they may change at "
	    "once."),
	OPT("cache_dir", "MOONCAKE_CKPT_CACHE_DIR", MC_OPT_STRING, cache_dir,
	    "", 0, 0,
	    "ckpt publish --copy: where the copy is kept; empty: "
	    "/var/cache/mooncakefs/ckpt-publish for root, else "
	    "$XDG_CACHE_HOME (or ~/.cache)/mooncakefs/ckpt-publish."),
	OPT("inflight", NULL, MC_OPT_INT, inflight, "4", 1, 64,
	    "ckpt get: shards fetched at once."),
	OPT("v", NULL, MC_OPT_VERBOSITY, v, "0", 0, 9, "Verbosity."),
};

static const struct mc_cfg_spec cli_spec = {
	.prog = "mooncake",
	.summary = "Inspect and manage the Mooncake pool: status, ls [PREFIX], "
		   "info KEY, put FILE KEY, get KEY FILE, rm KEY; checkpoints: "
		   "ckpt publish DIR NAME | ls [PREFIX] | get NAME DIR | "
		   "info NAME | link NAME TARGET | rm NAME | seal NAME|PATH (a "
		   "directory copied into a mount's ckpt/).",
	.opts = cli_opts,
	.n_opts = sizeof(cli_opts) / sizeof(cli_opts[0]),
	.strict = true,
	.max_positional = 4,
	.positional_help = "COMMAND [ARGS]",
};

/* A flag or variable left unset: the MOONCAKE_CONFIG_PATH file's value
 * (as every libmooncake client reads it), else def. */
static int take(char **dst, char *from_file, const char *def)
{
	if (*dst)
		return 0;
	*dst = strdup(from_file && *from_file ? from_file : def);
	return *dst ? 0 : -ENOMEM;
}

/* The pool's addresses, as the store client resolves them: flags over
 * MOONCAKE_* over the MOONCAKE_CONFIG_PATH file; over the CLI's defaults
 * (local ones: a master on this host with its metadata service). */
static int pool(struct cli_cfg *cfg)
{
	const char *path = getenv("MOONCAKE_CONFIG_PATH");
	struct mcs_cfg f = { 0 };
	char err[MC_ERR_LEN] = "";
	int rc = 0;

	if (path && *path &&
	    (!cfg->master || !cfg->metadata || !cfg->local_hostname ||
	     !cfg->protocol)) {
		/* Other programs' keys: the library's own read warns of them
		 * (put, get, ckpt), once is enough. */
		int level = mc_log_get_level();

		mc_log_set_level(MC_LOG_ERROR);
		rc = mc_cfg_load_file(&mcs_cfg_spec, &f, path, err,
				      sizeof(err));
		mc_log_set_level(level);
	}
	if (rc) {
		/* status, ls, info need none of it: say so, go on with the
		 * defaults (put and get meet the file again in the library). */
		fprintf(stderr,
			"mooncake: MOONCAKE_CONFIG_PATH: %s (its addresses "
			"not used)\n",
			err);
		mcs_cfg_release(&f);
		f = (struct mcs_cfg){ 0 };
		rc = 0;
	}
	if (take(&cfg->master, f.master_server_address, "127.0.0.1:50051") ||
	    take(&cfg->metadata, f.metadata_server,
		 "http://127.0.0.1:8080/metadata") ||
	    take(&cfg->local_hostname, f.local_hostname, "127.0.0.1") ||
	    take(&cfg->protocol, f.protocol, "tcp")) {
		fprintf(stderr, "mooncake: out of memory\n");
		rc = -ENOMEM;
	}
	mcs_cfg_release(&f);
	return rc;
}

const char *mc_cli_escape(const char *s, char *out, size_t n)
{
	size_t o = 0;

	for (; *s && o + 5 < n; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x20 || c == 0x7f || c == '\\')
			o += (size_t)snprintf(out + o, n - o, "\\%03o", c);
		else
			out[o++] = (char)c;
	}
	out[o] = '\0';
	return out;
}

/* A key on a line of its own (mc_cli_escape()). */
static void put_name(const char *s)
{
	char buf[4 * 4096 + 16];

	puts(mc_cli_escape(s, buf, sizeof(buf)));
}

int mc_cli_fail(const char *what, int code)
{
	fprintf(stderr, "mooncake: %s: %s (%d %s)\n", what,
		mc_store_strerror(code), code, mc_store_err_name(code));
	return 1;
}

/*
 * The arguments libmooncake would refuse with -600, refused before
 * joining the pool and in its words, so that every command answers them
 * alike (info speaks to the master directly, which knows no such rule).
 */
static bool key_ok(const char *cmd, const char *key)
{
	if (*key) /* argv cannot hold a NUL: nothing else to check */
		return true;
	fprintf(stderr, "mooncake: %s: empty key: %s (%d %s)\n", cmd,
		mc_store_strerror(MC_STORE_INVALID_PARAMS),
		MC_STORE_INVALID_PARAMS,
		mc_store_err_name(MC_STORE_INVALID_PARAMS));
	return false;
}

/* Where a command's KEY is among the positional arguments (0: none). */
static int key_arg(const char *cmd)
{
	if (!strcmp(cmd, "put"))
		return 2;
	if (!strcmp(cmd, "get") || !strcmp(cmd, "rm") || !strcmp(cmd, "info"))
		return 1;
	return 0;
}

static bool replicas_ok(int64_t n)
{
	if (n >= 1 && n <= MOONCAKE_MAX_REPLICAS)
		return true;
	fprintf(stderr,
		"mooncake: --replicas: replica_num %" PRId64
		" is out of range (1 to %d): %s (%d %s)\n",
		n, MOONCAKE_MAX_REPLICAS,
		mc_store_strerror(MC_STORE_INVALID_PARAMS),
		MC_STORE_INVALID_PARAMS,
		mc_store_err_name(MC_STORE_INVALID_PARAMS));
	return false;
}

static int fail_rpc(const char *master, int rc)
{
	fprintf(stderr, "mooncake: master %s: %s (%d %s)\n", master,
		mc_strerror(rc), mc_err_to_store(rc),
		mc_store_err_name(mc_err_to_store(rc)));
	return 1;
}

static int set_auth(struct mc_rpc_client *c, const struct cli_cfg *cfg)
{
	char err[MC_ERR_LEN] = "";
	struct mc_auth_key key;
	bool have;

	if (mc_auth_key_load_opt(cfg->auth_token_file, &have, &key, err,
				 sizeof(err))) {
		fprintf(stderr, "mooncake: auth_token_file: %s\n", err);
		return -1;
	}
	if (have)
		mc_rpc_client_set_auth(c, &key);
	mc_auth_key_clear(&key);
	return 0;
}

static int call(struct mc_rpc_client *c, const struct cli_cfg *cfg,
		uint16_t method, const ProtobufCMessage *req,
		ProtobufCMessage **resp)
{
	int rc = mc_rpc_call(c, method, req, resp);

	if (rc)
		return fail_rpc(cfg->master, rc);
	return 0;
}

void mc_cli_human(uint64_t v, char *out, size_t n)
{
	static const char *const u[] = {
		"B", "KiB", "MiB", "GiB", "TiB", "PiB"
	};
	double d = (double)v;
	int i = 0;

	while (d >= 1024 && i < 5) {
		d /= 1024;
		i++;
	}
	snprintf(out, n, i ? "%.1f %s" : "%.0f %s", d, u[i]);
}

static int cmd_status(struct mc_rpc_client *c, const struct cli_cfg *cfg)
{
	Mcrpc__GetStatusRequest q = MCRPC__GET_STATUS_REQUEST__INIT;
	Mcrpc__GetStatusResponse *r;
	char cap[32], used[32], sz[32], us[32];

	if (call(c, cfg, MCRPC__METHOD__GET_STATUS, &q.base,
		 (ProtobufCMessage **)&r))
		return 1;
	if (r->code) {
		/* A standby (or a master that stopped leading) answers
		 * -1011: it has no status of the pool to give. */
		int ret = mc_cli_fail(cfg->master, r->code);

		if (r->code == MC_STORE_UNAVAILABLE_IN_CURRENT_MODE)
			fprintf(stderr,
				"mooncake: %s is an HA standby, or stopped "
				"leading: give the pool's etcd:// address "
				"(--master) to reach its leader\n",
				cfg->master);

		protobuf_c_message_free_unpacked(&r->base, NULL);
		return ret;
	}
	mc_cli_human(r->capacity, cap, sizeof(cap));
	mc_cli_human(r->allocated, used, sizeof(used));
	printf("master %s  version %s  up %" PRIu64 " s\n", cfg->master,
	       r->version, r->uptime_ms / 1000);
	printf("capacity %s  used %s (%.1f%%)  keys %" PRIu64
	       "  clients %u  segments %zu  evicted %" PRIu64 "\n",
	       cap, used,
	       r->capacity ?
		       100.0 * (double)r->allocated / (double)r->capacity :
		       0.0,
	       r->keys, r->clients, r->n_segments, r->evicted_keys);
	if (r->holds || r->orphans) {
		mc_cli_human(r->orphan_bytes, us, sizeof(us));
		printf("open objects (holds) %u  removed but kept for readers "
		       "%" PRIu64 " (%s)\n",
		       r->holds, r->orphans, us);
	}
	if (r->quarantine_left_ms)
		printf("restarted: removals keep memory and eviction waits for "
		       "%.1f s more (readers of the previous run)\n",
		       (double)r->quarantine_left_ms / 1000.0);
	if (r->n_segments)
		printf("\n%-24s %-24s %10s %10s %6s %8s  %s\n", "SEGMENT",
		       "ENDPOINT", "SIZE", "USED", "USE%", "OBJECTS", "STATE");
	for (size_t i = 0; i < r->n_segments; i++) {
		Mcrpc__SegmentStatus *s = r->segments[i];
		mc_cli_human(s->segment->size, sz, sizeof(sz));
		mc_cli_human(s->used, us, sizeof(us));
		printf("%-24s %-24s %10s %10s %5.1f%% %8" PRIu64 "  %s\n",
		       s->segment->name, s->segment->endpoint, sz, us,
		       s->segment->size ? 100.0 * (double)s->used /
						  (double)s->segment->size :
					  0.0,
		       s->objects, s->mounted ? "mounted" : "awaiting owner");
	}
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return 0;
}

static int cmd_ls(struct mc_rpc_client *c, const struct cli_cfg *cfg,
		  const char *prefix)
{
	char *cursor = strdup("");
	uint64_t shown = 0;
	int ret = 0;

	if (!cursor)
		return 1;
	for (;;) {
		Mcrpc__ListRequest q = MCRPC__LIST_REQUEST__INIT;
		Mcrpc__ListResponse *r;
		q.prefix = (char *)prefix;
		q.start_after = cursor;
		q.limit = 1000;
		if (call(c, cfg, MCRPC__METHOD__LIST, &q.base,
			 (ProtobufCMessage **)&r)) {
			ret = 1;
			break;
		}
		if (r->code) {
			ret = mc_cli_fail("ls", r->code);
			protobuf_c_message_free_unpacked(&r->base, NULL);
			break;
		}
		for (size_t i = 0; i < r->n_entries; i++) {
			if (cfg->limit && shown >= (uint64_t)cfg->limit)
				break;
			printf("%12" PRIu64 "  ", r->entries[i]->size);
			put_name(r->entries[i]->name);
			shown++;
		}
		bool more = r->truncated && r->n_entries &&
			    !(cfg->limit && shown >= (uint64_t)cfg->limit);
		if (more) {
			free(cursor);
			cursor = strdup(r->entries[r->n_entries - 1]->name);
		}
		protobuf_c_message_free_unpacked(&r->base, NULL);
		if (!more || !cursor)
			break;
	}
	free(cursor);
	return ret;
}

static int cmd_info(struct mc_rpc_client *c, const struct cli_cfg *cfg,
		    const char *key)
{
	Mcrpc__KeysRequest q = MCRPC__KEYS_REQUEST__INIT;
	Mcrpc__StatResponse *r;
	char *keys[1] = { (char *)key }, sz[32];

	q.keys = keys;
	q.n_keys = 1;
	if (call(c, cfg, MCRPC__METHOD__STAT, &q.base, (ProtobufCMessage **)&r))
		return 1;
	if (r->code) {
		int rc = mc_cli_fail(key, r->code);
		protobuf_c_message_free_unpacked(&r->base, NULL);
		return rc;
	}
	time_t t = (time_t)(r->mtime_ms / 1000);
	struct tm tm;
	char when[64] = "?";
	if (localtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	mc_cli_human(r->size, sz, sizeof(sz));
	char soft[48] = "no"; /* not pinned: not "0 ms left" */
	if (r->soft_pin_ms)
		snprintf(soft, sizeof(soft), "%" PRIu64 " ms left",
			 r->soft_pin_ms);
	printf("key       %s\nsize      %" PRIu64 " (%s)\nwritten   %s\n"
	       "lease     %" PRIu64 " ms left\nholds     %u\nhard pin  %s\n"
	       "soft pin  %s\nreplicas  %u\n",
	       key, r->size, sz, when, r->lease_ms, r->holds,
	       r->hard_pin ? "yes" : "no", soft, r->replicas);
	for (size_t i = 0; i < r->n_replica_list; i++)
		printf("  %s @ 0x%" PRIx64 " (%s)\n",
		       r->replica_list[i]->endpoint,
		       r->replica_list[i]->address,
		       r->replica_list[i]->protocol);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return 0;
}

mooncake_store_t mc_cli_join(const struct cli_cfg *cfg)
{
	mooncake_store_t s = mooncake_store_create();
	int rc;

	if (!s) {
		fprintf(stderr, "mooncake: out of memory\n");
		return NULL;
	}
	/* The library's own setup: --auth_token_file reaches it too (the
	 * public call has no token argument). */
	rc = mc_err_to_store(mcs_store_setup(
		s, &(struct mcs_cfg_args){
			   .local_hostname = cfg->local_hostname,
			   .metadata_server = cfg->metadata,
			   .protocol = cfg->protocol,
			   .device_name = "",
			   .master_server_address = cfg->master,
			   /* "": the library's chain (its config file) */
			   .auth_token_file = *cfg->auth_token_file ?
						      cfg->auth_token_file :
						      NULL,
			   /* the operator's view, as ls (tenants' keys by
			    * their full names, .tenants/T/KEY) */
			   .tenant_id = "default",
		   }));
	if (rc) {
		mc_cli_fail("joining the pool", rc);
		mooncake_store_destroy(s);
		return NULL;
	}
	mooncake_store_set_timeouts(s, (unsigned)cfg->rpc_timeout, 0);
	return s;
}

static int cmd_put(const struct cli_cfg *cfg, const char *file, const char *key)
{
	mooncake_replicate_config_t rc_cfg = {
		.replica_num = (size_t)cfg->replicas,
		.with_hard_pin = cfg->hard_pin,
	};
	struct stat st;
	void *p = MAP_FAILED;
	mooncake_store_t s;
	int fd, rc, ret = 1;

	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "mooncake: %s: %s\n", file,
			mc_strerror(-errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	if (!st.st_size) {
		fprintf(stderr,
			"mooncake: %s: empty; the store holds objects of at "
			"least one byte\n",
			file);
		close(fd);
		return 1;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE,
		 fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		fprintf(stderr, "mooncake: %s: %s\n", file,
			mc_strerror(-errno));
		return 1;
	}
	s = mc_cli_join(cfg);
	if (!s)
		goto out;
	rc = mooncake_store_register_buffer(s, p, (size_t)st.st_size);
	if (!rc)
		rc = mooncake_store_put_from(s, key, p, (size_t)st.st_size,
					     &rc_cfg);
	if (rc)
		mc_cli_fail("put", rc);
	else
		ret = 0;
	mooncake_store_unregister_buffer(s, p);
	mooncake_store_destroy(s);
out:
	munmap(p, (size_t)st.st_size);
	return ret;
}

/* Whether file is "-" (stdout) or exists as something other than a
 * regular file (/dev/null, a pipe, a terminal): written in a stream. */
static bool streamed(const char *file)
{
	struct stat st;

	return !strcmp(file, "-") || (!stat(file, &st) && !S_ISREG(st.st_mode));
}

/* get into a stream: the object read into memory, then written out. */
static int get_streamed(mooncake_store_t s, const char *key, int64_t size,
			const char *file)
{
	bool out = !strcmp(file, "-");
	int fd = out ? STDOUT_FILENO : open(file, O_WRONLY | O_CLOEXEC);
	void *p = MAP_FAILED;
	int64_t got = -1;
	int ret = 1, wr;

	if (fd < 0) {
		fprintf(stderr, "mooncake: %s: %s\n", file,
			mc_strerror(-errno));
		return 1;
	}
	if (size)
		p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (size && p == MAP_FAILED) {
		fprintf(stderr, "mooncake: get: %s\n", mc_strerror(-errno));
	} else {
		got = size ? mooncake_store_register_buffer(s, p,
							    (size_t)size) :
			     0;
		if (!got && size)
			got = mooncake_store_get_into(s, key, p, (size_t)size);
		if (got < 0)
			mc_cli_fail("get", (int)got);
		else if ((wr = mc_net_write_all(fd, p, (size_t)got)))
			fprintf(stderr, "mooncake: %s: %s\n", file,
				mc_strerror(wr));
		else
			ret = 0;
		if (size)
			mooncake_store_unregister_buffer(s, p);
	}
	if (p != MAP_FAILED)
		munmap(p, (size_t)size);
	if (!out)
		close(fd);
	return ret;
}

static int cmd_get(const struct cli_cfg *cfg, const char *key, const char *file)
{
	mooncake_store_t s = mc_cli_join(cfg);
	int64_t size, got;
	void *p;
	int fd, ret = 1;

	if (!s)
		return 1;
	size = mooncake_store_get_size(s, key);
	if (size < 0) {
		mc_cli_fail(key, (int)size);
		mooncake_store_destroy(s);
		return 1;
	}
	if (streamed(file)) {
		ret = get_streamed(s, key, size, file);
		mooncake_store_destroy(s);
		return ret;
	}
	fd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || ftruncate(fd, size)) {
		fprintf(stderr, "mooncake: %s: %s\n", file,
			mc_strerror(-errno));
		if (fd >= 0)
			close(fd);
		mooncake_store_destroy(s);
		return 1;
	}
	if (!size) { /* an empty object (a mount's empty file) */
		mooncake_store_destroy(s);
		if (!close(fd))
			return 0;
		fprintf(stderr, "mooncake: %s: %s\n", file,
			mc_strerror(-errno));
		unlink(file);
		return 1;
	}
	p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		fprintf(stderr, "mooncake: %s: %s\n", file,
			mc_strerror(-errno));
		mooncake_store_destroy(s);
		return 1;
	}
	got = mooncake_store_register_buffer(s, p, (size_t)size);
	if (!got)
		got = mooncake_store_get_into(s, key, p, (size_t)size);
	if (got < 0)
		mc_cli_fail("get", (int)got);
	else if (got != size)
		fprintf(stderr,
			"mooncake: get: %" PRId64 " of %" PRId64 " bytes\n",
			got, size);
	else
		ret = msync(p, (size_t)size, MS_SYNC) ? 1 : 0;
	mooncake_store_unregister_buffer(s, p);
	munmap(p, (size_t)size);
	mooncake_store_destroy(s);
	if (ret)
		unlink(file);
	return ret;
}

static int cmd_rm(const struct cli_cfg *cfg, const char *key)
{
	mooncake_store_t s = mc_cli_join(cfg);
	int rc;

	if (!s)
		return 1;
	rc = mooncake_store_remove(s, key, cfg->force);
	mooncake_store_destroy(s);
	if (rc == MC_STORE_OBJECT_HAS_LEASE)
		fprintf(stderr,
			"mooncake: %s was read within the last lease "
			"(--default_kv_lease_ttl of the master): try "
			"again after it, or rm --force\n",
			key);
	return rc ? mc_cli_fail(key, rc) : 0;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: mooncake [options] status | ls [PREFIX] | "
		"info KEY | put FILE KEY | get KEY FILE | rm KEY\n"
		"       mooncake [options] ckpt publish DIR NAME | ls "
		"[PREFIX] | get NAME DIR | info NAME |\n"
		"                          link NAME TARGET | rm NAME | "
		"seal NAME|PATH\n"
		"       mooncake --help\n");
	return MC_EXIT_USAGE;
}

int main(int argc, char **argv)
{
	struct cli_cfg cfg = { 0 };
	struct mc_cfg_result res;
	struct mc_rpc_client *c = NULL;
	char err[MC_ERR_LEN];
	const char *cmd;
	int n, key, ret;

	mc_log_set_level(MC_LOG_WARN);
	if (mc_cfg_load(&cli_spec, &cfg, argc, argv, &res, err, sizeof(err))) {
		fprintf(stderr, "mooncake: %s\n", err);
		mc_cfg_release(&cli_spec, &cfg);
		return MC_EXIT_USAGE;
	}
	if (res.action != MC_CFG_RUN) {
		int code = 0;
		if (res.action == MC_CFG_HELP)
			mc_cfg_print_help(&cli_spec, stdout);
		else if (res.action == MC_CFG_DUMP)
			mc_cfg_dump_json(&cli_spec, &cfg, stdout);
		else if (res.action == MC_CFG_DOC)
			mc_cfg_doc_markdown(&cli_spec, stdout);
		else
			printf("mooncake %s\n", MC_VERSION_STRING);
		mc_cfg_release(&cli_spec, &cfg);
		return code;
	}
	/* MC_LOG_LEVEL, then -v over it, as the daemons. */
	mc_log_init_from_env();
	if (cfg.v)
		mc_log_set_level(mc_cfg_verbosity_level(cfg.v));
	n = res.n_positional;
	cmd = n ? res.positional[0] : NULL;
	if (!cmd) {
		ret = usage();
		goto out;
	}
	if (pool(&cfg)) {
		ret = MC_EXIT_USAGE;
		goto out;
	}
	if (!replicas_ok(cfg.replicas)) {
		ret = MC_EXIT_USAGE;
		goto out;
	}
	if (!strcmp(cmd, "ckpt")) {
		ret = mc_cli_ckpt(&cfg, n, (const char *const *)res.positional);
		goto out;
	}
	key = key_arg(cmd);
	if (key && key < n && !key_ok(cmd, res.positional[key])) {
		ret = 1;
		goto out;
	}
	if (!strcmp(cmd, "put") && n == 3) {
		ret = cmd_put(&cfg, res.positional[1], res.positional[2]);
		goto out;
	}
	if (!strcmp(cmd, "get") && n == 3) {
		ret = cmd_get(&cfg, res.positional[1], res.positional[2]);
		goto out;
	}
	if (!strcmp(cmd, "rm") && n == 2) {
		ret = cmd_rm(&cfg, res.positional[1]);
		goto out;
	}
	if (mc_rpc_client_create(cfg.master, (unsigned)cfg.rpc_timeout, &c)) {
		fprintf(stderr, "mooncake: bad master address '%s'\n",
			cfg.master);
		ret = MC_EXIT_USAGE;
		goto out;
	}
	if (set_auth(c, &cfg)) {
		ret = MC_EXIT_USAGE;
		goto out;
	}
	if (!strcmp(cmd, "status") && n == 1)
		ret = cmd_status(c, &cfg);
	else if (!strcmp(cmd, "ls") && n <= 2)
		ret = cmd_ls(c, &cfg, n == 2 ? res.positional[1] : "");
	else if (!strcmp(cmd, "info") && n == 2)
		ret = cmd_info(c, &cfg, res.positional[1]);
	else
		ret = usage();
out:
	mc_rpc_client_destroy(c);
	mc_cfg_release(&cli_spec, &cfg);
	return ret;
}
