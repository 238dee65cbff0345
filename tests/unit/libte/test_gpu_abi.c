/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libte/gpu_abi.h against the real cuda.h: libte calls the CUDA driver
 * through dlopen with declarations of its own, so that a build needs no
 * toolkit; a wrong value, type or versioned symbol name there would only
 * show on a GPU. This test is built where cuda.h is found
 * (scripts/cuda_header.sh fetches Debian's); elsewhere ctest reports it
 * skipped with the reason.
 *
 * Types are checked at compile time (a mismatch fails the build of this
 * test), symbol names and sizes at run time.
 */
#include <cuda.h>
#include <string.h>

#include <criterion/criterion.h>

#include "gpu_abi.h"

/* Each function's type in cuda.h is the one gpu_abi.h declares. GCC and
 * clang take an enum of non-negative values (CUresult, the attribute
 * enums) as compatible with unsigned int, which is how gpu_abi.h
 * declares them. */
#define CHECK_TYPE(field, api, sym, params, req)                         \
	_Static_assert(__builtin_types_compatible_p(__typeof__(api),     \
						    mc_cu_##field##_fn), \
		       #api ": cuda.h's type differs from gpu_abi.h's");
MC_CU_FUNCS(CHECK_TYPE)

_Static_assert(__builtin_types_compatible_p(CUresult, mc_cu_result), "");
_Static_assert(__builtin_types_compatible_p(CUdevice, mc_cu_device), "");
_Static_assert(__builtin_types_compatible_p(CUcontext, mc_cu_context), "");
_Static_assert(__builtin_types_compatible_p(CUstream, mc_cu_stream), "");
_Static_assert(__builtin_types_compatible_p(CUdeviceptr, mc_cu_deviceptr), "");
_Static_assert(__builtin_types_compatible_p(CUpointer_attribute,
					    mc_cu_pointer_attribute),
	       "");
_Static_assert(__builtin_types_compatible_p(CUipcMemHandle, mc_cu_ipc_handle),
	       "");
_Static_assert(sizeof(CUipcMemHandle) == MC_CU_IPC_HANDLE_SIZE, "");
_Static_assert(CU_IPC_HANDLE_SIZE == MC_CU_IPC_HANDLE_SIZE, "");

/* Every value gpu_abi.h passes or compares. */
_Static_assert(MC_CUDA_SUCCESS == CUDA_SUCCESS, "");
_Static_assert(MC_CU_POINTER_ATTRIBUTE_MEMORY_TYPE ==
		       CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
	       "");
_Static_assert(MC_CU_POINTER_ATTRIBUTE_IS_MANAGED ==
		       CU_POINTER_ATTRIBUTE_IS_MANAGED,
	       "");
_Static_assert(MC_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL ==
		       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
	       "");
_Static_assert(MC_CU_MEMORYTYPE_DEVICE == CU_MEMORYTYPE_DEVICE, "");
_Static_assert(MC_CU_MEMHOSTALLOC_PORTABLE == CU_MEMHOSTALLOC_PORTABLE, "");
_Static_assert(MC_CU_STREAM_NON_BLOCKING == CU_STREAM_NON_BLOCKING, "");
_Static_assert(MC_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS ==
		       CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS,
	       "");

#define STR(x) #x
#define XSTR(x) STR(x)

/* The name libte looks up is the symbol cuda.h binds the API name to
 * (cuStreamDestroy is cuStreamDestroy_v2, ...), without per-thread
 * default streams (libte uses streams of its own). */
Test(gpu_abi, symbol_names_are_cuda_h_s)
{
	int n = 0;
#define CHECK_SYM(field, api, sym, params, req)                        \
	cr_expect_str_eq(#sym, XSTR(api), "%s: cuda.h binds %s", #api, \
			 XSTR(api));                                   \
	n++;
	MC_CU_FUNCS(CHECK_SYM)
#undef CHECK_SYM
	cr_expect_eq(n, 17);
}

Test(gpu_abi, header_is_a_driver_api_header)
{
	/* 11.8 on bookworm; gpu_abi.h needs nothing newer than 10.2's API */
	cr_expect_geq(CUDA_VERSION, 10020);
}
