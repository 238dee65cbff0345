/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libmooncake.so's exports of the transfer engine (include/mooncake/te_so.h):
 * thin forwards to libte, linked into the library statically, so bindings
 * (python/mooncake/engine.py) reach it without a second library.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "mooncake/te_so.h"

/* Requests converted on the stack; more are converted into the heap. */
#define TE_SO_CHUNK 64

int mooncake_te_engine_create(const char *metadata,
			      const char *local_server_name,
			      const char *ip_or_host_name, int rpc_port,
			      const char *transport, const char *rdma_devices,
			      struct te_engine **out, char *err, size_t errlen)
{
	struct te_engine_cfg cfg = {
		.metadata = metadata,
		.local_server_name = local_server_name,
		.ip_or_host_name = ip_or_host_name,
		.rpc_port = rpc_port,
		.transport = transport,
		.rdma_devices = rdma_devices,
	};

	if (!out)
		return -EINVAL;
	return te_engine_create(&cfg, out, err, errlen);
}

int mooncake_te_rdma_check(const char *devices, char *err, size_t errlen)
{
	return te_rdma_check(devices, err, errlen);
}

int mooncake_te_metadata_check(const char *metadata, char *err, size_t errlen)
{
	return te_metadata_check(metadata, err, errlen);
}

void mooncake_te_engine_destroy(struct te_engine *eng)
{
	if (eng)
		te_engine_destroy(eng);
}

const char *mooncake_te_engine_name(const struct te_engine *eng)
{
	return te_engine_name(eng);
}

const char *mooncake_te_engine_rpc_address(const struct te_engine *eng)
{
	return te_engine_rpc_address(eng);
}

int mooncake_te_register(struct te_engine *eng, void *addr, size_t len,
			 const char *location, int remote_accessible)
{
	return te_register(eng, addr, len, location ? location : "*",
			   remote_accessible != 0);
}

int mooncake_te_unregister(struct te_engine *eng, void *addr)
{
	return te_unregister(eng, addr);
}

int mooncake_te_mem_alloc(struct te_engine *eng, size_t len, const char *name,
			  void **out)
{
	return te_mem_alloc(eng, len, name, out);
}

void mooncake_te_mem_free(struct te_engine *eng, void *addr)
{
	te_mem_free(eng, addr);
}

int mooncake_te_segment_open(struct te_engine *eng, const char *name,
			     struct te_segment **out, char *err, size_t errlen)
{
	return te_segment_open(eng, name, out, err, errlen);
}

void mooncake_te_segment_close(struct te_segment *seg)
{
	if (seg)
		te_segment_close(seg);
}

int mooncake_te_segment_buffers(struct te_segment *seg, uint64_t *addrs,
				uint64_t *lens, unsigned max)
{
	struct te_buffer_info *info = NULL;
	int n;

	if (max) {
		info = calloc(max, sizeof(*info));
		if (!info)
			return -ENOMEM;
	}
	n = te_segment_buffers(seg, info, max);
	for (int i = 0; i < n && (unsigned)i < max; i++) {
		if (addrs)
			addrs[i] = info[i].addr;
		if (lens)
			lens[i] = info[i].length;
	}
	free(info);
	return n;
}

int mooncake_te_batch_create(struct te_engine *eng, unsigned capacity,
			     struct te_batch **out)
{
	return te_batch_create(eng, capacity, out);
}

/* n requests from the arrays, then te_batch_submit or, with in_call,
 * te_batch_transfer (whose -ETIMEDOUT is left to batch_result). */
static int arrays(struct te_batch *b, int opcode, struct te_segment *target,
		  void *const *local, const uint64_t *remote,
		  const uint64_t *len, unsigned n, bool in_call, int timeout_ms)
{
	struct te_request small[TE_SO_CHUNK], *reqs = small;
	int rc;

	if (!b || !target || !local || !remote || !len || !n ||
	    (opcode != TE_READ && opcode != TE_WRITE))
		return -EINVAL;
	/* One submission for all n, so a refused request starts none. */
	if (n > TE_SO_CHUNK) {
		reqs = calloc(n, sizeof(*reqs));
		if (!reqs)
			return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++) {
		reqs[i] = (struct te_request){
			.opcode = (enum te_opcode)opcode,
			.local = local[i],
			.target = target,
			.target_addr = remote[i],
			.length = len[i],
		};
	}
	if (in_call) {
		rc = te_batch_transfer(b, reqs, n, timeout_ms);
		if (rc == -ETIMEDOUT)
			rc = 0;
	} else {
		rc = te_batch_submit(b, reqs, n);
	}
	if (reqs != small)
		free(reqs);
	return rc;
}

int mooncake_te_batch_submit_arrays(struct te_batch *b, int opcode,
				    struct te_segment *target,
				    void *const *local, const uint64_t *remote,
				    const uint64_t *len, unsigned n)
{
	return arrays(b, opcode, target, local, remote, len, n, false, 0);
}

int mooncake_te_batch_transfer_arrays(struct te_batch *b, int opcode,
				      struct te_segment *target,
				      void *const *local,
				      const uint64_t *remote,
				      const uint64_t *len, unsigned n,
				      int timeout_ms)
{
	return arrays(b, opcode, target, local, remote, len, n, true,
		      timeout_ms);
}

int mooncake_te_batch_status(struct te_batch *b, unsigned idx, int *status,
			     uint64_t *transferred, int *error)
{
	struct te_status st;
	int rc = te_batch_status(b, idx, &st);

	if (rc)
		return rc;
	if (status)
		*status = (int)st.status;
	if (transferred)
		*transferred = st.transferred;
	if (error)
		*error = st.error;
	return 0;
}

int mooncake_te_batch_result(struct te_batch *b, unsigned n, int timeout_ms)
{
	int rc = te_batch_wait(b, timeout_ms);

	if (rc && rc != -ETIMEDOUT)
		return rc;
	for (unsigned i = 0; i < n; i++) {
		struct te_status st;

		rc = te_batch_status(b, i, &st);
		if (rc)
			return rc;
		if (st.status == TE_COMPLETED)
			continue;
		if (st.status == TE_FAILED)
			return st.error ? st.error : -EIO;
		return -ETIMEDOUT; /* TIMEOUT, or still WAITING */
	}
	return 0;
}

int mooncake_te_batch_reset(struct te_batch *b)
{
	return te_batch_reset(b);
}

int mooncake_te_batch_destroy(struct te_batch *b)
{
	return b ? te_batch_destroy(b) : 0;
}

int mooncake_te_notify(struct te_engine *eng, struct te_segment *target,
		       const char *name, const char *msg)
{
	return te_notify(eng, target, name, msg);
}

int mooncake_te_notifications(struct te_engine *eng, char **names, char **msgs,
			      int max)
{
	return te_notifications(eng, names, msgs, max);
}

char *mooncake_te_topology_json(void)
{
	return te_topology_json();
}

void mooncake_te_free(void *p)
{
	free(p);
}

int mooncake_te_counters(struct te_engine *eng, const char *transport,
			 struct te_counters *out)
{
	if (!eng || !transport || !out)
		return -EINVAL;
	return te_counters(eng, transport, out);
}
