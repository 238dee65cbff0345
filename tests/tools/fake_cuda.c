/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A STAND-IN for the CUDA driver library (libcuda.so.1), for tests on
 * machines without a GPU: libte loads it when MC_CUDA_LIBRARY names it.
 * It proves libte's GPU logic (staging, which side copies, contexts,
 * streams), never the driver or a device. docs/testing.md says so.
 *
 * "Device memory" (cuMemAlloc_v2) is a memfd mapped twice: the address
 * handed out is mapped PROT_NONE, so any host access to it faults, as a
 * device pointer would on a real machine; the stand-in's own copies go
 * through a second, writable mapping. cuMemcpyAsync only queues a copy on
 * its stream; the copy happens at cuStreamSynchronize, so code that uses
 * a buffer before waiting reads stale bytes and fails its test. Calls
 * that need a context fail with CUDA_ERROR_INVALID_CONTEXT when the
 * calling thread has none. MC_FAKE_CUDA_DEVICES (1) devices.
 *
 * For the test tools: cuMemAlloc_v2, cuMemFree_v2, mc_fake_cuda_stats
 * (copies and bytes per direction) and mc_fake_cuda_fail (the driver
 * failing copies on streams: fault injection).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpu_abi.h"

/* The stand-in's functions have exactly the types libte calls them with
 * (libte/gpu_abi.h, itself checked against cuda.h by test_gpu_abi). */
typedef mc_cu_result CUresult;
typedef mc_cu_deviceptr CUdeviceptr;
typedef mc_cu_ipc_handle CUipcMemHandle;
#define DECL(field, api, sym, params, req) mc_cu_##field##_fn sym;
MC_CU_FUNCS(DECL)
#undef DECL
#define OK 0
#define ERR_INVALID_VALUE 1
#define ERR_OUT_OF_MEMORY 2
#define ERR_NOT_INITIALIZED 3
#define ERR_INVALID_DEVICE 101
#define ERR_INVALID_CONTEXT 201
#define MAX_ALLOCS 256

struct alloc {
	uintptr_t dev; /* PROT_NONE view: the "device pointer" */
	char *shadow; /* writable view of the same pages */
	size_t len;
	int device;
	int fd; /* the memfd (IPC handles name it), -1 for an opened one */
	int opened; /* mapped from another process's handle */
};

/* CUipcMemHandle: 64 bytes by value; ours holds the exporter's pid and
 * memfd number (another process opens /proc/<pid>/fd/<n>, as a real
 * handle works only across processes of one host). */
struct fake_handle {
	uint32_t magic, pid;
	int32_t fd, device;
	uint64_t len;
};
#define HANDLE_MAGIC 0x4d434950u

struct copy {
	struct copy *next;
	void *dst;
	const void *src;
	size_t len;
	int dir; /* 0 H2H, 1 H2D, 2 D2H, 3 D2D */
};

struct stream {
	pthread_mutex_t lock;
	struct copy *head, *tail;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct alloc allocs[MAX_ALLOCS];
static int n_devices = -1;
static __thread int current; /* device + 1, 0: no context */
static struct stream null_stream = { PTHREAD_MUTEX_INITIALIZER, NULL, NULL };
static uint64_t stats[4][2]; /* per direction: copies, bytes */

/* The shadow address of [p, p + len) if it is device memory; NULL if it
 * is not; *bad when it straddles an allocation's end. */
static void *shadow_of(uintptr_t p, size_t len, int *device, int *bad)
{
	void *r = NULL;

	*bad = 0;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_ALLOCS; i++) {
		struct alloc *a = &allocs[i];
		if (a->len && p >= a->dev && p < a->dev + a->len) {
			if (len > a->len - (p - a->dev))
				*bad = 1;
			else
				r = a->shadow + (p - a->dev);
			if (device)
				*device = a->device;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return r;
}

CUresult cuInit(unsigned flags)
{
	const char *s = getenv("MC_FAKE_CUDA_DEVICES");

	(void)flags;
	n_devices = s && *s ? atoi(s) : 1;
	return OK;
}

CUresult cuDeviceGetCount(int *n)
{
	if (n_devices < 0)
		return ERR_NOT_INITIALIZED;
	*n = n_devices;
	return OK;
}

CUresult cuDevicePrimaryCtxRetain(mc_cu_context *ctx, int dev)
{
	if (dev < 0 || dev >= n_devices)
		return ERR_INVALID_DEVICE;
	*ctx = (mc_cu_context)(uintptr_t)(dev + 1);
	return OK;
}

CUresult cuCtxSetCurrent(mc_cu_context ctx)
{
	current = (int)(uintptr_t)ctx;
	return OK;
}

CUresult cuCtxGetCurrent(mc_cu_context *ctx)
{
	*ctx = (mc_cu_context)(uintptr_t)current;
	return OK;
}

CUresult cuPointerGetAttribute(void *data, mc_cu_pointer_attribute attr,
			       CUdeviceptr p)
{
	int dev = 0, bad;
	int is_dev = shadow_of((uintptr_t)p, 1, &dev, &bad) != NULL;

	if (!current)
		return ERR_INVALID_CONTEXT;
	if (!is_dev)
		return ERR_INVALID_VALUE; /* memory the driver does not know */
	switch (attr) {
	case 2: /* MEMORY_TYPE */
		*(unsigned *)data = 2; /* DEVICE */
		return OK;
	case 8: /* IS_MANAGED */
		*(int *)data = 0;
		return OK;
	case 9: /* DEVICE_ORDINAL */
		*(int *)data = dev;
		return OK;
	default:
		return ERR_INVALID_VALUE;
	}
}

/* Map fd twice and record the allocation (takes fd). */
static CUresult map_fd(int fd, size_t len, int device, int opened,
		       CUdeviceptr *out)
{
	void *dev = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, 0);
	void *shadow =
		mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int slot = -1;

	if (dev == MAP_FAILED || shadow == MAP_FAILED) {
		close(fd);
		return ERR_OUT_OF_MEMORY;
	}
	if (opened) {
		close(fd);
		fd = -1;
	}
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_ALLOCS && slot < 0; i++)
		if (!allocs[i].len)
			slot = i;
	if (slot >= 0)
		allocs[slot] = (struct alloc){ (uintptr_t)dev, shadow, len,
					       device,	       fd,     opened };
	pthread_mutex_unlock(&lock);
	if (slot < 0)
		return ERR_OUT_OF_MEMORY;
	*out = (CUdeviceptr)(uintptr_t)dev;
	return OK;
}

CUresult cuMemAlloc_v2(CUdeviceptr *out, size_t len)
{
	int fd;

	if (!current)
		return ERR_INVALID_CONTEXT;
	fd = memfd_create("fake-cuda", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)len)) {
		if (fd >= 0)
			close(fd);
		return ERR_OUT_OF_MEMORY;
	}
	return map_fd(fd, len, current - 1, 0, out);
}

CUresult cuMemFree_v2(CUdeviceptr p)
{
	struct alloc a = { 0 };

	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].len && allocs[i].dev == (uintptr_t)p) {
			a = allocs[i];
			allocs[i].len = 0;
		}
	pthread_mutex_unlock(&lock);
	if (!a.len)
		return ERR_INVALID_VALUE;
	munmap((void *)a.dev, a.len);
	munmap(a.shadow, a.len);
	if (a.fd >= 0)
		close(a.fd);
	return OK;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	CUresult r = ERR_INVALID_VALUE;

	if (!current)
		return ERR_INVALID_CONTEXT;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].len && p >= allocs[i].dev &&
		    p < allocs[i].dev + allocs[i].len) {
			*base = allocs[i].dev;
			*size = allocs[i].len;
			r = OK;
		}
	pthread_mutex_unlock(&lock);
	return r;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr base)
{
	struct fake_handle f = { 0 };
	CUresult r = ERR_INVALID_VALUE;

	if (!current)
		return ERR_INVALID_CONTEXT;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].len && allocs[i].dev == base &&
		    allocs[i].fd >= 0) {
			f = (struct fake_handle){
				HANDLE_MAGIC, (uint32_t)getpid(), allocs[i].fd,
				allocs[i].device, allocs[i].len
			};
			r = OK;
		}
	pthread_mutex_unlock(&lock);
	memset(h, 0, sizeof(*h));
	memcpy(h->reserved, &f, sizeof(f));
	return r;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *out, CUipcMemHandle h,
			       unsigned flags)
{
	struct fake_handle f;
	char path[64];
	int fd;

	(void)flags;
	if (!current)
		return ERR_INVALID_CONTEXT;
	memcpy(&f, h.reserved, sizeof(f));
	/* As the driver: not in the exporting process itself. */
	if (f.magic != HANDLE_MAGIC || f.pid == (uint32_t)getpid())
		return ERR_INVALID_VALUE;
	snprintf(path, sizeof(path), "/proc/%u/fd/%d", f.pid, f.fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return ERR_INVALID_VALUE;
	return map_fd(fd, f.len, f.device, 1, out);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr p)
{
	return cuMemFree_v2(p);
}

/* Faults armed by mc_fake_cuda_fail: per kind (0 cuMemcpyAsync, 1
 * cuStreamSynchronize), calls to let pass, then to fail; on the NULL
 * stream too only when fail_null is set. */
#define ERR_ILLEGAL_ADDRESS 700
static int fail_skip[2], fail_count[2];
static bool fail_null;

static int faulty(int kind, mc_cu_stream stream)
{
	int f = 0;

	if (!stream && !fail_null) /* the test tools' own copies */
		return 0;
	pthread_mutex_lock(&lock);
	if (fail_skip[kind] > 0)
		fail_skip[kind]--;
	else if (fail_count[kind] > 0 && (f = 1))
		fail_count[kind]--;
	pthread_mutex_unlock(&lock);
	return f;
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t len,
		       mc_cu_stream stream)
{
	struct stream *s = stream ? (struct stream *)stream : &null_stream;
	int bad_d, bad_s;
	void *d = shadow_of((uintptr_t)dst, len, NULL, &bad_d);
	void *sp = shadow_of((uintptr_t)src, len, NULL, &bad_s);
	struct copy *c;

	if (!current)
		return ERR_INVALID_CONTEXT;
	if (bad_d || bad_s)
		return ERR_INVALID_VALUE;
	if (faulty(0, stream))
		return ERR_ILLEGAL_ADDRESS;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ERR_OUT_OF_MEMORY;
	c->dst = d ? d : (void *)(uintptr_t)dst;
	c->src = sp ? sp : (const void *)(uintptr_t)src;
	c->len = len;
	c->dir = (sp ? 2 : 0) | (d ? 1 : 0);
	pthread_mutex_lock(&s->lock);
	if (s->tail)
		s->tail->next = c;
	else
		s->head = c;
	s->tail = c;
	pthread_mutex_unlock(&s->lock);
	return OK;
}

CUresult cuStreamCreate(mc_cu_stream *out, unsigned flags)
{
	struct stream *s = calloc(1, sizeof(*s));

	(void)flags;
	if (!current)
		return ERR_INVALID_CONTEXT;
	if (!s)
		return ERR_OUT_OF_MEMORY;
	pthread_mutex_init(&s->lock, NULL);
	*out = (mc_cu_stream)s;
	return OK;
}

CUresult cuStreamSynchronize(mc_cu_stream stream)
{
	struct stream *s = stream ? (struct stream *)stream : &null_stream;
	struct copy *c;

	if (!current)
		return ERR_INVALID_CONTEXT;
	bool lost = faulty(1, stream);

	pthread_mutex_lock(&s->lock);
	c = s->head;
	s->head = s->tail = NULL;
	pthread_mutex_unlock(&s->lock);
	while (c) {
		struct copy *next = c->next;
		if (lost) { /* a failed stream: its queued copies never ran */
			free(c);
			c = next;
			continue;
		}
		memmove(c->dst, c->src, c->len);
		pthread_mutex_lock(&lock);
		stats[c->dir][0]++;
		stats[c->dir][1] += c->len;
		pthread_mutex_unlock(&lock);
		free(c);
		c = next;
	}
	return lost ? ERR_ILLEGAL_ADDRESS : OK;
}

CUresult cuStreamDestroy_v2(mc_cu_stream stream)
{
	struct stream *s = (struct stream *)stream;

	if (!s)
		return ERR_INVALID_VALUE;
	(void)cuStreamSynchronize(stream);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return OK;
}

CUresult cuMemHostAlloc(void **out, size_t len, unsigned flags)
{
	(void)flags;
	if (!current)
		return ERR_INVALID_CONTEXT;
	*out = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	return *out ? OK : ERR_OUT_OF_MEMORY;
}

CUresult cuMemFreeHost(void *p)
{
	free(p);
	return OK;
}

CUresult cuGetErrorString(CUresult r, const char **out)
{
	switch (r) {
	case OK:
		*out = "no error";
		break;
	case ERR_INVALID_VALUE:
		*out = "invalid argument";
		break;
	case ERR_OUT_OF_MEMORY:
		*out = "out of memory";
		break;
	case ERR_INVALID_CONTEXT:
		*out = "invalid device context";
		break;
	default:
		*out = "stand-in error";
	}
	return OK;
}

/* Test tools only: copies and bytes of direction dir (0 H2H, 1 H2D,
 * 2 D2H, 3 D2D). */
void mc_fake_cuda_stats(int dir, uint64_t *copies, uint64_t *bytes)
{
	pthread_mutex_lock(&lock);
	*copies = stats[dir & 3][0];
	*bytes = stats[dir & 3][1];
	pthread_mutex_unlock(&lock);
}

/* Fault injection: of the next calls of kind & 1 (0 cuMemcpyAsync, 1
 * cuStreamSynchronize) on streams other than the NULL one (on any with
 * kind & 2), let skip pass, then fail count with
 * CUDA_ERROR_ILLEGAL_ADDRESS (a failed synchronize drops the stream's
 * queued copies). count 0 disarms. */
void mc_fake_cuda_fail(int kind, int skip, int count)
{
	pthread_mutex_lock(&lock);
	fail_skip[kind & 1] = skip;
	fail_count[kind & 1] = count;
	fail_null = (kind & 2) && count;
	pthread_mutex_unlock(&lock);
}
