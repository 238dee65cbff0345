/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file etcd_auth.h
 * etcd's own authentication as the etcd backend (meta_etcd.c) uses it:
 * the password file, the token of POST /v3/auth/authenticate, and what
 * etcd's error messages say about authentication.
 */
#ifndef MC_ETCD_AUTH_H
#define MC_ETCD_AUTH_H

#include <jansson.h>
#include <stddef.h>

#include "mc_compiler.h"

#define MC_ETCD_PASSWORD_MAX 4096

/**
 * Read the password in path into a new string *out (free with
 * mc_etcd_secret_free()). One line; a trailing "\n" or "\r\n" is cut.
 * Like a token file (docs/operations.md), a file group or others may
 * read, or that someone other than this user or root owns, is refused.
 * 0; -EACCES, -EINVAL (empty, too long, holds NUL), or the errno of
 * open/read; err names the file, never its content.
 */
int mc_etcd_password_read(const char *path, char **out, char *err,
			  size_t errlen) MC_MUST_CHECK;

/** Wipe and free a password or token. */
void mc_etcd_secret_free(char *s);

/**
 * The token of an authenticate response ({"token": "...", ...}): 0 with a
 * new string in *token; -EBADMSG when there is none or it could not go
 * in a header; -ENOMEM.
 */
int mc_etcd_token_of(json_t *resp, char **token) MC_MUST_CHECK;

/* What an etcd error says about authentication. */
enum mc_etcd_auth_err {
	MC_ETCD_AUTH_OTHER, /* not about authentication */
	MC_ETCD_AUTH_TOKEN_INVALID, /* token expired or revoked: re-auth */
	MC_ETCD_AUTH_REQUIRED, /* etcd has auth on; we sent no token */
	MC_ETCD_AUTH_DENIED, /* this user's roles do not allow it */
	MC_ETCD_AUTH_FAILED, /* wrong user or password */
	MC_ETCD_AUTH_NOT_ENABLED, /* authenticate with auth off in etcd */
};

/** Classify the gateway's error message (its "message" or "error"). */
enum mc_etcd_auth_err mc_etcd_auth_err_of(const char *message);

#endif
