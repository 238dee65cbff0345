/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rdma transport's pure parts, over topologies one soft-RoCE device
 * cannot show: NIC choice from priority matrices (striping over the
 * preferred NICs, failover through the others on retries, unknown
 * locations), and its wire formats (the descriptor fields upstream
 * writes, the Connection handshake body, GIDs).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "transport/rdma/rdma_int.h"

static const char *const nics[] = { "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3" };

/* cpu:0 prefers mlx5_0 and mlx5_1 (its NUMA node), the rest available;
 * cuda:1 prefers mlx5_3 only; cpu:1 prefers a NIC this host lacks. */
static json_t *matrix(void)
{
	json_error_t e;
	json_t *m = json_loads(
		"{\"cpu:0\": [[\"mlx5_0\", \"mlx5_1\"], [\"mlx5_2\", "
		"\"mlx5_3\"]], \"cuda:1\": [[\"mlx5_3\"], [\"mlx5_0\", "
		"\"mlx5_1\", \"mlx5_2\"]], \"cpu:1\": [[\"mlx5_9\"], "
		"[\"mlx5_2\"]]}",
		0, &e);

	cr_assert(m, "%s", e.text);
	return m;
}

Test(rdma_path, first_try_stripes_over_the_preferred_nics)
{
	json_t *m = matrix();
	int seen[4] = { 0 };

	for (unsigned spread = 0; spread < 100; spread++) {
		int i = rdma_path_pick(m, "cpu:0", nics, 4, 0, spread);

		cr_assert(i == 0 || i == 1, "cpu:0 took %d", i);
		seen[i]++;
	}
	cr_expect_eq(seen[0], 50);
	cr_expect_eq(seen[1], 50);
	for (unsigned spread = 0; spread < 10; spread++)
		cr_expect_eq(rdma_path_pick(m, "cuda:1", nics, 4, 0, spread),
			     3);
	json_decref(m);
}

Test(rdma_path, retries_walk_preferred_then_available)
{
	json_t *m = matrix();
	/* Retry k: entry (k-1) mod 4 of [mlx5_0, mlx5_1, mlx5_2, mlx5_3]. */
	const int want[] = { 0, 1, 2, 3, 0, 1, 2, 3, 0 };
	const int want_gpu[] = { 3, 0, 1, 2, 3 };

	for (unsigned k = 1; k <= 9; k++)
		cr_expect_eq(rdma_path_pick(m, "cpu:0", nics, 4, k, 7),
			     want[k - 1], "retry %u", k);
	for (unsigned k = 1; k <= 5; k++)
		cr_expect_eq(rdma_path_pick(m, "cuda:1", nics, 4, k, 7),
			     want_gpu[k - 1], "retry %u", k);
	json_decref(m);
}

Test(rdma_path, names_the_host_lacks_are_skipped)
{
	json_t *m = matrix();

	/* cpu:1's preferred NIC is not here: its available one serves. */
	for (unsigned spread = 0; spread < 5; spread++)
		cr_expect_eq(rdma_path_pick(m, "cpu:1", nics, 4, 0, spread), 2);
	/* A host with only two of the NICs: cuda:1's preference is gone,
	 * its available NICs among those two serve. */
	for (unsigned spread = 0; spread < 5; spread++) {
		int i = rdma_path_pick(m, "cuda:1", nics, 2, 0, spread);
		cr_expect(i == 0 || i == 1, "took %d", i);
	}
	json_decref(m);
}

Test(rdma_path, unknown_locations_use_every_nic)
{
	json_t *m = matrix();
	int seen[4] = { 0 };

	for (unsigned spread = 0; spread < 8; spread++)
		seen[rdma_path_pick(m, "*", nics, 4, 0, spread)]++;
	for (int i = 0; i < 4; i++)
		cr_expect_eq(seen[i], 2);
	/* No matrix at all (a peer that sent none), and retries move on. */
	cr_expect_eq(rdma_path_pick(NULL, "cpu:0", nics, 4, 0, 5), 1);
	cr_expect_eq(rdma_path_pick(NULL, "cpu:0", nics, 4, 1, 5), 2);
	cr_expect_eq(rdma_path_pick(m, "cpu:0", nics, 0, 0, 0), -1);
	json_decref(m);
}

/* Scores of (local, peer) pairs for rdma_path_pick_pair: 2 good, 1 a
 * paused rail, 0 no registration; 4 x 4 NICs. */
struct scores {
	int v[4][4];
	int calls;
};

static int score_of(void *arg, int l, int r)
{
	struct scores *sc = arg;

	sc->calls++;
	return sc->v[l][r];
}

/* rdma_path_pick_pair with sc's scores, which must find a pair. */
static void pick_pair(const struct rdma_path_side *l,
		      const struct rdma_path_side *r, unsigned retry,
		      unsigned spread, struct scores *sc, int *li, int *ri)
{
	cr_assert_eq(rdma_path_pick_pair(l, r, retry, spread,
					 sc ? score_of : NULL, sc, li, ri),
		     0);
	cr_assert(*li >= 0 && *li < 4 && *ri >= 0 && *ri < 4);
}

static void set_all(struct scores *sc, int v)
{
	for (int l = 0; l < 4; l++)
		for (int r = 0; r < 4; r++)
			sc->v[l][r] = v;
}

Test(rdma_path, pairs_are_the_two_picks_while_they_serve)
{
	json_t *m = matrix();
	struct rdma_path_side l = { m, "cpu:0", nics, 4 };
	struct rdma_path_side r = { m, "cuda:1", nics, 4 };
	struct scores sc = { 0 };
	int li, ri;

	set_all(&sc, 2);
	for (unsigned retry = 0; retry < 6; retry++)
		for (unsigned spread = 0; spread < 8; spread++) {
			pick_pair(&l, &r, retry, spread, &sc, &li, &ri);
			cr_expect_eq(li, rdma_path_pick(m, "cpu:0", nics, 4,
							retry, spread));
			cr_expect_eq(ri, rdma_path_pick(m, "cuda:1", nics, 4,
							retry, spread));
		}
	/* No scorer: every pair good. */
	pick_pair(&l, &r, 0, 3, NULL, &li, &ri);
	cr_expect_eq(li, rdma_path_pick(m, "cpu:0", nics, 4, 0, 3));
	cr_expect_eq(ri, 3);
	l.n = 0;
	cr_expect_eq(rdma_path_pick_pair(&l, &r, 0, 0, NULL, NULL, &li, &ri),
		     -1);
	json_decref(m);
}

Test(rdma_path, a_paused_rail_is_avoided_while_another_pair_serves)
{
	json_t *m = matrix();
	struct rdma_path_side l = { m, "cpu:0", nics, 4 };
	struct rdma_path_side r = { m, "cpu:0", nics, 4 };
	struct scores sc = { 0 };
	int li, ri, used[4][4] = { { 0 } };

	/* mlx5_0 -> mlx5_0 failed. Both sides stripe with the same spread
	 * (pairs 0 -> 0 and 1 -> 1 here): the slices of the other pair stay
	 * where they were, those of the failed one move to another, never
	 * back to it. */
	set_all(&sc, 2);
	sc.v[0][0] = 1;
	for (unsigned spread = 0; spread < 64; spread++) {
		pick_pair(&l, &r, 0, spread, &sc, &li, &ri);
		cr_assert_eq(sc.v[li][ri], 2, "took paused %d -> %d", li, ri);
		used[li][ri]++;
	}
	cr_expect_eq(used[0][0], 0);
	cr_expect_eq(used[1][1], 32);
	cr_expect_eq(used[0][1], 32,
		     "the failed pair's slices kept their "
		     "local NIC: %d",
		     used[0][1]);
	/* Every preferred pair paused: one of the available NICs serves. */
	sc.v[0][1] = sc.v[1][0] = sc.v[1][1] = 1;
	pick_pair(&l, &r, 0, 0, &sc, &li, &ri);
	cr_expect_eq(sc.v[li][ri], 2, "took paused %d -> %d", li, ri);
	cr_expect(li >= 2 || ri >= 2);
	json_decref(m);
}

Test(rdma_path, paused_rails_serve_when_nothing_else_can)
{
	json_t *m = matrix();
	struct rdma_path_side l = { m, "cuda:1", nics, 4 };
	struct rdma_path_side r = { NULL, "*", nics, 2 };
	struct scores sc = { 0 };
	int li, ri;

	/* All paused (one peer NIC that failed, say): the first pick. */
	set_all(&sc, 1);
	pick_pair(&l, &r, 0, 1, &sc, &li, &ri);
	cr_expect_eq(li, 3);
	cr_expect_eq(ri, 1);
	/* The first pick unusable (not registered there), the rest
	 * paused: a paused pair, not the unusable one. */
	sc.v[3][1] = 0;
	pick_pair(&l, &r, 0, 1, &sc, &li, &ri);
	cr_expect_eq(sc.v[li][ri], 1);
	/* Nothing usable: the first pick, for the caller to refuse. */
	set_all(&sc, 0);
	pick_pair(&l, &r, 2, 1, &sc, &li, &ri);
	cr_expect_eq(li, rdma_path_pick(m, "cuda:1", nics, 4, 2, 1));
	cr_expect_eq(ri, rdma_path_pick(NULL, "*", nics, 2, 2, 1));
	/* A pair registered on another NIC only is found (before, such a
	 * slice was refused when the first pick lacked the key). */
	sc.v[0][0] = 2;
	pick_pair(&l, &r, 0, 1, &sc, &li, &ri);
	cr_expect(li == 0 && ri == 0, "took %d -> %d", li, ri);
	json_decref(m);
}

/* A pause lasts its time, unless the local port came back up after it
 * began (the failure was the port's). */
Test(rdma_path, a_port_up_again_ends_the_pauses_before_it)
{
	const uint64_t pause = 30000;

	cr_expect(rdma_path_paused(100000 + pause, pause, 0, 100500),
		  "paused, the port never down");
	cr_expect(!rdma_path_paused(100000 + pause, pause, 0, 130001),
		  "the pause over");
	cr_expect(!rdma_path_paused(100000 + pause, pause, 101000, 102000),
		  "paused at 100000, the port up at 101000");
	cr_expect(rdma_path_paused(102000 + pause, pause, 101000, 102500),
		  "paused at 102000, after the port came up");
	cr_expect(!rdma_path_paused(0, pause, 0, 5), "never paused");
	cr_expect(rdma_path_paused(500, pause, 0, 10),
		  "paused early in the clock's life");
}

Test(rdma_wire, gid_text_round_trips_and_bad_text_is_refused)
{
	union ibv_gid g, back;
	char text[48];

	for (int i = 0; i < 16; i++)
		g.raw[i] = (uint8_t)(i * 17);
	rdma_gid_str(&g, text);
	cr_assert_str_eq(text, "00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:"
			       "ee:ff");
	cr_assert_eq(rdma_gid_parse(text, &back), 0);
	cr_assert_eq(memcmp(&g, &back, sizeof(g)), 0);
	cr_expect_eq(rdma_gid_parse("00:11", &back), -EINVAL);
	cr_expect_eq(rdma_gid_parse("00:11:22:33:44:55:66:77:88:99:aa:bb:cc:"
				    "dd:ee:fg",
				    &back),
		     -EINVAL);
	cr_expect_eq(rdma_gid_parse("00-11:22:33:44:55:66:77:88:99:aa:bb:cc:"
				    "dd:ee:ff",
				    &back),
		     -EINVAL);
	cr_expect_eq(rdma_gid_parse(NULL, &back), -EINVAL);
}

Test(rdma_wire, handshake_body_round_trips)
{
	struct rdma_hs_msg m = { .lid = 7, .n_qp = 2, .mtu = 1024 }, r;
	char *text;

	snprintf(m.local_nic_path, sizeof(m.local_nic_path), "a:1@rxe0");
	snprintf(m.peer_nic_path, sizeof(m.peer_nic_path), "b:2@rxe0");
	m.gid.raw[15] = 9;
	m.qp_num[0] = 17;
	m.qp_num[1] = 0xffffff;
	text = rdma_hs_encode(&m);
	cr_assert(text);
	cr_assert(strstr(text, "\"qp_num\":[17,16777215]"), "%s", text);
	cr_assert_eq(rdma_hs_parse(text, strlen(text), &r), 0, "%s", text);
	cr_expect_str_eq(r.local_nic_path, "a:1@rxe0");
	cr_expect_str_eq(r.peer_nic_path, "b:2@rxe0");
	cr_expect_eq(r.lid, 7);
	cr_expect_eq(r.n_qp, 2);
	cr_expect_eq(r.qp_num[1], 0xffffff);
	cr_expect_eq(r.mtu, 1024);
	cr_expect_eq(memcmp(&r.gid, &m.gid, sizeof(m.gid)), 0);
	free(text);
}

Test(rdma_wire, bad_handshake_bodies_are_refused)
{
	static const char *const bad[] = {
		"[]",
		"{}",
		"{\"local_nic_path\": \"a@x\", \"peer_nic_path\": \"b@x\", "
		"\"local_gid\": \"00\", \"qp_num\": [1]}",
		"{\"local_nic_path\": \"a@x\", \"peer_nic_path\": \"b@x\", "
		"\"local_gid\": \"00:00:00:00:00:00:00:00:00:00:00:00:00:00:"
		"00:01\", \"qp_num\": []}",
		"{\"local_nic_path\": \"a@x\", \"peer_nic_path\": \"b@x\", "
		"\"local_gid\": \"00:00:00:00:00:00:00:00:00:00:00:00:00:00:"
		"00:01\", \"qp_num\": [16777216]}",
		"{\"local_nic_path\": \"a@x\", \"peer_nic_path\": \"b@x\", "
		"\"local_gid\": \"00:00:00:00:00:00:00:00:00:00:00:00:00:00:"
		"00:01\", \"qp_num\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,"
		"17]}",
	};
	struct rdma_hs_msg r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(rdma_hs_parse(bad[i], strlen(bad[i]), &r),
			     -EBADMSG, "%s", bad[i]);
	/* A refusal carries only its reason. */
	cr_assert_eq(rdma_hs_parse("{\"reply_msg\": \"no\"}", 19, &r), 0);
	cr_expect_str_eq(r.reply_msg, "no");
}

/* Upstream's descriptor: devices, per-buffer rkey arrays by device. */
Test(rdma_wire, descriptor_fields_are_read_as_upstream_writes_them)
{
	const char *desc =
		"{\"name\": \"p\", \"protocol\": \"rdma\", \"devices\": ["
		"{\"name\": \"mlx5_0\", \"lid\": 3, \"gid\": \"fe:80:00:00:00:"
		"00:00:00:00:00:00:00:00:00:00:01\"},"
		"{\"name\": \"mlx5_1\", \"lid\": 4, \"gid\": \"fe:80:00:00:00:"
		"00:00:00:00:00:00:00:00:00:00:02\"}],"
		"\"buffers\": ["
		"{\"name\": \"cpu:1\", \"addr\": 8192, \"length\": 4096, "
		"\"rkey\": [21, 22], \"lkey\": [1, 2]},"
		"{\"name\": \"cpu:0\", \"addr\": 4096, \"length\": 4096, "
		"\"rkey\": [11, 12], \"lkey\": [1, 2]},"
		"{\"name\": \"cpu:0\", \"addr\": 65536, \"length\": 4096}],"
		"\"priority_matrix\": {\"cpu:0\": [[\"mlx5_0\"], []]}}";
	json_t *root = json_loads(desc, 0, NULL);
	struct rdma_peer_desc *d;
	const struct rdma_rbuf *b;

	cr_assert_eq(rdma_desc_decode(root, (void **)&d), 0);
	cr_assert(d);
	cr_expect_eq(d->n_devs, 2);
	cr_expect_str_eq(d->devs[1].name, "mlx5_1");
	cr_expect_eq(d->devs[1].lid, 4);
	cr_expect_eq(d->devs[1].gid.raw[15], 2);
	cr_expect_eq(d->n_bufs, 2, "a buffer without keys is not rdma's");
	b = rdma_rbuf_find(d, 4096 + 100, 200);
	cr_assert(b);
	cr_expect_eq(b->rkey[1], 12);
	cr_expect_str_eq(b->location, "cpu:0");
	b = rdma_rbuf_find(d, 8192, 4096);
	cr_assert(b);
	cr_expect_eq(b->rkey[0], 21);
	cr_expect_null(rdma_rbuf_find(d, 8192, 4097), "past the end");
	cr_expect_null(rdma_rbuf_find(d, 4000, 10), "before the first");
	cr_expect_null(rdma_rbuf_find(d, 65536, 10), "no keys");
	cr_expect_null(rdma_rbuf_find(d, UINT64_MAX - 1, 4), "wraps");
	cr_expect(json_is_object(d->matrix));
	rdma_desc_free(d);
	json_decref(root);

	/* No devices: rdma reads nothing from it. */
	root = json_loads("{\"buffers\": []}", 0, NULL);
	cr_assert_eq(rdma_desc_decode(root, (void **)&d), 0);
	cr_expect_null(d);
	json_decref(root);
}
