/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file curl_body.h
 * What both libcurl-based metadata backends (meta_http.c, meta_etcd.c)
 * need around a request: a bounded response buffer and one mapping of
 * libcurl's errors onto ours.
 */
#ifndef MC_CURL_BODY_H
#define MC_CURL_BODY_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

/* A response body; data is NUL-terminated, at most max bytes. */
struct body_buf {
	char *data;
	size_t len, cap, max;
	bool overflow; /* the server sent more than max: transfer aborted */
};

/** CURLOPT_WRITEFUNCTION with CURLOPT_WRITEDATA = struct body_buf *. */
size_t mc_curl_on_body(char *ptr, size_t size, size_t nmemb, void *arg);

/** A failed transfer as a negative errno: -ETIMEDOUT, -ECONNREFUSED,
 *  -EHOSTUNREACH, -EMSGSIZE (body over its limit), -ENOMEM,
 *  -ECONNRESET for the rest. */
int mc_curl_err(CURLcode cc, const struct body_buf *b);

/** Have h open its sockets close-on-exec (again after curl_easy_reset):
 *  libcurl 7.x opens them without SOCK_CLOEXEC, so a program that forks
 *  and execs (os.system, popen, a C program's fork+exec) handed its
 *  connections to the metadata service, etcd or a master to the child,
 *  which held them open for its whole life. */
void mc_curl_cloexec(CURL *h);

#endif
