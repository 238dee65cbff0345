/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/mc_net.c's naming of this host: which names are
 * this host only (loopback), and which address of this host faces a
 * destination (the route's source, as the store client advertises when
 * its local_hostname is loopback and the master is not).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "mc_net.h"

Test(mc_net, loopback_names)
{
	cr_assert(mc_net_is_loopback("localhost"));
	cr_assert(mc_net_is_loopback("127.0.0.1"));
	cr_assert(mc_net_is_loopback("127.1.2.3"));
	cr_assert(mc_net_is_loopback("::1"));
	cr_assert(mc_net_is_loopback("::ffff:127.0.0.1"));
	cr_assert_not(mc_net_is_loopback("0.0.0.0"));
	cr_assert_not(mc_net_is_loopback("10.1.2.3"));
	cr_assert_not(mc_net_is_loopback("192.0.2.1"));
	cr_assert_not(mc_net_is_loopback("2001:db8::1"));
	/* Does not resolve: not known to be this host. */
	cr_assert_not(mc_net_is_loopback("no-such-host.invalid"));
	cr_assert_not(mc_net_is_loopback(""));
}

Test(mc_net, source_address)
{
	char out[64];

	cr_assert_eq(mc_net_source_addr("127.0.0.1", 50051, out, sizeof(out)),
		     0);
	cr_assert_str_eq(out, "127.0.0.1");
	cr_assert_eq(mc_net_source_addr("127.0.0.7", 0, out, sizeof(out)), 0);
	cr_assert_str_eq(out, "127.0.0.1");
	/* MC_EHOSTNAME, or -EADDRNOTAVAIL where no resolver answers. */
	cr_assert_lt(mc_net_source_addr("no-such-host.invalid", 1, out,
					sizeof(out)),
		     0);
	cr_assert_lt(mc_net_source_addr("127.0.0.1", 1, out, 4), 0);
}
