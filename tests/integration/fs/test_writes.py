# SPDX-License-Identifier: Apache-2.0
"""Writes every program relies on, on the real mount with real programs:
shell redirections (every close of a copy of the descriptor publishes,
and the descriptor stays writable), dd, gzip, sort -o, truncate both ways,
sed -i, tar -x, split, cp -p, a forked writer, a subprocess's stdout,
appends, O_RDWR in place, periodic fsync, mmap, and a failed publish that
leaves the previous version intact."""
import errno
import mmap
import os
import subprocess
import tarfile
import time
import zlib

import pytest

from mount import random_bytes, wait_for, write_random

MiB = 1 << 20


def sh(cmd, cwd=None):
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, cwd=cwd,
                       timeout=120)
    assert p.returncode == 0, f"{cmd}: {p.stderr.decode(errors='replace')}"
    return p.stdout


def test_shell_redirections(mnt, tmp_path):
    kv = mnt.kv
    (tmp_path / "a").write_bytes(b"first\n")
    (tmp_path / "b").write_bytes(b"second\n")
    cases = {
        f"echo hi > {kv}/echo": b"hi\n",
        f"printf 'x%sy' 1 2 3 > {kv}/printf": b"x1yx2yx3y",
        f"cat {tmp_path}/a {tmp_path}/b > {kv}/cat": b"first\nsecond\n",
        f"(echo a; echo b) > {kv}/group": b"a\nb\n",
        f"exec 3>{kv}/fd3; echo x >&3; echo y >&3; exec 3>&-": b"x\ny\n",
        f"echo a >> {kv}/app; echo b >> {kv}/app; echo c >> {kv}/app":
            b"a\nb\nc\n",
        f"{{ echo one; echo two >&2; }} > {kv}/both 2>&1": b"one\ntwo\n",
    }
    for cmd, want in cases.items():
        sh(cmd)
    for cmd, want in cases.items():
        name = cmd.split(f"{kv}/")[1].split()[0].rstrip(";")
        assert (kv / name).read_bytes() == want, cmd


def test_redirection_over_an_existing_file(mnt):
    path = mnt.kv / "existing"
    write_random(path, 100000, 1)
    sh(f"echo new > {path}")
    assert path.read_bytes() == b"new\n"
    sh(f": > {path}")
    assert path.read_bytes() == b""


def test_a_dup_survives_the_close_of_the_original(mnt):
    p = str(mnt.kv / "dup")
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    fd2 = os.dup(fd)
    os.close(fd)  # a flush: the empty file is published
    assert os.path.getsize(p) == 0
    os.write(fd2, b"x" * 10)
    os.write(fd2, b"y")
    os.close(fd2)
    assert open(p, "rb").read() == b"x" * 10 + b"y"


def test_dd_gzip_and_a_subprocess_stdout(mnt, tmp_path):
    src = tmp_path / "src"
    data = write_random(src, 5 * MiB + 123, 2)
    sh(f"dd if={src} of={mnt.kv}/dd bs=64k status=none")
    assert (mnt.kv / "dd").read_bytes() == data
    sh(f"dd if={src} of={mnt.kv}/dd1 bs=1M count=2 status=none "
       "oflag=direct")
    assert (mnt.kv / "dd1").read_bytes() == data[:2 * MiB]
    text = b"line %d\n" * 1
    (tmp_path / "t").write_bytes(b"".join(text % i for i in range(50000)))
    sh(f"gzip -c {tmp_path}/t > {mnt.kv}/t.gz")
    assert sh(f"gunzip -c {mnt.kv}/t.gz") == (tmp_path / "t").read_bytes()
    with open(mnt.kv / "stdout", "w") as out:
        subprocess.run(["seq", "1", "20000"], stdout=out, check=True)
    want = "".join(f"{i}\n" for i in range(1, 20001)).encode()
    assert (mnt.kv / "stdout").read_bytes() == want


def test_sort_sed_split_tar_cp(mnt, tmp_path):
    kv = mnt.kv
    (kv / "s").write_text("c\na\nb\n")
    sh(f"sort -o {kv}/s {kv}/s")
    assert (kv / "s").read_text() == "a\nb\nc\n"
    sh(f"sed -i 's/b/B/' {kv}/s")
    assert (kv / "s").read_text() == "a\nB\nc\n"
    # split into the mount, join back
    big = write_random(tmp_path / "big", 3 * MiB + 7, 3)
    os.mkdir(kv / "parts")
    sh(f"split -b 1000000 {tmp_path}/big {kv}/parts/p")
    assert len(os.listdir(kv / "parts")) == 4
    assert sh(f"cat {kv}/parts/p*") == big
    # tar -x of a tree with several sizes
    tree = tmp_path / "tree"
    (tree / "d" / "e").mkdir(parents=True)
    files = {"f0": 0, "f1": 1, "d/f2": 70000, "d/e/f3": 2 * MiB}
    for name, size in files.items():
        write_random(tree / name, size, 4)
    with tarfile.open(tmp_path / "t.tar", "w") as t:
        t.add(tree, arcname="tree")
    sh(f"tar -xf {tmp_path}/t.tar -C {kv}")
    for name in files:
        assert (kv / "tree" / name).read_bytes() == \
            (tree / name).read_bytes(), name
    # cp -p (mode, times and owner are accepted; issue 13 stores them)
    sh(f"cp -p {tree}/d/f2 {kv}/cpp")
    assert (kv / "cpp").read_bytes() == (tree / "d" / "f2").read_bytes()


def test_truncate_by_path_both_ways(mnt):
    path = mnt.kv / "tr"
    data = write_random(path, 10000, 5)
    sh(f"truncate -s 4000 {path}")
    assert path.read_bytes() == data[:4000]
    sh(f"truncate -s 9000 {path}")
    assert path.read_bytes() == data[:4000] + bytes(5000)
    sh(f"truncate -s 0 {path}")
    assert path.read_bytes() == b""
    # truncate(2) itself, by path, no descriptor
    data = write_random(path, 10000, 5)
    os.truncate(path, 3000)
    assert path.read_bytes() == data[:3000]
    os.truncate(path, 5000)
    assert path.read_bytes() == data[:3000] + bytes(2000)
    with pytest.raises(OSError) as e:
        os.truncate(mnt.kv, 0)
    assert e.value.errno == errno.EISDIR


def test_forked_writer(mnt):
    p = str(mnt.kv / "forked")
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    pid = os.fork()
    if pid == 0:
        try:
            os.write(fd, b"child\n")
        finally:
            os._exit(0)  # closes its copy: a flush
    assert os.waitpid(pid, 0)[1] == 0
    assert open(p, "rb").read() == b"child\n"
    os.write(fd, b"parent\n")
    os.close(fd)
    assert open(p, "rb").read() == b"child\nparent\n"


def test_rdwr_in_place_reads_its_own_writes(mnt):
    path = mnt.kv / "rw"
    data = bytearray(write_random(path, 2 * MiB, 6))
    fd = os.open(path, os.O_RDWR)
    os.pwrite(fd, b"Z" * 5000, MiB - 100)
    data[MiB - 100:MiB + 4900] = b"Z" * 5000
    assert os.pread(fd, 6000, MiB - 500) == data[MiB - 500:MiB + 5500]
    os.fsync(fd)  # published: another reader sees the change
    assert path.read_bytes() == data
    os.lseek(fd, 0, os.SEEK_END)
    os.write(fd, b"end")
    data += b"end"
    os.close(fd)
    assert path.read_bytes() == data


def test_rdwr_with_the_size_first_reads_its_own_writes(mnt):
    """fio's pattern (O_RDWR, fallocate, writes) writes straight into the
    replicas; a read then moves the content to the stage."""
    path = mnt.kv / "rwsize"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    os.posix_fallocate(fd, 0, 2 * MiB)
    os.pwrite(fd, b"r" * 1000, MiB)
    assert os.pread(fd, 1100, MiB - 50) == bytes(50) + b"r" * 1000 + \
        bytes(50)
    os.pwrite(fd, b"s" * 10, 0)
    os.close(fd)
    assert path.read_bytes() == b"s" * 10 + bytes(MiB - 10) + \
        b"r" * 1000 + bytes(MiB - 1000)


def test_fstat_of_a_writer_shows_its_size(mnt):
    """fstat without the kernel's size cache: the daemon answers for the
    inode (no handle), and the kernel takes that answer."""
    path = mnt.kv / "fst"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        for size, op in ((50, lambda: os.write(fd, b"z" * 50)),
                         (10, lambda: os.ftruncate(fd, 10)),
                         (3 * MiB, lambda: os.ftruncate(fd, 3 * MiB)),
                         (3 * MiB + 1, lambda: os.pwrite(fd, b"e", 3 * MiB))):
            op()
            for _ in range(3):
                drop = open("/proc/sys/vm/drop_caches", "w")
                drop.write("2")  # the kernel asks the daemon again
                drop.close()
                assert os.fstat(fd).st_size == size
                assert os.lseek(fd, 0, os.SEEK_END) == size
    finally:
        os.close(fd)
    assert path.stat().st_size == 3 * MiB + 1


def test_periodic_fsync_publishes_each_time(mounts):
    """Each fsync publishes the whole file so far (4 + 8 + ... + 64 MiB
    moved, and each replaced version's memory stays until its readers'
    leases end: a pool of 1 GiB for a 64 MiB file)."""
    mnt = mounts(seg="1GiB")
    path = mnt.kv / "log"
    chunk = 4 * MiB
    blob = random_bytes(64 * MiB, 7)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    for i in range(16):
        os.write(fd, blob[i * chunk:(i + 1) * chunk])
        os.fsync(fd)
        # Another reader sees exactly what was written so far.
        got = path.read_bytes()
        assert len(got) == (i + 1) * chunk
        assert got == blob[:(i + 1) * chunk]
    os.fdatasync(fd)  # nothing new: publishes nothing, fails nothing
    os.close(fd)
    assert zlib.crc32(path.read_bytes()) == zlib.crc32(blob)


def test_known_size_then_dup_and_more_writes(mnt):
    """The direct path (size first), published by a flush, then written
    again through the remaining descriptor."""
    path = mnt.kv / "direct"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.ftruncate(fd, 3 * MiB)
    os.pwrite(fd, b"a" * MiB, 0)
    fd2 = os.dup(fd)
    os.close(fd)
    assert path.read_bytes() == b"a" * MiB + bytes(2 * MiB)
    os.pwrite(fd2, b"b" * 10, 2 * MiB)
    os.close(fd2)
    assert path.read_bytes() == b"a" * MiB + bytes(MiB) + b"b" * 10 + \
        bytes(MiB - 10)


def test_mmap(mnt):
    """Reading through mmap works; a writable shared mapping of a file open
    for writing is refused when mapped (ENODEV), not at some later
    msync."""
    path = mnt.kv / "mm"
    data = write_random(path, 300000, 8)
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        assert m[:] == data
        m.close()
    fd = os.open(path, os.O_RDWR)
    with pytest.raises(OSError) as e:
        mmap.mmap(fd, 300000, flags=mmap.MAP_SHARED,
                  prot=mmap.PROT_READ | mmap.PROT_WRITE)
    assert e.value.errno == errno.ENODEV
    os.close(fd)
    assert path.read_bytes() == data


def test_sqlite_database(mnt):
    """Python's sqlite3 with its default rollback journal keeps every
    committed transaction, across a reopen. WAL mode needs a writable
    shared mapping for its index, which the mount refuses (ENODEV): a
    database switched to it opens with "disk I/O error" until it is
    opened in exclusive locking mode (no index file, sqlite keeps it in
    memory), where WAL works too and the journal can be switched back
    (docs/operations.md). Nothing committed is lost either way."""
    import sqlite3

    path = mnt.kv / "app.db"
    db = sqlite3.connect(path)
    db.execute("create table t (k integer primary key, v text)")
    for i in range(20):
        with db:
            db.executemany("insert into t values (?, ?)",
                           [(i * 10 + j, f"v{i}.{j}") for j in range(10)])
    db.close()
    db = sqlite3.connect(path)
    assert db.execute("select count(*), sum(k) from t").fetchone() == \
        (200, sum(range(200)))
    assert db.execute("pragma integrity_check").fetchone() == ("ok",)
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        db.execute("pragma journal_mode=wal").fetchone()
        db.execute("insert into t values (1000, 'x')")
        db.commit()
    db.close()
    db = sqlite3.connect(path)
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        db.execute("select count(*) from t").fetchone()
    db.close()

    # Exclusive locking mode: WAL without the shared index.
    db = sqlite3.connect(path)
    db.execute("pragma locking_mode=exclusive")
    assert db.execute("select count(*) from t").fetchone() == (200,)
    with db:
        db.execute("insert into t values (1000, 'x')")
    db.close()
    db = sqlite3.connect(path)
    db.execute("pragma locking_mode=exclusive")
    assert db.execute("select count(*) from t").fetchone() == (201,)
    assert db.execute("pragma journal_mode=delete").fetchone() == \
        ("delete",)
    db.close()
    db = sqlite3.connect(path)
    assert db.execute("select count(*) from t").fetchone() == (201,)
    assert db.execute("pragma integrity_check").fetchone() == ("ok",)
    db.close()


def test_sqlite_database_written_again(mnt):
    """sqlite compares stat(path) with fstat of its descriptor before each
    write transaction ("attempt to write a readonly database" when they
    differ): a file open for writing keeps the name's inode number across
    its publishes, whether this mount created it (reopened at once, the
    change events of the last close still arriving) or found it (the
    kernel forgot the created inode; written on another host)."""
    import sqlite3

    def write(path, rounds, first):
        db = sqlite3.connect(path)
        for i in range(rounds):
            with db:
                db.execute("insert into t values (?, ?)", (first + i, "v"))
        db.close()

    paths = [mnt.kv / f"db{i}" for i in range(10)]
    for path in paths:
        db = sqlite3.connect(path)
        with db:
            db.execute("create table t (k integer primary key, v text)")
        db.close()
        write(path, 3, 0)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2")  # the kernel forgets the created inodes
    for path in paths:
        write(path, 3, 100)
        ino = os.stat(path).st_ino
        write(path, 3, 200)
        assert os.stat(path).st_ino == ino
        db = sqlite3.connect(path)
        assert db.execute("select count(*) from t").fetchone() == (9,)
        db.close()


def test_sqlite_with_readers_beside_it(mnt, tmp_path):
    """Other programs read the database file while sqlite has it open
    for writing (cat, cp: a backup). A reader's open is sent to an inode
    of the published version of its own, which the kernel's entry of the
    name then names; that inode shows the writer's inode number, so
    sqlite's check (stat of the path against its descriptor) passes and
    cp's (stat before its open, fstat after) too: sqlite refused every
    write after such a reader ("attempt to write a readonly database")."""
    import sqlite3

    path = mnt.kv / "shared.db"
    db = sqlite3.connect(path)
    with db:
        db.execute("create table t (k integer primary key, v text)")
    for i in range(8):
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL,
                       check=True)
        copy = tmp_path / f"copy{i}.db"
        p = subprocess.run(["cp", str(path), str(copy)],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        with db:
            db.execute("insert into t values (?, ?)", (i, "v"))
        c = sqlite3.connect(copy)
        assert c.execute("select count(*) from t").fetchone() == (i,)
        c.close()
    db.close()
    db = sqlite3.connect(path)
    assert db.execute("select count(*) from t").fetchone() == (8,)
    db.close()


def test_tail_follows_a_file_being_written(mnt):
    """`tail -F` of a log a writer publishes with fsync: tail's descriptor
    keeps the version it opened, and tail opens the name again when its
    inode number changes. A reader's inode is one file with the writer's
    (the same number) only until the writer publishes anew; then the
    name's number changes, so tail sees the file replaced and reads it
    again (printing it again from its start, as after a rotation). It
    stopped at the first line while the reader shared the number."""
    path = mnt.kv / "app.log"
    f = open(path, "w")
    f.write("line0\n")
    f.flush()
    os.fsync(f.fileno())
    tail = subprocess.Popen(["tail", "-F", "-n", "+1", "-s", "0.1",
                             str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        for i in range(1, 4):
            f.write(f"line{i}\n")
            f.flush()
            os.fsync(f.fileno())
            time.sleep(1)
        f.close()
        time.sleep(1)
    finally:
        tail.terminate()
        out, err = tail.communicate()
    assert out.split()[-4:] == ["line0", "line1", "line2", "line3"], \
        (out, err)
    assert "has been replaced" in err, err


def test_an_overwrite_in_place_is_read_back(mnt):
    """A file's inode stays the name's while it is written and is bound to
    the version its writer publishes: pages the kernel kept of the version
    before (read just before) are never served for the new one, whether
    the mount created the file or found it."""
    for found in (False, True):
        path = mnt.kv / f"inplace{int(found)}"
        path.write_bytes(b"a" * 100000)
        if found:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("2")  # the kernel forgets the created inode
        assert path.read_bytes() == b"a" * 100000  # its pages kept
        ino = path.stat().st_ino
        for i, c in enumerate(b"bcd"):
            subprocess.run(["dd", f"of={path}", "conv=notrunc", "bs=100000",
                            "status=none"], input=bytes([c]) * 100000,
                           check=True)
            assert path.read_bytes() == bytes([c]) * 100000, (found, i)
            assert path.stat().st_ino == ino


def test_a_failed_publish_keeps_the_previous_version(mounts):
    m = mounts(seg="64MiB", opts="staging_limit=256MiB")
    path = m.kv / "keep"
    old = write_random(path, 100000, 9)
    # A reader holds the old version. A file larger than the whole pool
    # is EFBIG at its publish, without asking the master (which would
    # evict what it can first: issue 14).
    reader = open(path, "rb")
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"q" * (100 * MiB))  # staged: more than the pool holds
    with pytest.raises(OSError) as e:
        os.fsync(fd)
    assert e.value.errno == errno.EFBIG
    assert path.read_bytes() == old
    with pytest.raises(OSError) as e:
        os.close(fd)
    assert e.value.errno == errno.EFBIG
    assert path.read_bytes() == old
    assert reader.read() == old
    reader.close()


def test_a_file_larger_than_any_segment_is_efbig(mounts):
    """A file is stored whole in one segment: one larger than the
    largest, though the pool has room for it in all (df shows it free),
    was ENOSPC ("No space left on device") and looked like a full pool.
    Now EFBIG ("File too large") at once, and the pool is untouched."""
    a = mounts(seg="64MiB", name="a", opts="staging_limit=256MiB")
    mounts(seg="64MiB", name="b")
    keep = write_random(a.kv / "keep", MiB, 1)
    st = os.statvfs(a.path)
    assert st.f_bavail * st.f_frsize > 100 * MiB
    f = open(a.kv / "big", "wb", buffering=0)
    with pytest.raises(OSError) as e:  # at the write: test_size_limits.py
        f.write(b"b" * (80 * MiB))
        f.write(b"b")  # after a short write, if the kernel made one
    assert e.value.errno == errno.EFBIG
    with pytest.raises(OSError) as e:
        os.fsync(f.fileno())
    assert e.value.errno == errno.EFBIG
    with pytest.raises(OSError) as e:
        f.close()
    assert e.value.errno == errno.EFBIG
    assert not (a.kv / "big").exists()
    with pytest.raises(OSError) as e:
        os.truncate(a.kv / "keep", 80 * MiB)
    assert e.value.errno == errno.EFBIG
    assert (a.kv / "keep").read_bytes() == keep
    write_random(a.kv / "fits", 60 * MiB, 2)  # within one segment


def test_a_failed_write_publishes_nothing(mounts):
    """Past the staging limit a write fails, and the version it belonged
    to is never published: no reader finds a file with a hole."""
    m = mounts(seg="64MiB", opts="staging_limit=4MiB")
    path = m.kv / "w"
    old = write_random(path, 1000, 10)
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"1" * MiB)
    with pytest.raises(OSError) as e:
        for _ in range(8):
            os.write(fd, b"2" * MiB)
    assert e.value.errno == errno.ENOSPC
    with pytest.raises(OSError) as e:
        os.close(fd)
    assert e.value.errno == errno.ENOSPC
    assert path.read_bytes() == old


def test_a_file_unlinked_or_replaced_while_written_stays_gone(mnt):
    """POSIX: writes through a descriptor of a file whose name was
    unlinked (or renamed over) go to that file alone; its close must not
    bring the name back or overwrite what replaced it. The unlinked file
    has no link (fstat), and its descriptor still reads its own bytes."""
    kv = mnt.kv
    # A new file, unlinked before its first close (a temporary file).
    fd = os.open(kv / "tmp", os.O_CREAT | os.O_RDWR, 0o600)
    os.write(fd, b"scratch")
    assert os.stat(kv / "tmp").st_size == 7  # by name before its close
    os.unlink(kv / "tmp")
    assert os.fstat(fd).st_nlink == 0
    os.write(fd, b" more")
    assert os.pread(fd, 12, 0) == b"scratch more"
    os.close(fd)
    # An existing file, rewritten in place, unlinked while open.
    (kv / "old").write_bytes(b"v1")
    fd = os.open(kv / "old", os.O_RDWR)
    os.pwrite(fd, b"v2", 0)
    os.unlink(kv / "old")
    os.close(fd)
    # A file open for writing whose name another file is renamed over.
    (kv / "dst").write_bytes(b"first")
    with open(kv / "dst", "r+b") as w:
        w.write(b"WRITER")
        (kv / "src").write_bytes(b"renamed")
        os.rename(kv / "src", kv / "dst")
    assert sorted(os.listdir(kv)) == ["dst"]
    assert (kv / "dst").read_bytes() == b"renamed"
    # A reader of an unlinked file keeps its bytes; the file has no link.
    with open(kv / "dst", "rb") as r:
        os.unlink(kv / "dst")
        assert os.fstat(r.fileno()).st_nlink == 0
        assert r.read() == b"renamed"
    assert mnt.log().count("could not be published") == 0


def test_a_file_renamed_while_written_keeps_its_writes(mnt):
    """mv of a file still open for writing (logrotate's rename before its
    HUP, a download moved to its final name): the writer's later writes
    belong to the file under its new name. They were published under the
    old name, overwriting the new file made there meanwhile."""
    kv = mnt.kv
    fd = os.open(kv / "lg", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(fd, b"old1\n")
    os.fsync(fd)
    os.rename(kv / "lg", kv / "lg.1")
    (kv / "lg").write_bytes(b"NEW FILE\n")
    os.write(fd, b"old2\n")
    os.fsync(fd)
    assert (kv / "lg.1").read_bytes() == b"old1\nold2\n"
    os.write(fd, b"old3\n")
    os.close(fd)
    assert (kv / "lg").read_bytes() == b"NEW FILE\n"
    assert (kv / "lg.1").read_bytes() == b"old1\nold2\nold3\n"
    # Renamed twice, the second time into a directory, before its first
    # publish after the open (rewritten in place, written directly).
    os.mkdir(kv / "done")
    (kv / "dl").write_bytes(b"x" * 4096)
    with open(kv / "dl", "r+b") as w:
        w.write(b"y" * 4096)
        os.rename(kv / "dl", kv / "dl.part")
        os.rename(kv / "dl.part", kv / "done" / "dl")
        w.write(b"z" * 100)
    assert sorted(os.listdir(kv)) == ["done", "lg", "lg.1"]
    assert (kv / "done" / "dl").read_bytes() == b"y" * 4096 + b"z" * 100
    # A new file not published yet (no close, no fsync), renamed over
    # an existing one (a temporary file os.replace()d while open): the
    # rename failed ENOENT.
    (kv / "target").write_bytes(b"old target")
    with open(kv / "target.tmp", "wb") as w:
        w.write(b"new ")
        w.flush()
        os.replace(kv / "target.tmp", kv / "target")
        assert os.stat(kv / "target").st_size == 4
        assert not (kv / "target.tmp").exists()
        w.write(b"target")
    assert (kv / "target").read_bytes() == b"new target"
    assert not (kv / "target.tmp").exists()
    # Without replacing (mv --no-clobber's renameat2): a file this mount
    # is creating counts as existing, as ls shows it.
    with open(kv / "creating", "wb") as w:
        w.write(b"mine")
        w.flush()
        with pytest.raises(OSError) as e:
            renameat2_noreplace(kv / "target", kv / "creating")
        assert e.value.errno == errno.EEXIST
        renameat2_noreplace(kv / "creating", kv / "created")
        with pytest.raises(OSError) as e:
            renameat2_noreplace(kv / "created", kv / "target")
        assert e.value.errno == errno.EEXIST
    assert (kv / "created").read_bytes() == b"mine"
    assert (kv / "target").read_bytes() == b"new target"


def test_a_close_racing_a_rename_lands_under_the_new_name(mounts):
    """A close racing an mv of its file: the new name holds the closed
    content, whole, and the old name nothing, for every mount. (The
    publish's last step and the rename exclude each other since the
    review of 2026-12-06; before, a rename landing between the publish's
    reading of its name and its final rename left the closed bytes under
    the old name. That window is the last milliseconds of the close, after
    the kernel's writeback: this loop did not hit it against the code
    before, so it checks the outcome, not that window.)"""
    import threading
    import time
    a = mounts(seg="256MiB", name="a", opts="staging_limit=256MiB")
    b = mounts(seg="0", name="b")
    v1, v2 = b"1" * MiB, b"2" * (48 * MiB)
    for i in range(12):
        f, g = a.kv / f"race{i}", a.kv / f"raced{i}"
        # The rename at 0-55 ms: the close first writes the kernel's
        # dirty pages, then publishes (its FLUSH).
        w = open(f, "wb")
        w.write(v1)
        w.flush()
        os.fsync(w.fileno())  # published once: the master has f
        w.seek(0)
        w.write(v2)
        w.flush()
        closer = threading.Thread(target=w.close)
        closer.start()
        time.sleep(0.005 * i)
        os.rename(f, g)
        closer.join()
        names = sorted(n for n in os.listdir(b.kv) if n.endswith(f"e{i}") or
                       n.endswith(f"d{i}"))
        assert names == [f"raced{i}"], i
        # A stat takes no lease: the unlink frees the memory at once.
        assert os.stat(b.kv / f"raced{i}").st_size == len(v2), i
        os.unlink(g)


def renameat2_noreplace(src, dst):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, rename_noreplace = -100, 1
    if libc.renameat2(at_fdcwd, str(src).encode(), at_fdcwd,
                      str(dst).encode(), rename_noreplace):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def test_a_file_being_written_is_listed(mnt):
    """A new file is published at its first close or fsync; until then
    `ls` did not show it (a large cp into the mount was invisible until
    it ended), though its name answered stat. Listed once, with ls -l,
    also when the directory has published files and after it closes."""
    kv = mnt.kv
    (kv / "d").mkdir()
    (kv / "d" / "a").write_bytes(b"a")
    with open(kv / "d" / "b.part", "wb") as w:
        w.write(b"x" * 5000)
        w.flush()
        assert sorted(os.listdir(kv / "d")) == ["a", "b.part"]
        out = subprocess.run(["ls", "-l", str(kv / "d")], check=True,
                             capture_output=True, text=True).stdout
        assert "b.part" in out and " 5000 " in out, out
    assert sorted(os.listdir(kv / "d")) == ["a", "b.part"]
    assert os.stat(kv / "d" / "b.part").st_size == 5000


def test_a_file_being_created_opens_again(mnt):
    """A file created and still open, not yet published (nothing written,
    no close): every other open of its name worked on a local filesystem
    and failed here (ENOENT for a writer that starts from its content,
    ESTALE for a reader), which broke `flock LOCKFILE cmd` and two
    O_CREAT opens racing. Others now see it empty, on an inode of their
    own; one that writes nothing does not publish its empty file over
    what the creator publishes."""
    kv = mnt.kv
    # flock(1): the second opens the lock file O_RDONLY|O_CREAT while the
    # first holds it, created and empty.
    sh(f"cd {kv}; flock L sleep 1 & sleep 0.3; flock L true; wait")
    assert sh(f"exec 3>>{kv}/n1; cat {kv}/n1; exec 3>&-") == b""
    sh(f"exec 3>>{kv}/n2; echo hi >> {kv}/n2; exec 3>&-")
    assert (kv / "n2").read_bytes() == b"hi\n"
    fd = os.open(kv / "n3", os.O_CREAT | os.O_WRONLY)
    os.write(fd, b"abc")
    fd2 = os.open(kv / "n3", os.O_CREAT | os.O_WRONLY)
    fd3 = os.open(kv / "n3", os.O_RDONLY)
    assert os.read(fd3, 10) == b""
    for f in (fd2, fd3, fd):
        os.close(f)
    assert (kv / "n3").read_bytes() == b"abc"


def test_two_threads_create_one_name(mnt):
    """Two threads open one new name with O_CREAT at once: both opens
    work, in every access mode (they failed ENOENT or ESTALE most of the
    time)."""
    import threading
    modes = {"append": os.O_APPEND | os.O_WRONLY, "rdwr": os.O_RDWR,
             "wronly": os.O_WRONLY, "rdonly": os.O_RDONLY}
    errors = []
    for mode, fl in modes.items():
        for i in range(int(os.environ.get("MC_RACE_N", "15"))):
            path = mnt.kv / f"race_{mode}_{i}"

            def go():
                try:
                    fd = os.open(path, os.O_CREAT | fl)
                    if fl != os.O_RDONLY:
                        os.write(fd, b"x")
                    os.close(fd)
                except OSError as e:
                    errors.append((path.name, e))
            ts = [threading.Thread(target=go) for _ in range(2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            want = {b""} if fl == os.O_RDONLY else {b"x", b"xx"}
            assert path.read_bytes() in want, path
    assert not errors, errors


def test_a_new_file_shows_its_creation_time(mnt):
    """Stat of a file created and not yet published showed 1970 (and the
    kernel kept that for its attribute timeout)."""
    import time
    path = mnt.kv / "fresh"
    before = time.time() - 2
    fd = os.open(path, os.O_CREAT | os.O_WRONLY)
    try:
        assert os.fstat(fd).st_mtime > before
        assert os.stat(path).st_mtime > before
    finally:
        os.close(fd)
    assert os.stat(path).st_mtime > before


def test_exclusive_create_across_mounts(mounts):
    """With excl_create, O_CREAT|O_EXCL is exclusive between mounts, as
    on NFS (mknod always): the lock-file idiom (git's index.lock,
    lockfile, `set -C`) holds between hosts. Both opens succeeded when
    the name was new to both mounts (the second publish found the name
    taken and reported nothing), so two hosts each believed they held the
    lock. Without the option (the default: cp, tar and rsync create
    every file with O_EXCL) only within a mount."""
    a = mounts(seg="64MiB", name="a", opts="excl_create")
    b = mounts(seg="0", name="b", opts="excl_create")
    excl = os.O_CREAT | os.O_EXCL | os.O_WRONLY
    for i in range(5):
        # The name is new to both mounts: b looked it up before a made it.
        assert not (b.kv / f"lock{i}").exists()
        fa = os.open(a.kv / f"lock{i}", excl)
        try:
            with pytest.raises(FileExistsError):
                os.close(os.open(b.kv / f"lock{i}", excl))
        finally:
            os.close(fa)
        # The winner's content is what the name holds.
        assert (b.kv / f"lock{i}").read_bytes() == b""
    # Held open and written by the first: the second still fails, and the
    # first's bytes are published at its close.
    fa = os.open(a.kv / "held", excl)
    os.write(fa, b"pid 1\n")
    with pytest.raises(FileExistsError):
        os.open(b.kv / "held", excl)
    os.close(fa)
    assert (b.kv / "held").read_bytes() == b"pid 1\n"
    # mknod: the same.
    os.mknod(a.kv / "node", 0o644 | 0o100000)
    with pytest.raises(FileExistsError):
        os.mknod(b.kv / "node", 0o644 | 0o100000)
    # `set -C` (noclobber) in the shell of another host.
    os.close(os.open(a.kv / "clob", excl))
    p = subprocess.run(["bash", "-c", f"set -C; echo x > {b.kv}/clob"],
                       capture_output=True)
    assert p.returncode != 0
    assert (a.kv / "clob").read_bytes() == b""


def test_a_publish_asks_the_master_nothing_after_its_commit(mounts):
    """A new file's publish is PutStart, the write, PutEnd (which answers
    the object's version) and the rename: no Stat of the committed
    object to learn its version (one master call more per file before
    2026-12-06). Counted at the master over 20 new files, each written
    and closed once: one Stat each is the kernel's lookup of the new name
    before its create, a second was the publish's."""
    m = mounts(seg="64MiB")
    master = m.master
    (m.kv / "warm").write_bytes(b"w")
    stats = master.metric("master_stat_requests_total")
    renames = master.metric("master_rename_requests_total")
    for i in range(20):
        (m.kv / f"f{i}").write_bytes(b"x" * (i + 1))
    assert master.metric("master_rename_requests_total") - renames == 20
    assert master.metric("master_stat_requests_total") - stats < 30
    assert [len((m.kv / f"f{i}").read_bytes()) for i in range(20)] == \
        list(range(1, 21))
    assert os.stat(m.kv / "f3").st_size == 4


def test_cp_right_after_appends_and_reads(mnt):
    """A file written, appended to, read and copied by one shell: nothing
    changes it while cp runs, so stat(path) before cp's open and fstat
    after it show one inode. The kernel sends a close's release after
    close(2) returns, so the next open could find the last writer's
    handle still there: it was turned away (ESTALE), its retry got an
    inode of its own that every other process's open was turned away
    from for a second, and cp's open went to yet another inode ("cp:
    skipping file ..., as it was replaced while being copied", about 1
    run in 200)."""
    d = mnt.kv / "d"
    d.mkdir()
    n = 300
    p = subprocess.run(
        ["bash", "-c",
         f"""for i in $(seq {n}); do f={d}/f$i
         printf 'a%s\\n' $i > $f; printf bbbb >> $f; read a < $f
         [ -s $f ] || echo "empty $f"; cat $f > /dev/null; cp $f $f.c
         done"""], capture_output=True, timeout=120)
    err = p.stderr.decode(errors="replace")
    assert "replaced while being copied" not in err, err
    assert p.returncode == 0 and not p.stdout and not err, (p.stdout, err)
    for i in range(1, n + 1):
        want = f"a{i}\nbbbb".encode()
        assert (d / f"f{i}").read_bytes() == want
        assert (d / f"f{i}.c").read_bytes() == want, i
    assert mnt.stats()["mount_stale_opens"] == 0


def test_cp_of_a_file_held_open_for_writing(mnt):
    """A descriptor open for writing (nothing written through it) keeps
    readers off its inode: the first reader's open is sent to an inode of
    its own (ESTALE and the kernel's retry). Once that open is made, the
    inode is the name's for everyone: cp's stat and open that follow
    show it (cp's open was turned away from it for a second, and cp
    refused the file as replaced)."""
    d = mnt.kv / "h"
    d.mkdir()
    n = 20
    p = subprocess.run(
        ["bash", "-c",
         f"""for i in $(seq {n}); do f={d}/f$i
         printf 'a%s\\n' $i > $f; exec 3>>$f; cat $f > /dev/null
         cp $f $f.c; cat $f.c > /dev/null; exec 3>&-
         done"""], capture_output=True, timeout=120)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0 and not err, err
    for i in range(1, n + 1):
        assert (d / f"f{i}.c").read_bytes() == f"a{i}\n".encode()


def test_a_writer_publishing_after_another_mounts_version(mounts):
    """A file created on mount a and held open for writing; mount b
    publishes the name, and a looks it up (the kernel's entry of the name
    then names an inode of b's version). a's writer publishes again
    (fsync, later close): stat on a showed b's version's size until the
    attribute timeout (60 s), since a created file's own change event
    left the kernel's entry alone; an open healed it (the stale inode
    answers ESTALE). Each of a's publishes now drops that entry."""
    a = mounts(seg="64MiB", name="a")
    b = mounts(seg="0", name="b")
    fd = os.open(a.kv / "f", os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, b"v1 from a\n")
        os.fsync(fd)
        (b.kv / "f").write_bytes(b"v2 from b\n")
        wait_for(lambda: (a.kv / "f").read_bytes() == b"v2 from b\n",
                 what="b's version seen on a")
        v3 = b"v3 from a, longer than the others\n"
        os.pwrite(fd, v3, 0)
        os.fsync(fd)
        # fsync leaves the entry to the change feed (milliseconds).
        wait_for(lambda: os.stat(a.kv / "f").st_size == len(v3),
                 timeout=5, what="a's own version's size on a")
        assert (a.kv / "f").read_bytes() == v3
        (b.kv / "f").write_bytes(b"v4 from b\n")
        wait_for(lambda: (a.kv / "f").read_bytes() == b"v4 from b\n",
                 what="b's second version seen on a")
        v5 = b"v5 from a, at its close, longer again\n"
        os.pwrite(fd, v5, 0)
    finally:
        os.close(fd)
    # close() drops it before it returns.
    assert os.stat(a.kv / "f").st_size == len(v5)
    assert (a.kv / "f").read_bytes() == v5
    assert (b.kv / "f").read_bytes() == v5
