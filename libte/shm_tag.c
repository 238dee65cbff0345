/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tag page of te_mem_alloc() files (te_int.h, "the tag page"): the
 * file's last 4 KiB, past the memory, hold TE_SHM_MAGIC and a random
 * secret drawn for the allocation. mem.c writes it; the shm transport
 * checks it before mapping a peer's file, against the descriptor's
 * mc_shm_tag (hex). One layout, written and read here only.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "mc_parse.h"
#include "te_int.h"

/* The tag page: TE_SHM_MAGIC, then the secret. */
struct tag_page {
	char magic[8];
	uint8_t secret[TE_SHM_TAG_BYTES];
};

/* A fresh secret into the page after len bytes, and its hex into tag. */
int te__shm_tag_write(int fd, uint64_t len, char tag[TE_SHM_TAG_HEX + 1])
{
	struct tag_page t;
	ssize_t n;

	memcpy(t.magic, TE_SHM_MAGIC, sizeof(t.magic));
	if (getrandom(t.secret, sizeof(t.secret), 0) != sizeof(t.secret))
		return -EIO;
	n = pwrite(fd, &t, sizeof(t), (off_t)len);

	if (n != (ssize_t)sizeof(t)) {
		explicit_bzero(&t, sizeof(t));
		return n < 0 ? -errno : -EIO;
	}
	mc_hex(t.secret, sizeof(t.secret), tag);
	explicit_bzero(&t, sizeof(t));
	return 0;
}

bool te__shm_tag_ok(int fd, uint64_t size, const char *tag)
{
	struct tag_page t;
	char hex[TE_SHM_TAG_HEX + 1];
	unsigned char diff = 0;
	bool ok;

	if (size < TE_SHM_TAG_PAGE || strlen(tag) != TE_SHM_TAG_HEX ||
	    pread(fd, &t, sizeof(t), (off_t)(size - TE_SHM_TAG_PAGE)) !=
		    (ssize_t)sizeof(t))
		return false;
	mc_hex(t.secret, sizeof(t.secret), hex);
	for (size_t i = 0; i < TE_SHM_TAG_HEX; i++)
		diff |= (unsigned char)(hex[i] ^ tag[i]);
	ok = !memcmp(t.magic, TE_SHM_MAGIC, sizeof(t.magic)) && !diff;
	explicit_bzero(&t, sizeof(t));
	explicit_bzero(hex, sizeof(hex));
	return ok;
}
