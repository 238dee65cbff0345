/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd authentication pieces (etcd_auth.h): the password file, the token
 * in etcd's answer, and etcd's auth error messages (etcd's rpctypes; the
 * v3 gateway passes them on in "message"/"error").
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "etcd_auth.h"
#include "mc_auth.h"

void mc_etcd_secret_free(char *s)
{
	if (!s)
		return;
	for (volatile char *p = s; *p; p++)
		*p = '\0';
	free(s);
}

int mc_etcd_password_read(const char *path, char **out, char *err,
			  size_t errlen)
{
	char buf[MC_ETCD_PASSWORD_MAX + 2];
	size_t len = 0;
	int rc;

	*out = NULL;
	rc = mc_secret_file_read(path, "etcd password file", buf, sizeof(buf),
				 &len, err, errlen);
	if (rc)
		goto out;
	if (len && buf[len - 1] == '\n')
		len--;
	if (len && buf[len - 1] == '\r')
		len--;
	if (!len || len > MC_ETCD_PASSWORD_MAX || memchr(buf, '\0', len) ||
	    memchr(buf, '\n', len)) {
		snprintf(err, errlen,
			 "etcd password file %s must hold one line of 1 to %d "
			 "bytes",
			 path, MC_ETCD_PASSWORD_MAX);
		rc = -EINVAL;
		goto out;
	}
	*out = strndup(buf, len);
	if (!*out)
		rc = -ENOMEM;
out:
	for (volatile char *p = buf; p < buf + sizeof(buf); p++)
		*p = '\0';
	return rc;
}

int mc_etcd_token_of(json_t *resp, char **token)
{
	const char *t = json_string_value(json_object_get(resp, "token"));

	*token = NULL;
	/* A token goes into a header: printable ASCII, not empty. */
	if (!t || !*t)
		return -EBADMSG;
	for (const char *p = t; *p; p++)
		if (*p < 0x21 || *p > 0x7e)
			return -EBADMSG;
	*token = strdup(t);
	return *token ? 0 : -ENOMEM;
}

enum mc_etcd_auth_err mc_etcd_auth_err_of(const char *message)
{
	static const struct {
		const char *text;
		enum mc_etcd_auth_err kind;
	} known[] = {
		{ "invalid auth token", MC_ETCD_AUTH_TOKEN_INVALID },
		{ "revision of auth store is old", MC_ETCD_AUTH_TOKEN_INVALID },
		{ "user name is empty", MC_ETCD_AUTH_REQUIRED },
		{ "user name not found", MC_ETCD_AUTH_REQUIRED },
		{ "permission denied", MC_ETCD_AUTH_DENIED },
		{ "authentication failed", MC_ETCD_AUTH_FAILED },
		{ "authentication is not enabled", MC_ETCD_AUTH_NOT_ENABLED },
	};

	if (!message)
		return MC_ETCD_AUTH_OTHER;
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strstr(message, known[i].text))
			return known[i].kind;
	return MC_ETCD_AUTH_OTHER;
}
