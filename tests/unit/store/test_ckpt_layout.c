/* SPDX-License-Identifier: Apache-2.0 */
/* Checkpoint layouts and checksums on the client (ckpt_layout.c,
 * mc_crc32c.c): the shard of every byte, names and paths a client refuses
 * to write under, and CRC-32C's known values on both implementations. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mc_crc32c.h"
#include "ckpt_layout.h"

Test(ckpt_crc, known_values)
{
	static const uint8_t zeros[32];
	uint8_t ones[32];

	memset(ones, 0xff, sizeof(ones));
	/* RFC 3720 B.4 and the usual check value. */
	cr_assert_eq(mc_crc32c(0, "123456789", 9), 0xE3069283u);
	cr_assert_eq(mc_crc32c(0, zeros, 32), 0x8A9136AAu);
	cr_assert_eq(mc_crc32c(0, ones, 32), 0x62A8AB43u);
	cr_assert_eq(mc_crc32c(0, "", 0), 0u);
}

Test(ckpt_crc, any_split_and_alignment)
{
	uint8_t *buf = malloc(70000 + 8);
	uint32_t whole;

	for (size_t i = 0; i < 70008; i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	whole = mc_crc32c(0, buf, 70000);
	cr_assert_eq(mc_crc32c_table(0, buf, 70000), whole);
	cr_assert_eq(mc_crc32c_table(0, "123456789", 9), 0xE3069283u);
	for (size_t cut = 0; cut < 70000; cut += 4099)
		cr_assert_eq(mc_crc32c(mc_crc32c(0, buf, cut), buf + cut,
				       70000 - cut),
			     whole);
	/* Unaligned starts agree with a copy at an aligned one. */
	for (size_t a = 1; a < 8; a++) {
		uint8_t *copy = malloc(1000);
		memcpy(copy, buf + a, 1000);
		cr_assert_eq(mc_crc32c(0, buf + a, 1000),
			     mc_crc32c(0, copy, 1000));
		free(copy);
	}
	free(buf);
}

Test(ckpt_layout, names_and_paths)
{
	cr_assert(mc_ckpt_name_ok("llama-8b"));
	cr_assert(mc_ckpt_name_ok(".staging"));
	cr_assert_not(mc_ckpt_name_ok(""));
	cr_assert_not(mc_ckpt_name_ok("."));
	cr_assert_not(mc_ckpt_name_ok(".."));
	cr_assert_not(mc_ckpt_name_ok("a/b"));
	cr_assert(mc_ckpt_path_ok("a/b/c.bin"));
	cr_assert(mc_ckpt_path_ok("..a/b.."));
	cr_assert_not(mc_ckpt_path_ok("../etc/passwd"));
	cr_assert_not(mc_ckpt_path_ok("a/../../x"));
	cr_assert_not(mc_ckpt_path_ok("/abs"));
	cr_assert_not(mc_ckpt_path_ok("a//b"));
	cr_assert_not(mc_ckpt_path_ok("a/"));
	cr_assert_not(mc_ckpt_path_ok("./a"));
	cr_assert_not(mc_ckpt_path_ok(""));
}

static Mcrpc__CkptFile file(const char *path, uint32_t mode, uint64_t size)
{
	Mcrpc__CkptFile f = MCRPC__CKPT_FILE__INIT;

	f.path = (char *)path;
	f.mode = mode;
	f.size = size;
	return f;
}

Test(ckpt_layout, shards_of_every_byte)
{
	Mcrpc__CkptFile f[4] = {
		file("a", S_IFREG | 0644, 3 * 65536 + 1),
		file("d", S_IFDIR | 0755, 0),
		file("d/empty", S_IFREG | 0644, 0),
		file("d/b", S_IFREG | 0644, 65536),
	};
	Mcrpc__CkptFile *fp[4] = { &f[0], &f[1], &f[2], &f[3] };
	uint32_t crcs[5] = { 1, 2, 3, 4, 5 };
	Mcrpc__Ckpt ck = MCRPC__CKPT__INIT;
	struct mcs_ckpt_layout *l;

	ck.id = 9;
	ck.name = "m";
	ck.shard_size = 65536;
	ck.files = fp;
	ck.n_files = 4;
	ck.crcs = crcs;
	ck.n_crcs = 5;
	cr_assert_eq(mcs_ckpt_layout_from(&ck, &l), 0);
	cr_assert_eq(l->nshards, 5);
	cr_assert_eq(l->total, 4 * 65536 + 1);
	cr_assert_eq(l->shards[3].file, 0);
	cr_assert_eq(l->shards[3].off, 3 * 65536);
	cr_assert_eq(l->shards[3].len, 1);
	cr_assert_eq(l->shards[4].file, 3);
	cr_assert_eq(l->shards[4].len, 65536);
	cr_assert_eq(l->files[3].first_shard, 4);
	cr_assert_eq(l->files[2].nshards, 0);
	cr_assert_eq(mcs_ckpt_layout_find(l, "d/b"), 3);
	cr_assert_eq(mcs_ckpt_layout_find(l, "nope"), -1);
	mcs_ckpt_layout_free(l);

	/* A checksum too few or too many, a path that climbs out, a device
	 * node, a shard size out of range: the record is refused. */
	ck.n_crcs = 4;
	cr_assert_eq(mcs_ckpt_layout_from(&ck, &l), -EPROTO);
	ck.n_crcs = 5;
	f[2].path = "d/../../x";
	cr_assert_eq(mcs_ckpt_layout_from(&ck, &l), -EPROTO);
	f[2].path = "d/empty";
	f[1].mode = S_IFCHR | 0600;
	cr_assert_eq(mcs_ckpt_layout_from(&ck, &l), -EPROTO);
	f[1].mode = S_IFDIR | 0755;
	ck.shard_size = 4096;
	cr_assert_eq(mcs_ckpt_layout_from(&ck, &l), -EPROTO);
	ck.shard_size = 65536;
	cr_assert_eq(mcs_ckpt_layout_from(&ck, &l), 0);
	mcs_ckpt_layout_free(l);
}

Test(ckpt_layout, a_link_has_no_files)
{
	Mcrpc__CkptFile f = file("x", S_IFREG | 0644, 10);
	Mcrpc__CkptFile *fp[1] = { &f };
	uint32_t crcs[1] = { 1 };
	Mcrpc__Ckpt ck = MCRPC__CKPT__INIT;
	struct mcs_ckpt_layout *l;

	/* Found by fuzz_ckpt: a link record with files divided by its
	 * shard size of 0. */
	ck.name = "latest";
	ck.link = "v1";
	cr_assert_eq(mcs_ckpt_layout_from(&ck, &l), 0);
	cr_assert_str_eq(l->link, "v1");
	mcs_ckpt_layout_free(l);
	ck.files = fp;
	ck.n_files = 1;
	ck.crcs = crcs;
	ck.n_crcs = 1;
	cr_assert_eq(mcs_ckpt_layout_from(&ck, &l), -EPROTO);
}
