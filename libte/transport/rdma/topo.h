/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file topo.h
 * RDMA NIC discovery and upstream's NIC priority matrix (topo.c), from
 * sysfs: which verbs devices exist, their port, link layer, NUMA node and
 * PCI path, the GID index to use, and for every memory location
 * ("cpu:<node>", "cuda:<gpu>") the NICs to prefer and the others that may
 * serve it. Written ahead of the rdma transport (issue 19), which builds
 * its devices and descriptor ("devices", "priority_matrix") from it.
 *
 * Every path is read under a sysfs root, "/sys" on a real host and a
 * directory of the tests' own making in the unit tests (the topologies
 * one soft-RoCE device cannot show: several NICs, NUMA nodes, GPUs behind
 * PCIe switches).
 *
 * Threads: any; no state outside the struct it fills.
 */
#ifndef TE_RDMA_TOPO_H
#define TE_RDMA_TOPO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define RDMA_TOPO_NAME_MAX 64
#define RDMA_TOPO_PATH_MAX 512
/* GID entries read per port: the usable ones come first, and reading all
 * (up to 1024, each an open and a read) is slow under soft-RoCE. */
#define RDMA_TOPO_GIDS_SCANNED 16

struct rdma_nic {
	char name[RDMA_TOPO_NAME_MAX]; /* verbs device, "mlx5_0" */
	/* realpath of its PCI device; "" for a device without one (rxe) */
	char pci_path[RDMA_TOPO_PATH_MAX];
	int numa_node; /* -1: unknown */
	int port; /* the port used (MC_IB_PORT, 1 by default) */
	bool active; /* that port is ACTIVE */
	bool roce; /* its link layer is Ethernet */
	int gid_index; /* chosen (see rdma_topo_discover), -1: none */
	char gid[40]; /* that GID as sysfs prints it */
};

struct rdma_topo_opts {
	const char *sysfs_root; /* NULL: "/sys" */
	/* Upstream's device_name / rdma_devices: a comma list of device
	 * names to use, NULL or "" for every device found. */
	const char *devices;
	const char *filters; /* MC_TE_FILTERS: allow-list, comma list */
	const char *filters_exclude; /* MC_TE_FILTERS_EXCLUDE */
	int port; /* MC_IB_PORT; 0: 1 */
	int gid_index; /* MC_GID_INDEX; -1: chosen per device */
	/* MC_CUSTOM_TOPO_JSON: a file with the whole matrix, {"location":
	 * [[preferred], [available]]}; NULL: built from sysfs. */
	const char *custom_matrix_file;
};

struct rdma_topo {
	struct rdma_nic *nics;
	size_t n_nics;
	int n_numa; /* NUMA nodes found (node<n> directories), >= 1 */
	int n_gpus; /* NVIDIA GPUs found on the PCI bus */
	/* {"cpu:0": [["mlx5_0"], ["mlx5_1"]], "cuda:0": ...}: upstream's
	 * priority_matrix, owned */
	json_t *matrix;
};

/** The options upstream's variables give (MC_TE_FILTERS,
 *  MC_TE_FILTERS_EXCLUDE, MC_IB_PORT, MC_GID_INDEX, MC_CUSTOM_TOPO_JSON),
 *  with devices (borrowed) as the device list; sysfs_root NULL. */
struct rdma_topo_opts rdma_topo_opts_env(const char *devices);

/**
 * Find the NICs under opts->sysfs_root and build the matrix.
 *  - Devices: /sys/class/infiniband/<dev>, kept when named by devices (a
 *    named device that is missing is an error naming it), allowed by
 *    filters and not excluded by filters_exclude; sorted by name.
 *  - GID index: opts->gid_index when >= 0; else, on RoCE, the first RoCE
 *    v2 GID that holds an IPv4-mapped address, else the first RoCE v2
 *    GID, else the first non-zero GID; on InfiniBand, 0.
 *  - Matrix: "cpu:<n>" for each NUMA node prefers the NICs on node n,
 *    the others are available; "cuda:<i>" for each NVIDIA GPU (in PCI
 *    address order, CUDA_DEVICE_ORDER=PCI_BUS_ID's numbering) prefers,
 *    among the NICs of its NUMA node (all NICs when none is), those
 *    nearest on the PCI tree (fewest differing path components), the
 *    others available. Replaced whole by custom_matrix_file, whose names
 *    must all be NICs found (an error names the first that is not).
 * Returns 0, -ENODEV (no device left, or a named one missing) with err
 * saying which, or -EINVAL for a bad custom matrix, -ENOMEM.
 */
int rdma_topo_discover(const struct rdma_topo_opts *opts, struct rdma_topo *out,
		       char *err, size_t errlen);
void rdma_topo_free(struct rdma_topo *t);

/** Index of the NIC named name in t, or -1. */
int rdma_topo_find(const struct rdma_topo *t, const char *name);

/** Components that differ between two '/' paths (a PCI distance). */
int rdma_topo_path_distance(const char *a, const char *b);

#endif
