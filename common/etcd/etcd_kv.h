/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file etcd_kv.h
 * The etcd v3 operations the master's HA and the clients' leader
 * discovery use, over mc_etcd_call(): ranges, leases, transactions.
 *
 * Keys are NUL-terminated strings; values are bytes. Functions return 0
 * (or 1 where they say) or a negative code: mc_etcd_call()'s (transport,
 * HTTP, authentication), -EBADMSG for an answer that does not parse,
 * -ENOMEM; err says which endpoint and why.
 */
#ifndef MC_ETCD_KV_H
#define MC_ETCD_KV_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "etcd_client.h"
#include "mc_compiler.h"

struct mc_etcd_kv {
	char *key; /* NUL-terminated */
	char *val; /* len bytes, NUL-terminated past them */
	size_t len;
	long long create_rev, mod_rev, lease;
};

/** Free n kvs and the array. */
void mc_etcd_kvs_free(struct mc_etcd_kv *kvs, size_t n);

/**
 * The keys in [key, end) in key order (end NULL: key alone; end "": every
 * key from key on), at most limit of them (0: no limit): a new array in
 * *kvs (NULL when none) of *n; *more: the range holds more than limit;
 * *rev (may be NULL): the store's revision when it answered.
 */
int mc_etcd_range(struct etcd_client *c, const char *key, const char *end,
		  unsigned limit, struct mc_etcd_kv **kvs, size_t *n,
		  bool *more, long long *rev, char *err,
		  size_t errlen) MC_MUST_CHECK;

/** The kvs of a range answer (what mc_etcd_range() returns, from the
 *  decoded JSON): 0, -EBADMSG, -ENOMEM. */
int mc_etcd_range_parse(json_t *resp, struct mc_etcd_kv **kvs, size_t *n,
			bool *more, long long *rev) MC_MUST_CHECK;

/** One key: 1 with *kv filled (free what it holds with
 *  mc_etcd_kv_clear()), 0 when absent (*kv zeroed). */
int mc_etcd_get(struct etcd_client *c, const char *key, struct mc_etcd_kv *kv,
		char *err, size_t errlen) MC_MUST_CHECK;
void mc_etcd_kv_clear(struct mc_etcd_kv *kv);

/** The end of the range of keys that start with prefix (prefix with its
 *  last byte plus one), into out; -ENAMETOOLONG when it does not fit. */
int mc_etcd_prefix_end(const char *prefix, char *out,
		       size_t outlen) MC_MUST_CHECK;

/** A lease of ttl_s seconds: its id in *id. */
int mc_etcd_lease_grant(struct etcd_client *c, unsigned ttl_s, long long *id,
			char *err, size_t errlen) MC_MUST_CHECK;
/** Renew lease id once: *ttl is what is left of it now, 0 when it had
 *  already expired (or never was). */
int mc_etcd_lease_keepalive(struct etcd_client *c, long long id, long long *ttl,
			    char *err, size_t errlen) MC_MUST_CHECK;
/** Revoke lease id (its keys go with it); an unknown lease is no error. */
int mc_etcd_lease_revoke(struct etcd_client *c, long long id, char *err,
			 size_t errlen) MC_MUST_CHECK;

enum mc_etcd_op_kind { MC_ETCD_OP_PUT, MC_ETCD_OP_DEL };

struct mc_etcd_op {
	enum mc_etcd_op_kind kind;
	const char *key;
	const char *end; /* DEL: range end as mc_etcd_range's; NULL: key */
	const void *val; /* PUT */
	size_t len;
	long long lease; /* PUT: 0 none */
};

/* A condition: key's create_revision equals create_rev (0: the key is
 * absent). */
struct mc_etcd_cmp {
	const char *key;
	long long create_rev;
};

/**
 * One transaction: when every condition holds, the ops are applied and
 * the result is 1; otherwise nothing is and the result is 0. *rev (may be
 * NULL): the revision it ran at (the ops' revision when applied).
 */
int mc_etcd_txn(struct etcd_client *c, const struct mc_etcd_cmp *cmp,
		size_t ncmp, const struct mc_etcd_op *ops, size_t nops,
		long long *rev, char *err, size_t errlen) MC_MUST_CHECK;

#endif
