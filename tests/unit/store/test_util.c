/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for mooncakefs/lib/util.c: mcs_limit_hint names the limit a
 * failed setup step or transfer likely met, with the values that are set.
 * (Criterion runs each test in its own process: the limits set here stay
 * there.)
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "util.h"

static void set_limit(int res, rlim_t v)
{
	struct rlimit r;

	cr_assert_eq(getrlimit(res, &r), 0);
	r.rlim_cur = v;
	cr_assert_eq(setrlimit(res, &r), 0, "setrlimit: %s", strerror(errno));
}

Test(util, thread_failure_names_the_address_space_limit)
{
	char buf[160];
	const char *h;

	set_limit(RLIMIT_AS, (rlim_t)1 << 50); /* 1 PiB: harmless, ASan too */
	h = mcs_limit_hint(-EAGAIN, buf, sizeof(buf));
	cr_assert_not_null(h);
	cr_assert(strstr(h, "threads or memory: ulimit -v 1099511627776 KiB"),
		  "%s", h);
	h = mcs_limit_hint(-ENOMEM, buf, sizeof(buf));
	cr_assert_str_eq(h, "memory: ulimit -v 1099511627776 KiB");
}

Test(util, unlimited_limits_are_not_named)
{
	char buf[160];
	struct rlimit r;
	const char *h;

	cr_assert_eq(getrlimit(RLIMIT_AS, &r), 0);
	if (r.rlim_max != RLIM_INFINITY)
		cr_skip_test("RLIMIT_AS has a hard limit here");
	set_limit(RLIMIT_AS, RLIM_INFINITY);
	h = mcs_limit_hint(-ENOMEM, buf, sizeof(buf));
	cr_assert_str_eq(h, "memory");
}

Test(util, descriptors_name_ulimit_n)
{
	char buf[160], want[64];
	const char *h;

	set_limit(RLIMIT_NOFILE, 100);
	h = mcs_limit_hint(-EMFILE, buf, sizeof(buf));
	snprintf(want, sizeof(want), "file descriptors: ulimit -n %d", 100);
	cr_assert_str_eq(h, want);
}

Test(util, other_errors_have_no_hint)
{
	char buf[160];

	cr_assert_null(mcs_limit_hint(-EINVAL, buf, sizeof(buf)));
	cr_assert_null(mcs_limit_hint(-ECONNREFUSED, buf, sizeof(buf)));
	cr_assert_null(mcs_limit_hint(-EAGAIN, buf, 0));
}

Test(util, a_short_buffer_is_cut_not_overrun)
{
	char buf[12];

	memset(buf, 'x', sizeof(buf));
	set_limit(RLIMIT_AS, (rlim_t)1 << 50);
	cr_assert_not_null(mcs_limit_hint(-EAGAIN, buf, 8));
	cr_assert_eq(strlen(buf), 7);
	cr_assert_eq(buf[8], 'x'); /* nothing written past len */
}
