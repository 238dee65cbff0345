/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Serving a peer's READ or WRITE of our GPU memory (docs/design.md, "GPU
 * memory"): the socket cannot reach device memory, so the bytes go
 * through a pinned bounce buffer of the connection, chunk by chunk (the
 * connection's thread copies with the device's primary context current).
 * Allocated on the connection's first such request, freed with it.
 */
#include <errno.h>
#include <stdlib.h>

#include "tcp_int.h"

#define GPU_BOUNCE (4u << 20)

struct tcp_gpu_bounce {
	void *buf;
	void *stream;
};

static int bounce_get(struct tcp_gpu_bounce **gp, int dev)
{
	struct tcp_gpu_bounce *g = *gp;
	int rc = te__gpu_use(dev);

	if (rc || g)
		return rc;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	rc = te__gpu_host_alloc(GPU_BOUNCE, &g->buf);
	if (!rc)
		rc = te__gpu_stream_create(&g->stream);
	if (rc) {
		tcp_gpu_bounce_free(g);
		return rc;
	}
	*gp = g;
	return 0;
}

void tcp_gpu_bounce_free(struct tcp_gpu_bounce *g)
{
	if (!g)
		return;
	te__gpu_stream_destroy(g->stream);
	te__gpu_host_free(g->buf);
	free(g);
}

int tcp_gpu_serve(struct tcp_gpu_bounce **gp, struct tcp_rx *rx,
		  const struct tcp_hdr *h, int dev, uint64_t deadline)
{
	int fd = rx->fd;
	char *mem = (char *)(uintptr_t)h->addr;
	uint8_t st[TCP_STATUS_LEN];
	struct tcp_gpu_bounce *g;
	int rc = bounce_get(gp, dev);

	if (rc)
		return rc; /* the connection closes: the peer's slice fails */
	g = *gp;
	if (h->op == TCP_OP_READ && h->v2) {
		tcp_status_encode(TCP_STATUS_OK, st);
		rc = tcp_io_send(fd, st, sizeof(st), deadline);
	}
	for (uint64_t off = 0; !rc && off < h->size; off += GPU_BOUNCE) {
		size_t n = h->size - off < GPU_BOUNCE ?
				   (size_t)(h->size - off) :
				   GPU_BOUNCE;

		if (h->op == TCP_OP_READ) {
			rc = te__gpu_copy(g->buf, mem + off, n, g->stream);
			if (!rc)
				rc = tcp_io_send(fd, g->buf, n, deadline);
		} else {
			rc = tcp_rx_read(rx, g->buf, n, deadline);
			if (!rc)
				rc = te__gpu_copy(mem + off, g->buf, n,
						  g->stream);
		}
	}
	return rc;
}
