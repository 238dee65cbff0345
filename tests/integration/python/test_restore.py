# SPDX-License-Identifier: Apache-2.0
"""A master restarting from a damaged record (master/restore.c) keeps what
the record says rightly and drops only what it cannot hold: a replica that
overlaps another's memory and one on a segment the record does not have
(the object then has no replica and goes). What it keeps reads back its
own bytes, and new puts never land on it. The dropped object was in a
group with a kept one: reading and removing the kept one then walk the
group (before 2026-12-05 the dropped member stayed in its group, freed:
ASan's pass of this file saw the use after free). Real mooncake_master
and mooncake_client member; the Python package puts and reads; the
record is changed with sqlite while the master is stopped."""
import os
import sqlite3
import struct

from pool import Master, Member, cleanup_segments, eventually

OBJ = 256 << 10


def value(i):
    return bytes([i]) * 64 + os.urandom(OBJ - 64)


def test_a_damaged_record_drops_only_what_it_must(procs, tmp_path, stores,
                                                   mstore):
    m = Master(procs, tmp_path, "--restore_grace", "1",
               "--default_kv_lease_ttl", "200")
    member = Member(procs, tmp_path, m, size="16MiB")
    try:
        eventually(lambda: len(m.segments()) == 1, what="segment mounted")
        s = stores()
        assert s.setup("127.0.0.1", m.metadata, 0, 32 << 20, "tcp", "",
                       m.addr) == 0
        vals = {k: value(i) for i, k in
                enumerate(["ok1", "ok2", "twin_a", "twin_b", "lost"])}
        for k in ("ok1", "ok2", "lost"):
            assert s.put(k, vals[k]) == 0
        cfg = mstore.ReplicateConfig()
        cfg.group_ids = ["pair", "pair"]
        assert s.put_batch(["twin_a", "twin_b"],
                           [vals["twin_a"], vals["twin_b"]], cfg) == 0
        m.stop()

        db = sqlite3.connect(m.db)
        rows = {bytes(k).decode(): v for k, v in
                db.execute("SELECT key, replicas FROM objects")}
        assert set(rows) == set(vals), rows.keys()
        # one replica: a 16-byte segment id and a little-endian offset
        a = rows["twin_a"]
        assert len(a) == 24, len(a)
        off_a = struct.unpack("<Q", a[16:])[0]
        # twin_b 64 bytes into twin_a's memory: sorted by offset, twin_a
        # is reserved first and twin_b overlaps it
        db.execute("UPDATE objects SET replicas = ? WHERE key = ?",
                   (a[:16] + struct.pack("<Q", off_a + 64), b"twin_b"))
        db.execute("UPDATE objects SET replicas = ? WHERE key = ?",
                   (os.urandom(16) + rows["lost"][16:], b"lost"))
        db.commit()
        db.close()

        m.start()
        assert "restored 1 segments and 3 objects" in m.log(), m.log()
        assert "(2 replicas dropped)" in m.log(), m.log()
        eventually(lambda: len(m.segments()) == 1, what="segment back")
        assert m.metric("master_key_count") == 3

        for k in ("ok1", "ok2", "twin_a"):
            assert s.get(k) == vals[k], k
        for k in ("twin_b", "lost"):
            assert s.is_exist(k) == 0, k
        # reads of the group's survivor refresh its group (one member
        # now); new puts fill the free space around what was kept
        assert s.get("twin_a") == vals["twin_a"]
        new = {f"new{i}": value(100 + i) for i in range(24)}
        for k, v in new.items():
            assert s.put(k, v) == 0, k
        for k in ("ok1", "ok2", "twin_a"):
            assert s.get(k) == vals[k], k
        for k, v in new.items():
            assert s.get(k) == v, k
        assert m.metric("master_key_count") == 3 + len(new)
        # the group's last member goes: its group with it
        assert s.remove("twin_a", True) == 0
        assert s.is_exist("twin_a") == 0
        s.close()
    finally:
        cleanup_segments([member.port])
