/* SPDX-License-Identifier: Apache-2.0 */
/*
 * te_read_pipe(): a read of a peer's memory into a pipe instead of local
 * memory, for FUSE daemons that answer a read with splice(2) (the mount's
 * remote reads). The engine only resolves the peer and picks the
 * transport as a batch would; a transport with a read_pipe op (tcp)
 * moves the bytes on the calling thread.
 */
#include <errno.h>

#include "mc_time.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

int te_read_pipe(struct te_engine *eng, struct te_segment *target,
		 uint64_t addr, uint64_t len, const char *owner, int pipe_fd,
		 int timeout_ms)
{
	struct te_request req = { .opcode = TE_READ,
				  .target = target,
				  .target_addr = addr,
				  .length = len };
	unsigned ms = eng ? eng->timeout_ms : 0;
	struct te_transport *tp;
	struct te_peer *peer;
	int idx, rc;

	if (!eng || !target || pipe_fd < 0)
		return -EINVAL;
	if (te__forked(eng))
		return MC_EFORKED;
	if (!len)
		return 0;
	if (timeout_ms >= 0 && (unsigned)timeout_ms < ms)
		ms = (unsigned)timeout_ms;
	peer = te__segment_peer_at(target, addr, len, owner, &rc);
	if (!peer)
		return rc;
	idx = te__pick_transport(eng, peer, &req);
	tp = idx >= 0 ? eng->tps[idx] : NULL;
	if (!tp || !tp->ops->read_pipe) {
		te__peer_put(peer);
		return MC_ENOTSUPPORTED;
	}
	rc = tp->ops->read_pipe(tp, peer, addr, len, pipe_fd,
				mc_mono_ns() + (uint64_t)ms * 1000000ULL);
	if (!rc) {
		atomic_fetch_add(&tp->read_bytes, len);
		atomic_fetch_add(&tp->read_requests, 1);
	} else if (rc != -EAGAIN) {
		atomic_fetch_add(&tp->failed_requests, 1);
	}
	te__peer_put(peer);
	return rc;
}
