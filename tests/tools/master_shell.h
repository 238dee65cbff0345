/* SPDX-License-Identifier: Apache-2.0 */
/* master_shell's pieces shared between its files. */
#ifndef MASTER_SHELL_H
#define MASTER_SHELL_H

#include "master_client.h"

/** "-" stands for an empty string. */
const char *shell_arg(const char *s);
/** Print "err CODE NAME" for an internal code. */
void shell_err(int rc);
/** A ckpt-*, client, ping or leave command (master_shell_ckpt.c): 1 when
 *  a[0] is one (answered), else 0. *m may be replaced (client). */
int shell_ckpt(struct mcs_master **m, const char *addr, char **a, int n);

#endif
