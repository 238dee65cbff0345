# SPDX-License-Identifier: Apache-2.0
"""Handles that programs close the moment their last reply arrives.

A program woken by the daemon's reply can close its descriptor at once,
and the release that follows may run on another daemon thread while the
thread that replied is still returning: the daemon must not touch a
handle after answering. The daemon runs here with glibc's per-thread
cache off, so a write into a freed handle corrupts the allocator's free
lists and aborts the daemon instead of passing unnoticed (as it did in
bench_fs, where `find -delete` at each phase killed the mount)."""
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
