/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_host.h
 * This host's identity: "<boot id>/<net namespace inode>". Two processes
 * may share memory only when they run on the same boot of the same
 * machine and in the same network namespace (a namespace stands for a
 * host in multi-host tests and containers). The transfer engine uses it to
 * pick its shared-memory transport, the store client publishes it as its
 * segments' host_id, and the master's local_first placement compares it.
 */
#ifndef MC_HOST_H
#define MC_HOST_H

#include <stddef.h>

#define MC_HOST_ID_LEN 96

/** 0 or -errno (-ENAMETOOLONG when len is too small); buf gets "" on
 *  failure. */
int mc_host_id(char *buf, size_t len);

#endif
