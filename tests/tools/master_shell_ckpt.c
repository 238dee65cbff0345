/* SPDX-License-Identifier: Apache-2.0 */
/*
 * master_shell's checkpoint commands (ckpt_master.h), and acting as
 * another client. HEX: bytes as hex digits, "-" none; bitmaps: bit i is
 * (byte i/8 >> i%8) & 1.
 *   client HEXID                  -> ok   (this shell is now that client)
 *   ping                          -> ok status=1|2
 *   join                          -> ok   (ReMountSegment with no segment:
 *                                    registers as a client, as setup does)
 *   leave                         -> ok
 *   ckpt-create NAME SHARD_SIZE[/NCRCS] ENTRY[,ENTRY...] [ENDPOINT]
 *                                 -> ok ID
 *        ENTRY: PATH:SIZE (regular), PATH:dir, PATH:>TARGET (symlink);
 *        crc of shard i is i; NCRCS sends that many crcs instead
 *   ckpt-link NAME TARGET [replace] -> ok ID
 *   ckpt-ls PREFIX START LIMIT    -> ok N truncated=0|1 NAME:ID:SHARDS:HOLDERS:LOST[:>LINK] ...
 *   ckpt-info NAME|#ID            -> ok id=I shards=S size=T nfiles=F
 *        holders=H lost=L shard_size=Z link=X publisher=HEX
 *        files=PATH:MODE:SIZE:FIRST,... crcs=C,...
 *        holder=HEX@ENDPOINT:pub=0|1:shards=N:bitmap=HEX:active=A:served=B ...
 *   ckpt-rm NAME                  -> ok
 *   ckpt-hold ID ENDPOINT HEXBITMAP [drop] -> ok
 *   ckpt-source ID SHARD|any [HEXHAVE [EXCLUDE...]]
 *                                 -> ok shard=S endpoint=E holder=HEX
 *                                    | ok done | ok retry=MS
 *   ckpt-done ID SHARD HOLDERHEX RESULT BYTES [HOLD_ENDPOINT] -> ok
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_master.h"
#include "master_shell.h"

/* hex digits to bytes in out[cap]: the count, or -1. */
static long unhex(const char *s, uint8_t *out, size_t cap)
{
	size_t n = strlen(shell_arg(s)) / 2;

	if (!*shell_arg(s))
		return 0;
	if (strlen(s) % 2 || n > cap)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	return (long)n;
}

static void print_hex(const uint8_t *b, size_t n)
{
	if (!n)
		putchar('-');
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
}

static void ok_id(int rc, uint64_t id)
{
	if (rc)
		shell_err(rc);
	else
		printf("ok %" PRIu64 "\n", id);
}

static void ok_plain(int rc)
{
	if (rc)
		shell_err(rc);
	else
		puts("ok");
}

static void do_create(struct mcs_master *m, char **a, int n)
{
	Mcrpc__Ckpt ck = MCRPC__CKPT__INIT;
	char *spec = strdup(a[3]), *save = NULL, *slash;
	size_t cap = 1, nf = 0;
	uint64_t ss = strtoull(a[2], &slash, 10), shards = 0, id = 0;
	Mcrpc__CkptFile *files, **fp;
	long ncrcs = -1;
	int rc;

	for (const char *c = a[3]; *c; c++)
		cap += *c == ',';
	files = calloc(cap, sizeof(*files));
	fp = calloc(cap, sizeof(*fp));
	if (*slash == '/')
		ncrcs = strtol(slash + 1, NULL, 10);
	for (char *t = strtok_r(strcmp(spec, "-") ? spec : NULL, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		Mcrpc__CkptFile *f = &files[nf];
		char *colon = strrchr(t, ':');
		mcrpc__ckpt_file__init(f);
		if (colon)
			*colon++ = 0;
		f->path = t;
		if (colon && !strcmp(colon, "dir")) {
			f->mode = S_IFDIR | 0755;
		} else if (colon && *colon == '>') {
			f->mode = S_IFLNK | 0777;
			f->link = colon + 1;
		} else {
			uint64_t eff = ss ? ss : 64ull << 20;
			f->mode = S_IFREG | 0644;
			f->size = colon ? strtoull(colon, NULL, 10) : 0;
			shards += (f->size + eff - 1) / eff;
		}
		fp[nf++] = f;
	}
	ck.name = (char *)shell_arg(a[1]);
	ck.shard_size = ss;
	ck.n_files = nf;
	ck.files = fp;
	ck.n_crcs = ncrcs >= 0 ? (size_t)ncrcs : shards;
	ck.crcs = calloc(ck.n_crcs + 1, sizeof(uint32_t));
	for (size_t i = 0; i < ck.n_crcs; i++)
		ck.crcs[i] = (uint32_t)i;
	rc = mcs_ckpt_create(m, &ck, n > 4 ? shell_arg(a[4]) : NULL, false,
			     &id);
	ok_id(rc, id);
	free(ck.crcs);
	free(files);
	free(fp);
	free(spec);
}

static void do_link(struct mcs_master *m, char **a, int n)
{
	Mcrpc__Ckpt ck = MCRPC__CKPT__INIT;
	uint64_t id = 0;
	int rc;

	ck.name = (char *)shell_arg(a[1]);
	ck.link = (char *)shell_arg(a[2]);
	rc = mcs_ckpt_create(m, &ck, NULL, n > 3 && !strcmp(a[3], "replace"),
			     &id);
	ok_id(rc, id);
}

static void print_ckpt_head(const Mcrpc__Ckpt *c)
{
	printf(" id=%" PRIu64 " shards=%u size=%" PRIu64
	       " nfiles=%u holders=%u lost=%u shard_size=%" PRIu64
	       " link=%s publisher=",
	       c->id, c->shards, c->total_size, c->nfiles, c->holders,
	       c->lost_shards, c->shard_size, *c->link ? c->link : "-");
	print_hex(c->publisher.data, c->publisher.len);
}

static void do_ls(struct mcs_master *m, char **a)
{
	Mcrpc__CkptListResponse *r;
	int rc = mcs_ckpt_list(m, shell_arg(a[1]), shell_arg(a[2]),
			       (unsigned)strtoul(a[3], NULL, 10), &r);

	if (rc) {
		shell_err(rc);
		return;
	}
	printf("ok %zu truncated=%d", r->n_ckpts, r->truncated ? 1 : 0);
	for (size_t i = 0; i < r->n_ckpts; i++) {
		const Mcrpc__Ckpt *c = r->ckpts[i];
		printf(" %s:%" PRIu64 ":%u:%u:%u", c->name, c->id, c->shards,
		       c->holders, c->lost_shards);
		if (*c->link)
			printf(":>%s", c->link);
	}
	putchar('\n');
	mcs_master_free(r);
}

static void do_info(struct mcs_master *m, const char *what)
{
	Mcrpc__CkptInfoResponse *r;
	bool by_id = what[0] == '#';
	int rc = mcs_ckpt_info(m, by_id ? NULL : what,
			       by_id ? strtoull(what + 1, NULL, 10) : 0, true,
			       &r);
	const Mcrpc__Ckpt *c;

	if (rc) {
		shell_err(rc);
		return;
	}
	c = r->ckpt;
	printf("ok");
	print_ckpt_head(c);
	printf(" files=");
	for (size_t i = 0; i < c->n_files; i++)
		printf("%s%s:%o:%" PRIu64 ":%u", i ? "," : "",
		       c->files[i]->path, c->files[i]->mode, c->files[i]->size,
		       c->files[i]->first_shard);
	printf(" crcs=");
	for (size_t i = 0; i < c->n_crcs; i++)
		printf("%s%u", i ? "," : "", c->crcs[i]);
	for (size_t i = 0; i < c->n_holder_list; i++) {
		const Mcrpc__CkptHolder *h = c->holder_list[i];
		printf(" holder=");
		print_hex(h->client_id.data, h->client_id.len);
		printf("@%s:pub=%d:shards=%u:bitmap=", h->endpoint,
		       h->publisher ? 1 : 0, h->shards);
		print_hex(h->bitmap.data, h->bitmap.len);
		printf(":active=%u:served=%" PRIu64, h->active,
		       h->served_bytes);
	}
	putchar('\n');
	mcs_master_free(r);
}

static void do_hold(struct mcs_master *m, char **a, int n)
{
	uint8_t bm[4096];
	long len = unhex(a[3], bm, sizeof(bm));

	if (len < 0) {
		puts("err -600 bad hex");
		return;
	}
	ok_plain(mcs_ckpt_hold(m, strtoull(a[1], NULL, 10), shell_arg(a[2]), bm,
			       (size_t)len, n > 4 && !strcmp(a[4], "drop")));
}

static void do_source(struct mcs_master *m, char **a, int n)
{
	Mcrpc__CkptSourceResponse *r;
	uint8_t have[4096];
	long len = n > 3 ? unhex(a[3], have, sizeof(have)) : 0;
	bool any = !strcmp(a[2], "any");
	int rc;

	if (len < 0) {
		puts("err -600 bad hex");
		return;
	}
	rc = mcs_ckpt_source(m, strtoull(a[1], NULL, 10),
			     any ? -1 : (int64_t)strtoull(a[2], NULL, 10), have,
			     (size_t)len, (const char *const *)a + 4,
			     n > 4 ? (size_t)(n - 4) : 0, &r);
	if (rc) {
		shell_err(rc);
		return;
	}
	if (r->done)
		puts("ok done");
	else if (r->retry_ms)
		printf("ok retry=%u\n", r->retry_ms);
	else {
		printf("ok shard=%u endpoint=%s holder=", r->shard,
		       r->endpoint);
		print_hex(r->holder.data, r->holder.len);
		putchar('\n');
	}
	mcs_master_free(r);
}

static void do_done(struct mcs_master *m, char **a, int n)
{
	uint8_t holder[MCS_CLIENT_ID_LEN];

	if (unhex(a[3], holder, sizeof(holder)) != MCS_CLIENT_ID_LEN) {
		puts("err -600 bad holder");
		return;
	}
	ok_plain(mcs_ckpt_done(m, strtoull(a[1], NULL, 10),
			       (uint32_t)strtoul(a[2], NULL, 10), holder,
			       atoi(a[4]), strtoull(a[5], NULL, 10),
			       n > 6 ? shell_arg(a[6]) : NULL));
}

static void do_client(struct mcs_master **m, const char *addr, const char *hex)
{
	uint8_t id[MCS_CLIENT_ID_LEN];
	struct mcs_master *nm;

	if (unhex(hex, id, sizeof(id)) != MCS_CLIENT_ID_LEN ||
	    mcs_master_create(addr, 40000, id, &nm)) {
		puts("err -600 bad client id");
		return;
	}
	mcs_master_destroy(*m);
	*m = nm;
	puts("ok");
}

int shell_ckpt(struct mcs_master **m, const char *addr, char **a, int n)
{
	const char *c = a[0];
	int status = 0;

	if (!strcmp(c, "client") && n == 2)
		do_client(m, addr, a[1]);
	else if (!strcmp(c, "ping") && n == 1) {
		int rc = mcs_master_ping(*m, &status, NULL, NULL);
		if (rc)
			shell_err(rc);
		else
			printf("ok status=%d\n", status);
	} else if (!strcmp(c, "join") && n == 1) {
		Mcrpc__ReMountSegmentResponse *r = NULL;
		int rc = mcs_master_remount(*m, NULL, 0, &r);
		mcs_master_free(r);
		ok_plain(rc);
	} else if (!strcmp(c, "leave") && n == 1)
		ok_plain(mcs_master_leave(*m));
	else if (!strcmp(c, "ckpt-create") && (n == 4 || n == 5))
		do_create(*m, a, n);
	else if (!strcmp(c, "ckpt-link") && (n == 3 || n == 4))
		do_link(*m, a, n);
	else if (!strcmp(c, "ckpt-ls") && n == 4)
		do_ls(*m, a);
	else if (!strcmp(c, "ckpt-info") && n == 2)
		do_info(*m, a[1]);
	else if (!strcmp(c, "ckpt-rm") && n == 2)
		ok_plain(mcs_ckpt_remove(*m, a[1]));
	else if (!strcmp(c, "ckpt-hold") && (n == 4 || n == 5))
		do_hold(*m, a, n);
	else if (!strcmp(c, "ckpt-source") && n >= 3)
		do_source(*m, a, n);
	else if (!strcmp(c, "ckpt-done") && (n == 6 || n == 7))
		do_done(*m, a, n);
	else
		return 0;
	return 1;
}
