# SPDX-License-Identifier: Apache-2.0
"""The mount at its size limit: a file is stored whole in one segment, so
none can be larger than the largest segment. The write that crosses it
fails with EFBIG ("File too large"), so cp, dd, tar, a shell redirection
and Python stop there and say so (until 2026-12-07 every write went into
the stage and only the close failed: dd printed "40+0 records out" and
then the close's error, programs that ignore close's error reported
success). Nothing half-written is published: the name keeps its previous
version (or is absent, or the empty file a shell's redirection published
before the command wrote). truncate, ftruncate and fallocate beyond it
are EFBIG too and leave the file as it was. The limit follows the pool
as members join and leave."""
import errno
import os
import subprocess

import pytest

from mount import Member, random_bytes, wait_for

MiB = 1 << 20
SEG = 16 * MiB  # the mount's segment, the pool's only one


def run(*argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


def sh(cmd):
    return run("bash", "-c", cmd)


@pytest.fixture
def small(mounts, tmp_path):
    """A mount whose pool is one 16 MiB segment, with a 40 MiB source."""
    m = mounts(seg="16MiB")
    src = tmp_path / "src"
    src.write_bytes(random_bytes(40 * MiB, 1))
    return m, src


def test_tools_stop_at_the_write_past_the_largest_segment(small, tmp_path):
    m, src = small
    kv = m.kv
    for name in ("dd", "cp", "cat"):
        (kv / name).write_bytes(b"previous version\n")

    # The 17th write of 1 MiB crosses the segment's 16 MiB (dd prints no
    # counts when its close fails too).
    rc, err = run("dd", f"if={src}", f"of={kv}/dd", "bs=1M")
    assert rc == 1, err
    assert "error writing" in err and "File too large" in err, err

    rc, err = run("cp", str(src), f"{kv}/cp")
    assert rc == 1 and "error writing" in err, err
    assert "File too large" in err, err
    rc, err = run("cp", str(src), f"{kv}/cp-new")
    assert rc == 1 and "error writing" in err, err

    rc, err = sh(f"cat {src} > {kv}/cat")
    assert rc == 1 and "write error: File too large" in err, err

    (tmp_path / "t").mkdir()
    os.link(src, tmp_path / "t" / "big")
    run("tar", "-C", str(tmp_path / "t"), "-cf", str(tmp_path / "t.tar"),
        "big")
    (kv / "x").mkdir()
    rc, err = run("tar", "-C", f"{kv}/x", "-xf", str(tmp_path / "t.tar"))
    assert rc == 2 and "big: Cannot write: File too large" in err, err

    # Nothing half-written is published: the previous version (cp), no
    # file, or the empty one published by the close of the descriptor of
    # an open with O_TRUNC that was dup'ed onto stdout (dd's reopen, the
    # shell's redirection), as a local disk shows it truncated.
    assert (kv / "cp").read_bytes() == b"previous version\n"
    assert not (kv / "cp-new").exists()
    assert (kv / "dd").read_bytes() == b""
    assert (kv / "cat").read_bytes() == b""
    assert os.listdir(kv / "x") == []


def test_the_limit_itself_fits(master, mounts):
    """To the byte: a file of the whole (empty) segment, at the default
    90% watermark (which keeps the newest object: test_evict_publish.py);
    the limit shows in .mooncake/stats."""
    m = mounts(seg="16MiB")
    with open(m.path / ".mooncake" / "stats") as f:
        assert f"master_largest_segment_bytes {SEG}\n" in f.read()
    data = random_bytes(SEG + 1, 3)
    fd = os.open(m.kv / "whole", os.O_WRONLY | os.O_CREAT)
    assert os.write(fd, data[:SEG]) == SEG
    os.close(fd)
    assert (m.kv / "whole").read_bytes() == data[:SEG]
    fd = os.open(m.kv / "whole", os.O_WRONLY | os.O_APPEND)
    with pytest.raises(OSError) as e:
        os.write(fd, b"+")
    assert e.value.errno == errno.EFBIG
    with pytest.raises(OSError):
        os.close(fd)
    assert (m.kv / "whole").read_bytes() == data[:SEG]


def test_write_calls_past_the_limit(small):
    """What a program sees, call by call."""
    m, _ = small
    path = m.kv / "f"
    path.write_bytes(b"old")
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    for _ in range(16):
        assert os.write(fd, b"w" * MiB) == MiB
    with pytest.raises(OSError) as e:
        os.write(fd, b"w")
    assert e.value.errno == errno.EFBIG
    # The handle is spoiled: every later call fails, nothing is published.
    for call in (lambda: os.pwrite(fd, b"x", 0), lambda: os.fsync(fd),
                 lambda: os.close(fd)):
        with pytest.raises(OSError) as e:
            call()
        assert e.value.errno == errno.EFBIG
    assert path.read_bytes() == b"old"

    # A write far past the end (a sparse file) fails at once, the same.
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, b"O", 0)
    with pytest.raises(OSError) as e:
        os.pwrite(fd, b"x", 1 << 40)
    assert e.value.errno == errno.EFBIG
    with pytest.raises(OSError) as e:
        os.close(fd)
    assert e.value.errno == errno.EFBIG
    assert path.read_bytes() == b"old"

    # A size asked for beyond the limit is refused and changes nothing,
    # and the handle goes on (as a filesystem's maximum file size).
    fd = os.open(path, os.O_RDWR)
    for call in (lambda: os.ftruncate(fd, SEG + 1),
                 lambda: os.posix_fallocate(fd, 0, 1 << 40),
                 lambda: os.truncate(path, 1 << 30)):
        with pytest.raises(OSError) as e:
            call()
        assert e.value.errno == errno.EFBIG
    os.ftruncate(fd, SEG // 2)
    os.pwrite(fd, b"end", SEG // 2 - 3)
    os.close(fd)
    assert os.path.getsize(path) == SEG // 2
    with open(path, "rb") as f:
        assert f.read(3) == b"old"
        f.seek(SEG // 2 - 3)
        assert f.read() == b"end"


def test_the_limit_follows_the_pool(procs, tmp_path, master, mounts):
    """A member with a larger segment raises the limit, and its leaving
    lowers it again, without a remount (the mount asks the master again
    when its heartbeat reports that the segments changed)."""
    m = mounts(seg="16MiB", env={"MC_STORE_PING_MS": "100"})
    data = random_bytes(24 * MiB, 2)

    def write():
        try:
            fd = os.open(m.kv / "f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        except OSError as e:
            return e.errno
        try:
            os.write(fd, data)
            os.close(fd)
        except OSError as e:
            try:
                os.close(fd)
            except OSError:
                pass
            return e.errno
        return 0

    assert write() == errno.EFBIG
    member = Member(procs, tmp_path, master, size="64MB")
    wait_for(lambda: write() == 0, what="the larger segment's limit")
    assert (m.kv / "f").read_bytes() == data
    member.stop()
    # At the write again, not only at the close.
    fd = os.open(m.kv / "g", os.O_WRONLY | os.O_CREAT)

    def refused():
        try:
            os.pwrite(fd, b"x", 20 * MiB)
        except OSError as e:
            return e.errno == errno.EFBIG
        os.ftruncate(fd, 0)
        return False
    wait_for(refused, what="the limit after the member left")
    with pytest.raises(OSError):
        os.close(fd)
