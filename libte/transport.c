/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transport registry: the built-in transports of
 * transport/registry.h, started and stopped in that order (stopped in
 * reverse), looked up by name, and their counters (te_counters).
 * The core reaches transports through their ops only (naming one by its
 * TE_TP_ index at most: MC_FORCE_TCP, batch.c's fallbacks), and they
 * call down into task.c, memreg.c, copy.c, gpu.c and hs_client.c only.
 * Whether rdma can serve (te_rdma_check) is answered here from its NIC
 * discovery, which needs no device opened.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_log.h"
#include "te_int.h"
#include "transport/rdma/topo.h"
#include "mooncake/mc_err.h"

static const struct te_transport_ops *const builtin[TE_TP_COUNT] = {
#define TE_TP_ENTRY(id, name) [TE_TP_##id] = &te_##name##_ops,
	TE_TRANSPORTS(TE_TP_ENTRY)
#undef TE_TP_ENTRY
};

const struct te_transport_ops *te__transport_ops(int i)
{
	return builtin[i];
}

int te__transport_index(const char *name)
{
	for (int i = 0; i < TE_TP_COUNT; i++)
		if (!strcmp(builtin[i]->name, name))
			return i;
	return -1;
}

int te__transports_init(struct te_engine *eng, const struct te_engine_cfg *cfg,
			char *err, size_t errlen)
{
	for (int i = 0; i < TE_TP_COUNT; i++) {
		struct te_transport *tp;
		int rc = builtin[i]->init(eng, cfg, &tp, err, errlen);

		if (rc) {
			te__transports_fini(eng);
			return rc;
		}
		tp->ops = builtin[i];
		tp->eng = eng;
		tp->index = i;
		eng->tps[i] = tp;
	}
	return 0;
}

void te__transports_fini(struct te_engine *eng)
{
	for (int i = TE_TP_COUNT - 1; i >= 0; i--) {
		if (eng->tps[i])
			eng->tps[i]->ops->fini(eng->tps[i]);
		eng->tps[i] = NULL;
	}
}

int te_counters(struct te_engine *eng, const char *transport,
		struct te_counters *out)
{
	int i = te__transport_index(transport);
	struct te_transport *tp;

	if (te__forked(eng))
		return MC_EFORKED;
	if (i < 0 || !(tp = eng->tps[i]))
		return -ENOENT;
	out->read_bytes = atomic_load(&tp->read_bytes);
	out->write_bytes = atomic_load(&tp->write_bytes);
	out->read_requests = atomic_load(&tp->read_requests);
	out->write_requests = atomic_load(&tp->write_requests);
	out->failed_requests = atomic_load(&tp->failed_requests);
	out->served_bytes = atomic_load(&tp->served_bytes);
	out->caller_requests = atomic_load(&tp->caller_requests);
	out->connections = out->registrations = out->inflight = 0;
	if (tp->ops->stats)
		tp->ops->stats(tp, out);
	return 0;
}

static bool env_on(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0");
}

json_t *te__rdma_topology(void)
{
	struct rdma_topo_opts o = rdma_topo_opts_env(NULL);
	struct rdma_topo t;
	json_t *devs, *root;
	char err[256];

	if (rdma_topo_discover(&o, &t, err, sizeof(err)))
		return NULL;
	devs = json_array();
	for (size_t i = 0; i < t.n_nics; i++) {
		const struct rdma_nic *n = &t.nics[i];
		json_array_append_new(
			devs,
			json_pack("{s:s, s:i, s:i, s:b, s:s, s:i, s:s}", "name",
				  n->name, "numa_node", n->numa_node, "port",
				  n->port, "active", n->active, "link_layer",
				  n->roce ? "Ethernet" : "InfiniBand",
				  "gid_index", n->gid_index, "gid", n->gid));
	}
	root = json_pack("{s:o, s:O}", "devices", devs, "priority_matrix",
			 t.matrix);
	rdma_topo_free(&t);
	return root;
}

int te_rdma_check(const char *devices, char *err, size_t errlen)
{
	struct rdma_topo_opts o = rdma_topo_opts_env(devices);
	struct rdma_topo t;
	char why[256] = "";
	int rc;

	if (env_on("MC_FORCE_TCP")) {
		mc_log_warn("te", "transport rdma asked for; MC_FORCE_TCP is "
				  "set: tcp serves instead");
		return TE_RDMA_FALLBACK;
	}
	rc = rdma_topo_discover(&o, &t, why, sizeof(why));
	if (!rc) {
		rdma_topo_free(&t);
		if (te__transport_index("rdma") >= 0)
			return 0;
		snprintf(why, sizeof(why),
			 "this build has no rdma transport (built without "
			 "libibverbs)");
	}
	if (env_on("MC_RDMA_FALLBACK_TCP")) {
		mc_log_warn("te",
			    "transport rdma asked for: %s; tcp serves instead, "
			    "as MC_RDMA_FALLBACK_TCP allows",
			    why);
		return TE_RDMA_FALLBACK;
	}
	snprintf(err, errlen,
		 "transport 'rdma' was asked for, but %s; use tcp, or set "
		 "MC_RDMA_FALLBACK_TCP=1 to run over tcp when rdma cannot "
		 "serve",
		 why);
	return MC_ENOTSUPPORTED;
}
