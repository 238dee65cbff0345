/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Publishing: the two metadata entries every engine keeps (upstream's
 * names and JSON):
 *
 *   mooncake/rpc_meta/<name>  {"ip_or_host_name": "...", "rpc_port": N}
 *   mooncake/ram/<name>       the segment descriptor (desc.c)
 *
 * Claiming a name: rpc_meta is created only if absent (put_new). If it is
 * held with our own address, it is ours already. Otherwise the recorded
 * address is probed: silence means its owner died and the entry is taken
 * over; an answer means a live engine has the name and creation fails
 * with MC_EMETACONFLICT. The descriptor is published again on every
 * change of the remote-accessible buffers (register.c), and both entries
 * when the engine's user asks (te_publish_again: a metadata service that
 * forgot them) or when the keeper finds them gone.
 *
 * The keeper: a thread that looks our rpc_meta entry up every
 * MC_TE_META_CHECK_MS (10 s) and publishes both entries again when the
 * service answers that it has none (a metadata service that restarted
 * without a record, as upstream's and mooncake_metad's default); an
 * entry naming another address is another engine's claim, left alone;
 * a service that does not answer is asked again next time.
 *
 * Calls down only: desc.c (encoding, key names), hs_client.c (the probe),
 * the metadata backend. With P2PHANDSHAKE nothing is published.
 * Locking: eng->publish_lock orders concurrent publications.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_log.h"
#include "mc_time.h"
#include "te_int.h"
#include "mooncake/mc_err.h"

#define PROBE_TIMEOUT_MS 1000

int te__publish(struct te_engine *eng)
{
	char key[TE_NAME_MAX + 64], err[TE_ERR_LEN];
	char *desc;
	int rc;

	if (eng->p2p || !eng->meta)
		return 0;
	rc = te__meta_key(eng, key, sizeof(key), "ram", eng->name);
	if (rc)
		return rc;
	pthread_mutex_lock(&eng->publish_lock);
	desc = te__describe(eng);
	rc = desc ? eng->meta->ops->put(eng->meta, key, desc, strlen(desc), err,
					sizeof(err)) :
		    -ENOMEM;
	pthread_mutex_unlock(&eng->publish_lock);
	if (rc)
		mc_log_err("te", "publishing %s: %s", key, err);
	free(desc);
	return rc;
}

int te__claim_name(struct te_engine *eng, char *err, size_t errlen)
{
	char key[TE_NAME_MAX + 64], body[TE_NAME_MAX + 64];
	char ip[TE_NAME_MAX], *cur;
	size_t len;
	int rc, port;

	rc = te__meta_key(eng, key, sizeof(key), "rpc_meta", eng->name);
	if (rc)
		return rc;
	snprintf(body, sizeof(body),
		 "{\"ip_or_host_name\":\"%s\",\"rpc_port\":%d}", eng->ip,
		 eng->rpc_port);
	rc = eng->meta->ops->put_new(eng->meta, key, body, strlen(body), err,
				     errlen);
	if (rc != MC_EMETACONFLICT)
		return rc;
	rc = eng->meta->ops->get(eng->meta, key, &cur, &len, err, errlen);
	if (rc == -ENOENT) /* released meanwhile */
		return eng->meta->ops->put_new(eng->meta, key, body,
					       strlen(body), err, errlen);
	if (rc)
		return rc;
	rc = te__rpc_meta_decode(cur, len, ip, sizeof(ip), &port);
	free(cur);
	if (!rc && port == eng->rpc_port && !strcmp(ip, eng->ip))
		return 0; /* ours: published before, by this engine */
	if (!rc && te__rpc_probe(ip, port, PROBE_TIMEOUT_MS, eng->auth) == 0) {
		snprintf(err, errlen,
			 "segment name '%.200s' is in use by a live engine at "
			 "%.200s:%d",
			 eng->name, ip, port);
		return MC_EMETACONFLICT;
	}
	mc_log_debug("te",
		     "taking over segment name '%s' (previous owner "
		     "at %s:%d does not answer)",
		     eng->name, rc ? "?" : ip, rc ? 0 : port);
	rc = eng->meta->ops->del(eng->meta, key, err, errlen);
	if (rc && rc != -ENOENT)
		return rc;
	return eng->meta->ops->put_new(eng->meta, key, body, strlen(body), err,
				       errlen);
}

int te_publish_again(struct te_engine *eng)
{
	char err[TE_ERR_LEN];
	int rc;

	if (te__forked(eng))
		return MC_EFORKED;
	if (eng->p2p || !eng->meta)
		return 0;
	rc = te__claim_name(eng, err, sizeof(err));
	if (rc) {
		mc_log_err("te", "publishing the address of '%s' again: %s",
			   eng->name, err);
		return rc;
	}
	return te__publish(eng);
}

/* Whether the service still has our rpc_meta entry: 1 yes (or someone
 * else's), 0 gone, <0 could not tell. */
static int entry_there(struct te_engine *eng)
{
	char key[TE_NAME_MAX + 64], err[TE_ERR_LEN];
	char *cur = NULL;
	size_t len;
	int rc;

	rc = te__meta_key(eng, key, sizeof(key), "rpc_meta", eng->name);
	if (rc)
		return rc;
	rc = eng->meta->ops->get(eng->meta, key, &cur, &len, err, sizeof(err));
	free(cur);
	if (rc == -ENOENT)
		return 0;
	return rc ? rc : 1;
}

static void *keeper_main(void *arg)
{
	struct te_engine *eng = arg;
	struct timespec ts;

	pthread_mutex_lock(&eng->keep_lock);
	for (;;) {
		ts = mc_mono_deadline(eng->keep_ms);
		while (!eng->keep_quit &&
		       pthread_cond_timedwait(&eng->keep_cv, &eng->keep_lock,
					      &ts) != ETIMEDOUT)
			;
		if (eng->keep_quit)
			break;
		pthread_mutex_unlock(&eng->keep_lock);
		if (entry_there(eng) == 0) {
			mc_log_warn("te",
				    "the metadata service lost the entries of "
				    "'%s' (restarted?): publishing them again",
				    eng->name);
			(void)te_publish_again(eng);
		}
		pthread_mutex_lock(&eng->keep_lock);
	}
	pthread_mutex_unlock(&eng->keep_lock);
	return NULL;
}

int te__keeper_start(struct te_engine *eng, unsigned ms)
{
	int rc;

	pthread_mutex_init(&eng->keep_lock, NULL);
	mc_cond_init_mono(&eng->keep_cv);
	eng->keep_ms = ms;
	if (eng->p2p || !eng->meta || !ms)
		return 0;
	rc = pthread_create(&eng->keep_thread, NULL, keeper_main, eng);
	if (rc)
		return -rc;
	eng->keeping = true;
	return 0;
}

void te__keeper_stop(struct te_engine *eng)
{
	if (eng->keeping) {
		pthread_mutex_lock(&eng->keep_lock);
		eng->keep_quit = true;
		pthread_cond_signal(&eng->keep_cv);
		pthread_mutex_unlock(&eng->keep_lock);
		pthread_join(eng->keep_thread, NULL);
		eng->keeping = false;
	}
	pthread_cond_destroy(&eng->keep_cv);
	pthread_mutex_destroy(&eng->keep_lock);
}

void te__unpublish(struct te_engine *eng)
{
	char key[TE_NAME_MAX + 64], err[TE_ERR_LEN];
	static const char *const kinds[] = { "ram", "rpc_meta" };

	if (eng->p2p || !eng->meta)
		return;
	for (size_t i = 0; i < MC_ARRAY_SIZE(kinds); i++) {
		if (te__meta_key(eng, key, sizeof(key), kinds[i], eng->name))
			continue;
		int rc = eng->meta->ops->del(eng->meta, key, err, sizeof(err));
		if (rc && rc != -ENOENT) {
			/* The same service has the others: one timeout at
			 * exit is enough (stale entries are taken over by
			 * name later). */
			mc_log_warn("te", "removing %s: %s%s", key, err,
				    i + 1 < MC_ARRAY_SIZE(kinds) ?
					    " (the other entry is left too)" :
					    "");
			break;
		}
	}
}
