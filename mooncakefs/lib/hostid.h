/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file hostid.h
 * This host's identity as the transfer engine computes it (libte/host.c):
 * "<boot id>/<net namespace inode>". Two segments with the same host_id are
 * on one machine and network namespace, so the engine moves their bytes
 * through shared memory. Kept in step with libte by hand: te.h has no
 * accessor for it.
 */
#ifndef MCS_HOSTID_H
#define MCS_HOSTID_H

#include <stddef.h>

#define MCS_HOST_ID_LEN 96

/** 0 or -errno; buf gets "" on failure. */
int mcs_host_id(char *buf, size_t len);

#endif
