/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Topology: NUMA nodes (libnuma), network interfaces with their NUMA node
 * and speed (sysfs), RDMA devices with upstream's NIC priority matrix
 * (the registry's te__rdma_topology), and the NUMA node of a buffer.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <numa.h>
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "te_int.h"

static long read_long(const char *dir, const char *name, long def)
{
	char path[512], buf[64];
	FILE *f;
	long v = def;

	snprintf(path, sizeof(path), "/sys/class/net/%s/%s", dir, name);
	f = fopen(path, "re");
	if (!f)
		return def;
	if (fgets(buf, sizeof(buf), f))
		v = strtol(buf, NULL, 10);
	fclose(f);
	return v;
}

char *te_topology_json(void)
{
	json_t *root = json_object(), *nodes = json_array(),
	       *nics = json_array(), *rdma;
	struct dirent *d;
	DIR *dir;
	char *text;

	if (numa_available() >= 0) {
		for (int n = 0; n <= numa_max_node(); n++)
			if (numa_bitmask_isbitset(numa_all_nodes_ptr,
						  (unsigned)n))
				json_array_append_new(nodes, json_integer(n));
	} else {
		json_array_append_new(nodes, json_integer(0));
	}
	dir = opendir("/sys/class/net");
	while (dir && (d = readdir(dir))) {
		json_t *nic;

		if (d->d_name[0] == '.')
			continue;
		nic = json_object();
		json_object_set_new(nic, "name", json_string(d->d_name));
		json_object_set_new(nic, "numa_node",
				    json_integer(read_long(d->d_name,
							   "device/numa_node",
							   -1)));
		json_object_set_new(
			nic, "speed_mbps",
			json_integer(read_long(d->d_name, "speed", -1)));
		json_array_append_new(nics, nic);
	}
	if (dir)
		closedir(dir);
	json_object_set_new(root, "numa_nodes", nodes);
	json_object_set_new(root, "nics", nics);
	rdma = te__rdma_topology();
	if (rdma)
		json_object_set_new(root, "rdma", rdma);
	text = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	return text;
}

int te_mem_numa_node(const void *addr)
{
	int node = -1;

	if (get_mempolicy(&node, NULL, 0, (void *)addr,
			  MPOL_F_NODE | MPOL_F_ADDR))
		return -1;
	return node;
}
