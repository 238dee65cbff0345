/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mcfs.h
 * The mooncakefs FUSE daemon's internals. docs/design.md ("Filesystem")
 * explains the namespace and its semantics.
 *
 * The mount is split by namespace: "/" and the reserved ckpt/ (root.c),
 * kv/ with every object (kv.c, and file.c for files open for writing),
 * .mooncake/ with generated read-only files (virt.c). ops.c holds the
 * FUSE operations, each a dispatcher on the kind of node it is given;
 * dirent.c builds directory listings from a namespace's entries; inode.c
 * keeps the inode table; errors.c maps store codes to errno and waits for
 * the pool. A new namespace is one more file and a case in ops.c.
 *
 * Errors: every function here returns 0 (or a count) or a negative errno;
 * ops.c hands -rc to fuse_reply_err().
 *
 * Inodes are versions: a kv/ file's inode stands for one version of its
 * key (the master's object version), so a replaced name gets a new inode
 * and the kernel's cached pages and attributes of one version are never
 * shown for another (inode.c, kv.c).
 */
#ifndef MCFS_H
#define MCFS_H

#define FUSE_USE_VERSION 314

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>

#include "readahead.h"
#include "splice.h"
#include "stage.h"
#include "mooncake/ckpt.h"
#include "mooncake/store.h"
#include "mooncake/store_fs.h"

struct mc_rpc_client;

struct mcfs_opts {
	char *master; /* host:port */
	char *metadata;
	char *local_hostname;
	uint64_t segment_size;
	uint64_t buffer_size;
	char *protocol;
	char *device;
	char *segment_name;
	char *auth_token_file; /* NULL: the store's configuration decides */
	double entry_timeout, attr_timeout, negative_timeout;
	unsigned rpc_timeout_ms;
	uint64_t staging_limit;
	unsigned replicas;
	unsigned threads;
	bool read_only;
	bool xattr; /* serve user.mooncake.* (getxattr, listxattr) */
	/* O_CREAT|O_EXCL exclusive between mounts too (kv.c): off, the
	 * kernel's exclusivity within this mount only */
	bool excl_create;
	bool fsname_set;
	bool foreground, debug;
	bool allow_other, default_permissions;
	int64_t uid, gid; /* -1: the mounting user's */
	unsigned umask_; /* applied to the default modes */
	unsigned file_mode, dir_mode; /* of objects and directories that
				       * carry no attributes (the API's) */
	char *log_file;
	bool syslog;
	char *mountpoint;
	char *ckpt_cache; /* where ckpt/ reads keep shards (ckpt.c); main.c
			   * sets the default (mcs_ckpt_default_dir) */
	uint64_t ckpt_cache_size; /* their cap (0: half its filesystem) */
	uint64_t read_ahead; /* per file read sequentially (0: off) */
	uint64_t read_ahead_limit; /* all files together */
	bool splice_read; /* remote reads through a pipe (splice.c) */
};

enum mcfs_kind {
	MCFS_ROOT = 1,
	MCFS_KV_DIR, /* kv/ or a directory inside it */
	MCFS_KV_FILE, /* one version of an object */
	MCFS_CKPT_DIR, /* ckpt/ */
	MCFS_VDIR, /* .mooncake/ */
	MCFS_VFILE, /* .mooncake/<name> */
	/* Inside ckpt/ (ckpt.c): a checkpoint, an entry in one (directory,
	 * file or symlink: attr.mode's type) or a top-level link; version is
	 * the checkpoint's id (0 for a link), key "NAME" or "NAME/PATH". */
	MCFS_CKPT_NODE,
	/* In ckpt/, this mount's own until sealed (ckpt_stage.c): key is the
	 * path under the mount's pub/ directory. */
	MCFS_CKPT_STAGE,
};

/* Nodes bound to a version: a lookup finds only the node of the version
 * it asks for (files of kv/, everything in ckpt/). */
static inline bool mcfs_versioned(enum mcfs_kind k)
{
	return k == MCFS_KV_FILE || k == MCFS_CKPT_NODE;
}

struct mcfs_node {
	uint64_t ino;
	enum mcfs_kind kind;
	struct mcfs_node *parent;
	char *name; /* as shown (escaped) */
	char *key; /* file: the key; dir: the key prefix ("" or "a/b/") */
	uint64_t version; /* file: the object's version (0: being written) */
	uint64_t size, mtime_ms; /* file: of that version */
	/* Stored attributes (mode 0: none, the mount's defaults apply),
	 * under itab_lock. A file being written keeps here what its next
	 * version will be published with (chmod, utimensat meanwhile). */
	mooncake_fs_attr_t attr;
	_Atomic uint32_t subdirs; /* dir: records one level below (nlink) */
	uint64_t nlookup;
	/* Open handles of this inode (under itab_lock). A file inode open
	 * for writing stays the name's (its writer's stat(path) matches its
	 * fstat), but readers' opens are sent to a fresh inode of the
	 * published version (kv.c), which retires it. */
	uint32_t n_readers, n_writers;
	/* Of those, the handles flushed since their last read or write
	 * (mcfs_fh.closing): most are closed, their release on its way. */
	uint32_t n_closing_readers, n_closing_writers;
	/* file: the size its writers' content has (MCFS_NO_SIZE until one
	 * opens it), which a stat without a handle must report: the kernel
	 * takes that answer over the size its own writes left. */
	_Atomic uint64_t written_size;
	/* Writers had it open since a reader's open last dropped the
	 * kernel's attributes: the size the kernel keeps may be a writer's
	 * (another writer's O_TRUNC and writes), and a reader would read its
	 * version's bytes only up to it (kv.c). */
	atomic_bool sized_by_writers;
	bool hashed; /* in the name table (not retired) */
	/* The inode number stat shows (inode.c): shown, or ino when 0; and
	 * for a thread's node of its own made because an open of the name's
	 * inode found it open the other way (a reader of a file being
	 * written), same_as is that inode: this one shows its number while
	 * they are one file (one version, or this one not open for
	 * reading), so programs that compare stat(path) with fstat (sqlite,
	 * cp) see one file, though the mount keeps the two apart. */
	uint64_t shown, same_as;
	/* created: made by a create. A writer's publishes bind its node to
	 * the version published (mcfs_node_rebind), so the file keeps its
	 * inode number; turned_away: a reader was turned away from it while
	 * it was open for writing, or another mount published the name (the
	 * kernel's entry of the name then went to another inode, and each
	 * publish must drop it). */
	bool created, turned_away;
	/* A created node whose writer's last publish failed before any
	 * succeeded: lookups no longer find it while the writer closes
	 * (the kernel's release comes after close(2) returns). */
	atomic_bool create_failed;
	/* attr carries an explicit mtime (utimensat) that the next write
	 * ends: only then does a write take itab_lock. */
	atomic_bool mtime_pending;
	/* A hold on this version taken by a binding lookup (kv.c), for the
	 * open that follows; closed when used, expired or forgotten. */
	mooncake_object_t pre;
	uint64_t pre_until_ms;
	/* Made for one thread's retried open (owner_write: for writing):
	 * for a second, or until that open, other threads' opens go
	 * elsewhere (inode.c), except other writers' of a writer's node. */
	pid_t owner;
	bool owner_write;
	uint64_t owner_until_ms;
	struct mcfs_node *ino_next, *name_next; /* hash chains */
	/* Open (n_readers or n_writers > 0): in fs->open_nodes, so an unlink
	 * or a rename over its name finds it (a writer's retired node has no
	 * name chain, a reader's is found by version). */
	struct mcfs_node *op_next, **op_prev;
	/* Its name was unlinked or replaced while it was open: stat shows no
	 * link, and what its writers wrote is discarded (POSIX). */
	atomic_bool unlinked;
};

/* A directory listing in progress (dirent.c). */
struct mcfs_dirent {
	char *name; /* escaped component */
	char *key; /* full key or prefix */
	enum mcfs_kind kind;
	uint64_t version, size, mtime_ms;
	mooncake_fs_attr_t attr;
};

struct mcfs_dirlist {
	char *prefix; /* kv/: the directory's key prefix */
	char *cursor; /* last name returned by the master, for paging */
	off_t next_off; /* offset of the next entry we would produce */
	struct mcfs_dirent *ents; /* current page */
	size_t n_ents, cap, pos;
	bool eof;
	int err; /* -errno met after entries were replied: the next reply */
	/* kv/: the files listed (raw components) that start every entry
	 * listed after them, across pages: chain holds the last one, each
	 * of the others a prefix of it (their lengths in chain_lens). The
	 * master lists in byte order, so a directory "x/" can follow the
	 * file "x" after others ("x.txt": '.' < '/'); it is shown once, as
	 * the file. */
	char *chain;
	size_t *chain_lens, chain_n, chain_cap;
};

#define MCFS_NO_SIZE UINT64_MAX
#define MCFS_NAME_LOCKS 16
/* The largest read the kernel sends (max_read) and the daemon serves. */
#define MCFS_READ_MAX (1u << 20)

/* An open file or directory. */
enum mcfs_fh_kind { FH_READ = 1, FH_WRITE, FH_VIRT, FH_DIR, FH_CKPT, FH_STAGE };

struct mcfs_fh {
	enum mcfs_fh_kind kind;
	pthread_mutex_t lock;
	uint64_t ino;
	/* FH_READ, FH_WRITE: flushed, and neither read nor written since
	 * (under itab_lock; loaded without it to see if it is set). A
	 * close(2) flushes and returns, and the kernel sends the release
	 * after: an open of the inode meanwhile waits for it (inode.c). */
	atomic_bool closing;
	/* FH_READ: one version, held open */
	mooncake_object_t obj;
	struct mcfs_ra *ra; /* its read-ahead window (readahead.h) */
	/* FH_WRITE (file.c): the content and its publication */
	char *key, *tmp_key;
	uint64_t parent_ino; /* its name, to invalidate after a publish */
	struct mcfs_node *node; /* its inode, alive while the handle is */
	char *name;
	struct mcfs_stage stage;
	uint64_t size;
	mooncake_writer_t writer; /* direct: not yet published */
	mooncake_fs_attr_t sent; /* the attributes its writer was opened with */
	bool dirty; /* changed since opened or last published */
	/* Empty as the name was not published yet, and nothing written:
	 * its publish makes the name only if no one else did meanwhile. */
	bool if_absent;
	/* O_EXCL or mknod: a name someone made meanwhile fails the publish
	 * with EEXIST instead (kv.c makes such a name at once). */
	bool excl;
	bool published; /* at least once */
	bool bound; /* its last publish bound its created node (file.c) */
	bool published_direct; /* the content is the name's object, not
				* the stage */
	int error; /* written bytes lost: every later call fails so */
	atomic_bool wrote; /* a write came (mcfs_kv_drop_privs ran) */
	/* Written or truncated through this handle, or opened O_TRUNC: a
	 * lock granted through it leaves its content alone. */
	bool modified;
	/* The version its content started from (0: empty, or not said). */
	uint64_t base_version;
	/* FH_VIRT */
	char *text;
	size_t text_len;
	/* FH_DIR */
	struct mcfs_dirlist dir;
	/* FH_CKPT: a file of a checkpoint (ckpt.c) */
	struct mooncake_ckpt_file *ckf;
	/* FH_STAGE: a staged file (ckpt_stage.c) */
	int fd;
};

struct mcfs {
	struct mcfs_opts o;
	char *default_segment; /* kept segment's name without segment_name= */
	struct fuse_session *se;
	mooncake_store_t store;
	struct mcfs_ra_pool *ra; /* read-ahead of remote objects */
	struct mcfs_locks *locks; /* flock and POSIX locks, by name */
	/* set up in the background so the mount does not wait for the
	 * segment to be pre-faulted */
	pthread_mutex_t ready_lock;
	pthread_cond_t ready_cond;
	int ready; /* 0 pending, 1 ready, < 0 failed (a store code) */
	bool join_failing; /* pending, after a failed try: answer EIO now */
	size_t max_key; /* the master's longest key (ENAMETOOLONG beyond) */
	/* A name's last step of a publish (the rename of the committed
	 * object under the name) against a rename through the mount of
	 * that name: striped by key (mcfs_name_lock). Order: fh->lock, then
	 * these (in index order), then itab_lock. */
	pthread_mutex_t name_locks[MCFS_NAME_LOCKS];
	/* inode table */
	pthread_mutex_t itab_lock;
	struct mcfs_node **by_ino, **by_name;
	size_t n_buckets, n_nodes;
	uint64_t next_ino;
	/* Numbers of created files whose inode the kernel forgot (a created
	 * file's number is the counter's, not its version): a later lookup
	 * of the version gets the same number. Direct-mapped by version; a
	 * collision forgets the older (that file then shows its version as
	 * its number after the next lookup). */
	struct mcfs_kept_ino {
		uint64_t version, ino;
	} * kept_inos;
	struct mcfs_node *root, *kv, *ckpt, *vdir;
	/* names whose open found the inode stale just now (inode.c) */
	struct mcfs_stale {
		uint64_t parent, hash, until_ms;
		pid_t pid; /* the thread whose open was stale */
		bool write;
		uint64_t same_as; /* its private node's (mcfs_node) */
	} stale[32];
	uint64_t pre_inos[64]; /* nodes holding a pre hold (0: free slot) */
	struct mcfs_node *open_nodes; /* nodes with open handles (op_next) */
	/* staging */
	struct mcfs_stage_pool stage_pool;
	_Atomic uint64_t tmp_seq;
	/* per-thread registered read buffers */
	char *bufs;
	size_t n_bufs;
	pthread_mutex_t buf_lock;
	uint64_t buf_free; /* bitmap */
	pthread_cond_t buf_cond;
	/* change feed */
	pthread_t watch_thread;
	atomic_bool stop;
	bool watch_started;
	/* counters for .mooncake/stats */
	_Atomic uint64_t n_reads, n_read_bytes, n_writes, n_write_bytes;
	_Atomic uint64_t n_lookups, n_invalidations, n_errors, n_stale;
	_Atomic uint64_t n_getxattr; /* requests, answered or not */
	_Atomic unsigned remote_reads; /* in flight (readahead.h) */
	_Atomic uint64_t n_feed_resets; /* change feed restarts handled */
	/* splice.c: the setting, each FUSE thread's pipe, the reads
	 * answered from one (read-ahead counts its own) */
	struct mcfs_splice splice;
	pthread_key_t pipe_key;
	bool pipe_key_ok;
	_Atomic uint64_t n_splice_reads;
	uint64_t start_ms;
	uid_t uid;
	gid_t gid;
	struct mcfs_ckpt *ck; /* ckpt/ (ckpt.c) */
};

/* splice.c: remote reads answered from a pipe (splice.h). */
int mcfs_splice_init(struct mcfs *fs);
void mcfs_splice_fini(struct mcfs *fs);
/**
 * Answer req with [off, off+n) of obj (n already cut at its end) through
 * the thread's pipe. true: replied (fs's counters updated; nothing of
 * obj is touched after the reply); false: not replied, read it into
 * memory (off, too small, the replica not over TCP, a failed splice).
 */
bool mcfs_splice_read(struct mcfs *fs, fuse_req_t req, mooncake_object_t obj,
		      uint64_t off, size_t n);

/* options.c */
int mcfs_parse_opts(int argc, char **argv, struct mcfs_opts *o,
		    struct fuse_args *fargs);
void mcfs_free_opts(struct mcfs_opts *o);
void mcfs_usage(FILE *out);
int mcfs_opts_json(const struct mcfs_opts *o, char **out, size_t *len);

/* errors.c */
/** The one table from store codes (and negative errno) to -errno. */
int mcfs_errno(int store_code);
/** 0 once the pool is joined; -EIO if joining failed or takes > 60 s. */
int mcfs_wait_ready(struct mcfs *fs);

/* names.c: key components <-> path names */
/** Escape one key component for display; malloc'd. */
char *mcfs_escape(const char *comp, size_t len);
/** The key component of a path name (names.c); malloc'd, NULL: no
 *  memory. Every name is one. */
char *mcfs_unescape(const char *name, size_t *len);
/** Hidden internal names: the directory of temporary keys of writes in
 *  progress (MCFS_TMP_PREFIX without its '/') and every key under it. */
bool mcfs_hidden_key(const char *key);
#define MCFS_TMP_PREFIX ".mooncakefs-tmp/"

/* inode.c */
int mcfs_itab_init(struct mcfs *fs);
void mcfs_itab_free(struct mcfs *fs);
struct mcfs_node *mcfs_node_get(struct mcfs *fs, uint64_t ino);
/** The name ino's locks are kept under (locks.c): its key, or "#ino"
 *  for what has none; malloc'd, NULL when ino is gone (or no memory). */
char *mcfs_node_lock_key(struct mcfs *fs, uint64_t ino);
/**
 * Find or make the child node (a file: of that version), taking a lookup
 * reference. Retired nodes are never found: a new one is made.
 */
struct mcfs_node *mcfs_node_child(struct mcfs *fs, struct mcfs_node *parent,
				  const char *name, enum mcfs_kind kind,
				  const char *key, uint64_t version,
				  uint64_t size, uint64_t mtime_ms,
				  const mooncake_fs_attr_t *attr);
/** n's stored attributes (mode 0: none). */
mooncake_fs_attr_t mcfs_node_attr(struct mcfs *fs, const struct mcfs_node *n);
void mcfs_node_set_attr(struct mcfs *fs, struct mcfs_node *n,
			const mooncake_fs_attr_t *a);
void mcfs_node_forget(struct mcfs *fs, uint64_t ino, uint64_t n);
/** Lock the stripe of fs->name_locks that key falls in; its index. */
unsigned mcfs_name_lock(struct mcfs *fs, const char *key);
/** Lock the stripes of two keys (one lock when they share one), in
 *  order; mcfs_name_unlock2() with the same keys undoes it. */
void mcfs_name_lock2(struct mcfs *fs, const char *a, const char *b);
void mcfs_name_unlock2(struct mcfs *fs, const char *a, const char *b);
/** Every stripe (a directory's rename moves keys of any stripe). */
void mcfs_name_lock_all(struct mcfs *fs);
void mcfs_name_unlock_all(struct mcfs *fs);
/** A file of (dir, name) created by this mount and not yet published
 *  (the master does not know it yet), counted as looked up; NULL if
 *  none. */
struct mcfs_node *mcfs_node_creating(struct mcfs *fs, struct mcfs_node *dir,
				     const char *name);
/** Add the files this mount is creating in dir (as mcfs_node_creating())
 *  to d, once per name, as entries of version 0; 0 or -ENOMEM. */
int mcfs_node_creating_list(struct mcfs *fs, struct mcfs_node *dir,
			    struct mcfs_dirlist *d);
/** (dir, name) was unlinked or replaced through this mount: its open
 *  nodes show no link and their writers publish nothing more
 *  (mcfs_node.unlinked). Were there any not marked before? */
bool mcfs_node_unlinked(struct mcfs *fs, struct mcfs_node *dir,
			const char *name);
/** Inode numbers, grown by whoever fills it; free(v) after. */
struct mcfs_inos {
	uint64_t *v;
	size_t n, cap;
};
/** A node whose writer published version: lookups of its name find it
 *  as that version (see mcfs_node.created); n is retired when it cannot
 *  be. False when the kernel's entry of the name may stand for another
 *  inode (n retired, or a reader was turned away from it): drop it.
 *  sharers (NULL: not wanted) gets the nodes open for reading that were
 *  one file with n (mcfs_node.same_as) when n was rebound: what the
 *  kernel holds of their attributes (their number) must go. */
bool mcfs_node_rebind(struct mcfs *fs, struct mcfs_node *n, uint64_t version,
		      uint64_t size, uint64_t mtime_ms,
		      const mooncake_fs_attr_t *attr,
		      struct mcfs_inos *sharers);
/** Is (dir, name) a created node bound to version (the kernel's entry of
 *  the name already stands for that version)? A change event's question
 *  (version 0: removed): writers of the name open on another version are
 *  marked (mcfs_node.turned_away), their next publish drops the kernel's
 *  entry of the name. */
bool mcfs_node_bound(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		     uint64_t version);
/** The inode number of the directory (dir, name) while the kernel holds
 *  it (looked up and not forgotten), else 0. */
uint64_t mcfs_node_dir_held(struct mcfs *fs, struct mcfs_node *dir,
			    const char *name);
/** Lookups no longer find n (the next lookup of its name makes a new
 *  inode). */
void mcfs_node_retire(struct mcfs *fs, struct mcfs_node *n);
/**
 * Count an open of n (write or read); -ESTALE when the open must go to a
 * fresh inode instead: a read of an inode open for writing, a write of an
 * inode open for reading (n is retired then, so the kernel's retry, which
 * looks the name up again, finds a new one). A write leaves n the name's.
 */
int mcfs_node_open(struct mcfs *fs, struct mcfs_node *n, bool write, pid_t pid);
void mcfs_node_close(struct mcfs *fs, uint64_t ino, bool write);
/** The release of fh (FH_READ or FH_WRITE): mcfs_node_close() of its
 *  inode, counting it out of the closing handles too. */
void mcfs_node_release(struct mcfs *fs, struct mcfs_fh *fh);
/** fh (FH_READ or FH_WRITE) was flushed (closing), or read or written
 *  after a flush (not closing): see mcfs_fh.closing. */
void mcfs_node_closing(struct mcfs *fs, struct mcfs_fh *fh, bool closing);
/** Thread pid's open of n (a node of its own, mcfs_node_private())
 *  succeeded: n is an ordinary inode of its version from now on, which
 *  other threads may open and lookups find, and the thread's lookups of
 *  the name bind no more. */
void mcfs_node_owner_opened(struct mcfs *fs, struct mcfs_node *n, pid_t pid,
			    bool write);
/**
 * Thread pid's open of (parent, name) found its inode stale (write: an
 * open for writing). For the next second that thread's lookups of the
 * name are special (kv.c): mcfs_stale_recent() tells how (0: not, 1: a
 * read to bind, 2: a write to give a fresh inode of its own). same_as:
 * the inode that node is one file with (mcfs_node.same_as), 0: none.
 */
void mcfs_stale_note(struct mcfs *fs, uint64_t parent, const char *name,
		     pid_t pid, bool write, uint64_t same_as);
int mcfs_stale_recent(struct mcfs *fs, uint64_t parent, const char *name,
		      pid_t pid);
/** A node for name that no lookup finds, reserved for thread pid's
 *  retried open (write: for writing) for a second or until that open
 *  (a lookup reference taken): no other thread's open can turn it away
 *  or make it stale. It is one file with the inode mcfs_stale_note() was
 *  given. */
struct mcfs_node *mcfs_node_private(struct mcfs *fs, struct mcfs_node *parent,
				    const char *name, const char *key,
				    const mooncake_obj_stat_t *st, pid_t pid,
				    bool write);
/** Give n a hold on its version for the next open (obj is taken: closed
 *  here if n has one already or no slot is free). */
void mcfs_node_pre_set(struct mcfs *fs, struct mcfs_node *n,
		       mooncake_object_t obj);
/** Take n's hold, if it has a live one (NULL otherwise). */
mooncake_object_t mcfs_node_pre_take(struct mcfs *fs, struct mcfs_node *n);
/** Close the holds no open took within their second. */
void mcfs_node_pre_sweep(struct mcfs *fs);
/** A rename made through this mount: the kernel now calls the moved
 *  inodes by their new name, so their key follows. */
void mcfs_node_renamed(struct mcfs *fs, struct mcfs_node *parent,
		       const char *name, struct mcfs_node *newparent,
		       const char *newname, const char *newkey);
/** A directory renamed through this mount: its node moves, and every
 *  node whose key is under from (a prefix) is now under to. */
void mcfs_node_renamed_dir(struct mcfs *fs, struct mcfs_node *parent,
			   const char *name, struct mcfs_node *newparent,
			   const char *newname, const char *from,
			   const char *to);
/** Deepest known directory for key and the component after it. */
struct mcfs_node *mcfs_node_dir_for(struct mcfs *fs, const char *key,
				    char **next_name);
void mcfs_fill_attr(struct mcfs *fs, const struct mcfs_node *n,
		    struct stat *st);

/* dirent.c: listings */
int mcfs_dirent_add(struct mcfs_dirlist *d, const char *name, const char *key,
		    enum mcfs_kind kind, uint64_t version, uint64_t size,
		    uint64_t mtime_ms, const mooncake_fs_attr_t *attr);
void mcfs_dirlist_clear(struct mcfs_dirlist *d);
void mcfs_dirlist_free(struct mcfs_dirlist *d);
/** Reply to readdir(plus) from a listing; next_page fills d->ents. */
void mcfs_dirlist_reply(fuse_req_t req, struct mcfs *fs, struct mcfs_node *dir,
			struct mcfs_dirlist *d, size_t size, off_t off,
			bool plus,
			int (*next_page)(struct mcfs *fs, struct mcfs_node *dir,
					 struct mcfs_dirlist *d));

/* root.c: "/" */
int mcfs_root_lookup(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		     struct mcfs_node **out);
int mcfs_root_list(struct mcfs *fs, struct mcfs_node *dir,
		   struct mcfs_dirlist *d);

/* kv.c: kv/ (every object) */
int mcfs_kv_lookup(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		   pid_t pid, struct mcfs_node **out);
int mcfs_kv_list(struct mcfs *fs, struct mcfs_node *dir,
		 struct mcfs_dirlist *d);
int mcfs_kv_open(struct mcfs *fs, struct mcfs_node *n, int flags, pid_t pid,
		 struct mcfs_fh **out);
/** A new file of the caller's: attr as the caller's create() gives it
 *  (mode with type, uid, gid; the times are set here); flags the
 *  open's (without O_TRUNC, a file left empty is made only if the name
 *  is still free when published; with O_EXCL the name is made here,
 *  empty, and -EEXIST if another mount made it first). */
int mcfs_kv_create(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		   const mooncake_fs_attr_t *attr, int flags,
		   struct mcfs_node **node, struct mcfs_fh **out);
/** Reply to a read of an FH_READ handle (from the segment when it is
 *  this daemon's: one copy). */
void mcfs_kv_read(fuse_req_t req, struct mcfs *fs, struct mcfs_fh *fh,
		  size_t size, off_t off);
int mcfs_kv_truncate(struct mcfs *fs, struct mcfs_node *n, uint64_t size);
int mcfs_kv_unlink(struct mcfs *fs, struct mcfs_node *dir, const char *name);
int mcfs_kv_rename(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		   struct mcfs_node *newdir, const char *newname,
		   unsigned flags);
int mcfs_kv_mkdir(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		  const mooncake_fs_attr_t *attr, struct mcfs_node **out);
/** A symbolic link: an object of its own kind (mode S_IFLNK) whose bytes
 *  are the target. */
int mcfs_kv_symlink(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		    const char *target, const mooncake_fs_attr_t *attr,
		    struct mcfs_node **out);
/** The target of a symbolic link into buf (NUL-terminated); its length. */
int mcfs_kv_readlink(struct mcfs *fs, struct mcfs_node *n, char *buf,
		     size_t size);
/** A write by a process other than root ends the file's set-user-ID bit,
 * and its set-group-ID bit where group execution is allowed (Linux does so
 * for writers without CAP_FSETID; the daemon sees only the uid). */
void mcfs_kv_drop_privs(struct mcfs *fs, struct mcfs_node *n);
/** chmod, chown, utimensat (FUSE_SET_ATTR_* in to_set, from st) of a
 *  kv/ file or directory; a file being written keeps them for its next
 *  version. */
int mcfs_kv_setattr(struct mcfs *fs, struct mcfs_node *n, const struct stat *st,
		    int to_set);
/**
 * A raw RPC client of the master (status, the start-up check) that
 * authenticates with auth_token_file= (or MOONCAKE_AUTH_TOKEN_FILE) when
 * set. 0, or a negative code, logged.
 */
int mcfs_rpc_client(const struct mcfs_opts *o, struct mc_rpc_client **out);

/** Bring n's attributes up to date from the master (getattr after the
 *  kernel's cache expired). */
void mcfs_kv_refresh(struct mcfs *fs, struct mcfs_node *n);
/** The attributes of a new file or directory made by the caller of req
 *  with mode in dir (a set-group-ID directory hands down its group). */
mooncake_fs_attr_t mcfs_new_attr(struct mcfs *fs, fuse_req_t req,
				 struct mcfs_node *dir, mode_t mode);
int mcfs_kv_rmdir(struct mcfs *fs, struct mcfs_node *dir, const char *name);
/** user.mooncake.* of a file: the value's length, or -ENODATA. */
int mcfs_kv_getxattr(struct mcfs *fs, struct mcfs_node *n, const char *name,
		     char *buf, size_t len);
extern const char mcfs_kv_xattr_names[];
extern const size_t mcfs_kv_xattr_names_len;
int mcfs_bufs_init(struct mcfs *fs, unsigned n);
void mcfs_bufs_free(struct mcfs *fs);
void mcfs_fh_free(struct mcfs *fs, struct mcfs_fh *fh);
struct mcfs_fh *mcfs_fh_new(enum mcfs_fh_kind kind, uint64_t ino);

/* file.c: files open for writing (FH_WRITE) */
/** Start the content: empty (base NULL: created, O_TRUNC; published as
 *  such by the first flush) or a copy of base (the version opened). */
int mcfs_file_init(struct mcfs *fs, struct mcfs_fh *fh, mooncake_object_t base);
/** Write len bytes at off; append (O_APPEND): at the end of the handle's
 *  content, whatever the kernel's size of the inode (the version opened,
 *  or another writer's of the same inode: a handle rebased under a lock,
 *  mcfs_file_locked, has other bytes). */
int mcfs_file_write(struct mcfs *fs, struct mcfs_fh *fh, const char *buf,
		    size_t len, uint64_t off, bool append);
int mcfs_file_truncate(struct mcfs *fs, struct mcfs_fh *fh, uint64_t size);
/** Publish what changed as the name's new version; *changed when it did.
 *  The error of a failed publish; the previous version stays. */
int mcfs_file_publish(struct mcfs *fs, struct mcfs_fh *fh, bool *changed);
uint64_t mcfs_file_size(struct mcfs_fh *fh);
/**
 * The bytes at off (up to size) as at most max_iov pieces, holes pointing
 * at zeros; returns how many (>= 0: the handle stays locked until
 * mcfs_file_read_done(), after the reply) or a negative errno.
 */
int mcfs_file_read(struct mcfs *fs, struct mcfs_fh *fh, uint64_t off,
		   size_t size, struct iovec *iov, int max_iov, size_t *total);
void mcfs_file_read_done(struct mcfs_fh *fh);
void mcfs_file_free(struct mcfs *fs, struct mcfs_fh *fh);
/**
 * A lock (flock, POSIX) was granted through fh (any kind; NULL: none):
 * a handle open for writing that has changed nothing yet starts again
 * from the name's current version, which the lock's previous holder
 * published before letting go. Called before the lock's reply.
 */
void mcfs_file_locked(struct mcfs *fs, struct mcfs_fh *fh);

/* ckpt.c: ckpt/, checkpoints shared peer to peer, read-only */
int mcfs_ckpt_init(struct mcfs *fs);
void mcfs_ckpt_fini(struct mcfs *fs);
int mcfs_ckpt_lookup(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		     struct mcfs_node **out);
int mcfs_ckpt_list(struct mcfs *fs, struct mcfs_node *dir,
		   struct mcfs_dirlist *d);
int mcfs_ckpt_open(struct mcfs *fs, struct mcfs_node *n, int flags,
		   struct mcfs_fh **out);
void mcfs_ckpt_read(fuse_req_t req, struct mcfs *fs, struct mcfs_fh *fh,
		    size_t size, off_t off);
int mcfs_ckpt_readlink(struct mcfs *fs, struct mcfs_node *n, char *buf,
		       size_t size);
/** rm -r: files and directories inside a checkpoint go one by one
 *  without effect (it is immutable); removing ckpt/NAME (a checkpoint's
 *  directory or a link) unpublishes it for every mount. */
int mcfs_ckpt_unlink(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		     bool is_dir);
void mcfs_ckpt_fill_attr(const struct mcfs_node *n, const mooncake_fs_attr_t *a,
			 struct stat *st);
/** ln -s TARGET ckpt/NAME: a top-level link. */
int mcfs_ckpt_symlink(struct mcfs *fs, struct mcfs_node *dir,
		      const char *target, const char *name,
		      struct mcfs_node **out);
/** A top-level link moved to another name (ln -sfn's last step). */
int mcfs_ckpt_rename_link(struct mcfs *fs, const char *name,
			  const char *newname, unsigned flags);
/** The checkpoint handle (opened on first use): 0 or -errno. */
int mcfs_ckpt_handle(struct mcfs *fs, mooncake_ckpt_t **out);
/** This mount's directory of staged checkpoints (pub/), and making it. */
const char *mcfs_ckpt_pub(struct mcfs *fs);
int mcfs_ckpt_pub_make(struct mcfs *fs);
/** 0 when name is not published (neither checkpoint nor link),
 *  -EEXIST when it is, or an error. */
int mcfs_ckpt_published(struct mcfs *fs, const char *name);

/* ckpt_stage.c: checkpoints staged in this mount until sealed */
int mcfs_cstage_lookup(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		       struct mcfs_node **out);
int mcfs_cstage_list(struct mcfs *fs, struct mcfs_node *dir,
		     struct mcfs_dirlist *d);
void mcfs_cstage_fill_attr(struct mcfs *fs, const struct mcfs_node *n,
			   struct stat *st);
int mcfs_cstage_mkdir(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		      mode_t mode, struct mcfs_node **out);
int mcfs_cstage_create(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		       mode_t mode, int flags, struct mcfs_node **node,
		       struct mcfs_fh **out);
int mcfs_cstage_open(struct mcfs *fs, struct mcfs_node *n, int flags,
		     struct mcfs_fh **out);
int mcfs_cstage_symlink(struct mcfs *fs, struct mcfs_node *dir,
			const char *target, const char *name,
			struct mcfs_node **out);
int mcfs_cstage_readlink(struct mcfs *fs, struct mcfs_node *n, char *buf,
			 size_t size);
int mcfs_cstage_unlink(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		       bool is_dir);
/** A staged root renamed in ckpt/ to a name without a leading dot is
 *  sealed: published under that name for every mount. */
int mcfs_cstage_rename(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		       struct mcfs_node *newdir, const char *newname,
		       unsigned flags);
/** user.mooncake.seal on a staged root: publish it under its name. */
int mcfs_cstage_seal_attr(struct mcfs *fs, struct mcfs_node *n);
int mcfs_cstage_setattr(struct mcfs *fs, struct mcfs_node *n,
			const struct stat *st, int to_set, struct mcfs_fh *fh);
void mcfs_cstage_read(fuse_req_t req, struct mcfs_fh *fh, size_t size,
		      off_t off);
int mcfs_cstage_write(struct mcfs_fh *fh, const char *buf, size_t size,
		      off_t off);
void mcfs_cstage_rm_tree(const char *path);

/* virt.c: .mooncake/ */
int mcfs_virt_lookup(struct mcfs *fs, struct mcfs_node *dir, const char *name,
		     struct mcfs_node **out);
int mcfs_virt_list(struct mcfs *fs, struct mcfs_node *dir,
		   struct mcfs_dirlist *d);
int mcfs_virt_open(struct mcfs *fs, struct mcfs_node *n, int flags,
		   struct mcfs_fh **out);

/* watch.c: follow the change feed, invalidate the kernel's caches */
int mcfs_watch_start(struct mcfs *fs);
void mcfs_watch_stop(struct mcfs *fs);

/* ---- locks.c: flock and POSIX locks, kept per name -------------------- */
struct flock;
struct mcfs_locks;
int mcfs_locks_init(struct mcfs_locks **out);
void mcfs_locks_fini(struct mcfs_locks *l);
/** flock(2) op (LOCK_SH/EX/UN, LOCK_NB) of the description owner on
 *  key; replies to req, at once or once granted (EINTR if interrupted). */
void mcfs_locks_flock(struct mcfs *fs, fuse_req_t req, const char *key,
		      struct mcfs_fh *fh, uint64_t owner, int op);
/** fcntl F_SETLK (sleep: F_SETLKW) of process owner on key; replies.
 *  Both call mcfs_file_locked(fh) on a grant, before its reply. */
void mcfs_locks_setlk(struct mcfs *fs, fuse_req_t req, const char *key,
		      struct mcfs_fh *fh, uint64_t owner,
		      const struct flock *lk, bool sleep);
/** fcntl F_GETLK: the first lock of another owner in the way; replies. */
void mcfs_locks_getlk(struct mcfs *fs, fuse_req_t req, const char *key,
		      uint64_t owner, const struct flock *lk);
/** A rename: the locks of key from (prefix: of every key starting with
 *  from) go to the new name. */
void mcfs_locks_rename(struct mcfs *fs, const char *from, const char *to,
		       bool prefix);
/** Release owner's flock (flock) or POSIX locks on key, and answer the
 *  waiters that it let in (a release, a flush). */
void mcfs_locks_drop(struct mcfs *fs, const char *key, uint64_t owner,
		     bool flock);

/* ops.c: the FUSE operations, dispatching on the node's kind */
extern const struct fuse_lowlevel_ops mcfs_ops;

#endif
