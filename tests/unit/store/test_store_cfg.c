/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the store client's configuration (mooncakefs/lib/
 * store_cfg.c): defaults, the MOONCAKE_CONFIG_PATH file, the environment
 * and setup()'s arguments, in that order of precedence; size strings;
 * unknown keys tolerated; bad values refused naming the option; tenant
 * names (master_client.h).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master_client.h"
#include "mc_log.h"
#include "mooncake/mc_err.h"
#include "mooncake/store.h"
#include "store_cfg.h"

static const char *const env_vars[] = {
	"MOONCAKE_CONFIG_PATH",
	"MOONCAKE_LOCAL_HOSTNAME",
	"MOONCAKE_TE_META_DATA_SERVER",
	"MOONCAKE_GLOBAL_SEGMENT_SIZE",
	"MOONCAKE_LOCAL_BUFFER_SIZE",
	"MOONCAKE_PROTOCOL",
	"MOONCAKE_DEVICE",
	"MOONCAKE_MASTER",
	"MC_RPC_TIMEOUT_MS",
	"MC_TRANSFER_TIMEOUT_MS",
	"MC_STORE_PING_MS",
	"MOONCAKE_SEGMENT_NAME",
	"MOONCAKE_TENANT_ID",
};

static char cfg_path[64];

static void setup_env(void)
{
	for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); i++)
		unsetenv(env_vars[i]);
	mc_log_set_level(MC_LOG_ERROR);
	cfg_path[0] = '\0';
}

static void teardown_env(void)
{
	if (cfg_path[0])
		unlink(cfg_path);
}

TestSuite(store_cfg, .init = setup_env, .fini = teardown_env);

static void write_file(const char *text)
{
	FILE *f;
	int fd;

	snprintf(cfg_path, sizeof(cfg_path), "/tmp/mcs_cfg_XXXXXX");
	fd = mkstemp(cfg_path);
	cr_assert(fd >= 0);
	f = fdopen(fd, "w");
	cr_assert(f);
	fputs(text, f);
	fclose(f);
	setenv("MOONCAKE_CONFIG_PATH", cfg_path, 1);
}

Test(store_cfg, defaults)
{
	struct mcs_cfg c;
	char err[MC_ERR_LEN];

	cr_assert_eq(mcs_cfg_load(&c, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.local_hostname, "localhost");
	cr_assert_str_eq(c.metadata_server, "P2PHANDSHAKE");
	cr_assert_str_eq(c.master_server_address, "127.0.0.1:50051");
	cr_assert_str_eq(c.protocol, "tcp");
	cr_assert_str_eq(c.device_name, "");
	cr_assert_str_eq(c.segment_name, "");
	cr_assert_eq(c.global_segment_size, 0);
	cr_assert_eq(c.local_buffer_size, 0);
	cr_assert_eq(c.rpc_timeout_ms, 5000);
	cr_assert_eq(c.transfer_timeout_ms, 30000);
	cr_assert_eq(c.ping_interval_ms, 1000);
	mcs_cfg_release(&c);
}

Test(store_cfg, file_then_env_then_args)
{
	struct mcs_cfg c;
	struct mcs_cfg_args a = { 0 };
	char err[MC_ERR_LEN];

	write_file("{\"local_hostname\": \"filehost\","
		   " \"metadata_server\": \"http://f:1/metadata\","
		   " \"global_segment_size\": \"500gb\","
		   " \"local_buffer_size\": 1048576,"
		   " \"master_server_address\": \"file:1\","
		   " \"protocol\": \"tcp\"}");
	cr_assert_eq(mcs_cfg_load(&c, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.local_hostname, "filehost");
	cr_assert_eq(c.global_segment_size, 500ull << 30);
	cr_assert_eq(c.local_buffer_size, 1048576);
	cr_assert_str_eq(c.master_server_address, "file:1");
	mcs_cfg_release(&c);

	setenv("MOONCAKE_LOCAL_HOSTNAME", "envhost", 1);
	setenv("MOONCAKE_GLOBAL_SEGMENT_SIZE", "4GB", 1);
	setenv("MOONCAKE_MASTER", "env:2", 1);
	setenv("MC_RPC_TIMEOUT_MS", "250", 1);
	cr_assert_eq(mcs_cfg_load(&c, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.local_hostname, "envhost");
	cr_assert_eq(c.global_segment_size, 4ull << 30);
	cr_assert_eq(c.local_buffer_size, 1048576, "file value kept");
	cr_assert_str_eq(c.master_server_address, "env:2");
	cr_assert_str_eq(c.metadata_server, "http://f:1/metadata");
	cr_assert_eq(c.rpc_timeout_ms, 250);
	mcs_cfg_release(&c);

	/* Non-NULL strings and set sizes win; NULL and UNSET fall through;
	 * a size of 0 means none (upstream's C API). */
	a.local_hostname = "arghost:123";
	a.global_segment_size = 1 << 20;
	a.master_server_address = NULL;
	a.local_buffer_size = MOONCAKE_SIZE_UNSET;
	cr_assert_eq(mcs_cfg_load(&c, &a, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.local_hostname, "arghost:123");
	cr_assert_eq(c.global_segment_size, 1 << 20);
	cr_assert_eq(c.local_buffer_size, 1048576);
	cr_assert_str_eq(c.master_server_address, "env:2");
	mcs_cfg_release(&c);
	a.global_segment_size = 0;
	cr_assert_eq(mcs_cfg_load(&c, &a, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.global_segment_size, 0, "0 is none, not unset");
	mcs_cfg_release(&c);
}

Test(store_cfg, unknown_keys_tolerated)
{
	struct mcs_cfg c;
	char err[MC_ERR_LEN];

	write_file("{\"local_hostname\": \"h\", \"enable_ssd_offload\": false,"
		   " \"tenant_id\": \"default\", \"client_http_port\": 9300}");
	cr_assert_eq(mcs_cfg_load(&c, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.local_hostname, "h");
	mcs_cfg_release(&c);
}

Test(store_cfg, tenant_id_sources)
{
	struct mcs_cfg c;
	struct mcs_cfg_args a = { .global_segment_size = MOONCAKE_SIZE_UNSET,
				  .local_buffer_size = MOONCAKE_SIZE_UNSET };
	char err[MC_ERR_LEN] = "";

	cr_assert_eq(mcs_cfg_load(&c, &a, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.tenant_id, "default");
	mcs_cfg_release(&c);
	write_file("{\"tenant_id\": \"file-t\"}");
	cr_assert_eq(mcs_cfg_load(&c, &a, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.tenant_id, "file-t");
	mcs_cfg_release(&c);
	setenv("MOONCAKE_TENANT_ID", "env-t", 1);
	cr_assert_eq(mcs_cfg_load(&c, &a, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.tenant_id, "env-t");
	mcs_cfg_release(&c);
	a.tenant_id = "arg-t";
	cr_assert_eq(mcs_cfg_load(&c, &a, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.tenant_id, "arg-t");
	mcs_cfg_release(&c);
}

Test(store_cfg, tenant_names)
{
	static const char *const good[] = { NULL,  "",	    "default", "A",
					    "a.b", "x_y-z", "...",     ".a" };
	static const char *const bad[] = { "a/b",    ".",	 "..",
					   "sp ace", "\xc3\xa9", "a\n" };
	char long_name[MCS_TENANT_MAX + 2];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_assert_null(mcs_tenant_invalid(good[i]), "%s", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_not_null(mcs_tenant_invalid(bad[i]), "%s", bad[i]);
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[MCS_TENANT_MAX] = '\0';
	cr_assert_null(mcs_tenant_invalid(long_name));
	long_name[MCS_TENANT_MAX] = 'x';
	long_name[MCS_TENANT_MAX + 1] = '\0';
	cr_assert_not_null(mcs_tenant_invalid(long_name));
	cr_assert(mcs_tenant_default(NULL) && mcs_tenant_default("") &&
		  mcs_tenant_default("default") && !mcs_tenant_default("A"));
}

Test(store_cfg, bad_values_refused)
{
	struct mcs_cfg c;
	char err[MC_ERR_LEN] = "";

	setenv("MOONCAKE_GLOBAL_SEGMENT_SIZE", "lots", 1);
	cr_assert_eq(mcs_cfg_load(&c, NULL, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "MOONCAKE_GLOBAL_SEGMENT_SIZE"), "%s", err);
	mcs_cfg_release(&c);
	unsetenv("MOONCAKE_GLOBAL_SEGMENT_SIZE");

	write_file("{\"local_hostname\": ");
	cr_assert_eq(mcs_cfg_load(&c, NULL, err, sizeof(err)), MC_EBADCONFIG);
	mcs_cfg_release(&c);

	setenv("MOONCAKE_CONFIG_PATH", "/nonexistent/mooncake.json", 1);
	cr_assert_eq(mcs_cfg_load(&c, NULL, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "/nonexistent/mooncake.json"), "%s", err);
	mcs_cfg_release(&c);
}

Test(store_cfg, empty_required_refused)
{
	struct mcs_cfg c;
	char err[MC_ERR_LEN] = "";

	setenv("MOONCAKE_MASTER", "", 1);
	cr_assert_eq(mcs_cfg_load(&c, NULL, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "master_server_address"), "%s", err);
	mcs_cfg_release(&c);
}
