/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncakefs: mount the Mooncake pool. Checks the master answers (so a
 * mount against a dead master fails at once), mounts, daemonizes unless
 * -f, then joins the pool in the background (contributing segment_size
 * bytes, kept in /dev/shm for the next mount of this point; joining must
 * not delay the mount: operations wait for it) and serves FUSE requests on worker threads until unmounted. On
 * unmount the node leaves the pool cleanly: its segment is unmounted at
 * the master.
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "mc_auth.h"
#include "ckpt_layout.h"
#include "mc_daemon.h"
#include "mc_log.h"
#include "mc_rpc_client.h"
#include "mc_time.h"
#include "mcfs.h"
#include "segment.h"
#include "mooncake/mc_err.h"
#include "store_int.h"

/* How long a mount waits for another process to let go of its segment:
 * the daemon of the mount before, whose umount returned while it was
 * still leaving the pool (a few seconds at most; longer, another live
 * process holds that segment_name, and the join fails as it would have). */
#define JOIN_WAIT_MS 20000
#define JOIN_POLL_MS 100

static int join(struct mcfs *fs, const struct mcs_cfg_args *a)
{
	const char *name = a->segment_name && *a->segment_name ?
				   a->segment_name :
				   a->default_segment_name;
	uint64_t until = mc_mono_ms() + JOIN_WAIT_MS;
	bool said = false;

	for (;;) {
		int rc = 0;

		/* The mount before lets go of its segment first, then of
		 * its engine's port and metadata entries. */
		if (!name || !mcs_segment_held(name))
			rc = mcs_store_setup(fs->store, a);
		else
			rc = MC_ESEGEXISTS;
		if ((rc != MC_ESEGEXISTS && rc != -EADDRINUSE &&
		     rc != MC_EMETACONFLICT) ||
		    mc_mono_ms() >= until || atomic_load(&fs->stop))
			return mc_err_to_store(rc);
		if (!said)
			mc_log_notice("mcfs",
				      "segment %s or its address is held by "
				      "another process (the mount before, "
				      "leaving?): waiting up to %u s",
				      name ? name : "", JOIN_WAIT_MS / 1000);
		said = true;
		usleep(JOIN_POLL_MS * 1000);
	}
}

/* How the mount joins the pool (mcs_store_setup's arguments). */
static struct mcs_cfg_args join_args(const struct mcfs *fs)
{
	return (struct mcs_cfg_args){
		.local_hostname = fs->o.local_hostname,
		.metadata_server = fs->o.metadata,
		.global_segment_size = fs->o.segment_size,
		.local_buffer_size = fs->o.buffer_size,
		.protocol = fs->o.protocol,
		.device_name = fs->o.device,
		.master_server_address = fs->o.master,
		.segment_name = fs->o.segment_name,
		.auth_token_file = fs->o.auth_token_file,
		.keep_segment = true,
		.default_segment_name = fs->default_segment,
		/* The mount is the operator's view of every key, tenants'
		 * (.tenants/T/) included, whatever tenant_id or
		 * MOONCAKE_TENANT_ID its clients' configuration names. */
		.tenant_id = "default",
	};
}

/* A failure to join that waiting can mend (the master or the metadata
 * service not up yet, as at boot), rather than the configuration. */
static bool join_may_work_later(int rc)
{
	switch (rc) {
	case MC_STORE_RPC_FAIL:
	case MC_STORE_RPC_TIMEOUT:
	case MC_STORE_ETCD_OPERATION_ERROR:
	case MC_STORE_UNAVAILABLE_IN_CURRENT_MODE:
	case MC_STORE_TRANSFER_FAIL:
	case MC_STORE_INTERNAL_ERROR: /* e.g. a metadata service's 5xx */
		return true;
	default:
		return false;
	}
}

/* Sleep ms, or less once the mount is stopping; false then. */
static bool nap_unless_stopping(struct mcfs *fs, unsigned ms)
{
	for (unsigned t = 0; t < ms && !atomic_load(&fs->stop); t += 100)
		usleep(100 * 1000);
	return !atomic_load(&fs->stop);
}

/* Join, again and again while what fails may work later (logged at the
 * first failure and every minute); the last code. */
static int join_retrying(struct mcfs *fs, const struct mcs_cfg_args *a)
{
	uint64_t said = 0;
	int rc;

	for (;;) {
		uint64_t now;

		rc = join(fs, a);
		if (!rc || !join_may_work_later(rc))
			break;
		now = mc_mono_ms();
		pthread_mutex_lock(&fs->ready_lock);
		fs->join_failing = true; /* waiting callers answer EIO */
		pthread_cond_broadcast(&fs->ready_cond);
		pthread_mutex_unlock(&fs->ready_lock);

		if (!said || now - said >= 60000) {
			mc_log_err(
				"mcfs",
				"joining the pool at %s: %s; trying again "
				"every 2 s (operations answer EIO until then)",
				fs->o.master, mooncake_store_strerror(rc));
			said = now;
		}
		if (!nap_unless_stopping(fs, 2000))
			break;
		/* This try may take a while (a large segment): wait for it. */
		pthread_mutex_lock(&fs->ready_lock);
		fs->join_failing = false;
		pthread_mutex_unlock(&fs->ready_lock);
	}
	if (!rc && said)
		mc_log_notice("mcfs", "joined the pool at %s at last",
			      fs->o.master);
	return rc;
}

/* The pool cannot be joined for good: leave no mount behind that answers
 * EIO forever. The session ends at its next request, which this makes:
 * the lookup of a name never asked before (the kernel may answer the
 * root's attributes from its cache). */
static void unmount_self(struct mcfs *fs)
{
	char path[PATH_MAX];
	struct stat st;

	mc_log_err("mcfs", "unmounting %s: it cannot join the pool",
		   fs->o.mountpoint);
	fuse_session_exit(fs->se);
	snprintf(path, sizeof(path), "%s/.mooncake-unmount-%d-%llu",
		 fs->o.mountpoint, (int)getpid(),
		 (unsigned long long)mc_mono_ms());
	(void)stat(path, &st);
}

static void *setup_main(void *arg)
{
	struct mcfs *fs = arg;
	struct mcs_cfg_args a = join_args(fs);
	int rc;

	rc = join_retrying(fs, &a);
	if (!rc) {
		mooncake_store_set_timeouts(fs->store, fs->o.rpc_timeout_ms, 0);
		rc = mcfs_bufs_init(fs, fs->o.threads + 4);
	}
	if (!rc)
		rc = mcfs_ra_pool_init(&fs->ra, fs->store, fs->o.read_ahead,
				       fs->o.read_ahead_limit, &fs->splice);
	if (!rc)
		rc = mcfs_watch_start(fs);
	if (rc)
		mc_log_err("mcfs", "joining the pool at %s failed: %s",
			   fs->o.master, mooncake_store_strerror(rc));
	else
		mc_log_notice("mcfs",
			      "joined the pool at %s as %s, contributing %llu "
			      "bytes",
			      fs->o.master,
			      mooncake_store_get_hostname(fs->store),
			      (unsigned long long)fs->o.segment_size);
	pthread_mutex_lock(&fs->ready_lock);
	fs->ready = rc ? (rc < 0 ? rc : -1) : 1;
	pthread_cond_broadcast(&fs->ready_cond);
	pthread_mutex_unlock(&fs->ready_lock);
	if (rc && !atomic_load(&fs->stop))
		unmount_self(fs);
	return NULL;
}

/*
 * Without -o auth_token_file= or MOONCAKE_AUTH_TOKEN_FILE, the token the
 * config file (MOONCAKE_CONFIG_PATH) names, as the library finds it: the
 * mount's own RPC clients and the library's then hold the same one. A
 * token file that cannot be used (missing, too open, empty) fails the
 * mount before it mounts, as the other options do.
 */
static int resolve_token(struct mcfs_opts *o)
{
	char err[MC_ERR_LEN] = "";
	struct mc_auth_key key;
	struct mcs_cfg c;
	bool have;
	int rc = 0;

	if (!o->auth_token_file || !*o->auth_token_file) {
		rc = mcs_cfg_load(&c, NULL, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "mooncakefs: %s\n", err);
			return rc;
		}
		if (c.auth_token_file && *c.auth_token_file) {
			free(o->auth_token_file);
			o->auth_token_file = strdup(c.auth_token_file);
			if (!o->auth_token_file)
				rc = -ENOMEM;
		}
		mcs_cfg_release(&c);
		if (rc)
			return rc;
	}
	rc = mc_auth_key_load_opt(o->auth_token_file, &have, &key, err,
				  sizeof(err));
	if (rc)
		fprintf(stderr, "mooncakefs: auth_token_file: %s\n", err);
	mc_auth_key_clear(&key);
	return rc;
}

/* Is the master there? Learns the longest key it accepts (names that
 * would make a longer key are refused at creation: ENAMETOOLONG). */
static int check_master(const struct mcfs_opts *o, size_t *max_key)
{
	Mcrpc__ServiceReadyRequest q = MCRPC__SERVICE_READY_REQUEST__INIT;
	ProtobufCMessage *r = NULL;
	struct mc_rpc_client *c;
	int rc = mcfs_rpc_client(o, &c);

	if (rc)
		return rc;
	rc = mc_rpc_call(c, MCRPC__METHOD__SERVICE_READY, &q.base, &r);
	if (r) {
		uint64_t mk =
			((Mcrpc__ServiceReadyResponse *)r)->max_key_length;

		if (mk && mk < SIZE_MAX) /* 0: a master from before the field */
			*max_key = (size_t)mk;
		protobuf_c_message_free_unpacked(r, NULL);
	}
	mc_rpc_client_destroy(c);
	if (rc)
		fprintf(stderr, "mooncakefs: master %s: %s\n", o->master,
			mc_strerror(rc));
	return rc;
}

/* The kept segment's name when segment_name= is not given: one per mount
 * point (NULL when out of memory: the engine's name then). */
static char *default_segment_name(const struct mcfs_opts *o)
{
	size_t n = strlen(o->mountpoint) + 8;
	char *s = malloc(n);

	if (!s)
		return NULL;
	snprintf(s, n, "mcfs%s", o->mountpoint);
	for (char *c = s; *c; c++)
		if (*c == '/' || *c == ':' || *c == ' ')
			*c = '_';
	return s;
}

/* Before mounting, what would make the pool's join fail for good: an
 * unknown protocol, a kept segment another live process holds (waited
 * for: the daemon of the mount before may still be leaving). The mount
 * failed for neither, and answered EIO until unmounted. */
static int check_joinable(const struct mcfs *fs)
{
	const char *p = fs->o.protocol, *name = fs->o.segment_name;
	struct mcs_cfg_args a = join_args(fs);
	char err[MC_ERR_LEN] = "";

	if (p && *p && strcmp(p, "tcp") && strcmp(p, "rdma")) {
		fprintf(stderr, "mooncakefs: protocol=%s: tcp or rdma\n", p);
		return -EINVAL;
	}
	if (mcs_join_check(&a, err, sizeof(err))) {
		fprintf(stderr, "mooncakefs: %s\n", err);
		return -EINVAL;
	}
	if (!name || !*name)
		name = fs->default_segment;
	if (!fs->o.segment_size || !name)
		return 0;
	for (unsigned waited = 0; mcs_segment_held(name);
	     waited += JOIN_POLL_MS) {
		if (waited >= JOIN_WAIT_MS) {
			fprintf(stderr,
				"mooncakefs: segment %s is in use by a live "
				"process (another mount of it?)\n",
				name);
			return -EBUSY;
		}
		usleep(JOIN_POLL_MS * 1000);
	}
	return 0;
}

/* A log_file= that cannot be written fails the mount (it mounted, and
 * its logs went nowhere). */
static int check_log_file(const struct mcfs_opts *o)
{
	int fd;

	if (!o->log_file)
		return 0;
	/* 0640 as the daemons' logs: they name keys. */
	fd = open(o->log_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0) {
		fprintf(stderr, "mooncakefs: log_file=%s: %s\n", o->log_file,
			mc_strerror(-errno));
		return -EINVAL;
	}
	close(fd);
	return 0;
}

/* ckpt/'s cache directory (ckpt_cache=, made if missing; by default
 * root's under /var/cache, a user's under $XDG_CACHE_HOME or ~/.cache):
 * one asked for that cannot be made fails the mount; a default that
 * cannot only leaves ckpt/ unavailable (EACCES), said on stderr. A
 * user's mount, or a read-only /var, served an empty ckpt/ before, its
 * log saying FILE_OPEN_FAIL without the path's error. */
static int check_ckpt_cache(struct mcfs_opts *o)
{
	bool asked = o->ckpt_cache;
	char dir[PATH_MAX];
	int rc;

	if (!asked) {
		mcs_ckpt_default_dir("ckpt", dir, sizeof(dir));
		if (!(o->ckpt_cache = strdup(dir)))
			return -ENOMEM;
	}
	rc = mcs_ckpt_usable_dir(o->ckpt_cache);
	if (!rc)
		return 0;
	fprintf(stderr,
		"mooncakefs: %s%s: %s: %s (-o ckpt_cache=DIR chooses "
		"another)\n",
		asked ? "ckpt_cache=" : "checkpoint cache ", o->ckpt_cache,
		mc_strerror(rc),
		asked ? "cannot keep checkpoints there" :
			"ckpt/ answers EACCES through this mount");
	return asked ? -EINVAL : 0;
}

/* Whether syslog takes messages here: /dev/log accepts a datagram
 * socket (most containers and minimal hosts have no syslog daemon). */
static bool syslog_listens(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX,
				  .sun_path = "/dev/log" };
	/* Datagrams, else a stream (as glibc's openlog tries them). */
	for (int i = 0; i < 2; i++) {
		int fd = socket(AF_UNIX,
				(i ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC,
				0);
		bool ok;

		if (fd < 0)
			return false;
		ok = !connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		if (!ok && errno == EPROTOTYPE && !i) {
			close(fd);
			continue;
		}
		close(fd);
		return ok;
	}
	return false;
}

/*
 * A detached mount with neither log_file= nor syslog asked for logs to
 * syslog; where nothing listens on /dev/log its messages (why it failed
 * to join, why a file gives EIO) went nowhere. Then a file instead:
 * MCFS_LOG_DIR/<the mount point, '/' as '-'>.log where it can be
 * written, and stderr says where; else stderr says they are lost.
 */
#define MCFS_LOG_DIR "/var/log/mooncakefs"
static void log_without_syslog(struct mcfs_opts *o)
{
	char path[PATH_MAX], name[NAME_MAX - 8];
	size_t n = 0;
	int fd;

	if (syslog_listens())
		return;
	/* "/mnt//pool/" -> "mnt-pool" ("/" -> "root") */
	for (const char *c = o->mountpoint; *c && n + 1 < sizeof(name); c++) {
		if (*c != '/')
			name[n++] = *c;
		else if (n && name[n - 1] != '-')
			name[n++] = '-';
	}
	while (n && name[n - 1] == '-')
		n--;
	name[n] = 0;
	snprintf(path, sizeof(path), "%s/%s.log", MCFS_LOG_DIR,
		 n ? name : "root");
	(void)mkdir(MCFS_LOG_DIR, 0750);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0 || !(o->log_file = strdup(path))) {
		fprintf(stderr,
			"mooncakefs: no syslog here (nothing listens on "
			"/dev/log) and %s cannot be written (%s): the "
			"daemon's messages are lost; pass -o log_file=PATH\n",
			path, mc_strerror(fd < 0 ? -errno : -ENOMEM));
	} else {
		fprintf(stderr,
			"mooncakefs: no syslog here (nothing listens on "
			"/dev/log): logging to %s (-o log_file=PATH to "
			"choose)\n",
			path);
	}
	if (fd >= 0)
		close(fd);
}

/* /proc/self/mounts writes space, tab, newline and backslash in paths as
 * \ooo: decoded in place. */
static char *unescape_octal(char *p)
{
	char *w = p;

	for (const char *r = p; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' &&
		    r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') << 6 | (r[2] - '0') << 3 |
				      (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
	return p;
}

/* A FUSE mount whose daemon exited answers ENOTCONN. */
static bool dead_mount(const char *path)
{
	struct statvfs sv;

	return statvfs(path, &sv) && errno == ENOTCONN;
}

/* A second daemon on a mount point that is already a mooncakefs mount
 * stacked over it: the one below went on contributing to the pool,
 * hidden. Refused (-EBUSY). */
static int check_not_mounted(const char *mountpoint)
{
	char real[PATH_MAX], line[8192];
	FILE *f;
	int rc = 0;

	if (!realpath(mountpoint, real))
		return 0; /* fuse_session_mount will say what is wrong */
	f = fopen("/proc/self/mounts", "re");
	if (!f)
		return 0;
	while (!rc && fgets(line, sizeof(line), f)) {
		char dev[256], dir[PATH_MAX], type[64];

		if (sscanf(line, "%255s %4095s %63s", dev, dir, type) == 3 &&
		    !strcmp(type, "fuse.mooncakefs") &&
		    !strcmp(unescape_octal(dir), real))
			rc = -EBUSY;
	}
	fclose(f);
	if (rc && dead_mount(real))
		fprintf(stderr,
			"mooncakefs: %s is a mooncakefs mount whose daemon is "
			"gone: umount it first (umount -l while programs still "
			"have files or directories in it)\n",
			mountpoint);
	else if (rc)
		fprintf(stderr,
			"mooncakefs: %s is already a mooncakefs mount "
			"(umount it first)\n",
			mountpoint);
	return rc;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void on_hangup(int sig)
{
	int saved = errno;

	(void)sig;
	(void)mc_log_reopen(); /* async-signal-safe; -ENOENT with syslog */
	errno = saved;
}

/* libfuse stops the session on SIGHUP, as on a terminal's hangup. A
 * mount that logs to a file, to syslog or to no terminal (daemonized, or
 * under systemd) reopens its log instead, if any: logrotate's postrotate
 * or a reload must not unmount the pool. */
static void keep_mounted_on_hangup(const struct mcfs_opts *o)
{
	struct sigaction sa = { .sa_handler = on_hangup,
				.sa_flags = SA_RESTART };

	if (mc_log_to_stderr() && isatty(STDERR_FILENO) && o->foreground)
		return;
	sigemptyset(&sa.sa_mask);
	(void)sigaction(SIGHUP, &sa, NULL);
}

int main(int argc, char **argv)
{
	struct fuse_args fargs = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *lc = NULL;
	struct mcfs fs = { 0 };
	pthread_t setup;
	bool setup_started = false;
	int rc, ret = 1;

	rc = mcfs_parse_opts(argc, argv, &fs.o, &fargs);
	if (!rc && resolve_token(&fs.o))
		rc = -EINVAL;
	if (rc) {
		fuse_opt_free_args(&fargs);
		mcfs_free_opts(&fs.o);
		return rc > 0 ? 0 : 2;
	}
	fs.default_segment = default_segment_name(&fs.o);
	fs.uid = getuid();
	fs.gid = getgid();
	fs.start_ms = now_ms();
	fs.max_key = 4096; /* the master's default, until it says */
	mcfs_stage_pool_init(&fs.stage_pool, fs.o.staging_limit);
	pthread_mutex_init(&fs.ready_lock, NULL);
	mc_cond_init_mono(&fs.ready_cond); /* mcfs_wait_ready()'s deadline */
	/* Before ckpt_init: it empties this segment's checkpoint cache, which
	 * a live mount of the segment (refused below) still serves from. */
	rc = check_log_file(&fs.o);
	if (!rc)
		rc = check_ckpt_cache(&fs.o);
	if (!rc)
		rc = check_not_mounted(fs.o.mountpoint);
	if (!rc)
		rc = check_joinable(&fs);
	if (rc) {
		ret = rc == -EINVAL ? 2 : 1; /* the options, or a busy name */
		goto out;
	}
	if (mcfs_itab_init(&fs) || mcfs_ckpt_init(&fs) ||
	    mcfs_splice_init(&fs) || mcfs_locks_init(&fs.locks))
		goto out;
	rc = check_master(&fs.o, &fs.max_key);
	if (rc) {
		/* A token the master refuses, or none where it wants one: the
		 * options, as a token file that cannot be read. */
		if (rc == MC_EAUTHREQUIRED || rc == MC_EAUTHFAILED ||
		    rc == MC_EAUTHOFF)
			ret = 2;
		goto out;
	}
	fs.store = mooncake_store_create();
	if (!fs.store)
		goto out;

	fs.se = fuse_session_new(&fargs, &mcfs_ops, sizeof(mcfs_ops), &fs);
	if (!fs.se) {
		ret = 2; /* libfuse said which option it does not know */
		goto out;
	}
	if (fuse_set_signal_handlers(fs.se))
		goto out_session;
	if (fuse_session_mount(fs.se, fs.o.mountpoint)) {
		fprintf(stderr, "mooncakefs: cannot mount on %s\n",
			fs.o.mountpoint);
		goto out_signals;
	}
	if (!fs.o.foreground && !fs.o.log_file && !fs.o.syslog) {
		log_without_syslog(&fs.o);
		/* stderr goes away with the terminal */
		fs.o.syslog = !fs.o.log_file;
	}
	rc = mc_daemon_setup_logging("mooncakefs", fs.o.debug ? 1 : 0,
				     fs.o.log_file, fs.o.syslog);
	if (rc)
		fprintf(stderr, "mooncakefs: log file %s: %s\n", fs.o.log_file,
			mc_strerror(rc));
	if (fuse_daemonize(fs.o.foreground))
		goto out_unmount;
	if (!fs.o.foreground)
		mc_log_capture_stderr();
	keep_mounted_on_hangup(&fs.o);
	if (pthread_create(&setup, NULL, setup_main, &fs) == 0)
		setup_started = true;
	else
		goto out_unmount;
	mc_log_notice("mcfs", "mounted %s on %s", fs.o.master, fs.o.mountpoint);

	lc = fuse_loop_cfg_create();
	if (!lc)
		goto out_unmount;
	fuse_loop_cfg_set_clone_fd(lc, 1);
	fuse_loop_cfg_set_max_threads(lc, fs.o.threads);
	rc = fuse_session_loop_mt(fs.se, lc);
	ret = rc < 0 ? 1 : 0;
	pthread_mutex_lock(&fs.ready_lock);
	if (fs.ready < 0)
		ret = 1; /* it unmounted itself: the pool could not be joined */
	pthread_mutex_unlock(&fs.ready_lock);
	mc_log_notice("mcfs", "unmounted %s", fs.o.mountpoint);
	atomic_store(&fs.stop, true); /* a join still waiting gives up */

out_unmount:
	fuse_session_unmount(fs.se);
out_signals:
	fuse_remove_signal_handlers(fs.se);
out_session:
	if (setup_started)
		pthread_join(setup, NULL);
	mcfs_watch_stop(&fs);
	fuse_session_destroy(fs.se);
out:
	if (lc)
		fuse_loop_cfg_destroy(lc);
	/* Before the store: nodes may hold open objects. */
	if (fs.by_ino)
		mcfs_itab_free(&fs);
	mcfs_ckpt_fini(&fs); /* stops serving checkpoints */
	if (fs.store) {
		mcfs_ra_pool_fini(fs.ra);
		mcfs_bufs_free(&fs);
		/* Leave the pool: the segment is unmounted at the master. */
		mooncake_store_destroy(fs.store);
	}
	mcfs_stage_pool_fini(&fs.stage_pool);
	mcfs_splice_fini(&fs);
	mcfs_locks_fini(fs.locks);
	fuse_opt_free_args(&fargs);
	mcfs_free_opts(&fs.o);
	free(fs.default_segment);
	return ret;
}
