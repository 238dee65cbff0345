# SPDX-License-Identifier: Apache-2.0
"""Finer semantics of the mount: escaped names, writes of a size known in
advance (straight into the replicas, unwritten ranges zeroed), the
staging limit (ENOSPC, not out-of-memory), writes without O_TRUNC as new
versions (fio's default layout), O_DIRECT reads, a read-only mount."""
import errno
import os
import subprocess
import time

import pytest

from mount import Shell, random_bytes, write_random


def test_escaped_names(mounts, procs, tmp_path, master):
    mnt = mounts(seg="512MiB", opts="xattr")
    sh = Shell(procs, tmp_path, master)
    for key in ("esc/a//b", "esc/x/./y", "esc/p%q", "esc/..", "esc/z",
                "esc/%2E"):
        sh.ok(f"put {key} 10 1")
    names = sorted(os.listdir(mnt.kv / "esc"))
    assert names == ["%25%2E", "%2E%2E", "a", "p%q", "x", "z"], names
    assert os.listdir(mnt.kv / "esc" / "a") == ["%00"]
    assert os.listdir(mnt.kv / "esc" / "a" / "%00") == ["b"]
    assert os.listdir(mnt.kv / "esc" / "x" / "%2E") == ["y"]
    assert os.path.getsize(mnt.kv / "esc" / "p%q") == 10
    assert os.path.getsize(mnt.kv / "esc" / "%2E%2E") == 10
    assert os.getxattr(mnt.kv / "esc" / "p%q",
                       "user.mooncake.key") == b"esc/p%q"
    assert os.getxattr(mnt.kv / "esc" / "%25%2E",
                       "user.mooncake.key") == b"esc/%2E"
    # Names with '%' made through the mount are their keys, as they are
    # (they were decoded as %XX, or refused EINVAL).
    for name in ("100%", "100%done", "a%20b", "r%41", "x%2Fy"):
        (mnt.kv / "esc" / name).write_bytes(name.encode())
        assert os.getxattr(mnt.kv / "esc" / name,
                           "user.mooncake.key") == f"esc/{name}".encode()
    assert {"100%", "100%done", "a%20b", "r%41", "x%2Fy"} <= \
        set(os.listdir(mnt.kv / "esc"))
    assert not (mnt.kv / "esc" / "%7A").exists()
    # A key that is also a directory shows once, as the file, whatever
    # its name looks like.
    # Also when other names come between the file and the directory in
    # the master's byte order ('.' and '-' sort before '/'): "a", "a.txt"
    # and "a/b" listed "a" twice.
    for key in ("dup/%2E", "dup/%2E/y", "dup/p%q", "dup/p%q/y", "dup/a",
                "dup/a.txt", "dup/a-b", "dup/a.txt/c", "dup/a/b",
                "dup/%2E-x"):
        sh.ok(f"put {key} 10 1")
    assert sorted(os.listdir(mnt.kv / "dup")) == \
        ["%25%2E", "%2E-x", "a", "a-b", "a.txt", "p%q"]
    assert (mnt.kv / "dup" / "a").is_file()


def test_keys_with_a_leading_or_trailing_slash(mounts, procs, tmp_path,
                                               master):
    """Keys put through the API that start or end with '/' are reachable
    by the names they are listed under, as every key: "/lead" is
    kv/%00/lead (the lookup of %00 at the top asks for the directory of
    the empty key: EINVAL before), "tr/" is kv/tr/%00 (the directory tr
    holds the key equal to its prefix: ENOENT before, though listed)."""
    mnt = mounts(seg="512MiB")
    sh = Shell(procs, tmp_path, master)
    sh.ok("put /lead2 10 1")
    sh.ok("put tr2/ 12 1")
    top = os.listdir(mnt.kv)
    assert "%00" in top and "tr2" in top, top
    assert (mnt.kv / "%00").is_dir()
    assert os.listdir(mnt.kv / "%00") == ["lead2"]
    assert os.path.getsize(mnt.kv / "%00" / "lead2") == 10
    assert len((mnt.kv / "%00" / "lead2").read_bytes()) == 10
    assert (mnt.kv / "tr2").is_dir()
    assert os.listdir(mnt.kv / "tr2") == ["%00"]
    assert os.path.getsize(mnt.kv / "tr2" / "%00") == 12
    assert len((mnt.kv / "tr2" / "%00").read_bytes()) == 12
    # Not empty, then: rmdir and mkdir say so.
    with pytest.raises(OSError) as e:
        os.rmdir(mnt.kv / "tr2")
    assert e.value.errno == errno.ENOTEMPTY
    with pytest.raises(FileExistsError):
        os.mkdir(mnt.kv / "tr2")


def test_temporary_keys_directory_is_out_of_reach(mounts, procs, tmp_path,
                                                  master):
    """The directory of writes in progress (.mooncakefs-tmp at kv/'s top)
    is hidden by its own name too: never listed, not found, and not made
    or renamed onto (EPERM). Its keys stay (mv of it exposed other
    writers' keys in progress; touch made a file of its name)."""
    mnt = mounts(seg="512MiB")
    sh = Shell(procs, tmp_path, master)
    sh.ok("put .mooncakefs-tmp/leftover 10 1")
    kv = mnt.kv
    hid = kv / ".mooncakefs-tmp"
    (kv / "f").write_bytes(b"f")
    assert ".mooncakefs-tmp" not in os.listdir(kv)
    assert not os.path.lexists(hid)
    for make in (lambda: open(hid, "wb"), lambda: os.mkdir(hid),
                 lambda: os.symlink("f", hid),
                 lambda: os.rename(kv / "f", hid)):
        with pytest.raises(PermissionError) as e:
            make()
        assert e.value.errno == errno.EPERM
    for touch in (lambda: os.rename(hid, kv / "stolen"),
                  lambda: os.chmod(hid, 0o777),
                  lambda: os.listdir(hid),
                  lambda: os.stat(hid / "leftover")):
        with pytest.raises(FileNotFoundError):
            touch()
    assert sorted(os.listdir(kv)) == ["f"]
    assert (kv / "f").read_bytes() == b"f"
    assert sh.exist([".mooncakefs-tmp/leftover"]) == [1]


def test_file_and_directory_of_one_name_across_pages(mounts, procs,
                                                     tmp_path, master):
    """The mount lists a directory in pages of 1,000 of the master's
    names: a key "k" last in one page and the directory "k/" first in
    the next show once, as the file."""
    mnt = mounts(seg="512MiB")
    sh = Shell(procs, tmp_path, master)
    d = mnt.kv / "pg"
    d.mkdir()
    for i in range(999):
        (d / f"f{i:03}").write_bytes(b"x")
    sh.ok("put pg/k 10 1")
    sh.ok("put pg/k/x 10 1")
    names = os.listdir(d)
    assert len(names) == 1000 and names.count("k") == 1, \
        [n for n in names if not n.startswith("f")]


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
    # Writing past the announced size grows the file (staged from then
    # on), as does a second ftruncate; both ways.
    fd = os.open(mnt.kv / "over", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.ftruncate(fd, 4096)
    os.pwrite(fd, b"y" * 100, 0)
    os.pwrite(fd, b"z" * 8192, 4000)
    os.close(fd)
    assert (mnt.kv / "over").read_bytes() == \
        b"y" * 100 + bytes(3900) + b"z" * 8192
    fd = os.open(mnt.kv / "cut", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.ftruncate(fd, 1 << 20)
    os.pwrite(fd, b"a" * 5000, 0)
    os.ftruncate(fd, 3000)
    os.ftruncate(fd, 6000)
    os.close(fd)
    assert (mnt.kv / "cut").read_bytes() == b"a" * 3000 + bytes(3000)


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
    # A new version of it would be staged in full: over the limit.
    with pytest.raises(OSError) as e:
        os.open(m.kv / "fits", os.O_WRONLY)
    assert e.value.errno == errno.ENOSPC


def test_writes_without_truncation_make_a_new_version(mnt):
    """Objects are immutable: opening one for writing without O_TRUNC
    starts a new version as a copy of the current bytes; it replaces the
    object at close, and a reader that had it open keeps the old one."""
    path = mnt.kv / "ver"
    data = bytearray(write_random(path, 300000, 1))
    # Opened for writing but never written: the object is not replaced.
    before = os.stat(path).st_mtime_ns
    time.sleep(0.05)
    fd = os.open(path, os.O_RDWR)
    assert os.pread(fd, 16, 0) == data[:16]
    os.close(fd)
    assert os.stat(path).st_mtime_ns == before
    old = open(path, "rb")
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, b"X" * 10, 100)
    os.close(fd)
    data[100:110] = b"X" * 10
    assert path.read_bytes() == data
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"tail!")
    os.close(fd)
    data += b"tail!"
    assert path.read_bytes() == data
    fd = os.open(path, os.O_RDWR)
    assert os.pread(fd, 10, 100) == b"X" * 10
    os.pwrite(fd, b"head", 0)
    os.ftruncate(fd, 200000)
    os.close(fd)
    data[0:4] = b"head"
    del data[200000:]
    assert path.read_bytes() == data
    # The reader opened before any of that still reads the first version.
    first = old.read()
    old.close()
    assert len(first) == 300000 and first[100:110] != b"X" * 10
    # Truncating by path (no open file) makes a new version too.
    os.truncate(path, 10)
    assert path.read_bytes() == data[:10]


def test_fio_default_layout(mnt):
    """fio lays its file out, closes it and reopens it without O_TRUNC."""
    p = subprocess.run(["fio", "--name=lay", f"--directory={mnt.kv}",
                        "--rw=randwrite", "--bs=64k", "--size=4m",
                        "--ioengine=psync", "--verify=crc32c",
                        "--do_verify=1", "--verify_state_save=0"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "verify" not in p.stderr.lower(), p.stderr
    assert os.path.getsize(mnt.kv / "lay.0.0") == 4 << 20


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


def test_node_kinds_and_fixed_names(mnt):
    """mknod makes regular files only; FIFOs, sockets, device nodes and
    hard links are EPERM; the fixed names refuse chmod and truncate."""
    import socket
    import stat
    kv = mnt.kv

    def eperm(fn, *args):
        with pytest.raises(OSError) as e:
            fn(*args)
        assert e.value.errno == errno.EPERM, (fn, args)
    os.mknod(kv / "plain", 0o644 | stat.S_IFREG)
    assert (kv / "plain").read_bytes() == b""
    assert "plain" in os.listdir(kv)
    eperm(os.mkfifo, kv / "fifo")
    eperm(os.mknod, kv / "blk", 0o644 | stat.S_IFBLK, os.makedev(1, 2))
    eperm(os.mknod, kv / "chr", 0o644 | stat.S_IFCHR, os.makedev(1, 2))
    s = socket.socket(socket.AF_UNIX)
    try:
        eperm(s.bind, str(kv / "sock"))
    finally:
        s.close()
    eperm(os.link, kv / "plain", kv / "hard")
    assert sorted(os.listdir(kv)) == ["plain"]
    stats = mnt.path / ".mooncake" / "stats"
    eperm(os.chmod, stats, 0o600)
    eperm(os.truncate, stats, 0)
    eperm(os.utime, stats, (0, 0))
    eperm(os.chmod, mnt.path / ".mooncake", 0o700)
