/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/mc_memcg.c, a process's room below its memory
 * cgroup's limit, over cgroup trees the test lays out: v2 and v1 files,
 * the tightest of nested limits, reclaimable file pages not counted,
 * unlimited levels, and a container's path that its mount does not show
 * (its own cgroup at the root).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mc_memcg.h"

#define MIB (1ull << 20)

static char top[PATH_MAX];

static void put(const char *rel, const char *text)
{
	char path[PATH_MAX + 64], dir[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", top, rel);
	for (char *s = strchr(path + strlen(top) + 1, '/'); s;
	     s = strchr(s + 1, '/')) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(s - path), path);
		cr_assert(mkdir(dir, 0700) == 0 || errno == EEXIST, "%s", dir);
	}
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

static uint64_t room(uint64_t *limit)
{
	char cg[PATH_MAX + 16], v2[PATH_MAX + 16], v1[PATH_MAX + 16];

	snprintf(cg, sizeof(cg), "%s/proc_cgroup", top);
	snprintf(v2, sizeof(v2), "%s/v2", top);
	snprintf(v1, sizeof(v1), "%s/v1", top);
	return mc_memcg_room_at(cg, v2, v1, limit);
}

static void setup(void)
{
	snprintf(top, sizeof(top), "/tmp/mc_memcg.XXXXXX");
	cr_assert_not_null(mkdtemp(top));
}

static void teardown(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(mc_memcg, .init = setup, .fini = teardown);

Test(mc_memcg, v2_tightest_level_less_inactive_file)
{
	uint64_t limit = 0;

	put("proc_cgroup", "0::/app/worker\n");
	put("v2/app/memory.max", "1073741824\n");
	put("v2/app/memory.current", "629145600\n"); /* 600 MiB */
	put("v2/app/memory.stat", "anon 1\nfile 2\ninactive_file 104857600\n"
				  "active_file 5\n");
	put("v2/app/worker/memory.max", "max\n");
	put("v2/app/worker/memory.current", "1\n");
	/* 1 GiB - (600 - 100) MiB */
	cr_assert_eq(room(&limit), 524 * MIB);
	cr_assert_eq(limit, 1024 * MIB);

	put("v2/app/worker/memory.max", "314572800\n"); /* 300 MiB */
	put("v2/app/worker/memory.current", "209715200\n");
	cr_assert_eq(room(&limit), 100 * MIB);
	cr_assert_eq(limit, 300 * MIB);

	/* Over the limit (usage counted by the kernel can pass it). */
	put("v2/app/worker/memory.current", "419430400\n");
	cr_assert_eq(room(&limit), 0);
}

Test(mc_memcg, no_limit_anywhere)
{
	uint64_t limit = 0;

	put("proc_cgroup", "0::/user.slice/session-1.scope\n");
	put("v2/user.slice/memory.max", "max\n");
	put("v2/user.slice/memory.current", "123\n");
	cr_assert_eq(room(&limit), UINT64_MAX);
	cr_assert_eq(limit, UINT64_MAX);
	cr_assert_eq(room(NULL), UINT64_MAX);

	/* No cgroup file at all (not Linux's layout, a sandbox). */
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/proc_cgroup", top);
	cr_assert_eq(remove(path), 0);
	cr_assert_eq(room(&limit), UINT64_MAX);
}

Test(mc_memcg, v1_memory_controller_in_a_list)
{
	uint64_t limit = 0;

	put("proc_cgroup", "9:name=systemd:/\n5:cpu,memory:/job\n0::/\n");
	/* v1's "no limit" is a huge page-rounded number. */
	put("v1/memory.limit_in_bytes", "9223372036854771712\n");
	put("v1/job/memory.limit_in_bytes", "536870912\n");
	put("v1/job/memory.usage_in_bytes", "268435456\n");
	put("v1/job/memory.stat", "cache 9\ninactive_file 999999999\n"
				  "total_inactive_file 67108864\n");
	/* 512 - (256 - 64) MiB: the hierarchy's total, not the level's */
	cr_assert_eq(room(&limit), 320 * MIB);
	cr_assert_eq(limit, 512 * MIB);
}

Test(mc_memcg, container_sees_its_own_cgroup_at_the_root)
{
	uint64_t limit = 0;

	/* Without a cgroup namespace the path is the host's; the mount
	 * shows the container's own cgroup at its root. */
	put("proc_cgroup", "0::/system.slice/docker-abc.scope\n");
	put("v2/memory.max", "268435456\n");
	put("v2/memory.current", "67108864\n");
	cr_assert_eq(room(&limit), 192 * MIB);
	cr_assert_eq(limit, 256 * MIB);
}

Test(mc_memcg, both_hierarchies_tightest_wins)
{
	uint64_t limit = 0;

	put("proc_cgroup", "4:memory:/a\n0::/b\n");
	put("v2/b/memory.max", "1073741824\n");
	put("v2/b/memory.current", "0\n");
	put("v1/a/memory.limit_in_bytes", "134217728\n");
	put("v1/a/memory.usage_in_bytes", "33554432\n");
	cr_assert_eq(room(&limit), 96 * MIB);
	cr_assert_eq(limit, 128 * MIB);
}

Test(mc_memcg, this_process)
{
	/* Whatever this machine has: a limit is never below the room. */
	uint64_t limit = 0, r = mc_memcg_room(&limit);

	cr_assert(r == UINT64_MAX || r <= limit, "%llu %llu",
		  (unsigned long long)r, (unsigned long long)limit);
}
