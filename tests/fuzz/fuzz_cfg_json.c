/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for JSON config files (mc_cfg_load_json in common/mc_cfg.c).
 *
 * Input: the bytes of a config file. It is loaded over the defaults with
 * the strict and with the lenient spec of fuzz_cfg_spec.h. Checks: a
 * loaded config respects every bound; a failure has a message; what the
 * strict spec accepts the lenient one accepts with the same result; the
 * effective config can be dumped; mc_cfg_release() frees every string.
 */
#include <stdbool.h>
#include <string.h>

#include "fuzz_cfg_spec.h"
#include "mc_log.h"

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* Unknown and deprecated keys are warnings: keep the output quiet. */
	mc_log_set_level(MC_LOG_ERROR);
	devnull = fopen("/dev/null", "we");
	FUZZ_CHECK(devnull);
	return 0;
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static bool same_cfg(const struct fuzz_cfg *a, const struct fuzz_cfg *b)
{
	return a->flag == b->flag && a->other_flag == b->other_flag &&
	       a->count == b->count && a->any_int == b->any_int &&
	       a->rpc_port == b->rpc_port && a->size == b->size &&
	       a->big_size == b->big_size && a->ratio == b->ratio &&
	       a->any_double == b->any_double && same_str(a->name, b->name) &&
	       same_str(a->dir, b->dir) && a->ttl_ms == b->ttl_ms &&
	       a->wait_ms == b->wait_ms && a->v == b->v;
}

static int load(const struct mc_cfg_spec *spec, struct fuzz_cfg *c,
		const uint8_t *data, size_t size)
{
	char err[MC_ERR_LEN] = "";
	int rc;

	memset(c, 0, sizeof(*c));
	rc = mc_cfg_defaults(spec, c, err, sizeof(err));
	FUZZ_CHECK(rc == 0);
	fuzz_cfg_check(c);
	rc = mc_cfg_load_json(spec, c, (const char *)data, size, "fuzz.json",
			      err, sizeof(err));
	if (rc) {
		fuzz_cfg_check_err(rc, err, sizeof(err));
		return rc;
	}
	fuzz_cfg_check(c);
	if (devnull)
		mc_cfg_dump_json(spec, c, devnull);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_cfg strict, lenient;
	int rc_strict, rc_lenient;

	if (!devnull)
		LLVMFuzzerInitialize(NULL, NULL);
	rc_strict = load(&fuzz_strict_spec, &strict, data, size);
	rc_lenient = load(&fuzz_lenient_spec, &lenient, data, size);
	if (rc_strict == 0)
		FUZZ_CHECK(rc_lenient == 0 && same_cfg(&strict, &lenient));
	fuzz_cfg_release(&fuzz_strict_spec, &strict);
	fuzz_cfg_release(&fuzz_lenient_spec, &lenient);
	return 0;
}
