/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The log sink. Each line is formatted into a stack buffer and handed to
 * the sink in one piece, so concurrent lines never interleave. The only
 * global state of the project lives here: the level and the sink.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "mc_log.h"
#include "mooncake/mc_err.h"

_Atomic int mc_log_level_ = MC_LOG_INFO;

static mc_log_sink_fn sink_fn;
static void *sink_arg;
static int sink_fd = STDERR_FILENO;
/* The file sink's absolute path, for mc_log_reopen(): kept in static
 * storage so a signal handler can reopen without allocating. */
static char sink_path[PATH_MAX];
static bool stderr_captured;
/* Lines the file sink could not write since the last it could (a full
 * disk), and why the first failed. */
static _Atomic unsigned long lost;

static const struct {
	const char *name;
	int level;
} level_names[] = {
	{ "error", MC_LOG_ERROR },   { "err", MC_LOG_ERROR },
	{ "warning", MC_LOG_WARN },  { "warn", MC_LOG_WARN },
	{ "notice", MC_LOG_NOTICE }, { "info", MC_LOG_INFO },
	{ "debug", MC_LOG_DEBUG },   { "trace", MC_LOG_TRACE },
};

static const char *level_tag(int level)
{
	switch (level) {
	case MC_LOG_ERROR:
		return "E";
	case MC_LOG_WARN:
		return "W";
	case MC_LOG_NOTICE:
		return "N";
	case MC_LOG_INFO:
		return "I";
	case MC_LOG_DEBUG:
		return "D";
	default:
		return "T";
	}
}

void mc_bug(const char *file, int line, const char *what)
{
	mc_log_emit(MC_LOG_ERROR, "bug", "%s:%d: invariant broken: %s", file,
		    line, what);
	abort();
}

void mc_log_set_level(int level)
{
	if (level < MC_LOG_ERROR)
		level = MC_LOG_ERROR;
	if (level > MC_LOG_TRACE)
		level = MC_LOG_TRACE;
	atomic_store(&mc_log_level_, level);
}

int mc_log_get_level(void)
{
	return atomic_load(&mc_log_level_);
}

int mc_log_parse_level(const char *s, int *level)
{
	char *end;
	long v;

	if (!s || !*s)
		return -EINVAL;
	for (size_t i = 0; i < MC_ARRAY_SIZE(level_names); i++) {
		if (!strcasecmp(s, level_names[i].name)) {
			*level = level_names[i].level;
			return 0;
		}
	}
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0 || v > MC_LOG_TRACE)
		return -EINVAL;
	*level = v < MC_LOG_ERROR ? MC_LOG_ERROR : (int)v;
	return 0;
}

void mc_log_init_from_env(void)
{
	const char *s = getenv("MC_LOG_LEVEL");
	int level;

	if (!s)
		return;
	if (mc_log_parse_level(s, &level)) {
		mc_log_warn("log",
			    "ignoring MC_LOG_LEVEL=%s: expected "
			    "error|warn|notice|info|debug|trace",
			    s);
		return;
	}
	mc_log_set_level(level);
}

void mc_log_set_sink(mc_log_sink_fn fn, void *arg)
{
	sink_fn = fn;
	sink_arg = arg;
	if (!fn && sink_fd != STDERR_FILENO) {
		close(sink_fd);
		sink_fd = STDERR_FILENO;
	}
	sink_path[0] = '\0';
	stderr_captured = false;
}

static void syslog_sink(int level, const char *line, void *arg)
{
	syslog(level > LOG_DEBUG ? LOG_DEBUG : level, "%s", line);
}

int mc_log_use_syslog(const char *ident)
{
	openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	mc_log_set_sink(syslog_sink, NULL);
	return 0;
}

static int open_log(const char *path)
{
	return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
}

int mc_log_use_file(const char *path)
{
	char abs[PATH_MAX];
	size_t dir = 0;
	int fd, n;

	/* Absolute, so a reopen after a chdir (daemonizing) finds it. */
	if (path[0] != '/') {
		if (!getcwd(abs, sizeof(abs)))
			return -errno;
		dir = strlen(abs);
	}
	n = snprintf(abs + dir, sizeof(abs) - dir, "%s%s",
		     path[0] != '/' ? "/" : "", path);
	if (n < 0 || (size_t)n >= sizeof(abs) - dir)
		return -ENAMETOOLONG;
	fd = open_log(abs);
	if (fd < 0)
		return -errno;
	mc_log_set_sink(NULL, NULL);
	sink_fd = fd;
	memcpy(sink_path, abs, sizeof(sink_path));
	return 0;
}

bool mc_log_to_file(void)
{
	return !sink_fn && sink_path[0];
}

bool mc_log_to_stderr(void)
{
	return !sink_fn && !sink_path[0];
}

int mc_log_reopen(void)
{
	int fd, rc = 0;

	if (!mc_log_to_file())
		return -ENOENT;
	fd = open_log(sink_path);
	if (fd < 0)
		return -errno;
	/* dup2 swaps the file under sink_fd atomically: a line written
	 * meanwhile goes to the old file or the new, never nowhere. */
	if (dup2(fd, sink_fd) < 0)
		rc = -errno;
	else if (stderr_captured && dup2(fd, STDERR_FILENO) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

void mc_log_capture_stderr(void)
{
	if (!sink_fn && sink_fd != STDERR_FILENO &&
	    dup2(sink_fd, STDERR_FILENO) >= 0)
		stderr_captured = true;
}

/* A line the log file refused (a full disk was silent): the first says
 * so on stderr, where it is not that file. */
static void lost_line(int err)
{
	if (atomic_fetch_add(&lost, 1) || !sink_path[0] || stderr_captured ||
	    sink_fd == STDERR_FILENO)
		return;
	dprintf(STDERR_FILENO,
		"log file %s: cannot write: %s; log lines are lost until it "
		"can be written again (make room on its filesystem)\n",
		sink_path, mc_strerror(-err));
}

/* A line written after lost ones: how many were lost, in the file. */
static void lost_lines_done(void)
{
	unsigned long k = atomic_exchange(&lost, 0);

	if (k)
		mc_log_emit(MC_LOG_WARN, "log",
			    "log lines lost before this one: %lu (the log file "
			    "%s could not be written)",
			    k, sink_path);
}

void mc_log_emit(int level, const char *subsys, const char *fmt, ...)
{
	char line[2048];
	struct timeval tv;
	struct tm tm;
	size_t n;
	int saved_errno = errno;
	va_list ap;

	if (sink_fn) {
		int m = snprintf(line, sizeof(line), "%s: ", subsys);
		va_start(ap, fmt);
		vsnprintf(line + m, sizeof(line) - (size_t)m, fmt, ap);
		va_end(ap);
		sink_fn(level, line, sink_arg);
		errno = saved_errno;
		return;
	}
	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	n = strftime(line, sizeof(line), "%Y-%m-%d %H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof(line) - n,
			      ".%06ld %s %d %s: ", (long)tv.tv_usec,
			      level_tag(level), (int)getpid(), subsys);
	if (n < sizeof(line)) {
		va_start(ap, fmt);
		int m = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
		va_end(ap);
		n = m < 0 ? n : n + (size_t)m;
	}
	if (n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* One write per line; a short write to a log is not worth a retry. */
	if (write(sink_fd, line, n) < 0)
		lost_line(errno);
	else if (atomic_load(&lost))
		lost_lines_done();
	errno = saved_errno;
}
