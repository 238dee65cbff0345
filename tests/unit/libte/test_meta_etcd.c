/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the etcd metadata backend (libte/meta/meta_etcd.c) and of
 * te_meta_open()'s dispatch, against a real etcd: every test of the "etcd"
 * suite starts its own etcd on free loopback ports with a fresh data dir
 * and stops it afterwards. etcdctl cross-checks the wire encoding. The
 * suites that need no server (endpoint parsing, dead endpoints, dispatch
 * of non-etcd strings) run without one.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "meta/meta.h"
#include "mooncake/mc_err.h"

#define ETCD_BIN "/usr/bin/etcd"
#define ETCDCTL_BIN "/usr/bin/etcdctl"
#define START_DEADLINE_MS 15000

static struct {
	pid_t pid;
	int client_port, peer_port;
	char dir[64]; /* mkdtemp: data/ and etcd.log inside */
	char url[64]; /* http://127.0.0.1:<client_port> */
	char hostport[32]; /* 127.0.0.1:<client_port> */
} etcd;

static char err[512];

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* A listening socket on an ephemeral loopback port. */
static int listen_any(int *port, int backlog)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(fd, backlog), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* A listener on a given loopback port that never accepts, or -1. */
static int listen_on(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 16)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Ports that were free a moment ago (both held open together, so distinct). */
static void free_ports(int *p1, int *p2)
{
	int fd1 = listen_any(p1, 1), fd2 = listen_any(p2, 1);

	close(fd1);
	close(fd2);
}

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void etcd_stop(void)
{
	if (etcd.pid > 0) {
		long long deadline = now_ms() + 5000;
		int st;

		kill(etcd.pid, SIGTERM);
		while (waitpid(etcd.pid, &st, WNOHANG) == 0) {
			if (now_ms() > deadline) {
				kill(etcd.pid, SIGKILL);
				waitpid(etcd.pid, &st, 0);
				break;
			}
			sleep_ms(10);
		}
		etcd.pid = 0;
	}
	if (etcd.dir[0]) {
		nftw(etcd.dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
		etcd.dir[0] = '\0';
	}
}

static size_t discard(char *p, size_t s, size_t n, void *arg)
{
	size_t *got = arg;

	(void)p;
	*got += s * n;
	return s * n;
}

/* 1 when GET /health answers 200 (etcd 3.4: only once it has a leader). */
static int healthy(CURL *h)
{
	char url[96];
	size_t got = 0;
	long status = 0;

	snprintf(url, sizeof(url), "%s/health", etcd.url);
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 500L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &got);
	if (curl_easy_perform(h) != CURLE_OK)
		return 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	return status == 200;
}

static void log_tail(char *buf, size_t len)
{
	char path[96];
	FILE *f;
	long sz;
	size_t n;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "%s/etcd.log", etcd.dir);
	f = fopen(path, "re");
	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	sz = ftell(f);
	fseek(f, sz > (long)len - 1 ? sz - (long)len + 1 : 0, SEEK_SET);
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
}

/* 0 once etcd answers; -1 if it exited or missed the deadline. */
static int etcd_try_start(int attempt)
{
	char client[64], peer[64], cluster[128], name[48], data[96], logp[96];
	pid_t parent = getpid();
	long long deadline;
	CURL *h;
	int rc = -1;

	snprintf(etcd.dir, sizeof(etcd.dir), "/tmp/te_meta_etcd.XXXXXX");
	cr_assert_not_null(mkdtemp(etcd.dir));
	free_ports(&etcd.client_port, &etcd.peer_port);
	snprintf(etcd.url, sizeof(etcd.url), "http://127.0.0.1:%d",
		 etcd.client_port);
	snprintf(etcd.hostport, sizeof(etcd.hostport), "127.0.0.1:%d",
		 etcd.client_port);
	snprintf(client, sizeof(client), "%s", etcd.url);
	snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", etcd.peer_port);
	snprintf(name, sizeof(name), "te-test-%d-%d", (int)parent, attempt);
	snprintf(cluster, sizeof(cluster), "%s=%s", name, peer);
	snprintf(data, sizeof(data), "%s/data", etcd.dir);
	snprintf(logp, sizeof(logp), "%s/etcd.log", etcd.dir);

	etcd.pid = fork();
	cr_assert_geq(etcd.pid, 0);
	if (etcd.pid == 0) {
		int lfd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int nfd = open("/dev/null", O_RDONLY);

		/* Dies with the test process, even if the test crashes. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent || lfd < 0 || nfd < 0)
			_exit(127);
		dup2(nfd, 0);
		dup2(lfd, 1);
		dup2(lfd, 2);
		execl(ETCD_BIN, ETCD_BIN, "--name", name, "--data-dir", data,
		      "--listen-client-urls", client, "--advertise-client-urls",
		      client, "--listen-peer-urls", peer,
		      "--initial-advertise-peer-urls", peer,
		      "--initial-cluster", cluster, "--initial-cluster-state",
		      "new", "--log-level", "warn", (char *)NULL);
		_exit(127);
	}

	h = curl_easy_init();
	cr_assert_not_null(h);
	deadline = now_ms() + START_DEADLINE_MS;
	while (now_ms() < deadline) {
		int st;

		if (waitpid(etcd.pid, &st, WNOHANG) == etcd.pid) {
			etcd.pid = 0; /* exited: a port was taken? */
			break;
		}
		if (healthy(h)) {
			rc = 0;
			break;
		}
		sleep_ms(20);
	}
	curl_easy_cleanup(h);
	return rc;
}

static void etcd_start(void)
{
	char tail[1024] = "";

	if (access(ETCD_BIN, X_OK) != 0)
		cr_skip_test(ETCD_BIN " is missing (Debian: etcd-server; "
				      "scripts/setup.sh installs it)");
	curl_global_init(CURL_GLOBAL_DEFAULT);
	err[0] = '\0';
	for (int attempt = 0; attempt < 3; attempt++) {
		if (etcd_try_start(attempt) == 0)
			return;
		log_tail(tail, sizeof(tail));
		etcd_stop();
	}
	cr_assert_fail("etcd did not start; log tail:\n%s", tail);
}

static struct te_meta *open_etcd(const char *endpoints)
{
	struct te_meta *m = NULL;
	int rc = te_meta_etcd_open(endpoints, &m, err, sizeof(err));

	cr_assert_eq(rc, 0, "open %s: %d (%s)", endpoints, rc, err);
	cr_assert_not_null(m);
	cr_assert_str_eq(m->ops->scheme, "etcd");
	return m;
}

static void expect_val(struct te_meta *m, const char *key, const void *v,
		       size_t len)
{
	char *val = NULL;
	size_t vlen = 12345;
	int rc = m->ops->get(m, key, &val, &vlen, err, sizeof(err));

	cr_assert_eq(rc, 0, "get %s: %d (%s)", key, rc, err);
	cr_assert_not_null(val);
	cr_expect_eq(vlen, len, "get %s: %zu bytes, want %zu", key, vlen, len);
	cr_expect_eq(memcmp(val, v, len < vlen ? len : vlen), 0,
		     "get %s: other bytes", key);
	cr_expect_eq(val[vlen], '\0', "value not NUL-terminated");
	free(val);
}

static void expect_absent(struct te_meta *m, const char *key)
{
	char *val = NULL;
	size_t vlen = 0;

	err[0] = '\0';
	cr_expect_eq(m->ops->get(m, key, &val, &vlen, err, sizeof(err)),
		     -ENOENT);
	cr_expect_null(val);
	cr_expect_not_null(strstr(err, etcd.url), "err names no URL: %s", err);
}

static void put_ok(struct te_meta *m, const char *key, const void *v,
		   size_t len)
{
	int rc = m->ops->put(m, key, v, len, err, sizeof(err));

	cr_assert_eq(rc, 0, "put %s: %d (%s)", key, rc, err);
}

/* Output of an etcdctl command against the test etcd, NUL-terminated. */
static void etcdctl(const char *args, char *out, size_t len)
{
	char cmd[512];
	size_t n;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "ETCDCTL_API=3 " ETCDCTL_BIN " --endpoints=%s %s", etcd.url,
		 args);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	cr_assert_eq(pclose(p), 0, "%s failed: %s", cmd, out);
}

TestSuite(etcd, .init = etcd_start, .fini = etcd_stop, .timeout = 30);

Test(etcd, get_miss)
{
	struct te_meta *m = open_etcd(etcd.hostport);

	expect_absent(m, "no/such/key");
	te_meta_close(m);
}

Test(etcd, round_trip_odd_keys_and_binary_values)
{
	static const char bin[] = "\0\x01\xff\xfe\"\\%2F\n\r\t{}[]:,=+/";
	static const char *const keys[] = {
		"mooncake/ram/segment:node-1",
		"a%2Fb%zz%%",
		"rpc_meta/10.0.0.1:12345",
		"key with spaces & ?query=1#frag",
		"\xc3\xa9t\xc3\xa9/\x7f",
	};
	struct te_meta *m = open_etcd(etcd.url);
	size_t big_len = 300 * 1024;
	char *big = malloc(big_len);

	cr_assert_not_null(big);
	for (size_t i = 0; i < big_len; i++)
		big[i] = (char)(i * 7 + (i >> 8));
	for (size_t i = 0; i < MC_ARRAY_SIZE(keys); i++) {
		put_ok(m, keys[i], bin, sizeof(bin));
		expect_val(m, keys[i], bin, sizeof(bin));
	}
	/* Keys differ only where URL-escaping would have mattered. */
	expect_absent(m, "a/b%zz%%");
	/* Empty value: the gateway omits "value" altogether. */
	put_ok(m, "empty", "", 0);
	expect_val(m, "empty", "", 0);
	put_ok(m, "empty2", NULL, 0);
	expect_val(m, "empty2", "", 0);
	/* Larger than one read of the response. */
	put_ok(m, "big", big, big_len);
	expect_val(m, "big", big, big_len);
	free(big);
	te_meta_close(m);
}

Test(etcd, etcdctl_sees_the_same_bytes)
{
	struct te_meta *m = open_etcd(etcd.hostport);
	char out[256];

	put_ok(m, "x/y:z%", "hello \"etcd\"", 12);
	etcdctl("get --print-value-only 'x/y:z%'", out, sizeof(out));
	cr_expect_str_eq(out, "hello \"etcd\"\n");
	etcdctl("put from/etcdctl 'v%1'", out, sizeof(out));
	expect_val(m, "from/etcdctl", "v%1", 3);
	te_meta_close(m);
}

Test(etcd, put_replaces)
{
	struct te_meta *m = open_etcd(etcd.hostport);

	put_ok(m, "k", "first value", 11);
	put_ok(m, "k", "2nd", 3);
	expect_val(m, "k", "2nd", 3);
	put_ok(m, "k", "", 0);
	expect_val(m, "k", "", 0);
	te_meta_close(m);
}

Test(etcd, put_new)
{
	struct te_meta *m = open_etcd(etcd.hostport);
	int rc;

	rc = m->ops->put_new(m, "seg/a", "v1\0x", 4, err, sizeof(err));
	cr_assert_eq(rc, 0, "put_new absent: %d (%s)", rc, err);
	expect_val(m, "seg/a", "v1\0x", 4);

	rc = m->ops->put_new(m, "seg/a", "v1\0x", 4, err, sizeof(err));
	cr_assert_eq(rc, 0, "put_new same bytes: %d (%s)", rc, err);

	err[0] = '\0';
	rc = m->ops->put_new(m, "seg/a", "v1\0y", 4, err, sizeof(err));
	cr_assert_eq(rc, MC_EMETACONFLICT, "put_new other bytes: %d", rc);
	cr_expect_not_null(strstr(err, "seg/a"), "err: %s", err);
	cr_expect_not_null(strstr(err, etcd.hostport), "err: %s", err);
	rc = m->ops->put_new(m, "seg/a", "v1", 2, err, sizeof(err));
	cr_assert_eq(rc, MC_EMETACONFLICT, "a prefix is other bytes: %d", rc);
	expect_val(m, "seg/a", "v1\0x", 4);

	/* An existing empty value against a non-empty one, and vice versa. */
	put_ok(m, "seg/empty", "", 0);
	cr_expect_eq(m->ops->put_new(m, "seg/empty", "", 0, err, sizeof(err)),
		     0);
	cr_expect_eq(m->ops->put_new(m, "seg/empty", "x", 1, err, sizeof(err)),
		     MC_EMETACONFLICT);
	cr_expect_eq(m->ops->put_new(m, "seg/a", "", 0, err, sizeof(err)),
		     MC_EMETACONFLICT);

	/* After a delete the key can be created anew with other bytes. */
	cr_assert_eq(m->ops->del(m, "seg/a", err, sizeof(err)), 0);
	cr_expect_eq(m->ops->put_new(m, "seg/a", "v2", 2, err, sizeof(err)), 0);
	expect_val(m, "seg/a", "v2", 2);
	te_meta_close(m);
}

Test(etcd, del)
{
	struct te_meta *m = open_etcd(etcd.hostport);
	int rc;

	put_ok(m, "d/k", "v", 1);
	rc = m->ops->del(m, "d/k", err, sizeof(err));
	cr_assert_eq(rc, 0, "del: %d (%s)", rc, err);
	expect_absent(m, "d/k");
	err[0] = '\0';
	cr_expect_eq(m->ops->del(m, "d/k", err, sizeof(err)), -ENOENT);
	cr_expect_not_null(strstr(err, etcd.hostport), "err: %s", err);
	/* Only the exact key: no prefix or range semantics. */
	put_ok(m, "d/k2", "v", 1);
	cr_expect_eq(m->ops->del(m, "d/k", err, sizeof(err)), -ENOENT);
	expect_val(m, "d/k2", "v", 1);
	te_meta_close(m);
}

Test(etcd, failover_to_second_endpoint_and_remember_it)
{
	char eps[128];
	struct pollfd pfd;
	struct te_meta *m;
	int dead, unused, lfd;
	long long t0;

	free_ports(&dead, &unused);
	snprintf(eps, sizeof(eps), "127.0.0.1:%d, %s/", dead, etcd.url);
	m = open_etcd(eps);
	put_ok(m, "fo", "1", 1);
	expect_val(m, "fo", "1", 1);

	/*
	 * Something now listens on the first endpoint but never answers. A
	 * request sent there would hang for the op timeout; the backend must
	 * go straight to the endpoint that worked last.
	 */
	lfd = listen_on(dead);
	if (lfd < 0) {
		te_meta_close(m);
		cr_skip_test("port %d was taken meanwhile", dead);
	}
	t0 = now_ms();
	expect_val(m, "fo", "1", 1);
	put_ok(m, "fo", "2", 1);
	cr_expect_lt(now_ms() - t0, 1000, "went to the silent endpoint");
	pfd.fd = lfd;
	pfd.events = POLLIN;
	cr_expect_eq(poll(&pfd, 1, 0), 0, "a connection reached it");
	close(lfd);
	te_meta_close(m);
}

Test(etcd, dispatch_to_etcd)
{
	struct te_meta *a = NULL, *b = NULL, *c = NULL;
	char conn[200];
	int rc, dead, unused;

	snprintf(conn, sizeof(conn), "etcd://%s", etcd.hostport);
	rc = te_meta_open(conn, &a, err, sizeof(err));
	cr_assert_eq(rc, 0, "%s: %d (%s)", conn, rc, err);
	cr_assert_not_null(a);
	cr_assert_str_eq(a->ops->scheme, "etcd");

	/* No scheme: etcd, with a list (a dead one first, ';' separated). */
	free_ports(&dead, &unused);
	snprintf(conn, sizeof(conn), "127.0.0.1:%d;%s", dead, etcd.hostport);
	rc = te_meta_open(conn, &b, err, sizeof(err));
	cr_assert_eq(rc, 0, "%s: %d (%s)", conn, rc, err);
	cr_assert_not_null(b);
	cr_assert_str_eq(b->ops->scheme, "etcd");

	/* etcd:// with scheme-ful endpoints. */
	snprintf(conn, sizeof(conn), "etcd://%s,%s", etcd.url, etcd.url);
	rc = te_meta_open(conn, &c, err, sizeof(err));
	cr_assert_eq(rc, 0, "%s: %d (%s)", conn, rc, err);

	put_ok(a, "via/a", "A", 1);
	expect_val(b, "via/a", "A", 1);
	expect_val(c, "via/a", "A", 1);
	cr_expect_eq(b->ops->put_new(b, "via/a", "B", 1, err, sizeof(err)),
		     MC_EMETACONFLICT);
	cr_expect_eq(c->ops->del(c, "via/a", err, sizeof(err)), 0);
	expect_absent(a, "via/a");
	te_meta_close(a);
	te_meta_close(b);
	te_meta_close(c);
}

#define RACERS 8
#define ROUNDS 25

struct racer {
	struct te_meta *m;
	int id;
	int put_new_rc;
	int errors;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	char key[32], val[32], e[256];
	char *got;
	size_t len;

	snprintf(val, sizeof(val), "racer-%d", r->id);
	r->put_new_rc = r->m->ops->put_new(r->m, "race/owner", val, strlen(val),
					   e, sizeof(e));
	for (int i = 0; i < ROUNDS; i++) {
		snprintf(key, sizeof(key), "race/%d/%d", r->id, i);
		if (r->m->ops->put(r->m, key, val, strlen(val), e, sizeof(e)))
			r->errors++;
		got = NULL;
		if (r->m->ops->get(r->m, key, &got, &len, e, sizeof(e)) ||
		    len != strlen(val) || memcmp(got, val, len))
			r->errors++;
		free(got);
		if (r->m->ops->del(r->m, key, e, sizeof(e)))
			r->errors++;
	}
	return NULL;
}

Test(etcd, concurrent_callers_and_one_put_new_winner)
{
	struct te_meta *m = open_etcd(etcd.hostport);
	struct racer r[RACERS];
	pthread_t t[RACERS];
	int winners = 0, winner = -1;
	char want[32];

	for (int i = 0; i < RACERS; i++) {
		r[i] = (struct racer){ .m = m, .id = i };
		cr_assert_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < RACERS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < RACERS; i++) {
		cr_expect_eq(r[i].errors, 0, "racer %d: %d errors", i,
			     r[i].errors);
		if (r[i].put_new_rc == 0) {
			winners++;
			winner = i;
		} else {
			cr_expect_eq(r[i].put_new_rc, MC_EMETACONFLICT,
				     "racer %d: %d", i, r[i].put_new_rc);
		}
	}
	cr_assert_eq(winners, 1, "%d put_new winners", winners);
	snprintf(want, sizeof(want), "racer-%d", winner);
	expect_val(m, "race/owner", want, strlen(want));
	te_meta_close(m);
}

/* ---- no server needed ---- */

Test(etcd_offline, all_endpoints_dead_fail_fast)
{
	struct te_meta *m;
	char eps[128], p1[16], p2[16];
	char *val = NULL;
	size_t len;
	int d1, d2, rc;
	long long t0;

	free_ports(&d1, &d2);
	snprintf(eps, sizeof(eps), "127.0.0.1:%d,http://127.0.0.1:%d", d1, d2);
	snprintf(p1, sizeof(p1), ":%d", d1);
	snprintf(p2, sizeof(p2), ":%d", d2);
	m = open_etcd(eps);
	t0 = now_ms();
	err[0] = '\0';
	rc = m->ops->get(m, "k", &val, &len, err, sizeof(err));
	cr_expect_lt(now_ms() - t0, 2 * 1500, "took %lld ms", now_ms() - t0);
	cr_expect_eq(rc, -ECONNREFUSED, "rc %d (%s)", rc, err);
	cr_expect_null(val);
	cr_expect(strstr(err, "http://127.0.0.1") &&
			  (strstr(err, p1) || strstr(err, p2)),
		  "err names no endpoint: %s", err);
	cr_expect_neq(m->ops->put(m, "k", "v", 1, err, sizeof(err)), 0);
	cr_expect_neq(m->ops->put_new(m, "k", "v", 1, err, sizeof(err)), 0);
	cr_expect_neq(m->ops->del(m, "k", err, sizeof(err)), 0);
	te_meta_close(m);
}

Test(etcd_offline, bad_endpoint_lists)
{
	static const char *const bad[] = {
		"",	   ",",	       " ; , ", "ftp://h:1", "h:1,redis://h:2",
		"http://", "http:///",
	};
	struct te_meta *m;

	for (size_t i = 0; i < MC_ARRAY_SIZE(bad); i++) {
		m = (struct te_meta *)1;
		err[0] = '\0';
		cr_expect_eq(te_meta_etcd_open(bad[i], &m, err, sizeof(err)),
			     -EINVAL, "'%s' accepted", bad[i]);
		cr_expect_neq(err[0], '\0', "'%s': no err", bad[i]);
	}
	/* Accepted forms (nothing is contacted at open). */
	m = open_etcd(" h1:2379 , HTTP://h2:2379/;https://h3:2379;");
	te_meta_close(m);
}

Test(etcd_offline, empty_key_is_invalid)
{
	struct te_meta *m = open_etcd("127.0.0.1:9");
	char *val = NULL;
	size_t len;

	cr_expect_eq(m->ops->get(m, "", &val, &len, err, sizeof(err)), -EINVAL);
	cr_expect_eq(m->ops->put(m, "", "v", 1, err, sizeof(err)), -EINVAL);
	cr_expect_eq(m->ops->put(m, "k", NULL, 1, err, sizeof(err)), -EINVAL);
	cr_expect_eq(m->ops->del(m, "", err, sizeof(err)), -EINVAL);
	te_meta_close(m);
}

Test(etcd_offline, dispatch)
{
	struct te_meta *m = (struct te_meta *)1;
	int rc;

	cr_expect_eq(te_meta_open("P2PHANDSHAKE", &m, err, sizeof(err)), 0);
	cr_expect_null(m);

	m = (struct te_meta *)1;
	err[0] = '\0';
	rc = te_meta_open("redis://127.0.0.1:6379", &m, err, sizeof(err));
	cr_expect_eq(rc, MC_ENOTSUPPORTED);
	cr_expect_null(m);
	cr_expect_not_null(strstr(err, "redis"), "err: %s", err);

	err[0] = '\0';
	rc = te_meta_open("zk://h:2181", &m, err, sizeof(err));
	cr_expect_eq(rc, MC_ENOTSUPPORTED);
	cr_expect_not_null(strstr(err, "zk://"), "err: %s", err);

	cr_expect_eq(te_meta_open("", &m, err, sizeof(err)), -EINVAL);
	cr_expect_eq(te_meta_open("etcd://", &m, err, sizeof(err)), -EINVAL);

	/* "://" after a ',' is not a scheme: an etcd list. */
	rc = te_meta_open("h1:2379,http://h2:2379", &m, err, sizeof(err));
	cr_expect_eq(rc, 0, "%d (%s)", rc, err);
	cr_expect_str_eq(m->ops->scheme, "etcd");
	te_meta_close(m);
}
