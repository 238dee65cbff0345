/* SPDX-License-Identifier: Apache-2.0 */
/*
 * RDMA NIC discovery and the NIC priority matrix: see topo.h. Everything
 * is read from sysfs text files, as libibverbs itself finds devices, so
 * it needs no verbs library and the unit tests can lay out any topology
 * in a directory.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo.h"

/* The first line of <root>/<rel> without its newline: 0 or -errno. */
static int read_line(const char *root, const char *rel, char *buf, size_t len)
{
	char path[RDMA_TOPO_PATH_MAX * 2];
	FILE *f;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f))
		rc = ferror(f) ? -EIO : -ENODATA;
	fclose(f);
	if (!rc)
		buf[strcspn(buf, "\n")] = '\0';
	return rc;
}

static long read_long(const char *root, const char *rel, long def)
{
	char buf[64], *end;
	long v;

	if (read_line(root, rel, buf, sizeof(buf)))
		return def;
	v = strtol(buf, &end, 0);
	return end == buf ? def : v;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of <root>/<rel> (not "." ones), sorted; NULL-terminated,
 * each and the array malloc'd; NULL when the directory is absent. */
static char **list_dir(const char *root, const char *rel)
{
	char path[RDMA_TOPO_PATH_MAX * 2];
	char **v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	dir = opendir(path);
	if (!dir)
		return NULL;
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		if (n + 2 > cap) {
			char **nv = realloc(v, (cap = cap ? 2 * cap : 16) *
						       sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		if (!(v[n] = strdup(d->d_name)))
			break;
		n++;
	}
	closedir(dir);
	if (!v && !(v = calloc(1, sizeof(*v))))
		return NULL;
	qsort(v, n, sizeof(*v), cmp_names);
	v[n] = NULL;
	return v;
}

static void free_list(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* name is one of the comma-separated names of list. */
static bool in_list(const char *list, const char *name)
{
	size_t nl = strlen(name);

	for (const char *p = list; p && *p;) {
		size_t l = strcspn(p, ",");
		while (l && (*p == ' ')) {
			p++;
			l--;
		}
		if (l == nl && !strncmp(p, name, nl))
			return true;
		p += l + (p[l] == ',');
	}
	return false;
}

static int components(const char *p)
{
	int n = 0;

	for (;;) {
		p += strspn(p, "/");
		if (!*p)
			return n;
		n++;
		p += strcspn(p, "/");
	}
}

int rdma_topo_path_distance(const char *a, const char *b)
{
	/* Past the common leading components, every one left differs. */
	for (;;) {
		size_t la, lb;

		a += strspn(a, "/");
		b += strspn(b, "/");
		la = strcspn(a, "/");
		lb = strcspn(b, "/");
		if (!la || la != lb || strncmp(a, b, la))
			break;
		a += la;
		b += lb;
	}
	return components(a) + components(b);
}

/* GID i of the port: its text, and whether it is RoCE v2. */
static bool gid_of(const char *root, const char *dev, int port, int i,
		   char *gid, size_t len, bool *v2)
{
	char rel[RDMA_TOPO_PATH_MAX], type[32];

	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/gids/%d", dev,
		 port, i);
	if (read_line(root, rel, gid, len))
		return false;
	if (!strcmp(gid, "0000:0000:0000:0000:0000:0000:0000:0000"))
		return false;
	snprintf(rel, sizeof(rel),
		 "class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev, port,
		 i);
	*v2 = !read_line(root, rel, type, sizeof(type)) &&
	      !strcasecmp(type, "RoCE v2");
	return true;
}

/* Upstream's automatic GID index (topo.h). */
static void choose_gid(const char *root, struct rdma_nic *n, int forced)
{
	char gid[sizeof(n->gid)];
	int first = -1, first_v2 = -1;
	bool v2;

	n->gid_index = -1;
	if (forced >= 0) {
		if (gid_of(root, n->name, n->port, forced, n->gid,
			   sizeof(n->gid), &v2))
			n->gid_index = forced;
		return;
	}
	for (int i = 0; i < RDMA_TOPO_GIDS_SCANNED; i++) {
		if (!gid_of(root, n->name, n->port, i, gid, sizeof(gid), &v2))
			continue;
		if (!n->roce) { /* InfiniBand: index 0 */
			first = i;
			break;
		}
		if (v2 && !strncmp(gid, "0000:0000:0000:0000:0000:ffff:", 30)) {
			first = first_v2 = i;
			break;
		}
		if (v2 && first_v2 < 0)
			first_v2 = i;
		if (first < 0)
			first = i;
	}
	n->gid_index = first_v2 >= 0 ? first_v2 : first;
	if (n->gid_index >= 0)
		gid_of(root, n->name, n->port, n->gid_index, n->gid,
		       sizeof(n->gid), &v2);
}

static void read_nic(const char *root, const char *dev, int port, int gid,
		     struct rdma_nic *n)
{
	char rel[RDMA_TOPO_PATH_MAX], buf[64], path[RDMA_TOPO_PATH_MAX * 2];
	char *real;

	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", dev);
	n->port = port;
	snprintf(path, sizeof(path), "%s/class/infiniband/%s/device", root,
		 dev);
	real = realpath(path, NULL);
	if (real)
		snprintf(n->pci_path, sizeof(n->pci_path), "%s", real);
	free(real);
	snprintf(rel, sizeof(rel), "class/infiniband/%s/device/numa_node", dev);
	n->numa_node = (int)read_long(root, rel, -1);
	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/state", dev,
		 port);
	n->active = !read_line(root, rel, buf, sizeof(buf)) &&
		    strstr(buf, "ACTIVE");
	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/link_layer",
		 dev, port);
	n->roce = !read_line(root, rel, buf, sizeof(buf)) &&
		  !strcmp(buf, "Ethernet");
	choose_gid(root, n, gid);
}

/* ---- the matrix ---------------------------------------------------------- */

static json_t *entry(json_t *pref, json_t *avail)
{
	json_t *e = json_array();

	json_array_append_new(e, pref);
	json_array_append_new(e, avail);
	return e;
}

static void add_cpu_entries(const struct rdma_topo *t, json_t *m)
{
	for (int node = 0; node < t->n_numa; node++) {
		json_t *pref = json_array(), *avail = json_array();
		char loc[32];

		for (size_t i = 0; i < t->n_nics; i++)
			json_array_append_new(
				t->nics[i].numa_node == node ? pref : avail,
				json_string(t->nics[i].name));
		snprintf(loc, sizeof(loc), "cpu:%d", node);
		json_object_set_new(m, loc, entry(pref, avail));
	}
}

/* One GPU: the NICs of its node (all when none), the nearest of those
 * preferred. */
static json_t *gpu_entry(const struct rdma_topo *t, const char *gpu_path,
			 int gpu_node)
{
	json_t *pref = json_array(), *avail = json_array();
	bool any_local = false;
	int best = INT_MAX;

	for (size_t i = 0; i < t->n_nics; i++)
		any_local |= t->nics[i].numa_node == gpu_node;
	for (size_t i = 0; i < t->n_nics; i++) {
		const struct rdma_nic *n = &t->nics[i];
		if ((!any_local || n->numa_node == gpu_node) && *n->pci_path) {
			int d = rdma_topo_path_distance(gpu_path, n->pci_path);
			if (d < best)
				best = d;
		}
	}
	for (size_t i = 0; i < t->n_nics; i++) {
		const struct rdma_nic *n = &t->nics[i];
		bool cand = !any_local || n->numa_node == gpu_node;
		bool near = cand && *n->pci_path &&
			    rdma_topo_path_distance(gpu_path, n->pci_path) ==
				    best;
		json_array_append_new(near ? pref : avail,
				      json_string(n->name));
	}
	return entry(pref, avail);
}

static bool is_nvidia_gpu(const char *root, const char *dev)
{
	char rel[RDMA_TOPO_PATH_MAX];
	long vendor, cls;

	snprintf(rel, sizeof(rel), "bus/pci/devices/%s/vendor", dev);
	vendor = read_long(root, rel, 0);
	snprintf(rel, sizeof(rel), "bus/pci/devices/%s/class", dev);
	cls = read_long(root, rel, 0);
	/* 0x0300xx VGA, 0x0302xx 3D controller (data-centre GPUs) */
	return vendor == 0x10de &&
	       ((cls >> 8) == 0x0300 || (cls >> 8) == 0x0302);
}

static void add_gpu_entries(struct rdma_topo *t, const char *root, json_t *m)
{
	char **devs = list_dir(root, "bus/pci/devices");

	for (size_t i = 0; devs && devs[i]; i++) {
		char rel[RDMA_TOPO_PATH_MAX], path[RDMA_TOPO_PATH_MAX * 2];
		char loc[32], *real;

		if (!is_nvidia_gpu(root, devs[i]))
			continue;
		snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", root,
			 devs[i]);
		real = realpath(path, NULL);
		snprintf(rel, sizeof(rel), "bus/pci/devices/%s/numa_node",
			 devs[i]);
		snprintf(loc, sizeof(loc), "cuda:%d", t->n_gpus++);
		json_object_set_new(m, loc,
				    gpu_entry(t, real ? real : path,
					      (int)read_long(root, rel, -1)));
		free(real);
	}
	free_list(devs);
}

/* A custom matrix from a file: every location maps to two lists of NICs
 * found here. */
static int load_matrix(const struct rdma_topo *t, const char *file,
		       json_t **out, char *err, size_t errlen)
{
	json_error_t je;
	json_t *m = json_load_file(file, 0, &je), *v;
	const char *loc;

	if (!m || !json_is_object(m)) {
		snprintf(err, errlen, "MC_CUSTOM_TOPO_JSON %s: %s", file,
			 m ? "not a JSON object" : je.text);
		json_decref(m);
		return -EINVAL;
	}
	json_object_foreach(m, loc, v) {
		if (!json_is_array(v) || json_array_size(v) != 2 ||
		    !json_is_array(json_array_get(v, 0)) ||
		    !json_is_array(json_array_get(v, 1))) {
			snprintf(err, errlen,
				 "MC_CUSTOM_TOPO_JSON %s: \"%s\" is not "
				 "[[preferred], [available]]",
				 file, loc);
			json_decref(m);
			return -EINVAL;
		}
		for (size_t k = 0; k < 2; k++) {
			json_t *l = json_array_get(v, k), *nic;
			size_t j;
			json_array_foreach(l, j, nic) {
				const char *s = json_string_value(nic);
				if (s && rdma_topo_find(t, s) >= 0)
					continue;
				snprintf(err, errlen,
					 "MC_CUSTOM_TOPO_JSON %s: \"%s\" names "
					 "%s, not an RDMA device in use here",
					 file, loc, s ? s : "a non-string");
				json_decref(m);
				return -EINVAL;
			}
		}
	}
	*out = m;
	return 0;
}

/* ---- discovery ----------------------------------------------------------- */

int rdma_topo_find(const struct rdma_topo *t, const char *name)
{
	for (size_t i = 0; i < t->n_nics; i++)
		if (!strcmp(t->nics[i].name, name))
			return (int)i;
	return -1;
}

/* A device named in o->devices that is not found: its name, else NULL. */
static const char *missing_device(const struct rdma_topo_opts *o, char **devs,
				  char *buf, size_t len)
{
	for (const char *p = o->devices; p && *p;) {
		size_t l = strcspn(p, ","), k;
		bool found = false;

		snprintf(buf, len, "%.*s", (int)l, p);
		for (k = 0; devs && devs[k] && !found; k++)
			found = !strcmp(devs[k], buf);
		if (*buf && !found)
			return buf;
		p += l + (p[l] == ',');
	}
	return NULL;
}

int rdma_topo_discover(const struct rdma_topo_opts *o, struct rdma_topo *out,
		       char *err, size_t errlen)
{
	const char *root = o->sysfs_root ? o->sysfs_root : "/sys";
	int port = o->port > 0 ? o->port : 1;
	char **devs = list_dir(root, "class/infiniband"), **nodes, name[64];
	size_t n = 0;
	bool devs_found;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (missing_device(o, devs, name, sizeof(name))) {
		char found[256] = "none";
		size_t at = 0;

		for (size_t i = 0; devs && devs[i] && at < sizeof(found); i++)
			at += (size_t)snprintf(found + at, sizeof(found) - at,
					       "%s%s", i ? "," : "", devs[i]);
		snprintf(err, errlen,
			 "RDMA device %s not found under %s/class/infiniband "
			 "(found: %s)",
			 name, root, found);
		free_list(devs);
		return -ENODEV;
	}
	for (size_t i = 0; devs && devs[i]; i++)
		n++;
	devs_found = n > 0;
	out->nics = calloc(n ? n : 1, sizeof(*out->nics));
	if (!out->nics) {
		free_list(devs);
		return -ENOMEM;
	}
	for (size_t i = 0; devs && devs[i]; i++) {
		const char *d = devs[i];
		if ((o->devices && *o->devices && !in_list(o->devices, d)) ||
		    (o->filters && *o->filters && !in_list(o->filters, d)) ||
		    (o->filters_exclude && in_list(o->filters_exclude, d)))
			continue;
		read_nic(root, d, port, o->gid_index,
			 &out->nics[out->n_nics++]);
	}
	free_list(devs);
	if (!out->n_nics) {
		snprintf(err, errlen,
			 "no RDMA device%s (%s/class/infiniband %s)",
			 o->devices && *o->devices ? " of those named" : "",
			 root,
			 devs_found ?
				 "lists none that the filters let through" :
				 "lists none");
		rdma_topo_free(out);
		return -ENODEV;
	}
	nodes = list_dir(root, "devices/system/node");
	for (size_t i = 0; nodes && nodes[i]; i++) {
		int k;
		if (sscanf(nodes[i], "node%d", &k) == 1 && k + 1 > out->n_numa)
			out->n_numa = k + 1;
	}
	free_list(nodes);
	if (!out->n_numa)
		out->n_numa = 1;
	if (o->custom_matrix_file && *o->custom_matrix_file) {
		rc = load_matrix(out, o->custom_matrix_file, &out->matrix, err,
				 errlen);
	} else {
		out->matrix = json_object();
		if (!out->matrix)
			rc = -ENOMEM;
		else {
			add_cpu_entries(out, out->matrix);
			add_gpu_entries(out, root, out->matrix);
		}
	}
	if (rc)
		rdma_topo_free(out);
	return rc;
}

void rdma_topo_free(struct rdma_topo *t)
{
	free(t->nics);
	json_decref(t->matrix);
	memset(t, 0, sizeof(*t));
}

struct rdma_topo_opts rdma_topo_opts_env(const char *devices)
{
	const char *gid = getenv("MC_GID_INDEX"), *port = getenv("MC_IB_PORT");

	return (struct rdma_topo_opts){
		.devices = devices,
		.filters = getenv("MC_TE_FILTERS"),
		.filters_exclude = getenv("MC_TE_FILTERS_EXCLUDE"),
		.port = port && *port ? atoi(port) : 0,
		.gid_index = gid && *gid ? atoi(gid) : -1,
		.custom_matrix_file = getenv("MC_CUSTOM_TOPO_JSON"),
	};
}
