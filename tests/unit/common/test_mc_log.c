/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/mc_log.c: level names, level filtering, a
 * replacement sink, the stderr and file sinks' line format, MC_LOG_LEVEL.
 * Criterion runs each test in its own process, so the global level and
 * sink never leak from one test into another.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mc_log.h"

#define MAX_LINES 16

static struct {
	int n;
	int level[MAX_LINES];
	char line[MAX_LINES][4096];
	void *arg[MAX_LINES];
} got;

static void capture_sink(int level, const char *line, void *arg)
{
	if (got.n >= MAX_LINES)
		return;
	got.level[got.n] = level;
	got.arg[got.n] = arg;
	snprintf(got.line[got.n], sizeof(got.line[0]), "%s", line);
	got.n++;
}

Test(mc_log_parse_level, names_any_case)
{
	static const struct {
		const char *in;
		int want;
	} cases[] = {
		{ "error", MC_LOG_ERROR },
		{ "ERROR", MC_LOG_ERROR },
		{ "err", MC_LOG_ERROR },
		{ "warn", MC_LOG_WARN },
		{ "WARNING", MC_LOG_WARN },
		{ "Warning", MC_LOG_WARN },
		{ "notice", MC_LOG_NOTICE },
		{ "info", MC_LOG_INFO },
		{ "INFO", MC_LOG_INFO },
		{ "debug", MC_LOG_DEBUG },
		{ "Debug", MC_LOG_DEBUG },
		{ "trace", MC_LOG_TRACE },
		{ "3", MC_LOG_ERROR },
		{ "4", MC_LOG_WARN },
		{ "5", MC_LOG_NOTICE },
		{ "6", MC_LOG_INFO },
		{ "7", MC_LOG_DEBUG },
		{ "8", MC_LOG_TRACE },
		/* syslog's emerg/alert/crit are at least "error" here. */
		{ "0", MC_LOG_ERROR },
		{ "2", MC_LOG_ERROR },
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		int level = -1;

		cr_expect_eq(mc_log_parse_level(cases[i].in, &level), 0,
			     "\"%s\"", cases[i].in);
		cr_expect_eq(level, cases[i].want, "\"%s\" gave %d",
			     cases[i].in, level);
	}
}

Test(mc_log_parse_level, invalid)
{
	static const char *const cases[] = {
		"",	  "9",	   "-1",
		"7x",	  "x7",	   "verbose",
		"debugg", "in fo", "99999999999999999999"
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		int level = -1;

		cr_expect_eq(mc_log_parse_level(cases[i], &level), -EINVAL,
			     "\"%s\"", cases[i]);
		cr_expect_eq(level, -1, "level written for \"%s\"", cases[i]);
	}
	cr_expect_eq(mc_log_parse_level(NULL, &(int){ 0 }), -EINVAL);
}

Test(mc_log, set_level_clamps)
{
	mc_log_set_level(MC_LOG_DEBUG);
	cr_expect_eq(mc_log_get_level(), MC_LOG_DEBUG);
	mc_log_set_level(0);
	cr_expect_eq(mc_log_get_level(), MC_LOG_ERROR);
	mc_log_set_level(100);
	cr_expect_eq(mc_log_get_level(), MC_LOG_TRACE);
}

Test(mc_log, default_level_is_info)
{
	cr_expect_eq(mc_log_get_level(), MC_LOG_INFO);
}

Test(mc_log, sink_receives_lines)
{
	int tag;

	mc_log_set_sink(capture_sink, &tag);
	mc_log_warn("test", "hello %s %d", "world", 42);
	cr_assert_eq(got.n, 1);
	cr_expect_eq(got.level[0], MC_LOG_WARN);
	cr_expect(got.arg[0] == &tag, "sink arg not passed through");
	cr_expect(strstr(got.line[0], "hello world 42") != NULL, "line '%s'",
		  got.line[0]);
	cr_expect(strchr(got.line[0], '\n') == NULL,
		  "sink lines carry no newline: '%s'", got.line[0]);
}

Test(mc_log, level_filtering)
{
	mc_log_set_sink(capture_sink, NULL);
	mc_log_set_level(MC_LOG_WARN);
	mc_log_err("t", "e1");
	mc_log_warn("t", "w1");
	mc_log_notice("t", "n1");
	mc_log_info("t", "i1");
	mc_log_debug("t", "d1");
	mc_log_trace("t", "t1");
	cr_assert_eq(got.n, 2);
	cr_expect(strstr(got.line[0], "e1") != NULL);
	cr_expect_eq(got.level[0], MC_LOG_ERROR);
	cr_expect(strstr(got.line[1], "w1") != NULL);
	cr_expect_eq(got.level[1], MC_LOG_WARN);

	got.n = 0;
	mc_log_set_level(MC_LOG_TRACE);
	mc_log_debug("t", "d2");
	mc_log_trace("t", "t2");
	cr_assert_eq(got.n, 2);
	cr_expect_eq(got.level[0], MC_LOG_DEBUG);
	cr_expect_eq(got.level[1], MC_LOG_TRACE);

	/* The default level drops debug. */
	got.n = 0;
	mc_log_set_level(MC_LOG_INFO);
	mc_log_info("t", "i3");
	mc_log_debug("t", "d3");
	cr_expect_eq(got.n, 1);
}

Test(mc_log, disabled_level_does_not_format)
{
	int evaluated = 0;

	mc_log_set_sink(capture_sink, NULL);
	mc_log_set_level(MC_LOG_INFO);
	mc_log_debug("t", "%d", ++evaluated);
	cr_expect_eq(evaluated, 0, "arguments of a disabled level evaluated");
	cr_expect_eq(got.n, 0);
}

Test(mc_log, emit_preserves_errno)
{
	mc_log_set_sink(capture_sink, NULL);
	errno = EAGAIN;
	mc_log_err("t", "x");
	cr_expect_eq(errno, EAGAIN);

	mc_log_set_sink(NULL, NULL);
	errno = ENOSPC;
	/* stderr may be anything here; only errno matters. */
	mc_log_emit(MC_LOG_ERROR, "t", "y");
	cr_expect_eq(errno, ENOSPC);
}

Test(mc_log, long_line_truncated_for_sink)
{
	char big[5000];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	mc_log_set_sink(capture_sink, NULL);
	mc_log_err("t", "%s", big);
	cr_assert_eq(got.n, 1);
	cr_expect_gt(strlen(got.line[0]), 1000);
	cr_expect_lt(strlen(got.line[0]), sizeof(big) - 1);
}

/* Read a whole small file into buf (NUL-terminated); returns its length. */
static size_t slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n;

	cr_assert_not_null(f, "open %s", path);
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
	return n;
}

static char tmpdir[64];
static char logpath[128];

static void tmp_setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/mc_log_test.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
	snprintf(logpath, sizeof(logpath), "%s/log", tmpdir);
}

static void tmp_teardown(void)
{
	unlink(logpath);
	rmdir(tmpdir);
}

Test(mc_log_file, stderr_line_format, .init = tmp_setup, .fini = tmp_teardown)
{
	char buf[8192];
	int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int saved = dup(STDERR_FILENO);

	cr_assert_geq(fd, 0);
	cr_assert_geq(saved, 0);
	cr_assert_geq(dup2(fd, STDERR_FILENO), 0);
	close(fd);
	mc_log_set_sink(capture_sink, NULL);
	mc_log_set_sink(NULL, NULL); /* back to stderr */
	mc_log_warn("subsys", "value=%d", 7);
	mc_log_err("other", "second");
	dup2(saved, STDERR_FILENO);
	close(saved);

	cr_expect_eq(got.n, 0, "replaced sink still called");
	slurp(logpath, buf, sizeof(buf));
	cr_expect(strstr(buf, " W ") != NULL, "no level tag: '%s'", buf);
	cr_expect(strstr(buf, "subsys: value=7\n") != NULL, "'%s'", buf);
	cr_expect(strstr(buf, " E ") != NULL, "no level tag: '%s'", buf);
	cr_expect(strstr(buf, "other: second\n") != NULL, "'%s'", buf);
	/* Exactly two lines. */
	cr_expect_eq(strchr(strchr(buf, '\n') + 1, '\n')[1], '\0');
}

Test(mc_log_file, use_file_appends, .init = tmp_setup, .fini = tmp_teardown)
{
	char buf[8192], big[5000];
	size_t n;
	char *nl;

	cr_assert_eq(mc_log_use_file(logpath), 0);
	mc_log_info("file", "first");
	mc_log_info("file", "second");
	mc_log_debug("file", "dropped");
	n = slurp(logpath, buf, sizeof(buf));
	cr_expect(strstr(buf, "file: first\n") != NULL, "'%s'", buf);
	cr_expect(strstr(buf, "file: second\n") != NULL, "'%s'", buf);
	cr_expect(strstr(buf, "dropped") == NULL);
	cr_expect(strstr(buf, "first") < strstr(buf, "second"));

	/* A very long message still ends in exactly one newline. */
	memset(big, 'y', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	mc_log_err("file", "%s", big);
	n = slurp(logpath, buf, sizeof(buf)) - n;
	cr_expect_leq(n, 2048, "long line is %zu bytes", n);
	cr_expect_eq(buf[strlen(buf) - 1], '\n');
	nl = strstr(buf, "second\n") + strlen("second\n");
	cr_expect_eq(strchr(nl, '\n'), buf + strlen(buf) - 1);
}

/* logrotate moves the file away; mc_log_reopen() opens it again by the
 * path it was given, also a relative one after a chdir (daemonizing). */
Test(mc_log_file, reopen_after_rotation, .init = tmp_setup,
     .fini = tmp_teardown)
{
	char buf[8192], rotated[160];

	cr_expect_eq(mc_log_reopen(), -ENOENT, "no file sink yet");
	cr_assert_eq(chdir(tmpdir), 0);
	cr_assert_eq(mc_log_use_file("log"), 0);
	cr_expect(mc_log_to_file());
	cr_assert_eq(chdir("/"), 0);
	mc_log_info("file", "before");
	snprintf(rotated, sizeof(rotated), "%s.1", logpath);
	cr_assert_eq(rename(logpath, rotated), 0);
	cr_assert_eq(mc_log_reopen(), 0);
	mc_log_info("file", "after");
	slurp(rotated, buf, sizeof(buf));
	cr_expect(strstr(buf, "before") && !strstr(buf, "after"), "'%s'", buf);
	slurp(logpath, buf, sizeof(buf));
	cr_expect(strstr(buf, "after") && !strstr(buf, "before"), "'%s'", buf);
	unlink(rotated);
	mc_log_set_sink(capture_sink, NULL);
	cr_expect(!mc_log_to_file());
	cr_expect_eq(mc_log_reopen(), -ENOENT);
}

Test(mc_log_file, use_file_bad_path)
{
	cr_expect_eq(mc_log_use_file("/nonexistent-dir/x/y.log"), -ENOENT);
}

Test(mc_log_env, level_from_environment)
{
	cr_assert_eq(setenv("MC_LOG_LEVEL", "debug", 1), 0);
	mc_log_init_from_env();
	cr_expect_eq(mc_log_get_level(), MC_LOG_DEBUG);
	cr_assert_eq(setenv("MC_LOG_LEVEL", "4", 1), 0);
	mc_log_init_from_env();
	cr_expect_eq(mc_log_get_level(), MC_LOG_WARN);
}

Test(mc_log_env, unset_keeps_level)
{
	unsetenv("MC_LOG_LEVEL");
	mc_log_set_level(MC_LOG_NOTICE);
	mc_log_init_from_env();
	cr_expect_eq(mc_log_get_level(), MC_LOG_NOTICE);
}

Test(mc_log_env, invalid_is_reported_and_ignored)
{
	mc_log_set_sink(capture_sink, NULL);
	mc_log_set_level(MC_LOG_NOTICE);
	cr_assert_eq(setenv("MC_LOG_LEVEL", "loud", 1), 0);
	mc_log_init_from_env();
	cr_expect_eq(mc_log_get_level(), MC_LOG_NOTICE);
	cr_assert_eq(got.n, 1);
	cr_expect_eq(got.level[0], MC_LOG_WARN);
	cr_expect(strstr(got.line[0], "loud") != NULL, "'%s'", got.line[0]);
}
