/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one codec of segment descriptors (mooncake/ram/<name>) and rpc_meta
 * entries, in upstream's JSON (reference 1.5):
 *
 *   {"name": "...", "protocol": "tcp", "tcp_data_port": N,
 *    "tcp_proto_version": 2, "timestamp": "...",
 *    "buffers": [{"name": "cpu:0", "addr": N, "length": N}, ...]}
 *
 * Each transport owns its fields (here tcp_data_port and
 * tcp_proto_version): its describe op writes ours and its desc_decode op
 * reads a peer's into peer->tp_desc[], so this file names none of them.
 * This file writes and reads the rest and names the metadata keys
 * (te__meta_key). Our extensions, which upstream readers ignore:
 * "mc_host_id" (same host and network namespace test) and per buffer
 * "mc_owner" (te_register_owned) and
 * "mc_shm_path", "mc_shm_offset", "mc_shm_ino" and "mc_shm_tag" (where a
 * same-host peer can map it: a file under /dev/shm/ or the owner's
 * descriptor /proc/<pid>/fd/<n>, the inode the peer must find there, and
 * the tag the file's last page must hold, mem.c; a descriptor without an
 * inode, or a buffer without a tag, is not mapped). Decoding bounds every count and
 * string; it parses bytes from the network and is fuzzed
 * (tests/fuzz/fuzz_te_desc.c).
 *
 * Calls down only: the transport registry (transport.c) for the ops;
 * te__describe() reads the registration table under eng->reg_lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "te_int.h"
#include "mooncake/mc_err.h"

static int fail(char *err, size_t errlen, const char *what)
{
	if (err)
		snprintf(err, errlen, "bad segment descriptor: %s", what);
	return -EBADMSG;
}

static int get_u64(json_t *o, const char *k, uint64_t *v)
{
	json_t *x = json_object_get(o, k);

	if (!json_is_integer(x) || json_integer_value(x) < 0)
		return -EBADMSG;
	*v = (uint64_t)json_integer_value(x);
	return 0;
}

static int copy_str(json_t *o, const char *k, char *buf, size_t len,
		    bool required)
{
	json_t *x = json_object_get(o, k);

	if (!x)
		return required ? -EBADMSG : 0;
	if (!json_is_string(x) || json_string_length(x) >= len ||
	    strlen(json_string_value(x)) != json_string_length(x))
		return -EBADMSG;
	memcpy(buf, json_string_value(x), json_string_length(x) + 1);
	return 0;
}

/* Skip 1 to 9 digits at p: the character after them, or NULL. */
static const char *digits(const char *p)
{
	const char *q = p;

	while (*q >= '0' && *q <= '9' && q - p < 9)
		q++;
	return q > p && !(*q >= '0' && *q <= '9') ? q : NULL;
}

/* A file te_mem_alloc() makes: /dev/shm/mooncake.<name> (one component:
 * no directory of someone else's on the way), or a descriptor,
 * /proc/<pid>/fd/<n> (shm.c checks that it is a mooncake memfd). */
static bool shm_path_ok(const char *path)
{
	const char *p;

	if (!strncmp(path, "/dev/shm/mooncake.", 18))
		return !strchr(path + 9, '/');
	if (strncmp(path, "/proc/", 6))
		return false;
	p = digits(path + 6);
	if (!p || strncmp(p, "/fd/", 4))
		return false;
	p = digits(p + 4);
	return p && !*p;
}

static int decode_buffer(json_t *b, struct te_buffer_desc *d)
{
	json_t *shm = json_object_get(b, "mc_shm_path");

	if (!json_is_object(b) || get_u64(b, "addr", &d->addr) ||
	    get_u64(b, "length", &d->length) || d->addr + d->length < d->addr)
		return -EBADMSG;
	if (copy_str(b, "name", d->location, sizeof(d->location), false))
		return -EBADMSG;
	/* A bad owner is none: owned segments do not reach the buffer. */
	if (copy_str(b, "mc_owner", d->owner, sizeof(d->owner), false))
		d->owner[0] = '\0';
	if (json_is_string(shm) && json_string_length(shm) < 4096 &&
	    strlen(json_string_value(shm)) == json_string_length(shm) &&
	    shm_path_ok(json_string_value(shm))) {
		if (get_u64(b, "mc_shm_offset", &d->shm_offset))
			d->shm_offset = 0;
		if (get_u64(b, "mc_shm_ino", &d->shm_ino))
			d->shm_ino = 0;
		/* A descriptor's number is only worth its inode. */
		if (!d->shm_ino &&
		    !strncmp(json_string_value(shm), "/proc/", 6))
			return 0;
		/* Without the file's tag (a peer before it) the file is not
		 * mapped: its buffers are read over tcp. */
		if (copy_str(b, "mc_shm_tag", d->shm_tag, sizeof(d->shm_tag),
			     true) ||
		    strlen(d->shm_tag) != TE_SHM_TAG_HEX)
			return 0;
		d->shm_path = strdup(json_string_value(shm));
		if (!d->shm_path)
			return -ENOMEM;
	}
	return 0;
}

/* Each transport reads its own fields (its desc_decode op). */
static int decode_transports(json_t *root, struct te_peer *p)
{
	for (int i = 0; i < TE_TP_COUNT; i++) {
		const struct te_transport_ops *ops = te__transport_ops(i);
		int rc;

		if (!ops->desc_decode)
			continue;
		rc = ops->desc_decode(root, &p->tp_desc[i]);
		if (rc)
			return rc;
	}
	return 0;
}

int te__desc_decode(const char *json, size_t len, struct te_peer *p, char *err,
		    size_t errlen)
{
	json_error_t jerr;
	json_t *root, *bufs, *x;
	int rc = 0;

	root = json_loadb(json, len, 0, &jerr);
	if (!root)
		return fail(err, errlen, jerr.text);
	if (!json_is_object(root)) {
		rc = fail(err, errlen, "not a JSON object");
		goto out;
	}
	if (copy_str(root, "name", p->name, sizeof(p->name), true)) {
		rc = fail(err, errlen, "missing or bad 'name'");
		goto out;
	}
	rc = decode_transports(root, p);
	if (rc)
		goto out;
	p->host_id[0] = '\0';
	if (copy_str(root, "mc_host_id", p->host_id, sizeof(p->host_id), false))
		p->host_id[0] = '\0';
	x = json_object_get(root, "protocol");
	if (x && !json_is_string(x) && !json_is_array(x)) {
		rc = fail(err, errlen, "bad 'protocol'");
		goto out;
	}
	bufs = json_object_get(root, "buffers");
	if (bufs && !json_is_array(bufs)) {
		rc = fail(err, errlen, "'buffers' is not an array");
		goto out;
	}
	p->n_buffers = 0;
	p->buffers = NULL;
	if (bufs && json_array_size(bufs)) {
		size_t n = json_array_size(bufs);
		if (n > TE_MAX_BUFFERS) {
			rc = fail(err, errlen, "too many buffers");
			goto out;
		}
		p->buffers = calloc(n, sizeof(*p->buffers));
		if (!p->buffers) {
			rc = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			rc = decode_buffer(json_array_get(bufs, i),
					   &p->buffers[i]);
			p->n_buffers = (unsigned)i + 1;
			if (rc) {
				rc = rc == -ENOMEM ? rc :
						     fail(err, errlen,
							  "bad buffer entry");
				te__desc_release(p);
				goto out;
			}
		}
	}
out:
	json_decref(root);
	return rc;
}

void te__desc_release(struct te_peer *p)
{
	for (int i = 0; i < TE_TP_COUNT; i++) {
		if (p->tp_desc[i])
			te__transport_ops(i)->desc_free(p->tp_desc[i]);
		p->tp_desc[i] = NULL;
	}
	for (unsigned i = 0; i < p->n_buffers; i++)
		free(p->buffers[i].shm_path);
	free(p->buffers);
	p->buffers = NULL;
	p->n_buffers = 0;
}

int te__meta_key(struct te_engine *eng, char *buf, size_t len, const char *kind,
		 const char *name)
{
	const char *cid = getenv("MC_METADATA_CLUSTER_ID");

	if ((size_t)snprintf(buf, len, "mooncake/%s%s%s/%s",
			     cid && *cid ? cid : "", cid && *cid ? "/" : "",
			     kind, name) >= len)
		return -ENAMETOOLONG;
	(void)eng;
	return 0;
}

int te__rpc_meta_decode(const char *json, size_t len, char *ip, size_t iplen,
			int *port)
{
	json_t *root = json_loadb(json, len, 0, NULL);
	uint64_t v;
	int rc = -EBADMSG;

	if (json_is_object(root) &&
	    !copy_str(root, "ip_or_host_name", ip, iplen, true) && *ip &&
	    !get_u64(root, "rpc_port", &v) && v > 0 && v <= 65535) {
		*port = (int)v;
		rc = 0;
	}
	json_decref(root);
	return rc;
}

char *te__describe(struct te_engine *eng)
{
	json_t *root = json_object(), *bufs = json_array();
	char ts[64], *text;
	struct timespec now;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_object_set_new(root, "name", json_string(eng->name));
	json_object_set_new(root, "protocol", json_string("tcp"));
	json_object_set_new(root, "timestamp", json_string(ts));
	json_object_set_new(root, "mc_host_id", json_string(eng->host_id));
	pthread_rwlock_rdlock(&eng->reg_lock);
	for (unsigned i = 0; i < eng->n_regs; i++) {
		struct te_memreg *r = eng->regs[i];
		json_t *b;

		if (!r->remote)
			continue;
		b = json_object();
		json_object_set_new(b, "name", json_string(r->location));
		json_object_set_new(b, "addr",
				    json_integer((json_int_t)r->addr));
		json_object_set_new(b, "length",
				    json_integer((json_int_t)r->len));
		if (r->shm_path) {
			json_object_set_new(b, "mc_shm_path",
					    json_string(r->shm_path));
			json_object_set_new(
				b, "mc_shm_offset",
				json_integer((json_int_t)r->shm_offset));
			json_object_set_new(
				b, "mc_shm_ino",
				json_integer((json_int_t)r->shm_ino));
			json_object_set_new(b, "mc_shm_tag",
					    json_string(r->shm_tag));
		}
		if (r->owner[0])
			json_object_set_new(b, "mc_owner",
					    json_string(r->owner));
		json_array_append_new(bufs, b);
	}
	pthread_rwlock_unlock(&eng->reg_lock);
	json_object_set_new(root, "buffers", bufs);
	for (int i = 0; i < TE_TP_COUNT; i++) {
		struct te_transport *tp = eng->tps[i];
		if (tp && tp->ops->describe)
			tp->ops->describe(tp, root);
	}
	text = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	return text;
}
