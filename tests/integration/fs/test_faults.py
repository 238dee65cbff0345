# SPDX-License-Identifier: Apache-2.0
"""Faults seen through the mount: the daemon killed -9 (ENOTCONN, no hang;
a remount brings back what its segment held), the master down (EIO within
the RPC timeout; back: old files byte-exact, new writes work), a full pool
(ENOSPC, nothing partial)."""
import errno
import os
import signal
import subprocess
import time

import pytest

from mount import (Member, cleanup_segments, enotconn, random_bytes, umount,
                   wait_for, write_random)


def test_daemon_killed_then_remounted(mounts, master):
    m = mounts(seg="64MiB", opts="replicas=1")
    files = {f"k{i}": write_random(m.kv / f"k{i}", 300000 + i, i)
             for i in range(10)}
    pid = m.pid()
    assert pid
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: enotconn(m.kv), what="ENOTCONN")
    t0 = time.monotonic()
    with pytest.raises(OSError) as e:
        os.listdir(m.kv)
    assert e.value.errno == errno.ENOTCONN
    assert time.monotonic() - t0 < 2
    umount(m.path, lazy=True)
    m.mount()  # same segment name: the segment is re-adopted
    wait_for(lambda: "re-adopted" in m.log(), what="re-adoption")
    for name, data in files.items():
        assert open(m.kv / name, "rb").read() == data


def test_daemon_remounted_with_another_size(mounts, master):
    """The kept segment re-mounted with another segment_size: its objects
    are dropped at once, said on both sides, not left listed as "mounted"
    (with reads failing) until the old owner's client_ttl ends."""
    m = mounts(seg="32MiB")
    write_random(m.kv / "old", 300000, 1)
    os.kill(m.pid(), signal.SIGKILL)
    wait_for(lambda: enotconn(m.kv), what="ENOTCONN")
    umount(m.path, lazy=True)
    m.seg = "48MiB"
    m.mount()
    wait_for(lambda: "re-mounted with another size" in master.log(),
             what="the old segment dropped")
    assert "was kept with 33554432 bytes and is now given 50331648" in \
        m.log()
    assert len(master.segments()) == 1
    assert not os.path.exists(m.kv / "old")
    new = write_random(m.kv / "new", 300000, 2)
    assert open(m.kv / "new", "rb").read() == new


def test_master_down_gives_eio_then_recovers(mounts, master, tmp_path):
    m = mounts(seg="64MiB")
    old = write_random(m.kv / "old", 2 << 20, 1)
    master.kill()
    t0 = time.monotonic()
    for op in (lambda: open(m.kv / "old2", "wb").write(b"x"),
               lambda: os.stat(m.kv / "never"),
               lambda: os.listdir(m.kv),
               lambda: os.statvfs(m.path)):
        with pytest.raises(OSError) as e:
            op()
        assert e.value.errno == errno.EIO, e.value
    # Every call failed within the RPC timeout (2 s in these tests).
    assert time.monotonic() - t0 < 4 * 3
    master.start()
    wait_for(lambda: len(master.segments()) == 1, timeout=20,
             what="mount re-mounted its segment")
    assert open(m.kv / "old", "rb").read() == old
    new = write_random(m.kv / "new", 1 << 20, 2)
    assert open(m.kv / "new", "rb").read() == new


def test_master_restarted_without_record_never_gives_other_bytes(
        procs, tmp_path):
    """A file open for reading when the master restarts with no record
    (--db_path memory, or its file lost): its object is gone, and the
    memory it was in comes back as a new segment. New files written then
    must not land where the open file's reads still go: the master places
    nothing in a re-mounted segment it did not know for a hold's TTL, so
    the open file reads EIO (or its own bytes), never the new file's."""
    from mount import Mount
    from pool import Master
    master = Master(procs, tmp_path, "--db_path", "memory",
                    "--default_kv_lease_ttl", "1000")
    m = Mount(procs, tmp_path, master, seg="32MiB")
    try:
        restarted_without_record(m, master)
    finally:
        m.cleanup()


def restarted_without_record(m, master):
    old = write_random(m.kv / "victim", 2 << 20, 1)
    f = open(m.kv / "victim", "rb", buffering=0)
    assert f.read(4096) == old[:4096]
    master.kill()
    master.start()
    wait_for(lambda: len(master.segments()) == 1, timeout=20,
             what="the mount's segment re-mounted")
    filler = random_bytes(24 << 20, 2)
    try:
        with open(m.kv / "filler", "wb") as g:
            g.write(filler)
        wrote = True
    except OSError as e:
        assert e.errno == errno.ENOSPC, e  # nothing placed there yet
        wrote = False
    f.seek(0)
    try:
        got = f.read()
        assert got == old, "the open file read other bytes"
    except OSError as e:
        assert e.errno == errno.EIO, e
    f.close()
    assert "was not in the record: nothing is placed in it" in master.log()
    # Once readers of the run before are surely done (3 lease TTLs after
    # the start), the segment takes new files again.
    if not wrote:
        def fits():
            try:
                with open(m.kv / "filler", "wb") as g:
                    g.write(filler)
                return True
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
                return False
        wait_for(fits, timeout=20, what="the segment placeable again")
    assert open(m.kv / "filler", "rb").read() == filler


def test_full_pool_gives_enospc_and_nothing_partial(mounts, tmp_path):
    m = mounts(seg="16MiB")
    kept = write_random(m.kv / "a", 6 << 20, 1)
    # A reader holds "a": eviction may not take it, so the pool is full
    # for anything over 10 MiB.
    reader = open(m.kv / "a", "rb")
    reader.read(1)
    big = random_bytes(12 << 20, 2)
    with pytest.raises(OSError) as e:
        with open(m.kv / "b", "wb") as f:
            f.write(big)
    assert e.value.errno == errno.ENOSPC
    assert not os.path.exists(m.kv / "b")
    assert sorted(os.listdir(m.kv)) == ["a"]
    assert open(m.kv / "a", "rb").read() == kept
    # cp reports it too, and a smaller file still fits.
    src = tmp_path / "big"
    src.write_bytes(big)
    p = subprocess.run(["cp", str(src), str(m.kv / "c")],
                       capture_output=True, text=True)
    assert p.returncode != 0 and "No space left" in p.stderr
    assert not os.path.exists(m.kv / "c")
    small = write_random(m.kv / "d", 1 << 20, 3)
    assert open(m.kv / "d", "rb").read() == small
    reader.close()


def test_files_written_while_a_member_is_dead(procs, tmp_path, mounts,
                                              master):
    """Pool members killed -9 stay in the master's view until client_ttl;
    the files a mount without memory of its own wrote meanwhile (cp,
    two replicas) failed to close when placed there (EIO). The mount
    writes such a file again elsewhere and the master places no more
    there."""
    ms = [Member(procs, tmp_path, master, size="32MB") for _ in range(3)]
    try:
        wait_for(lambda: len(master.segments()) == 3, what="segments")
        m = mounts(seg="0", opts="replicas=2")
        ms[0].kill()
        src = tmp_path / "src"
        for i in range(20):
            data = random_bytes(1 << 20, i)
            src.write_bytes(data)
            r = subprocess.run(["cp", str(src), str(m.kv / f"f{i}")],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, (i, r.stderr)
            assert (m.kv / f"f{i}").read_bytes() == data, i
        assert "could not reach" in m.log(), m.log()[-3000:]
    finally:
        cleanup_segments([x.port for x in ms])
