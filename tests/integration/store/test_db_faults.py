# SPDX-License-Identifier: Apache-2.0
"""The master's sqlite record on a full disk (a 4 MiB tmpfs the test
mounts and fills): puts whose record cannot be written fail and free
their key (they used to leave it blocked, and later puts of it said
success without storing anything), removes fail or happen wholly, and a
restart, on the full disk and after it has room again, finds every
acknowledged object and none of the removed ones."""
import json

import pytest

from mctest import fill_fs, small_tmpfs
from pool import Master, Member, Shell, cleanup_segments, eventually

OBJ = 64 * 1024


@pytest.fixture
def small_fs(tmp_path):
    with small_tmpfs(tmp_path / "dbfs") as d:
        yield d


def restart_and_check(m, sh, stored, removed):
    """kill -9 and restart m: every key of stored (key -> seed) reads back
    byte-exact, none of removed exists."""
    m.kill()
    m.start()
    eventually(lambda: len(m.segments()) == 1, timeout=20,
               what="member re-mounted")
    for k, seed in stored.items():
        sh.ok(f"check {k} {OBJ} {seed}")
    assert sh.exist(removed) == [0] * len(removed)


# Checkpoints in the commits (sqlite's default) and on the master's
# thread: a failing checkpoint must not lose or invent anything either.
@pytest.mark.parametrize("ckpt", [("--db_checkpoint_thread=false",), ()],
                         ids=["ckpt_in_commits", "ckpt_thread"])
def test_full_disk_loses_nothing_and_claims_nothing(procs, tmp_path,
                                                     small_fs, ckpt):
    m = Master(procs, tmp_path, *ckpt, db=small_fs / "master.db")
    member = Member(procs, tmp_path, m, size="32MiB")
    try:
        eventually(lambda: len(m.segments()) == 1, what="segment")
        sh = Shell(procs, tmp_path, m)
        stored = {f"pre/{i}": i for i in range(20)}
        for k, seed in stored.items():
            sh.ok(f"put {k} {OBJ} {seed}")
        fill_fs(small_fs)
        # Before any change fails (an idle master tries none), /health
        # says the disk is full: it said "ok" until a commit failed, and
        # again after any that passed while the disk stayed full.
        st, body = m.http("/health")
        assert st == 200 and json.loads(body)["status"] == "degraded", body
        assert "free" in json.loads(body)["record"], body
        assert m.metric("master_db_disk_low") == 1
        assert m.metric("master_db_disk_free_bytes") < 256 << 10

        codes = {f"full/{i}": sh.code(f"put full/{i} {OBJ} {100 + i}")
                 for i in range(60)}
        failed = [k for k, c in codes.items() if c]
        assert failed, "the full disk refused no put"
        assert set(codes.values()) <= {0, -1}, codes  # -1: INTERNAL_ERROR
        # /health said "ok" throughout: it says what fails now.
        st, body = m.http("/health")
        assert st == 200 and json.loads(body)["status"] == "degraded", body
        assert m.metric("master_db_write_failing") == 1
        for k, c in codes.items():
            if c == 0:
                stored[k] = 100 + int(k.split("/")[1])
        for k in failed:
            assert sh.code(f"get {k}") == -704, k
        # Once more: a put that says success stored its bytes (a failed
        # put used to leave its key blocked, and the next put of it got
        # -705, which the client counts as success).
        for k in failed[:5]:
            code = sh.code(f"put {k} {OBJ} 7")
            assert code in (0, -1), code
            if code == 0:
                sh.ok(f"check {k} {OBJ} 7")
                stored[k] = 7

        removed = []
        for k in list(stored)[:10]:
            code = sh.code(f"rm {k}")
            assert code in (0, -1), code
            if code == 0:
                removed.append(k)
                del stored[k]
        assert sh.exist(removed) == [0] * len(removed)

        # A batch is one transaction: all of it happens or none, and every
        # key's answer says which.
        codes = [int(c) for c in sh.ok(f"bput 6 batch/ {OBJ} 500").split(",")]
        assert set(codes) in ({0}, {-1}), codes
        batch = [f"batch/{i}" for i in range(6)]
        assert sh.exist(batch) == [int(codes[0] == 0)] * 6
        if codes[0] == 0:
            stored.update({k: 500 + i for i, k in enumerate(batch)})
        some = list(stored)[-4:]
        codes = [int(c) for c in
                 sh.ok("brm " + " ".join(some + ["never/there"])).split()]
        assert set(codes[:4]) in ({0}, {-1}) and codes[4] in (-1, -704), codes
        assert sh.exist(some) == [int(codes[0] != 0)] * 4
        if codes[0] == 0:
            for k in some:
                removed.append(k)
                del stored[k]

        # A restart on the full disk: the record is read as it is, and
        # /health says the disk is full from the start.
        restart_and_check(m, sh, stored, removed)
        st, body = m.http("/health")
        assert json.loads(body)["status"] == "degraded", body

        # Room again: the failed keys take new puts, and a restart keeps
        # them too.
        (small_fs / "filler").unlink()
        for k in failed:
            if k not in stored:
                sh.ok(f"put {k} {OBJ} 9")
                stored[k] = 9
        st, body = m.http("/health")
        assert json.loads(body)["status"] == "ok", body
        assert m.metric("master_db_write_failing") == 0
        assert m.metric("master_db_disk_low") == 0
        restart_and_check(m, sh, stored, removed)
    finally:
        cleanup_segments([member.port])


def test_start_on_full_disk_warns(procs, tmp_path, small_fs):
    """A master started on a full record disk logs it at once, naming the
    record and its free space (it said nothing until a change failed),
    and /health is degraded from its first answer."""
    m = Master(procs, tmp_path, db=small_fs / "master.db")
    m.kill()
    fill_fs(small_fs)
    m.start()
    log = m.log_path.read_text(errors="replace")  # both runs' lines
    warn = [ln for ln in log.splitlines()
            if "KiB free on its filesystem" in ln]
    assert len(warn) == 1 and " W " in warn[0] and \
        str(small_fs / "master.db") in warn[0], log
    st, body = m.http("/health")
    assert st == 200 and json.loads(body)["status"] == "degraded", body
    assert "free" in json.loads(body)["record"], body
    assert m.metric("master_db_write_failing") == 0  # nothing tried yet
