/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LD_PRELOAD stand-in for a wall clock that was stepped: clock_gettime,
 * time and gettimeofday read CLOCK_REALTIME shifted by
 * MC_TEST_REALTIME_SHIFT_S seconds (CLOCK_MONOTONIC untouched). A
 * deadline a program computes from the wall clock is then that far off
 * from the kernel's, as after an NTP step or a VM resume: tests of waits
 * that must not depend on the wall clock (tests/integration).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static long shift_s(void)
{
	const char *s = getenv("MC_TEST_REALTIME_SHIFT_S");

	return s ? strtol(s, NULL, 10) : 0;
}

int clock_gettime(clockid_t clk, struct timespec *ts)
{
	static int (*real)(clockid_t, struct timespec *);
	int rc;

	if (!real)
		real = (int (*)(clockid_t, struct timespec *))dlsym(
			RTLD_NEXT, "clock_gettime");
	rc = real(clk, ts);
	if (!rc && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE))
		ts->tv_sec += shift_s();
	return rc;
}

time_t time(time_t *t)
{
	struct timespec ts;
	time_t v;

	clock_gettime(CLOCK_REALTIME, &ts);
	v = ts.tv_sec;
	if (t)
		*t = v;
	return v;
}

int gettimeofday(struct timeval *tv, void *tz)
{
	struct timespec ts;

	(void)tz;
	clock_gettime(CLOCK_REALTIME, &ts);
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}
