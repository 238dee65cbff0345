/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How much memory this process may still take before its memory cgroup
 * (a container's limit, a systemd unit's MemoryMax) reclaims or kills it:
 * the least, over the process's cgroup and its ancestors that have a
 * limit, of the limit less the usage that cannot be reclaimed (usage less
 * inactive file pages, as container runtimes count a working set). Both
 * hierarchies: v2 (memory.max, memory.current, memory.stat inactive_file)
 * and v1's memory controller (memory.limit_in_bytes, memory.usage_in_bytes,
 * memory.stat total_inactive_file). A path that is not there is walked up
 * from: a container without its own cgroup namespace sees its host's path
 * in /proc/self/cgroup, and its own cgroup at the mount's root.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_memcg.h"

/* The first unsigned number in path, or UINT64_MAX ("max", absent). */
static uint64_t read_u64(const char *path)
{
	char buf[64];
	FILE *f = fopen(path, "re");
	uint64_t v = UINT64_MAX;

	if (!f)
		return UINT64_MAX;
	if (fgets(buf, sizeof(buf), f) && buf[0] >= '0' && buf[0] <= '9')
		v = strtoull(buf, NULL, 10);
	fclose(f);
	return v;
}

/* The value of "name N" in a memory.stat file, or 0. */
static uint64_t read_stat(const char *path, const char *name)
{
	char line[256];
	size_t n = strlen(name);
	uint64_t v = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, n) && line[n] == ' ') {
			v = strtoull(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* Whether the comma-separated list holds word. */
static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; *p; p += strcspn(p, ",")) {
		p += *p == ',';
		if (!strncmp(p, word, n) && (p[n] == ',' || !p[n]))
			return true;
	}
	return false;
}

/* This process's path in the hierarchy of one /proc/self/cgroup line
 * kind: v2's "0::" (v2 true) or the v1 line whose controllers include
 * "memory". False when there is none. */
static bool cgroup_path(const char *proc_cgroup, bool v2, char *out,
			size_t outlen)
{
	char line[PATH_MAX + 64];
	bool found = false;
	FILE *f = fopen(proc_cgroup, "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'),
		     *c2 = c1 ? strchr(c1 + 1, ':') : 0;

		if (!c2)
			continue;
		*c1 = *c2 = 0; /* line: the id, c1 + 1: the controllers */
		if (v2 ? !strcmp(line, "0") && c1[1] == 0 :
			 strcmp(line, "0") && has_word(c1 + 1, "memory")) {
			c2[1 + strcspn(c2 + 1, "\n")] = 0;
			found = snprintf(out, outlen, "%s", c2 + 1) <
				(int)outlen;
		}
	}
	fclose(f);
	return found;
}

/* The least room over dir's levels from the process's path up to the
 * mount's root, in one hierarchy's file names. */
static uint64_t walk(const char *root, const char *rel, const char *max_f,
		     const char *use_f, const char *inactive, uint64_t *limit)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	uint64_t room = UINT64_MAX;
	size_t rootlen = strlen(root);

	if (snprintf(dir, sizeof(dir), "%s%s", root, rel) >= (int)sizeof(dir))
		return UINT64_MAX;
	for (;;) {
		size_t len = strlen(dir);
		uint64_t max, use, inact, left;

		while (len > rootlen && dir[len - 1] == '/')
			dir[--len] = 0;
		snprintf(path, sizeof(path), "%s/%s", dir, max_f);
		max = read_u64(path);
		/* v1 writes "no limit" as a huge page-rounded number. */
		if (max < (UINT64_MAX >> 2)) {
			snprintf(path, sizeof(path), "%s/%s", dir, use_f);
			use = read_u64(path);
			snprintf(path, sizeof(path), "%s/memory.stat", dir);
			inact = read_stat(path, inactive);
			if (use != UINT64_MAX) {
				use = use > inact ? use - inact : 0;
				left = use < max ? max - use : 0;
				if (left < room) {
					room = left;
					*limit = max;
				}
			}
		}
		if (len <= rootlen)
			break;
		char *slash = strrchr(dir + rootlen, '/');

		if (!slash)
			break;
		*slash = 0;
	}
	return room;
}

uint64_t mc_memcg_room_at(const char *proc_cgroup, const char *v2_root,
			  const char *v1_root, uint64_t *limit)
{
	char rel[PATH_MAX];
	uint64_t room = UINT64_MAX, lim = UINT64_MAX, r;

	if (cgroup_path(proc_cgroup, true, rel, sizeof(rel))) {
		r = walk(v2_root, rel, "memory.max", "memory.current",
			 "inactive_file", &lim);
		room = r < room ? r : room;
	}
	if (cgroup_path(proc_cgroup, false, rel, sizeof(rel))) {
		uint64_t lim1 = UINT64_MAX;

		r = walk(v1_root, rel, "memory.limit_in_bytes",
			 "memory.usage_in_bytes", "total_inactive_file", &lim1);
		if (r < room) {
			room = r;
			lim = lim1;
		}
	}
	if (limit)
		*limit = lim;
	return room;
}

uint64_t mc_memcg_room(uint64_t *limit)
{
	return mc_memcg_room_at("/proc/self/cgroup", "/sys/fs/cgroup",
				"/sys/fs/cgroup/memory", limit);
}
