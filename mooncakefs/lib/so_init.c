/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Built into libmooncake.so only: the library's logging is private to it
 * there, so it applies MC_LOG_LEVEL itself when loaded. Programs that link
 * mc_store statically configure logging in their main().
 */
#include "mc_log.h"

__attribute__((constructor)) static void mcs_so_init(void)
{
	mc_log_init_from_env();
}
