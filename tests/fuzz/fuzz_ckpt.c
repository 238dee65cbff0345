/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for what a checkpoint client takes from the network
 * (mooncakefs/lib/ckpt_serve.c, ckpt_layout.c): the first byte picks
 *   0  a CkptRead request body, answered by a holder's handler serving a
 *      checkpoint from memory (any peer can send one);
 *   1  a CkptInfo answer, turned into a layout (what a reader writes
 *      files under, so paths and sizes must hold).
 * Checks: the handler answers with a decodable frame (or refuses the
 * body); a successful read carries exactly the bytes asked for, equal to
 * the served memory; a layout that is accepted has every byte of every
 * regular file in exactly one shard of at most shard_size, checked paths,
 * and crcs for every shard.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mc_crc32c.h"
#include "ckpt_layout.h"
#include "ckpt_serve.h"
#include "fuzz_common.h"
#include "mc_log.h"
#include "mc_rpc.h"

#define SHARD 65536u
static uint8_t file_a[200000], file_b[70000];
static struct mcs_ckpt_srv *srv;

static void serve_memory(void)
{
	Mcrpc__CkptFile fa = MCRPC__CKPT_FILE__INIT,
			fb = MCRPC__CKPT_FILE__INIT;
	Mcrpc__CkptFile *fp[2] = { &fa, &fb };
	Mcrpc__Ckpt ck = MCRPC__CKPT__INIT;
	uint32_t crcs[6];
	struct mcs_ckpt_layout *lay;
	struct mcs_ckpt_served *sv;
	struct mcs_ckpt_srv_cfg cfg = { .host = "127.0.0.1" };
	char err[256];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(file_a); i++)
		file_a[i] = (uint8_t)(i * 131 + 7);
	for (size_t i = 0; i < sizeof(file_b); i++)
		file_b[i] = (uint8_t)(i * 7 + 1);
	fa.path = "a";
	fa.mode = S_IFREG | 0644;
	fa.size = sizeof(file_a);
	fb.path = "d/b";
	fb.mode = S_IFREG | 0644;
	fb.size = sizeof(file_b);
	for (size_t off = 0; off < sizeof(file_a); off += SHARD)
		crcs[n++] = mc_crc32c(0, file_a + off,
				      sizeof(file_a) - off < SHARD ?
					      sizeof(file_a) - off :
					      SHARD);
	for (size_t off = 0; off < sizeof(file_b); off += SHARD)
		crcs[n++] = mc_crc32c(0, file_b + off,
				      sizeof(file_b) - off < SHARD ?
					      sizeof(file_b) - off :
					      SHARD);
	ck.id = 7;
	ck.name = "m";
	ck.shard_size = SHARD;
	ck.files = fp;
	ck.n_files = 2;
	ck.crcs = crcs;
	ck.n_crcs = n;
	if (mcs_ckpt_layout_from(&ck, &lay) ||
	    mcs_ckpt_srv_start(&cfg, &srv, err, sizeof(err)))
		abort();
	sv = mcs_ckpt_served_new(lay, NULL, false);
	if (!sv)
		abort();
	sv->mem[0] = file_a;
	sv->mem[1] = file_b;
	for (uint32_t i = 0; i < lay->nshards; i++)
		mcs_ckpt_served_mark(sv, i, false);
	if (mcs_ckpt_srv_add(srv, sv))
		abort();
	mcs_ckpt_served_put(sv);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	mc_log_set_level(MC_LOG_ERROR);
	serve_memory();
	return 0;
}

static void read_request(const uint8_t *data, size_t size)
{
	struct mc_rpc_hdr h = { .version = MC_RPC_VERSION,
				.kind = MC_RPC_REQUEST,
				.method = MCRPC__METHOD__CKPT_READ,
				.length = (uint32_t)size,
				.req_id = 1 };
	Mcrpc__CkptReadRequest *q;
	Mcrpc__CkptReadResponse *r;
	struct mc_rpc_hdr rh;
	uint8_t *frame = NULL;
	size_t len = 0;
	int rc = mcs_ckpt_srv_handle(srv, &h, data, &frame, &len);

	FUZZ_CHECK(rc == 0 || rc == -EPROTO);
	if (rc)
		return;
	FUZZ_CHECK(frame && len >= MC_RPC_HDR_LEN);
	FUZZ_CHECK(!mc_rpc_hdr_decode(frame, MC_RPC_MAX_BODY, &rh));
	FUZZ_CHECK(rh.kind == MC_RPC_RESPONSE && rh.req_id == 1);
	r = (Mcrpc__CkptReadResponse *)mc_rpc_unpack(
		&mcrpc__ckpt_read_response__descriptor, frame + MC_RPC_HDR_LEN,
		rh.length);
	FUZZ_CHECK(r);
	q = (Mcrpc__CkptReadRequest *)mc_rpc_unpack(
		&mcrpc__ckpt_read_request__descriptor, data, size);
	FUZZ_CHECK(q);
	if (!r->code) {
		/* The bytes asked for, from the right file and offset. */
		const uint8_t *base = q->shard < 4 ? file_a : file_b;
		uint64_t at =
			(uint64_t)(q->shard < 4 ? q->shard : q->shard - 4) *
				SHARD +
			q->offset;
		FUZZ_CHECK(q->id == 7 && q->shard < 6);
		FUZZ_CHECK(r->data.len == q->length);
		FUZZ_CHECK(!q->length ||
			   !memcmp(r->data.data, base + at, q->length));
	}
	protobuf_c_message_free_unpacked(&q->base, NULL);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	free(frame);
}

static void info_answer(const uint8_t *data, size_t size)
{
	Mcrpc__CkptInfoResponse *r = (Mcrpc__CkptInfoResponse *)mc_rpc_unpack(
		&mcrpc__ckpt_info_response__descriptor, data, size);
	struct mcs_ckpt_layout *l;
	uint64_t total = 0;

	if (!r)
		return;
	if (r->ckpt && !mcs_ckpt_layout_from(r->ckpt, &l)) {
		FUZZ_CHECK(mc_ckpt_name_ok(l->name));
		for (size_t i = 0; i < l->nfiles; i++) {
			const struct mcs_ckpt_file *f = &l->files[i];
			uint64_t got = 0;
			FUZZ_CHECK(mc_ckpt_path_ok(f->path));
			for (uint32_t k = 0; k < f->nshards; k++) {
				const struct mcs_ckpt_shard *s =
					&l->shards[f->first_shard + k];
				FUZZ_CHECK(s->file == i && s->off == got);
				FUZZ_CHECK(s->len && s->len <= l->shard_size);
				got += s->len;
			}
			FUZZ_CHECK(got == f->size);
			total += f->size;
		}
		FUZZ_CHECK(total == l->total);
		mcs_ckpt_layout_free(l);
	}
	protobuf_c_message_free_unpacked(&r->base, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	if (data[0] == 0)
		read_request(data + 1, size - 1);
	else if (data[0] == 1)
		info_answer(data + 1, size - 1);
	return 0;
}
