/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file store_err.h
 * The master answers in upstream store codes (master.proto); inside the
 * client library codes are internal (0, -errno, MC_E*), and the public API
 * turns them back with mc_err_to_store(). mcs_err_from_store() is the
 * inverse for every store code the master sends: for each of them
 * mc_err_to_store(mcs_err_from_store(c)) == c. A code without an internal
 * twin becomes -EIO (INTERNAL_ERROR) and is logged at debug level.
 */
#ifndef MCS_STORE_ERR_H
#define MCS_STORE_ERR_H

/** Internal code for an upstream store code received from the master. */
int mcs_err_from_store(int code);

#endif
