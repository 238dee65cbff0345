/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared by the fuzz targets and replay_main.c: the libFuzzer entry points
 * and FUZZ_CHECK(), which aborts (a finding, for libFuzzer and for the
 * replay runner alike) when an invariant of the code under test breaks.
 */
#ifndef MC_FUZZ_COMMON_H
#define MC_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond)                                                 \
	do {                                                             \
		if (!(cond)) {                                           \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", \
				__FILE__, __LINE__, #cond);              \
			abort();                                         \
		}                                                        \
	} while (0)

#endif
