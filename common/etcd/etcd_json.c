/* SPDX-License-Identifier: Apache-2.0 */
/* etcd gateway JSON pieces (etcd_json.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "etcd_json.h"

json_t *mc_etcd_json_b64(const void *p, size_t n)
{
	size_t len = mc_b64_encoded_len(n), out_n = 0;
	char *s;
	json_t *j;

	if (len == SIZE_MAX)
		return NULL;
	s = malloc(len + 1);
	if (!s)
		return NULL;
	if (mc_b64_encode(p, n, s, len + 1, &out_n)) {
		free(s);
		return NULL;
	}
	j = json_stringn_nocheck(s, out_n);
	free(s);
	return j;
}

/* {"key": b64(key)} plus "value": b64(val) when val is given. */
json_t *mc_etcd_json_kv(const char *key, const void *val, size_t len,
			bool with_val)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (json_object_set_new(o, "key", mc_etcd_json_b64(key, strlen(key))) ||
	    (with_val &&
	     json_object_set_new(o, "value", mc_etcd_json_b64(val, len)))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* An int64 field: the gateway sends them as strings; absent means 0. */
int mc_etcd_json_int(json_t *o, const char *name, long long *out)
{
	json_t *v = json_object_get(o, name);
	const char *s;
	char *end;

	*out = 0;
	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	s = json_string_value(v);
	if (!s || !*s)
		return -EBADMSG;
	errno = 0;
	*out = strtoll(s, &end, 10);
	return (errno || *end) ? -EBADMSG : 0;
}

/*
 * The first kv of a range response: 0 with it in *kv, -ENOENT when the
 * response holds none, -EBADMSG when "kvs" is not an array.
 */
int mc_etcd_json_first_kv(json_t *range, json_t **kv)
{
	json_t *kvs = json_object_get(range, "kvs");

	if (!kvs || json_is_null(kvs))
		return -ENOENT;
	if (!json_is_array(kvs))
		return -EBADMSG;
	if (!json_array_size(kvs))
		return -ENOENT;
	*kv = json_array_get(kvs, 0);
	return json_is_object(*kv) ? 0 : -EBADMSG;
}

/* Decode a kv's value (absent means empty) into a malloc'd buffer. */
int mc_etcd_json_value(json_t *kv, char **val, size_t *len)
{
	json_t *v = json_object_get(kv, "value");
	const char *s = "";
	size_t slen = 0, max;
	char *buf;
	int rc;

	if (v && !json_is_null(v)) {
		if (!json_is_string(v))
			return -EBADMSG;
		s = json_string_value(v);
		slen = json_string_length(v);
	}
	max = mc_b64_decoded_max(slen) + 1;
	buf = malloc(max);
	if (!buf)
		return -ENOMEM;
	rc = mc_b64_decode(s, slen, buf, max, len);
	if (rc) {
		free(buf);
		return rc == -EINVAL ? -EBADMSG : rc;
	}
	buf[*len] = '\0';
	*val = buf;
	return 0;
}
