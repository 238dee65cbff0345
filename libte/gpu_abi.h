/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file gpu_abi.h
 * The part of the CUDA driver API (cuda.h) that libte calls through
 * dlopen (gpu.c), declared here so that no toolkit is needed to build.
 * Names are prefixed (mc_cu_*, MC_CU_*) so that a translation unit may
 * include cuda.h too: tests/unit/libte/test_gpu_abi.c does, and checks
 * every value, type and exported symbol name below against the real
 * header (skipped, saying so, where no cuda.h is installed;
 * scripts/cuda_header.sh fetches Debian's).
 *
 * The driver's ABI is stable across CUDA releases: a symbol keeps its
 * signature, and a changed one gets a new versioned name (_v2), which is
 * why the exported names are listed separately from the API names.
 */
#ifndef TE_GPU_ABI_H
#define TE_GPU_ABI_H

#include <stddef.h>

typedef unsigned int mc_cu_result; /* CUresult: an enum, values >= 0 */
typedef int mc_cu_device;
typedef struct CUctx_st *mc_cu_context;
typedef struct CUstream_st *mc_cu_stream;
typedef unsigned long long mc_cu_deviceptr;
typedef unsigned int mc_cu_pointer_attribute; /* an enum, values >= 0 */

#define MC_CU_IPC_HANDLE_SIZE 64
#ifndef __cuda_cuda_h__
/* CUipcMemHandle: opaque bytes, passed by value. */
struct CUipcMemHandle_st {
	char reserved[MC_CU_IPC_HANDLE_SIZE];
};
#endif
typedef struct CUipcMemHandle_st mc_cu_ipc_handle;

#define MC_CUDA_SUCCESS 0
#define MC_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define MC_CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define MC_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define MC_CU_MEMORYTYPE_DEVICE 2
#define MC_CU_MEMHOSTALLOC_PORTABLE 1
#define MC_CU_STREAM_NON_BLOCKING 1
#define MC_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 1

/*
 * The functions: X(field, API name, exported symbol, parameters,
 * required); #symbol is the name to dlsym. Required ones must all be there for GPU memory to be used;
 * the others (CUDA IPC, the cuda_ipc transport) only where present.
 */
#define MC_CU_FUNCS(X)                                                         \
	X(init, cuInit, cuInit, (unsigned int), 1)                             \
	X(device_get_count, cuDeviceGetCount, cuDeviceGetCount, (int *), 1)    \
	X(primary_ctx_retain, cuDevicePrimaryCtxRetain,                        \
	  cuDevicePrimaryCtxRetain, (mc_cu_context *, mc_cu_device), 1)        \
	X(ctx_set_current, cuCtxSetCurrent, cuCtxSetCurrent, (mc_cu_context),  \
	  1)                                                                   \
	X(ctx_get_current, cuCtxGetCurrent, cuCtxGetCurrent,                   \
	  (mc_cu_context *), 1)                                                \
	X(pointer_get_attribute, cuPointerGetAttribute, cuPointerGetAttribute, \
	  (void *, mc_cu_pointer_attribute, mc_cu_deviceptr), 1)               \
	X(memcpy_async, cuMemcpyAsync, cuMemcpyAsync,                          \
	  (mc_cu_deviceptr, mc_cu_deviceptr, size_t, mc_cu_stream), 1)         \
	X(stream_create, cuStreamCreate, cuStreamCreate,                       \
	  (mc_cu_stream *, unsigned int), 1)                                   \
	X(stream_destroy, cuStreamDestroy, cuStreamDestroy_v2, (mc_cu_stream), \
	  1)                                                                   \
	X(stream_synchronize, cuStreamSynchronize, cuStreamSynchronize,        \
	  (mc_cu_stream), 1)                                                   \
	X(mem_host_alloc, cuMemHostAlloc, cuMemHostAlloc,                      \
	  (void **, size_t, unsigned int), 1)                                  \
	X(mem_free_host, cuMemFreeHost, cuMemFreeHost, (void *), 1)            \
	X(get_error_string, cuGetErrorString, cuGetErrorString,                \
	  (mc_cu_result, const char **), 1)                                    \
	X(mem_get_address_range, cuMemGetAddressRange,                         \
	  cuMemGetAddressRange_v2,                                             \
	  (mc_cu_deviceptr *, size_t *, mc_cu_deviceptr), 0)                   \
	X(ipc_get_mem_handle, cuIpcGetMemHandle, cuIpcGetMemHandle,            \
	  (mc_cu_ipc_handle *, mc_cu_deviceptr), 0)                            \
	X(ipc_open_mem_handle, cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2,      \
	  (mc_cu_deviceptr *, mc_cu_ipc_handle, unsigned int), 0)              \
	X(ipc_close_mem_handle, cuIpcCloseMemHandle, cuIpcCloseMemHandle,      \
	  (mc_cu_deviceptr), 0)

/* mc_cu_<field>_fn: each function's type. */
#define MC_CU_FN_TYPE(field, api, sym, params, req) \
	typedef mc_cu_result mc_cu_##field##_fn params;
MC_CU_FUNCS(MC_CU_FN_TYPE)
#undef MC_CU_FN_TYPE

#endif
