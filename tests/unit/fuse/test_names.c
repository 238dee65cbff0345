/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Key components <-> path names (mooncakefs/fuse/names.c): names are the
 * components as they are, '%' included; only "", "." and ".." are shown
 * as tokens, and a component that looks like a token gets one "%25"
 * more. Every component round-trips, and distinct components never
 * share a name.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "mcfs.h"

static char *esc(const char *comp)
{
	char *s = mcfs_escape(comp, strlen(comp));

	cr_assert(s);
	return s;
}

static char *unesc(const char *name)
{
	size_t len;
	char *s = mcfs_unescape(name, &len);

	cr_assert(s);
	cr_assert_eq(len, strlen(s));
	return s;
}

Test(names, literal_percent_names)
{
	static const char *const same[] = { "100%",  "100%done", "a%20b",
					    "r%41",  "x%2Fy",	 "z%00",
					    "%",     "%2e",	 "%25",
					    "%252E", "a.b",	 "..." };

	for (size_t i = 0; i < sizeof(same) / sizeof(*same); i++) {
		char *n = esc(same[i]), *k = unesc(same[i]);

		cr_expect_str_eq(n, same[i]);
		cr_expect_str_eq(k, same[i]);
		free(n);
		free(k);
	}
}

Test(names, tokens)
{
	static const char *const pairs[][2] = {
		{ "", "%00" },
		{ ".", "%2E" },
		{ "..", "%2E%2E" },
		{ "%00", "%25%00" },
		{ "%2E", "%25%2E" },
		{ "%2E%2E", "%25%2E%2E" },
		{ "%25%2E", "%25%25%2E" },
	};

	for (size_t i = 0; i < sizeof(pairs) / sizeof(*pairs); i++) {
		char *n = esc(pairs[i][0]), *k = unesc(pairs[i][1]);

		cr_expect_str_eq(n, pairs[i][1], "escape(%s)", pairs[i][0]);
		cr_expect_str_eq(k, pairs[i][0], "unescape(%s)", pairs[i][1]);
		free(n);
		free(k);
	}
}

/* The temporary keys' directory is hidden by its own name too: lookups,
 * listings and creates (kv.c) never reach it. */
Test(names, hidden)
{
	cr_expect(mcfs_hidden_key(".mooncakefs-tmp"));
	cr_expect(mcfs_hidden_key(".mooncakefs-tmp/"));
	cr_expect(mcfs_hidden_key(".mooncakefs-tmp/host-1-2"));
	cr_expect(!mcfs_hidden_key(".mooncakefs-tmpx"));
	cr_expect(!mcfs_hidden_key(".mooncakefs-tm"));
	cr_expect(!mcfs_hidden_key("a/.mooncakefs-tmp"));
	cr_expect(!mcfs_hidden_key(""));
}
