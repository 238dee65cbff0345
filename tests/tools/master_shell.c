/* SPDX-License-Identifier: Apache-2.0 */
/*
 * master_shell: drive the master's filesystem-support RPCs from pytest,
 * one command line in, one reply line out ("ok ..." or "err CODE NAME"
 * with upstream's store code). Argument "-" stands for an empty string.
 *   list PREFIX DELIM START LIMIT -> ok N truncated=0|1 NAME:SIZE[:/] ...
 *   stat KEY                      -> ok size=S replicas=R holds=H lease=MS
 *   rename FROM TO [noreplace]    -> ok
 *   hold KEY                      -> ok HOLD_ID   (GetReplicaList + hold)
 *   renew ID | release ID         -> ok
 *   readfrom KEY AGE_MS           -> ok lease=MS  (a cached read made AGE_MS
 *                                    ago told to the master: read_age_ms)
 *   watch EPOCH AFTER WAIT_MS     -> ok epoch=E last=L reset=0|1 TYPE:KEY[>TO] ...
 *   pwatch N EPOCH AFTER WAIT_MS  -> ok N: N such long polls at once, from
 *                                    N threads (N pooled connections after)
 *   rm KEY [force]                -> ok
 *   listd PREFIX DELIM START LIMIT -> list with directory records:
 *                                    ... NAME:SIZE[:/][:MODE] (octal)
 *   statd KEY                     -> ok dir=0|1 mode=M uid=U gid=G size=S
 *   mkdir PATH MODE [UID GID]     -> ok        (PATH ends in '/')
 *   rmdir PATH                    -> ok
 *   setattr KEY dir|obj MASK MODE UID GID MTIME_NS
 *                                 -> ok mode=M uid=U gid=G flags=F mtime=T ctime=C
 *   renamedir FROM TO             -> ok
 *   checkpoints, other clients: see master_shell_ckpt.c
 *   quit                          -> exits
 * Usage: master_shell HOST:PORT
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master_client.h"
#include "master_shell.h"
#include "mooncake/mc_err.h"

const char *shell_arg(const char *s)
{
	return s && strcmp(s, "-") ? s : "";
}

void shell_err(int rc)
{
	int code = mc_err_to_store(rc);

	printf("err %d %s\n", code, mc_store_err_name(code));
}

static void do_list(struct mcs_master *m, char **a, int n, bool dirs)
{
	Mcrpc__ListResponse *r;
	int rc;

	if (n != 5) {
		puts("err -600 usage");
		return;
	}
	rc = mcs_master_list(m, shell_arg(a[1]), shell_arg(a[2]),
			     shell_arg(a[3]), (unsigned)strtoul(a[4], NULL, 10),
			     dirs, &r);
	if (rc) {
		shell_err(rc);
		return;
	}
	printf("ok %zu truncated=%d", r->n_entries, r->truncated ? 1 : 0);
	for (size_t i = 0; i < r->n_entries; i++) {
		printf(" %s:%" PRIu64 "%s", r->entries[i]->name,
		       r->entries[i]->size,
		       r->entries[i]->is_prefix ? ":/" : "");
		if (dirs && r->entries[i]->attr)
			printf(":%o", r->entries[i]->attr->mode);
	}
	putchar('\n');
	mcs_master_free(r);
}

static void do_stat(struct mcs_master *m, const char *key)
{
	Mcrpc__StatResponse *r;
	int rc = mcs_master_stat(m, key, false, &r);

	if (rc) {
		shell_err(rc);
		return;
	}
	printf("ok size=%" PRIu64 " replicas=%u holds=%u lease=%" PRIu64
	       " hard_pin=%d\n",
	       r->size, r->replicas, r->holds, r->lease_ms, r->hard_pin);
	mcs_master_free(r);
}

static void do_statd(struct mcs_master *m, const char *key)
{
	Mcrpc__StatResponse *r;
	int rc = mcs_master_stat(m, key, true, &r);

	if (rc) {
		shell_err(rc);
		return;
	}
	printf("ok dir=%d mode=%o uid=%u gid=%u size=%" PRIu64 "\n",
	       r->is_dir ? 1 : 0, r->attr ? r->attr->mode : 0,
	       r->attr ? r->attr->uid : 0, r->attr ? r->attr->gid : 0, r->size);
	mcs_master_free(r);
}

static void do_mkdir(struct mcs_master *m, char **a, int n)
{
	Mcrpc__Attr at = MCRPC__ATTR__INIT;
	int rc;

	at.mode = 040000u | (uint32_t)strtoul(a[2], NULL, 8);
	at.uid = n > 3 ? (uint32_t)strtoul(a[3], NULL, 10) : 0;
	at.gid = n > 4 ? (uint32_t)strtoul(a[4], NULL, 10) : 0;
	rc = mcs_master_mkdir(m, a[1], &at);
	if (rc)
		shell_err(rc);
	else
		puts("ok");
}

static void do_setattr(struct mcs_master *m, char **a)
{
	Mcrpc__Attr at = MCRPC__ATTR__INIT;
	Mcrpc__StatResponse *r;
	bool dir = !strcmp(a[2], "dir");
	int rc;

	at.mode = (dir ? 040000u : 0100000u) | (uint32_t)strtoul(a[4], NULL, 8);
	at.uid = (uint32_t)strtoul(a[5], NULL, 10);
	at.gid = (uint32_t)strtoul(a[6], NULL, 10);
	at.mtime_ns = strtoll(a[7], NULL, 10);
	rc = mcs_master_setattr(m, a[1], dir, (unsigned)strtoul(a[3], NULL, 0),
				&at, &r);
	if (rc) {
		shell_err(rc);
		return;
	}
	printf("ok mode=%o uid=%u gid=%u flags=%u mtime=%" PRId64
	       " ctime=%" PRId64 "\n",
	       r->attr ? r->attr->mode : 0, r->attr ? r->attr->uid : 0,
	       r->attr ? r->attr->gid : 0, r->attr ? r->attr->flags : 0,
	       r->attr ? r->attr->mtime_ns : 0,
	       r->attr ? r->attr->ctime_ns : 0);
	mcs_master_free(r);
}

static void ok_or_err(int rc)
{
	if (rc)
		shell_err(rc);
	else
		puts("ok");
}

static void do_hold(struct mcs_master *m, const char *key)
{
	Mcrpc__GetReplicaListResponse *r;
	const char *keys[1] = { key };
	int rc = mcs_master_get_replicas(m, false, keys, 1, true, &r);

	if (rc) {
		shell_err(rc);
		return;
	}
	if (r->n_results != 1 || r->results[0]->code)
		printf("err %d %s\n", r->n_results ? r->results[0]->code : -1,
		       mc_store_err_name(r->n_results ? r->results[0]->code :
							-1));
	else
		printf("ok %" PRIu64 "\n", r->results[0]->hold_id);
	mcs_master_free(r);
}

static void do_readfrom(struct mcs_master *m, const char *key, const char *age)
{
	Mcrpc__GetReplicaListResponse *r;
	const char *keys[1] = { key };
	uint32_t ages[1] = { (uint32_t)strtoul(age, NULL, 10) };
	int rc = mcs_master_renew_reads(m, keys, ages, 1, &r);

	if (rc) {
		shell_err(rc);
		return;
	}
	if (r->n_results != 1 || r->results[0]->code)
		shell_err(r->n_results ? r->results[0]->code : -EPROTO);
	else
		printf("ok lease=%" PRIu64 "\n", r->results[0]->lease_ttl_ms);
	mcs_master_free(r);
}

static void do_lease(struct mcs_master *m, const char *id, bool renew)
{
	uint64_t h = strtoull(id, NULL, 10);
	int res = 0;
	int rc = renew ? mcs_master_lease_renew(m, &h, 1, &res) :
			 mcs_master_lease_release(m, &h, 1, &res);

	if (!rc)
		rc = res;
	if (rc)
		shell_err(rc);
	else
		puts("ok");
}

static const char *ev_name(int t)
{
	switch (t) {
	case MCRPC__EVENT_TYPE__EV_PUT:
		return "put";
	case MCRPC__EVENT_TYPE__EV_REMOVE:
		return "remove";
	case MCRPC__EVENT_TYPE__EV_RENAME:
		return "rename";
	case MCRPC__EVENT_TYPE__EV_EVICT:
		return "evict";
	case MCRPC__EVENT_TYPE__EV_LOST:
		return "lost";
	case MCRPC__EVENT_TYPE__EV_ATTR:
		return "attr";
	case MCRPC__EVENT_TYPE__EV_MKDIR:
		return "mkdir";
	case MCRPC__EVENT_TYPE__EV_RMDIR:
		return "rmdir";
	case MCRPC__EVENT_TYPE__EV_CKPT_PUT:
		return "ckpt_put";
	case MCRPC__EVENT_TYPE__EV_CKPT_REMOVE:
		return "ckpt_remove";
	}
	return "?";
}

static void do_watch(struct mcs_master *m, char **a, int n)
{
	Mcrpc__WatchResponse *r;
	int rc;

	if (n != 4) {
		puts("err -600 usage");
		return;
	}
	rc = mcs_master_watch(m, strtoull(a[1], NULL, 10),
			      strtoull(a[2], NULL, 10),
			      (unsigned)strtoul(a[3], NULL, 10), 0, &r);
	if (rc) {
		shell_err(rc);
		return;
	}
	printf("ok epoch=%" PRIu64 " last=%" PRIu64 " reset=%d", r->epoch,
	       r->last, r->reset ? 1 : 0);
	for (size_t i = 0; i < r->n_events; i++)
		printf(" %s:%s%s%s", ev_name(r->events[i]->type),
		       r->events[i]->key, *r->events[i]->to ? ">" : "",
		       r->events[i]->to);
	putchar('\n');
	mcs_master_free(r);
}

struct pwatch {
	struct mcs_master *m;
	uint64_t epoch, after;
	unsigned wait_ms;
	pthread_t t;
	int rc;
};

static void *pwatch_main(void *arg)
{
	struct pwatch *w = arg;
	Mcrpc__WatchResponse *r;

	w->rc = mcs_master_watch(w->m, w->epoch, w->after, w->wait_ms, 0, &r);
	if (!w->rc)
		mcs_master_free(r);
	return NULL;
}

static void do_pwatch(struct mcs_master *m, char **a, int n)
{
	struct pwatch w[64];
	unsigned k = n == 5 ? (unsigned)strtoul(a[1], NULL, 10) : 0;
	int rc = 0;

	if (!k || k > 64) {
		puts("err -600 usage");
		return;
	}
	for (unsigned i = 0; i < k; i++) {
		w[i] = (struct pwatch){ .m = m,
					.epoch = strtoull(a[2], NULL, 10),
					.after = strtoull(a[3], NULL, 10),
					.wait_ms = (unsigned)strtoul(a[4], NULL,
								     10) };
		if (pthread_create(&w[i].t, NULL, pwatch_main, &w[i]))
			abort();
	}
	for (unsigned i = 0; i < k; i++) {
		pthread_join(w[i].t, NULL);
		if (w[i].rc && !rc)
			rc = w[i].rc;
	}
	if (rc)
		shell_err(rc);
	else
		printf("ok %u\n", k);
}

int main(int argc, char **argv)
{
	struct mcs_master *m;
	static char line[1 << 16];

	if (argc != 2) {
		fprintf(stderr, "usage: master_shell HOST:PORT\n");
		return 2;
	}
	if (mcs_master_create(argv[1], 40000, NULL, &m)) {
		fprintf(stderr, "master_shell: bad address %s\n", argv[1]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		char *a[16], *save = NULL;
		int n = 0;

		for (char *t = strtok_r(line, " \t\r\n", &save); t && n < 16;
		     t = strtok_r(NULL, " \t\r\n", &save))
			a[n++] = t;
		if (!n)
			continue;
		if (!strcmp(a[0], "quit"))
			break;
		if (shell_ckpt(&m, argv[1], a, n))
			continue;
		if (!strcmp(a[0], "list"))
			do_list(m, a, n, false);
		else if (!strcmp(a[0], "listd"))
			do_list(m, a, n, true);
		else if (!strcmp(a[0], "statd") && n == 2)
			do_statd(m, a[1]);
		else if (!strcmp(a[0], "mkdir") && (n == 3 || n == 5))
			do_mkdir(m, a, n);
		else if (!strcmp(a[0], "rmdir") && n == 2)
			ok_or_err(mcs_master_rmdir(m, a[1]));
		else if (!strcmp(a[0], "setattr") && n == 8)
			do_setattr(m, a);
		else if (!strcmp(a[0], "renamedir") && n == 3)
			ok_or_err(mcs_master_rename(m, a[1], a[2], false, true,
						    false));
		else if (!strcmp(a[0], "stat") && n == 2)
			do_stat(m, a[1]);
		else if (!strcmp(a[0], "rename") && (n == 3 || n == 4)) {
			int rc = mcs_master_rename(m, a[1], a[2], n == 4, false,
						   false);
			if (rc)
				shell_err(rc);
			else
				puts("ok");
		} else if (!strcmp(a[0], "hold") && n == 2)
			do_hold(m, a[1]);
		else if (!strcmp(a[0], "readfrom") && n == 3)
			do_readfrom(m, a[1], a[2]);
		else if (!strcmp(a[0], "renew") && n == 2)
			do_lease(m, a[1], true);
		else if (!strcmp(a[0], "release") && n == 2)
			do_lease(m, a[1], false);
		else if (!strcmp(a[0], "watch"))
			do_watch(m, a, n);
		else if (!strcmp(a[0], "pwatch"))
			do_pwatch(m, a, n);
		else if (!strcmp(a[0], "rm") && (n == 2 || n == 3)) {
			const char *k[1] = { a[1] };
			int res = 0, rc = mcs_master_remove(m, false, k, 1,
							    n == 3, &res);
			if (!rc)
				rc = res;
			if (rc)
				shell_err(rc);
			else
				puts("ok");
		} else
			puts("err -600 unknown command");
	}
	mcs_master_destroy(m);
	return 0;
}
