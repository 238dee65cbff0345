/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Names, messages and the store-code translation, all generated from the
 * tables in include/mooncake/mc_err.h so that nothing is written twice.
 */
#include <errno.h>
#include <string.h>

#include "mooncake/mc_err.h"

const char *mc_strerror(int rc)
{
	if (rc == 0)
		return "success";
	switch (rc) {
#define X(name, value, store, msg) \
	case value:                \
		return msg;
		MC_ERR_MAP(X)
#undef X
	}
	if (rc < 0 && rc > MC_ERR_BASE) {
		const char *s = strerrordesc_np(-rc);
		if (s)
			return s;
	}
	return "unknown error";
}

const char *mc_err_name(int rc)
{
	if (rc == 0)
		return "OK";
	switch (rc) {
#define X(name, value, store, msg) \
	case value:                \
		return #name;
		MC_ERR_MAP(X)
#undef X
	}
	if (rc < 0 && rc > MC_ERR_BASE) {
		const char *s = strerrorname_np(-rc);
		if (s)
			return s;
	}
	return "UNKNOWN";
}

int mc_err_to_store(int rc)
{
	if (rc >= 0)
		return rc == 0 ? MC_STORE_OK : MC_STORE_INTERNAL_ERROR;
	switch (rc) {
#define X(name, value, store, msg) \
	case value:                \
		return MC_STORE_##store;
		MC_ERR_MAP(X)
#undef X
#define X(eno, store) \
	case -eno:    \
		return MC_STORE_##store;
		MC_ERRNO_STORE_MAP(X)
#undef X
	}
	return MC_STORE_INTERNAL_ERROR;
}

const char *mc_store_err_name(int code)
{
	switch (code) {
#define X(name, value, msg) \
	case value:         \
		return #name;
		MC_STORE_ERR_MAP(X)
#undef X
	}
	return "UNKNOWN";
}

const char *mc_store_strerror(int code)
{
	switch (code) {
#define X(name, value, msg) \
	case value:         \
		return msg;
		MC_STORE_ERR_MAP(X)
#undef X
	}
	return "unknown error code";
}
