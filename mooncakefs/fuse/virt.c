/* SPDX-License-Identifier: Apache-2.0 */
/*
 * .mooncake/: read-only files generated when opened (a new text per open,
 * so their size is that of the open's text: direct I/O, never cached).
 *   stats     "name value" lines: this mount's counters and the pool's
 *   config    the mount's effective options (JSON)
 *   segments  the pool's segments: name endpoint size used objects state
 *   clients   the clients owning segments
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_auth.h"
#include "mc_cfg.h"
#include "mc_log.h"
#include "mc_parse.h"
#include "mc_rpc_client.h"
#include "mc_sbuf.h"
#include "mcfs.h"

static const char *const vfiles[] = { "stats", "config", "segments", "clients",
				      NULL };

int mcfs_rpc_client(const struct mcfs_opts *o, struct mc_rpc_client **out)
{
	char err[MC_ERR_LEN] = "";
	struct mc_auth_key key;
	bool have;
	int rc = mc_rpc_client_create(o->master, o->rpc_timeout_ms, out);

	if (rc) {
		mc_log_err("mooncakefs", "bad master address '%s'", o->master);
		return rc;
	}
	rc = mc_auth_key_load_opt(o->auth_token_file, &have, &key, err,
				  sizeof(err));
	if (rc) {
		mc_log_err("mooncakefs", "auth_token_file: %s", err);
		mc_rpc_client_destroy(*out);
		*out = NULL;
		return rc;
	}
	if (have)
		mc_rpc_client_set_auth(*out, &key);
	mc_auth_key_clear(&key);
	return 0;
}

static int status(struct mcfs *fs, Mcrpc__GetStatusResponse **out)
{
	Mcrpc__GetStatusRequest q = MCRPC__GET_STATUS_REQUEST__INIT;
	struct mc_rpc_client *c;
	int rc = mcfs_rpc_client(&fs->o, &c);

	if (rc)
		return -EIO;
	rc = mc_rpc_call(c, MCRPC__METHOD__GET_STATUS, &q.base,
			 (ProtobufCMessage **)out);
	mc_rpc_client_destroy(c);
	if (!rc && (*out)->code) {
		protobuf_c_message_free_unpacked(&(*out)->base, NULL);
		*out = NULL;
		rc = -EIO;
	}
	return rc ? -EIO : 0;
}

static void hex(const ProtobufCBinaryData *d, char *out)
{
	mc_hex(d->data, d->len > 16 ? 16 : d->len, out);
}

static int render(struct mcfs *fs, const char *name, char **text, size_t *len)
{
	struct mc_sbuf t = { 0 };
	Mcrpc__GetStatusResponse *st = NULL;
	int rc = 0;

	if (!strcmp(name, "config"))
		return mcfs_opts_json(&fs->o, text, len) ? -ENOMEM : 0;
	if (!strcmp(name, "stats")) {
		mooncake_pool_stat_t ps = { 0 };
		bool pool = !mcfs_wait_ready(fs) &&
			    !mooncake_store_pool_stat(fs->store, &ps);
		uint64_t ra_fetched, ra_hits, ra_failed, ra_starved;

		mcfs_ra_stats(fs->ra, &ra_fetched, &ra_hits, &ra_failed,
			      &ra_starved);
		mc_sbuf_printf(
			&t,
			"mount_reads %" PRIu64 "\nmount_read_bytes %" PRIu64
			"\nmount_writes %" PRIu64 "\nmount_write_bytes %" PRIu64
			"\nmount_lookups %" PRIu64
			"\nmount_invalidations %" PRIu64
			"\nmount_errors %" PRIu64 "\nmount_stale_opens %" PRIu64
			"\nmount_staged_bytes %" PRIu64
			"\nmount_feed_resets %" PRIu64
			"\nmount_getxattr_requests %" PRIu64
			"\nmount_readahead_chunks %" PRIu64
			"\nmount_readahead_hits %" PRIu64
			"\nmount_readahead_failed %" PRIu64
			"\nmount_readahead_starved %" PRIu64
			"\nmount_readahead_spliced %" PRIu64
			"\nmount_splice_reads %" PRIu64
			"\nmount_splice_fallbacks %" PRIu64 "\n",
			atomic_load(&fs->n_reads),
			atomic_load(&fs->n_read_bytes),
			atomic_load(&fs->n_writes),
			atomic_load(&fs->n_write_bytes),
			atomic_load(&fs->n_lookups),
			atomic_load(&fs->n_invalidations),
			atomic_load(&fs->n_errors), atomic_load(&fs->n_stale),
			atomic_load(&fs->stage_pool.held),
			atomic_load(&fs->n_feed_resets),
			atomic_load(&fs->n_getxattr), ra_fetched, ra_hits,
			ra_failed, ra_starved, mcfs_ra_spliced(fs->ra),
			atomic_load(&fs->n_splice_reads),
			atomic_load(&fs->splice.fallbacks));
		if (pool)
			mc_sbuf_printf(
				&t,
				"master_total_capacity_bytes %" PRIu64
				"\nmaster_allocated_bytes %" PRIu64
				"\nmaster_key_count %" PRIu64
				"\nmaster_active_clients %u\nmaster_segments %u"
				"\nmaster_largest_segment_bytes %" PRIu64 "\n",
				ps.capacity, ps.allocated, ps.keys, ps.clients,
				ps.segments, ps.largest_segment);
	} else {
		rc = status(fs, &st);
		if (rc)
			return rc;
		if (!strcmp(name, "segments")) {
			for (size_t i = 0; i < st->n_segments; i++) {
				Mcrpc__SegmentStatus *s = st->segments[i];
				mc_sbuf_printf(&t,
					       "%s %s %" PRIu64 " %" PRIu64
					       " %" PRIu64 " %s\n",
					       s->segment->name,
					       s->segment->endpoint,
					       s->segment->size, s->used,
					       s->objects,
					       s->mounted ? "mounted" :
							    "awaiting-owner");
			}
		} else {
			mc_sbuf_printf(&t, "clients %u\n", st->clients);
			for (size_t i = 0; i < st->n_segments; i++) {
				char id[33];
				hex(&st->segments[i]->client_id, id);
				if (*id)
					mc_sbuf_printf(
						&t, "%s %s\n", id,
						st->segments[i]->segment->name);
			}
		}
		protobuf_c_message_free_unpacked(&st->base, NULL);
	}
	if (t.oom) {
		free(t.p);
		return -ENOMEM;
	}
	if (!t.p)
		t.p = strdup("");
	*text = t.p;
	*len = t.len;
	return t.p ? 0 : -ENOMEM;
}

int mcfs_virt_lookup(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		     struct mcfs_node **out)
{
	*out = NULL;
	for (int i = 0; vfiles[i]; i++)
		if (!strcmp(name, vfiles[i])) {
			*out = mcfs_node_child(fs, dir, name, MCFS_VFILE, name,
					       0, 0, 0, NULL);
			return *out ? 0 : -ENOMEM;
		}
	return 0;
}

int mcfs_virt_list(struct mcfs *fs, struct mcfs_node *dir,
		   struct mcfs_dirlist *d)
{
	int rc = 0;

	(void)fs;
	(void)dir;
	for (int i = 0; !rc && vfiles[i]; i++)
		rc = mcfs_dirent_add(d, vfiles[i], vfiles[i], MCFS_VFILE, 0, 0,
				     0, NULL);
	d->eof = true;
	return rc;
}

int mcfs_virt_open(struct mcfs *fs, struct mcfs_node *n, int flags,
		   struct mcfs_fh **out)
{
	struct mcfs_fh *fh;
	int rc;

	if ((flags & O_ACCMODE) != O_RDONLY)
		return -EACCES;
	fh = mcfs_fh_new(FH_VIRT, n->ino);
	if (!fh)
		return -ENOMEM;
	rc = render(fs, n->name, &fh->text, &fh->text_len);
	if (rc) {
		mcfs_fh_free(fs, fh);
		return rc;
	}
	*out = fh;
	return 0;
}
