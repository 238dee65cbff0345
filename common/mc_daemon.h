/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_daemon.h
 * What every daemon's main() does the same way: load its configuration
 * (printing help, version or the effective config when asked), set up
 * logging, block and wait for termination signals, publish the port it
 * bound, and turn an error code into an exit status.
 *
 * Exit statuses: 0 clean stop, 1 runtime failure, 2 bad usage or config.
 */
#ifndef MC_DAEMON_H
#define MC_DAEMON_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "mc_cfg.h"
#include "mc_compiler.h"

#define MC_EXIT_OK 0
#define MC_EXIT_FAILURE 1
#define MC_EXIT_USAGE 2

/**
 * mc_cfg_load() plus the built-in actions.
 * @return -1: the caller should exit with *exit_code; 0: run.
 */
int mc_daemon_load_config(const struct mc_cfg_spec *spec, void *cfg, int argc,
			  char **argv, int *exit_code);

/** Apply MC_LOG_LEVEL, then -v, then send logs to a file or syslog. */
int mc_daemon_setup_logging(const char *ident, int verbosity,
			    const char *log_file,
			    bool use_syslog) MC_MUST_CHECK;

/** Block SIGINT, SIGTERM and SIGHUP in this and all later threads. */
void mc_daemon_block_signals(sigset_t *set);

/**
 * Act on a signal taken from the blocked set. SIGHUP while logs go to a
 * file reopens the file (logrotate's postrotate) and returns false: the
 * daemon goes on; so does SIGHUP with logs to syslog, or to a stderr that
 * is not a terminal (a reload, a stray HUP). Any other (and SIGHUP with
 * logs to a terminal: it hung up) returns true: the daemon should stop.
 */
bool mc_daemon_signal_stops(int sig);

/** Wait for a blocked signal that stops the daemon (see
 *  mc_daemon_signal_stops()); returns its number. */
int mc_daemon_wait_signal(const sigset_t *set);

/** Write "PORT\n" to path atomically (tmp file + rename). */
int mc_daemon_write_port_file(const char *path, int port) MC_MUST_CHECK;

int mc_daemon_exit_code(int rc);

/** Raise the soft descriptor limit (RLIMIT_NOFILE) toward want, up to the
 *  hard limit; returns the soft limit then (at least want when it fits;
 *  UINT64_MAX when unlimited or unknown). */
uint64_t mc_daemon_raise_fd_limit(uint64_t want);

/**
 * Put this process's malloc heap on transparent huge pages: when the
 * kernel offers them (not "never") and GLIBC_TUNABLES does not set
 * glibc.malloc.hugetlb already, add glibc.malloc.hugetlb=1 to it and
 * re-execute /proc/self/exe with argv (glibc reads tunables only at
 * start). Returns only when it did not re-execute (nothing to do, or
 * execv failed: the reason is in *why, NULL when there was nothing to
 * do). Call it first thing in main(), before any file, thread or log is
 * opened: they would not survive, or leak into, the new image.
 */
void mc_daemon_huge_heap(char **argv, const char **why);
/** execv() of this process's own binary with argv, by its path so that
 *  the process keeps its name; returns only on failure (errno). */
void mc_daemon_exec_self(char *const *argv);

/** Whether this process's heap was asked onto huge pages
 *  (GLIBC_TUNABLES has glibc.malloc.hugetlb=1). */
bool mc_daemon_heap_is_huge(void);

#endif
