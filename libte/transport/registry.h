/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file registry.h
 * The built-in transports, one line each: X(<ID>, <name>), where the folder
 * transport/<name>/ holds the transport (its CMakeLists.txt adds its
 * sources to te) and defines `const struct te_transport_ops te_<name>_ops`.
 * The order is the order of preference: a request takes the first
 * transport that reaches its target (te_int.h numbers them TE_TP_<ID>).
 * Adding a transport is its folder plus one line here; a transport that
 * needs an optional library guards its line and its folder's sources with
 * the same build option.
 */
#ifndef TE_TRANSPORT_REGISTRY_H
#define TE_TRANSPORT_REGISTRY_H

/* rdma is built where libibverbs is (MC_HAVE_RDMA, a compile definition
 * of te that everything including te_int.h sees). */
#ifdef MC_HAVE_RDMA
#define TE_TRANSPORT_RDMA(X) X(RDMA, rdma)
#else
#define TE_TRANSPORT_RDMA(X)
#endif

#define TE_TRANSPORTS(X)      \
	X(LOCAL, local)       \
	X(CUDA_IPC, cuda_ipc) \
	X(SHM, shm)           \
	TE_TRANSPORT_RDMA(X)  \
	X(TCP, tcp)

#endif
