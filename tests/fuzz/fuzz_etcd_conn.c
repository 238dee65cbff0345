/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for the etcd pieces that read outside bytes: connection
 * strings (common/mc_etcd_conn.c, from flags, config files and the
 * environment) and etcd's answers to authentication
 * (common/etcd/etcd_auth.c, from the network).
 *
 * The input is used twice. As a connection string (NUL-terminated copy):
 * mc_etcd_conn_parse() returns 0, -EINVAL or -ENOMEM; on 0 every endpoint
 * is "http://" or "https://" plus a host with no space, and max_ep_len is
 * the longest one's size; a password comes with a user, and with a user
 * there is exactly one of password and password_file; cert and key come
 * together; the error text is NUL-terminated within its buffer. As JSON
 * (an authenticate answer): a token taken from it is printable ASCII
 * (it goes into a header line), and classifying any error text is total.
 */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <string.h>

#include "etcd_auth.h"
#include "fuzz_common.h"
#include "mc_etcd_conn.h"

static void check_conn(const uint8_t *data, size_t size)
{
	struct mc_etcd_conn c;
	char err[256];
	char *spec = malloc(size + 1);
	int rc;

	if (!spec)
		return;
	memcpy(spec, data, size);
	spec[size] = '\0';
	memset(err, 'x', sizeof(err));
	err[sizeof(err) - 1] = '\0';
	rc = mc_etcd_conn_parse(spec, false, &c, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
	if (!rc) {
		size_t longest = 0;

		FUZZ_CHECK(c.n_eps >= 1 && c.n_eps <= MC_ETCD_MAX_ENDPOINTS);
		for (unsigned i = 0; i < c.n_eps; i++) {
			const char *e = c.eps[i];
			size_t skip = !strncmp(e, "https://", 8) ? 8 : 7;

			FUZZ_CHECK(!strncmp(e, "http://", 7) ||
				   !strncmp(e, "https://", 8));
			FUZZ_CHECK(strlen(e) > skip);
			FUZZ_CHECK(!strchr(e, ' ') && !strchr(e, '\t'));
			if (strlen(e) + 1 > longest)
				longest = strlen(e) + 1;
		}
		FUZZ_CHECK(c.max_ep_len == longest);
		FUZZ_CHECK(!c.password || c.user);
		FUZZ_CHECK(!c.user || !c.password != !c.password_file);
		FUZZ_CHECK(!c.cert == !c.key);
	}
	mc_etcd_conn_free(&c);
	free(spec);
}

static void check_answer(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, 0, NULL);
	char *tok = NULL;
	int rc;

	if (!j)
		return;
	rc = mc_etcd_token_of(j, &tok);
	FUZZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -ENOMEM);
	if (!rc) {
		FUZZ_CHECK(tok && *tok);
		for (const char *p = tok; *p; p++)
			FUZZ_CHECK(*p > 0x20 && *p < 0x7f);
	}
	mc_etcd_secret_free(tok);
	(void)mc_etcd_auth_err_of(
		json_string_value(json_object_get(j, "message")));
	json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_conn(data, size);
	check_answer(data, size);
	return 0;
}
