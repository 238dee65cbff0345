/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The "tcp" transport's ops table: upstream's TCP data framing, version 2
 * (status frames), advertised as tcp_data_port / tcp_proto_version 2 in
 * our descriptor so an upstream engine can talk to ours and back. Both
 * fields are this transport's alone: tcp_describe() writes them and
 * tcp_desc_decode() reads a peer's into its struct tcp_peer_desc.
 */
#include <errno.h>
#include <stdlib.h>

#include "mc_time.h"
#include "tcp_int.h"

static int tcp_init(struct te_engine *eng, const struct te_engine_cfg *cfg,
		    struct te_transport **out, char *err, size_t errlen)
{
	struct tcp_transport *t = calloc(1, sizeof(*t));
	const char *s = getenv("MC_TCP_MAX_SLICE_SIZE");
	const char *l = getenv("MC_TCP_LANES_PER_PEER");
	const char *bp = getenv("MC_TCP_BUSY_POLL_US");
	long v = s ? strtol(s, NULL, 10) : 0;
	long bp_us = bp && *bp ? strtol(bp, NULL, 10) : -1;
	long lanes = l && *l ? strtol(l, NULL, 10) : 0;
	int rc;

	if (!t)
		return -ENOMEM;
	t->base.eng = eng;
	t->slice_size = v >= 4096 ? (uint64_t)v : TCP_SLICE_DEFAULT;
	t->lanes = cfg->tcp_lanes ? cfg->tcp_lanes :
		   lanes > 0	  ? (unsigned)lanes :
				    TCP_LANES_DEFAULT;
	t->busy_poll_us = bp_us < 0	? TCP_BUSY_POLL_DEFAULT_US :
			  bp_us > 10000 ? 10000u :
					  (unsigned)bp_us;
	pthread_mutex_init(&t->conns_lock, NULL);
	mc_cond_init_mono(&t->conns_cond); /* wait_a_little()'s deadlines */
	rc = tcp_server_start(t, err, errlen);
	if (rc) {
		pthread_cond_destroy(&t->conns_cond);
		pthread_mutex_destroy(&t->conns_lock);
		free(t);
		return rc;
	}
	*out = &t->base;
	return 0;
}

static void tcp_fini(struct te_transport *tp)
{
	struct tcp_transport *t = to_tcp(tp);

	tcp_server_stop(t);
	/* Peers were released first; wait for their lane threads to end. */
	pthread_mutex_lock(&t->conns_lock);
	while (atomic_load(&t->n_lane_threads))
		pthread_cond_wait(&t->conns_cond, &t->conns_lock);
	pthread_mutex_unlock(&t->conns_lock);
	pthread_cond_destroy(&t->conns_cond);
	pthread_mutex_destroy(&t->conns_lock);
	free(t);
}

static int tcp_describe(struct te_transport *tp, json_t *desc)
{
	json_object_set_new(desc, "tcp_data_port",
			    json_integer(to_tcp(tp)->data_port));
	json_object_set_new(desc, "tcp_proto_version", json_integer(2));
	return 0;
}

/* Bytes from the network: out-of-range values read as absent. */
static int tcp_desc_decode(json_t *desc, void **out)
{
	json_t *port = json_object_get(desc, "tcp_data_port");
	json_t *ver = json_object_get(desc, "tcp_proto_version");
	struct tcp_peer_desc *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	if (json_is_integer(port) && json_integer_value(port) >= 0 &&
	    json_integer_value(port) <= 65535)
		d->data_port = (int)json_integer_value(port);
	d->proto_version = 1; /* absent means an old TCP server */
	if (json_is_integer(ver) && json_integer_value(ver) >= 0 &&
	    json_integer_value(ver) < 256)
		d->proto_version = (int)json_integer_value(ver);
	*out = d;
	return 0;
}

static void tcp_desc_free(void *blob)
{
	free(blob);
}

static bool tcp_reachable(struct te_transport *tp, struct te_peer *peer,
			  const struct te_request *req)
{
	const struct tcp_peer_desc *d = tcp_desc(tp, peer);

	return !peer->is_self && d && d->data_port > 0;
}

static int tcp_submit(struct te_transport *tp, struct te_task *t)
{
	return tcp_client_submit(to_tcp(tp), t);
}

static int tcp_run(struct te_transport *tp, struct te_task *tasks, unsigned n)
{
	return tcp_client_run(to_tcp(tp), tasks, n);
}

static int tcp_read_pipe(struct te_transport *tp, struct te_peer *peer,
			 uint64_t addr, uint64_t len, int pipe_fd,
			 uint64_t deadline_ns)
{
	return tcp_client_read_pipe(to_tcp(tp), peer, addr, len, pipe_fd,
				    deadline_ns);
}

static void tcp_stats(struct te_transport *tp, struct te_counters *out)
{
	out->connections = (uint64_t)atomic_load(&to_tcp(tp)->n_conns);
}

static int tcp_fence_inbound(struct te_transport *tp, uint64_t deadline_ns)
{
	return tcp_server_fence(to_tcp(tp), deadline_ns);
}

static void tcp_peer_release(struct te_transport *tp, struct te_peer *p)
{
	tcp_client_peer_release(to_tcp(tp), p);
}

const struct te_transport_ops te_tcp_ops = {
	.name = "tcp",
	.version = 1,
	.init = tcp_init,
	.fini = tcp_fini,
	.describe = tcp_describe,
	.reachable = tcp_reachable,
	.submit = tcp_submit,
	.run = tcp_run,
	.peer_release = tcp_peer_release,
	.read_pipe = tcp_read_pipe,
	.fence_inbound = tcp_fence_inbound,
	.stats = tcp_stats,
	.desc_decode = tcp_desc_decode,
	.desc_free = tcp_desc_free,
};
