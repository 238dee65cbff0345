/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for the metadata protocol (metad_handle in metad/metad.c)
 * over an in-memory store with small limits (max_key 64, max_body 256).
 *
 * Input: up to MAX_REQS requests separated by a line "====":
 *
 *   <M><path>[?<raw query>]\n<body>\n====\n<M>...
 *
 * <M> is one byte choosing the method: G GET, P PUT, D DELETE, H HEAD,
 * O OPTIONS, X POST, g "get", E ""; any other byte picks from a table.
 * Without '?' the query is absent (NULL); without '\n' the body is empty.
 * The body may hold any byte, NUL included.
 *
 * Checks: every status is 200, 400, 404, 405 or 413, with a NUL-terminated
 * body and an Allow header on 405; 413 only for a PUT over max_body; what
 * a PUT stored (200) reads back byte for byte; what a DELETE removed (200)
 * reads back 404; deleting every key stored by the input empties the store,
 * so each input starts from an empty store.
 */
#include <stdbool.h>
#include <string.h>

#include "fuzz_common.h"
#include "mc_http.h"
#include "mc_log.h"
#include "metad.h"

#define MAX_REQS 16
#define MAX_KEY 64
#define MAX_BODY 256
#define SEP "\n====\n"

static struct metad *metad;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const struct metad_options opts = {
		.store = "memory",
		.max_body = MAX_BODY,
		.max_key = MAX_KEY,
	};
	char err[256] = "";

	mc_log_set_level(MC_LOG_ERROR);
	if (metad_create(&opts, &metad, err, sizeof(err))) {
		fprintf(stderr, "metad_create: %s\n", err);
		abort();
	}
	return 0;
}

static const char *method_of(uint8_t sel)
{
	static const char *const others[] = { "GET",   "PUT",	 "DELETE",
					      "HEAD",  "POST",	 "PATCH",
					      "TRACE", "OPTIONS" };

	switch (sel) {
	case 'G':
		return "GET";
	case 'P':
		return "PUT";
	case 'D':
		return "DELETE";
	case 'H':
		return "HEAD";
	case 'O':
		return "OPTIONS";
	case 'X':
		return "POST";
	case 'g':
		return "get";
	case 'E':
		return "";
	default:
		return others[sel % 8];
	}
}

static char *dup_bytes(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);

	FUZZ_CHECK(s);
	if (n)
		memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

static bool is_status(int s)
{
	return s == 200 || s == 400 || s == 404 || s == 405 || s == 413;
}

/* One request through metad_handle(), with the checks every reply meets. */
static int handle(const char *method, const char *path, const char *query,
		  const char *body, size_t body_len, char **out_body,
		  size_t *out_len)
{
	struct mc_http_request req = {
		.method = method,
		.path = path,
		.query = query,
		.body = body,
		.body_len = body_len,
	};
	struct mc_http_response resp = { 0 };

	metad_handle(metad, &req, &resp);
	FUZZ_CHECK(is_status(resp.status));
	FUZZ_CHECK(resp.body && resp.body[resp.body_len] == '\0');
	if (resp.status == 405)
		FUZZ_CHECK(resp.allow != NULL);
	if (resp.status == 413)
		FUZZ_CHECK(!strcmp(method, "PUT") && body_len > MAX_BODY);
	if (strcmp(path, "/health") && strcmp(path, "/metadata"))
		FUZZ_CHECK(resp.status == 404);
	if (!strcmp(path, "/health") &&
	    (!strcmp(method, "GET") || !strcmp(method, "HEAD")))
		FUZZ_CHECK(resp.status == 200 && resp.body_len == 2 &&
			   !memcmp(resp.body, "OK", 2));
	if (!strcmp(path, "/metadata") && resp.status == 200 &&
	    (!strcmp(method, "GET") || !strcmp(method, "HEAD")))
		FUZZ_CHECK(resp.content_type &&
			   !strcmp(resp.content_type, "application/json"));
	if (out_body) {
		*out_body = resp.body;
		*out_len = resp.body_len;
	} else {
		free(resp.body);
	}
	return resp.status;
}

/* Queries whose PUT succeeded, deleted again at the end of the input. */
struct stored {
	char *queries[MAX_REQS];
	int n;
};

static void run_one(const uint8_t *p, size_t len, struct stored *st)
{
	const char *method = method_of(p[0]);
	const uint8_t *line = p + 1, *nl, *q;
	size_t line_len, body_len = 0;
	char *path, *query = NULL, *body, *got;
	size_t got_len;
	int status;

	nl = memchr(line, '\n', len - 1);
	line_len = nl ? (size_t)(nl - line) : len - 1;
	if (nl)
		body_len = len - 1 - line_len - 1;
	body = dup_bytes(nl ? nl + 1 : line + line_len, body_len);
	q = memchr(line, '?', line_len);
	if (q) {
		path = dup_bytes(line, (size_t)(q - line));
		query = dup_bytes(q + 1, line_len - (size_t)(q - line) - 1);
	} else {
		path = dup_bytes(line, line_len);
	}

	status = handle(method, path, query, body, body_len, NULL, NULL);
	if (!strcmp(path, "/metadata") && !strcmp(method, "PUT") &&
	    status == 200) {
		/* Stored (or already there): it reads back as sent. */
		status = handle("GET", path, query, "", 0, &got, &got_len);
		FUZZ_CHECK(status == 200 && got_len == body_len &&
			   !memcmp(got, body, body_len));
		free(got);
		st->queries[st->n++] = query;
		query = NULL;
	} else if (!strcmp(path, "/metadata") && !strcmp(method, "DELETE") &&
		   status == 200) {
		status = handle("GET", path, query, "", 0, NULL, NULL);
		FUZZ_CHECK(status == 404);
	}
	free(path);
	free(query);
	free(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stored st = { .n = 0 };
	size_t off = 0;

	if (!metad)
		LLVMFuzzerInitialize(NULL, NULL);
	FUZZ_CHECK(metad_count(metad) == 0);
	for (int i = 0; i < MAX_REQS && off < size; i++) {
		const uint8_t *sep =
			memmem(data + off, size - off, SEP, strlen(SEP));
		size_t len = sep ? (size_t)(sep - (data + off)) : size - off;

		if (len)
			run_one(data + off, len, &st);
		off += len + (sep ? strlen(SEP) : 0);
	}
	for (int i = 0; i < st.n; i++) {
		int status = handle("DELETE", "/metadata", st.queries[i], "", 0,
				    NULL, NULL);

		FUZZ_CHECK(status == 200 || status == 404);
		free(st.queries[i]);
	}
	FUZZ_CHECK(metad_count(metad) == 0);
	return 0;
}
