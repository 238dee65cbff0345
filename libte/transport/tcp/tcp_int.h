/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file tcp_int.h
 * The TCP transport's parts: tcp.c (ops table), tcp_server.c (serves
 * peers' requests straight from and into registered memory) and
 * tcp_client.c (per-peer lanes).
 *
 * Client model: each peer gets `lanes` persistent connections. A lane is
 * full duplex: its sender thread takes slices from the peer's queue and
 * writes request headers (and WRITE payloads); its receiver thread reads
 * status frames (and READ payloads) in the same order. Requests larger
 * than the slice size are cut into slices spread over the lanes. Every
 * wait of the lanes' threads is a condition variable or poll() with the
 * slice's deadline. A te_batch_transfer caller may take an idle lane and
 * do its threads' work itself (tcp_client_run), polling briefly for the
 * replies before it sleeps, as a served connection does for its next
 * request (busy_poll_us, adaptive).
 */
#ifndef TE_TCP_INT_H
#define TE_TCP_INT_H

#include <pthread.h>
#include <sys/uio.h>

#include "te_int.h"
#include "tcp_wire.h"

#define TCP_SLICE_DEFAULT (1u << 20)
#define TCP_LANES_DEFAULT 4
#define TCP_LANE_DEPTH 8 /* slices in flight per lane */
/* How long a thread that expects bytes soon polls its socket before it
 * sleeps (mc_busy_poll.h): a te_batch_transfer caller waiting for
 * replies, a served connection waiting for its next request. */
#define TCP_BUSY_POLL_DEFAULT_US 200u

struct tcp_conn; /* a served connection */
struct tcp_rx; /* buffered reading of a connection (below) */

/* A peer's TCP fields of its segment descriptor (peer->tp_desc[index]). */
struct tcp_peer_desc {
	int data_port; /* 0: the peer serves no TCP data */
	int proto_version; /* 1: an old server without status frames */
};

static inline const struct tcp_peer_desc *tcp_desc(struct te_transport *tp,
						   const struct te_peer *p)
{
	return p->tp_desc[tp->index];
}

struct tcp_transport {
	struct te_transport base;
	int listen_fd;
	_Atomic int data_port; /* a fence may move it (tcp_server.c) */
	uint64_t slice_size;
	unsigned lanes; /* connections per peer */
	unsigned busy_poll_us; /* MC_TCP_BUSY_POLL_US; 0: sleep at once */
	pthread_t accept_thread;
	_Atomic bool stopping;
	pthread_mutex_t conns_lock;
	struct tcp_conn *conns; /* served connections, for shutdown */
	_Atomic int n_conns;
	/* A fence asks the accept thread for a new listener on the same
	 * port (tcp_server.c): 1 asked, 0 done; relisten_rc its outcome. */
	_Atomic int relisten;
	int relisten_rc;
	_Atomic int n_lane_threads; /* client threads still running */
	pthread_cond_t conns_cond; /* signalled when either drops */
};

static inline struct tcp_transport *to_tcp(struct te_transport *tp)
{
	return mc_container_of(tp, struct tcp_transport, base);
}

/* tcp_server.c */
int tcp_server_start(struct tcp_transport *t, char *err, size_t errlen);
void tcp_server_stop(struct tcp_transport *t);
/* The fence_inbound op: 0; 1 when the listener had to take another
 * port; -ETIMEDOUT when a connection's thread had not ended by
 * deadline_ns (it ends at its request's own deadline) or no listener
 * could be made. */
int tcp_server_fence(struct tcp_transport *t, uint64_t deadline_ns);

/* tcp_client.c */
int tcp_client_submit(struct tcp_transport *t, struct te_task *task);
/* The run op (te_batch_transfer): tasks to one peer carried on the
 * calling thread over an idle lane; -EAGAIN (nothing started) when no
 * lane is idle and connected, or the tasks are too many or too large. */
int tcp_client_run(struct tcp_transport *t, struct te_task *tasks, unsigned n);
void tcp_client_peer_release(struct tcp_transport *t, struct te_peer *p);
/* The read_pipe op (te_read_pipe): one READ over an idle lane, its
 * payload spliced into pipe_fd; -EAGAIN (nothing sent) when no lane is
 * idle and connected. */
int tcp_client_read_pipe(struct tcp_transport *t, struct te_peer *p,
			 uint64_t addr, uint64_t len, int pipe_fd,
			 uint64_t deadline_ns);

/* tcp_auth.c: the authentication of a data connection (engine's key). */
/** Client, right after connecting: 0, MC_EAUTHOFF, MC_EAUTHFAILED or an
 *  I/O error; why says which. */
int tcp_auth_client(int fd, const struct mc_auth_key *key, uint64_t deadline,
		    char *why, size_t n) MC_MUST_CHECK;
/** Server, for an AUTH request h: 0 once the client proved the key (the
 *  connection may then carry requests); otherwise the refusal was sent
 *  (MC_EAUTHFAILED, MC_EAUTHOFF without a key) or the connection failed,
 *  and the caller closes it. */
int tcp_auth_server(int fd, const struct mc_auth_key *key,
		    const struct tcp_hdr *h, uint64_t deadline) MC_MUST_CHECK;

/* tcp_gpu.c: serving requests for our GPU memory through a pinned bounce
 * buffer of the connection (*gp, made on first use). The caller holds
 * reg_lock for reading; a version 2 WRITE's status is the caller's to
 * send; any error closes the connection. */
struct tcp_gpu_bounce;
int tcp_gpu_serve(struct tcp_gpu_bounce **gp, struct tcp_rx *rx,
		  const struct tcp_hdr *h, int dev,
		  uint64_t deadline) MC_MUST_CHECK;
void tcp_gpu_bounce_free(struct tcp_gpu_bounce *g);

/* Socket I/O with a deadline (CLOCK_MONOTONIC ns; 0 = none). */
int tcp_io_send(int fd, const void *buf, size_t len, uint64_t deadline_ns);
int tcp_io_send2(int fd, const void *a, size_t alen, const void *b, size_t blen,
		 uint64_t deadline_ns);
/* cnt buffers in as few sendmsg() calls as the socket allows (consumes
 * iov: bases and lengths advance). */
int tcp_io_sendv(int fd, struct iovec *iov, int cnt, uint64_t deadline_ns);
int tcp_io_recv(int fd, void *buf, size_t len, uint64_t deadline_ns);
/* Move len bytes from the socket into a pipe (splice, no copy); -ENOBUFS
 * when the pipe filled up before: the rest was read and dropped, so the
 * connection stays in step (any other error leaves it broken). */
int tcp_io_splice_in(int fd, int pipe_fd, uint64_t len, uint64_t deadline_ns);

/*
 * Buffered reading of one connection: small frames (headers, statuses,
 * small payloads) come out of one recv() of whatever the socket holds;
 * reads of half the buffer or more go straight into place. Waits spin
 * first when bp is set (mc_busy_poll.h). The buffer may hold the start
 * of the next frame: every read of the connection must go through it.
 */
#define TCP_RX_BUF 16384
struct mc_busy_poll;
struct tcp_rx {
	int fd;
	struct mc_busy_poll *bp; /* NULL: sleep at once */
	size_t off, len; /* unread bytes: buf[off, len) */
	uint8_t buf[TCP_RX_BUF];
};
static inline size_t tcp_rx_buffered(const struct tcp_rx *rx)
{
	return rx->len - rx->off;
}
/* Exactly n bytes; 0, -ETIMEDOUT, -ECONNRESET or -errno. */
int tcp_rx_read(struct tcp_rx *rx, void *dst, size_t n, uint64_t deadline_ns);

#endif
