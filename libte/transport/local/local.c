/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The "local" transport: the target is this engine itself, so a request
 * is a copy between two of our registered buffers (upstream's local
 * shortcut), done in the submitting thread, with the engine's copy
 * helpers for large ones (copy.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "te_int.h"
#include "mooncake/mc_err.h"

static int local_init(struct te_engine *eng, const struct te_engine_cfg *cfg,
		      struct te_transport **out, char *err, size_t errlen)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

static void local_fini(struct te_transport *tp)
{
	free(tp);
}

static bool local_reachable(struct te_transport *tp, struct te_peer *peer,
			    const struct te_request *req)
{
	return peer->is_self;
}

/* memmove when the ranges overlap, else a (parallel) copy. */
static void move(struct te_engine *eng, void *dst, const void *src, size_t n)
{
	uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;

	if (d < s + n && s < d + n)
		memmove(dst, src, n);
	else
		te__copy(eng->copier, dst, src, n);
}

/* Either side in GPU memory: the driver copies (device to device
 * without the host). */
static int gpu_move(int gpu, void *dst, const void *src, size_t n)
{
	int rc = te__gpu_use(gpu - 1);

	return rc ? rc : te__gpu_copy(dst, src, n, NULL);
}

static int local_submit(struct te_transport *tp, struct te_task *t)
{
	struct te_engine *eng = tp->eng;
	void *target = (void *)(uintptr_t)t->req.target_addr;
	void *dst = t->req.opcode == TE_READ ? t->req.local : target;
	void *src = t->req.opcode == TE_READ ? target : t->req.local;
	struct te_memreg *r;
	int rc = 0;

	pthread_rwlock_rdlock(&eng->reg_lock);
	r = te__reg_find_remote(eng, t->req.target_addr, t->req.length);
	if (!r)
		rc = MC_ENOTREG;
	else if (r->gpu || t->local_reg->gpu)
		rc = gpu_move(r->gpu ? r->gpu : t->local_reg->gpu, dst, src,
			      t->req.length);
	else
		move(eng, dst, src, t->req.length);
	pthread_rwlock_unlock(&eng->reg_lock);
	te__slice_done(t, rc ? 0 : t->req.length, rc);
	return 0;
}

const struct te_transport_ops te_local_ops = {
	.name = "local",
	.version = 1,
	.init = local_init,
	.fini = local_fini,
	.reachable = local_reachable,
	.submit = local_submit,
	.gpu_direct = true,
};
