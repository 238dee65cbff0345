# SPDX-License-Identifier: Apache-2.0
"""The master's sqlite record on a disk that fails with real I/O errors:
tests/tools/faultfs (a pass-through FUSE file system that fails chosen
operations on command) holds the record. Puts whose record cannot be
written fail and free their key, removes fail or happen wholly, sqlite
takes changes again once the faults clear (no transaction is left
open), and a master killed with kill -9 restarts with every acknowledged
object and none of the removed or failed ones, or, when it cannot read
its record, refuses to start instead of starting empty."""
import os
import subprocess
import time

import pytest

import mctest
from pool import Master, Member, Shell, cleanup_segments, eventually

OBJ = 64 * 1024
FAULTFS = ("tests", "tools", "faultfs")
NOT_FOUND = -704


class FaultFS:
    """A faultfs mount: mnt passes backing through; fail() and clear()
    write its control file."""

    def __init__(self, procs, tmp_path):
        try:
            exe = mctest.binary(*FAULTFS)
        except FileNotFoundError as e:
            pytest.skip(f"faultfs not built (no libfuse3?): {e}")
        if not os.path.exists("/dev/fuse"):
            pytest.skip("no /dev/fuse")
        self.backing = tmp_path / "backing"
        self.mnt = tmp_path / "mnt"
        self.backing.mkdir()
        self.mnt.mkdir()
        self.ctl = self.mnt / ".faultfs"
        self.log_path = tmp_path / "faultfs.log"
        log = open(self.log_path, "ab")
        self.proc = procs.popen([exe, str(self.backing), str(self.mnt), "-f"],
                                stdout=log, stderr=log)
        log.close()
        procs.logs.append(self.log_path)

        def mounted():
            if self.proc.poll() is not None:
                raise RuntimeError("faultfs exited: "
                                   + open(self.log_path).read())
            return os.path.ismount(self.mnt)
        eventually(mounted, what="faultfs mounted")

    def write(self, text):
        with open(self.ctl, "w") as f:
            f.write(text + "\n")

    def fail(self, rule):
        """One rule: 'OP ERRNO [n=N] [path=SUBSTRING]'."""
        self.write("fail " + rule)

    def clear(self):
        self.write("clear")

    def hits(self):
        """How many operations the rules failed, all together."""
        total = 0
        for line in self.ctl.read_text().splitlines():
            total += int(line.split()[2].split("=")[1])
        return total

    def unmount(self):
        # Lazily: the master may still hold its record open. faultfs
        # would serve it until it closes, so it is stopped too.
        subprocess.run(["fusermount3", "-u", "-z", str(self.mnt)],
                       check=False, capture_output=True)
        if os.path.ismount(self.mnt):
            subprocess.run(["umount", "-l", str(self.mnt)], check=False)
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def ffs(procs, tmp_path):
    fs = FaultFS(procs, tmp_path)
    try:
        yield fs
    finally:
        # Also when the test failed; the master may still hold its
        # record open: a lazy unmount detaches it all the same.
        fs.unmount()


def pool(procs, tmp_path, ffs, *args):
    # Short leases: a key just put or read can be removed at once.
    m = Master(procs, tmp_path, "--default_kv_lease_ttl", "100", *args,
               db=ffs.mnt / "master.db")
    member = Member(procs, tmp_path, m, size="32MiB")
    eventually(lambda: len(m.segments()) == 1, what="segment")
    return m, member, Shell(procs, tmp_path, m)


def restart(m):
    m.kill()
    m.start()
    eventually(lambda: len(m.segments()) == 1, timeout=20,
               what="member re-mounted")


def put_all(sh, keys, seed0):
    """Put each key (seed seed0 + i); returns {key: code}."""
    codes = {}
    for i, k in enumerate(keys):
        codes[k] = sh.code(f"put {k} {OBJ} {seed0 + i}")
    return codes


def check_all(sh, stored):
    for k, seed in stored.items():
        sh.ok(f"check {k} {OBJ} {seed}")


# The faults a put meets. The default record is synchronous=NORMAL: a
# commit writes the WAL without fsync, so failed fsyncs matter with
# --db_full_sync only.
CASES = {
    "write": ((), "write EIO"),
    "write-enospc": ((), "write ENOSPC"),
    "all": ((), "all EIO path=master.db"),
    "fsync-full-sync": (("--db_full_sync", "true"), "fsync EIO"),
    # Checkpoints inside commits (sqlite's default), not on the thread.
    "write-ckpt-in-commits": (("--db_checkpoint_thread", "false"),
                              "write EIO"),
    "fsync-full-sync-ckpt-in-commits": (
        ("--db_full_sync", "true", "--db_checkpoint_thread", "false"),
        "fsync EIO"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_eio_puts_fail_cleanly(procs, tmp_path, ffs, case):
    args, rule = CASES[case]
    m, member, sh = pool(procs, tmp_path, ffs, *args)
    try:
        stored = {f"pre/{i}": i for i in range(20)}
        for k, seed in stored.items():
            sh.ok(f"put {k} {OBJ} {seed}")

        ffs.fail(rule)
        keys = [f"eio/{i}" for i in range(30)]
        codes = put_all(sh, keys, 100)
        assert ffs.hits() > 0, "no fault fired"
        assert set(codes.values()) <= {0, -1}, codes  # -1: INTERNAL_ERROR
        failed = [k for k, c in codes.items() if c]
        assert failed, f"no put failed under {rule}: {codes}"
        for i, k in enumerate(keys):
            if codes[k] == 0:
                stored[k] = 100 + i
        for k in failed:
            assert sh.code(f"get {k}") == NOT_FOUND, k
        # What was stored before is still served from memory.
        check_all(sh, stored)

        # The faults clear: sqlite takes changes again (a transaction
        # left open would fail every later BEGIN), and the failed keys
        # take new puts.
        ffs.clear()
        for k in failed:
            sh.ok(f"put {k} {OBJ} 9")
            stored[k] = 9
        check_all(sh, stored)
        restart(m)
        check_all(sh, stored)
    finally:
        cleanup_segments([member.port])


def test_eio_once_then_recovers(procs, tmp_path, ffs):
    """One failed write (one failed commit) and the next put succeeds."""
    m, member, sh = pool(procs, tmp_path, ffs)
    try:
        stored = {}
        for i in range(10):
            ffs.fail("write EIO n=1")
            code = sh.code(f"put once/{i} {OBJ} {i}")
            assert code == -1, code
            assert ffs.hits() == 1
            ffs.clear()
            assert sh.code(f"get once/{i}") == NOT_FOUND
            sh.ok(f"put once/{i} {OBJ} {i + 50}")
            sh.ok(f"put after/{i} {OBJ} {i}")
            stored[f"once/{i}"] = i + 50
            stored[f"after/{i}"] = i
        check_all(sh, stored)
        restart(m)
        check_all(sh, stored)
    finally:
        cleanup_segments([member.port])


def test_eio_removes_fail_or_happen(procs, tmp_path, ffs):
    m, member, sh = pool(procs, tmp_path, ffs)
    try:
        stored = {f"k/{i}": i for i in range(20)}
        for k, seed in stored.items():
            sh.ok(f"put {k} {OBJ} {seed}")

        time.sleep(0.2)  # past the leases of the puts
        ffs.fail("write EIO")
        removed, kept = [], []
        for k in list(stored)[:10]:
            code = sh.code(f"rm {k}")
            assert code in (0, -1), code
            (removed if code == 0 else kept).append(k)
        assert ffs.hits() > 0, "no fault fired"
        assert kept, "no remove failed under write EIO"
        assert sh.exist(removed) == [0] * len(removed)
        for k in removed:
            assert sh.code(f"get {k}") == NOT_FOUND, k
            del stored[k]
        check_all(sh, stored)  # the failed removes' keys included

        ffs.clear()
        time.sleep(0.2)  # past the leases of the reads
        for k in kept:
            sh.ok(f"rm {k}")
            removed.append(k)
            del stored[k]
        assert sh.exist(removed) == [0] * len(removed)
        restart(m)
        check_all(sh, stored)
        assert sh.exist(removed) == [0] * len(removed)
    finally:
        cleanup_segments([member.port])


def faulty_session(sh, ffs, rule, stored, removed, n_rm=5):
    """Puts and removes under rule; records what was acknowledged in
    stored and removed; returns the keys whose put failed."""
    ffs.fail(rule)
    codes = put_all(sh, [f"crash/{i}" for i in range(20)], 200)
    for k in list(stored)[:n_rm]:
        code = sh.code(f"rm {k}")
        assert code in (0, -1), code
        if code == 0:
            removed.append(k)
            del stored[k]
    assert ffs.hits() > 0, "no fault fired"
    failed = []
    for i, (k, c) in enumerate(codes.items()):
        assert c in (0, -1), (k, c)
        if c == 0:
            stored[k] = 200 + i
        else:
            failed.append(k)
    assert failed, f"no put failed under {rule}"
    return failed


@pytest.mark.parametrize("case", list(CASES))
def test_kill_after_eio_keeps_what_was_acknowledged(procs, tmp_path, ffs,
                                                    case):
    args, rule = CASES[case]
    m, member, sh = pool(procs, tmp_path, ffs, *args)
    try:
        stored = {f"pre/{i}": i for i in range(20)}
        for k, seed in stored.items():
            sh.ok(f"put {k} {OBJ} {seed}")
        removed = []
        failed = faulty_session(sh, ffs, rule, stored, removed)

        m.kill()
        if not rule.startswith("all"):
            # Restarted with the record's files failing so (the embedded
            # metadata service's own sqlite file, next to it, cannot open
            # on a disk that fails writes): the record is read as it is
            # (opening it and re-adopting the segment write nothing).
            ffs.clear()
            op_err = " ".join(rule.split()[:2])
            ffs.fail(f"{op_err} path=master.db$")
            ffs.fail(f"{op_err} path=master.db-wal$")
            m.start()
            eventually(lambda: len(m.segments()) == 1, timeout=20,
                       what="member re-mounted")
            check_all(sh, stored)
            assert sh.exist(removed) == [0] * len(removed)
            assert sh.exist(failed) == [0] * len(failed)
            m.kill()
        ffs.clear()
        m.start()
        eventually(lambda: len(m.segments()) == 1, timeout=20,
                   what="member re-mounted")
        check_all(sh, stored)
        assert sh.exist(removed) == [0] * len(removed)
        # A put that failed was never acknowledged: it must not come back
        # from the record (its memory was freed and may be reused).
        back = [k for k in failed if sh.code(f"get {k}") != NOT_FOUND]
        assert not back, f"failed puts back after the restart: {back}"
    finally:
        cleanup_segments([member.port])


@pytest.mark.parametrize("rule", ["read EIO", "read EIO path=master.db-wal",
                                  "open EIO path=master.db-wal",
                                  "getattr EIO path=master.db-wal"])
def test_unreadable_record_refuses_to_start(procs, tmp_path, ffs, rule):
    """A master that cannot read its record must not start empty (and
    forget the pool): it exits with a clear error, and starts with
    everything once the record reads again."""
    m, member, sh = pool(procs, tmp_path, ffs)
    try:
        stored = {f"k/{i}": i for i in range(20)}
        for k, seed in stored.items():
            sh.ok(f"put {k} {OBJ} {seed}")
        removed = list(stored)[:5]
        for k in removed:
            sh.ok(f"rm {k}")
            del stored[k]

        m.kill()
        ffs.fail(rule)
        with pytest.raises(RuntimeError) as e:
            m.start()
        assert m.proc.wait(30) != 0
        assert ffs.hits() > 0, "no fault fired"
        # The last line of the log says why, naming the record.
        why = str(e.value).strip().splitlines()[-1]
        assert f"database {m.db}: " in why, why
        assert "I/O error" in why or "unable to open" in why, why

        ffs.clear()
        m.start()
        eventually(lambda: len(m.segments()) == 1, timeout=20,
                   what="member re-mounted")
        check_all(sh, stored)
        assert sh.exist(removed) == [0] * len(removed)
    finally:
        cleanup_segments([member.port])


def test_kill_after_failed_fsync_of_a_put(procs, tmp_path, ffs):
    """--db_full_sync: a commit whose fsync failed left its frames whole
    in the WAL; the put was reported failed (its memory freed) and must
    not come back after a kill -9 (the last thing written is a put)."""
    m, member, sh = pool(procs, tmp_path, ffs, "--db_full_sync", "true")
    try:
        stored = {f"pre/{i}": i for i in range(5)}
        for k, seed in stored.items():
            sh.ok(f"put {k} {OBJ} {seed}")
        failed = faulty_session(sh, ffs, "fsync EIO", stored, [], n_rm=0)
        m.kill()
        ffs.clear()
        m.start()
        eventually(lambda: len(m.segments()) == 1, timeout=20,
                   what="member re-mounted")
        back = [k for k in failed if sh.code(f"get {k}") != NOT_FOUND]
        assert not back, f"failed puts back after the restart: {back}"
        check_all(sh, stored)
        for k in failed:
            sh.ok(f"put {k} {OBJ} 5")
            sh.ok(f"check {k} {OBJ} 5")
    finally:
        cleanup_segments([member.port])
