/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file mc_fork.h
 * fork() awareness for handles with threads and connections (a store, a
 * transfer engine): a child of fork() has none of their threads and
 * shares their sockets and memory with the parent, so a handle made
 * before a fork must not be used in the child, nor torn down there.
 * Each handle remembers mc_fork_count() when it is made; a different
 * count later means this is a child of a fork since.
 */
#ifndef MC_FORK_H
#define MC_FORK_H

#include <stdbool.h>

/** How many fork()s lie between the process that first called this and
 *  the calling process (0 there; each child counts one more). */
unsigned mc_fork_count(void);

/** Whether a handle made when mc_fork_count() was @p made is its
 *  parent's (this process is a child of a fork since). */
bool mc_forked_since(unsigned made);

#endif
