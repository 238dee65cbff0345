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

from mount import enotconn, random_bytes, umount, wait_for, write_random


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
