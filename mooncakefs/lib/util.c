/* SPDX-License-Identifier: Apache-2.0 */
/* Clocks, random bytes and threads (see util.h). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/random.h>
#include <time.h>

#include "mc_log.h"
#include "mc_ratelimit.h"
#include "mc_time.h"
#include "mooncake/mc_err.h"
#include "util.h"

uint64_t mcs_now_ms(void)
{
	return mc_mono_ms();
}

uint64_t mcs_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int mcs_random(void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = getrandom((char *)buf + done, len - done, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += (size_t)n;
	}
	return 0;
}

int mcs_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -rc;
}

/* ": ulimit -X N<unit>" (", " after the first) into buf at *at when
 * the limit is set. */
static void add_limit(char *buf, size_t len, size_t *at, int res,
		      const char *flag, unsigned shift, const char *unit)
{
	struct rlimit r;
	int n;

	if (*at >= len || getrlimit(res, &r) || r.rlim_cur == RLIM_INFINITY)
		return;
	n = snprintf(buf + *at, len - *at, "%sulimit -%s %llu%s",
		     strchr(buf, ':') ? ", " : ": ", flag,
		     (unsigned long long)(r.rlim_cur >> shift), unit);
	if (n > 0)
		*at += (size_t)n;
}

const char *mcs_limit_hint(int rc, char *buf, size_t len)
{
	const char *what = rc == -EMFILE ? "file descriptors" :
			   rc == -ENFILE ? "the host's file table is full" :
			   rc == -ENOMEM ? "memory" :
			   rc == -EAGAIN ? "threads or memory" :
					   NULL;
	size_t at;
	int n;

	if (!what || !len)
		return NULL;
	n = snprintf(buf, len, "%s", what);
	at = n > 0 ? (size_t)n : 0;
	if (rc == -EMFILE)
		add_limit(buf, len, &at, RLIMIT_NOFILE, "n", 0, "");
	if (rc == -ENOMEM || rc == -EAGAIN)
		add_limit(buf, len, &at, RLIMIT_AS, "v", 10, " KiB");
	if (rc == -EAGAIN)
		add_limit(buf, len, &at, RLIMIT_NPROC, "u", 0, "");
	return buf;
}

bool mcs_peer_unreachable(int rc)
{
	switch (rc) {
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -EHOSTDOWN:
	case -ETIMEDOUT:
	case -EPIPE:
	case -ENOTCONN:
		return true;
	default:
		return false;
	}
}

void mcs_note_own_limit(int rc)
{
	static struct mc_ratelimit rl;
	unsigned dropped;
	char buf[160];
	const char *hint = mcs_limit_hint(rc, buf, sizeof(buf));

	if (hint && mc_ratelimit_ok(&rl, 10000, &dropped))
		mc_log_warn("store",
			    "transfers fail for want of this process's own "
			    "resources: %s (%s; %u more in the last 10 s)",
			    mc_strerror(rc), hint, dropped);
}
