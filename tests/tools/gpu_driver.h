/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The test tools' own use of the CUDA driver library (the one libte loads:
 * MC_CUDA_LIBRARY, else libcuda.so.1): allocate device memory and copy to
 * and from it, to give libte and libmooncake device buffers to move.
 * Header-only, for te_gpu and store_shell.
 */
#ifndef MC_TEST_GPU_DRIVER_H
#define MC_TEST_GPU_DRIVER_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

struct gpu_driver {
	int (*init)(unsigned);
	int (*retain)(void **, int);
	int (*set)(void *);
	int (*alloc)(unsigned long long *, size_t);
	int (*free)(unsigned long long);
	int (*copy)(unsigned long long, unsigned long long, size_t, void *);
	int (*sync)(void *);
	void (*stats)(int, uint64_t *, uint64_t *); /* stand-in only */
	void (*fail)(int, int, int); /* stand-in only: fault injection */
	void *ctx;
};

/* Load the driver and make device 0's primary context current on this
 * thread: 0 or -1. */
static inline int gpu_driver_load(struct gpu_driver *g)
{
	const char *path = getenv("MC_CUDA_LIBRARY");
	void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW);

	if (!lib)
		return -1;
	*(void **)&g->init = dlsym(lib, "cuInit");
	*(void **)&g->retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
	*(void **)&g->set = dlsym(lib, "cuCtxSetCurrent");
	*(void **)&g->alloc = dlsym(lib, "cuMemAlloc_v2");
	*(void **)&g->free = dlsym(lib, "cuMemFree_v2");
	*(void **)&g->copy = dlsym(lib, "cuMemcpyAsync");
	*(void **)&g->sync = dlsym(lib, "cuStreamSynchronize");
	*(void **)&g->stats = dlsym(lib, "mc_fake_cuda_stats");
	*(void **)&g->fail = dlsym(lib, "mc_fake_cuda_fail");
	if (!g->init || !g->retain || !g->set || !g->alloc || !g->free ||
	    !g->copy || !g->sync || g->init(0) || g->retain(&g->ctx, 0) ||
	    g->set(g->ctx))
		return -1;
	return 0;
}

static inline void *gpu_alloc(struct gpu_driver *g, size_t len)
{
	unsigned long long p = 0;

	return g->alloc(&p, len) ? NULL : (void *)(uintptr_t)p;
}

static inline void gpu_free(struct gpu_driver *g, void *p)
{
	if (p)
		(void)g->free((uintptr_t)p);
}

/* A copy between any two addresses, finished on return: 0 or -1. */
static inline int gpu_copy(struct gpu_driver *g, void *dst, const void *src,
			   size_t len)
{
	return g->copy((uintptr_t)dst, (uintptr_t)src, len, NULL) ||
			       g->sync(NULL) ?
		       -1 :
		       0;
}

#endif
