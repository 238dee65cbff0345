/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the etcd connection-string parser (common/mc_etcd_conn.c):
 * endpoints and their schemes, user and password, TLS files, the
 * environment, and refusals whose messages must never hold a password.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_etcd_conn.h"

static char err[512];

static void clear_env(void)
{
	unsetenv(MC_ETCD_ENV_USER);
	unsetenv(MC_ETCD_ENV_PASSWORD_FILE);
	unsetenv(MC_ETCD_ENV_CACERT);
	unsetenv(MC_ETCD_ENV_CERT);
	unsetenv(MC_ETCD_ENV_KEY);
}

TestSuite(etcd_conn, .init = clear_env, .fini = clear_env);

static void parse_ok(const char *spec, bool env, struct mc_etcd_conn *c)
{
	err[0] = '\0';
	cr_assert_eq(mc_etcd_conn_parse(spec, env, c, err, sizeof(err)), 0,
		     "'%s': %s", spec, err);
}

static void parse_bad(const char *spec, const char *want)
{
	struct mc_etcd_conn c;

	err[0] = '\0';
	cr_expect_eq(mc_etcd_conn_parse(spec, true, &c, err, sizeof(err)),
		     -EINVAL, "'%s' accepted", spec);
	cr_expect_not_null(strstr(err, want), "'%s': err '%s' lacks '%s'", spec,
			   err, want);
	cr_expect_null(strstr(err, "s3cr3t"), "'%s': password in '%s'", spec,
		       err);
	mc_etcd_conn_free(&c);
}

Test(etcd_conn, endpoints_and_schemes)
{
	struct mc_etcd_conn c;

	parse_ok(" h1:2379 , HTTP://h2:2379/;https://h3:2379;", false, &c);
	cr_assert_eq(c.n_eps, 3);
	cr_expect_str_eq(c.eps[0], "http://h1:2379");
	cr_expect_str_eq(c.eps[1], "http://h2:2379"); /* lowered */
	cr_expect_str_eq(c.eps[2], "https://h3:2379");
	cr_expect_eq(c.max_ep_len, strlen("https://h3:2379") + 1);
	cr_expect_null(c.user);
	cr_expect_null(c.cacert);
	mc_etcd_conn_free(&c);
	cr_expect_eq(c.n_eps, 0);

	parse_ok("etcd://h1:2379,h2:2379", false, &c);
	cr_assert_eq(c.n_eps, 2);
	cr_expect_str_eq(c.eps[1], "http://h2:2379");
	mc_etcd_conn_free(&c);
}

Test(etcd_conn, options_and_tls_scheme)
{
	struct mc_etcd_conn c;

	parse_ok("etcd://h1:2379;h2:2379?user=mc&password_file=/p%20w&"
		 "cacert=/ca&cert=/c&key=/k",
		 false, &c);
	cr_assert_eq(c.n_eps, 2);
	/* TLS files given: endpoints without a scheme are https. */
	cr_expect_str_eq(c.eps[0], "https://h1:2379");
	cr_expect_str_eq(c.eps[1], "https://h2:2379");
	cr_expect_str_eq(c.user, "mc");
	cr_expect_str_eq(c.password_file, "/p w");
	cr_expect_null(c.password);
	cr_expect_str_eq(c.cacert, "/ca");
	cr_expect_str_eq(c.cert, "/c");
	cr_expect_str_eq(c.key, "/k");
	mc_etcd_conn_free(&c);
}

Test(etcd_conn, userinfo)
{
	struct mc_etcd_conn c;

	parse_ok("etcd://http://mc:p%40ss@h1:2379,h2:2379", false, &c);
	cr_expect_str_eq(c.user, "mc");
	cr_expect_str_eq(c.password, "p@ss");
	cr_expect_str_eq(c.eps[0], "http://h1:2379");
	cr_expect_str_eq(c.eps[1], "http://h2:2379");
	mc_etcd_conn_free(&c);

	/* A user alone takes its password file from the environment. */
	setenv(MC_ETCD_ENV_PASSWORD_FILE, "/env/pw", 1);
	parse_ok("mc@h1:2379", true, &c);
	cr_expect_str_eq(c.user, "mc");
	cr_expect_str_eq(c.password_file, "/env/pw");
	mc_etcd_conn_free(&c);
}

Test(etcd_conn, environment_fills_the_rest)
{
	struct mc_etcd_conn c;

	setenv(MC_ETCD_ENV_USER, "envuser", 1);
	setenv(MC_ETCD_ENV_PASSWORD_FILE, "/env/pw", 1);
	setenv(MC_ETCD_ENV_CACERT, "/env/ca", 1);
	parse_ok("h1:2379?user=mc", true, &c);
	cr_expect_str_eq(c.user, "mc"); /* the string wins */
	cr_expect_str_eq(c.password_file, "/env/pw");
	cr_expect_str_eq(c.cacert, "/env/ca");
	cr_expect_str_eq(c.eps[0], "https://h1:2379");
	mc_etcd_conn_free(&c);

	/* Without use_env nothing is read from it. */
	parse_ok("h1:2379", false, &c);
	cr_expect_null(c.user);
	cr_expect_null(c.cacert);
	cr_expect_str_eq(c.eps[0], "http://h1:2379");
	mc_etcd_conn_free(&c);

	/* An inline password keeps the environment's password file out. */
	parse_ok("mc:s3cr3t@h1:2379", true, &c);
	cr_expect_str_eq(c.password, "s3cr3t");
	cr_expect_null(c.password_file);
	mc_etcd_conn_free(&c);
}

Test(etcd_conn, refusals)
{
	parse_bad("", "no endpoint");
	parse_bad(" ; , ", "no endpoint");
	parse_bad("?user=mc", "no endpoint");
	parse_bad("http://", "no host");
	parse_bad("http:///", "no host");
	parse_bad("ftp://h:1", "only http:// and https://");
	parse_bad("h:1,redis://h:2", "only http:// and https://");
	parse_bad("h:1?password=s3cr3t", "password_file=");
	parse_bad("h:1?colour=red", "unknown etcd option 'colour'");
	parse_bad("h:1?cacert=", "has no value");
	parse_bad("h:1?cacert=/a&cacert=/b", "given twice");
	parse_bad("h:1?cacert=%zz", "bad %-escape");
	parse_bad("h:1?cacert=%00", "bad %-escape");
	parse_bad("h:1?user=mc", "etcd user 'mc' has no password");
	parse_bad("h:1?password_file=/p", "a password without a user");
	parse_bad(":s3cr3t@h:1", "empty user name");
	parse_bad("mc:@h:1", "empty password");
	parse_bad("mc:s3cr3t@h:1?password_file=/p", "keep one");
	parse_bad("mc:s3cr3t@h1:1,mc:s3cr3t@h2:1",
		  "on the first endpoint only");
	parse_bad("h:1?cert=/c", "cert without key");
	parse_bad("h:1?key=/k", "key without cert");
	parse_bad("http://h:1?cacert=/ca", "plain HTTP");
	parse_bad("mc:s3cr3t@ftp://h:1", "not a scheme");
	/* What curl refused only at the first request. */
	parse_bad("etcd://::1:2379", "IPv6 address in brackets");
	parse_bad("http://::1", "IPv6 address in brackets");
	parse_bad("h:70000", "0..65535");
	parse_bad("h1:2379,h2:-1", "'h2:-1'");
	parse_bad("http://h:abc/", "expected HOST:PORT");
	parse_bad("mc:s3cr3t@[::1", "'[::1'");
}

Test(etcd_conn, ipv6)
{
	struct mc_etcd_conn c;

	parse_ok("etcd://[::1]:2379,http://[fe80::1%25eth0]:2379/", false, &c);
	cr_expect_eq(c.n_eps, 2);
	cr_expect_str_eq(c.eps[0], "http://[::1]:2379");
	cr_expect_str_eq(c.eps[1], "http://[fe80::1%25eth0]:2379");
	mc_etcd_conn_free(&c);
}

Test(etcd_conn, too_many_endpoints)
{
	char spec[MC_ETCD_MAX_ENDPOINTS * 4 + 16];
	size_t n = 0;

	for (int i = 0; i <= MC_ETCD_MAX_ENDPOINTS; i++)
		n += (size_t)snprintf(spec + n, sizeof(spec) - n, "h:1,");
	parse_bad(spec, "more than");
}
