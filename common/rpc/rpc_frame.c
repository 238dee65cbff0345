/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Master RPC frames: the 24-byte header codec, the method table (which
 * protobuf message each method carries) and frame packing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_rpc.h"
#include "mc_le.h"
#include "mooncake/mc_err.h"

void mc_rpc_hdr_encode(const struct mc_rpc_hdr *h, uint8_t *out)
{
	mc_put_le32(out, MC_RPC_MAGIC);
	out[4] = h->version;
	out[5] = h->kind;
	mc_put_le16(out + 6, h->method);
	mc_put_le32(out + 8, h->length);
	mc_put_le32(out + 12, h->flags);
	mc_put_le64(out + 16, h->req_id);
}

int mc_rpc_hdr_decode(const uint8_t *in, uint32_t max_body,
		      struct mc_rpc_hdr *h)
{
	if (mc_get_le32(in) != MC_RPC_MAGIC)
		return -EPROTO;
	h->version = in[4];
	h->kind = in[5];
	h->method = mc_get_le16(in + 6);
	h->length = mc_get_le32(in + 8);
	h->flags = mc_get_le32(in + 12);
	h->req_id = mc_get_le64(in + 16);
	if (h->version != MC_RPC_VERSION ||
	    (h->kind != MC_RPC_REQUEST && h->kind != MC_RPC_RESPONSE &&
	     h->kind != MC_RPC_AUTH))
		return -EPROTO;
	if (h->length > max_body)
		return -EMSGSIZE;
	return 0;
}

#define M(id_, name_, metric_, req_, resp_, batch_)                           \
	{                                                                     \
		.id = MCRPC__METHOD__##id_, .name = name_, .metric = metric_, \
		.req = &mcrpc__##req_##__descriptor,                          \
		.resp = &mcrpc__##resp_##__descriptor, .batch = batch_        \
	}

/* The checkpoint methods: CkptX, ckpt_x, CkptXRequest, CkptXResponse. */
#define CK(id_, name_, snake_)                                                \
	M(CKPT_##id_, "Ckpt" name_, "ckpt_" #snake_, ckpt_##snake_##_request, \
	  ckpt_##snake_##_response, false)

static const struct mc_rpc_method methods[] = {
	M(SERVICE_READY, "ServiceReady", "service_ready", service_ready_request,
	  service_ready_response, false),
	M(PING, "Ping", "ping", ping_request, ping_response, false),
	M(MOUNT_SEGMENT, "MountSegment", "mount_segment", mount_segment_request,
	  mount_segment_response, false),
	M(REMOUNT_SEGMENT, "ReMountSegment", "remount_segment",
	  re_mount_segment_request, re_mount_segment_response, false),
	M(UNMOUNT_SEGMENT, "UnmountSegment", "unmount_segment",
	  unmount_segment_request, unmount_segment_response, false),
	M(GET_STATUS, "GetStatus", "get_status", get_status_request,
	  get_status_response, false),
	M(PUT_START, "PutStart", "put_start", put_start_request,
	  put_start_response, false),
	M(PUT_END, "PutEnd", "put_end", keys_request, keys_response, false),
	M(PUT_REVOKE, "PutRevoke", "put_revoke", keys_request, keys_response,
	  false),
	M(BATCH_PUT_START, "BatchPutStart", "batch_put_start",
	  put_start_request, put_start_response, true),
	M(BATCH_PUT_END, "BatchPutEnd", "batch_put_end", keys_request,
	  keys_response, true),
	M(BATCH_PUT_REVOKE, "BatchPutRevoke", "batch_put_revoke", keys_request,
	  keys_response, true),
	M(PUT_COMMIT, "PutCommit", "put_commit", put_commit_request,
	  put_commit_response, false),
	M(GET_REPLICA_LIST, "GetReplicaList", "get_replica_list", keys_request,
	  get_replica_list_response, false),
	M(BATCH_GET_REPLICA_LIST, "BatchGetReplicaList",
	  "batch_get_replica_list", keys_request, get_replica_list_response,
	  true),
	M(EXIST_KEY, "ExistKey", "exist_key", keys_request, exist_response,
	  false),
	M(BATCH_EXIST_KEY, "BatchExistKey", "batch_exist_key", keys_request,
	  exist_response, true),
	M(GET_SIZE, "GetSize", "get_size", keys_request, get_size_response,
	  true),
	M(REMOVE, "Remove", "remove", keys_request, keys_response, false),
	M(BATCH_REMOVE, "BatchRemove", "batch_remove", keys_request,
	  keys_response, true),
	M(REMOVE_ALL, "RemoveAll", "remove_all", remove_all_request,
	  count_response, false),
	M(REMOVE_BY_REGEX, "RemoveByRegex", "remove_by_regex",
	  remove_all_request, count_response, false),
	M(STAT, "Stat", "stat", keys_request, stat_response, false),
	M(LIST, "List", "list", list_request, list_response, false),
	M(LEASE_RENEW, "LeaseRenew", "lease_renew", lease_request,
	  keys_response, true),
	M(LEASE_RELEASE, "LeaseRelease", "lease_release", lease_request,
	  keys_response, true),
	M(RENAME, "Rename", "rename", rename_request, keys_response, false),
	M(WATCH, "Watch", "watch", watch_request, watch_response, false),
	M(SET_ATTR, "SetAttr", "set_attr", set_attr_request, stat_response,
	  false),
	M(MKDIR, "Mkdir", "mkdir", mkdir_request, keys_response, false),
	M(RMDIR, "Rmdir", "rmdir", keys_request, keys_response, false),
	CK(CREATE, "Create", create),
	CK(LIST, "List", list),
	CK(INFO, "Info", info),
	CK(REMOVE, "Remove", remove),
	CK(HOLD, "Hold", hold),
	CK(SOURCE, "Source", source),
	CK(DONE, "Done", done),
	CK(READ, "Read", read), /* between peers: the master answers -1012 */
	/* between masters: a leader answers -1012 */
	M(HA_APPEND, "HaAppend", "ha_append", ha_append_request,
	  ha_append_response, false),
};

#define N_METHODS (sizeof(methods) / sizeof(methods[0]))

const struct mc_rpc_method *mc_rpc_method(uint16_t id)
{
	for (size_t i = 0; i < N_METHODS; i++)
		if (methods[i].id == id)
			return &methods[i];
	return NULL;
}

size_t mc_rpc_method_count(void)
{
	return N_METHODS;
}

const struct mc_rpc_method *mc_rpc_method_at(size_t i)
{
	return i < N_METHODS ? &methods[i] : NULL;
}

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t byte = *(*p)++;
		*v |= (uint64_t)(byte & 0x7f) << shift;
		if (!(byte & 0x80))
			return true;
	}
	return false;
}

/* depth: nesting left; a message nested deeper is left to unpack. */
static bool strings_ok(const ProtobufCMessageDescriptor *d, const uint8_t *p,
		       const uint8_t *end, int depth)
{
	while (p < end) {
		const ProtobufCFieldDescriptor *f;
		uint64_t key, n;

		if (!varint(&p, end, &key))
			return true; /* malformed: unpack refuses it */
		switch (key & 7) {
		case 0:
			if (!varint(&p, end, &n))
				return true;
			continue;
		case 1:
			n = 8;
			break;
		case 5:
			n = 4;
			break;
		case 2:
			if (!varint(&p, end, &n))
				return true;
			break;
		default:
			return true;
		}
		if (n > (uint64_t)(end - p))
			return true;
		f = (key & 7) == 2 && key >> 3 <= INT32_MAX ?
			    protobuf_c_message_descriptor_get_field(
				    d, (unsigned)(key >> 3)) :
			    NULL;
		if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, n))
			return false;
		if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && depth > 0 &&
		    !strings_ok(f->descriptor, p, p + n, depth - 1))
			return false;
		p += n;
	}
	return true;
}

bool mc_rpc_strings_ok(const ProtobufCMessageDescriptor *d, const uint8_t *body,
		       size_t len)
{
	return strings_ok(d, body, body + len, 16);
}

ProtobufCMessage *mc_rpc_unpack(const ProtobufCMessageDescriptor *d,
				const uint8_t *body, size_t len)
{
	return protobuf_c_message_unpack(d, NULL, len, body);
}

int mc_rpc_pack_frame(const struct mc_rpc_hdr *h, const ProtobufCMessage *msg,
		      uint8_t **out, size_t *out_len)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	struct mc_rpc_hdr hh = *h;
	uint8_t *buf;

	if (len > MC_RPC_MAX_BODY)
		return -EMSGSIZE;
	buf = malloc(MC_RPC_HDR_LEN + len + 1);
	if (!buf)
		return -ENOMEM;
	hh.length = (uint32_t)len;
	mc_rpc_hdr_encode(&hh, buf);
	protobuf_c_message_pack(msg, buf + MC_RPC_HDR_LEN);
	*out = buf;
	*out_len = MC_RPC_HDR_LEN + len;
	return 0;
}

int mc_rpc_pack_code(const struct mc_rpc_hdr *h, int32_t code, uint32_t flags,
		     uint8_t **frame, size_t *len)
{
	struct mc_rpc_hdr rh = *h;
	uint8_t body[11] = { 0x08 }; /* field 1, varint */
	uint64_t v = (uint64_t)(int64_t)code; /* int32: sign-extended */
	size_t n = 1;
	uint8_t *f;

	do {
		body[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	f = malloc(MC_RPC_HDR_LEN + n);
	if (!f)
		return -ENOMEM;
	rh.kind = MC_RPC_RESPONSE;
	rh.length = (uint32_t)n;
	rh.flags = flags;
	mc_rpc_hdr_encode(&rh, f);
	memcpy(f + MC_RPC_HDR_LEN, body, n);
	*frame = f;
	*len = MC_RPC_HDR_LEN + n;
	return 0;
}

int32_t mc_rpc_resp_code(const ProtobufCMessage *resp)
{
	const ProtobufCFieldDescriptor *f;

	f = protobuf_c_message_descriptor_get_field(resp->descriptor, 1);
	if (!f || f->type != PROTOBUF_C_TYPE_INT32)
		return MC_STORE_INTERNAL_ERROR;
	return *(const int32_t *)((const char *)resp + f->offset);
}
