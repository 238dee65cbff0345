/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file splice.h
 * Pipes for remote reads answered without a copy in the daemon
 * (splice_read, docs/design.md "Reads"): the bytes of a replica held on
 * another member go from the TCP socket into a pipe
 * (mooncake_store_object_splice) and from the pipe to the kernel
 * (fuse_reply_data), so the kernel's copy into the reader's pages is the
 * only one on this host. Used by kv.c (a pipe per FUSE thread) and
 * readahead.c (a pipe per chunk fetched ahead).
 *
 * Sizes: a pipe is asked for 2 MiB; a read of n bytes goes through it when
 * n plus 16 KiB (libfuse's reply header and its slack) fits, so with the
 * kernel's default fs.pipe-max-size (1 MiB, for daemons without
 * CAP_SYS_RESOURCE) reads of 1 MiB are copied as before and a notice says
 * so once. A payload that arrives in more fragments than the pipe has
 * slots fills it early; splicing is then turned off for the rest of the
 * mount (fragments under half a page, which libfuse's pipe could not
 * carry either), or the largest read sent through pipes is lowered
 * (mcfs_splice_failed).
 */
#ifndef MCFS_SPLICE_H
#define MCFS_SPLICE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314
#endif
#include <fuse_lowlevel.h>

struct mcfs_pipe {
	int fd[2]; /* read end, write end (both O_NONBLOCK); -1: closed */
	size_t size; /* its capacity */
};

/* The mount's setting and what it learnt. */
struct mcfs_splice {
	bool on; /* splice_read */
	_Atomic size_t max; /* largest read sent through a pipe */
	atomic_bool told; /* the notice about pipe sizes was logged */
	_Atomic uint64_t fallbacks; /* failed splices, read into memory */
};

void mcfs_splice_setup(struct mcfs_splice *sp, bool on);
/** A new pipe, as large as the system lets; 0 or -errno. */
int mcfs_pipe_open(struct mcfs_splice *sp, struct mcfs_pipe *p);
void mcfs_pipe_close(struct mcfs_pipe *p);
/** Can a read of n bytes go through p? */
bool mcfs_splice_fits(struct mcfs_splice *sp, const struct mcfs_pipe *p,
		      size_t n);
/** A splice into p failed (anything but "not supported"): counted, and
 *  if p filled up, sp->max lowered to what fits (0: off, for fragments
 *  under half a page). Before p is closed. */
void mcfs_splice_failed(struct mcfs_splice *sp, struct mcfs_pipe *p);
/** Bytes the pipe holds (SIZE_MAX when it cannot tell). */
size_t mcfs_pipe_held(const struct mcfs_pipe *p);
/** Reply to req with the next n bytes of the pipe (fuse_reply_data);
 *  true when replied and the pipe holds left bytes after it, false when
 *  it must be closed (it may hold anything). */
bool mcfs_pipe_reply(fuse_req_t req, struct mcfs_pipe *p, size_t n,
		     size_t left);
/** Read the next n bytes of the pipe (which holds them) into buf. */
int mcfs_pipe_drain(struct mcfs_pipe *p, char *buf, size_t n);

#endif
