/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine the libte unit tests start: P2PHANDSHAKE on 127.0.0.1 (no
 * metadata service), a 5 s timeout; the test fails if it cannot start.
 * Include after <criterion/criterion.h>.
 */
#ifndef TE_TEST_ENGINE_H
#define TE_TEST_ENGINE_H

#include "mooncake/te.h"

static inline struct te_engine *engine(void)
{
	struct te_engine_cfg cfg = { .metadata = "P2PHANDSHAKE",
				     .local_server_name = "127.0.0.1",
				     .timeout_ms = 5000 };
	struct te_engine *eng = NULL;
	char err[256] = "";

	cr_assert_eq(te_engine_create(&cfg, &eng, err, sizeof(err)), 0, "%s",
		     err);
	return eng;
}

#endif
