/* SPDX-License-Identifier: Apache-2.0 */
/*
 * te_register()/te_unregister(): check a buffer, find the file behind
 * te_mem_alloc() memory (mem.c) that same-host peers can map, change the
 * registration table (memreg.c) and publish the new descriptor
 * (publish.c) when remote-accessible buffers changed.
 *
 * Device memory (CUDA) is registered like host memory, marked with its
 * device: requests from it are staged (stage.c), peers reach it through
 * the tcp server's staging, and it is never offered to same-host peers'
 * mappings.
 *
 * Transports keep per-buffer state (rdma registers the buffer on its
 * NICs) through their reg_add/reg_remove ops, before a buffer enters the
 * table and after it left it.
 *
 * Calls down only: memreg.c, mem.c, gpu.c, publish.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_log.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

/* "cuda:N" / "gpu:N": upstream's location tags of device memory. */
static bool is_device_location(const char *loc)
{
	return loc && (!strncmp(loc, "cuda:", 5) || !strncmp(loc, "gpu:", 4));
}

/*
 * Which memory addr is: the driver decides (a pointer it calls device
 * memory is staged, whatever the tag says); a device tag without a driver
 * to ask is refused, since the bytes cannot be reached.
 */
static int gpu_of(void *addr, const char *location, int *gpu)
{
	const char *why;
	int dev = te__gpu_device_of(addr);

	*gpu = dev + 1;
	if (dev < 0 && is_device_location(location) &&
	    !te__gpu_available(&why)) {
		mc_log_warn("te", "register %p at %s: %s", addr, location, why);
		return MC_ENOTSUPPORTED;
	}
	return 0;
}

void te__tps_reg_remove(struct te_engine *eng, struct te_memreg *r)
{
	for (int i = TE_TP_COUNT - 1; i >= 0; i--) {
		struct te_transport *tp = eng->tps[i];

		if (tp && tp->ops->reg_remove)
			tp->ops->reg_remove(tp, r);
	}
}

int te__tps_reg_add(struct te_engine *eng, struct te_memreg *r)
{
	for (int i = 0; i < TE_TP_COUNT; i++) {
		struct te_transport *tp = eng->tps[i];
		int rc = tp && tp->ops->reg_add ? tp->ops->reg_add(tp, r) : 0;

		if (rc) {
			te__tps_reg_remove(eng, r);
			return rc;
		}
	}
	return 0;
}

int te_register(struct te_engine *eng, void *addr, size_t len,
		const char *location, bool remote_accessible)
{
	return te_register_owned(eng, addr, len, location, remote_accessible,
				 NULL);
}

int te_register_owned(struct te_engine *eng, void *addr, size_t len,
		      const char *location, bool remote_accessible,
		      const char *owner)
{
	uintptr_t a = (uintptr_t)addr;
	struct te_memreg *r;
	uint64_t off = 0, ino = 0;
	int rc, gpu;

	if (te__forked(eng))
		return MC_EFORKED;
	if (!addr || !len || a + len < a ||
	    (owner && strlen(owner) >= TE_OWNER_LEN))
		return -EINVAL;
	rc = gpu_of(addr, location, &gpu);
	if (rc)
		return rc;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->addr = a;
	r->len = len;
	r->remote = remote_accessible;
	r->gpu = gpu;
	if (gpu)
		snprintf(r->location, sizeof(r->location), "cuda:%d", gpu - 1);
	else
		snprintf(r->location, sizeof(r->location), "%s",
			 location && *location ? location : "*");
	if (!gpu)
		r->shm_path = te__mem_shm_path(a, len, &off, &ino, r->shm_tag);
	r->shm_offset = off;
	r->shm_ino = ino;
	snprintf(r->owner, sizeof(r->owner), "%s", owner ? owner : "");

	rc = te__tps_reg_add(eng, r);
	if (rc) {
		te__reg_free(r);
		return rc;
	}
	rc = te__reg_insert(eng, r);
	if (rc) {
		te__tps_reg_remove(eng, r);
		te__reg_free(r);
		return rc;
	}
	return remote_accessible ? te__publish(eng) : 0;
}

int te_unregister(struct te_engine *eng, void *addr)
{
	struct te_memreg *r;
	int rc;

	if (te__forked(eng))
		return MC_EFORKED;
	rc = te__reg_remove(eng, (uintptr_t)addr, &r);
	if (rc)
		return rc;
	rc = r->remote ? te__publish(eng) : 0;
	te__tps_reg_remove(eng, r);
	te__reg_free(r);
	return rc;
}
