/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_log.h
 * Leveled logging with a replaceable, thread-safe sink.
 *
 * Levels follow syslog. The level check happens before any formatting, so a
 * disabled mc_debug() costs one load and a compare. The default sink writes
 * one line per call to stderr with a single write(2). Libraries (libte, the
 * client library) return a code for every failure of a call and log only
 * what the caller cannot learn from it: events of their background
 * threads (heartbeats, re-mounts, lost holds) at info and above, and the
 * reason behind a configuration error (warn or err, next to the code they
 * return). Anything else they log is debug.
 *
 * Configuration: MC_LOG_LEVEL (error|warn|notice|info|debug|trace or a
 * syslog number) and the daemons' -v flag (gflags-style verbosity: -v=1 is
 * debug, -v=2 trace).
 */
#ifndef MC_LOG_H
#define MC_LOG_H

#include <stdatomic.h>
#include <stdbool.h>

#include "mc_compiler.h"

enum mc_log_level {
	MC_LOG_ERROR = 3,
	MC_LOG_WARN = 4,
	MC_LOG_NOTICE = 5,
	MC_LOG_INFO = 6,
	MC_LOG_DEBUG = 7,
	MC_LOG_TRACE = 8,
};

/*
 * A sink receives "subsystem: message" without a newline. Thread safety:
 * called from any thread, possibly concurrently.
 */
typedef void (*mc_log_sink_fn)(int level, const char *line, void *arg);

extern _Atomic int mc_log_level_;

void mc_log_set_level(int level);
int mc_log_get_level(void);

/** Parse "debug", "WARNING", "7"...; 0 or -EINVAL. */
int mc_log_parse_level(const char *s, int *level) MC_MUST_CHECK;

/** Apply MC_LOG_LEVEL if set; an invalid value is reported and ignored. */
void mc_log_init_from_env(void);

/** Replace the sink (NULL restores stderr). Not safe while others log. */
void mc_log_set_sink(mc_log_sink_fn fn, void *arg);

/** Send lines to syslog under ident; returns 0. */
int mc_log_use_syslog(const char *ident);

/** Append lines to a file (O_APPEND|O_CLOEXEC); 0 or -errno. */
int mc_log_use_file(const char *path) MC_MUST_CHECK;

/** Whether lines go to a file (mc_log_use_file() and no sink since). */
bool mc_log_to_file(void);
/** Whether lines go to stderr (no file, no sink such as syslog). */
bool mc_log_to_stderr(void);

/**
 * Open the log file again by its path and send lines (and a captured
 * stderr) there: after logrotate moved it away. Async-signal-safe (open,
 * dup2, close), so a signal handler may call it. 0, -ENOENT when lines do
 * not go to a file, or -errno (the old file stays in use).
 */
int mc_log_reopen(void);

/** Point stderr at the log file, when lines go to one (after daemonizing
 * sent stderr to /dev/null): what the process or a runtime writes there
 * (a sanitizer's report, abort()'s message) lands in the log too. */
void mc_log_capture_stderr(void);

void mc_log_emit(int level, const char *subsys, const char *fmt, ...)
	MC_PRINTF(3, 4);

#define mc_log(level, subsys, ...)                                         \
	do {                                                               \
		if ((level) <= atomic_load_explicit(&mc_log_level_,        \
						    memory_order_relaxed)) \
			mc_log_emit((level), (subsys), __VA_ARGS__);       \
	} while (0)

#define mc_log_err(subsys, ...) mc_log(MC_LOG_ERROR, subsys, __VA_ARGS__)
#define mc_log_warn(subsys, ...) mc_log(MC_LOG_WARN, subsys, __VA_ARGS__)
#define mc_log_notice(subsys, ...) mc_log(MC_LOG_NOTICE, subsys, __VA_ARGS__)
#define mc_log_info(subsys, ...) mc_log(MC_LOG_INFO, subsys, __VA_ARGS__)
#define mc_log_debug(subsys, ...) mc_log(MC_LOG_DEBUG, subsys, __VA_ARGS__)
#define mc_log_trace(subsys, ...) mc_log(MC_LOG_TRACE, subsys, __VA_ARGS__)

#endif
