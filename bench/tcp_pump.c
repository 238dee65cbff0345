/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp_pump: the raw loopback TCP baseline for transfer_engine_bench.
 * --threads client threads, each with its own connection to a server
 * thread (one per connection; in a forked child process unless
 * --fork=false), stream --block_size chunks for --duration seconds:
 * "write" sends client -> server, "read" has the server stream to the
 * client. No framing, no acknowledgements: this is what the kernel's
 * loopback carries with that many streams.
 *
 * The memory matches transfer_engine_bench's: the server walks one shared
 * --buffer_size buffer, each client its own batch_size x block_size
 * buffer, all pre-faulted, so both benchmarks copy between the same
 * amounts of cold memory.
 *
 * Knobs for finding out what limits raw TCP: --rcvlowat (wake the reader
 * per that many bytes), --nonblock (poll() like the engine's I/O),
 * --sockbuf, --pin_client/--pin_server.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "mc_daemon.h"
#include "mc_net.h"
#include "te_bench.h"

struct pump_cfg {
	char *operation;
	int64_t threads;
	uint64_t block_size;
	uint64_t buffer_size;
	int64_t batch_size;
	int64_t duration;
	bool json;
	int64_t pin_client, pin_server;
	uint64_t sockbuf;
	bool fork;
	bool nonblock;
	uint64_t rcvlowat;
};

#define OPT(n, t, f, d, lo, hi, h)                                            \
	{                                                                     \
		.name = n, .type = t, .offset = offsetof(struct pump_cfg, f), \
		.def = d, .min = lo, .max = hi, .help = h                     \
	}

static const struct mc_opt pump_opts[] = {
	OPT("operation", MC_OPT_STRING, operation, "read", 0, 0,
	    "read (server streams to clients) or write (clients stream to "
	    "the server)."),
	OPT("threads", MC_OPT_INT, threads, "1", 1, 256,
	    "Client threads, one connection (stream) each."),
	OPT("block_size", MC_OPT_SIZE, block_size, "65536", 1, 1073741824.0,
	    "Bytes per send/receive call."),
	OPT("buffer_size", MC_OPT_SIZE, buffer_size, "1GiB", 4096,
	    1099511627776.0, "Server buffer the streams walk through."),
	OPT("batch_size", MC_OPT_INT, batch_size, "128", 1, 1048576,
	    "Each client's buffer is batch_size x block_size (as "
	    "transfer_engine_bench's)."),
	OPT("duration", MC_OPT_INT, duration, "10", 1, 86400,
	    "Seconds to stream."),
	OPT("json", MC_OPT_BOOL, json, "false", 0, 0,
	    "Print one JSON summary line."),
	OPT("pin_client", MC_OPT_INT, pin_client, "-1", -1, 1023,
	    "Run every client thread on this CPU (-1: anywhere)."),
	OPT("pin_server", MC_OPT_INT, pin_server, "-1", -1, 1023,
	    "Run every server thread on this CPU (-1: anywhere)."),
	OPT("fork", MC_OPT_BOOL, fork, "true", 0, 0,
	    "Run the server threads in a child process (as a transfer "
	    "engine's target runs in its own process)."),
	OPT("nonblock", MC_OPT_BOOL, nonblock, "false", 0, 0,
	    "Non-blocking sockets and poll() (as the transfer engine's "
	    "I/O) instead of blocking calls."),
	OPT("rcvlowat", MC_OPT_SIZE, rcvlowat, "0", 0, 1073741824.0,
	    "SO_RCVLOWAT of the receiving sockets (capped at block_size): "
	    "wake the reader per that many bytes, not per segment; 0: "
	    "the kernel's default (1 byte)."),
	OPT("sockbuf", MC_OPT_SIZE, sockbuf, "0", 0, 1073741824.0,
	    "SO_SNDBUF and SO_RCVBUF of every socket; 0: the kernel's "
	    "autotuning (as the transfer engine)."),
};

static const struct mc_cfg_spec pump_spec = {
	.prog = "tcp_pump",
	.summary = "Raw loopback TCP streaming throughput (the baseline of "
		   "transfer_engine_bench --protocol tcp).",
	.opts = pump_opts,
	.n_opts = sizeof(pump_opts) / sizeof(pump_opts[0]),
	.strict = true,
};

struct pump {
	const struct pump_cfg *c;
	bool read; /* server -> client */
	char *srv_buf;
	pthread_barrier_t start;
};

struct stream {
	struct pump *p;
	unsigned id;
	int fd, srv_fd;
	pthread_t cli, srv;
	char *buf;
	size_t buf_len;
	uint64_t bytes, start_ns, end_ns;
	int rc;
};

/* len bytes: blocking calls, or non-blocking ones and poll(). */
static int xfer(int fd, char *p, size_t len, bool send_, bool nonblock)
{
	if (!nonblock)
		return send_ ? mc_net_write_all(fd, p, len) :
			       mc_net_read_all(fd, p, len);
	while (len) {
		ssize_t n =
			send_ ? send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL) :
				recv(fd, p, len, MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		struct pollfd pf = { .fd = fd,
				     .events = send_ ? POLLOUT : POLLIN };
		if (poll(&pf, 1, -1) < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

/* The next block_size chunk of a buffer of len bytes. */
static size_t next_off(size_t off, size_t block, size_t len)
{
	off += block;
	return off + block > len ? 0 : off;
}

static void *server_main(void *arg)
{
	struct stream *s = arg;
	const struct pump_cfg *c = s->p->c;
	size_t block = c->block_size, len = c->buffer_size;
	size_t off = (s->id * (len / (size_t)c->threads)) / block * block;

	(void)bench_pin_self((int)c->pin_server);

	for (;;) {
		int rc = xfer(s->srv_fd, s->p->srv_buf + off, block, s->p->read,
			      c->nonblock);
		if (rc)
			break;
		off = next_off(off, block, len);
	}
	return NULL;
}

static void *client_main(void *arg)
{
	struct stream *s = arg;
	const struct pump_cfg *c = s->p->c;
	size_t block = c->block_size, off = 0;
	uint64_t deadline;

	(void)bench_pin_self((int)c->pin_client);
	pthread_barrier_wait(&s->p->start);
	s->start_ns = bench_now_ns();
	deadline = s->start_ns + (uint64_t)c->duration * 1000000000ull;
	while (bench_now_ns() < deadline) {
		s->rc = xfer(s->fd, s->buf + off, block, !s->p->read,
			     c->nonblock);
		if (s->rc)
			break;
		s->bytes += block;
		off = next_off(off, block, s->buf_len);
	}
	s->end_ns = bench_now_ns();
	/* Unread data makes close() reset the connection: a server blocked
	 * in send() fails at once (shutdown() alone would leave it there). */
	close(s->fd);
	s->fd = -1;
	return NULL;
}

static void set_bufs(int a, int b, int v)
{
	(void)setsockopt(a, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	(void)setsockopt(a, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	(void)setsockopt(b, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	(void)setsockopt(b, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
}

/* Connect every stream and accept its server side. */
static int connect_all(struct pump *p, struct stream *ss, unsigned n)
{
	int lfd, port, rc;

	for (unsigned i = 0; i < n; i++) {
		ss[i].p = p;
		ss[i].id = i;
		ss[i].fd = ss[i].srv_fd = -1;
	}
	rc = mc_net_listen("127.0.0.1", 0, 256, 0, &lfd, &port);
	if (rc)
		return rc;
	for (unsigned i = 0; i < n && !rc; i++) {
		rc = mc_net_connect("127.0.0.1", port, 5000, &ss[i].fd);
		if (rc)
			break;
		ss[i].srv_fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (ss[i].srv_fd < 0) {
			rc = -errno;
			break;
		}
		/* As the transfer engine's sockets. */
		mc_net_set_nodelay(ss[i].fd);
		mc_net_set_nodelay(ss[i].srv_fd);
		if (p->c->rcvlowat) {
			int v = (int)(p->c->rcvlowat < p->c->block_size ?
					      p->c->rcvlowat :
					      p->c->block_size);
			(void)setsockopt(p->read ? ss[i].fd : ss[i].srv_fd,
					 SOL_SOCKET, SO_RCVLOWAT, &v,
					 sizeof(v));
		}
		if (p->c->sockbuf)
			set_bufs(ss[i].fd, ss[i].srv_fd, (int)p->c->sockbuf);
	}
	close(lfd);
	return rc;
}

static void report(const struct pump_cfg *c, const struct stream *ss)
{
	uint64_t bytes = 0, t0 = UINT64_MAX, t1 = 0;
	double secs, bps;

	for (int i = 0; i < c->threads; i++) {
		bytes += ss[i].bytes;
		t0 = ss[i].start_ns < t0 ? ss[i].start_ns : t0;
		t1 = ss[i].end_ns > t1 ? ss[i].end_ns : t1;
	}
	secs = (double)(t1 - t0) / 1e9;
	bps = secs > 0 ? (double)bytes / secs : 0;
	if (c->json)
		printf("{\"tool\": \"tcp_pump\", \"operation\": \"%s\", "
		       "\"block_size\": %" PRIu64 ", \"threads\": %" PRId64
		       ", \"duration_s\": %.3f, \"bytes\": %" PRIu64
		       ", \"gbps\": %.4f}\n",
		       c->operation, c->block_size, c->threads, secs, bytes,
		       bps / 1e9);
	else
		printf("tcp_pump: %s, %" PRId64 " streams, %" PRIu64
		       "-byte blocks: %.2f GB/s over %.2f s\n",
		       c->operation, c->threads, c->block_size, bps / 1e9,
		       secs);
}

/* Server side: its buffer, then one thread per connection. */
static int servers_start(struct pump *p, struct stream *ss, unsigned n)
{
	p->srv_buf = teb_alloc(p->c->buffer_size);
	if (!p->srv_buf)
		return -ENOMEM;
	teb_fill_pattern(p->srv_buf, p->c->buffer_size, 0);
	for (unsigned i = 0; i < n; i++)
		if (pthread_create(&ss[i].srv, NULL, server_main, &ss[i]))
			return -EAGAIN;
	return 0;
}

static void servers_join(struct pump *p, struct stream *ss, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		pthread_join(ss[i].srv, NULL);
	teb_free(p->srv_buf, p->c->buffer_size);
}

/*
 * With --fork the servers run in a child process, as a transfer engine's
 * target does; the child tells it is ready over a pipe. 0 in the parent,
 * or a negative errno.
 */
static int fork_servers(struct pump *p, struct stream *ss, unsigned n,
			pid_t *child)
{
	int pfd[2];
	char b = 0;

	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	*child = fork();
	if (*child < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -errno;
	}
	if (*child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(pfd[0]);
		for (unsigned i = 0; i < n; i++)
			close(ss[i].fd);
		if (servers_start(p, ss, n))
			_exit(1);
		if (write(pfd[1], &b, 1) != 1)
			_exit(1);
		servers_join(p, ss, n);
		_exit(0);
	}
	close(pfd[1]);
	for (unsigned i = 0; i < n; i++) {
		close(ss[i].srv_fd);
		ss[i].srv_fd = -1;
	}
	b = read(pfd[0], &b, 1) == 1 ? 0 : 1;
	close(pfd[0]);
	return b ? -ECHILD : 0;
}

static int run(const struct pump_cfg *c)
{
	unsigned n = (unsigned)c->threads;
	struct pump p = { .c = c, .read = !strcmp(c->operation, "read") };
	struct stream *ss = calloc(n, sizeof(*ss));
	size_t cli_len = (size_t)(c->block_size * (uint64_t)c->batch_size);
	pid_t child = -1;
	int rc = ss ? 0 : -ENOMEM, st;

	if (!rc)
		rc = connect_all(&p, ss, n);
	if (!rc)
		rc = c->fork ? fork_servers(&p, ss, n, &child) :
			       servers_start(&p, ss, n);
	for (unsigned i = 0; !rc && i < n; i++) {
		ss[i].buf_len = cli_len;
		ss[i].buf = teb_alloc(cli_len);
		if (!ss[i].buf)
			rc = -ENOMEM;
	}
	if (rc) {
		fprintf(stderr, "tcp_pump: setup: %s\n", strerror(-rc));
		abort(); /* server threads may be blocked on the sockets */
	}
	pthread_barrier_init(&p.start, NULL, n);
	for (unsigned i = 0; i < n; i++) {
		if (pthread_create(&ss[i].cli, NULL, client_main, &ss[i])) {
			fprintf(stderr, "tcp_pump: cannot start threads\n");
			abort(); /* the barrier would never open */
		}
	}
	for (unsigned i = 0; i < n; i++) {
		pthread_join(ss[i].cli, NULL);
		if (ss[i].rc && !rc)
			rc = ss[i].rc;
	}
	pthread_barrier_destroy(&p.start);
	if (c->fork)
		waitpid(child, &st, 0);
	else
		servers_join(&p, ss, n);
	if (rc)
		fprintf(stderr, "tcp_pump: stream failed: %s\n", strerror(-rc));
	else
		report(c, ss);
	for (unsigned i = 0; i < n; i++) {
		if (ss[i].fd >= 0)
			close(ss[i].fd);
		if (ss[i].srv_fd >= 0)
			close(ss[i].srv_fd);
		teb_free(ss[i].buf, ss[i].buf_len);
	}
	free(ss);
	return rc;
}

int main(int argc, char **argv)
{
	struct pump_cfg c = { 0 };
	int code, rc;

	if (mc_daemon_load_config(&pump_spec, &c, argc, argv, &code))
		return code;
	if (strcmp(c.operation, "read") && strcmp(c.operation, "write")) {
		fprintf(stderr, "tcp_pump: --operation: read or write\n");
		mc_cfg_release(&pump_spec, &c);
		return MC_EXIT_USAGE;
	}
	if (c.block_size > c.buffer_size) {
		fprintf(stderr,
			"tcp_pump: --block_size exceeds --buffer_size\n");
		mc_cfg_release(&pump_spec, &c);
		return MC_EXIT_USAGE;
	}
	signal(SIGPIPE, SIG_IGN);
	rc = run(&c);
	mc_cfg_release(&pump_spec, &c);
	return rc ? MC_EXIT_FAILURE : MC_EXIT_OK;
}
