/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_etcd_conn.h
 * The one parser of etcd connection strings (docs/config.md, "etcd"):
 * the transfer engine's etcd metadata backend (libte/meta/meta_etcd.c)
 * and the master's --etcd_endpoints / --ha_backend_connstring go through
 * it.
 *
 *   [etcd://][SCHEME://][USER[:PASSWORD]@]HOST:PORT[/][,;]...[?OPTIONS]
 *
 * Endpoints are separated by ',' or ';'. SCHEME is http or https; none
 * means https when a TLS option is given, else http. USER[:PASSWORD]@ is
 * taken on the first endpoint only (anything in a connection string is
 * visible to every local user through ps: prefer password_file). OPTIONS
 * are NAME=VALUE pairs joined by '&', values %XX-decoded:
 *
 *   user=NAME           etcd user (v3 RBAC)         MC_ETCD_USER
 *   password_file=PATH  that user's password        MC_ETCD_PASSWORD_FILE
 *   cacert=PATH         CA bundle for https         MC_ETCD_CACERT
 *   cert=PATH           client certificate (PEM)    MC_ETCD_CERT
 *   key=PATH            its private key (PEM)       MC_ETCD_KEY
 *
 * With use_env, the variables on the right fill what the string leaves
 * unset. Nothing is opened or contacted here. Error messages never hold a
 * password.
 */
#ifndef MC_ETCD_CONN_H
#define MC_ETCD_CONN_H

#include <stdbool.h>
#include <stddef.h>

#include "mc_compiler.h"

#define MC_ETCD_MAX_ENDPOINTS 64

#define MC_ETCD_ENV_USER "MC_ETCD_USER"
#define MC_ETCD_ENV_PASSWORD_FILE "MC_ETCD_PASSWORD_FILE"
#define MC_ETCD_ENV_CACERT "MC_ETCD_CACERT"
#define MC_ETCD_ENV_CERT "MC_ETCD_CERT"
#define MC_ETCD_ENV_KEY "MC_ETCD_KEY"

struct mc_etcd_conn {
	/* "http://host:port" or "https://host:port", no trailing '/' */
	char *eps[MC_ETCD_MAX_ENDPOINTS];
	unsigned n_eps;
	size_t max_ep_len; /* longest entry of eps, with its NUL */
	char *user; /* NULL: no etcd authentication */
	char *password; /* from USER:PASSWORD@, else NULL */
	char *password_file;
	char *cacert, *cert, *key; /* NULL when not given */
};

/**
 * Parse spec into *c (zeroed first; free with mc_etcd_conn_free() whatever
 * the result). 0; -EINVAL with err saying what is wrong; -ENOMEM.
 */
int mc_etcd_conn_parse(const char *spec, bool use_env, struct mc_etcd_conn *c,
		       char *err, size_t errlen) MC_MUST_CHECK;

/** Free what *c holds (the password is wiped first) and zero it. */
void mc_etcd_conn_free(struct mc_etcd_conn *c);

/**
 * The host and port of spec's first endpoint (where a client goes first):
 * 0; -EINVAL (spec not understood); -ENAMETOOLONG (host_len too small);
 * -ENOMEM. The environment is not read; nothing is contacted.
 */
int mc_etcd_conn_first_host(const char *spec, char *host, size_t host_len,
			    int *port) MC_MUST_CHECK;

#endif
