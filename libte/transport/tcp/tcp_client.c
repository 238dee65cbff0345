/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP client: per peer, `lanes` persistent connections, each driven
 * by a sender and a receiver thread (full duplex, so READ data coming
 * back never blocks WRITE data going out). Slices wait in the peer's
 * queue; a lane's sender takes one when it has fewer than TCP_LANE_DEPTH
 * in flight, the receiver completes them in order.
 *
 * Failures: an I/O error or a timeout breaks the lane's connection. The
 * receiver then ends the slice it was reading (FAILED, or TIMEOUT past its
 * deadline) and puts the slices still in flight back at the head of the
 * queue if their deadline allows, so another connection retries them
 * (reads and writes of the same bytes are idempotent). A WRITE slice of a
 * task with a send-by time (te_batch_set_write_window) starts, first or
 * again, only before it; later it ends with -ECONNABORTED. A refused
 * connection ends the slice and marks the peer stale, so the next use
 * resolves its name again (a restarted peer has new ports). With the
 * pool's key every connection authenticates before its first request
 * (tcp_auth.c); a peer that cannot ends the slice with its MC_EAUTH*.
 *
 * Lifetime: struct tcp_peer is refcounted by its owner (te_peer) and by
 * each lane thread; the last one out frees it, so a lane thread that ends
 * the last task of a peer never has to join itself.
 *
 * Locking: one mutex per peer guards its queue and lanes' state; no I/O
 * happens under it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mc_busy_poll.h"
#include "mc_log.h"
#include "mc_parse.h"
#include "mc_time.h"
#include "mc_net.h"
#include "mc_ratelimit.h"
#include "tcp_int.h"
#include "mooncake/mc_err.h"

#define CONNECT_TIMEOUT_MS 5000

struct tcp_slice {
	struct tcp_slice *next;
	struct te_task *task;
	char *local;
	uint64_t remote, len;
	uint8_t op;
	bool sent;
	int why; /* ended by break_lane: may_send's code (0: the I/O error) */
};

/* May s start (again) now? 0, or the code it ends with. */
static int may_send(const struct tcp_slice *s, uint64_t now)
{
	if (now >= s->task->deadline_ns)
		return -ETIMEDOUT;
	if (s->task->send_by_ns && now >= s->task->send_by_ns)
		return -ECONNABORTED;
	return 0;
}

/* The last moment s may start. */
static uint64_t send_by(const struct tcp_slice *s)
{
	const struct te_task *t = s->task;

	return t->send_by_ns && t->send_by_ns < t->deadline_ns ? t->send_by_ns :
								 t->deadline_ns;
}

struct tcp_peer;

/*
 * Lane state, under the peer's lock. The sender owns the socket it is
 * writing to until it returns: a break only shuts the socket down and
 * parks it in dead_fd (closed by the sender before it reconnects), and
 * the slice being sent stays on the in-flight list until the sender has
 * seen the outcome. `gen` counts connections so a sender can tell that
 * the one it wrote to is gone.
 */
struct tcp_lane {
	struct tcp_peer *tp;
	int fd; /* -1: not connected */
	int dead_fd; /* shut down, to be closed by the sender */
	unsigned gen;
	bool broken; /* send failed: wait for the receiver to break it */
	struct tcp_slice *sending;
	struct tcp_slice *if_head, *if_tail; /* in flight, in order */
	unsigned n_inflight;
	bool room_wait; /* the sender waits for n_inflight <= DEPTH / 2 */
	bool caller; /* a te_batch_transfer caller uses it (tcp_client_run) */
	bool caller_wait; /* the sender waits for the caller to leave */
	pthread_cond_t cond;
};

struct tcp_peer {
	_Atomic int refs;
	struct tcp_transport *t;
	struct te_peer *peer; /* valid while the owner's reference lives */
	char ip[TE_NAME_MAX];
	int port;
	bool v2;
	pthread_mutex_t lock;
	pthread_cond_t queue_cond;
	struct tcp_slice *q_head, *q_tail;
	bool stopping;
	bool peer_gone; /* owner released: do not touch ->peer */
	struct mc_busy_poll bp; /* callers waiting for replies (run) */
	unsigned n_lanes;
	struct tcp_lane lanes[];
};

static void tcp_peer_put(struct tcp_peer *tp)
{
	if (atomic_fetch_sub(&tp->refs, 1) != 1)
		return;
	for (unsigned i = 0; i < tp->n_lanes; i++) {
		if (tp->lanes[i].fd >= 0)
			close(tp->lanes[i].fd);
		if (tp->lanes[i].dead_fd >= 0)
			close(tp->lanes[i].dead_fd);
		pthread_cond_destroy(&tp->lanes[i].cond);
	}
	pthread_cond_destroy(&tp->queue_cond);
	pthread_mutex_destroy(&tp->lock);
	free(tp);
}

static void thread_exit_accounting(struct tcp_transport *t)
{
	pthread_mutex_lock(&t->conns_lock);
	atomic_fetch_sub(&t->n_lane_threads, 1);
	pthread_cond_broadcast(&t->conns_cond);
	pthread_mutex_unlock(&t->conns_lock);
}

static void finish(struct tcp_slice *s, int rc)
{
	te__slice_done(s->task, rc ? 0 : s->len, rc);
	free(s);
}

/* Caller holds tp->lock. */
static void queue_front(struct tcp_peer *tp, struct tcp_slice *s)
{
	s->next = tp->q_head;
	s->sent = false;
	tp->q_head = s;
	if (!tp->q_tail)
		tp->q_tail = s;
}

static bool is_connection_error(int rc)
{
	return rc == -ECONNREFUSED || rc == -ECONNRESET || rc == -EPIPE ||
	       rc == -EHOSTUNREACH || rc == -ENETUNREACH || rc == -ENOTCONN;
}

/* Caller holds tp->lock. */
static void fifo_remove(struct tcp_lane *l, struct tcp_slice *s)
{
	struct tcp_slice **pp = &l->if_head, *prev = NULL;

	for (; *pp; prev = *pp, pp = &(*pp)->next) {
		if (*pp != s)
			continue;
		*pp = s->next;
		if (l->if_tail == s)
			l->if_tail = prev;
		s->next = NULL;
		l->n_inflight--;
		return;
	}
}

/*
 * The lane's connection broke (the receiver saw an I/O error). Every
 * slice already sent is put back at the head of the queue if its
 * deadline allows, else returned to be ended; the slice the sender is
 * still writing stays for the sender to settle. Caller (the receiver)
 * holds tp->lock and ends the returned list outside it.
 */
static struct tcp_slice *break_lane(struct tcp_lane *l)
{
	struct tcp_peer *tp = l->tp;
	struct tcp_slice *dead = NULL, *s, *next;
	uint64_t now = mc_mono_ns();

	for (s = l->if_head; s; s = next) {
		next = s->next;
		if (s == l->sending)
			continue;
		fifo_remove(l, s);
		s->why = tp->stopping ? 0 : may_send(s, now);
		if (!s->why && !tp->stopping) {
			queue_front(tp, s);
		} else {
			s->next = dead;
			dead = s;
		}
	}
	if (l->fd >= 0) {
		shutdown(l->fd, SHUT_RDWR);
		if (l->dead_fd >= 0)
			close(l->dead_fd);
		l->dead_fd = l->fd;
	}
	l->fd = -1;
	l->gen++;
	l->broken = false;
	pthread_cond_broadcast(&l->cond);
	pthread_cond_broadcast(&tp->queue_cond);
	return dead;
}

static int send_slice(int fd, struct tcp_peer *tp, struct tcp_slice *s)
{
	struct tcp_hdr h = {
		.size = s->len, .addr = s->remote, .op = s->op, .v2 = tp->v2
	};
	uint8_t raw[TCP_HDR_LEN];

	tcp_hdr_encode(&h, raw);
	if (s->op == TCP_OP_WRITE)
		return tcp_io_send2(fd, raw, sizeof(raw), s->local, s->len,
				    s->task->deadline_ns);
	return tcp_io_send(fd, raw, sizeof(raw), s->task->deadline_ns);
}

static int connect_lane(struct tcp_peer *tp, uint64_t deadline, int *fd)
{
	const struct mc_auth_key *key = tp->t->base.eng->auth;
	uint64_t now = mc_mono_ns();
	int ms = CONNECT_TIMEOUT_MS, rc;
	char why[160];

	if (deadline <= now)
		ms = 1;
	else if ((deadline - now) / 1000000 < (uint64_t)ms)
		ms = (int)((deadline - now) / 1000000) + 1;
	rc = mc_net_connect(tp->ip, tp->port, ms, fd);
	if (rc)
		return rc;
	mc_net_set_nodelay(*fd);
	/* Our I/O helpers poll: the socket must not block. */
	if (fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) | O_NONBLOCK)) {
		rc = -errno;
		close(*fd);
		return rc;
	}
	if (!key)
		return 0;
	if (!tp->v2) {
		snprintf(why, sizeof(why),
			 "the peer speaks version 1 (upstream's), which "
			 "cannot authenticate");
		rc = MC_EAUTHOFF;
	} else {
		rc = tcp_auth_client(*fd, key, now + ms * 1000000ULL, why,
				     sizeof(why));
	}
	if (rc) {
		static struct mc_ratelimit rl;
		unsigned dropped;

		if (mc_ratelimit_ok(&rl, 10000, &dropped)) {
			char at[300];

			(void)mc_fmt_hostport(at, sizeof(at), tp->ip, tp->port);
			mc_log_warn("te",
				    "tcp: data connection to %s: %s "
				    "(%u more)",
				    at, why, dropped);
		}
		close(*fd);
	}
	return rc;
}

static void *sender(void *arg)
{
	struct tcp_lane *l = arg;
	struct tcp_peer *tp = l->tp;

	pthread_mutex_lock(&tp->lock);
	for (;;) {
		struct tcp_slice *s;
		unsigned gen;
		int fd, rc;

		while (!tp->stopping && !tp->q_head)
			pthread_cond_wait(&tp->queue_cond, &tp->lock);
		/* A full lane refills from half: one wake-up per
		 * TCP_LANE_DEPTH / 2 replies, not one per reply. */
		if (l->n_inflight >= TCP_LANE_DEPTH) {
			l->room_wait = true;
			while (!tp->stopping && !l->broken &&
			       l->n_inflight > TCP_LANE_DEPTH / 2)
				pthread_cond_wait(&l->cond, &tp->lock);
			l->room_wait = false;
		}
		while (!tp->stopping && (l->broken || l->caller)) {
			l->caller_wait = l->caller;
			pthread_cond_wait(&l->cond, &tp->lock);
		}
		l->caller_wait = false;
		if (tp->stopping)
			break;
		s = tp->q_head;
		if (!s)
			continue; /* another lane took it */
		tp->q_head = s->next;
		if (!tp->q_head)
			tp->q_tail = NULL;
		s->next = NULL;
		if ((rc = may_send(s, mc_mono_ns()))) {
			pthread_mutex_unlock(&tp->lock);
			finish(s, rc);
			pthread_mutex_lock(&tp->lock);
			continue;
		}
		if (l->fd < 0) {
			if (l->dead_fd >= 0)
				close(l->dead_fd);
			l->dead_fd = -1;
			pthread_mutex_unlock(&tp->lock);
			rc = connect_lane(tp, send_by(s), &fd);
			pthread_mutex_lock(&tp->lock);
			if (rc == -ETIMEDOUT && may_send(s, mc_mono_ns()))
				rc = may_send(s, mc_mono_ns());
			if (rc) {
				if (is_connection_error(rc) && !tp->peer_gone)
					te__peer_invalidate(tp->peer);
				pthread_mutex_unlock(&tp->lock);
				finish(s, rc);
				pthread_mutex_lock(&tp->lock);
				continue;
			}
			l->fd = fd;
			/* Connecting took time: the window may be past. */
			if ((rc = may_send(s, mc_mono_ns()))) {
				pthread_mutex_unlock(&tp->lock);
				finish(s, rc);
				pthread_mutex_lock(&tp->lock);
				continue;
			}
		}
		/* In flight before sending: replies come back in order. */
		if (l->if_tail)
			l->if_tail->next = s;
		else
			l->if_head = s;
		l->if_tail = s;
		l->n_inflight++;
		l->sending = s;
		fd = l->fd;
		gen = l->gen;
		pthread_mutex_unlock(&tp->lock);
		rc = send_slice(fd, tp, s);
		pthread_mutex_lock(&tp->lock);
		l->sending = NULL;
		if (gen != l->gen) {
			/* The connection broke while we wrote: settle s here. */
			fifo_remove(l, s);
			int why = may_send(s, mc_mono_ns());

			if (!rc && !why && !tp->stopping) {
				queue_front(tp, s);
				pthread_cond_broadcast(&tp->queue_cond);
			} else {
				pthread_mutex_unlock(&tp->lock);
				finish(s, why == -ECONNABORTED ? why :
					  rc		       ? rc :
								 -ECONNRESET);
				pthread_mutex_lock(&tp->lock);
			}
		} else {
			if (rc) {
				/* The receiver fails on it and breaks the lane. */
				l->broken = true;
				shutdown(fd, SHUT_RDWR);
			}
			s->sent = true;
		}
		pthread_cond_broadcast(&l->cond);
	}
	pthread_mutex_unlock(&tp->lock);
	thread_exit_accounting(tp->t);
	tcp_peer_put(tp);
	return NULL;
}

/* Read the reply to s; 0, MC_ENOTREG (refused) or an I/O error. */
static int receive_slice(int fd, struct tcp_peer *tp, struct tcp_slice *s,
			 bool *io_error)
{
	uint8_t raw[TCP_STATUS_LEN];
	uint32_t code;
	int rc = 0;

	*io_error = false;
	if (tp->v2) {
		rc = tcp_io_recv(fd, raw, sizeof(raw), s->task->deadline_ns);
		if (!rc && tcp_status_decode(raw, &code))
			rc = -EPROTO;
		if (rc) {
			*io_error = true;
			return rc;
		}
		if (code != TCP_STATUS_OK)
			return MC_ENOTREG;
	}
	if (s->op == TCP_OP_READ) {
		rc = tcp_io_recv(fd, s->local, s->len, s->task->deadline_ns);
		*io_error = rc != 0;
	}
	return rc;
}

static void *receiver(void *arg)
{
	struct tcp_lane *l = arg;
	struct tcp_peer *tp = l->tp;

	pthread_mutex_lock(&tp->lock);
	for (;;) {
		struct tcp_slice *s, *dead = NULL;
		bool io_error;
		int fd, rc;

		while (!tp->stopping && !(l->if_head && l->if_head->sent))
			pthread_cond_wait(&l->cond, &tp->lock);
		if (tp->stopping)
			break;
		s = l->if_head;
		fd = l->fd;
		pthread_mutex_unlock(&tp->lock);
		rc = receive_slice(fd, tp, s, &io_error);
		pthread_mutex_lock(&tp->lock);
		fifo_remove(l, s);
		if (io_error) {
			if (is_connection_error(rc) && !tp->peer_gone)
				te__peer_invalidate(tp->peer);
			dead = break_lane(l);
		}
		if (l->room_wait && l->n_inflight <= TCP_LANE_DEPTH / 2)
			pthread_cond_broadcast(&l->cond);
		pthread_mutex_unlock(&tp->lock);
		finish(s, rc);
		for (struct tcp_slice *n; dead; dead = n) {
			n = dead->next;
			finish(dead,
			       dead->why == -ECONNABORTED ? dead->why : rc);
		}
		pthread_mutex_lock(&tp->lock);
	}
	pthread_mutex_unlock(&tp->lock);
	thread_exit_accounting(tp->t);
	tcp_peer_put(tp);
	return NULL;
}

static struct tcp_peer *peer_create(struct tcp_transport *t, struct te_peer *p)
{
	unsigned n = t->lanes;
	struct tcp_peer *tp = calloc(1, sizeof(*tp) + n * sizeof(tp->lanes[0]));
	const struct tcp_peer_desc *d;
	pthread_attr_t attr;

	if (!tp)
		return NULL;
	atomic_store(&tp->refs, 1);
	tp->t = t;
	tp->peer = p;
	snprintf(tp->ip, sizeof(tp->ip), "%s", p->ip);
	d = tcp_desc(&t->base, p);
	tp->port = d ? d->data_port : 0;
	tp->v2 = d && d->proto_version >= 2;
	tp->n_lanes = n;
	mc_busy_poll_init(&tp->bp, t->busy_poll_us);
	pthread_mutex_init(&tp->lock, NULL);
	pthread_cond_init(&tp->queue_cond, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (unsigned i = 0; i < n; i++) {
		struct tcp_lane *l = &tp->lanes[i];
		pthread_t th;

		l->tp = tp;
		l->fd = -1;
		l->dead_fd = -1;
		pthread_cond_init(&l->cond, NULL);
		atomic_fetch_add(&tp->refs, 2);
		atomic_fetch_add(&t->n_lane_threads, 2);
		if (pthread_create(&th, &attr, sender, l)) {
			atomic_fetch_sub(&tp->refs, 2);
			atomic_fetch_sub(&t->n_lane_threads, 2);
			break;
		}
		if (pthread_create(&th, &attr, receiver, l)) {
			/* The sender alone would never finish slices. */
			pthread_mutex_lock(&tp->lock);
			tp->stopping = true;
			pthread_mutex_unlock(&tp->lock);
			atomic_fetch_sub(&tp->refs, 1);
			atomic_fetch_sub(&t->n_lane_threads, 1);
			break;
		}
	}
	pthread_attr_destroy(&attr);
	return tp;
}

static struct tcp_peer *peer_state(struct tcp_transport *t, struct te_peer *p)
{
	struct te_engine *eng = t->base.eng;
	struct tcp_peer *tp;

	pthread_mutex_lock(&eng->peer_lock);
	tp = p->tp_priv[t->base.index];
	if (!tp) {
		tp = peer_create(t, p);
		p->tp_priv[t->base.index] = tp;
	}
	pthread_mutex_unlock(&eng->peer_lock);
	return tp;
}

int tcp_client_submit(struct tcp_transport *t, struct te_task *task)
{
	struct tcp_peer *tp = peer_state(t, task->peer);
	struct tcp_slice *head = NULL, *tail = NULL;
	uint64_t len = task->req.length, off = 0;
	uint64_t n = (len + t->slice_size - 1) / t->slice_size;

	if (!tp)
		return -ENOMEM;
	/* Build every slice first: a failed allocation starts nothing. */
	for (uint64_t i = 0; i < n; i++) {
		struct tcp_slice *s = calloc(1, sizeof(*s));
		uint64_t l = len - off < t->slice_size ? len - off :
							 t->slice_size;
		if (!s) {
			while (head) {
				s = head->next;
				free(head);
				head = s;
			}
			return -ENOMEM;
		}
		s->task = task;
		s->local = (char *)task->req.local + off;
		s->remote = task->req.target_addr + off;
		s->len = l;
		s->op = task->req.opcode == TE_READ ? TCP_OP_READ :
						      TCP_OP_WRITE;
		if (tail)
			tail->next = s;
		else
			head = s;
		tail = s;
		off += l;
	}
	te__task_add_slices(task, (int)n - 1);
	pthread_mutex_lock(&tp->lock);
	if (tp->stopping) {
		pthread_mutex_unlock(&tp->lock);
		while (head) {
			struct tcp_slice *s = head->next;
			finish(head, -ECANCELED);
			head = s;
		}
		return 0;
	}
	if (tp->q_tail)
		tp->q_tail->next = head;
	else
		tp->q_head = head;
	tp->q_tail = tail;
	/* One idle sender per slice, not every lane's sender per request. */
	for (uint64_t i = 0; i < n && i < tp->n_lanes; i++)
		pthread_cond_signal(&tp->queue_cond);
	pthread_mutex_unlock(&tp->lock);
	return 0;
}

/*
 * te_batch_transfer's path (the run op): the caller waits for its tasks
 * next, so when a lane is idle it takes the lane and does the lane's two
 * threads' work itself: every request of the call in one write, then the
 * replies in order, spinning briefly before it sleeps (tp->bp). A small
 * get then costs the reply's one wake-up, not four (sender, receiver
 * twice, the waiter). While it holds the lane (l->caller) the lane's
 * sender leaves the lane alone, and its receiver has nothing in flight
 * to read. An I/O error breaks the lane as the receiver would, and the
 * requests not yet answered go to the peer's queue, for the lanes'
 * threads to retry on another connection while their deadline allows.
 */
#define RUN_MAX_PIECES 64
#define RUN_MAX_BYTES (4u << 20)
struct run_piece {
	struct te_task *task;
	char *local;
	uint64_t remote, len;
	uint8_t op;
	uint8_t hdr[TCP_HDR_LEN];
};

/* Cut the tasks into pieces of at most the slice size; false when they
 * are too many or too large for one call on one lane. */
static bool run_cut(struct tcp_transport *t, struct te_task *tasks, unsigned n,
		    struct run_piece *pc, unsigned *n_pc)
{
	uint64_t bytes = 0;
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++) {
		struct te_task *task = &tasks[i];
		uint64_t len = task->req.length;

		bytes += len;
		if (bytes > RUN_MAX_BYTES)
			return false;
		for (uint64_t off = 0; off < len; off += t->slice_size) {
			if (k == RUN_MAX_PIECES)
				return false;
			pc[k] = (struct run_piece){
				.task = task,
				.local = (char *)task->req.local + off,
				.remote = task->req.target_addr + off,
				.len = len - off < t->slice_size ?
					       len - off :
					       t->slice_size,
				.op = task->req.opcode == TE_READ ?
					      TCP_OP_READ :
					      TCP_OP_WRITE,
			};
			k++;
		}
	}
	*n_pc = k;
	return true;
}

/* An idle, connected lane for the caller (tp->lock held), or NULL. */
static struct tcp_lane *claim_lane(struct tcp_peer *tp)
{
	if (tp->stopping)
		return NULL;
	for (unsigned i = 0; i < tp->n_lanes; i++) {
		struct tcp_lane *l = &tp->lanes[i];

		if (l->fd >= 0 && !l->broken && !l->caller && !l->sending &&
		    !l->n_inflight) {
			l->caller = true;
			return l;
		}
	}
	return NULL;
}

/* claim_lane() under the lock, and a reference on tp for the caller
 * (the last task may free the peer); NULL when no lane is idle. */
static struct tcp_lane *take_lane(struct tcp_peer *tp, int *fd)
{
	struct tcp_lane *l;

	pthread_mutex_lock(&tp->lock);
	l = claim_lane(tp);
	*fd = l ? l->fd : -1;
	pthread_mutex_unlock(&tp->lock);
	if (l)
		atomic_fetch_add(&tp->refs, 1);
	return l;
}

/* Send every piece's request, then read the replies in order; returns
 * how many pieces ended (*rc: the I/O error that stopped it, or 0). */
static unsigned run_pieces(struct tcp_peer *tp, int fd, struct run_piece *pc,
			   unsigned n, uint64_t deadline, int *rc)
{
	struct iovec iov[2 * RUN_MAX_PIECES];
	struct tcp_rx *rx = malloc(sizeof(*rx));
	int cnt = 0;
	unsigned done = 0;

	*rc = rx ? 0 : -ENOMEM;
	for (unsigned i = 0; rx && i < n; i++) {
		struct tcp_hdr h = { .size = pc[i].len,
				     .addr = pc[i].remote,
				     .op = pc[i].op,
				     .v2 = tp->v2 };

		tcp_hdr_encode(&h, pc[i].hdr);
		iov[cnt++] = (struct iovec){ pc[i].hdr, TCP_HDR_LEN };
		if (pc[i].op == TCP_OP_WRITE)
			iov[cnt++] = (struct iovec){ pc[i].local, pc[i].len };
	}
	if (rx) {
		rx->fd = fd;
		rx->bp = &tp->bp;
		rx->off = rx->len = 0;
		*rc = tcp_io_sendv(fd, iov, cnt, deadline);
	}
	for (; !*rc && done < n; done++) {
		struct run_piece *p = &pc[done];
		uint8_t raw[TCP_STATUS_LEN];
		uint32_t code = TCP_STATUS_OK;

		if (tp->v2) {
			*rc = tcp_rx_read(rx, raw, sizeof(raw), deadline);
			if (!*rc && tcp_status_decode(raw, &code))
				*rc = -EPROTO;
			if (*rc)
				break;
		}
		if (code != TCP_STATUS_OK) {
			te__slice_done(p->task, 0, MC_ENOTREG);
			continue;
		}
		if (p->op == TCP_OP_READ)
			*rc = tcp_rx_read(rx, p->local, p->len, deadline);
		if (*rc)
			break;
		te__slice_done(p->task, p->len, 0);
	}
	free(rx);
	return done;
}

int tcp_client_run(struct tcp_transport *t, struct te_task *tasks, unsigned n)
{
	struct tcp_peer *tp = peer_state(t, tasks[0].peer);
	struct run_piece pc[RUN_MAX_PIECES];
	struct tcp_slice *head = NULL, **tail = &head;
	uint64_t deadline = tasks[0].deadline_ns;
	struct tcp_lane *l;
	unsigned n_pc, done;
	int fd, rc;

	if (!tp || !run_cut(t, tasks, n, pc, &n_pc))
		return -EAGAIN;
	l = take_lane(tp, &fd);
	if (!l)
		return -EAGAIN;
	for (unsigned i = 0, j = 0; i < n; i++) {
		int extra = -1;

		for (; j < n_pc && pc[j].task == &tasks[i]; j++)
			extra++;
		te__task_add_slices(&tasks[i], extra);
	}
	atomic_fetch_add(&t->base.caller_requests, n);
	done = run_pieces(tp, fd, pc, n_pc, deadline, &rc);
	/* Pieces not answered: queued for the lanes, or ended. */
	for (unsigned i = done; rc && i < n_pc; i++) {
		struct tcp_slice *s = calloc(1, sizeof(*s));

		if (s)
			*s = (struct tcp_slice){ .task = pc[i].task,
						 .local = pc[i].local,
						 .remote = pc[i].remote,
						 .len = pc[i].len,
						 .op = pc[i].op };
		int why = s ? may_send(s, mc_mono_ns()) : 0;

		if (!s || why) {
			free(s);
			te__slice_done(pc[i].task, 0,
				       why == -ECONNABORTED ? why : rc);
			continue;
		}
		*tail = s;
		tail = &s->next;
	}
	pthread_mutex_lock(&tp->lock);
	l->caller = false;
	if (rc) {
		if (is_connection_error(rc) && !tp->peer_gone)
			te__peer_invalidate(tp->peer);
		(void)break_lane(l); /* nothing in flight: returns NULL */
	}
	if (head) {
		if (tp->stopping) {
			pthread_mutex_unlock(&tp->lock);
			for (struct tcp_slice *s; head; head = s) {
				s = head->next;
				finish(head, -ECANCELED);
			}
			pthread_mutex_lock(&tp->lock);
		} else {
			if (tp->q_tail)
				tp->q_tail->next = head;
			else
				tp->q_head = head;
			for (tp->q_tail = head; tp->q_tail->next;)
				tp->q_tail = tp->q_tail->next;
			pthread_cond_broadcast(&tp->queue_cond);
		}
	}
	/* Wake the sender only if it waits for us: a broadcast on every
	 * call would also wake the receiver for nothing (a wake-up per get,
	 * what this path is for avoiding). break_lane woke both. */
	if (l->caller_wait)
		pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&tp->lock);
	tcp_peer_put(tp);
	return 0;
}

/* Wait for the reply's first bytes, spinning first as a run's caller
 * does (the peer answers within microseconds when the bytes are in its
 * memory), then read the status frame alone: the payload stays in the
 * socket for splice. */
static int read_pipe_status(struct tcp_peer *tp, int fd, uint64_t deadline,
			    uint32_t *code)
{
	uint8_t raw[TCP_STATUS_LEN];
	uint64_t now = mc_mono_ns();
	int rc;

	if (now >= deadline)
		return -ETIMEDOUT;
	rc = mc_busy_poll_wait(&tp->bp, fd,
			       (int)((deadline - now + 999999) / 1000000));
	if (!rc)
		rc = tcp_io_recv(fd, raw, sizeof(raw), deadline);
	if (!rc && tcp_status_decode(raw, code))
		rc = -EPROTO;
	return rc;
}

int tcp_client_read_pipe(struct tcp_transport *t, struct te_peer *p,
			 uint64_t addr, uint64_t len, int pipe_fd,
			 uint64_t deadline_ns)
{
	struct tcp_peer *tp = peer_state(t, p);
	struct tcp_hdr h = { .size = len, .addr = addr, .op = TCP_OP_READ };
	uint8_t hdr[TCP_HDR_LEN];
	uint32_t code = TCP_STATUS_OK;
	struct tcp_lane *l;
	bool io_error;
	int fd, rc;

	if (!tp)
		return -EAGAIN;
	l = take_lane(tp, &fd);
	if (!l)
		return -EAGAIN;
	atomic_fetch_add(&t->base.caller_requests, 1);
	h.v2 = tp->v2;
	tcp_hdr_encode(&h, hdr);
	rc = tcp_io_send(fd, hdr, sizeof(hdr), deadline_ns);
	if (!rc && tp->v2)
		rc = read_pipe_status(tp, fd, deadline_ns, &code);
	io_error = rc != 0;
	if (!rc && code != TCP_STATUS_OK)
		rc = MC_ENOTREG; /* refused, nothing follows: the lane is fine */
	else if (!rc) {
		rc = tcp_io_splice_in(fd, pipe_fd, len, deadline_ns);
		io_error = rc && rc != -ENOBUFS; /* ENOBUFS: still in step */
	}
	pthread_mutex_lock(&tp->lock);
	l->caller = false;
	if (io_error) {
		/* A reply may be half read: the connection is done. */
		if (is_connection_error(rc) && !tp->peer_gone)
			te__peer_invalidate(tp->peer);
		(void)break_lane(l); /* nothing in flight: returns NULL */
	}
	if (l->caller_wait)
		pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&tp->lock);
	tcp_peer_put(tp);
	return rc;
}

void tcp_client_peer_release(struct tcp_transport *t, struct te_peer *p)
{
	struct tcp_peer *tp = p->tp_priv[t->base.index];
	struct tcp_slice *q;

	p->tp_priv[t->base.index] = NULL;
	pthread_mutex_lock(&tp->lock);
	tp->stopping = true;
	tp->peer_gone = true;
	q = tp->q_head;
	tp->q_head = tp->q_tail = NULL;
	for (unsigned i = 0; i < tp->n_lanes; i++) {
		if (tp->lanes[i].fd >= 0)
			shutdown(tp->lanes[i].fd, SHUT_RDWR);
		pthread_cond_broadcast(&tp->lanes[i].cond);
	}
	pthread_cond_broadcast(&tp->queue_cond);
	pthread_mutex_unlock(&tp->lock);
	/* Tasks hold peer references, so nothing should be queued here. */
	while (q) {
		struct tcp_slice *s = q->next;
		finish(q, -ECANCELED);
		q = s;
	}
	tcp_peer_put(tp);
}
