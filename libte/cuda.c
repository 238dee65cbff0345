/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Recognise CUDA device pointers so that registering one fails with a
 * named error (MC_ENOTSUPPORTED) until GPU transfers land. Built against
 * the CUDA runtime when the toolkit is present (compile-tested; there is
 * no GPU on the CI machines); otherwise nothing is a device pointer.
 */
#include <stdbool.h>

#include "mc_build_config.h"
#include "te_int.h"

#if MC_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <pthread.h>

static int n_devices;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void count_devices(void)
{
	if (cudaGetDeviceCount(&n_devices) != cudaSuccess)
		n_devices = 0;
	(void)cudaGetLastError();
}

bool te__is_device_ptr(const void *p)
{
	struct cudaPointerAttributes a;

	pthread_once(&once, count_devices);
	if (n_devices == 0)
		return false;
	if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		(void)cudaGetLastError();
		return false;
	}
	return a.type == cudaMemoryTypeDevice ||
	       a.type == cudaMemoryTypeManaged;
}
#else
bool te__is_device_ptr(const void *p)
{
	(void)p;
	return false;
}
#endif
