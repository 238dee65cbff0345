/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The "cuda_ipc" transport: a peer on the same host and network namespace
 * (equal mc_host_id) publishes, for its remote-accessible GPU buffers, a
 * CUDA IPC handle of the allocation holding each ("mc_cuda_ipc" in its
 * descriptor: addr, length, base, handle). We open a handle once per peer
 * buffer (cuIpcOpenMemHandle maps the peer's device memory into our
 * address space) and the driver copies between our buffer, host or
 * device, and the mapping: device to device without a host bounce (over
 * NVLink where there is one). Copies run in the submitting thread with
 * device 0's primary context (handles are opened in it; unified
 * addressing lets the driver reach every device from there).
 *
 * Reach: a request whose target lies in a published buffer, once its
 * handle opened; a handle that does not open (another host's or user's
 * process, a driver without IPC) is remembered, and the request goes to
 * the next transport (shm cannot reach device memory, so tcp, whose
 * server stages it). A dead peer's mapping stays valid until we close it
 * (the driver keeps the memory), so a write to it is lost, not a crash;
 * the peer is resolved again when its name is.
 *
 * This transport moves device memory itself (ops.gpu_direct): requests
 * from our GPU memory are not staged.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "mc_log.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

#define IPC_MAX_BUFFERS 4096

struct ipc_buf {
	uint64_t addr, length, base;
	uint8_t handle[TE_GPU_IPC_HANDLE_LEN];
};

struct ipc_desc {
	unsigned n;
	struct ipc_buf bufs[];
};

struct ipc_map {
	int err; /* remembered failure: not reachable */
	void *base; /* the peer's allocation, mapped */
};

struct ipc_peer {
	pthread_mutex_t lock;
	unsigned n;
	struct ipc_map maps[];
};

static int ipc_init(struct te_engine *eng, const struct te_engine_cfg *cfg,
		    struct te_transport **out, char *err, size_t errlen)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

static void ipc_fini(struct te_transport *tp)
{
	free(tp);
}

/* Our remote-accessible GPU buffers with their handles. */
static int ipc_describe(struct te_transport *tp, json_t *desc)
{
	struct te_engine *eng = tp->eng;
	json_t *list = NULL;
	int rc = 0;

	pthread_rwlock_rdlock(&eng->reg_lock);
	for (unsigned i = 0; i < eng->n_regs; i++) {
		struct te_memreg *r = eng->regs[i];
		uint8_t h[TE_GPU_IPC_HANDLE_LEN];
		char hex[2 * TE_GPU_IPC_HANDLE_LEN + 1];
		uintptr_t base;
		size_t size;

		if (!r->remote || !r->gpu || te__gpu_use(r->gpu - 1) ||
		    te__gpu_ipc_export((void *)r->addr, h, &base, &size))
			continue;
		if (!list)
			list = json_array();
		sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
		json_array_append_new(
			list, json_pack("{s:I,s:I,s:I,s:s}", "addr",
					(json_int_t)r->addr, "length",
					(json_int_t)r->len, "base",
					(json_int_t)base, "handle", hex));
	}
	pthread_rwlock_unlock(&eng->reg_lock);
	if (list)
		rc = json_object_set_new(desc, "mc_cuda_ipc", list) ? -ENOMEM :
								      0;
	return rc;
}

/* A peer's list, bounded: a malformed entry is skipped. */
static int ipc_desc_decode(json_t *desc, void **out)
{
	json_t *list = json_object_get(desc, "mc_cuda_ipc"), *e;
	struct ipc_desc *d;
	size_t i, n = json_array_size(list);

	*out = NULL;
	if (!n)
		return 0;
	if (n > IPC_MAX_BUFFERS)
		n = IPC_MAX_BUFFERS;
	d = calloc(1, sizeof(*d) + n * sizeof(d->bufs[0]));
	if (!d)
		return -ENOMEM;
	json_array_foreach(list, i, e) {
		struct ipc_buf *b = &d->bufs[d->n];
		json_int_t a, l, base;
		const char *hex;
		size_t got = 0;

		if (i >= n)
			break;
		if (json_unpack(e, "{s:I,s:I,s:I,s:s}", "addr", &a, "length",
				&l, "base", &base, "handle", &hex) ||
		    a < 0 || l <= 0 || base < 0 || base > a ||
		    (uint64_t)a + (uint64_t)l < (uint64_t)a ||
		    strlen(hex) != 2 * TE_GPU_IPC_HANDLE_LEN ||
		    sodium_hex2bin(b->handle, sizeof(b->handle), hex,
				   strlen(hex), NULL, &got, NULL) ||
		    got != sizeof(b->handle))
			continue;
		b->addr = (uint64_t)a;
		b->length = (uint64_t)l;
		b->base = (uint64_t)base;
		d->n++;
	}
	*out = d;
	return 0;
}

static void ipc_desc_free(void *blob)
{
	free(blob);
}

static int find_buf(const struct ipc_desc *d, uint64_t addr, uint64_t len)
{
	for (unsigned i = 0; d && i < d->n; i++) {
		const struct ipc_buf *b = &d->bufs[i];
		if (addr >= b->addr && addr - b->addr <= b->length &&
		    len <= b->length - (addr - b->addr))
			return (int)i;
	}
	return -1;
}

static struct ipc_peer *peer_state(struct te_transport *tp, struct te_peer *p,
				   const struct ipc_desc *d)
{
	struct ipc_peer *ip;

	pthread_mutex_lock(&tp->eng->peer_lock);
	ip = p->tp_priv[tp->index];
	if (!ip) {
		ip = calloc(1, sizeof(*ip) + d->n * sizeof(ip->maps[0]));
		if (ip) {
			ip->n = d->n;
			pthread_mutex_init(&ip->lock, NULL);
			p->tp_priv[tp->index] = ip;
		}
	}
	pthread_mutex_unlock(&tp->eng->peer_lock);
	return ip;
}

/* Open buffer i's handle once: 0, or the remembered error. */
static int open_once(struct te_peer *p, struct ipc_peer *ip,
		     const struct ipc_desc *d, int i)
{
	struct ipc_map *m = &ip->maps[i];
	int rc;

	pthread_mutex_lock(&ip->lock);
	rc = m->err;
	if (!m->base && !rc) {
		rc = te__gpu_use(0);
		if (!rc)
			rc = te__gpu_ipc_open(d->bufs[i].handle, &m->base);
		if (rc) {
			m->err = rc;
			mc_log_info("te",
				    "cuda_ipc: cannot open a buffer of '%s' "
				    "(%s): reaching it over tcp",
				    p->name, mc_strerror(rc));
		}
	}
	pthread_mutex_unlock(&ip->lock);
	return rc;
}

static bool ipc_reachable(struct te_transport *tp, struct te_peer *peer,
			  const struct te_request *req)
{
	const struct ipc_desc *d = peer->tp_desc[tp->index];
	struct ipc_peer *ip;
	int i;

	if (!d || peer->is_self || !peer->host_id[0] ||
	    strcmp(peer->host_id, tp->eng->host_id))
		return false;
	i = find_buf(d, req->target_addr, req->length);
	if (i < 0)
		return false;
	ip = peer_state(tp, peer, d);
	return ip && open_once(peer, ip, d, i) == 0;
}

static int ipc_submit(struct te_transport *tp, struct te_task *t)
{
	struct te_peer *p = t->peer;
	const struct ipc_desc *d = p->tp_desc[tp->index];
	/* ipc_reachable() opened the handle in this thread, under locks. */
	struct ipc_peer *ip = p->tp_priv[tp->index];
	int i = find_buf(d, t->req.target_addr, t->req.length);
	const struct ipc_buf *b;
	char *target;
	int rc;

	if (i < 0)
		return MC_ENOTREG;
	if (!ip || !ip->maps[i].base)
		return -EIO;
	b = &d->bufs[i];
	target = (char *)ip->maps[i].base + (t->req.target_addr - b->base);
	rc = te__gpu_use(0);
	if (!rc && t->req.opcode == TE_READ)
		rc = te__gpu_copy(t->req.local, target, t->req.length, NULL);
	else if (!rc)
		rc = te__gpu_copy(target, t->req.local, t->req.length, NULL);
	te__slice_done(t, rc ? 0 : t->req.length, rc);
	return 0;
}

static void ipc_peer_release(struct te_transport *tp, struct te_peer *p)
{
	struct ipc_peer *ip = p->tp_priv[tp->index];

	if (!ip)
		return;
	if (!te__gpu_use(0))
		for (unsigned i = 0; i < ip->n; i++)
			te__gpu_ipc_close(ip->maps[i].base);
	pthread_mutex_destroy(&ip->lock);
	free(ip);
	p->tp_priv[tp->index] = NULL;
}

const struct te_transport_ops te_cuda_ipc_ops = {
	.name = "cuda_ipc",
	.version = 1,
	.init = ipc_init,
	.fini = ipc_fini,
	.describe = ipc_describe,
	.reachable = ipc_reachable,
	.submit = ipc_submit,
	.peer_release = ipc_peer_release,
	.desc_decode = ipc_desc_decode,
	.desc_free = ipc_desc_free,
	.gpu_direct = true,
};
