/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Key components <-> path names. A key "a/b/c" is the file kv/a/b/c; a
 * component that cannot be a path name is shown escaped:
 *   '%' -> %25,  "." -> %2E,  ".." -> %2E%2E,  "" (as in "a//b") -> %00
 * Every other byte is shown as is. Looking a name up decodes any %XX, so
 * both spellings reach the same key. docs/design.md lists the rules.
 */
#include <stdlib.h>
#include <string.h>

#include "mc_parse.h"
#include "mcfs.h"

char *mcfs_escape(const char *comp, size_t len)
{
	size_t n = 0;
	char *out, *p;

	if (len == 0)
		return strdup("%00");
	if (len == 1 && comp[0] == '.')
		return strdup("%2E");
	if (len == 2 && comp[0] == '.' && comp[1] == '.')
		return strdup("%2E%2E");
	for (size_t i = 0; i < len; i++)
		n += comp[i] == '%' ? 3 : 1;
	out = malloc(n + 1);
	if (!out)
		return NULL;
	p = out;
	for (size_t i = 0; i < len; i++) {
		if (comp[i] == '%') {
			memcpy(p, "%25", 3);
			p += 3;
		} else {
			*p++ = comp[i];
		}
	}
	*p = 0;
	return out;
}

char *mcfs_unescape(const char *name, size_t *len)
{
	size_t n = strlen(name), j = 0;
	char *out;

	if (!strcmp(name, "%00")) {
		*len = 0;
		return strdup("");
	}
	out = malloc(n + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (name[i] != '%') {
			out[j++] = name[i];
			continue;
		}
		if (i + 2 >= n) {
			free(out);
			return NULL;
		}
		int h = mc_parse_hexdigit(name[i + 1]),
		    l = h < 0 ? -1 : mc_parse_hexdigit(name[i + 2]);
		if (h < 0 || l < 0 || (h == 0 && l == 0) ||
		    (h == 2 && l == 15)) {
			/* malformed, a NUL, or a '/' inside a component */
			free(out);
			return NULL;
		}
		out[j++] = (char)(h << 4 | l);
		i += 2;
	}
	out[j] = 0;
	*len = j;
	return out;
}

bool mcfs_hidden_key(const char *key)
{
	return !strncmp(key, MCFS_TMP_PREFIX, strlen(MCFS_TMP_PREFIX));
}
