# SPDX-License-Identifier: Apache-2.0
"""Eviction under pressure: least recently read first, leased and
hard-pinned objects kept, existence polling cannot pin the pool, and a
full pool answers -200 NO_AVAILABLE_HANDLE, then recovers."""
import random
import threading
import time

from pool import Master, Member, Shell, cli, cleanup_segments, eventually

OBJ = 256 * 1024


def pool(procs, tmp_path, *args, n=3, size="16MiB"):
    m = Master(procs, tmp_path, "--eviction_high_watermark_ratio", "0.9",
               "--eviction_ratio", "0.05", *args)
    ms = [Member(procs, tmp_path, m, size=size) for _ in range(n)]
    eventually(lambda: len(m.segments()) == n, what="segments mounted")
    return m, ms


def test_least_recently_read_go_first(procs, tmp_path):
    m, ms = pool(procs, tmp_path, "--default_kv_lease_ttl", "200")
    try:
        sh = Shell(procs, tmp_path, m)
        old = [f"old/{i}" for i in range(120)]
        for i, k in enumerate(old):
            sh.ok(f"put {k} {OBJ} {i}")
        order = old[:]
        random.Random(1).shuffle(order)
        for k in order:
            sh.ok(f"get {k}")
        time.sleep(0.5)  # read leases (200 ms) expire
        assert m.metric("master_evicted_key_count") == 0
        # 190 x 256 KiB = 47.5 MiB crosses the 0.9 watermark of 48 MiB.
        for i in range(70):
            sh.ok(f"put new/{i} {OBJ} {1000 + i}")
        eventually(lambda: m.metric("master_evicted_key_count") > 0,
                   what="eviction")
        time.sleep(0.2)
        gone = [k for k, e in zip(old, sh.exist(old)) if not e]
        assert gone, "nothing evicted"
        quarter = set(order[:len(order) // 4])
        share = sum(k in quarter for k in gone) / len(gone)
        assert share >= 0.9, (len(gone), share)
        # What stayed is intact.
        for k in old:
            if k not in gone:
                sh.ok(f"check {k} {OBJ} {old.index(k)}")
                break
        assert m.metric("master_allocated_bytes") <= \
            0.9 * m.metric("master_total_capacity_bytes") + OBJ
    finally:
        cleanup_segments([x.port for x in ms])


def test_leased_and_hard_pinned_are_kept(procs, tmp_path):
    m, ms = pool(procs, tmp_path)
    try:
        sh = Shell(procs, tmp_path, m)
        blob = tmp_path / "pin.bin"
        blob.write_bytes(b"p" * OBJ)
        pinned = [f"pin/{i}" for i in range(5)]
        for k in pinned:
            cli(m, "put", str(blob), k, "--hard_pin")
        plain = [f"plain/{i}" for i in range(40)]
        for i, k in enumerate(plain):
            sh.ok(f"put {k} {OBJ} {i}")
        leased = plain[:10]
        for k in leased:
            sh.ok(f"get {k}")  # 10 s lease
        for i in range(150):
            code = sh.code(f"put fill/{i} {OBJ} {i}")
            assert code == 0, code
        assert m.metric("master_evicted_key_count") > 0
        assert sh.exist(pinned) == [1] * len(pinned)
        assert sh.exist(leased) == [1] * len(leased)
        for i, k in enumerate(leased):
            sh.ok(f"check {k} {OBJ} {i}")
    finally:
        cleanup_segments([x.port for x in ms])


def test_exist_polling_does_not_stop_eviction(procs, tmp_path):
    m, ms = pool(procs, tmp_path, "--default_kv_lease_ttl", "1000",
                 "--exist_max_idle", "1500")
    try:
        sh = Shell(procs, tmp_path, m)
        keys = [f"k/{i}" for i in range(150)]
        for i, k in enumerate(keys):
            sh.ok(f"put {k} {OBJ} {i}")
        poller = Shell(procs, tmp_path, m)
        stop = threading.Event()
        polls = [0]

        def poll():
            while not stop.is_set():
                poller.exist(keys)
                polls[0] += 1
                time.sleep(0.1)

        t = threading.Thread(target=poll)
        t.start()
        try:
            time.sleep(2.0)  # longer than exist_max_idle since the puts
            for i in range(40):
                assert sh.code(f"put more/{i} {OBJ} {i}") == 0
            eventually(lambda: m.metric("master_evicted_key_count") > 0,
                       what="eviction despite polling")
        finally:
            stop.set()
            t.join()
        assert polls[0] >= 10
    finally:
        cleanup_segments([x.port for x in ms])


def test_full_pool_answers_200_and_recovers(procs, tmp_path):
    m, ms = pool(procs, tmp_path, n=1, size="8MiB")
    try:
        blob = tmp_path / "one.bin"
        blob.write_bytes(b"x" * (1 << 20))
        stored = []
        for i in range(12):
            p = cli(m, "put", str(blob), f"full/{i}", "--hard_pin",
                    check=False)
            if p.returncode:
                assert "-200" in p.stderr and "NO_AVAILABLE_HANDLE" in \
                    p.stderr, p.stderr
                break
            stored.append(f"full/{i}")
        else:
            raise AssertionError("pool never filled")
        assert 5 <= len(stored) <= 8
        sh = Shell(procs, tmp_path, m)
        assert sh.code(f"put more {1 << 20} 1") == -200
        assert m.metric("master_put_start_alloc_failures_total") >= 2
        cli(m, "rm", stored[0], "--force")
        # The pool is still above its watermark, so an unpinned object
        # would be the eviction's only candidate: pin this one too.
        cli(m, "put", str(blob), "more", "--hard_pin")
        back = tmp_path / "more.bin"
        cli(m, "get", "more", str(back))
        assert back.read_bytes() == blob.read_bytes()
        # A value larger than any segment can never fit.
        assert sh.code(f"put huge {64 << 20} 1") in (-200, -600)
    finally:
        cleanup_segments([x.port for x in ms])


def test_eviction_ratio_0_turns_eviction_off(procs, tmp_path):
    """--eviction_ratio 0 ("0 disables eviction", as upstream, which
    evicts only with a ratio above 0): a put into a full pool evicted for
    itself anyway. Now it is -200 and every object stays."""
    m, ms = pool(procs, tmp_path, "--eviction_ratio", "0", n=1)
    try:
        sh = Shell(procs, tmp_path, m)
        keys, code = [], 0
        for i in range(100):
            code = sh.code(f"put full/{i} {1 << 20} {i}")
            if code:
                break
            keys.append(f"full/{i}")
        assert code == -200 and len(keys) >= 8, (code, len(keys))
        assert m.metric("master_evicted_key_count") == 0
        assert sh.exist(keys) == [1] * len(keys)
    finally:
        cleanup_segments([x.port for x in ms])


def test_the_watermark_makes_room_with_older_data_only(procs, tmp_path):
    """Above the watermark, older data goes, never the newest object
    (the pool may stay above the watermark with it: a put that needs the
    room evicts for itself), nor an empty one, which frees nothing (until
    2026-12-07 the empty object went first, then the newest: a file that
    filled the pool vanished right after its write, and the empty version
    a shell's `> f` publishes went while f's content was being written:
    "evicted 1 objects (0 bytes)")."""
    MiB = 1 << 20
    m, ms = pool(procs, tmp_path, "--default_kv_lease_ttl", "200", n=1)
    try:
        sh = Shell(procs, tmp_path, m)
        # An empty object, as the mount publishes an empty file.
        h = sh.ok("wopen empty 0")
        sh.ok(f"wclose {h} commit")
        sh.ok(f"put old {4 * MiB} 2")
        sh.ok(f"put new {12 * MiB} 3")  # 16 MiB: 100% of the pool
        eventually(lambda: m.metric("master_evicted_key_count") > 0,
                   what="eviction")
        time.sleep(0.3)  # many more watermark runs (one per 10 ms)
        assert m.metric("master_evicted_key_count") == 1
        assert m.metric("master_key_count") == 2
        assert sh.exist(["empty", "old", "new"]) == [1, 0, 1]
        sh.ok(f"check new {12 * MiB} 3")

        # The newest object alone fills the pool, and stays.
        time.sleep(0.5)  # the read leases (200 ms) expire
        sh.ok("rm new")
        sh.ok(f"put whole {16 * MiB} 4")
        time.sleep(0.3)
        assert m.metric("master_allocated_bytes") == 16 * MiB
        assert m.metric("master_evicted_key_count") == 1
        assert sh.exist(["empty", "whole"]) == [1, 1]
        sh.ok(f"check whole {16 * MiB} 4")

        # A put that needs the room evicts it.
        time.sleep(0.5)
        sh.ok(f"put next {MiB} 5")
        assert sh.exist(["empty", "whole", "next"]) == [1, 0, 1]
    finally:
        cleanup_segments([x.port for x in ms])


def test_a_publish_lease_keeps_a_put_until_its_rename(procs, tmp_path):
    """A put whose writer asked for a publish lease (the mount's file,
    written under a temporary key and renamed over its name right after
    the commit: writer_open_publish) is not evicted between its commit
    and its rename, neither by the watermark nor for another put, which
    gets -200 when only that object's room would do; the rename ends the
    lease, and so does the lease time (a crashed writer's object goes
    then). Until 2026-12-07 either eviction could take it in that
    instant, and the mount's close failed with ENOSPC for a file that
    fitted the pool. Stat, not exist, looks: an existence check is a
    lease of its own."""
    MiB = 1 << 20
    m, ms = pool(procs, tmp_path, "--default_kv_lease_ttl", "3000", n=1)

    def there(key):
        return sh.code(f"fstat {key}") == 0

    try:
        sh = Shell(procs, tmp_path, m)
        h = sh.ok(f"wopen tmp {8 * MiB} publish")
        sh.ok(f"wpiece {h} 0 {8 * MiB} 1")
        sh.ok(f"wclose {h} commit")
        # 15 of 16 MiB: above the watermark; tmp is not the newest.
        sh.ok(f"put other {7 * MiB} 2")
        time.sleep(0.3)  # many watermark runs (one per 10 ms)
        assert there("tmp")
        assert m.metric("master_evicted_key_count") == 0
        # Only tmp's room would make 9 MiB: no room, nothing evicted.
        assert sh.code(f"put big {9 * MiB} 3") == -200
        assert there("tmp") and there("other")
        assert m.metric("master_evicted_key_count") == 0

        # Renamed: an ordinary object, evicted for a put that needs it.
        sh.ok("ren tmp f")
        sh.ok(f"check f {8 * MiB} 1")
        time.sleep(3.5)  # the read lease of the check ends
        sh.ok(f"put big {9 * MiB} 3")
        assert not there("f")

        # Never renamed (its writer died): evictable after the lease.
        sh.ok("rm big")
        h = sh.ok(f"wopen lost {12 * MiB} publish")
        sh.ok(f"wclose {h} commit")
        time.sleep(3.5)
        sh.ok(f"put next {8 * MiB} 4")
        assert not there("lost")
    finally:
        cleanup_segments([x.port for x in ms])
