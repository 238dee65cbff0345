/* SPDX-License-Identifier: Apache-2.0 */
/* Response buffers and error mapping shared by the libcurl backends. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "curl_body.h"

size_t mc_curl_on_body(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct body_buf *b = arg;
	size_t n = size * nmemb;

	if (n > b->max - b->len) {
		b->overflow = true;
		return 0; /* aborts the transfer */
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 1024;
		char *d;

		while (cap < b->len + n + 1)
			cap *= 2;
		d = realloc(b->data, cap);
		if (!d)
			return 0;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, ptr, n);
	b->len += n;
	b->data[b->len] = '\0';
	return n;
}

int mc_curl_err(CURLcode cc, const struct body_buf *b)
{
	switch (cc) {
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	case CURLE_WRITE_ERROR:
		return b && b->overflow ? -EMSGSIZE : -ENOMEM;
	default:
		return -ECONNRESET;
	}
}

static curl_socket_t open_cloexec(void *arg, curlsocktype purpose,
				  struct curl_sockaddr *a)
{
	(void)arg;
	(void)purpose;
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

void mc_curl_cloexec(CURL *h)
{
	curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_cloexec);
}
