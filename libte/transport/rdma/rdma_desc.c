/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rdma transport's wire formats, upstream's (docs/wire-protocol.md):
 * - its part of our segment descriptor: "devices": [{"name", "lid",
 *   "gid"}], per buffer "lkey"/"rkey" arrays indexed like "devices", and
 *   "priority_matrix"; read back from peers' descriptors (desc_decode,
 *   fuzzed through fuzz_te_desc);
 * - the Connection handshake body (fuzzed by fuzz_te_rdma_hs).
 * Everything read here came from the network: every value is bounded and
 * a malformed field reads as absent, as upstream's readers do.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_parse.h"
#include "rdma_int.h"

void rdma_gid_str(const union ibv_gid *g, char out[48])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + i * 3, 4, i == 15 ? "%02x" : "%02x:", g->raw[i]);
}

int rdma_gid_parse(const char *s, union ibv_gid *g)
{
	/* Upstream writes 16 bytes as "xx:xx:...:xx". */
	if (!s || strlen(s) != 47)
		return -EINVAL;
	for (int i = 0; i < 16; i++) {
		int hi = mc_parse_hexdigit(s[i * 3]),
		    lo = mc_parse_hexdigit(s[i * 3 + 1]);

		if (hi < 0 || lo < 0 || (i < 15 && s[i * 3 + 2] != ':'))
			return -EINVAL;
		g->raw[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

int rdma_describe(struct rdma_transport *t, json_t *desc)
{
	struct te_engine *eng = t->base.eng;
	json_t *devs = json_array(), *bufs = json_object_get(desc, "buffers");
	size_t i;
	json_t *b;

	if (!t->n_ctx) {
		json_decref(devs);
		return 0;
	}
	for (unsigned k = 0; k < t->n_ctx; k++) {
		char gid[48];

		rdma_gid_str(&t->ctx[k].gid, gid);
		json_array_append_new(devs,
				      json_pack("{s:s, s:i, s:s}", "name",
						t->ctx[k].name, "lid",
						t->ctx[k].lid, "gid", gid));
	}
	json_object_set_new(desc, "devices", devs);
	if (t->topo.matrix)
		json_object_set(desc, "priority_matrix", t->topo.matrix);
	/* Our engine speaks rdma when it was asked to (upstream's readers
	 * take "protocol" as the transport to use). */
	if (eng->forced_tp == t->base.index)
		json_object_set_new(desc, "protocol", json_string("rdma"));
	json_array_foreach(bufs, i, b) {
		json_t *a = json_object_get(b, "addr");
		json_t *l = json_object_get(b, "length");
		struct te_memreg *r;
		json_t *lk, *rk;

		if (!json_is_integer(a) || !json_is_integer(l))
			continue;
		r = te__reg_find(eng, (uintptr_t)json_integer_value(a),
				 (uint64_t)json_integer_value(l), true);
		if (!r)
			continue;
		if (r->tp_priv[t->base.index]) {
			const struct rdma_mr *m = r->tp_priv[t->base.index];

			lk = json_array();
			rk = json_array();
			for (unsigned k = 0; k < t->n_ctx; k++) {
				json_array_append_new(
					lk,
					json_integer(m->mr[k] ? m->mr[k]->lkey :
								0));
				json_array_append_new(
					rk,
					json_integer(m->mr[k] ? m->mr[k]->rkey :
								0));
			}
			json_object_set_new(b, "lkey", lk);
			json_object_set_new(b, "rkey", rk);
		}
		te__reg_put(r);
	}
	return 0;
}

static void copy_name(json_t *o, const char *key, char *out, size_t len)
{
	json_t *v = json_object_get(o, key);

	out[0] = '\0';
	if (json_is_string(v) && strlen(json_string_value(v)) < len)
		snprintf(out, len, "%s", json_string_value(v));
}

static bool get_uint(json_t *o, const char *key, uint64_t max, uint64_t *out)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

static int cmp_rbuf(const void *a, const void *b)
{
	const struct rdma_rbuf *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void decode_devices(json_t *devs, struct rdma_peer_desc *d)
{
	size_t i;
	json_t *v;

	json_array_foreach(devs, i, v) {
		struct rdma_rdev *r = &d->devs[d->n_devs];
		json_t *gid = json_object_get(v, "gid");
		uint64_t lid = 0;

		if (d->n_devs == RDMA_MAX_NICS)
			break;
		copy_name(v, "name", r->name, sizeof(r->name));
		if (!r->name[0] || !json_is_string(gid) ||
		    rdma_gid_parse(json_string_value(gid), &r->gid))
			break; /* the key arrays index devices: stop here */
		(void)get_uint(v, "lid", 0xffff, &lid);
		r->lid = (uint16_t)lid;
		d->n_devs++;
	}
}

static void decode_buffer(json_t *b, struct rdma_peer_desc *d)
{
	struct rdma_rbuf *r = &d->bufs[d->n_bufs];
	json_t *rk = json_object_get(b, "rkey"), *k;
	size_t i;

	if (!get_uint(b, "addr", UINT64_MAX, &r->addr) ||
	    !get_uint(b, "length", UINT64_MAX, &r->len) || !r->len ||
	    r->addr + r->len < r->addr || !json_is_array(rk))
		return;
	copy_name(b, "name", r->location, sizeof(r->location));
	r->n_rkeys = 0;
	json_array_foreach(rk, i, k) {
		if (i >= d->n_devs || !json_is_integer(k) ||
		    json_integer_value(k) < 0 ||
		    json_integer_value(k) > UINT32_MAX)
			break;
		r->rkey[r->n_rkeys++] = (uint32_t)json_integer_value(k);
	}
	if (r->n_rkeys)
		d->n_bufs++;
}

int rdma_desc_decode(json_t *desc, void **out)
{
	json_t *devs = json_object_get(desc, "devices");
	json_t *bufs = json_object_get(desc, "buffers");
	json_t *m = json_object_get(desc, "priority_matrix");
	struct rdma_peer_desc *d;
	size_t i, n;
	json_t *b;

	*out = NULL;
	if (!json_is_array(devs) || !json_array_size(devs))
		return 0;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	decode_devices(devs, d);
	n = json_is_array(bufs) ? json_array_size(bufs) : 0;
	if (n > TE_MAX_BUFFERS)
		n = TE_MAX_BUFFERS;
	d->bufs = n ? calloc(n, sizeof(*d->bufs)) : NULL;
	if (n && !d->bufs) {
		free(d);
		return -ENOMEM;
	}
	json_array_foreach(bufs, i, b) {
		if (i >= n)
			break;
		decode_buffer(b, d);
	}
	if (d->n_bufs > 1)
		qsort(d->bufs, d->n_bufs, sizeof(*d->bufs), cmp_rbuf);
	if (json_is_object(m))
		d->matrix = json_deep_copy(m);
	if (!d->n_devs) {
		rdma_desc_free(d);
		return 0;
	}
	*out = d;
	return 0;
}

void rdma_desc_free(void *blob)
{
	struct rdma_peer_desc *d = blob;

	if (!d)
		return;
	json_decref(d->matrix);
	free(d->bufs);
	free(d);
}

const struct rdma_rbuf *rdma_rbuf_find(const struct rdma_peer_desc *d,
				       uint64_t addr, uint64_t len)
{
	size_t lo = 0, hi = d->n_bufs;

	/* The last buffer starting at or below addr (they do not overlap). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (d->bufs[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	{
		const struct rdma_rbuf *r = &d->bufs[lo - 1];

		if (addr + len < addr || addr + len > r->addr + r->len)
			return NULL;
		return r;
	}
}

/* ------------------------------------------------- handshake bodies */

int rdma_hs_parse(const char *json, size_t len, struct rdma_hs_msg *m)
{
	json_t *root = json_loadb(json, len, 0, NULL);
	json_t *qps, *gid, *q;
	uint64_t v = 0;
	size_t i;
	int rc = -EBADMSG;

	memset(m, 0, sizeof(*m));
	if (!json_is_object(root))
		goto out;
	copy_name(root, "local_nic_path", m->local_nic_path,
		  sizeof(m->local_nic_path));
	copy_name(root, "peer_nic_path", m->peer_nic_path,
		  sizeof(m->peer_nic_path));
	copy_name(root, "reply_msg", m->reply_msg, sizeof(m->reply_msg));
	if (m->reply_msg[0]) { /* a refusal needs nothing else */
		rc = 0;
		goto out;
	}
	if (get_uint(root, "local_lid", 0xffff, &v))
		m->lid = (uint16_t)v;
	if (get_uint(root, "mc_mtu", 65536, &v))
		m->mtu = (unsigned)v;
	gid = json_object_get(root, "local_gid");
	qps = json_object_get(root, "qp_num");
	if (!m->local_nic_path[0] || !m->peer_nic_path[0] ||
	    !json_is_string(gid) ||
	    rdma_gid_parse(json_string_value(gid), &m->gid) ||
	    !json_is_array(qps) || !json_array_size(qps) ||
	    json_array_size(qps) > RDMA_MAX_QP_PER_EP)
		goto out;
	json_array_foreach(qps, i, q) {
		if (!json_is_integer(q) || json_integer_value(q) < 0 ||
		    json_integer_value(q) > 0xffffff)
			goto out;
		m->qp_num[m->n_qp++] = (uint32_t)json_integer_value(q);
	}
	rc = 0;
out:
	json_decref(root);
	return rc;
}

char *rdma_hs_encode(const struct rdma_hs_msg *m)
{
	json_t *o, *qps = json_array();
	char gid[48], *text;

	for (unsigned i = 0; i < m->n_qp; i++)
		json_array_append_new(qps, json_integer(m->qp_num[i]));
	rdma_gid_str(&m->gid, gid);
	o = json_pack("{s:s, s:s, s:i, s:s, s:o, s:s}", "local_nic_path",
		      m->local_nic_path, "peer_nic_path", m->peer_nic_path,
		      "local_lid", m->lid, "local_gid", gid, "qp_num", qps,
		      "reply_msg", m->reply_msg);
	if (o && m->mtu)
		json_object_set_new(o, "mc_mtu", json_integer(m->mtu));
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return text;
}
