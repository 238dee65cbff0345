/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for gflags-style command lines (mc_cfg_parse_args in
 * common/mc_cfg.c).
 *
 * Input: arguments separated by '\n' or '\0' (at most MAX_ARGS; each is
 * its own allocation so ASan sees a read past its end), parsed over the
 * defaults with the strict and the lenient spec of fuzz_cfg_spec.h.
 * Checks: the config respects every bound; a failure has a message; the
 * positional arguments are a contiguous slice of argv within the limit;
 * argv holds the same pointers, perhaps reordered (positionals are moved
 * next to each other over the flags between them), argv[0] and the NULL
 * after the last in place; mc_cfg_release() frees every string.
 */
#include <stdbool.h>
#include <string.h>

#include "fuzz_cfg_spec.h"
#include "mc_log.h"

#define MAX_ARGS 64

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* Deprecated aliases are warnings: keep the output quiet. */
	mc_log_set_level(MC_LOG_ERROR);
	return 0;
}

static char *dup_bytes(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);

	FUZZ_CHECK(s);
	if (n)
		memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

static int split_args(const uint8_t *data, size_t size, char **argv)
{
	int argc = 0;
	size_t start = 0;

	argv[argc++] = dup_bytes((const uint8_t *)"fuzz_flags", 10);
	for (size_t i = 0; i <= size && argc < MAX_ARGS + 1; i++) {
		if (i == size || data[i] == '\n' || data[i] == '\0') {
			/* Nor empty input nor a trailing separator adds "". */
			if (i == size && start == size)
				break;
			argv[argc++] = dup_bytes(data + start, i - start);
			start = i + 1;
		}
	}
	argv[argc] = NULL;
	return argc;
}

static void parse(const struct mc_cfg_spec *spec, int argc, char **argv)
{
	char *saved[MAX_ARGS + 2];
	struct mc_cfg_result res;
	struct fuzz_cfg c;
	char err[MC_ERR_LEN] = "";
	int rc;

	memcpy(saved, argv, sizeof(saved));
	memset(&c, 0, sizeof(c));
	memset(&res, 0x5a, sizeof(res));
	rc = mc_cfg_defaults(spec, &c, err, sizeof(err));
	FUZZ_CHECK(rc == 0);
	rc = mc_cfg_parse_args(spec, &c, argc, argv, &res, err, sizeof(err));
	FUZZ_CHECK(argv[0] == saved[0] && !argv[argc]);
	for (int i = 1; i < argc; i++) { /* a permutation of the same */
		int seen = 0, want = 0;

		for (int j = 1; j < argc; j++) {
			seen += argv[j] == saved[i];
			want += saved[j] == saved[i];
		}
		FUZZ_CHECK(seen == want);
	}
	if (rc) {
		fuzz_cfg_check_err(rc, err, sizeof(err));
	} else {
		fuzz_cfg_check(&c);
		FUZZ_CHECK(res.action == MC_CFG_RUN ||
			   res.action == MC_CFG_HELP ||
			   res.action == MC_CFG_VERSION ||
			   res.action == MC_CFG_DUMP);
		FUZZ_CHECK(res.n_positional >= 0 &&
			   res.n_positional <= spec->max_positional);
		if (res.n_positional) {
			FUZZ_CHECK(res.positional > argv &&
				   res.positional + res.n_positional <=
					   argv + argc);
		}
	}
	fuzz_cfg_release(spec, &c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *argv[MAX_ARGS + 2], *again[MAX_ARGS + 2];
	int argc;

	memset(argv, 0, sizeof(argv));
	argc = split_args(data, size, argv);
	/* Each spec parses the arguments as given (the first may reorder). */
	memcpy(again, argv, sizeof(again));
	parse(&fuzz_strict_spec, argc, argv);
	parse(&fuzz_lenient_spec, argc, again);
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	return 0;
}
