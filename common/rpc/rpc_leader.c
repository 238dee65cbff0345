/* SPDX-License-Identifier: Apache-2.0 */
/* The HA leader's address from etcd (rpc_leader.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcd_kv.h"
#include "mc_log.h"
#include "mc_parse.h"
#include "rpc_leader.h"

struct mc_rpc_leader {
	struct etcd_client cli;
	char key[320];
	unsigned wait_ms;
	pthread_mutex_t lock;
	char host[256];
	int port; /* 0: not known */
	unsigned long long asked_at; /* mono ms */
	unsigned long long warned_at; /* mono ms of the last warning */
};

static unsigned long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 +
	       (unsigned long long)ts.tv_nsec / 1000000;
}

bool mc_rpc_leader_is(const char *addr)
{
	return addr && !strncmp(addr, "etcd://", 7);
}

int mc_rpc_leader_create(const char *spec, struct mc_rpc_leader **out)
{
	struct mc_rpc_leader *l = calloc(1, sizeof(*l));
	const char *cid = getenv(MC_RPC_LEADER_ENV_CLUSTER);
	const char *w = getenv(MC_RPC_LEADER_ENV_WAIT);
	char err[512] = "";
	int rc;

	*out = NULL;
	if (!l)
		return -ENOMEM;
	rc = mc_etcd_client_init(&l->cli, spec, err, sizeof(err));
	if (rc) {
		mc_log_err("rpc", "master address %s: %s", spec, err);
		mc_etcd_client_fini(&l->cli);
		free(l);
		return rc;
	}
	if (!cid || !*cid)
		cid = "mooncake_cluster";
	if (strlen(cid) > 200) {
		mc_log_err("rpc", "%s longer than 200 bytes",
			   MC_RPC_LEADER_ENV_CLUSTER);
		mc_etcd_client_fini(&l->cli);
		free(l);
		return -EINVAL;
	}
	snprintf(l->key, sizeof(l->key), "mooncake-store/%s/master_view", cid);
	l->wait_ms = MC_RPC_LEADER_WAIT_MS;
	if (w && *w) {
		unsigned long v = strtoul(w, NULL, 10);

		if (v)
			l->wait_ms = (unsigned)v;
	}
	pthread_mutex_init(&l->lock, NULL);
	*out = l;
	return 0;
}

void mc_rpc_leader_destroy(struct mc_rpc_leader *l)
{
	if (!l)
		return;
	mc_etcd_client_fini(&l->cli);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

unsigned mc_rpc_leader_wait_ms(const struct mc_rpc_leader *l)
{
	return l->wait_ms;
}

static int ask(struct mc_rpc_leader *l)
{
	struct mc_etcd_kv kv;
	char err[512] = "";
	int rc = mc_etcd_get(&l->cli, l->key, &kv, err, sizeof(err));

	l->asked_at = now_ms();
	if (rc < 0) {
		/* Say why no master can be found (etcd down, a refused
		 * password...), once in a while: calls only retry. */
		if (!l->warned_at || l->asked_at - l->warned_at >= 5000) {
			mc_log_warn("rpc", "finding the master in etcd: %s",
				    err);
			l->warned_at = l->asked_at;
		}
		return rc;
	}
	if (rc == 0) {
		/* No leader yet, or another cluster id than the masters':
		 * the key says which (once in a while). */
		if (!l->warned_at || l->asked_at - l->warned_at >= 5000) {
			mc_log_warn("rpc",
				    "no master leads: etcd has no %s (the "
				    "cluster id comes from %s, and must be "
				    "the masters' --cluster_id)",
				    l->key, MC_RPC_LEADER_ENV_CLUSTER);
			l->warned_at = l->asked_at;
		}
		l->port = 0;
		return -EAGAIN;
	}
	rc = mc_parse_hostport(kv.val, l->host, sizeof(l->host), 50051,
			       &l->port);
	if (rc) {
		mc_log_warn("rpc", "%s holds '%.100s', not host:port", l->key,
			    kv.val);
		l->port = 0;
		rc = -EAGAIN;
	}
	mc_etcd_kv_clear(&kv);
	return rc;
}

int mc_rpc_leader_get(struct mc_rpc_leader *l, bool refresh, char *host,
		      size_t hostlen, int *port)
{
	int rc = 0;

	pthread_mutex_lock(&l->lock);
	if (!l->port || (refresh && now_ms() - l->asked_at >= 100))
		rc = ask(l);
	if (!rc) {
		snprintf(host, hostlen, "%s", l->host);
		*port = l->port;
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}
