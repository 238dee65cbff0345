/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake ckpt: checkpoints shared peer to peer (include/mooncake/ckpt.h).
 *   publish DIR NAME   publish DIR's tree as NAME (sealed when complete)
 *                      and serve it until interrupted
 *   ls [PREFIX]        checkpoints: size, files, shards, holders
 *   get NAME DIR       fetch into DIR (new or empty; parents made);
 *                      --serve: then keep serving it to other readers
 *                      until interrupted
 *   info NAME          everything about NAME, as JSON
 *   link NAME TARGET   a name for another (ckpt/latest), replacing a link
 *   rm NAME            unpublish NAME for everyone
 *   seal NAME|PATH     publish a directory copied into a mount's ckpt/
 *                      under its final name (NAME: looked for in every
 *                      mooncakefs mount; PATH: that directory)
 * Progress goes to stderr: one line redrawn on a terminal (bytes, rate,
 * ETA, sources in use), a plain line every 10% otherwise. A command that
 * serves prints "serving NAME at HOST:PORT" on stdout once it does.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_layout.h"
#include "cli.h"
#include "mc_time.h"
#include "mooncake/ckpt.h"
#include "mooncake/mc_err.h"

struct bar {
	const char *what;
	bool tty;
	uint64_t start_ms, last_ms;
	int last_tenth;
};

static void progress(void *arg, const mooncake_ckpt_progress_t *p)
{
	struct bar *b = arg;
	uint64_t now = mc_mono_ms(), el = now - b->start_ms;
	double rate = el ? (double)p->bytes * 1000.0 / (double)el : 0;
	int tenth = p->total ? (int)(p->bytes * 10 / p->total) : 10;
	char done[32], total[32], r[32], eta[32] = "-";

	if (b->tty ? now - b->last_ms < 200 && p->bytes < p->total :
		     tenth == b->last_tenth)
		return;
	b->last_ms = now;
	b->last_tenth = tenth;
	mc_cli_human(p->bytes, done, sizeof(done));
	mc_cli_human(p->total, total, sizeof(total));
	mc_cli_human((uint64_t)rate, r, sizeof(r));
	if (rate > 0 && p->total > p->bytes)
		snprintf(eta, sizeof(eta), "%.0fs",
			 (double)(p->total - p->bytes) / rate);
	fprintf(stderr,
		"%s%s: %s / %s (%3.0f%%), %s/s, ETA %s, shards %" PRIu32
		"/%" PRIu32 ", sources %" PRIu32 "%s",
		b->tty ? "\r\033[K" : "", b->what, done, total,
		p->total ? 100.0 * (double)p->bytes / (double)p->total : 100.0,
		r, eta, p->shards, p->nshards, p->sources, b->tty ? "" : "\n");
	fflush(stderr);
}

static void bar_end(struct bar *b)
{
	if (b->tty) {
		fputc('\n', stderr);
		fflush(stderr);
	}
}

/* Serve until SIGINT or SIGTERM (blocked before the handle's threads
 * start, so they never take them). */
static void serve_until_signal(void)
{
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigwait(&set, &sig);
}

static void block_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void print_entry(void *arg, const mooncake_ckpt_entry_t *e)
{
	char size[32];

	char name[4 * 256 + 16], link[4 * 256 + 16];

	(void)arg;
	mc_cli_escape(e->name, name, sizeof(name));
	if (e->link) {
		printf("%s -> %s\n", name,
		       mc_cli_escape(e->link, link, sizeof(link)));
		return;
	}
	mc_cli_human(e->total_size, size, sizeof(size));
	printf("%-32s %10s %6" PRIu32 " files %6" PRIu32 " shards %4" PRIu32
	       " holders%s\n",
	       name, size, e->files, e->shards, e->holders,
	       e->lost_shards ? " (shards without holder!)" : "");
}

/* A checkpoint published already: sealing it again changes nothing
 * (a retried seal succeeds). */
static int sealed_already(const char *path)
{
	fprintf(stderr, "mooncake: seal %s: published already\n", path);
	return 0;
}

/* The seal of a directory staged in a mount: the mount publishes it. */
static int seal_path(const char *path)
{
	if (!setxattr(path, "user.mooncake.seal", "1", 1, 0))
		return 0;
	if (errno == EEXIST)
		return sealed_already(path);
	fprintf(stderr, "mooncake: seal %s: %s%s\n", path, mc_strerror(-errno),
		errno == ENOTSUP ? " (not a checkpoint copied into a "
				   "mooncakefs mount's ckpt/)" :
				   "");
	return 1;
}

/* mooncake ckpt seal NAME: the mount of this host that staged NAME (a
 * mount where NAME is published already answers ENOTSUP: skipped). */
static int seal(const char *arg)
{
	char dev[256], dir[4096], type[64], path[4400];
	FILE *m;

	if (strchr(arg, '/'))
		return seal_path(arg);
	m = fopen("/proc/self/mounts", "r");
	if (!m) {
		fprintf(stderr, "mooncake: /proc/self/mounts: %s\n",
			mc_strerror(-errno));
		return 1;
	}
	while (fscanf(m, "%255s %4095s %63s %*s %*d %*d", dev, dir, type) ==
	       3) {
		struct stat st;
		if (strcmp(type, "fuse.mooncakefs"))
			continue;
		snprintf(path, sizeof(path), "%s/ckpt/%s", dir, arg);
		if (lstat(path, &st) || !S_ISDIR(st.st_mode))
			continue;
		if (!setxattr(path, "user.mooncake.seal", "1", 1, 0)) {
			fclose(m);
			return 0;
		}
		if (errno == EEXIST) {
			fclose(m);
			return sealed_already(path);
		}
		if (errno != ENOTSUP) {
			fclose(m);
			fprintf(stderr, "mooncake: seal %s: %s\n", path,
				mc_strerror(-errno));
			return 1;
		}
	}
	fclose(m);
	fprintf(stderr,
		"mooncake: seal %s: no mooncakefs mount here has "
		"ckpt/%s waiting to be sealed\n",
		arg, arg);
	return 1;
}

static int run(const struct cli_cfg *cfg, mooncake_ckpt_t *c, int n,
	       const char *const *pos)
{
	const char *sub = pos[1];
	struct bar b = { .tty = isatty(2),
			 .start_ms = mc_mono_ms(),
			 .last_tenth = -1 };
	int rc;

	if (!strcmp(sub, "publish") && n == 4) {
		b.what = "checksums";
		rc = mooncake_ckpt_publish_dir(c, pos[2], pos[3], progress, &b);
		bar_end(&b);
		if (rc)
			return mc_cli_fail("publish", rc);
		printf("serving %s at %s\n", pos[3], mooncake_ckpt_endpoint(c));
		fflush(stdout);
		serve_until_signal();
		return 0;
	}
	if (!strcmp(sub, "get") && n == 4) {
		b.what = pos[2];
		rc = mooncake_ckpt_get_dir(c, pos[2], pos[3], progress, &b);
		bar_end(&b);
		if (rc)
			return mc_cli_fail("get", rc);
		if (cfg->serve) {
			printf("serving %s at %s\n", pos[2],
			       mooncake_ckpt_endpoint(c));
			fflush(stdout);
			serve_until_signal();
		}
		return 0;
	}
	if (!strcmp(sub, "ls") && n <= 3) {
		int64_t k = mooncake_ckpt_list(c, n == 3 ? pos[2] : NULL,
					       print_entry, NULL);
		return k < 0 ? mc_cli_fail("ls", (int)k) : 0;
	}
	if (!strcmp(sub, "info") && n == 3) {
		char *json = NULL;
		rc = mooncake_ckpt_info(c, pos[2], &json);
		if (rc)
			return mc_cli_fail(pos[2], rc);
		printf("%s\n", json);
		free(json);
		return 0;
	}
	if (!strcmp(sub, "link") && n == 4) {
		rc = mooncake_ckpt_link(c, pos[2], pos[3], true);
		return rc ? mc_cli_fail("link", rc) : 0;
	}
	if (!strcmp(sub, "rm") && n == 3) {
		rc = mooncake_ckpt_remove(c, pos[2]);
		return rc ? mc_cli_fail(pos[2], rc) : 0;
	}
	return -1;
}

/* Where publish --copy keeps its copy (--cache_dir; else root's under
 * /var/cache, a user's under their cache directory), made if missing:
 * 0, or 1 with a message naming it. */
static int copy_dir(const struct cli_cfg *cfg, char *out, size_t n)
{
	int rc;

	if (cfg->cache_dir && *cfg->cache_dir)
		snprintf(out, n, "%s", cfg->cache_dir);
	else
		mcs_ckpt_default_dir("ckpt-publish", out, n);
	rc = mcs_ckpt_usable_dir(out);
	if (rc)
		fprintf(stderr,
			"mooncake: ckpt publish --copy: cannot keep the copy "
			"in %s: %s (--cache_dir DIR chooses another)\n",
			out, mc_strerror(rc));
	return rc ? 1 : 0;
}

int mc_cli_ckpt(const struct cli_cfg *cfg, int n, const char *const *pos)
{
	char dir[PATH_MAX];
	mooncake_ckpt_options_t o = {
		.shard_size = cfg->shard_size,
		.inflight = (unsigned)cfg->inflight,
		.publish_copy = cfg->copy,
	};
	mooncake_ckpt_t *c = NULL;
	mooncake_store_t s;
	int rc;

	if (cfg->copy && n >= 2 && !strcmp(pos[1], "publish")) {
		if (copy_dir(cfg, dir, sizeof(dir)))
			return 1;
		o.cache_dir = dir;
	}

	if (n < 2) {
		fprintf(stderr, "usage: mooncake ckpt publish DIR NAME | ls "
				"[PREFIX] | get NAME DIR | info NAME | link "
				"NAME TARGET | rm NAME | seal NAME|PATH\n");
		return 2;
	}
	if (!strcmp(pos[1], "seal"))
		return n == 3 ? seal(pos[2]) : 2;
	block_signals();
	if (strcmp(pos[1], "publish") && strcmp(pos[1], "get")) {
		/* ls, info, link, rm ask the master only: no metadata
		 * service needed (it may be down, or elsewhere). */
		struct cli_cfg master_only = *cfg;

		master_only.metadata = (char *)"P2PHANDSHAKE";
		s = mc_cli_join(&master_only);
	} else {
		s = mc_cli_join(cfg);
	}
	if (!s)
		return 1;
	rc = mooncake_ckpt_open(s, &o, &c);
	if (rc) {
		mooncake_store_destroy(s);
		return mc_cli_fail("checkpoints", rc);
	}
	rc = run(cfg, c, n, pos);
	if (rc < 0) {
		fprintf(stderr,
			"mooncake: ckpt %s: unknown command or wrong "
			"number of arguments (mooncake --help)\n",
			pos[1]);
		rc = 2;
	}
	mooncake_ckpt_close(c);
	mooncake_store_destroy(s);
	return rc;
}
