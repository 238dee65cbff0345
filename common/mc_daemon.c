/* SPDX-License-Identifier: Apache-2.0 */
/* Daemon plumbing shared by every main(): see mc_daemon.h. */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "mc_build_config.h"
#include "mc_daemon.h"
#include "mc_log.h"
#include "mooncake/mc_err.h"
#include "mooncake/mc_version.h"

int mc_daemon_load_config(const struct mc_cfg_spec *spec, void *cfg, int argc,
			  char **argv, int *exit_code)
{
	struct mc_cfg_result res;
	char err[MC_ERR_LEN];
	int rc;

	rc = mc_cfg_load(spec, cfg, argc, argv, &res, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "%s: %s\n", spec->prog, err);
		*exit_code = MC_EXIT_USAGE;
		return -1;
	}
	switch (res.action) {
	case MC_CFG_HELP:
		mc_cfg_print_help(spec, stdout);
		*exit_code = MC_EXIT_OK;
		return -1;
	case MC_CFG_VERSION:
		printf("%s (mooncakefs) %s\nfeatures: %s%s%s\n", spec->prog,
		       MC_VERSION_STRING, MC_BUILD_FEATURES,
		       MC_BUILD_SANITIZERS[0] ? " sanitizers: " : "",
		       MC_BUILD_SANITIZERS);
		*exit_code = MC_EXIT_OK;
		return -1;
	case MC_CFG_DUMP:
		mc_cfg_dump_json(spec, cfg, stdout);
		*exit_code = MC_EXIT_OK;
		return -1;
	case MC_CFG_DOC:
		mc_cfg_doc_markdown(spec, stdout);
		*exit_code = MC_EXIT_OK;
		return -1;
	case MC_CFG_RUN:
		break;
	}
	return 0;
}

int mc_daemon_setup_logging(const char *ident, int verbosity,
			    const char *log_file, bool use_syslog)
{
	mc_log_init_from_env();
	if (verbosity > 0)
		mc_log_set_level(mc_cfg_verbosity_level(verbosity));
	if (log_file && *log_file)
		return mc_log_use_file(log_file);
	if (use_syslog)
		return mc_log_use_syslog(ident);
	return 0;
}

void mc_daemon_block_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, set, NULL);
	signal(SIGPIPE, SIG_IGN);
}

bool mc_daemon_signal_stops(int sig)
{
	int rc;

	if (sig != SIGHUP)
		return true;
	if (!mc_log_to_file()) {
		/* A terminal's hangup stops it; otherwise (syslog, stderr
		 * into journald or a file) it is a reload or logrotate's
		 * postrotate, which must not stop a master or a member. */
		if (mc_log_to_stderr() && isatty(STDERR_FILENO))
			return true;
		mc_log_notice("log", "SIGHUP ignored: no log file to reopen");
		return false;
	}
	rc = mc_log_reopen();
	if (rc)
		mc_log_err("log", "SIGHUP: cannot reopen the log file: %s",
			   mc_strerror(rc));
	else
		mc_log_notice("log", "SIGHUP: log file reopened");
	return false;
}

int mc_daemon_wait_signal(const sigset_t *set)
{
	int sig = 0;

	while (sigwait(set, &sig) != 0 || !mc_daemon_signal_stops(sig))
		;
	return sig;
}

int mc_daemon_write_port_file(const char *path, int port)
{
	char tmp[4096], buf[16];
	int fd, n, rc = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path,
			     (int)getpid()) >= sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	n = snprintf(buf, sizeof(buf), "%d\n", port);
	if (write(fd, buf, (size_t)n) != n)
		rc = errno ? -errno : -EIO;
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

int mc_daemon_exit_code(int rc)
{
	if (rc == 0)
		return MC_EXIT_OK;
	if (rc == -EINVAL || rc == -ERANGE || rc == MC_EBADCONFIG)
		return MC_EXIT_USAGE;
	return MC_EXIT_FAILURE;
}

#define HUGETLB_TUNABLE "glibc.malloc.hugetlb="

static bool thp_offered(void)
{
	char buf[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
	bool never;

	if (!f)
		return false;
	never = !fgets(buf, sizeof(buf), f) || strstr(buf, "[never]");
	fclose(f);
	return !never;
}

bool mc_daemon_heap_is_huge(void)
{
	const char *t = getenv("GLIBC_TUNABLES");

	return t && strstr(t, HUGETLB_TUNABLE "1");
}

void mc_daemon_exec_self(char *const *argv)
{
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	static const char deleted[] = " (deleted)";

	/* The binary by its name: the process keeps it as its name (comm:
	 * pgrep, pkill, ps -C, ss -p), where /proc/self/exe made it "exe".
	 * A binary replaced meanwhile (an upgrade) is run as it was. */
	if (n > 0 && (size_t)n < sizeof(path) - 1) {
		path[n] = '\0';
		if ((size_t)n <= sizeof(deleted) - 1 ||
		    strcmp(path + n - (sizeof(deleted) - 1), deleted)) {
			execv(path, argv);
		}
	}
	execv("/proc/self/exe", argv);
}

void mc_daemon_huge_heap(char **argv, const char **why)
{
	const char *old = getenv("GLIBC_TUNABLES");
	char *val = NULL;

	*why = NULL;
	if ((old && strstr(old, HUGETLB_TUNABLE)) || !thp_offered())
		return;
	if (asprintf(&val, "%s%s" HUGETLB_TUNABLE "1", old ? old : "",
		     old && *old ? ":" : "") < 0) {
		*why = "out of memory";
		return;
	}
	if (setenv("GLIBC_TUNABLES", val, 1)) {
		*why = mc_strerror(-errno);
		free(val);
		return;
	}
	free(val);
	mc_daemon_exec_self(argv);
	*why = mc_strerror(-errno);
	/* Not on huge pages after all: say so to anyone who asks. */
	if (old)
		(void)setenv("GLIBC_TUNABLES", old, 1);
	else
		(void)unsetenv("GLIBC_TUNABLES");
}

uint64_t mc_daemon_raise_fd_limit(uint64_t want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return UINT64_MAX;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
		if (getrlimit(RLIMIT_NOFILE, &rl))
			return UINT64_MAX;
	}
	return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur;
}
