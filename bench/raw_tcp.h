/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file raw_tcp.h
 * The baseline: request/response ping-pong over plain loopback TCP, with
 * no protocol beyond an 8-byte frame header. It shows what the kernel and
 * the scheduler cost on this machine, so an HTTP figure can be read as a
 * ratio to it.
 *
 * Frame: u32 request length (header included), u32 response length, then
 * the request's remaining bytes; the server answers with that many bytes.
 * The server runs in-process: one thread accepting on 127.0.0.1:0 and one
 * blocking thread per connection.
 */
#ifndef RAW_TCP_H
#define RAW_TCP_H

#include <stddef.h>

#include "mc_compiler.h"

#define RAW_TCP_HDR 8u
#define RAW_TCP_MAX_MSG (4u << 20)

struct raw_server;

/** Serve on 127.0.0.1:*port; every server thread runs on cpu (-1: any). */
int raw_server_start(int cpu, struct raw_server **out, int *port) MC_MUST_CHECK;
/** Disconnects every client, joins every thread, frees everything. */
void raw_server_stop(struct raw_server *s);

struct raw_conn;

/** A persistent connection sending req_len-byte requests for resp_len. */
int raw_conn_open(int port, size_t req_len, size_t resp_len,
		  struct raw_conn **out) MC_MUST_CHECK;
void raw_conn_close(struct raw_conn *c);

/** One round trip: 0 or a negative errno. */
int raw_conn_call(struct raw_conn *c) MC_MUST_CHECK;

#endif
