# SPDX-License-Identifier: Apache-2.0
"""The master's record with --db_checkpoint_thread (master/db_wal.c): a
thread copies the WAL into the database file while puts commit, commits
copy the short tails it leaves them, the metrics count both, and neither
a kill -9 in the middle of it nor a clean restart loses an acknowledged
object."""
import os

from pool import Master, Member, Shell, cleanup_segments, eventually

OBJ = 256
BATCH = 256  # keys per batch put: one commit of ~16 WAL pages


def test_checkpoint_thread_keeps_every_object(procs, tmp_path):
    m = Master(procs, tmp_path, "--db_checkpoint_thread")
    member = Member(procs, tmp_path, m, size="256MiB")
    try:
        eventually(lambda: len(m.segments()) == 1, what="segment")
        sh = Shell(procs, tmp_path, m)
        # Until the WAL has passed 4,000 pages (a pass starts) and more:
        # the thread's passes, then a commit's tail.
        batches = 0
        while m.metric("master_db_tail_checkpoints_total") == 0:
            assert batches < 1000, "no commit took a tail"
            for _ in range(10):
                b = batches
                codes = sh.ok(f"bput {BATCH} b{b}/ {OBJ} {b * 1000}")
                assert set(codes.split(",")) == {"0"}, codes
                batches += 1
        assert m.metric("master_db_checkpoints_total") > 0
        assert m.metric("master_db_checkpoint_failures_total") == 0

        # kill -9 right after the last batches committed, then a clean
        # stop: every batch acknowledged reads back.
        m.kill()
        m.start()
        eventually(lambda: len(m.segments()) == 1, timeout=20,
                   what="member re-mounted")
        m.stop()
        m.start()
        eventually(lambda: len(m.segments()) == 1, timeout=20,
                   what="member re-mounted")
        for b in range(batches):
            codes = sh.ok(f"bget {BATCH} b{b}/ {OBJ} {b * 1000}").split(",")
            assert set(codes) == {"0"}, (b, codes)
    finally:
        cleanup_segments([member.port])


def test_backup_of_a_running_master_without_ha(procs, tmp_path):
    """operations.md's way to back up a running master (sqlite keeps the
    record locked): GET /ha/snapshot, "served with or without HA". It
    answered 404 without --enable_ha. The copy is a consistent record
    holding what was acknowledged."""
    import sqlite3
    from mctest import request
    m = Master(procs, tmp_path)
    ms = [Member(procs, tmp_path, m)]
    try:
        eventually(lambda: len(m.segments()) == 1, what="segment")
        sh = Shell(procs, tmp_path, m)
        for i in range(20):
            sh.ok(f"put bak/{i} 1000 {i}")
        st, body, _ = request(m.admin_port, "GET", "/ha/snapshot")
        assert st == 200, body[:200]
        copy = tmp_path / "backup.db"
        copy.write_bytes(body)
        db = sqlite3.connect(copy)
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        names = [r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")]
        keys = set()
        for t in names:
            cols = [c[1] for c in db.execute(f"PRAGMA table_info({t})")]
            if "key" in cols:
                keys |= {r[0] if isinstance(r[0], str) else
                         r[0].decode(errors="replace")
                         for r in db.execute(f"SELECT key FROM {t}")}
        assert {f"bak/{i}" for i in range(20)} <= keys, sorted(keys)[:5]
    finally:
        cleanup_segments([x.port for x in ms])


def test_snapshot_copies_are_not_readable_by_others(procs, tmp_path):
    """The copy /ha/snapshot makes beside the record (unlinked once open)
    is 0600 as the record: sqlite made it 0644, and another local user
    who polled the directory opened it and read every key."""
    import stat
    import threading
    from mctest import request
    m = Master(procs, tmp_path)
    ms = [Member(procs, tmp_path, m)]
    try:
        eventually(lambda: len(m.segments()) == 1, what="segment")
        sh = Shell(procs, tmp_path, m)
        sh.ok("bput 200 snap/ 1000 1")
        seen, stop = {}, threading.Event()

        def watch():
            while not stop.is_set():
                for name in os.listdir(tmp_path):
                    if ".snapshot." in name:
                        try:
                            seen[name] = os.stat(tmp_path / name).st_mode
                        except FileNotFoundError:
                            pass
        t = threading.Thread(target=watch)
        t.start()
        try:
            for _ in range(60):
                st, body, _ = request(m.admin_port, "GET", "/ha/snapshot")
                assert st == 200, body[:200]
                if len(seen) >= 5:
                    break
        finally:
            stop.set()
            t.join()
        assert seen, "no copy seen: the test proves nothing here"
        for name, mode in seen.items():
            assert stat.S_IMODE(mode) & 0o077 == 0, (name, oct(mode))
        # The metadata service's store (the engines' shm tags) too; it
        # was 0640.
        for name in os.listdir(tmp_path):
            if name.startswith("master.db"):
                mode = os.stat(tmp_path / name).st_mode
                assert stat.S_IMODE(mode) & 0o077 == 0, (name, oct(mode))
    finally:
        cleanup_segments([x.port for x in ms])
