/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for mooncakefs/lib/store_err.c: every store code the master
 * may send maps to an internal code that mc_err_to_store() maps back.
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "mc_log.h"
#include "mooncake/mc_err.h"
#include "store_err.h"

Test(store_err, round_trip)
{
	static const int codes[] = {
#define X(name, value, msg) value,
		MC_STORE_ERR_MAP(X)
#undef X
	};
	unsigned exact = 0;

	mc_log_set_level(MC_LOG_ERROR);
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		int in = mcs_err_from_store(codes[i]);
		int back = mc_err_to_store(in);

		cr_assert(in <= 0, "code %d -> %d", codes[i], in);
		if (back == codes[i])
			exact++;
		else
			cr_assert_eq(back, MC_STORE_INTERNAL_ERROR,
				     "code %d -> %d -> %d", codes[i], in, back);
	}
	cr_assert_geq(exact, 20);
}

Test(store_err, codes_the_client_relies_on)
{
	cr_assert_eq(mcs_err_from_store(0), 0);
	cr_assert_eq(mcs_err_from_store(-705), -EEXIST);
	cr_assert_eq(mcs_err_from_store(-704), -ENOENT);
	cr_assert_eq(mcs_err_from_store(-200), MC_EPOOLFULL);
	cr_assert_eq(mcs_err_from_store(-102), MC_ESEGEXISTS);
	cr_assert_eq(mc_err_to_store(mcs_err_from_store(-901)), -901);
	cr_assert_eq(mc_err_to_store(mcs_err_from_store(-1010)), -1010);
	cr_assert_eq(mc_err_to_store(mcs_err_from_store(-707)), -707);
	cr_assert_eq(mc_err_to_store(mcs_err_from_store(12345)), -1);
}
