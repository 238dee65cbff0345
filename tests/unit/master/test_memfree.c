/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a process's memory cgroups still allow (master/memfree.c), read
 * from a made-up /proc/self/cgroup and cgroup filesystem in a temporary
 * directory: cgroup v2 (what Debian 12 and current container runtimes
 * use: the machine that runs the integration test has only v1's memory
 * controller), v1, parents with a tighter limit, "max", a namespaced
 * root, usage over the limit.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "memfree.h"

static char root[64];

static void put(const char *rel, const char *text)
{
	char path[256], dir[256];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	/* every directory on the way */
	for (char *p = strchr(path + strlen(root) + 1, '/'); p;
	     p = strchr(p + 1, '/')) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(p - path), path);
		cr_assert(!mkdir(dir, 0700) || errno == EEXIST, "%s", dir);
	}
	FILE *f = fopen(path, "w");
	cr_assert(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

static uint64_t room(void)
{
	char cg[128], fs[128];

	snprintf(cg, sizeof(cg), "%s/cgroup", root);
	snprintf(fs, sizeof(fs), "%s/fs", root);
	return mst_cgroup_room(cg, fs);
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/test_memfree.XXXXXX");
	cr_assert(mkdtemp(root));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(memfree, .init = setup, .fini = teardown);

Test(memfree, v2_the_tightest_of_the_cgroup_and_its_parents)
{
	put("cgroup", "0::/pod/ctr\n");
	put("fs/pod/ctr/memory.max", "max\n");
	put("fs/pod/ctr/memory.current", "100\n");
	put("fs/pod/memory.max", "1000\n");
	put("fs/pod/memory.current", "300\n");
	cr_assert_eq(room(), 700);
	/* The cgroup's own limit, when tighter. */
	put("fs/pod/ctr/memory.max", "250\n");
	cr_assert_eq(room(), 150);
}

Test(memfree, v2_namespaced_root)
{
	/* A container with its own cgroup namespace sees its cgroup as /. */
	put("cgroup", "0::/\n");
	put("fs/memory.max", "500\n");
	put("fs/memory.current", "200\n");
	cr_assert_eq(room(), 300);
}

Test(memfree, v2_beside_v1_under_unified)
{
	put("cgroup", "1:cpu:/\n0::/user.slice\n");
	put("fs/unified/user.slice/memory.max", "4096\n");
	put("fs/unified/user.slice/memory.current", "1024\n");
	cr_assert_eq(room(), 3072);
}

Test(memfree, v1_memory_controller_among_others)
{
	put("cgroup", "5:cpuacct,memory:/a/b\n3:cpu:/a/b\n");
	put("fs/memory/a/b/memory.limit_in_bytes", "9223372036854771712\n");
	put("fs/memory/a/b/memory.usage_in_bytes", "5\n");
	put("fs/memory/a/memory.limit_in_bytes", "800\n");
	put("fs/memory/a/memory.usage_in_bytes", "100\n");
	/* cpu's hierarchy has no memory files: it does not count. */
	put("fs/cpu/a/b/memory.limit_in_bytes", "1\n");
	cr_assert_eq(room(), 700);
}

Test(memfree, none_set_and_over_the_limit)
{
	put("cgroup", "0::/free\n4:memory:/free\n");
	put("fs/free/memory.max", "max\n");
	put("fs/free/memory.current", "100\n");
	cr_assert_eq(room(), UINT64_MAX);
	/* Usage over the limit (page cache not yet reclaimed): nothing. */
	put("fs/memory/free/memory.limit_in_bytes", "100\n");
	put("fs/memory/free/memory.usage_in_bytes", "150\n");
	cr_assert_eq(room(), 0);
}

Test(memfree, this_process)
{
	/* Whatever this machine has: a number, at most what the cgroups
	 * allow. */
	uint64_t all = mst_mem_free();

	cr_assert_gt(all, 0);
	cr_assert_leq(all,
		      mst_cgroup_room("/proc/self/cgroup", "/sys/fs/cgroup"));
}
