/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A client's segment: memory with an identity header (see segment.h),
 * named and kept in /dev/shm, or unnamed (te_mem_alloc). A live owner holds a shared flock on the memory (te_mem_alloc
 * takes it); we test with an exclusive, non-blocking lock before mapping,
 * so two processes never share one segment.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "mc_log.h"
#include "mc_memcg.h"
#include "mooncake/mc_err.h"
#include "mooncake/te.h"
#include "segment.h"
#include "util.h"
#include "xfer.h"

_Static_assert(sizeof(struct mcs_seg_hdr) == 48, "segment header layout");
_Static_assert(offsetof(struct mcs_seg_hdr, id) == 12, "header id offset");
_Static_assert(offsetof(struct mcs_seg_hdr, size) == 32, "header size");

int mcs_segment_name(const char *engine_name, char *out, size_t outlen)
{
	size_t n = strlen(engine_name);

	if (!n || n > MCS_SEG_NAME_MAX || n >= outlen)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < n; i++) {
		char c = engine_name[i];
		out[i] = (c == ':' || c == '/') ? '_' : c;
	}
	out[n] = '\0';
	return 0;
}

static bool name_ok(const char *name)
{
	size_t n = strlen(name);

	if (!n || n > MCS_SEG_NAME_MAX || !strcmp(name, ".") ||
	    !strcmp(name, ".."))
		return false;
	return !strchr(name, '/');
}

/* MC_ESEGEXISTS when a live process holds the memory of this name. */
static int check_free(const char *name, char *err, size_t errlen)
{
	char path[MCS_SEG_NAME_MAX + 64];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "/dev/shm/mooncake.seg.%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct stat st;

	if (!fstat(fd, &st) && st.st_uid != geteuid()) {
		/* Another user's file (made first, perhaps to stop us): not
		 * ours to use, whoever holds it. */
		snprintf(err, errlen,
			 "segment %s: %s belongs to uid %u, not to this "
			 "user",
			 name, path, (unsigned)st.st_uid);
		close(fd);
		return -EPERM;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno == EWOULDBLOCK) {
			snprintf(err, errlen,
				 "segment %s is in use by a live process "
				 "(%s)",
				 name, path);
			rc = MC_ESEGEXISTS;
		}
	} else {
		(void)flock(fd, LOCK_UN);
	}
	close(fd);
	return rc;
}

bool mcs_segment_held(const char *name)
{
	char err[8];

	return check_free(name, err, sizeof(err)) == MC_ESEGEXISTS;
}

/* The message for a /dev/shm that cannot hold the segment. */
static void no_room(const char *name, size_t len, char *err, size_t errlen)
{
	struct statvfs vfs;
	unsigned long long avail = 0;

	if (!statvfs("/dev/shm", &vfs))
		avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
	snprintf(err, errlen,
		 "segment %s: /dev/shm has %llu MiB free, the segment needs "
		 "%zu MiB: enlarge it (docker run --shm-size=%zum, or "
		 "mount -o remount,size=... /dev/shm)",
		 name, avail >> 20, len >> 20, (len >> 20) + 64);
}

/* The segment of len bytes more than its process's memory cgroup allows
 * (room: what is left below the limit): err says so. */
static void no_memcg_room(const char *name, size_t len, uint64_t room,
			  uint64_t limit, char *err, size_t errlen)
{
	snprintf(err, errlen,
		 "segment %s needs %zu MiB, and this process's memory cgroup "
		 "(limit %llu MiB: a container's --memory, a unit's "
		 "MemoryMax) has %llu MiB left: the kernel would kill it "
		 "for memory; give the segment less (global_segment_size) or "
		 "the container more",
		 name, len >> 20, (unsigned long long)(limit >> 20),
		 (unsigned long long)(room >> 20));
}

/* A segment's name and size as the options give them: 0 or -EINVAL. */
static int check_args(const char *name, uint64_t size, char *err, size_t errlen)
{
	if (size < MCS_SEG_MIN_SIZE || size > SIZE_MAX - MCS_SEG_HDR_LEN) {
		snprintf(err, errlen,
			 "global_segment_size %llu: at least 1 MiB "
			 "(or 0 for none)",
			 (unsigned long long)size);
		return -EINVAL;
	}
	if (!name_ok(name)) {
		snprintf(err, errlen,
			 "segment_name '%s': 1 to %d characters, no '/'", name,
			 MCS_SEG_NAME_MAX);
		return -EINVAL;
	}
	return 0;
}

int mcs_segment_check(const char *name, uint64_t size, char *err, size_t errlen)
{
	char path[MCS_SEG_NAME_MAX + 64];
	size_t len = MCS_SEG_HDR_LEN + (size_t)size + TE_MEM_EXTRA;
	unsigned long long avail = 0;
	uint64_t kept = 0, need, room, limit;
	struct statvfs vfs;
	struct stat st;
	int rc = check_args(name, size, err, errlen);

	if (rc)
		return rc;
	if (statvfs("/dev/shm", &vfs))
		return 0; /* no /dev/shm to measure: the setup will tell */
	avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
	/* A kept segment of this name already holds its blocks. */
	snprintf(path, sizeof(path), "/dev/shm/mooncake.seg.%s", name);
	if (!stat(path, &st))
		kept = (uint64_t)st.st_blocks * 512;
	avail += kept;
	if (avail < len) {
		no_room(name, len, err, errlen);
		return -ENOSPC;
	}
	/* Its blocks are charged to the cgroup when they are reserved. */
	need = (uint64_t)len - (kept > len ? len : kept);
	room = mc_memcg_room(&limit);
	if (need > room) {
		no_memcg_room(name, len, room, limit, err, errlen);
		return -ENOMEM;
	}
	return 0;
}

int mcs_segment_open(struct te_engine *eng, const char *name, uint64_t size,
		     bool keep, struct mcs_segment **out, char *err,
		     size_t errlen)
{
	struct mcs_segment *seg;
	struct mcs_seg_hdr *h;
	char shm_name[MCS_SEG_NAME_MAX + 8], owner[2 * MCS_SEG_ID_LEN + 1];
	int rc;

	rc = check_args(name, size, err, errlen);
	if (rc)
		return rc;
	rc = keep ? check_free(name, err, errlen) : 0;
	if (rc)
		return rc;
	seg = calloc(1, sizeof(*seg));
	if (!seg)
		return -ENOMEM;
	snprintf(seg->name, sizeof(seg->name), "%s", name);
	snprintf(shm_name, sizeof(shm_name), "seg.%s", name);
	seg->map_len = MCS_SEG_HDR_LEN + (size_t)size;
	seg->kept = keep;
	rc = te_mem_alloc(eng, seg->map_len, keep ? shm_name : NULL, &seg->map);
	if (rc == -ENOSPC && keep) {
		no_room(name, seg->map_len, err, errlen);
		free(seg);
		return rc;
	}
	if (rc == -ENOMEM && keep) {
		uint64_t limit, room = mc_memcg_room(&limit);

		/* The cgroup's doing only if it has not that much left (an
		 * mmap refused has other causes). */
		if (room != UINT64_MAX && seg->map_len > room) {
			no_memcg_room(name, seg->map_len, room, limit, err,
				      errlen);
			free(seg);
			return rc;
		}
	}
	if (rc) {
		char buf[160];
		const char *hint = mcs_limit_hint(rc, buf, sizeof(buf));

		snprintf(err, errlen,
			 "segment %s: cannot allocate %zu bytes of shared "
			 "memory: %s%s%s%s",
			 name, seg->map_len, mc_strerror(rc), hint ? " (" : "",
			 hint ? hint : "", hint ? ")" : "");
		free(seg);
		return rc;
	}
	seg->pool = (uint8_t *)seg->map + MCS_SEG_HDR_LEN;
	seg->size = size;
	h = seg->map;
	if (!memcmp(h->magic, MCS_SEG_MAGIC, sizeof(h->magic)) &&
	    h->version == MCS_SEG_VERSION && h->size != size) {
		/* The same segment with another size: the master is told (a
		 * re-mount of its id), drops what it held and takes it anew. */
		mc_log_warn("store",
			    "segment %s was kept with %llu bytes and is now "
			    "given %llu: the objects it held are dropped",
			    name, (unsigned long long)h->size,
			    (unsigned long long)size);
		h->size = size;
	}
	if (!memcmp(h->magic, MCS_SEG_MAGIC, sizeof(h->magic)) &&
	    h->version == MCS_SEG_VERSION && h->size == size) {
		memcpy(seg->id, h->id, sizeof(seg->id));
		seg->reused = true;
	} else {
		rc = mcs_random(seg->id, sizeof(seg->id));
		if (rc) {
			snprintf(err, errlen, "getrandom: %s", mc_strerror(rc));
			goto err_free;
		}
		memset(seg->map, 0, MCS_SEG_HDR_LEN);
		memcpy(h->magic, MCS_SEG_MAGIC, sizeof(h->magic));
		h->version = MCS_SEG_VERSION;
		memcpy(h->id, seg->id, sizeof(h->id));
		h->size = size;
		h->created_ms = mcs_wall_ms();
	}
	/* Tagged with its id: peers reach an address of it only while this
	 * segment holds it, never a later process's memory at that address
	 * under the same engine name (xfer.h, mcs_xfer_op.seg_id). */
	mcs_seg_owner(seg->id, owner);
	rc = te_register_owned(eng, seg->map, seg->map_len, "cpu:0", true,
			       owner);
	if (rc) {
		snprintf(err, errlen, "segment %s: register: %s", name,
			 mc_strerror(rc));
		goto err_free;
	}
	seg->registered = true;
	*out = seg;
	return 0;

err_free:
	/* A header we could not use is no reason to drop a kept segment. */
	if (keep && !seg->reused)
		(void)te_mem_unlink(eng, seg->map);
	te_mem_free(eng, seg->map);
	free(seg);
	return rc;
}

void mcs_segment_unregister(struct mcs_segment *seg, struct te_engine *eng)
{
	if (seg && seg->registered && eng) {
		(void)te_unregister(eng, seg->map);
		seg->registered = false;
	}
}

void mcs_segment_free(struct mcs_segment *seg, struct te_engine *eng,
		      bool unlink)
{
	if (!seg)
		return;
	mcs_segment_unregister(seg, eng);
	if (unlink)
		(void)te_mem_unlink(eng, seg->map);
	te_mem_free(eng, seg->map);
	free(seg);
}
