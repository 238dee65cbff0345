/* SPDX-License-Identifier: Apache-2.0 */
/* Filesystem attributes to and from their message (mc_rpc.h). */
#include "mc_rpc.h"

void mc_rpc_attr_msg(const mooncake_fs_attr_t *a, Mcrpc__Attr *x)
{
	mcrpc__attr__init(x);
	x->mode = a->mode;
	x->uid = a->uid;
	x->gid = a->gid;
	x->flags = a->flags;
	x->atime_ns = a->atime_ns;
	x->mtime_ns = a->mtime_ns;
	x->ctime_ns = a->ctime_ns;
}

mooncake_fs_attr_t mc_rpc_attr_of(const Mcrpc__Attr *x)
{
	if (!x)
		return (mooncake_fs_attr_t){ 0 };
	return (mooncake_fs_attr_t){
		.mode = x->mode,
		.uid = x->uid,
		.gid = x->gid,
		.flags = x->flags,
		.atime_ns = x->atime_ns,
		.mtime_ns = x->mtime_ns,
		.ctime_ns = x->ctime_ns,
	};
}
