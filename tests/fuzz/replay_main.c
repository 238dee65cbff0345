/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main() for fuzz targets in builds without libFuzzer (MC_FUZZ=OFF): runs
 * every file named on the command line, or found under a named directory,
 * once through LLVMFuzzerTestOneInput, so ctest replays the committed
 * corpus, crash reproducers included, in every build, sanitized or not.
 *
 * Usage: <target> [-libfuzzer_flag ...] FILE|DIR...
 * Arguments starting with '-' are libFuzzer flags and are ignored. Exits 1
 * when a path cannot be read or when no input ran at all.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

/* Optional in a target: resolves to NULL when the target has none. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

#define MAX_DEPTH 8

struct replay {
	unsigned long ran;
	int failed;
};

/* Read a whole file into a buffer of exactly its size (for ASan). */
static int read_file(const char *path, uint8_t **out, size_t *out_len)
{
	FILE *f = fopen(path, "rbe");
	uint8_t *buf = NULL, *exact;
	size_t cap = 0, len = 0;
	int rc = 0;

	if (!f)
		return -errno;
	for (;;) {
		size_t got;

		if (len == cap) {
			uint8_t *n;

			cap = cap ? cap * 2 : 4096;
			n = realloc(buf, cap);
			if (!n) {
				rc = -ENOMEM;
				break;
			}
			buf = n;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
		if (got == 0)
			break;
	}
	if (!rc && ferror(f))
		rc = -EIO;
	fclose(f);
	if (rc) {
		free(buf);
		return rc;
	}
	exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return -ENOMEM;
	}
	if (len)
		memcpy(exact, buf, len);
	free(buf);
	*out = exact;
	*out_len = len;
	return 0;
}

static void run_file(const char *path, struct replay *r)
{
	uint8_t *data = NULL;
	size_t len = 0;
	int rc = read_file(path, &data, &len);

	if (rc) {
		fprintf(stderr, "replay: cannot read %s: %s\n", path,
			strerror(-rc));
		r->failed = 1;
		return;
	}
	fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
	(void)LLVMFuzzerTestOneInput(data, len);
	free(data);
	r->ran++;
}

static void run_path(const char *path, int depth, struct replay *r);

static void run_dir(const char *path, int depth, struct replay *r)
{
	struct dirent **names;
	int n = scandir(path, &names, NULL, alphasort);

	if (n < 0) {
		fprintf(stderr, "replay: cannot read directory %s: %s\n", path,
			strerror(errno));
		r->failed = 1;
		return;
	}
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		char child[PATH_MAX];
		int len;

		if (strcmp(name, ".") && strcmp(name, "..")) {
			len = snprintf(child, sizeof(child), "%s/%s", path,
				       name);
			if (len < 0 || (size_t)len >= sizeof(child)) {
				fprintf(stderr,
					"replay: path too long: %s/%s\n", path,
					name);
				r->failed = 1;
			} else {
				run_path(child, depth + 1, r);
			}
		}
		free(names[i]);
	}
	free(names);
}

static void run_path(const char *path, int depth, struct replay *r)
{
	struct stat st;

	if (stat(path, &st)) {
		fprintf(stderr, "replay: cannot read %s: %s\n", path,
			strerror(errno));
		r->failed = 1;
	} else if (S_ISDIR(st.st_mode)) {
		if (depth >= MAX_DEPTH) {
			fprintf(stderr, "replay: %s: nested too deep\n", path);
			r->failed = 1;
			return;
		}
		run_dir(path, depth, r);
	} else if (S_ISREG(st.st_mode) || depth == 0) {
		/* A named FIFO or device is read as given; found ones not. */
		run_file(path, r);
	}
}

int main(int argc, char **argv)
{
	struct replay r = { 0 };

	if (LLVMFuzzerInitialize)
		(void)LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		if (argv[i][0] == '-') {
			fprintf(stderr, "replay: ignoring flag %s\n", argv[i]);
			continue;
		}
		run_path(argv[i], 0, &r);
	}
	printf("replay: %lu inputs ran\n", r.ran);
	if (r.ran == 0) {
		fprintf(stderr, "replay: no inputs (usage: %s FILE|DIR...)\n",
			argc > 0 ? argv[0] : "fuzz_target");
		return 1;
	}
	return r.failed ? 1 : 0;
}
