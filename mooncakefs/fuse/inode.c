/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The inode table: inode number -> node, and (parent, name, version) ->
 * node, both chained hash tables under one mutex. A file node is one
 * version of a key (the master's object version), so a replaced object
 * gets a new inode (a writer's publish moves its node to the version
 * published). A retired node (found stale, or turned a reader away while
 * open for writing) is only in the first table: lookups make a new node
 * for its name. File
 * nodes go when the kernel forgets them; directory nodes stay (there are
 * few, and children may still point at them).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mc_compiler.h"
#include "mc_time.h"
#include "mcfs.h"

#define ROOT_BUCKETS 4096
#define KEPT_INOS 16384 /* fs->kept_inos: 256 KiB */

static uint64_t name_hash(uint64_t parent, const char *name, uint64_t version)
{
	uint64_t h = 1469598103934665603ull ^ parent;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	h ^= version * 0x9e3779b97f4a7c15ull;
	return h;
}

static size_t name_bucket(const struct mcfs_node *n, size_t nb)
{
	return name_hash(n->parent ? n->parent->ino : 0, n->name, n->version) %
	       nb;
}

static void link_name(struct mcfs *fs, struct mcfs_node *n)
{
	size_t bn = name_bucket(n, fs->n_buckets);

	n->name_next = fs->by_name[bn];
	fs->by_name[bn] = n;
	n->hashed = true;
}

static void unlink_name(struct mcfs *fs, struct mcfs_node *n)
{
	struct mcfs_node **pp = &fs->by_name[name_bucket(n, fs->n_buckets)];

	if (!n->hashed)
		return;
	for (; *pp; pp = &(*pp)->name_next)
		if (*pp == n) {
			*pp = n->name_next;
			break;
		}
	n->hashed = false;
}

static void link_node(struct mcfs *fs, struct mcfs_node *n)
{
	size_t bi = n->ino % fs->n_buckets;

	n->ino_next = fs->by_ino[bi];
	fs->by_ino[bi] = n;
	link_name(fs, n);
	fs->n_nodes++;
}

/* Double both tables when chains grow past two nodes on average (a
 * directory of a million keys listed with readdirplus makes a million
 * nodes). Caller holds itab_lock; on no memory the chains just grow. */
static void maybe_grow(struct mcfs *fs)
{
	size_t nb = fs->n_buckets * 2;
	struct mcfs_node **bi, **bn;

	if (fs->n_nodes <= 2 * fs->n_buckets)
		return;
	bi = calloc(nb, sizeof(*bi));
	bn = calloc(nb, sizeof(*bn));
	if (!bi || !bn) {
		free(bi);
		free(bn);
		return;
	}
	for (size_t b = 0; b < fs->n_buckets; b++) {
		struct mcfs_node *n = fs->by_ino[b], *next;
		for (; n; n = next) {
			next = n->ino_next;
			n->ino_next = bi[n->ino % nb];
			bi[n->ino % nb] = n;
			if (n->hashed) {
				size_t h = name_bucket(n, nb);
				n->name_next = bn[h];
				bn[h] = n;
			}
		}
	}
	free(fs->by_ino);
	free(fs->by_name);
	fs->by_ino = bi;
	fs->by_name = bn;
	fs->n_buckets = nb;
}

static void unlink_node(struct mcfs *fs, struct mcfs_node *n)
{
	struct mcfs_node **pp = &fs->by_ino[n->ino % fs->n_buckets];

	for (; *pp; pp = &(*pp)->ino_next)
		if (*pp == n) {
			*pp = n->ino_next;
			break;
		}
	unlink_name(fs, n);
	fs->n_nodes--;
}

static struct mcfs_node *node_new(struct mcfs *fs, struct mcfs_node *parent,
				  const char *name, enum mcfs_kind kind,
				  const char *key, uint64_t ino)
{
	struct mcfs_node *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	atomic_init(&n->written_size, MCFS_NO_SIZE);
	atomic_init(&n->sized_by_writers, false);
	n->name = strdup(name);
	n->key = strdup(key ? key : "");
	if (!n->name || !n->key) {
		free(n->name);
		free(n->key);
		free(n);
		return NULL;
	}
	n->ino = ino ? ino : fs->next_ino++;
	n->kind = kind;
	n->parent = parent;
	link_node(fs, n);
	maybe_grow(fs);
	return n;
}

static unsigned name_stripe(const char *key)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *key; key++)
		h = (h ^ (unsigned char)*key) * 16777619u;
	return h % MCFS_NAME_LOCKS;
}

unsigned mcfs_name_lock(struct mcfs *fs, const char *key)
{
	unsigned i = name_stripe(key);

	pthread_mutex_lock(&fs->name_locks[i]);
	return i;
}

void mcfs_name_lock2(struct mcfs *fs, const char *a, const char *b)
{
	unsigned i = name_stripe(a), j = name_stripe(b);

	pthread_mutex_lock(&fs->name_locks[i < j ? i : j]);
	if (i != j)
		pthread_mutex_lock(&fs->name_locks[i < j ? j : i]);
}

void mcfs_name_unlock2(struct mcfs *fs, const char *a, const char *b)
{
	unsigned i = name_stripe(a), j = name_stripe(b);

	if (i != j)
		pthread_mutex_unlock(&fs->name_locks[j]);
	pthread_mutex_unlock(&fs->name_locks[i]);
}

void mcfs_name_lock_all(struct mcfs *fs)
{
	for (unsigned i = 0; i < MCFS_NAME_LOCKS; i++)
		pthread_mutex_lock(&fs->name_locks[i]);
}

void mcfs_name_unlock_all(struct mcfs *fs)
{
	for (unsigned i = MCFS_NAME_LOCKS; i-- > 0;)
		pthread_mutex_unlock(&fs->name_locks[i]);
}

int mcfs_itab_init(struct mcfs *fs)
{
	pthread_mutex_init(&fs->itab_lock, NULL);
	for (unsigned i = 0; i < MCFS_NAME_LOCKS; i++)
		pthread_mutex_init(&fs->name_locks[i], NULL);
	fs->n_buckets = ROOT_BUCKETS;
	fs->by_ino = calloc(fs->n_buckets, sizeof(*fs->by_ino));
	fs->by_name = calloc(fs->n_buckets, sizeof(*fs->by_name));
	fs->kept_inos = calloc(KEPT_INOS, sizeof(*fs->kept_inos));
	if (!fs->by_ino || !fs->by_name || !fs->kept_inos)
		return -ENOMEM;
	fs->next_ino = FUSE_ROOT_ID + 1;
	fs->root = node_new(fs, NULL, "", MCFS_ROOT, "", FUSE_ROOT_ID);
	if (!fs->root)
		return -ENOMEM;
	fs->kv = node_new(fs, fs->root, "kv", MCFS_KV_DIR, "", 0);
	fs->ckpt = node_new(fs, fs->root, "ckpt", MCFS_CKPT_DIR, "", 0);
	fs->vdir = node_new(fs, fs->root, ".mooncake", MCFS_VDIR, "", 0);
	if (!fs->kv || !fs->ckpt || !fs->vdir)
		return -ENOMEM;
	return 0;
}

void mcfs_itab_free(struct mcfs *fs)
{
	for (size_t b = 0; fs->by_ino && b < fs->n_buckets; b++) {
		struct mcfs_node *n = fs->by_ino[b], *next;
		for (; n; n = next) {
			next = n->ino_next;
			mooncake_store_object_close(n->pre);
			free(n->name);
			free(n->key);
			free(n);
		}
	}
	free(fs->by_ino);
	free(fs->by_name);
	free(fs->kept_inos);
	fs->by_ino = fs->by_name = NULL;
	fs->kept_inos = NULL;
	pthread_mutex_destroy(&fs->itab_lock);
	for (unsigned i = 0; i < MCFS_NAME_LOCKS; i++)
		pthread_mutex_destroy(&fs->name_locks[i]);
}

/* Caller holds itab_lock. */
static struct mcfs_node *find_ino(struct mcfs *fs, uint64_t ino)
{
	struct mcfs_node *n;

	for (n = fs->by_ino[ino % fs->n_buckets]; n; n = n->ino_next)
		if (n->ino == ino)
			break;
	return n;
}

char *mcfs_node_lock_key(struct mcfs *fs, uint64_t ino)
{
	struct mcfs_node *n;
	char *key = NULL, buf[32];

	pthread_mutex_lock(&fs->itab_lock);
	n = find_ino(fs, ino);
	if (n && (n->kind == MCFS_KV_FILE || n->kind == MCFS_KV_DIR) &&
	    n->key) {
		key = strdup(n->key);
	} else if (n) {
		snprintf(buf, sizeof(buf), "#%llu", (unsigned long long)ino);
		key = strdup(buf);
	}
	pthread_mutex_unlock(&fs->itab_lock);
	return key;
}

struct mcfs_node *mcfs_node_get(struct mcfs *fs, uint64_t ino)
{
	struct mcfs_node *n;

	pthread_mutex_lock(&fs->itab_lock);
	n = find_ino(fs, ino);
	pthread_mutex_unlock(&fs->itab_lock);
	return n;
}

/* Caller holds itab_lock: n's number, if the kernel forgets n, for the
 * next node of its version. */
static void keep_ino(struct mcfs *fs, const struct mcfs_node *n)
{
	if (n->kind == MCFS_KV_FILE && n->version && n->ino != n->version)
		fs->kept_inos[n->version % KEPT_INOS] =
			(struct mcfs_kept_ino){ n->version, n->ino };
}

/* Caller holds itab_lock: the number for a new node of version (0: the
 * version itself, or the counter's if a node of it lives). */
static uint64_t kept_ino(struct mcfs *fs, uint64_t version)
{
	struct mcfs_kept_ino *k = &fs->kept_inos[version % KEPT_INOS];
	uint64_t ino = 0;

	if (k->version == version) {
		ino = k->ino;
		*k = (struct mcfs_kept_ino){ 0, 0 };
	}
	if (ino && !find_ino(fs, ino))
		return ino;
	return find_ino(fs, version) ? 0 : version;
}

/* Caller holds itab_lock. */
static struct mcfs_node *find_child(struct mcfs *fs, struct mcfs_node *parent,
				    const char *name, uint64_t version,
				    bool dir)
{
	size_t b = name_hash(parent->ino, name, version) % fs->n_buckets;

	for (struct mcfs_node *n = fs->by_name[b]; n; n = n->name_next)
		if (n->parent == parent && n->version == version &&
		    !strcmp(n->name, name) && !mcfs_versioned(n->kind) == dir)
			return n;
	return NULL;
}

struct mcfs_node *mcfs_node_child(struct mcfs *fs, struct mcfs_node *parent,
				  const char *name, enum mcfs_kind kind,
				  const char *key, uint64_t version,
				  uint64_t size, uint64_t mtime_ms,
				  const mooncake_fs_attr_t *attr)
{
	bool dir = !mcfs_versioned(kind);
	struct mcfs_node *n;

	if (dir)
		version = size = mtime_ms = 0;
	pthread_mutex_lock(&fs->itab_lock);
	n = find_child(fs, parent, name, version, dir);
	if (!n) {
		/* A version's inode number is the version (unique in the
		 * pool), so a file keeps its number when the kernel forgets
		 * and looks it up again, and across renames; a second node
		 * of a live version (a writer's retired one is live) gets a
		 * number of the counter's, which never reaches a version. A
		 * file created here keeps the counter's number it had. */
		uint64_t ino = kind == MCFS_KV_FILE && version ?
				       kept_ino(fs, version) :
				       0;
		n = node_new(fs, parent, name, kind, key, ino);
		if (n) {
			unlink_name(fs, n);
			n->version = version;
			n->size = size;
			n->mtime_ms = mtime_ms;
			link_name(fs, n);
		}
	}
	if (n) {
		n->nlookup++;
		/* What the master just said is the newest, unless the node
		 * is being written: it keeps what its next version will be
		 * published with. */
		if (attr && !n->n_writers)
			n->attr = *attr;
	}
	pthread_mutex_unlock(&fs->itab_lock);
	return n;
}

mooncake_fs_attr_t mcfs_node_attr(struct mcfs *fs, const struct mcfs_node *n)
{
	mooncake_fs_attr_t a;

	pthread_mutex_lock(&fs->itab_lock);
	a = n->attr;
	pthread_mutex_unlock(&fs->itab_lock);
	return a;
}

void mcfs_node_set_attr(struct mcfs *fs, struct mcfs_node *n,
			const mooncake_fs_attr_t *a)
{
	pthread_mutex_lock(&fs->itab_lock);
	n->attr = *a;
	pthread_mutex_unlock(&fs->itab_lock);
}

/* ---- binding lookups --------------------------------------------------- */

#define STALE_MS 1000 /* how long a stale open makes lookups bind */
/* How long an open waits for the release of closed handles (they come
 * within a millisecond; a daemon starved of CPU takes longer), looking
 * every RELEASE_WAIT_US. */
#define RELEASE_WAIT_US 500
#define RELEASE_WAIT_MS 250
#define PRE_MS 2000 /* how long a binding lookup's hold waits for its open */

void mcfs_stale_note(struct mcfs *fs, uint64_t parent, const char *name,
		     pid_t pid, bool write, uint64_t same_as)
{
	uint64_t h = name_hash(parent, name, 0), now = mc_mono_ms();
	size_t slot = 0;

	pthread_mutex_lock(&fs->itab_lock);
	for (size_t i = 0; i < MC_ARRAY_SIZE(fs->stale); i++) {
		const struct mcfs_stale *s = &fs->stale[i];
		if (s->parent == parent && s->hash == h && s->pid == pid) {
			slot = i;
			break;
		}
		if (s->until_ms < fs->stale[slot].until_ms)
			slot = i; /* the oldest, if none matches */
	}
	fs->stale[slot] = (struct mcfs_stale){
		.parent = parent,
		.hash = h,
		.until_ms = now + STALE_MS,
		.pid = pid,
		.write = write,
		.same_as = same_as,
	};
	pthread_mutex_unlock(&fs->itab_lock);
}

int mcfs_stale_recent(struct mcfs *fs, uint64_t parent, const char *name,
		      pid_t pid)
{
	uint64_t h = name_hash(parent, name, 0), now = mc_mono_ms();
	int how = 0;

	pthread_mutex_lock(&fs->itab_lock);
	for (size_t i = 0; i < MC_ARRAY_SIZE(fs->stale) && !how; i++) {
		const struct mcfs_stale *s = &fs->stale[i];
		if (s->parent == parent && s->hash == h && s->pid == pid &&
		    s->until_ms > now)
			how = s->write ? 2 : 1;
	}
	pthread_mutex_unlock(&fs->itab_lock);
	return how;
}

struct mcfs_node *mcfs_node_private(struct mcfs *fs, struct mcfs_node *parent,
				    const char *name, const char *key,
				    const mooncake_obj_stat_t *st, pid_t pid,
				    bool write)
{
	uint64_t h = name_hash(parent->ino, name, 0);
	struct mcfs_node *n;

	pthread_mutex_lock(&fs->itab_lock);
	n = node_new(fs, parent, name, MCFS_KV_FILE, key, 0);
	if (n) {
		unlink_name(fs, n); /* never found by a lookup */
		for (size_t i = 0; i < MC_ARRAY_SIZE(fs->stale); i++) {
			const struct mcfs_stale *s = &fs->stale[i];
			if (s->parent == parent->ino && s->hash == h &&
			    s->pid == pid)
				n->same_as = s->same_as;
		}
		n->version = st->version;
		n->size = st->size;
		n->mtime_ms = st->mtime_ms;
		n->attr = st->attr;
		n->owner = pid;
		n->owner_write = write;
		n->owner_until_ms = mc_mono_ms() + STALE_MS;
		n->nlookup++;
	}
	pthread_mutex_unlock(&fs->itab_lock);
	return n;
}

/* Caller holds itab_lock. */
static void pre_drop(struct mcfs *fs, struct mcfs_node *n)
{
	if (!n->pre)
		return;
	for (size_t i = 0; i < MC_ARRAY_SIZE(fs->pre_inos); i++)
		if (fs->pre_inos[i] == n->ino)
			fs->pre_inos[i] = 0;
	mooncake_store_object_close(n->pre);
	n->pre = NULL;
}

void mcfs_node_pre_set(struct mcfs *fs, struct mcfs_node *n,
		       mooncake_object_t obj)
{
	size_t i;

	pthread_mutex_lock(&fs->itab_lock);
	for (i = 0; i < MC_ARRAY_SIZE(fs->pre_inos) && fs->pre_inos[i]; i++)
		;
	if (!n->pre && i < MC_ARRAY_SIZE(fs->pre_inos)) {
		fs->pre_inos[i] = n->ino;
		n->pre = obj;
		n->pre_until_ms = mc_mono_ms() + PRE_MS;
		obj = NULL;
	}
	pthread_mutex_unlock(&fs->itab_lock);
	mooncake_store_object_close(obj);
}

mooncake_object_t mcfs_node_pre_take(struct mcfs *fs, struct mcfs_node *n)
{
	mooncake_object_t obj = NULL;

	pthread_mutex_lock(&fs->itab_lock);
	if (n->pre && n->pre_until_ms > mc_mono_ms()) {
		for (size_t i = 0; i < MC_ARRAY_SIZE(fs->pre_inos); i++)
			if (fs->pre_inos[i] == n->ino)
				fs->pre_inos[i] = 0;
		obj = n->pre;
		n->pre = NULL;
	}
	pthread_mutex_unlock(&fs->itab_lock);
	return obj;
}

void mcfs_node_pre_sweep(struct mcfs *fs)
{
	uint64_t now = mc_mono_ms();

	pthread_mutex_lock(&fs->itab_lock);
	for (size_t i = 0; i < MC_ARRAY_SIZE(fs->pre_inos); i++) {
		struct mcfs_node *n =
			fs->pre_inos[i] ? find_ino(fs, fs->pre_inos[i]) : NULL;
		if (n && n->pre && n->pre_until_ms <= now)
			pre_drop(fs, n);
		else if (!n)
			fs->pre_inos[i] = 0;
	}
	pthread_mutex_unlock(&fs->itab_lock);
}

/* The list of nodes with open handles; caller holds itab_lock. */
static void open_add(struct mcfs *fs, struct mcfs_node *n)
{
	n->op_next = fs->open_nodes;
	if (n->op_next)
		n->op_next->op_prev = &n->op_next;
	n->op_prev = &fs->open_nodes;
	fs->open_nodes = n;
}

static void open_del(struct mcfs_node *n)
{
	if (!n->op_prev)
		return;
	*n->op_prev = n->op_next;
	if (n->op_next)
		n->op_next->op_prev = n->op_prev;
	n->op_next = NULL;
	n->op_prev = NULL;
}

/* Under itab_lock. */
static bool creating_in(const struct mcfs_node *n, const struct mcfs_node *dir)
{
	return n->parent == dir && n->n_writers && n->created && !n->version &&
	       !atomic_load(&n->unlinked) && !atomic_load(&n->create_failed);
}

struct mcfs_node *mcfs_node_creating(struct mcfs *fs, struct mcfs_node *dir,
				     const char *name)
{
	struct mcfs_node *n;

	pthread_mutex_lock(&fs->itab_lock);
	for (n = fs->open_nodes; n; n = n->op_next)
		if (creating_in(n, dir) && !strcmp(n->name, name)) {
			n->nlookup++;
			break;
		}
	pthread_mutex_unlock(&fs->itab_lock);
	return n;
}

int mcfs_node_creating_list(struct mcfs *fs, struct mcfs_node *dir,
			    struct mcfs_dirlist *d)
{
	int rc = 0;

	pthread_mutex_lock(&fs->itab_lock);
	for (struct mcfs_node *n = fs->open_nodes; n && !rc; n = n->op_next) {
		bool seen = false;

		if (!creating_in(n, dir))
			continue;
		for (size_t i = 0; i < d->n_ents && !seen; i++)
			seen = !strcmp(d->ents[i].name, n->name);
		if (!seen)
			rc = mcfs_dirent_add(d, n->name, n->key, MCFS_KV_FILE,
					     0, 0, n->mtime_ms, &n->attr);
	}
	pthread_mutex_unlock(&fs->itab_lock);
	return rc;
}

bool mcfs_node_unlinked(struct mcfs *fs, struct mcfs_node *dir,
			const char *name)
{
	bool any = false;

	pthread_mutex_lock(&fs->itab_lock);
	for (struct mcfs_node *n = fs->open_nodes; n; n = n->op_next)
		if (n->parent == dir && !strcmp(n->name, name) &&
		    !atomic_exchange(&n->unlinked, true))
			any = true;
	pthread_mutex_unlock(&fs->itab_lock);
	return any;
}

void mcfs_node_retire(struct mcfs *fs, struct mcfs_node *n)
{
	pthread_mutex_lock(&fs->itab_lock);
	if (n->kind == MCFS_KV_FILE)
		unlink_name(fs, n);
	pthread_mutex_unlock(&fs->itab_lock);
}

/* Caller holds itab_lock: is every handle that keeps an open of this
 * kind (write) from n, or for a writer every other writer, closed
 * already, its release on its way? A writer that joined a closed one
 * shared an inode its release then retired: the name's inode number
 * changed under the open file (sqlite saw its database "moved" and
 * refused writes: "attempt to write a readonly database"). */
static bool others_closing(const struct mcfs_node *n, bool write)
{
	bool writers = n->n_writers && n->n_writers == n->n_closing_writers;

	return write ? writers || (n->n_readers &&
				   n->n_readers == n->n_closing_readers) :
		       writers;
}

int mcfs_node_open(struct mcfs *fs, struct mcfs_node *n, bool write, pid_t pid)
{
	int rc = 0;

	pthread_mutex_lock(&fs->itab_lock);
	/* A close(2) returns after its flush, and the kernel sends the
	 * release after that: the shell's `printf x >> f; cat f` finds the
	 * writer's handle still there. Its release comes within moments
	 * (unless a copy of the descriptor is still open): wait for it
	 * rather than send this open to another inode (a stat before the
	 * open would not show that inode's number: cp refuses the file). */
	for (uint64_t until = mc_mono_ms() + RELEASE_WAIT_MS;
	     others_closing(n, write) && mc_mono_ms() < until;) {
		pthread_mutex_unlock(&fs->itab_lock);
		usleep(RELEASE_WAIT_US);
		pthread_mutex_lock(&fs->itab_lock);
	}
	if (n->owner && n->owner != pid && !(write && n->owner_write) &&
	    n->owner_until_ms > mc_mono_ms()) {
		rc = -ESTALE; /* kept for another thread's retried open */
	} else if (write ? n->n_readers : n->n_writers) {
		unlink_name(fs, n);
		n->turned_away = true;
		rc = -ESTALE;
	} else if (write && n->created && !n->version && n->n_writers) {
		/* Another writer of a file being created: an inode of its own
		 * (kv.c), not one whose size the kernel grows with the
		 * creator's writes (an O_APPEND would start there). */
		rc = -ESTALE;
	} else if (write) {
		/* The name keeps its inode while it is written (sqlite
		 * compares stat(path) with fstat of its descriptor before
		 * each write transaction); readers are turned away from it
		 * above, to an inode of the published version. */
		atomic_store(&n->sized_by_writers, true);
		if (!n->n_writers++)
			open_add(fs, n);
		/* Its first write ends an explicit mtime (utimensat). */
		atomic_store(&n->mtime_pending,
			     (n->attr.flags & MOONCAKE_ATTR_MTIME_SET) != 0);
	} else {
		/* No writer: the node's size is its version's. */
		atomic_store(&n->written_size, MCFS_NO_SIZE);
		if (!n->n_readers++)
			open_add(fs, n);
	}
	pthread_mutex_unlock(&fs->itab_lock);
	return rc;
}

/* Caller holds itab_lock. */
static void closing_set(struct mcfs_node *n, struct mcfs_fh *fh, bool on)
{
	uint32_t *count = fh->kind == FH_WRITE ? &n->n_closing_writers :
						 &n->n_closing_readers;

	if (atomic_load(&fh->closing) == on)
		return;
	atomic_store(&fh->closing, on);
	if (on)
		(*count)++;
	else if (*count)
		(*count)--;
}

void mcfs_node_closing(struct mcfs *fs, struct mcfs_fh *fh, bool closing)
{
	struct mcfs_node *n;

	pthread_mutex_lock(&fs->itab_lock);
	n = find_ino(fs, fh->ino);
	if (n)
		closing_set(n, fh, closing);
	pthread_mutex_unlock(&fs->itab_lock);
}

/* Caller holds itab_lock. */
static void close_locked(struct mcfs_node *n, bool write)
{
	if (n && write && n->n_writers) {
		if (!--n->n_writers)
			open_del(n);
		/* A created node bound to its published version: its size
		 * is that version's again. */
		if (!n->n_writers && n->hashed)
			atomic_store(&n->written_size, MCFS_NO_SIZE);
	} else if (n && !write && n->n_readers) {
		if (!--n->n_readers)
			open_del(n);
	}
}

void mcfs_node_close(struct mcfs *fs, uint64_t ino, bool write)
{
	pthread_mutex_lock(&fs->itab_lock);
	close_locked(find_ino(fs, ino), write);
	pthread_mutex_unlock(&fs->itab_lock);
}

void mcfs_node_release(struct mcfs *fs, struct mcfs_fh *fh)
{
	struct mcfs_node *n;

	/* Both at once: an open waiting for this release (mcfs_node_open)
	 * never sees it counted open but not closing. */
	pthread_mutex_lock(&fs->itab_lock);
	n = find_ino(fs, fh->ino);
	if (n) {
		closing_set(n, fh, false);
		close_locked(n, fh->kind == FH_WRITE);
	}
	pthread_mutex_unlock(&fs->itab_lock);
}

void mcfs_node_owner_opened(struct mcfs *fs, struct mcfs_node *n, pid_t pid,
			    bool write)
{
	pthread_mutex_lock(&fs->itab_lock);
	if (n->owner == pid && n->owner_until_ms) {
		/* Its open came: the kernel retries no more, and holding
		 * other threads off now only sends their opens (cat, then
		 * cp, each stat before its open) to further inodes. */
		n->owner_until_ms = 0;
		/* An O_TRUNC writer leaves its binding lookup's hold: no
		 * other open may take it (kv.c checks no version with it). */
		pre_drop(fs, n);
		for (size_t i = 0; n->parent && i < MC_ARRAY_SIZE(fs->stale);
		     i++) {
			struct mcfs_stale *s = &fs->stale[i];
			if (s->parent == n->parent->ino && s->pid == pid &&
			    s->hash == name_hash(n->parent->ino, n->name, 0))
				s->until_ms = 0;
		}
		/* Its version's inode for lookups too, unless one is. */
		if (!write && n->version && n->parent && !n->hashed &&
		    !atomic_load(&n->unlinked) &&
		    !find_child(fs, n->parent, n->name, n->version, false))
			link_name(fs, n);
	}
	pthread_mutex_unlock(&fs->itab_lock);
}

/* The readers open as one file with n (same_as) into *sharers (grown as
 * needed; kept short when out of memory: their numbers then show stale
 * up to the attribute timeout); whether one is of another version than
 * version. */
static bool readers_of(struct mcfs *fs, const struct mcfs_node *n,
		       uint64_t version, struct mcfs_inos *sharers)
{
	bool other = false;

	for (const struct mcfs_node *r = fs->open_nodes; r; r = r->op_next) {
		if (r->same_as != n->ino || !r->n_readers)
			continue;
		other |= r->version != version;
		if (sharers->n == sharers->cap) {
			size_t cap = sharers->cap ? 2 * sharers->cap : 8;
			uint64_t *v = realloc(sharers->v, cap * sizeof(*v));

			if (!v)
				continue;
			sharers->v = v;
			sharers->cap = cap;
		}
		sharers->v[sharers->n++] = r->ino;
	}
	return other;
}

bool mcfs_node_rebind(struct mcfs *fs, struct mcfs_node *n, uint64_t version,
		      uint64_t size, uint64_t mtime_ms,
		      const mooncake_fs_attr_t *attr, struct mcfs_inos *sharers)
{
	struct mcfs_inos none = { 0 };
	bool bound = false;

	if (!sharers)
		sharers = &none;

	pthread_mutex_lock(&fs->itab_lock);
	unlink_name(fs, n);
	/* A node open for reading stays its version's (a truncate by path
	 * publishes without an open): its readers' pages are that version's
	 * bytes. */
	if (n->parent && !atomic_load(&n->unlinked) && !n->n_readers &&
	    !find_child(fs, n->parent, n->name, version, false)) {
		/* A reader open on the version before as one file with n
		 * holds another file now: so that a program that follows
		 * the name (tail -F, which compares the number it saw at
		 * its open) sees it replaced, the name's number changes. */
		if (readers_of(fs, n, version, sharers))
			n->shown = fs->next_ino++;
		n->version = version;
		n->size = size;
		n->mtime_ms = mtime_ms;
		if (attr)
			n->attr = *attr;
		link_name(fs, n);
		/* A reader turned away from it has the kernel's entry of
		 * the name on an inode of its own: that entry must go (the
		 * next lookup finds this node). */
		bound = !n->turned_away;
	}
	pthread_mutex_unlock(&fs->itab_lock);
	free(none.v);
	return bound;
}

bool mcfs_node_bound(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		     uint64_t version)
{
	struct mcfs_node *n;
	bool yes;

	pthread_mutex_lock(&fs->itab_lock);
	/* Another version of a name being written here (another mount's
	 * publish): the next lookup gives the kernel's entry of the name an
	 * inode of that version, which the writer's publish must then drop
	 * (mcfs_node_rebind). Until 2026-12-07 a created file's publish left
	 * the entry there: stat and ls -l of the name showed the other
	 * mount's version up to the attribute timeout. */
	for (struct mcfs_node *w = fs->open_nodes; w; w = w->op_next)
		if (w->parent == dir && w->n_writers && w->version != version &&
		    !strcmp(w->name, name))
			w->turned_away = true;
	n = version ? find_child(fs, dir, name, version, false) : NULL;
	yes = n && n->hashed && n->created && !n->turned_away;
	pthread_mutex_unlock(&fs->itab_lock);
	return yes;
}

uint64_t mcfs_node_dir_held(struct mcfs *fs, struct mcfs_node *dir,
			    const char *name)
{
	struct mcfs_node *n;
	uint64_t ino;

	pthread_mutex_lock(&fs->itab_lock);
	n = find_child(fs, dir, name, 0, true);
	ino = n && n->nlookup ? n->ino : 0;
	pthread_mutex_unlock(&fs->itab_lock);
	return ino;
}

void mcfs_node_forget(struct mcfs *fs, uint64_t ino, uint64_t count)
{
	struct mcfs_node *n;

	pthread_mutex_lock(&fs->itab_lock);
	n = find_ino(fs, ino);
	if (n) {
		n->nlookup = n->nlookup > count ? n->nlookup - count : 0;
		if (!n->nlookup && n->kind == MCFS_KV_FILE) {
			if (n->hashed)
				keep_ino(fs, n);
			open_del(n); /* none: the kernel released it */
			unlink_node(fs, n);
			pre_drop(fs, n);
			free(n->name);
			free(n->key);
			free(n);
		}
	}
	pthread_mutex_unlock(&fs->itab_lock);
}

struct mcfs_node *mcfs_node_dir_for(struct mcfs *fs, const char *key,
				    char **next_name)
{
	struct mcfs_node *d = fs->kv;
	const char *p = key;

	*next_name = NULL;
	pthread_mutex_lock(&fs->itab_lock);
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		char *name = mcfs_escape(p, len);
		struct mcfs_node *c;

		if (!name)
			break;
		c = slash ? find_child(fs, d, name, 0, true) : NULL;
		if (!c) {
			*next_name = name;
			break;
		}
		free(name);
		d = c;
		p = slash + 1;
	}
	pthread_mutex_unlock(&fs->itab_lock);
	return d;
}

static struct timespec ts_of_ns(int64_t ns)
{
	struct timespec t = { .tv_sec = (time_t)(ns / 1000000000) };

	t.tv_nsec = (long)(ns % 1000000000);
	if (t.tv_nsec < 0) {
		t.tv_sec--;
		t.tv_nsec += 1000000000;
	}
	return t;
}

/* Times, owner and mode from stored attributes a (mode set); base_ns is
 * what an unset time is (the version's time). */
static void stored_attr(struct stat *st, const mooncake_fs_attr_t *a,
			int64_t base_ns)
{
	st->st_mode = (st->st_mode & S_IFMT) | (a->mode & 07777);
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_mtim = ts_of_ns(
		a->flags & MOONCAKE_ATTR_MTIME_SET ? a->mtime_ns : base_ns);
	st->st_atim = a->flags & MOONCAKE_ATTR_ATIME_SET ?
			      ts_of_ns(a->atime_ns) :
			      st->st_mtim;
	st->st_ctim = ts_of_ns(
		a->flags & MOONCAKE_ATTR_CTIME_SET ? a->ctime_ns : base_ns);
}

/* The number stat shows for n: that of the inode it is one file with
 * (mcfs_node.same_as) while n is not open for reading or that inode is
 * still of n's version; else its own. A reader whose file was published
 * anew since its open holds another file (its descriptor keeps the
 * version it opened). */
static uint64_t shown_ino(struct mcfs *fs, const struct mcfs_node *n)
{
	const struct mcfs_node *o = NULL;
	uint64_t ino;

	pthread_mutex_lock(&fs->itab_lock);
	if (n->same_as)
		o = find_ino(fs, n->same_as);
	if (o && (!n->n_readers || o->version == n->version))
		n = o;
	ino = n->shown ? n->shown : n->ino;
	pthread_mutex_unlock(&fs->itab_lock);
	return ino;
}

void mcfs_fill_attr(struct mcfs *fs, const struct mcfs_node *n, struct stat *st)
{
	mode_t um = (mode_t)fs->o.umask_;
	mooncake_fs_attr_t a = mcfs_node_attr(fs, n);
	unsigned wr = fs->o.read_only ? 0222 : 0;
	uint64_t size;
	int64_t base;

	memset(st, 0, sizeof(*st));
	st->st_ino = shown_ino(fs, n);
	st->st_uid = fs->o.uid >= 0 ? (uid_t)fs->o.uid : fs->uid;
	st->st_gid = fs->o.gid >= 0 ? (gid_t)fs->o.gid : fs->gid;
	st->st_blksize = 1 << 20;
	switch (n->kind) {
	case MCFS_KV_FILE:
		st->st_mode = S_IFREG | ((fs->o.file_mode & ~wr) & ~um);
		st->st_nlink = atomic_load(&n->unlinked) ? 0 : 1;
		size = atomic_load(&n->written_size);
		st->st_size = (off_t)(size != MCFS_NO_SIZE ? size : n->size);
		st->st_blocks = (blkcnt_t)((st->st_size + 511) / 512);
		/* The version is the wall ns of the put's completion. */
		base = n->version ? (int64_t)n->version :
				    (int64_t)n->mtime_ms * 1000000;
		st->st_mtim = ts_of_ns(base);
		st->st_ctim = st->st_atim = st->st_mtim;
		if (a.mode)
			stored_attr(st, &a, base);
		if (S_ISLNK(a.mode)) /* a symbolic link: its target's bytes */
			st->st_mode = S_IFLNK | (a.mode & 07777);
		return;
	case MCFS_CKPT_NODE:
		mcfs_ckpt_fill_attr(n, &a, st);
		return;
	case MCFS_CKPT_STAGE:
		mcfs_cstage_fill_attr(fs, n, st);
		return;
	case MCFS_VFILE:
		st->st_mode = S_IFREG | (0444 & ~um);
		st->st_nlink = 1;
		break;
	case MCFS_VDIR:
		st->st_mode = S_IFDIR | (0555 & ~um);
		st->st_nlink = 2;
		break;
	default:
		st->st_mode = S_IFDIR | ((fs->o.dir_mode & ~wr) & ~um);
		/* "." and its entry, and each subdirectory's ".." (those with
		 * records: implicit ones are not counted) */
		st->st_nlink = 2 + atomic_load(&n->subdirs);
		break;
	}
	st->st_mtim.tv_sec = (time_t)(fs->start_ms / 1000);
	st->st_ctim = st->st_atim = st->st_mtim;
	if (a.mode && n->kind == MCFS_KV_DIR)
		stored_attr(st, &a, (int64_t)fs->start_ms * 1000000);
}

/* Caller holds itab_lock: key of n, moved from the prefix from to to. */
static void move_key(struct mcfs_node *n, const char *from, size_t fl,
		     const char *to)
{
	size_t tl = strlen(to), kl = strlen(n->key);
	char *k;

	if (kl < fl || memcmp(n->key, from, fl))
		return;
	k = malloc(tl + kl - fl + 1);
	if (!k)
		return;
	memcpy(k, to, tl);
	memcpy(k + tl, n->key + fl, kl - fl + 1);
	free(n->key);
	n->key = k;
}

void mcfs_node_renamed_dir(struct mcfs *fs, struct mcfs_node *parent,
			   const char *name, struct mcfs_node *newparent,
			   const char *newname, const char *from,
			   const char *to)
{
	size_t fl = strlen(from);
	char *nn = strdup(newname);
	struct mcfs_node *dir;

	if (!nn)
		return;
	pthread_mutex_lock(&fs->itab_lock);
	dir = find_child(fs, parent, name, 0, true);
	/* A directory node already at the target (an empty directory the
	 * rename replaced) is no longer found by name. */
	for (struct mcfs_node *o;
	     (o = find_child(fs, newparent, nn, 0, true)) && o != dir;)
		unlink_name(fs, o);
	for (size_t b = 0; b < fs->n_buckets; b++)
		for (struct mcfs_node *n = fs->by_ino[b]; n; n = n->ino_next)
			if ((n->kind == MCFS_KV_FILE ||
			     n->kind == MCFS_KV_DIR) &&
			    n != fs->kv)
				move_key(n, from, fl, to);
	if (dir && dir->hashed) {
		unlink_name(fs, dir);
		free(dir->name);
		dir->name = nn;
		nn = NULL;
		dir->parent = newparent;
		link_name(fs, dir);
	}
	pthread_mutex_unlock(&fs->itab_lock);
	free(nn);
}

void mcfs_node_renamed(struct mcfs *fs, struct mcfs_node *parent,
		       const char *name, struct mcfs_node *newparent,
		       const char *newname, const char *newkey)
{
	char *nn = strdup(newname), *nk = strdup(newkey);

	if (!nn || !nk) {
		free(nn);
		free(nk);
		return;
	}
	pthread_mutex_lock(&fs->itab_lock);
	for (size_t b = 0; b < fs->n_buckets; b++) {
		for (struct mcfs_node *n = fs->by_ino[b]; n; n = n->ino_next) {
			bool hashed = n->hashed;
			char *n1, *k1;

			if ((n->kind != MCFS_KV_FILE &&
			     n->kind != MCFS_CKPT_NODE &&
			     n->kind != MCFS_CKPT_STAGE) ||
			    n->parent != parent || strcmp(n->name, name))
				continue;
			n1 = strdup(nn);
			k1 = strdup(nk);
			if (!n1 || !k1) {
				free(n1);
				free(k1);
				continue;
			}
			unlink_name(fs, n);
			free(n->name);
			free(n->key);
			n->name = n1;
			n->key = k1;
			n->parent = newparent;
			if (hashed)
				link_name(fs, n);
		}
	}
	pthread_mutex_unlock(&fs->itab_lock);
	free(nn);
	free(nk);
}
