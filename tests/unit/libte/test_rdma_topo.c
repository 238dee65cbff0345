/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libte/transport/rdma/topo.c over topologies laid out as sysfs trees in
 * a directory of the test's own: what one soft-RoCE device in a VM cannot
 * show (several NICs, two NUMA nodes, GPUs behind PCIe switches, RoCE and
 * InfiniBand GID tables, filters, a custom matrix).
 *
 * The host of most tests: NUMA nodes 0 and 1;
 *   switch A (node 0): mlx5_0 and GPU 0000:03:00.0
 *   switch B (node 0): mlx5_1 (RoCE, no IPv4 GID) and GPU 0000:05:00.0
 *   node 1:            mlx5_2 (InfiniBand), GPU 0000:83:00.0, no NIC near
 *   rxe0: soft-RoCE, no PCI device (numa -1)
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "transport/rdma/topo.h"

static char root[PATH_MAX];

static void mkdirs(const char *rel)
{
	char path[PATH_MAX * 2];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(path, 0755);
			*p = '/';
		}
	mkdir(path, 0755);
}

static void put(const char *rel, const char *text)
{
	char path[PATH_MAX * 2], dir[PATH_MAX * 2];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s", rel);
	if (strrchr(dir, '/')) {
		*strrchr(dir, '/') = '\0';
		mkdirs(dir);
	}
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	cr_assert(f, "%s", path);
	fprintf(f, "%s\n", text);
	fclose(f);
}

static void link_to(const char *rel, const char *target_rel)
{
	char path[PATH_MAX * 2], target[PATH_MAX * 2], dir[PATH_MAX * 2];

	snprintf(dir, sizeof(dir), "%s", rel);
	*strrchr(dir, '/') = '\0';
	mkdirs(dir);
	mkdirs(target_rel);
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(target, sizeof(target), "%s/%s", root, target_rel);
	cr_assert_eq(symlink(target, path), 0, "%s", path);
}

/* A NIC: its PCI device (pci "" for none), node, port 1 state and link
 * layer, and GIDs (gids[i] "" for an unused entry, types "RoCE v2", ...). */
static void nic(const char *name, const char *pci, int node, bool active,
		const char *link, const char *const *gids,
		const char *const *types, int n_gids)
{
	char rel[512], val[32];

	if (*pci) {
		snprintf(rel, sizeof(rel), "class/infiniband/%s/device", name);
		link_to(rel, pci);
		snprintf(rel, sizeof(rel), "%s/numa_node", pci);
		snprintf(val, sizeof(val), "%d", node);
		put(rel, val);
	}
	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/1/state", name);
	put(rel, active ? "4: ACTIVE" : "1: DOWN");
	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/1/link_layer",
		 name);
	put(rel, link);
	for (int i = 0; i < n_gids; i++) {
		snprintf(rel, sizeof(rel),
			 "class/infiniband/%s/ports/1/gids/%d", name, i);
		put(rel, *gids[i] ? gids[i] :
				    "0000:0000:0000:0000:0000:0000:0000:0000");
		if (types && types[i]) {
			snprintf(rel, sizeof(rel),
				 "class/infiniband/%s/ports/1/gid_attrs/"
				 "types/%d",
				 name, i);
			put(rel, types[i]);
		}
	}
}

static void gpu(const char *bdf, const char *pci, int node)
{
	char rel[512], val[32];

	snprintf(rel, sizeof(rel), "bus/pci/devices/%s", bdf);
	link_to(rel, pci);
	snprintf(rel, sizeof(rel), "%s/vendor", pci);
	put(rel, "0x10de");
	snprintf(rel, sizeof(rel), "%s/class", pci);
	put(rel, "0x030200");
	snprintf(rel, sizeof(rel), "%s/numa_node", pci);
	snprintf(val, sizeof(val), "%d", node);
	put(rel, val);
}

#define LL "fe80:0000:0000:0000:0202:c9ff:fe00:0001"
#define V4 "0000:0000:0000:0000:0000:ffff:0a00:0001"
#define IB "fe80:0000:0000:0000:0002:c903:0010:0001"

static void host(void)
{
	static const char *const roce_gids[] = { LL, LL, "", V4 };
	static const char *const roce_types[] = { "IB/RoCE v1", "RoCE v2", NULL,
						  "RoCE v2" };
	static const char *const roce2_gids[] = { LL, LL };
	static const char *const roce2_types[] = { "IB/RoCE v1", "RoCE v2" };
	static const char *const ib_gids[] = { IB };
	static const char *const rxe_gids[] = { LL, V4 };
	static const char *const rxe_types[] = { "RoCE v2", "RoCE v2" };

	snprintf(root, sizeof(root), "/tmp/mc_topo.XXXXXX");
	cr_assert(mkdtemp(root));
	mkdirs("devices/system/node/node0");
	mkdirs("devices/system/node/node1");
	nic("mlx5_0",
	    "devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0", 0,
	    true, "Ethernet", roce_gids, roce_types, 4);
	nic("mlx5_1",
	    "devices/pci0000:00/0000:00:02.0/0000:04:00.0/0000:04:01.0", 0,
	    true, "Ethernet", roce2_gids, roce2_types, 2);
	nic("mlx5_2", "devices/pci0000:80/0000:80:01.0/0000:81:00.0", 1, true,
	    "InfiniBand", ib_gids, NULL, 1);
	nic("rxe0", "", -1, true, "Ethernet", rxe_gids, rxe_types, 2);
	gpu("0000:03:00.0",
	    "devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:03:00.0", 0);
	gpu("0000:05:00.0",
	    "devices/pci0000:00/0000:00:02.0/0000:04:00.0/0000:05:00.0", 0);
	gpu("0000:83:00.0", "devices/pci0000:80/0000:80:03.0/0000:83:00.0", 1);
	/* not a GPU: another vendor's device */
	put("bus/pci/devices/0000:00:1f.0/vendor", "0x8086");
	put("bus/pci/devices/0000:00:1f.0/class", "0x030000");
}

static void cleanup(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	cr_expect_eq(system(cmd), 0);
}

TestSuite(rdma_topo, .init = host, .fini = cleanup);

/* "a,b" of list k of the matrix entry loc. */
static char *names(const struct rdma_topo *t, const char *loc, size_t k)
{
	static char buf[256];
	json_t *l = json_array_get(json_object_get(t->matrix, loc), k), *v;
	size_t i, at = 0;

	buf[0] = '\0';
	json_array_foreach(l, i, v)
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s%s",
				       i ? "," : "", json_string_value(v));
	return buf;
}

static struct rdma_topo discover(struct rdma_topo_opts o)
{
	struct rdma_topo t;
	char err[256] = "";

	o.sysfs_root = root;
	if (!o.gid_index)
		o.gid_index = -1;
	cr_assert_eq(rdma_topo_discover(&o, &t, err, sizeof(err)), 0, "%s",
		     err);
	return t;
}

Test(rdma_topo, devices_ports_and_gids)
{
	struct rdma_topo t = discover((struct rdma_topo_opts){ 0 });

	cr_assert_eq(t.n_nics, 4);
	cr_expect_str_eq(t.nics[0].name, "mlx5_0");
	cr_expect_str_eq(t.nics[3].name, "rxe0");
	cr_expect_eq(t.n_numa, 2);
	cr_expect_eq(t.n_gpus, 3);
	for (int i = 0; i < 4; i++)
		cr_expect(t.nics[i].active, "%s", t.nics[i].name);
	/* RoCE: the RoCE v2 GID with an IPv4-mapped address, past a v1
	 * one, a v2 link-local one and an unused entry */
	cr_expect(t.nics[0].roce);
	cr_expect_eq(t.nics[0].gid_index, 3);
	cr_expect_str_eq(t.nics[0].gid, V4);
	/* no IPv4-mapped GID: the first RoCE v2 one, past a v1 one */
	cr_expect_eq(t.nics[1].gid_index, 1);
	/* InfiniBand: index 0 */
	cr_expect(!t.nics[2].roce);
	cr_expect_eq(t.nics[2].gid_index, 0);
	cr_expect_eq(t.nics[2].numa_node, 1);
	/* soft-RoCE: no PCI device, no NUMA node */
	cr_expect_str_eq(t.nics[3].pci_path, "");
	cr_expect_eq(t.nics[3].numa_node, -1);
	cr_expect_eq(t.nics[3].gid_index, 1);
	rdma_topo_free(&t);
}

Test(rdma_topo, matrix_by_numa_node_and_pci_distance)
{
	struct rdma_topo t = discover((struct rdma_topo_opts){ 0 });

	cr_expect_str_eq(names(&t, "cpu:0", 0), "mlx5_0,mlx5_1");
	cr_expect_str_eq(names(&t, "cpu:0", 1), "mlx5_2,rxe0");
	cr_expect_str_eq(names(&t, "cpu:1", 0), "mlx5_2");
	cr_expect_str_eq(names(&t, "cpu:1", 1), "mlx5_0,mlx5_1,rxe0");
	/* GPUs in PCI address order; each prefers the NIC behind its own
	 * switch */
	cr_expect_str_eq(names(&t, "cuda:0", 0), "mlx5_0");
	cr_expect_str_eq(names(&t, "cuda:0", 1), "mlx5_1,mlx5_2,rxe0");
	cr_expect_str_eq(names(&t, "cuda:1", 0), "mlx5_1");
	/* the node-1 GPU: its node's NIC, however far on the PCI tree */
	cr_expect_str_eq(names(&t, "cuda:2", 0), "mlx5_2");
	cr_expect_null(json_object_get(t.matrix, "cuda:3"));
	rdma_topo_free(&t);
}

Test(rdma_topo, named_devices_filters_and_forced_gid)
{
	struct rdma_topo t = discover((struct rdma_topo_opts){
		.devices = "mlx5_1,rxe0", .gid_index = 1 });
	struct rdma_topo_opts o = { .sysfs_root = root, .gid_index = -1 };
	char err[256] = "";

	cr_assert_eq(t.n_nics, 2);
	cr_expect_str_eq(t.nics[0].name, "mlx5_1");
	cr_expect_eq(t.nics[0].gid_index, 1); /* forced */
	cr_expect_str_eq(names(&t, "cpu:1", 1), "mlx5_1,rxe0");
	rdma_topo_free(&t);

	t = discover((struct rdma_topo_opts){ .filters = "mlx5_0,mlx5_2",
					      .filters_exclude = "mlx5_2" });
	cr_assert_eq(t.n_nics, 1);
	cr_expect_str_eq(t.nics[0].name, "mlx5_0");
	rdma_topo_free(&t);

	/* a named device that is not there: an error naming it and what
	 * was found */
	o.devices = "mlx5_0,mlx5_9";
	cr_expect_eq(rdma_topo_discover(&o, &t, err, sizeof(err)), -ENODEV);
	cr_expect(strstr(err, "mlx5_9") && strstr(err, "rxe0"), "%s", err);
	/* everything filtered out */
	o.devices = NULL;
	o.filters_exclude = "mlx5_0,mlx5_1,mlx5_2,rxe0";
	cr_expect_eq(rdma_topo_discover(&o, &t, err, sizeof(err)), -ENODEV);
	cr_expect(strstr(err, "no RDMA device"), "%s", err);
}

Test(rdma_topo, custom_matrix)
{
	char file[PATH_MAX + 32], err[256] = "";
	struct rdma_topo_opts o = { .sysfs_root = root,
				    .gid_index = -1,
				    .custom_matrix_file = file };
	struct rdma_topo t;
	FILE *f;

	snprintf(file, sizeof(file), "%s/topo.json", root);
	f = fopen(file, "w");
	fputs("{\"cpu:0\": [[\"mlx5_1\"], [\"mlx5_0\"]]}", f);
	fclose(f);
	cr_assert_eq(rdma_topo_discover(&o, &t, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_str_eq(names(&t, "cpu:0", 0), "mlx5_1");
	cr_expect_null(json_object_get(t.matrix, "cpu:1"));
	rdma_topo_free(&t);

	f = fopen(file, "w");
	fputs("{\"cpu:0\": [[\"mlx5_7\"], []]}", f);
	fclose(f);
	cr_expect_eq(rdma_topo_discover(&o, &t, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "mlx5_7"), "%s", err);
	f = fopen(file, "w");
	fputs("{\"cpu:0\": [\"mlx5_0\"]}", f);
	fclose(f);
	cr_expect_eq(rdma_topo_discover(&o, &t, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "[[preferred], [available]]"), "%s", err);
	f = fopen(file, "w");
	fputs("{not json", f);
	fclose(f);
	cr_expect_eq(rdma_topo_discover(&o, &t, err, sizeof(err)), -EINVAL);
}

Test(rdma_topo, no_devices_at_all)
{
	struct rdma_topo_opts o = { .gid_index = -1 };
	struct rdma_topo t;
	char empty[PATH_MAX + 8], err[256] = "";

	snprintf(empty, sizeof(empty), "%s/empty", root);
	mkdir(empty, 0755);
	o.sysfs_root = empty;
	cr_expect_eq(rdma_topo_discover(&o, &t, err, sizeof(err)), -ENODEV);
	cr_expect(strstr(err, "class/infiniband"), "%s", err);
}

Test(rdma_topo, pci_distance)
{
	cr_expect_eq(rdma_topo_path_distance("/a/b/c", "/a/b/c"), 0);
	cr_expect_eq(rdma_topo_path_distance("/a/b/c", "/a/b/d"), 2);
	cr_expect_eq(rdma_topo_path_distance("/a/b/c/d", "/a/x"), 4);
	cr_expect_eq(rdma_topo_path_distance("/a/b", "/a/b/c"), 1);
	cr_expect_eq(rdma_topo_path_distance("", "/a"), 1);
}
