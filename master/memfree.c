/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory free for this process (memfree.h): the system's, or its
 * memory cgroups' when they allow less.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "memfree.h"

/* MemAvailable of /proc/meminfo in bytes; 0 when unknown. */
static uint64_t available(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[128];
	unsigned long long kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb << 10;
}

/* Whether the comma-separated list holds word. */
static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list;; p++) {
		if (!strncmp(p, word, n) && (p[n] == ',' || !p[n]))
			return true;
		if (!(p = strchr(p, ',')))
			return false;
	}
}

/* A number from a cgroup file ("max" reads as none); 0 when read. */
static int read_u64(const char *dir, const char *name, uint64_t *v)
{
	char path[4200], buf[32];
	unsigned long long x;
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "re");
	if (!f)
		return -1;
	ok = fgets(buf, sizeof(buf), f) && sscanf(buf, "%llu", &x) == 1;
	fclose(f);
	if (!ok)
		return -1;
	*v = x;
	return 0;
}

/* What the memory cgroup at base + path and each of its parents still
 * allows: the smallest limit - usage (UINT64_MAX where none is set). */
static uint64_t cgroup_room_at(const char *base, const char *path,
			       const char *max, const char *cur)
{
	char dir[4096];
	uint64_t room = UINT64_MAX, lim, use;
	size_t blen = strlen(base), len;

	if (snprintf(dir, sizeof(dir), "%s%s", base, path) >= (int)sizeof(dir))
		return room;
	for (;;) {
		if (!read_u64(dir, max, &lim) && !read_u64(dir, cur, &use)) {
			uint64_t left = lim > use ? lim - use : 0;

			room = left < room ? left : room;
		}
		len = strlen(dir);
		if (len <= blen)
			break; /* the hierarchy's root was the last */
		while (len > blen && dir[len - 1] != '/')
			len--;
		dir[len > blen ? len - 1 : blen] = '\0'; /* the parent */
	}
	return room;
}

uint64_t mst_cgroup_room(const char *cgroups, const char *sysfs)
{
	FILE *f = fopen(cgroups, "re");
	char line[4096], base[512];
	uint64_t room = UINT64_MAX, r;

	if (!f)
		return room;
	while (fgets(line, sizeof(line), f)) {
		char *ctl = strchr(line, ':'), *path;

		if (!ctl || !(path = strchr(ctl + 1, ':')))
			continue;
		*path++ = '\0';
		path[strcspn(path, "\n")] = '\0';
		if (!strcmp(ctl, ":")) {
			/* v2: the unified hierarchy, alone or beside v1's */
			r = cgroup_room_at(sysfs, path, "memory.max",
					   "memory.current");
			if (r < room)
				room = r;
			snprintf(base, sizeof(base), "%s/unified", sysfs);
			r = cgroup_room_at(base, path, "memory.max",
					   "memory.current");
		} else if (has_word(ctl + 1, "memory")) {
			snprintf(base, sizeof(base), "%s/memory", sysfs);
			r = cgroup_room_at(base, path, "memory.limit_in_bytes",
					   "memory.usage_in_bytes");
		} else {
			continue;
		}
		if (r < room)
			room = r;
	}
	fclose(f);
	return room;
}

uint64_t mst_mem_free(void)
{
	uint64_t sys = available(),
		 cg = mst_cgroup_room("/proc/self/cgroup", "/sys/fs/cgroup");

	return cg < sys ? cg : sys;
}
