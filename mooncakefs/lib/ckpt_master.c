/* SPDX-License-Identifier: Apache-2.0 */
/* The master's checkpoint methods, typed (ckpt_master.h). */
#include <errno.h>
#include <string.h>

#include "ckpt_master.h"

static ProtobufCBinaryData my_id(struct mcs_master *m)
{
	return (ProtobufCBinaryData){ .len = MCS_CLIENT_ID_LEN,
				      .data = (uint8_t *)mcs_master_client_id(
					      m) };
}

/* Methods whose answer is only a code. */
static int code_call(struct mcs_master *m, uint16_t method, const void *req)
{
	ProtobufCMessage *resp = NULL;
	int rc = mcs_master_call(m, method, req, &resp);

	mcs_master_free(resp);
	return rc;
}

int mcs_ckpt_create(struct mcs_master *m, const Mcrpc__Ckpt *ck,
		    const char *endpoint, bool replace, uint64_t *id)
{
	Mcrpc__CkptCreateRequest req = MCRPC__CKPT_CREATE_REQUEST__INIT;
	Mcrpc__CkptCreateResponse *resp = NULL;
	int rc;

	req.client_id = my_id(m);
	req.ckpt = (Mcrpc__Ckpt *)ck;
	req.endpoint = (char *)(endpoint ? endpoint : "");
	req.replace = replace;
	rc = mcs_master_call(m, MCRPC__METHOD__CKPT_CREATE, &req, &resp);
	if (!rc && id)
		*id = resp->id;
	mcs_master_free(resp);
	return rc;
}

int mcs_ckpt_list(struct mcs_master *m, const char *prefix,
		  const char *start_after, unsigned limit,
		  Mcrpc__CkptListResponse **out)
{
	Mcrpc__CkptListRequest req = MCRPC__CKPT_LIST_REQUEST__INIT;

	*out = NULL;
	req.prefix = (char *)(prefix ? prefix : "");
	req.start_after = (char *)(start_after ? start_after : "");
	req.limit = limit;
	return mcs_master_call(m, MCRPC__METHOD__CKPT_LIST, &req, out);
}

int mcs_ckpt_info(struct mcs_master *m, const char *name, uint64_t id,
		  bool holders, Mcrpc__CkptInfoResponse **out)
{
	Mcrpc__CkptInfoRequest req = MCRPC__CKPT_INFO_REQUEST__INIT;

	*out = NULL;
	req.name = (char *)(name ? name : "");
	req.id = id;
	req.holders = holders;
	return mcs_master_call(m, MCRPC__METHOD__CKPT_INFO, &req, out);
}

int mcs_ckpt_remove(struct mcs_master *m, const char *name)
{
	Mcrpc__CkptRemoveRequest req = MCRPC__CKPT_REMOVE_REQUEST__INIT;

	req.client_id = my_id(m);
	req.name = (char *)name;
	return code_call(m, MCRPC__METHOD__CKPT_REMOVE, &req);
}

int mcs_ckpt_hold(struct mcs_master *m, uint64_t id, const char *endpoint,
		  const uint8_t *bitmap, size_t len, bool drop)
{
	Mcrpc__CkptHoldRequest req = MCRPC__CKPT_HOLD_REQUEST__INIT;

	req.client_id = my_id(m);
	req.id = id;
	req.endpoint = (char *)(endpoint ? endpoint : "");
	req.bitmap.data = (uint8_t *)bitmap;
	req.bitmap.len = len;
	req.drop = drop;
	return code_call(m, MCRPC__METHOD__CKPT_HOLD, &req);
}

int mcs_ckpt_source(struct mcs_master *m, uint64_t id, int64_t shard,
		    const uint8_t *have, size_t have_len,
		    const char *const *exclude, size_t n_exclude,
		    Mcrpc__CkptSourceResponse **out)
{
	Mcrpc__CkptSourceRequest req = MCRPC__CKPT_SOURCE_REQUEST__INIT;

	*out = NULL;
	if (shard > UINT32_MAX)
		return -EINVAL;
	req.client_id = my_id(m);
	req.id = id;
	req.any = shard < 0;
	req.shard = shard < 0 ? 0 : (uint32_t)shard;
	req.have.data = (uint8_t *)have;
	req.have.len = have ? have_len : 0;
	req.exclude = (char **)exclude;
	req.n_exclude = exclude ? n_exclude : 0;
	return mcs_master_call(m, MCRPC__METHOD__CKPT_SOURCE, &req, out);
}

int mcs_ckpt_done(struct mcs_master *m, uint64_t id, uint32_t shard,
		  const uint8_t *holder, int result, uint64_t bytes,
		  const char *hold_endpoint)
{
	Mcrpc__CkptDoneRequest req = MCRPC__CKPT_DONE_REQUEST__INIT;

	req.client_id = my_id(m);
	req.id = id;
	req.shard = shard;
	req.holder.data = (uint8_t *)holder;
	req.holder.len = holder ? MCS_CLIENT_ID_LEN : 0;
	req.result = result;
	req.bytes = bytes;
	req.hold_endpoint = (char *)(hold_endpoint ? hold_endpoint : "");
	return code_call(m, MCRPC__METHOD__CKPT_DONE, &req);
}
