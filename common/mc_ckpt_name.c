/* SPDX-License-Identifier: Apache-2.0 */
/* Checkpoint names, paths and shard counts (see mc_ckpt_name.h). */
#include <string.h>

#include "mc_ckpt_name.h"

bool mc_ckpt_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	return n && n <= MC_CKPT_NAME_MAX && !strchr(name, '/') &&
	       strcmp(name, ".") && strcmp(name, "..");
}

bool mc_ckpt_path_ok(const char *path)
{
	size_t n = path ? strlen(path) : 0;
	const char *p = path;

	if (!n || n > MC_CKPT_PATH_MAX)
		return false;
	for (;;) {
		const char *e = strchr(p, '/');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (!len || (len == 1 && p[0] == '.') ||
		    (len == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!e)
			return true;
		p = e + 1;
	}
}

uint64_t mc_ckpt_nshards(uint64_t size, uint64_t shard_size)
{
	return size ? (size - 1) / shard_size + 1 : 0;
}
