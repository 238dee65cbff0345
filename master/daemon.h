/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file daemon.h
 * mooncake_master's running parts, started and stopped together: the
 * state restored from sqlite (lifecycle.h), the embedded metadata service
 * (when enabled), the admin HTTP server, the RPC server and the
 * housekeeping thread (mst_tick every 10 ms, a metrics summary every 10 s
 * when enabled), and the port files that announce them.
 */
#ifndef MST_DAEMON_H
#define MST_DAEMON_H

#include <signal.h>

#include "master.h"
#include "master_options.h"

struct mst_daemon;

/**
 * Start everything cfg asks for, with the master's rules mc (see
 * master_cfg_core()). With --enable_ha it first waits, a standby, until
 * elected (-EINTR when one of sigs, blocked, arrives meanwhile); argv is
 * what a deposed leader restarts with. 0 with *out; or a code, every part started so far
 * stopped again, the reason logged.
 */
int mst_daemon_start(const struct master_cfg *cfg, const struct mst_config *mc,
		     const sigset_t *sigs, char *const *argv,
		     struct mst_daemon **out);
/** Stop every part (the RPC server first) and free d. NULL is fine. */
void mst_daemon_stop(struct mst_daemon *d);

#endif
