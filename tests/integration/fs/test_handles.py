# SPDX-License-Identifier: Apache-2.0
"""Handles that programs close the moment their last reply arrives.

A program woken by the daemon's reply can close its descriptor at once,
and the release that follows may run on another daemon thread while the
thread that replied is still returning: the daemon must not touch a
handle after answering. The daemon runs here with glibc's per-thread
cache off, so a write into a freed handle corrupts the allocator's free
lists and aborts the daemon instead of passing unnoticed (as it did in
bench_fs, where `find -delete` at each phase killed the mount)."""
import mmap
import os
import threading
import time

MALLOC_STRICT = {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}


def storm(fns, seconds):
    """Run each fn in its own thread, again and again, for seconds."""
    errors = []
    stop = time.monotonic() + seconds

    def loop(fn):
        try:
            while time.monotonic() < stop:
                fn()
        except Exception as e:  # reported below, with the daemon's log
            errors.append(e)
    ts = [threading.Thread(target=loop, args=(fn,)) for fn in fns]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return errors


def test_directories_closed_right_after_their_last_page(mounts):
    m = mounts(env=MALLOC_STRICT)
    d = m.kv / "dir"
    d.mkdir()
    names = sorted(f"f{i}" for i in range(8))
    for n in names:
        (d / n).write_bytes(b"x")
    pid = m.pid()

    def listing():
        assert sorted(os.listdir(d)) == names

    def scanning():
        with os.scandir(m.kv) as it:
            assert "dir" in [e.name for e in it]
    errors = storm([listing, listing, scanning, scanning], 6)
    assert not errors and m.pid() == pid, f"{errors}\n{m.log()}"
    assert sorted(os.listdir(d)) == names


def test_files_closed_right_after_their_last_read(mounts):
    m = mounts(env=MALLOC_STRICT)
    path = m.kv / "r"
    path.write_bytes(b"y" * 100)
    pid = m.pid()

    def reading():
        with open(path, "rb", buffering=0) as f:
            assert f.read(200) == b"y" * 100

    def writing_and_reading(i=[0]):
        i[0] += 1
        p = m.kv / f"w{i[0] % 4}"
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"z" * 50)
            assert os.pread(fd, 100, 0) == b"z" * 50
            assert os.fstat(fd).st_size == 50
        finally:
            os.close(fd)
    errors = storm([reading, reading, writing_and_reading], 6)
    assert not errors and m.pid() == pid, f"{errors}\n{m.log()}"


def test_remote_files_closed_right_after_their_last_read(mounts):
    """The same for objects held by another member, read through the
    read-ahead window (readahead.c) and directly: the reply is the last
    thing the read does with the handle."""
    holder = mounts(seg="128MiB", name="holder")
    m = mounts(seg="0", name="reader",
               env=dict(MALLOC_STRICT, MC_FORCE_TCP="1"))
    whole = os.urandom(3 << 20)
    (holder.kv / "big").write_bytes(whole)
    (holder.kv / "small").write_bytes(b"s" * 1000)
    pid = m.pid()

    def reading_whole():
        with open(m.kv / "big", "rb", buffering=0) as f:
            assert f.read(4 << 20) == whole

    def reading_first_chunk():
        fd = os.open(m.kv / "big", os.O_RDONLY | os.O_DIRECT)
        try:
            buf = mmap.mmap(-1, 1 << 20)
            assert os.readv(fd, [buf]) == 1 << 20
            assert buf[:] == whole[:1 << 20]
        finally:
            os.close(fd)

    def reading_small():
        with open(m.kv / "small", "rb", buffering=0) as f:
            assert f.read(2000) == b"s" * 1000
    errors = storm([reading_whole, reading_first_chunk, reading_first_chunk,
                    reading_small], 6)
    assert not errors and m.pid() == pid, f"{errors}\n{m.log()}"
    assert m.stats()["mount_readahead_hits"] > 0
