/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for te_meta_host() (libte/meta/meta.c): where a metadata
 * connection string's service is reached, for the engine's choice of its
 * address beside a loopback name (engine.c). Nothing is contacted.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "meta/meta.h"

static void expect(const char *conn, const char *host, int port)
{
	char got[256];
	int p = -1;
	int rc = te_meta_host(conn, got, sizeof(got), &p);

	cr_assert_eq(rc, 0, "%s: %d", conn, rc);
	cr_expect_str_eq(got, host, "%s", conn);
	cr_expect_eq(p, port, "%s: port %d", conn, p);
}

Test(meta_host, http_urls)
{
	expect("http://10.0.0.1:8080/metadata", "10.0.0.1", 8080);
	expect("http://meta.example:9/metadata?x=1", "meta.example", 9);
	expect("https://meta.example/metadata", "meta.example", 443);
	expect("http://meta.example", "meta.example", 80);
	expect("HTTP://[fd00::1]:8080/metadata", "fd00::1", 8080);
}

Test(meta_host, etcd_first_endpoint)
{
	expect("etcd://10.0.0.2:2379", "10.0.0.2", 2379);
	expect("etcd://10.0.0.2:2379;10.0.0.3:2379", "10.0.0.2", 2379);
	expect("etcd://mc:secret@10.0.0.2:2379,10.0.0.3:2379", "10.0.0.2",
	       2379);
	expect("etcd://https://e1:2379?cacert=/x", "e1", 2379);
	/* No scheme is etcd, as upstream reads it. */
	expect("e1:2379,e2:2379", "e1", 2379);
}

Test(meta_host, refused)
{
	char got[8];
	int p;

	cr_expect_eq(te_meta_host("P2PHANDSHAKE", got, sizeof(got), &p),
		     -EINVAL);
	cr_expect_eq(te_meta_host("", got, sizeof(got), &p), -EINVAL);
	cr_expect_eq(te_meta_host("redis://h:6379", got, sizeof(got), &p),
		     -EINVAL);
	cr_expect_neq(te_meta_host("http://a-long-host-name:80/", got,
				   sizeof(got), &p),
		      0);
}
