/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Options of the mooncakefs daemon, the way mount(8) and FUSE users give
 * them:  mooncakefs [MASTER] MOUNTPOINT [-o opt[=val],...] [-f] [-d]
 * MASTER is host:port of mooncake_master (mount's "device"); every option
 * is also an -o key (docs/operations.md, "mooncakefs (the mount)").
 * Options that mount(8) and fstab add for their own use (_netdev,
 * defaults, noauto, x-*, ...) are accepted and ignored; FUSE's own
 * (allow_other, default_permissions, ro, fsname, ...) are handed to
 * libfuse.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_parse.h"
#include "mcfs.h"
#include "mooncake/mc_err.h"
#include "mooncake/mc_version.h"

static const char *const ignored[] = {
	"defaults",    "auto",	   "noauto",	 "user",     "nouser",
	"users",       "_netdev",  "nofail",	 "exec",     "noexec",
	"suid",	       "nosuid",   "dev",	 "nodev",    "atime",
	"noatime",     "relatime", "rw",	 "async",    "sync",
	"owner",       "group",	   "comment",	 "diratime", "nodiratime",
	"strictatime", "lazytime", "nolazytime", "loud",     "silent",
};

static bool is_ignored(const char *k)
{
	if (!strncmp(k, "x-", 2))
		return true;
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		if (!strcmp(k, ignored[i]))
			return true;
	return false;
}

static int set_str(char **dst, const char *v)
{
	char *n = strdup(v);

	if (!n)
		return -ENOMEM;
	free(*dst);
	*dst = n;
	return 0;
}

static int bad(const char *k, const char *v)
{
	fprintf(stderr, "mooncakefs: option %s: invalid value '%s'\n", k,
		v ? v : "");
	return -EINVAL;
}

static int set_secs(double *dst, const char *k, const char *v)
{
	double d;

	if (!v || mc_parse_double(v, &d) || d < 0)
		return bad(k, v);
	*dst = d;
	return 0;
}

/* One key[=value] of an -o list. */
static int one_opt(struct mcfs_opts *o, struct fuse_args *fargs, char *kv)
{
	char *eq = strchr(kv, '='), *v = eq ? eq + 1 : NULL;
	uint64_t u;
	int64_t i;
	bool b;

	if (eq)
		*eq = 0;
	/* Before '-' becomes '_': x-systemd.automount and the like. */
	if (is_ignored(kv))
		return 0;
	for (char *c = kv; *c; c++)
		if (*c == '-')
			*c = '_';
	if (is_ignored(kv))
		return 0;
#define STR(name, field)       \
	if (!strcmp(kv, name)) \
		return v ? set_str(&o->field, v) : bad(kv, v);
	STR("master", master)
	STR("master_server_address", master)
	STR("metadata", metadata)
	STR("metadata_server", metadata)
	STR("local_hostname", local_hostname)
	STR("protocol", protocol)
	STR("device", device)
	STR("device_name", device)
	STR("segment_name", segment_name)
	STR("auth_token_file", auth_token_file)
	STR("log_file", log_file)
	STR("ckpt_cache", ckpt_cache)
#undef STR
	if (!strcmp(kv, "segment_size") || !strcmp(kv, "global_segment_size"))
		return v && !mc_parse_size(v, &o->segment_size) ? 0 :
								  bad(kv, v);
	if (!strcmp(kv, "buffer_size") || !strcmp(kv, "local_buffer_size"))
		return v && !mc_parse_size(v, &o->buffer_size) ? 0 : bad(kv, v);
	if (!strcmp(kv, "ckpt_cache_size"))
		return v && !mc_parse_size(v, &o->ckpt_cache_size) ? 0 :
								     bad(kv, v);
	if (!strcmp(kv, "read_ahead")) {
		if (!v || mc_parse_size(v, &o->read_ahead))
			return bad(kv, v);
		if (o->read_ahead <= (64u << 20))
			return 0;
		fprintf(stderr,
			"mooncakefs: option read_ahead: '%s' is more than "
			"the most, 64MiB\n",
			v);
		return -EINVAL;
	}
	if (!strcmp(kv, "read_ahead_limit"))
		return v && !mc_parse_size(v, &o->read_ahead_limit) ?
			       0 :
			       bad(kv, v);
	if (!strcmp(kv, "staging_limit")) {
		if (!v || mc_parse_size(v, &o->staging_limit))
			return bad(kv, v);
		if (o->staging_limit)
			return 0;
		/* Not "no limit": every write whose size was not set first
		 * (echo > f, cp, tar) would fail with ENOSPC. */
		fprintf(stderr,
			"mooncakefs: option staging_limit=0: every write of a "
			"file whose size was not set first would fail "
			"(ENOSPC); give the memory for such writes, e.g. "
			"1GiB (the default)\n");
		return -EINVAL;
	}
	if (!strcmp(kv, "entry_timeout"))
		return set_secs(&o->entry_timeout, kv, v);
	if (!strcmp(kv, "attr_timeout"))
		return set_secs(&o->attr_timeout, kv, v);
	if (!strcmp(kv, "negative_timeout"))
		return set_secs(&o->negative_timeout, kv, v);
	if (!strcmp(kv, "rpc_timeout")) {
		if (!v || mc_parse_duration_ms(v, 1, &u) || !u || u > 3600000)
			return bad(kv, v);
		o->rpc_timeout_ms = (unsigned)u;
		return 0;
	}
	if (!strcmp(kv, "replicas") || !strcmp(kv, "threads")) {
		if (!v || mc_parse_i64(v, &i) || i < 1 ||
		    i > (kv[0] == 'r' ? MOONCAKE_MAX_REPLICAS : 256))
			return bad(kv, v);
		*(kv[0] == 'r' ? &o->replicas : &o->threads) = (unsigned)i;
		return 0;
	}
	if (!strcmp(kv, "uid") || !strcmp(kv, "gid")) {
		if (!v || mc_parse_i64(v, &i) || i < 0 || i > 0x7fffffff)
			return bad(kv, v);
		*(kv[0] == 'u' ? &o->uid : &o->gid) = i;
		return 0;
	}
	if (!strcmp(kv, "umask") || !strcmp(kv, "file_mode") ||
	    !strcmp(kv, "dir_mode")) {
		char *end;
		unsigned long m = v && *v ? strtoul(v, &end, 8) : 0;
		if (!v || !*v || *end || m > (kv[0] == 'u' ? 0777u : 07777u))
			return bad(kv, v);
		*(kv[0] == 'u' ? &o->umask_ :
		  kv[0] == 'f' ? &o->file_mode :
				 &o->dir_mode) = (unsigned)m;
		return 0;
	}
	if (!strcmp(kv, "syslog") || !strcmp(kv, "foreground") ||
	    !strcmp(kv, "debug") || !strcmp(kv, "xattr") ||
	    !strcmp(kv, "splice_read") || !strcmp(kv, "excl_create")) {
		b = true;
		if (v && mc_parse_bool(v, &b))
			return bad(kv, v);
		if (kv[1] == 'p')
			o->splice_read = b;
		else if (kv[0] == 's')
			o->syslog = b;
		else if (kv[0] == 'x')
			o->xattr = b;
		else if (kv[0] == 'f')
			o->foreground = b;
		else if (kv[0] == 'e')
			o->excl_create = b;
		else
			o->debug = o->foreground = b;
		return 0;
	}
	if (!strcmp(kv, "fsname"))
		o->fsname_set = true;
	if (!strcmp(kv, "ro") || !strcmp(kv, "read_only")) {
		o->read_only = true;
		return fuse_opt_add_arg(fargs, "-oro") ? -ENOMEM : 0;
	}
	if (!strcmp(kv, "allow_other") || !strcmp(kv, "default_permissions")) {
		if (kv[0] == 'a')
			o->allow_other = true;
		else
			o->default_permissions = true;
	}
	/* Anything else is FUSE's (allow_other, fsname=, max_read=, ...):
	 * libfuse refuses what it does not know. */
	{
		char arg[4200];
		snprintf(arg, sizeof(arg), "-o%s%s%s", kv, v ? "=" : "",
			 v ? v : "");
		return fuse_opt_add_arg(fargs, arg) ? -ENOMEM : 0;
	}
}

/* Does token t go on the address option before it, prev? An etcd
 * address lists its endpoints with commas (master=etcd://h1:2379,h2:2379,
 * as the first argument takes them), and -o, mount(8) and fstab split
 * options at commas too: a token whose key part holds ':' is no option
 * (no key has one) but the next endpoint. */
static bool continues(const char *prev, const char *t)
{
	static const char *const keys[] = { "master=", "master_server_address=",
					    "metadata=", "metadata_server=" };
	bool addr = false;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		addr |= !strncmp(prev, keys[i], strlen(keys[i]));
	return addr && strcspn(t, ":") < strcspn(t, "=");
}

static int opt_list(struct mcfs_opts *o, struct fuse_args *fargs,
		    const char *list)
{
	char *copy = strdup(list), *save = NULL, *prev = NULL;
	int rc = copy ? 0 : -ENOMEM;

	for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t && !rc;
	     t = strtok_r(NULL, ",", &save)) {
		if (prev && continues(prev, t)) {
			size_t n = strlen(prev), m = strlen(t) + 1;
			char *j = realloc(prev, n + 1 + m);
			if (!j) {
				rc = -ENOMEM;
				break;
			}
			prev = j;
			prev[n] = ',';
			memcpy(prev + n + 1, t, m);
			continue;
		}
		if (prev)
			rc = one_opt(o, fargs, prev);
		free(prev);
		prev = rc ? NULL : strdup(t);
		if (!rc && !prev)
			rc = -ENOMEM;
	}
	if (prev && !rc)
		rc = one_opt(o, fargs, prev);
	free(prev);
	free(copy);
	return rc;
}

void mcfs_usage(FILE *out)
{
	fprintf(out,
		"usage: mooncakefs [MASTER] MOUNTPOINT [-o opt[=val],...] [-f] "
		"[-d]\n"
		"       mount -t mooncakefs MASTER MOUNTPOINT -o opt,...\n"
		"Joins this node to the Mooncake pool of MASTER (host:port of "
		"mooncake_master, default 127.0.0.1:50051, or "
		"etcd://h1:2379,h2:2379 for HA masters) and shows it under "
		"MOUNTPOINT.\n\n"
		"options (-o):\n"
		"  master=ADDR           the master, instead of the first "
		"argument\n"
		"  metadata=URL          transfer engine metadata "
		"(http://h:p/metadata, etcd://h:p, P2PHANDSHAKE)\n"
		"  segment_size=SIZE     memory this node contributes (0: none; "
		"default 0)\n"
		"  buffer_size=SIZE      staging buffer of the client (64MiB)\n"
		"  protocol=tcp|rdma     transfer protocol (rdma: one-sided "
		"RDMA between hosts)\n"
		"  device=NAMES          RDMA devices for rdma, a comma list "
		"(default: all)\n"
		"  local_hostname=HOST   this node's address (127.0.0.1; "
		"with a master not on\n"
		"                        loopback: this host's address on "
		"the way to it)\n"
		"  segment_name=NAME     kept segment's name (default from "
		"the mount point)\n"
		"  auth_token_file=PATH  the pool's token (default "
		"MOONCAKE_AUTH_TOKEN_FILE, then\n"
		"                        the MOONCAKE_CONFIG_PATH file's "
		"auth_token_file)\n"
		"  replicas=N            replicas of files written here (1)\n"
		"  entry_timeout=S attr_timeout=S negative_timeout=S  kernel "
		"cache (60, 60, 1)\n"
		"  rpc_timeout=MS        master RPC timeout (5000)\n"
		"  staging_limit=SIZE    memory for writes of unknown size "
		"(1GiB); beyond it ENOSPC\n"
		"  ckpt_cache=DIR        where ckpt/ reads keep checkpoint shards "
		"(under DIR/<segment>;\n"
		"                        default /var/cache/mooncakefs/ckpt)\n"
		"  ckpt_cache_size=SIZE  their cap: past it, checkpoints not "
		"being read go,\n"
		"                        least recently read first (default: "
		"half that filesystem)\n"
		"  read_ahead=SIZE       fetched ahead of a file read "
		"sequentially from another\n"
		"                        member (8MiB, at most 64MiB; 0: off)\n"
		"  read_ahead_limit=SIZE memory for that, all files together "
		"(64MiB)\n"
		"  splice_read=BOOL      remote reads over TCP go from the "
		"socket to the kernel\n"
		"                        through a pipe, without a copy in "
		"the daemon (1)\n"
		"  threads=N             FUSE worker threads (8)\n"
		"  excl_create           O_CREAT|O_EXCL exclusive between "
		"mounts too (lock files\n"
		"                        between hosts; each such create "
		"publishes at once)\n"
		"  xattr                 serve the user.mooncake.* attributes "
		"(off: getxattr is not\n"
		"                        implemented, so ls -l sends none)\n"
		"  uid=N gid=N           owner of files and directories that "
		"carry none\n"
		"                        (put through the API; default: the "
		"mounting user)\n"
		"  file_mode=OCT dir_mode=OCT  their mode bits (0644, 0755)\n"
		"  umask=OCT             taken from those default modes (0)\n"
		"  ro allow_other default_permissions fsname=NAME  as for "
		"any FUSE filesystem;\n"
		"                        allow_other implies "
		"default_permissions\n"
		"  log_file=PATH syslog  where logs go once daemonized\n"
		"  -f foreground, -d debug (foreground, FUSE traces)\n");
}

int mcfs_parse_opts(int argc, char **argv, struct mcfs_opts *o,
		    struct fuse_args *fargs)
{
	const char *pos[2] = { NULL, NULL };
	int npos = 0, rc = 0;
	const char *env;

	*o = (struct mcfs_opts){
		.buffer_size = 64ull << 20,
		.entry_timeout = 60,
		.attr_timeout = 60,
		.negative_timeout = 1,
		.rpc_timeout_ms = 5000,
		.staging_limit = 1ull << 30,
		.read_ahead = 8u << 20,
		.read_ahead_limit = 64u << 20,
		.splice_read = true,
		.replicas = 1,
		.threads = 8,
		.uid = -1,
		.gid = -1,
		.file_mode = 0644,
		.dir_mode = 0755,
	};
	env = getenv("MOONCAKE_MASTER");
	if (set_str(&o->master, env && *env ? env : "127.0.0.1:50051") ||
	    set_str(&o->protocol, "tcp") || set_str(&o->device, "") ||
	    set_str(&o->local_hostname, "127.0.0.1"))
		return -ENOMEM;
	env = getenv("MOONCAKE_AUTH_TOKEN_FILE");
	if (env && *env && set_str(&o->auth_token_file, env))
		return -ENOMEM;
	env = getenv("MOONCAKE_TE_META_DATA_SERVER");
	if (set_str(&o->metadata,
		    env && *env ? env : "http://127.0.0.1:8080/metadata"))
		return -ENOMEM;
	if (fuse_opt_add_arg(fargs, argv[0]) ||
	    fuse_opt_add_arg(fargs, "-omax_read=1048576") ||
	    fuse_opt_add_arg(fargs, "-osubtype=mooncakefs"))
		return -ENOMEM;
	for (int i = 1; i < argc && !rc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			mcfs_usage(stdout);
			return 1;
		}
		if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
			printf("mooncakefs %s (libfuse %s)\n",
			       MC_VERSION_STRING, fuse_pkgversion());
			return 1;
		}
		if (!strcmp(a, "-f")) {
			o->foreground = true;
		} else if (!strcmp(a, "-d")) {
			o->debug = o->foreground = true;
		} else if (!strcmp(a, "-s") || !strcmp(a, "-n") ||
			   !strcmp(a, "-v")) {
			/* mount(8) passes -n (no mtab), -s (sloppy), -v */
		} else if (!strcmp(a, "-o")) {
			if (++i >= argc) {
				fprintf(stderr,
					"mooncakefs: -o needs a list\n");
				return -EINVAL;
			}
			rc = opt_list(o, fargs, argv[i]);
		} else if (!strncmp(a, "-o", 2)) {
			rc = opt_list(o, fargs, a + 2);
		} else if (a[0] == '-') {
			fprintf(stderr, "mooncakefs: unknown flag %s\n", a);
			return -EINVAL;
		} else if (npos < 2) {
			pos[npos++] = a;
		} else {
			fprintf(stderr, "mooncakefs: unexpected argument %s\n",
				a);
			return -EINVAL;
		}
	}
	if (rc)
		return rc;
	if (npos == 0) {
		mcfs_usage(stderr);
		return -EINVAL;
	}
	if (npos == 2 && set_str(&o->master, pos[0]))
		return -ENOMEM;
	o->mountpoint = realpath(pos[npos - 1], NULL);
	if (!o->mountpoint) {
		fprintf(stderr, "mooncakefs: mount point %s: %s\n",
			pos[npos - 1], mc_strerror(-errno));
		return -ENOENT;
	}
	if (o->debug && fuse_opt_add_arg(fargs, "-odebug"))
		return -ENOMEM;
	/* Open to other users: the kernel checks the owner and mode bits
	 * shown, or any local user could change or remove any file. */
	if (o->allow_other && !o->default_permissions) {
		o->default_permissions = true;
		if (fuse_opt_add_arg(fargs, "-odefault_permissions"))
			return -ENOMEM;
	}
	if (!o->fsname_set) {
		/* df and /proc/mounts show the pool's master; commas (an
		 * etcd:// list) escaped, or libfuse would split the option. */
		char arg[600];
		size_t n = (size_t)snprintf(arg, sizeof(arg), "-ofsname=");

		for (const char *c = o->master; *c && n + 3 < sizeof(arg);
		     c++) {
			if (*c == ',' || *c == '\\')
				arg[n++] = '\\';
			arg[n++] = *c;
		}
		arg[n] = '\0';
		if (fuse_opt_add_arg(fargs, arg))
			return -ENOMEM;
	}
	return 0;
}

void mcfs_free_opts(struct mcfs_opts *o)
{
	free(o->master);
	free(o->metadata);
	free(o->local_hostname);
	free(o->protocol);
	free(o->device);
	free(o->segment_name);
	free(o->auth_token_file);
	free(o->log_file);
	free(o->mountpoint);
	free(o->ckpt_cache);
}

int mcfs_opts_json(const struct mcfs_opts *o, char **out, size_t *len)
{
	json_t *j = json_pack(
		"{s:s,s:s,s:s,s:I,s:I,s:s,s:s,s:s,s:f,s:f,s:f,s:i,s:I,s:i,s:i,"
		"s:b,s:b,s:b,s:b,s:I,s:I,s:i,s:i,s:i,s:s,s:I,s:I,s:b,s:b}",
		"master", o->master, "metadata", o->metadata, "local_hostname",
		o->local_hostname, "segment_size", (json_int_t)o->segment_size,
		"buffer_size", (json_int_t)o->buffer_size, "protocol",
		o->protocol, "device", o->device, "segment_name",
		o->segment_name ? o->segment_name : "", "entry_timeout",
		o->entry_timeout, "attr_timeout", o->attr_timeout,
		"negative_timeout", o->negative_timeout, "rpc_timeout",
		(int)o->rpc_timeout_ms, "staging_limit",
		(json_int_t)o->staging_limit, "replicas", (int)o->replicas,
		"threads", (int)o->threads, "read_only", o->read_only, "xattr",
		o->xattr, "allow_other", o->allow_other, "default_permissions",
		o->default_permissions, "uid", (json_int_t)o->uid, "gid",
		(json_int_t)o->gid, "umask", (int)o->umask_, "file_mode",
		(int)o->file_mode, "dir_mode", (int)o->dir_mode, "mountpoint",
		o->mountpoint, "read_ahead", (json_int_t)o->read_ahead,
		"read_ahead_limit", (json_int_t)o->read_ahead_limit,
		"splice_read", o->splice_read, "excl_create", o->excl_create);
	char *s = j ? json_dumps(j, JSON_INDENT(2)) : NULL;

	json_decref(j);
	if (!s)
		return -ENOMEM;
	*len = strlen(s);
	*out = s;
	return 0;
}
