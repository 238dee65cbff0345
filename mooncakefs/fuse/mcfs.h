/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mcfs.h
 * The mooncakefs FUSE daemon's internals: options, the inode table, file
 * handles, and the operations split by concern (ops_*.c). docs/design.md
 * ("Filesystem") explains the namespace and its semantics.
 *
 * Namespace: "/" holds kv/ (every object; '/' in a key makes
 * directories), ckpt/ (reserved) and .mooncake/ (read-only virtual files).
 * Objects are immutable: an inode is one *version* of a key (key, size,
 * mtime), so a name replaced by a rename gets a new inode and readers of
 * the old one are undisturbed.
 */
#ifndef MCFS_H
#define MCFS_H

#define FUSE_USE_VERSION 314

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/uio.h>
#include <stdint.h>

#include "stage.h"
#include "mooncake/store.h"
#include "mooncake/store_fs.h"

struct mcfs_opts {
	char *master; /* host:port */
	char *metadata;
	char *local_hostname;
	uint64_t segment_size;
	uint64_t buffer_size;
	char *protocol;
	char *device;
	char *segment_name;
	double entry_timeout, attr_timeout, negative_timeout;
	unsigned rpc_timeout_ms;
	uint64_t staging_limit;
	unsigned replicas;
	unsigned threads;
	bool read_only;
	bool fsname_set;
	bool foreground, debug;
	bool allow_other, default_permissions;
	int64_t uid, gid; /* -1: the mounting user's */
	unsigned umask_; /* applied to modes */
	char *log_file;
	bool syslog;
	char *mountpoint;
};

enum mcfs_kind {
	MCFS_ROOT = 1,
	MCFS_KV_DIR, /* kv/ or a directory inside it */
	MCFS_KV_FILE, /* one version of an object */
	MCFS_CKPT_DIR, /* ckpt/, reserved */
	MCFS_VDIR, /* .mooncake/ */
	MCFS_VFILE, /* .mooncake/<name> */
};

struct mcfs_node {
	uint64_t ino;
	enum mcfs_kind kind;
	struct mcfs_node *parent;
	char *name; /* as shown (escaped) */
	char *key; /* file: the key; dir: the key prefix ("" or "a/b/") */
	uint64_t size, mtime_ms; /* file version */
	uint64_t nlookup;
	struct mcfs_node *ino_next, *name_next; /* hash chains */
};

/* An open file. */
enum mcfs_fh_kind { FH_READ = 1, FH_WRITE, FH_VIRT, FH_DIR };

struct mcfs_fh {
	enum mcfs_fh_kind kind;
	pthread_mutex_t lock;
	/* FH_READ */
	mooncake_object_t obj;
	/* FH_WRITE: staged bytes, or a direct writer once the size is known */
	char *key, *tmp_key;
	uint64_t parent_ino; /* its name, to invalidate after the commit */
	char *name;
	struct mcfs_stage stage; /* bytes of a write of unknown size */
	uint64_t size;
	mooncake_writer_t writer;
	void *ranges; /* ranges a direct writer has written (write.c) */
	bool committed, failed;
	bool copied; /* a copy of the object it replaces (no O_TRUNC) */
	bool dirty; /* written or truncated since it was opened or copied */
	int error; /* errno of a failed write, reported at flush */
	/* FH_VIRT */
	char *text;
	size_t text_len;
	/* FH_DIR */
	char *prefix; /* the directory's key prefix */
	char *cursor; /* last name returned by the master, for paging */
	off_t next_off; /* offset of the next entry we would produce */
	struct mcfs_dirent *ents; /* current page */
	size_t n_ents, pos;
	bool eof;
	uint64_t dir_ino;
};

struct mcfs_dirent {
	char *name; /* escaped component */
	char *key; /* full key or prefix */
	bool is_dir;
	uint64_t size, mtime_ms;
};

struct mcfs {
	struct mcfs_opts o;
	struct fuse_session *se;
	mooncake_store_t store;
	/* set up in the background so the mount does not wait for the
	 * segment to be pre-faulted */
	pthread_mutex_t ready_lock;
	pthread_cond_t ready_cond;
	int ready; /* 0 pending, 1 ready, < 0 failed (a store code) */
	/* inode table */
	pthread_mutex_t itab_lock;
	struct mcfs_node **by_ino, **by_name;
	size_t n_buckets, n_nodes;
	uint64_t next_ino;
	struct mcfs_node *root, *kv, *ckpt, *vdir;
	/* directories made with mkdir and still empty (this mount only) */
	char **mkdirs;
	size_t n_mkdirs;
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
	_Atomic uint64_t n_lookups, n_invalidations, n_errors;
	uint64_t start_ms;
	uid_t uid;
	gid_t gid;
};

/* options.c */
int mcfs_parse_opts(int argc, char **argv, struct mcfs_opts *o,
		    struct fuse_args *fargs);
void mcfs_free_opts(struct mcfs_opts *o);
void mcfs_usage(FILE *out);
int mcfs_opts_json(const struct mcfs_opts *o, char **out, size_t *len);

/* names.c: key components <-> path names */
/** Escape one key component for display; malloc'd. */
char *mcfs_escape(const char *comp, size_t len);
/** Unescape a path name; malloc'd key component, NULL if malformed. */
char *mcfs_unescape(const char *name, size_t *len);
/** Hidden internal names (temporary keys of writes in progress). */
bool mcfs_hidden_key(const char *key);
#define MCFS_TMP_PREFIX ".mooncakefs-tmp/"

/* inode.c */
int mcfs_itab_init(struct mcfs *fs);
void mcfs_itab_free(struct mcfs *fs);
struct mcfs_node *mcfs_node_get(struct mcfs *fs, uint64_t ino);
/** Find or make the child node; takes a lookup reference. */
struct mcfs_node *mcfs_node_child(struct mcfs *fs, struct mcfs_node *parent,
				  const char *name, enum mcfs_kind kind,
				  const char *key, uint64_t size,
				  uint64_t mtime_ms);
void mcfs_node_forget(struct mcfs *fs, uint64_t ino, uint64_t n);
/** A rename made through this mount: the kernel now calls the moved
 *  inodes by their new name, so their key follows. */
void mcfs_node_renamed(struct mcfs *fs, struct mcfs_node *parent,
		       const char *name, struct mcfs_node *newparent,
		       const char *newname, const char *newkey);
/** Deepest known directory for key and the component after it. */
struct mcfs_node *mcfs_node_dir_for(struct mcfs *fs, const char *key,
				    char **next_name);
void mcfs_fill_attr(struct mcfs *fs, const struct mcfs_node *n,
		    struct stat *st);

/* registered read buffers (ops_io.c) */
int mcfs_bufs_init(struct mcfs *fs, unsigned n);
void mcfs_bufs_free(struct mcfs *fs);

/* store access */
int mcfs_wait_ready(struct mcfs *fs);
int mcfs_errno(int store_code);

/* ops_meta.c, ops_io.c, ops_dir.c, virt.c */
extern const struct fuse_lowlevel_ops mcfs_ops;
void mcfs_op_init(void *userdata, struct fuse_conn_info *conn);
void mcfs_op_destroy(void *userdata);
void mcfs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void mcfs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void mcfs_op_forget_multi(fuse_req_t req, size_t count,
			  struct fuse_forget_data *forgets);
void mcfs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void mcfs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		     int to_set, struct fuse_file_info *fi);
void mcfs_op_statfs(fuse_req_t req, fuse_ino_t ino);
void mcfs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void mcfs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		    fuse_ino_t newparent, const char *newname,
		    unsigned int flags);
void mcfs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		   mode_t mode);
void mcfs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void mcfs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		      size_t size);
void mcfs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void mcfs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		      const char *value, size_t size, int flags);
void mcfs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

void mcfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void mcfs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		    mode_t mode, struct fuse_file_info *fi);
void mcfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		  struct fuse_file_info *fi);
void mcfs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		   off_t off, struct fuse_file_info *fi);
void mcfs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void mcfs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void mcfs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
		       off_t length, struct fuse_file_info *fi);
void mcfs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		   struct fuse_file_info *fi);

void mcfs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void mcfs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi);
void mcfs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi);
void mcfs_op_releasedir(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi);

/* writes (write.c): set the final size, commit at flush */
int mcfs_write_truncate(struct mcfs *fs, struct mcfs_fh *fh, uint64_t size);
int mcfs_write_data(struct mcfs *fs, struct mcfs_fh *fh, const char *buf,
		    size_t len, uint64_t off);
int mcfs_write_commit(struct mcfs *fs, struct mcfs_fh *fh);
/** Read staged bytes (under fh->lock): fills up to max_iov pieces, holes
 *  pointing at mcfs_zeros; returns how many, *total their bytes. */
int mcfs_write_read(struct mcfs_fh *fh, uint64_t off, size_t size,
		    struct iovec *iov, int max_iov, size_t *total);
#define MCFS_ZEROS (1u << 20)
extern const char mcfs_zeros[MCFS_ZEROS];
void mcfs_write_free(struct mcfs *fs, struct mcfs_fh *fh);

/* virt.c: .mooncake/ */
extern const char *const mcfs_vfiles[];
int mcfs_virt_render(struct mcfs *fs, const char *name, char **text,
		     size_t *len);

/* watch.c: follow the change feed, invalidate the kernel's caches */
int mcfs_watch_start(struct mcfs *fs);
void mcfs_watch_stop(struct mcfs *fs);

/* mkdir set (ops_meta.c) */
bool mcfs_mkdir_has(struct mcfs *fs, const char *prefix);
/** A list callback counting entries into an int (ops_meta.c). */
void mcfs_count_entry(void *arg, const mooncake_list_entry_t *e);
void mcfs_mkdir_forget(struct mcfs *fs, const char *prefix);

#endif
