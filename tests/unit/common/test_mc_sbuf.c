/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/mc_sbuf.c: printf and put append, the buffer grows
 * past its first 4 KiB (also by one append larger than everything so
 * far) and stays NUL-terminated, even after an empty append.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "mc_sbuf.h"

Test(mc_sbuf, appends_and_terminates)
{
	struct mc_sbuf b = { 0 };

	mc_sbuf_printf(&b, "a=%d ", 1);
	mc_sbuf_put(&b, "bc", 2);
	mc_sbuf_printf(&b, "%s", "");
	cr_assert_not(b.oom);
	cr_assert_str_eq(b.p, "a=1 bc");
	cr_assert_eq(b.len, 6);
	free(b.p);
}

Test(mc_sbuf, grows_by_small_and_large_appends)
{
	struct mc_sbuf b = { 0 };
	char *big = malloc(20000);
	size_t want = 0;

	cr_assert_not_null(big);
	for (int i = 0; i < 1000; i++) {
		mc_sbuf_printf(&b, "line %04d\n", i);
		want += 10;
	}
	memset(big, 'x', 19999);
	big[19999] = 0;
	mc_sbuf_printf(&b, "%s", big);
	mc_sbuf_put(&b, big, 19999);
	want += 2 * 19999;
	cr_assert_not(b.oom);
	cr_assert_eq(b.len, want);
	cr_assert_eq(strlen(b.p), want);
	cr_assert_eq(strncmp(b.p, "line 0000\nline 0001\n", 20), 0);
	cr_assert_eq(strncmp(b.p + 9990, "line 0999\nxxx", 13), 0);
	free(big);
	free(b.p);
}

Test(mc_sbuf, an_empty_append_still_terminates)
{
	struct mc_sbuf b = { 0 };

	mc_sbuf_printf(&b, "%s", "");
	cr_assert_not_null(b.p);
	cr_assert_str_eq(b.p, "");
	cr_assert_eq(b.len, 0);
	free(b.p);
}
