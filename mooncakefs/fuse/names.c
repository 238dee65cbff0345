/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Key components <-> path names. A key "a/b/c" is the file kv/a/b/c, and
 * a name is its key component as it is, '%' and all: a file made as
 * "100%" or "a%20b" has that key, and is listed so. Only the three
 * components that cannot be path names are shown as tokens:
 *   "" (as in "a//b") -> %00,  "." -> %2E,  ".." -> %2E%2E
 * and a component that is itself such a token, after any number of
 * "%25", is shown with one "%25" more (the key "%2E" is the name
 * "%25%2E"), so every component has one name and every name one key.
 * docs/design.md lists the rules.
 */
#include <stdlib.h>
#include <string.h>

#include "mcfs.h"

static const char *const TOKENS[] = { "%00", "%2E", "%2E%2E" };
static const char *const SPECIAL[] = { "", ".", ".." };

/* Whether s (len bytes) is "%25" repeated, then a token. */
static bool token_like(const char *s, size_t len)
{
	while (len >= 3 && !memcmp(s, "%25", 3)) {
		s += 3;
		len -= 3;
	}
	for (size_t i = 0; i < 3; i++)
		if (len == strlen(TOKENS[i]) && !memcmp(s, TOKENS[i], len))
			return true;
	return false;
}

static char *dup_n(const char *s, size_t len)
{
	char *out = malloc(len + 1);

	if (out) {
		memcpy(out, s, len);
		out[len] = 0;
	}
	return out;
}

char *mcfs_escape(const char *comp, size_t len)
{
	char *out;

	for (size_t i = 0; i < 3; i++)
		if (len == strlen(SPECIAL[i]) && !memcmp(comp, SPECIAL[i], len))
			return strdup(TOKENS[i]);
	if (!token_like(comp, len))
		return dup_n(comp, len);
	out = malloc(len + 4);
	if (out) {
		memcpy(out, "%25", 3);
		memcpy(out + 3, comp, len);
		out[len + 3] = 0;
	}
	return out;
}

char *mcfs_unescape(const char *name, size_t *len)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < 3; i++)
		if (!strcmp(name, TOKENS[i])) {
			*len = strlen(SPECIAL[i]);
			return strdup(SPECIAL[i]);
		}
	if (n > 3 && token_like(name, n)) { /* one "%25" less */
		*len = n - 3;
		return dup_n(name + 3, n - 3);
	}
	*len = n;
	return dup_n(name, n);
}

bool mcfs_hidden_key(const char *key)
{
	size_t n = strlen(MCFS_TMP_PREFIX) - 1; /* the directory's own name */

	return !strncmp(key, MCFS_TMP_PREFIX, n) && (key[n] == '/' || !key[n]);
}
