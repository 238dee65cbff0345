/* SPDX-License-Identifier: Apache-2.0 */
/*
 * te_register()/te_unregister(): check a buffer, find the file behind
 * te_mem_alloc() memory (mem.c) that same-host peers can map, change the
 * registration table (memreg.c) and publish the new descriptor
 * (publish.c) when remote-accessible buffers changed.
 *
 * Calls down only: memreg.c, mem.c, cuda.c, publish.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "te_int.h"
#include "mooncake/mc_err.h"

/* The location tag names device memory we cannot move yet. */
static bool is_device_location(const char *loc)
{
	return loc && (!strncmp(loc, "cuda:", 5) || !strncmp(loc, "gpu:", 4));
}

int te_register(struct te_engine *eng, void *addr, size_t len,
		const char *location, bool remote_accessible)
{
	uintptr_t a = (uintptr_t)addr;
	struct te_memreg *r;
	uint64_t off = 0, ino = 0;
	int rc;

	if (!addr || !len || a + len < a)
		return -EINVAL;
	if (is_device_location(location) || te__is_device_ptr(addr))
		return MC_ENOTSUPPORTED;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->addr = a;
	r->len = len;
	r->remote = remote_accessible;
	snprintf(r->location, sizeof(r->location), "%s",
		 location && *location ? location : "*");
	r->shm_path = te__mem_shm_path(a, len, &off, &ino);
	r->shm_offset = off;
	r->shm_ino = ino;

	rc = te__reg_insert(eng, r);
	if (rc) {
		te__reg_free(r);
		return rc;
	}
	return remote_accessible ? te__publish(eng) : 0;
}

int te_unregister(struct te_engine *eng, void *addr)
{
	struct te_memreg *r;
	int rc = te__reg_remove(eng, (uintptr_t)addr, &r);

	if (rc)
		return rc;
	rc = r->remote ? te__publish(eng) : 0;
	te__reg_free(r);
	return rc;
}
