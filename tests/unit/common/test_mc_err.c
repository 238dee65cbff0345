/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the error tables of include/mooncake/mc_err.h and their
 * accessors in common/mc_err.c: every table row is walked through the
 * X-macros, so a new row is covered without touching this file.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "mc_compiler.h"
#include "mooncake/mc_err.h"

struct err_row {
	const char *name;
	int value;
	int store;
	const char *msg;
};

static const struct err_row domain_rows[] = {
#define X(name, value, store, msg) { #name, value, MC_STORE_##store, msg },
	MC_ERR_MAP(X)
#undef X
};

static const struct err_row store_rows[] = {
#define X(name, value, msg) { #name, value, value, msg },
	MC_STORE_ERR_MAP(X)
#undef X
};

static const struct {
	const char *name;
	int eno;
	int store;
} errno_rows[] = {
#define X(eno, store) { #eno, eno, MC_STORE_##store },
	MC_ERRNO_STORE_MAP(X)
#undef X
};

#define N_DOMAIN (MC_ARRAY_SIZE(domain_rows))
#define N_STORE (MC_ARRAY_SIZE(store_rows))
#define N_ERRNO (MC_ARRAY_SIZE(errno_rows))

static void check_unique(const struct err_row *rows, size_t n,
			 const char *table)
{
	for (size_t i = 0; i < n; i++) {
		cr_expect_not_null(rows[i].name);
		cr_expect_not_null(rows[i].msg);
		cr_expect_gt(strlen(rows[i].name), 0, "%s row %zu: empty name",
			     table, i);
		cr_expect_gt(strlen(rows[i].msg), 0, "%s %s: empty message",
			     table, rows[i].name);
		for (size_t j = i + 1; j < n; j++) {
			cr_expect_str_neq(rows[i].name, rows[j].name,
					  "%s: duplicate name %s", table,
					  rows[i].name);
			cr_expect_str_neq(rows[i].msg, rows[j].msg,
					  "%s: %s and %s share a message",
					  table, rows[i].name, rows[j].name);
			cr_expect_neq(rows[i].value, rows[j].value,
				      "%s: %s and %s share value %d", table,
				      rows[i].name, rows[j].name,
				      rows[i].value);
		}
	}
}

Test(mc_err_map, names_and_messages_unique)
{
	cr_assert_gt(N_DOMAIN, 0);
	check_unique(domain_rows, N_DOMAIN, "MC_ERR_MAP");
}

Test(mc_err_map, domain_codes_below_base)
{
	for (size_t i = 0; i < N_DOMAIN; i++)
		cr_expect_lt(domain_rows[i].value, MC_ERR_BASE,
			     "%s = %d is not below MC_ERR_BASE",
			     domain_rows[i].name, domain_rows[i].value);
}

Test(mc_err_map, accessors_follow_table)
{
	for (size_t i = 0; i < N_DOMAIN; i++) {
		const struct err_row *r = &domain_rows[i];

		cr_expect_str_eq(mc_err_name(r->value), r->name);
		cr_expect_str_eq(mc_strerror(r->value), r->msg, "%s", r->name);
		cr_expect_eq(mc_err_to_store(r->value), r->store,
			     "%s -> %d, want %d", r->name,
			     mc_err_to_store(r->value), r->store);
		/* The store code each maps to is itself a known code. */
		cr_expect_str_neq(mc_store_err_name(r->store), "UNKNOWN",
				  "%s maps to unknown store code %d", r->name,
				  r->store);
	}
}

Test(mc_store_err_map, names_and_messages_unique)
{
	cr_assert_gt(N_STORE, 0);
	check_unique(store_rows, N_STORE, "MC_STORE_ERR_MAP");
}

Test(mc_store_err_map, accessors_follow_table)
{
	for (size_t i = 0; i < N_STORE; i++) {
		const struct err_row *r = &store_rows[i];

		cr_expect_str_eq(mc_store_err_name(r->value), r->name);
		cr_expect_str_eq(mc_store_strerror(r->value), r->msg, "%s",
				 r->name);
		cr_expect_leq(r->value, 0, "%s is positive", r->name);
	}
}

Test(mc_store_err_map, upstream_values)
{
	cr_expect_eq(MC_STORE_OK, 0);
	cr_expect_eq(MC_STORE_INTERNAL_ERROR, -1);
	cr_expect_eq(MC_STORE_NO_AVAILABLE_HANDLE, -200);
	cr_expect_eq(MC_STORE_OBJECT_NOT_FOUND, -704);
	cr_expect_eq(MC_STORE_OBJECT_ALREADY_EXISTS, -705);
	cr_expect_eq(MC_STORE_OBJECT_HAS_LEASE, -706);
	cr_expect_str_eq(mc_store_err_name(-200), "NO_AVAILABLE_HANDLE");
	cr_expect_str_eq(mc_store_err_name(-704), "OBJECT_NOT_FOUND");
}

Test(mc_errno_map, every_errno_translates)
{
	for (size_t i = 0; i < N_ERRNO; i++) {
		int rc = -errno_rows[i].eno;

		cr_expect_eq(mc_err_to_store(rc), errno_rows[i].store,
			     "-%s -> %d, want %d", errno_rows[i].name,
			     mc_err_to_store(rc), errno_rows[i].store);
		cr_expect_str_neq(mc_err_name(rc), "UNKNOWN", "-%s",
				  errno_rows[i].name);
		cr_expect_str_neq(mc_strerror(rc), "unknown error", "-%s",
				  errno_rows[i].name);
		cr_expect_str_neq(mc_store_err_name(errno_rows[i].store),
				  "UNKNOWN", "-%s", errno_rows[i].name);
	}
}

Test(mc_err_to_store, examples)
{
	cr_expect_eq(mc_err_to_store(0), 0);
	cr_expect_eq(mc_err_to_store(MC_EPOOLFULL), -200);
	cr_expect_eq(mc_err_to_store(-ENOENT), -704);
	cr_expect_eq(mc_err_to_store(-EEXIST), -705);
	cr_expect_eq(mc_err_to_store(MC_EHASLEASE), -706);
	cr_expect_eq(mc_err_to_store(MC_ELEASEEXPIRED), -707);
	cr_expect_eq(mc_err_to_store(-ETIMEDOUT), MC_STORE_RPC_TIMEOUT);
	cr_expect_eq(mc_err_to_store(MC_EBADCONFIG), MC_STORE_INVALID_PARAMS);
}

Test(mc_err_to_store, unknown_is_internal_error)
{
	cr_expect_eq(mc_err_to_store(-ENOTTY), -1);
	cr_expect_eq(mc_err_to_store(-EXDEV), -1);
	cr_expect_eq(mc_err_to_store(MC_ERR_BASE), -1);
	cr_expect_eq(mc_err_to_store(MC_ERR_BASE - 999), -1);
	cr_expect_eq(mc_err_to_store(-123456), -1);
	/* Positive values are not codes; they must not pass as success. */
	cr_expect_eq(mc_err_to_store(1), -1);
	cr_expect_eq(mc_err_to_store(704), -1);
}

Test(mc_strerror, known_and_unknown)
{
	cr_expect_str_eq(mc_strerror(0), "success");
	cr_expect_str_eq(mc_err_name(0), "OK");
	cr_expect_str_eq(mc_strerror(MC_EPOOLFULL),
			 "no space left in the pool");
	cr_expect_str_eq(mc_err_name(MC_EPOOLFULL), "EPOOLFULL");
	cr_expect_str_eq(mc_err_name(-ENOENT), "ENOENT");
	cr_expect_str_eq(mc_err_name(-EINVAL), "EINVAL");
	cr_expect_str_eq(mc_strerror(-ENOENT), "No such file or directory");
	cr_expect_str_eq(mc_err_name(MC_ERR_BASE - 999), "UNKNOWN");
	cr_expect_str_eq(mc_strerror(MC_ERR_BASE - 999), "unknown error");
	cr_expect_str_eq(mc_err_name(-3999), "UNKNOWN");
	cr_expect_str_eq(mc_err_name(-123456), "UNKNOWN");
	cr_expect_str_eq(mc_strerror(-123456), "unknown error");
	cr_expect_str_eq(mc_err_name(5), "UNKNOWN");
}

Test(mc_store_strerror, unknown_code)
{
	cr_expect_str_eq(mc_store_err_name(-42), "UNKNOWN");
	cr_expect_str_eq(mc_store_strerror(-42), "unknown error code");
	cr_expect_str_eq(mc_store_err_name(1), "UNKNOWN");
	cr_expect_str_eq(mc_store_strerror(0), "success");
	cr_expect_str_eq(mc_store_strerror(-706), "object has a lease");
}
