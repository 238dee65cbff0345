# SPDX-License-Identifier: Apache-2.0
"""ReplicateConfig.group_ids honoured (issue 17): the objects of a group
(SGLang HiCache's page: its _k and _v objects) are evicted together, a
read of one member refreshes the others' recency and leases, and the
groups survive a restart of the master. Each case has a control without
groups that shows the naive behaviour (a page half evicted), so the
assertions can fail. Real mooncake_master and one mooncake_client member;
the Python package puts and reads."""
import random
import time

import numpy as np

from pool import Master, Member, cleanup_segments, eventually

OBJ = 256 << 10
PAIRS = 24


def pool(procs, tmp_path, *args):
    m = Master(procs, tmp_path, "--eviction_high_watermark_ratio", "0.9",
               "--eviction_ratio", "0.05", "--restore_grace", "1", *args)
    member = Member(procs, tmp_path, m, size="16MiB")
    eventually(lambda: len(m.segments()) == 1, what="segment mounted")
    return m, member


def client(stores, m):
    s = stores()
    rc = s.setup("127.0.0.1", m.metadata, 0, 32 << 20, "tcp", "", m.addr)
    assert rc == 0, rc
    return s


def registered(s, seed):
    """2 x 256 KiB of random bytes, registered with s."""
    buf = np.random.default_rng(seed).integers(0, 256, 2 * OBJ,
                                               dtype=np.uint8)
    assert s.register_buffer(buf.ctypes.data, buf.nbytes) == 0
    return buf


def put_pairs(s, mstore, grouped, buf):
    """PAIRS pages of two objects (k, v) of 256 KiB: 12 of the member's
    16 MiB."""
    for i in range(PAIRS):
        cfg = mstore.ReplicateConfig()
        if grouped:
            cfg.group_ids = [f"page:{i}"] * 2
        ptr = buf.ctypes.data
        rc = s.batch_put_from([f"p{i}_k", f"p{i}_v"], [ptr, ptr + OBJ],
                              [OBJ, OBJ], cfg)
        assert rc == [0, 0], rc


def fill_until_evicted(m, s, buf):
    """Puts past the 0.9 watermark until the master evicts."""
    before = m.metric("master_evicted_key_count")
    for j in range(16):
        assert s.put_from(f"fill/{j}", buf.ctypes.data, OBJ) == 0
        if m.metric("master_evicted_key_count") > before:
            break
    eventually(lambda: m.metric("master_evicted_key_count") > before,
               what="eviction")
    time.sleep(0.3)


def pages(s):
    """Per page: (k exists, v exists)."""
    keys = [k for i in range(PAIRS) for k in (f"p{i}_k", f"p{i}_v")]
    e = s.batch_is_exist(keys)
    return [(e[2 * i], e[2 * i + 1]) for i in range(PAIRS)]


def read_keys_only(s, order):
    """SGLang's probe reads: the k objects, in order; the v objects are
    never read."""
    for i in order:
        assert len(s.get(f"p{i}_k")) == OBJ


def scenario(procs, tmp_path, stores, mstore, grouped):
    m, member = pool(procs, tmp_path, "--default_kv_lease_ttl", "200")
    try:
        s = client(stores, m)
        buf = registered(s, 7)
        put_pairs(s, mstore, grouped, buf)
        order = list(range(PAIRS))
        random.Random(3).shuffle(order)
        read_keys_only(s, order)
        time.sleep(0.5)  # the reads' leases (200 ms) lapse
        fill_until_evicted(m, s, buf)
        return order, pages(s)
    finally:
        cleanup_segments([member.port])


def test_a_group_is_evicted_whole_least_recently_read_first(
        procs, tmp_path, stores, mstore):
    order, got = scenario(procs, tmp_path, stores, mstore, grouped=True)
    half = [got[i] for i in range(PAIRS) if got[i][0] != got[i][1]]
    assert not half, f"pages split by eviction: {got}"
    gone = [i for i in range(PAIRS) if got[i] == (0, 0)]
    assert gone, got
    # The least recently read pages went (the v objects, never read,
    # shared their page's recency).
    assert set(gone) <= set(order[:PAIRS // 2]), (gone, order)


def test_control_without_groups_splits_pages(procs, tmp_path, stores,
                                              mstore):
    """The same workload without group_ids: the never-read v objects go
    first and leave pages without their values, what the grouped case
    must never show."""
    _, got = scenario(procs, tmp_path, stores, mstore, grouped=False)
    assert any(k and not v for k, v in got), got


def test_a_read_lease_covers_the_whole_group(procs, tmp_path, stores,
                                             mstore):
    m, member = pool(procs, tmp_path, "--default_kv_lease_ttl", "5000")
    try:
        s = client(stores, m)
        buf = registered(s, 8)
        g = mstore.ReplicateConfig()
        g.group_ids = ["leased"]  # one id for every key of the call
        ptr = buf.ctypes.data
        assert s.batch_put_from(["leased_k", "leased_v"], [ptr, ptr + OBJ],
                                [OBJ, OBJ], g) == [0, 0]
        assert s.put_from("plain_v", ptr + OBJ, OBJ) == 0
        time.sleep(5.5)  # the puts' own leases lapse
        assert len(s.get("leased_k")) == OBJ  # a 5 s read lease
        assert len(s.get("plain_k_never_put")) == 0
        # 70 more objects (17.5 MiB) of the member's 16: plain_v, the
        # least recent, must go (exist checks would lease it: none until
        # after).
        for j in range(70):
            assert s.put_from(f"fill/{j}", ptr, OBJ) == 0
        assert not s.is_exist("plain_v"), "no pressure reached plain_v"
        # leased_v was never read, yet its group's read lease kept it.
        assert s.batch_is_exist(["leased_k", "leased_v"]) == [1, 1]
        back = s.get("leased_v")
        assert bytes(back) == buf[OBJ:].tobytes()
    finally:
        cleanup_segments([member.port])


def test_groups_survive_a_master_restart(procs, tmp_path, stores, mstore):
    m, member = pool(procs, tmp_path, "--default_kv_lease_ttl", "200")
    try:
        s = client(stores, m)
        buf = registered(s, 9)
        put_pairs(s, mstore, True, buf)
        m.kill()
        m.start()
        eventually(lambda: len(m.segments()) == 1, what="segment back")
        time.sleep(1.5)  # the restart's quarantine (--restore_grace 1)
        order = list(range(PAIRS))
        random.Random(4).shuffle(order)
        read_keys_only(s, order)
        time.sleep(0.5)
        fill_until_evicted(m, s, buf)
        got = pages(s)
        assert all(k == v for k, v in got), f"pages split: {got}"
        assert any(k == 0 for k, _ in got), got
    finally:
        cleanup_segments([member.port])
