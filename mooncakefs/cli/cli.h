/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file cli.h
 * Inside the `mooncake` command: its settings and the helpers its
 * command files share (mooncake.c: status, ls, info, put, get, rm;
 * ckpt_cmd.c: ckpt ...).
 */
#ifndef MC_CLI_H
#define MC_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mooncake/store.h"

struct cli_cfg {
	char *master;
	char *metadata;
	char *local_hostname;
	char *protocol;
	int64_t replicas;
	bool force;
	bool hard_pin;
	int64_t limit;
	uint64_t rpc_timeout;
	char *auth_token_file;
	/* ckpt */
	bool serve;
	bool copy;
	char *cache_dir;
	uint64_t shard_size;
	int64_t inflight;
	int v;
};

/** Print "mooncake: WHAT: message (code NAME)"; returns 1. */
int mc_cli_fail(const char *what, int code);

/** s with control characters and backslashes as \ooo (as ls -b), into
 *  out (n bytes; cut short if it does not fit): a name printed with it
 *  cannot forge lines or drive the terminal. Returns out. */
const char *mc_cli_escape(const char *s, char *out, size_t n);
/** Join the pool as a client without a segment (NULL: said why). */
mooncake_store_t mc_cli_join(const struct cli_cfg *cfg);
/** Human size: "1.5 GiB". */
void mc_cli_human(uint64_t v, char *out, size_t n);
/** `mooncake ckpt ...`: pos[0] is "ckpt"; returns the exit status. */
int mc_cli_ckpt(const struct cli_cfg *cfg, int n, const char *const *pos);

#endif
