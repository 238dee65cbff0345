# SPDX-License-Identifier: Apache-2.0
"""Finer semantics of the mount: escaped names, writes of a size known in
advance (straight into the replicas, unwritten ranges zeroed), the
staging limit (ENOSPC, not out-of-memory), immutability, O_DIRECT reads,
a read-only mount."""
import errno
import os
import subprocess

import pytest

from mount import Shell, random_bytes, write_random


def test_escaped_names(mnt, procs, tmp_path, master):
    sh = Shell(procs, tmp_path, master)
    for key in ("esc/a//b", "esc/x/./y", "esc/p%q", "esc/..", "esc/z"):
        sh.ok(f"put {key} 10 1")
    names = sorted(os.listdir(mnt.kv / "esc"))
    assert names == ["%2E%2E", "a", "p%25q", "x", "z"], names
    assert os.listdir(mnt.kv / "esc" / "a") == ["%00"]
    assert os.listdir(mnt.kv / "esc" / "a" / "%00") == ["b"]
    assert os.listdir(mnt.kv / "esc" / "x" / "%2E") == ["y"]
    assert os.path.getsize(mnt.kv / "esc" / "p%25q") == 10
    assert os.path.getsize(mnt.kv / "esc" / "%2E%2E") == 10
    # Both spellings reach the same key when looked up.
    assert os.path.getsize(mnt.kv / "esc" / "%7A") == 10
    assert os.getxattr(mnt.kv / "esc" / "p%25q",
                       "user.mooncake.key") == b"esc/p%q"


def test_known_size_writes_go_straight_to_replicas(mnt):
    size = 3 << 20
    data = random_bytes(size, 1)
    fd = os.open(mnt.kv / "sized", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.ftruncate(fd, size)
    # Out of order, in 256 KiB pieces.
    pieces = list(range(0, size, 256 * 1024))
    for off in reversed(pieces):
        os.pwrite(fd, data[off:off + 256 * 1024], off)
    os.close(fd)
    assert open(mnt.kv / "sized", "rb").read() == data
    # Ranges never written read as zeros, not as old pool bytes.
    fd = os.open(mnt.kv / "holey", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.posix_fallocate(fd, 0, size)
    os.pwrite(fd, b"x" * 1000, 1 << 20)
    os.close(fd)
    got = open(mnt.kv / "holey", "rb").read()
    assert len(got) == size
    assert got[:1 << 20] == bytes(1 << 20)
    assert got[1 << 20:(1 << 20) + 1000] == b"x" * 1000
    assert got[(1 << 20) + 1000:] == bytes(size - (1 << 20) - 1000)
    # Writing past the announced size is refused.
    fd = os.open(mnt.kv / "over", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.ftruncate(fd, 4096)
    with pytest.raises(OSError) as e:
        os.pwrite(fd, b"y" * 8192, 0)
    assert e.value.errno == errno.EFBIG
    os.close(fd)


def test_staging_limit_gives_enospc(mounts):
    m = mounts(seg="64MiB", opts="staging_limit=4MiB")
    with pytest.raises(OSError) as e:
        with open(m.kv / "toobig", "wb") as f:
            for _ in range(8):
                f.write(b"z" * (1 << 20))
    assert e.value.errno == errno.ENOSPC
    assert not os.path.exists(m.kv / "toobig")
    # The same bytes with the size known first need no staging.
    fd = os.open(m.kv / "fits", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.ftruncate(fd, 8 << 20)
    for i in range(8):
        os.write(fd, b"z" * (1 << 20))
    os.close(fd)
    assert os.path.getsize(m.kv / "fits") == 8 << 20


def test_objects_are_immutable(mnt):
    write_random(mnt.kv / "imm", 1000, 1)
    for flags in (os.O_WRONLY, os.O_WRONLY | os.O_APPEND, os.O_RDWR):
        with pytest.raises(OSError) as e:
            os.open(mnt.kv / "imm", flags)
        assert e.value.errno == errno.EPERM
    with pytest.raises(OSError):
        os.truncate(mnt.kv / "imm", 10)
    assert os.path.getsize(mnt.kv / "imm") == 1000


def test_o_direct_reads(mnt, tmp_path):
    data = write_random(mnt.kv / "direct", 8 << 20, 3)
    p = subprocess.run(["dd", f"if={mnt.kv / 'direct'}",
                        f"of={tmp_path / 'out'}", "bs=1M", "iflag=direct"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out").read_bytes() == data


def test_read_only_mount(mounts, master, procs, tmp_path):
    mounts(name="rw", seg="16MiB")  # a member holding the data
    sh = Shell(procs, tmp_path, master)
    sh.ok("put ro/k 100 1")
    m = mounts(name="ro", seg="0", opts="ro")
    assert os.path.getsize(m.kv / "ro" / "k") == 100
    with pytest.raises(OSError) as e:
        open(m.kv / "ro" / "new", "wb")
    assert e.value.errno == errno.EROFS
    with pytest.raises(OSError) as e:
        os.unlink(m.kv / "ro" / "k")
    assert e.value.errno == errno.EROFS
