/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Notifications (upstream's notify messages): te_notify() sends one to a
 * segment's owner (its handshake listener, through hs_client.c; to
 * ourselves straight into the queue), and te_notifications() drains the
 * messages peers sent us, which the listener (hs_server.c) queues with
 * te__notif_push().
 *
 * Calls down only: peer.c (te__segment_peer), hs_client.c.
 * Locking: eng->notif_lock guards the queue.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "te_int.h"
#include "mooncake/mc_err.h"

void te__notif_push(struct te_engine *eng, char *name, char *msg)
{
	struct te_notif *n = calloc(1, sizeof(*n));

	if (!n) {
		free(name);
		free(msg);
		return;
	}
	n->name = name;
	n->msg = msg;
	pthread_mutex_lock(&eng->notif_lock);
	if (eng->notif_tail)
		eng->notif_tail->next = n;
	else
		eng->notif_head = n;
	eng->notif_tail = n;
	pthread_mutex_unlock(&eng->notif_lock);
}

int te_notify(struct te_engine *eng, struct te_segment *target,
	      const char *name, const char *msg)
{
	struct te_peer *p;
	int rc;

	if (te__forked(eng))
		return MC_EFORKED;
	p = te__segment_peer(target);
	if (!p)
		return -EHOSTUNREACH;
	if (p->is_self) {
		char *n = strdup(name), *m = strdup(msg);
		if (!n || !m) {
			free(n);
			free(m);
			te__peer_put(p);
			return -ENOMEM;
		}
		te__notif_push(eng, n, m);
		rc = 0;
	} else {
		rc = te__rpc_notify(p->ip, p->rpc_port, (int)eng->timeout_ms,
				    eng->auth, name, msg);
	}
	te__peer_put(p);
	return rc;
}

int te_notifications(struct te_engine *eng, char **names, char **msgs, int max)
{
	int n = 0;

	if (te__forked(eng))
		return MC_EFORKED;
	pthread_mutex_lock(&eng->notif_lock);
	while (n < max && eng->notif_head) {
		struct te_notif *x = eng->notif_head;
		eng->notif_head = x->next;
		if (!eng->notif_head)
			eng->notif_tail = NULL;
		names[n] = x->name;
		msgs[n] = x->msg;
		free(x);
		n++;
	}
	pthread_mutex_unlock(&eng->notif_lock);
	return n;
}

void te__notifications_free(struct te_engine *eng)
{
	char *n, *m;

	while (te_notifications(eng, &n, &m, 1) == 1) {
		free(n);
		free(m);
	}
}
