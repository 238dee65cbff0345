/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file service.h
 * The master's RPC methods: decode a request body, apply it to the state
 * under the master lock, encode the response frame.
 */
#ifndef MASTER_SERVICE_H
#define MASTER_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include "mc_rpc.h"

struct master;

/**
 * Answer one request. On 0, *frame (malloc'd, *len bytes) is the response
 * frame to send. -EPROTO: the body does not decode as the method's
 * request (the caller closes the connection); -ENOMEM.
 * An unknown method is answered (code -1012), not refused.
 */
int mst_service_call(struct master *m, const struct mc_rpc_hdr *h,
		     const uint8_t *body, uint8_t **frame, size_t *len);

#endif
