/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU memory through the CUDA driver API, loaded at run time: one build
 * serves hosts with and without CUDA (docs/design.md, "GPU memory").
 * libcuda.so.1 (the driver's library, ABI-stable across CUDA releases)
 * is used once the process has loaded it (PyTorch, the CUDA runtime), or
 * the library MC_CUDA_LIBRARY names is loaded (the tests' stand-in,
 * tests/tools/fake_cuda.c, which proves the staging logic on CPUs, not
 * the driver). Otherwise nothing is device memory and every call here is
 * a cheap "no".
 *
 * Only what staging needs: is a pointer device memory (and of which
 * device), a copy between any two addresses (unified addressing: the
 * driver tells the direction), pinned host buffers, streams. Every call
 * runs with the pointer's device's primary context current (the one
 * PyTorch and the CUDA runtime use).
 *
 * Calls down only: nothing of libte. Threads: any.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_abi.h"
#include "mc_log.h"
#include "mc_time.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

#define GPU_MAX_DEVICES 64
_Static_assert(MC_CU_IPC_HANDLE_SIZE == TE_GPU_IPC_HANDLE_LEN,
	       "an IPC handle in a descriptor is the driver's");

static struct {
#define FIELD(field, api, sym, params, req) mc_cu_##field##_fn *field;
	MC_CU_FUNCS(FIELD)
#undef FIELD
} cu;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int state; /* 0: not loaded (yet), 1: usable, -1: never */
static _Atomic uint64_t next_try_ns; /* while 0: look again after this */
static int n_devices;
static const char *why = "this process has not loaded the CUDA driver";
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static mc_cu_context ctxs[GPU_MAX_DEVICES];

/*
 * MC_CUDA_LIBRARY is loaded when named. Otherwise only a driver the
 * process has already loaded is used (RTLD_NOLOAD): a process that never
 * touched CUDA holds no device memory, and must not pay for a context on
 * a GPU (hundreds of MiB of device memory) because it registered host
 * buffers. That is checked again on later calls, since frameworks load
 * CUDA when they first need it. Caller holds load_lock.
 */
static void load(void)
{
	const char *path = getenv("MC_CUDA_LIBRARY");
	void *lib = path && *path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) :
				    dlopen("libcuda.so.1",
					   RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);

	if (!lib) {
		if (path && *path) {
			why = "the library MC_CUDA_LIBRARY names cannot be "
			      "loaded";
			mc_log_warn("te", "MC_CUDA_LIBRARY=%s: %s", path,
				    dlerror());
			atomic_store(&state, -1);
		}
		return;
	}
	/* Required ones: all or nothing; optional ones where present. */
#define SYM(field, api, sym, params, req)                    \
	*(void **)&cu.field = dlsym(lib, #sym);              \
	if (req && !cu.field) {                              \
		why = "a driver function is missing: " #sym; \
		return;                                      \
	}
	MC_CU_FUNCS(SYM)
#undef SYM
	if (cu.init(0) != MC_CUDA_SUCCESS ||
	    cu.device_get_count(&n_devices) != MC_CUDA_SUCCESS ||
	    n_devices <= 0) {
		why = "the driver reports no usable device";
		atomic_store(&state, -1);
		return;
	}
	if (n_devices > GPU_MAX_DEVICES)
		n_devices = GPU_MAX_DEVICES;
	why = NULL;
	atomic_store(&state, 1);
	mc_log_debug("te", "gpu: %d device(s) through %s", n_devices,
		     path && *path ? path : "libcuda.so.1");
}

bool te__gpu_available(const char **reason)
{
	/* Looking for a driver the process may have loaded since costs a
	 * dlopen: at most once a second, so a hot path without CUDA pays
	 * one clock read. */
	if (atomic_load(&state) == 0 &&
	    mc_mono_ns() >= atomic_load(&next_try_ns)) {
		pthread_mutex_lock(&load_lock);
		if (atomic_load(&state) == 0)
			load();
		atomic_store(&next_try_ns, mc_mono_ns() + 1000000000ull);
		pthread_mutex_unlock(&load_lock);
	}
	if (reason)
		*reason = why;
	return atomic_load(&state) == 1;
}

int te__gpu_device_of(const void *p)
{
	unsigned type = 0;
	int managed = 0, dev = -1;
	mc_cu_deviceptr d = (mc_cu_deviceptr)(uintptr_t)p;
	mc_cu_context cur = NULL;

	if (!te__gpu_available(NULL))
		return -1;
	/* Attribute queries want a current context: device 0's primary
	 * one when this thread has none (unified addressing answers for
	 * every device's pointers from any context). */
	if ((cu.ctx_get_current(&cur) != MC_CUDA_SUCCESS || !cur) &&
	    te__gpu_use(0))
		return -1;
	if (cu.pointer_get_attribute(&type, MC_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				     d) != MC_CUDA_SUCCESS ||
	    type != MC_CU_MEMORYTYPE_DEVICE)
		return -1; /* host memory, or unknown to the driver */
	/* Managed memory is reachable from the host: no staging. */
	if (cu.pointer_get_attribute(&managed,
				     MC_CU_POINTER_ATTRIBUTE_IS_MANAGED,
				     d) == MC_CUDA_SUCCESS &&
	    managed)
		return -1;
	if (cu.pointer_get_attribute(&dev,
				     MC_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				     d) != MC_CUDA_SUCCESS ||
	    dev < 0 || dev >= n_devices)
		return -1;
	return dev;
}

static int fail(mc_cu_result r, const char *what)
{
	const char *s = NULL;

	if (cu.get_error_string(r, &s) != MC_CUDA_SUCCESS || !s)
		s = "unknown error";
	mc_log_warn("te", "gpu: %s: %s (%d)", what, s, r);
	return -EIO;
}

int te__gpu_use(int dev)
{
	mc_cu_context c;
	mc_cu_result r = MC_CUDA_SUCCESS;

	if (!te__gpu_available(NULL) || dev < 0 || dev >= n_devices)
		return MC_ENOTSUPPORTED;
	pthread_mutex_lock(&ctx_lock);
	if (!ctxs[dev])
		r = cu.primary_ctx_retain(&ctxs[dev], dev);
	c = ctxs[dev];
	pthread_mutex_unlock(&ctx_lock);
	if (r != MC_CUDA_SUCCESS)
		return fail(r, "cuDevicePrimaryCtxRetain");
	r = cu.ctx_set_current(c);
	return r == MC_CUDA_SUCCESS ? 0 : fail(r, "cuCtxSetCurrent");
}

int te__gpu_stream_create(void **out)
{
	mc_cu_result r = cu.stream_create((mc_cu_stream *)out,
					  MC_CU_STREAM_NON_BLOCKING);

	return r == MC_CUDA_SUCCESS ? 0 : fail(r, "cuStreamCreate");
}

void te__gpu_stream_destroy(void *s)
{
	if (s)
		(void)cu.stream_destroy(s);
}

int te__gpu_copy_async(void *dst, const void *src, size_t len, void *stream)
{
	mc_cu_result r = cu.memcpy_async((mc_cu_deviceptr)(uintptr_t)dst,
					 (mc_cu_deviceptr)(uintptr_t)src, len,
					 stream);

	return r == MC_CUDA_SUCCESS ? 0 : fail(r, "cuMemcpyAsync");
}

int te__gpu_sync(void *stream)
{
	mc_cu_result r = cu.stream_synchronize(stream);

	return r == MC_CUDA_SUCCESS ? 0 : fail(r, "cuStreamSynchronize");
}

int te__gpu_copy(void *dst, const void *src, size_t len, void *stream)
{
	int rc = te__gpu_copy_async(dst, src, len, stream);

	return rc ? rc : te__gpu_sync(stream);
}

int te__gpu_host_alloc(size_t len, void **out)
{
	mc_cu_result r =
		cu.mem_host_alloc(out, len, MC_CU_MEMHOSTALLOC_PORTABLE);

	return r == MC_CUDA_SUCCESS ? 0 : fail(r, "cuMemHostAlloc");
}

void te__gpu_host_free(void *p)
{
	if (p)
		(void)cu.mem_free_host(p);
}

static bool ipc_usable(void)
{
	return te__gpu_available(NULL) && cu.mem_get_address_range &&
	       cu.ipc_get_mem_handle && cu.ipc_open_mem_handle &&
	       cu.ipc_close_mem_handle;
}

int te__gpu_ipc_export(const void *p, uint8_t handle[TE_GPU_IPC_HANDLE_LEN],
		       uintptr_t *base, size_t *size)
{
	mc_cu_deviceptr b = 0;
	mc_cu_ipc_handle h;
	mc_cu_result r;

	if (!ipc_usable())
		return MC_ENOTSUPPORTED;
	r = cu.mem_get_address_range(&b, size, (mc_cu_deviceptr)(uintptr_t)p);
	if (r != MC_CUDA_SUCCESS)
		return fail(r, "cuMemGetAddressRange");
	r = cu.ipc_get_mem_handle(&h, b);
	if (r != MC_CUDA_SUCCESS)
		return fail(r, "cuIpcGetMemHandle");
	memcpy(handle, h.reserved, sizeof(h.reserved));
	*base = (uintptr_t)b;
	return 0;
}

int te__gpu_ipc_open(const uint8_t handle[TE_GPU_IPC_HANDLE_LEN], void **out)
{
	mc_cu_ipc_handle h;
	mc_cu_deviceptr p = 0;
	mc_cu_result r;

	if (!ipc_usable())
		return MC_ENOTSUPPORTED;
	memcpy(h.reserved, handle, sizeof(h.reserved));
	r = cu.ipc_open_mem_handle(&p, h,
				   MC_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	if (r != MC_CUDA_SUCCESS)
		return fail(r, "cuIpcOpenMemHandle");
	*out = (void *)(uintptr_t)p;
	return 0;
}

void te__gpu_ipc_close(void *p)
{
	if (p && ipc_usable())
		(void)cu.ipc_close_mem_handle((mc_cu_deviceptr)(uintptr_t)p);
}

/* ---- the public calls (te.h) ---- */

int te_mem_device(const void *p)
{
	return te__gpu_device_of(p);
}

int te_mem_copy(void *dst, const void *src, size_t len)
{
	int dev = te__gpu_device_of(dst), rc;

	if (dev < 0)
		dev = te__gpu_device_of(src);
	if (dev < 0) {
		memcpy(dst, src, len);
		return 0;
	}
	rc = te__gpu_use(dev);
	return rc ? rc : te__gpu_copy(dst, src, len, NULL);
}
