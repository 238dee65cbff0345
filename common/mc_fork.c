/* SPDX-License-Identifier: Apache-2.0 */
/* fork() awareness (mc_fork.h): pthread_atfork counts the forks. */
#include "mc_fork.h"

#include <pthread.h>
#include <stdatomic.h>

#include "mc_log.h"

static _Atomic unsigned forks;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void on_fork_child(void)
{
	atomic_fetch_add(&forks, 1);
}

static void watch(void)
{
	if (pthread_atfork(NULL, NULL, on_fork_child))
		mc_log_warn("fork", "pthread_atfork failed: a child of fork() "
				    "must not use its parent's handles");
}

unsigned mc_fork_count(void)
{
	pthread_once(&once, watch);
	return atomic_load_explicit(&forks, memory_order_relaxed);
}

bool mc_forked_since(unsigned made)
{
	return mc_fork_count() != made;
}
