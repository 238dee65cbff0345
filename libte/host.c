/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host identity: two engines may share memory only when they run on the
 * same boot of the same machine and in the same network namespace (a
 * namespace stands for a host in multi-host tests and containers). The id
 * is "<boot id>/<net namespace inode>".
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "te_int.h"

int te__host_id(char *buf, size_t len)
{
	char boot[64] = "";
	struct stat st;
	FILE *f;

	f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!f)
		return -errno;
	if (!fgets(boot, sizeof(boot), f))
		boot[0] = '\0';
	fclose(f);
	boot[strcspn(boot, "\n")] = '\0';
	if (stat("/proc/self/ns/net", &st))
		return -errno;
	if ((size_t)snprintf(buf, len, "%s/%llu", boot,
			     (unsigned long long)st.st_ino) >= len)
		return -ENAMETOOLONG;
	return 0;
}
