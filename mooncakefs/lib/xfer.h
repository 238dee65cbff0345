/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file xfer.h
 * Moves the bytes of puts and gets: a list of (local buffer, endpoint,
 * remote address, length) operations run through transfer-engine batches,
 * as few as possible, with a result per operation. Replica choice and
 * failover are the caller's (store_put.c, store_get.c).
 *
 * Segments (peers) are opened once per endpoint and cached until destroy
 * (a request names the replica's segment as its owner: mcs_xfer_op.seg_id);
 * the engine re-resolves a cached peer by itself when it went stale (the
 * peer restarted), so a later call reaches the new process. Batches come
 * from a pool (one per concurrent call, up to 32), and a call of up to 16
 * operations (a ranged read or write: one per replica) allocates nothing.
 *
 * Thread safety: any number of threads may call mcs_xfer_run() at once.
 */
#ifndef MCS_XFER_H
#define MCS_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "mc_compiler.h"
#include "mooncake/te.h"

struct mcs_xfer;

/** A segment id's length (the master's, 16 bytes). */
#define MCS_SEG_ID_LEN 16

struct mcs_xfer_op {
	enum te_opcode opcode;
	void *local; /* registered local memory */
	const char *endpoint; /* the replica's engine name */
	/* The replica's segment (MCS_SEG_ID_LEN bytes), the request's owner
	 * (te_request.owner): memory the endpoint registered for another
	 * segment (a process that took the engine name since) is not
	 * reached, the op ends MC_ESEGMOVED (not retried). NULL: whatever
	 * the name holds. Read during the call only. */
	const uint8_t *seg_id;
	uint64_t remote; /* address there */
	uint64_t len;
	int result; /* out: 0, -ETIMEDOUT or the engine's code */
};

int mcs_xfer_create(struct te_engine *eng, struct mcs_xfer **out) MC_MUST_CHECK;
/** Destroy pooled batches and close segments (before te_engine_destroy). */
void mcs_xfer_destroy(struct mcs_xfer *x);

/**
 * Run n operations; each gets its result. An operation that failed for
 * any reason but a timeout is tried once more (the engine re-resolves a
 * peer it found stale, so a peer that restarted is reached on the second
 * try). Operations whose requests have not ended after timeout_ms are
 * -ETIMEDOUT; the call still waits for the engine to end them (its own
 * per-request timeout) before returning, so no request touches local
 * memory afterwards. Returns 0, or -ENOMEM when nothing could be tried
 * (every result is then -ENOMEM too).
 */
int mcs_xfer_run(struct mcs_xfer *x, struct mcs_xfer_op *ops, size_t n,
		 unsigned timeout_ms);

/** Asked before each part of a write: 0 to go on, else the code the
 *  operations not yet written end with (contact.h). On 0, *send_by_ms
 *  (mono ms; 0: none) is when the part's pieces must have started. */
struct mcs_xfer_guard {
	int (*check)(void *arg, uint64_t *send_by_ms);
	void *arg;
};

/** A part of a write takes about this long (its size from the last
 *  part's rate). */
#define MCS_XFER_PART_MS 100
/** A guarded write's pieces start within this long after the contact
 *  window that let the part go (MCS_WRITE_CONTACT_MS after the call the
 *  run answered: te_batch_set_write_window), or go again in a smaller
 *  part after the guard: no piece starts later (docs/design.md "Writes
 *  into placed space"; members fence later than this). */
#define MCS_XFER_WRITE_WINDOW_MS 400

/**
 * Write n operations, as mcs_xfer_run, in parts: each part the next
 * bytes of every operation not yet written, side by side (an equal share
 * of the part each, at least 64 KiB), sized to take about
 * MCS_XFER_PART_MS at the rate the part before moved (1-64 MiB; a
 * write's first part at the previous write's rate, at most 16 MiB, and
 * 4 MiB for the first write). Each part has its own timeout_ms, counted
 * from when g let it go; a write that fits its first part is one
 * mcs_xfer_run. g (may be NULL) is asked before each part and before a
 * retry: its refusal stops the write, every operation not written to its
 * end ends with its code, and it is returned; else 0 (or -ENOMEM, as
 * mcs_xfer_run). With g, the pieces of a part start by the send-by
 * time g gave; a part whose pieces could not (the link slower than its
 * rate promised) goes again, after g, as half as large (down to 1 MiB;
 * after 8 such parts in a row its operations end with -ECONNABORTED).
 */
int mcs_xfer_write(struct mcs_xfer *x, struct mcs_xfer_op *ops, size_t n,
		   unsigned timeout_ms, const struct mcs_xfer_guard *g);

/**
 * Read len bytes at remote of endpoint (in segment seg_id, as
 * mcs_xfer_op's) into the pipe pipe_fd (te_read_pipe: same results; not
 * retried). Open failures of the endpoint's segment are returned as they
 * are (nothing added).
 */
int mcs_xfer_read_pipe(struct mcs_xfer *x, const char *endpoint,
		       const uint8_t *seg_id, uint64_t remote, uint64_t len,
		       int pipe_fd, unsigned timeout_ms);

/** The owner tag of segment id (te_register_owned): 32 hex digits. */
void mcs_seg_owner(const uint8_t id[MCS_SEG_ID_LEN],
		   char out[2 * MCS_SEG_ID_LEN + 1]);

#endif
