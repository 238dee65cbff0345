# SPDX-License-Identifier: Apache-2.0
"""Read-ahead of objects held by another pool member: a mount with no
segment, forced onto TCP, reads files that another mount holds. The bytes
must be the object's whatever the order of reads, the number of readers,
closes in the middle of fetches, or a pool of chunks too small for every
window; the counters show read-ahead took part (or not, when off)."""
import errno
import os
import random
import signal
import subprocess
import threading
import time

from mount import SCALE, direct_read, enotconn, umount, wait_for, write_random

MiB = 1 << 20


def holder_and_reader(mounts, reader_opts=""):
    holder = mounts(seg="256MiB", name="holder")
    reader = mounts(seg="0", name="reader", opts=reader_opts,
                    env={"MC_FORCE_TCP": "1"})
    return holder, reader


def expected(holder, name):
    return (holder.kv / name).read_bytes()


def test_sequential_reads_come_from_chunks_fetched_ahead(mounts):
    holder, reader = holder_and_reader(mounts)
    size = 37 * MiB + 12345  # a last chunk that is not whole
    write_random(holder.kv / "big", size, 7)
    want = expected(holder, "big")
    before = reader.stats()

    # O_DIRECT, 1 MiB requests (as fio and the connectors' file readers).
    assert direct_read(reader.kv / "big") == want
    after = reader.stats()
    hits = after["mount_readahead_hits"] - before["mount_readahead_hits"]
    fetched = (after["mount_readahead_chunks"] -
               before["mount_readahead_chunks"])
    assert hits >= 30, f"only {hits} of 38 reads came from read-ahead"
    assert fetched >= 30
    assert after["mount_readahead_failed"] == 0

    # Buffered (the kernel's own read-ahead sends requests in parallel,
    # a little out of order), with cmp and cat.
    subprocess.run(["sh", "-c", "echo 1 > /proc/sys/vm/drop_caches"],
                   check=True)
    src = holder.kv / "big"
    subprocess.run(["cmp", str(src), str(reader.kv / "big")], check=True,
                   timeout=300)
    out = subprocess.run(["cat", str(reader.kv / "big")],
                         capture_output=True, check=True).stdout
    assert out == want


def test_random_and_backward_reads(mounts):
    holder, reader = holder_and_reader(mounts)
    size = 20 * MiB + 777
    write_random(holder.kv / "r", size, 3)
    want = expected(holder, "r")
    rnd = random.Random(5)
    with open(reader.kv / "r", "rb", buffering=0) as f:
        # Sequential to build a window, then jumps back and forth, then
        # sequential again from elsewhere.
        for off in list(range(0, 6 * MiB, MiB)) + \
                [rnd.randrange(size) for _ in range(60)] + \
                list(range(2 * MiB + 5, 12 * MiB, 300000)):
            f.seek(off)
            n = rnd.choice([1, 4096, 65536, MiB, MiB + 3])
            assert f.read(n) == want[off:off + n], off


def test_a_file_read_from_its_middle_gets_a_window(mounts):
    # As fio's jobs with offset_increment: the first read is not at 0.
    holder, reader = holder_and_reader(mounts)
    write_random(holder.kv / "m", 16 * MiB, 9)
    want = expected(holder, "m")
    before = reader.stats()["mount_readahead_hits"]
    with open(reader.kv / "m", "rb", buffering=0) as f:
        f.seek(5 * MiB)
        got = b"".join(iter(lambda: f.read(MiB), b""))
    assert got == want[5 * MiB:]
    hits = reader.stats()["mount_readahead_hits"] - before
    assert hits >= 8, f"{hits} of 11 reads from read-ahead"


def test_parallel_readers_and_closes_mid_fetch(mounts):
    holder, reader = holder_and_reader(mounts)
    size = 24 * MiB
    write_random(holder.kv / "p", size, 11)
    want = expected(holder, "p")
    errors = []

    def whole(start):
        try:
            with open(reader.kv / "p", "rb", buffering=0) as f:
                f.seek(start)
                got = bytearray()
                while True:
                    b = f.read(MiB)
                    if not b:
                        break
                    got += b
            assert bytes(got) == want[start:], start
        except Exception as e:  # reported below
            errors.append(e)

    def short_reads():
        try:
            for i in range(40):
                # A window is made at offset 0 and closed while its
                # fetches are queued or in flight.
                with open(reader.kv / "p", "rb", buffering=0) as f:
                    assert f.read(MiB) == want[:MiB]
                    if i % 2:
                        assert f.read(MiB) == want[MiB:2 * MiB]
        except Exception as e:
            errors.append(e)

    ts = [threading.Thread(target=whole, args=(s,))
          for s in (0, 0, 3 * MiB, 5 * MiB + 1)]
    ts += [threading.Thread(target=short_reads) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    assert not errors, errors
    s = reader.stats()
    assert s["mount_readahead_failed"] == 0
    assert s["mount_readahead_hits"] > 0


def test_a_small_pool_starves_windows_but_not_readers(mounts):
    # Two chunks for everyone: most windows find no chunk and read
    # directly; every byte is still right.
    holder, reader = holder_and_reader(
        mounts, reader_opts="read_ahead=4MiB,read_ahead_limit=2MiB")
    size = 12 * MiB + 5
    write_random(holder.kv / "s", size, 13)
    want = expected(holder, "s")
    errors = []

    def whole():
        try:
            with open(reader.kv / "s", "rb", buffering=0) as f:
                got = b"".join(iter(lambda: f.read(MiB), b""))
            assert got == want
        except Exception as e:
            errors.append(e)

    ts = [threading.Thread(target=whole) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    assert not errors, errors
    assert reader.stats()["mount_readahead_starved"] > 0


def test_read_ahead_off(mounts):
    holder, reader = holder_and_reader(mounts, reader_opts="read_ahead=0")
    write_random(holder.kv / "o", 6 * MiB, 17)
    want = expected(holder, "o")
    with open(reader.kv / "o", "rb", buffering=0) as f:
        assert b"".join(iter(lambda: f.read(MiB), b"")) == want
    s = reader.stats()
    assert s["mount_readahead_hits"] == 0
    assert s["mount_readahead_chunks"] == 0


def test_holder_killed_during_read_ahead(mounts):
    """kill -9 of the member holding a file while a remote reader reads it
    through read-ahead: the reads that follow fail (EIO) or return the
    right bytes, never others, within the transfer timeout; the reader's
    mount lives on, and reads the file again once the holder is back."""
    holder, reader = holder_and_reader(mounts)
    size = 24 * MiB
    write_random(holder.kv / "k", size, 21)
    want = expected(holder, "k")
    rpid = reader.pid()
    f = open(reader.kv / "k", "rb", buffering=0)
    got = bytearray(f.read(MiB))  # the window starts fetching ahead
    os.kill(holder.pid(), signal.SIGKILL)
    wait_for(lambda: enotconn(holder.kv), what="ENOTCONN")
    t0 = time.monotonic()
    err = None
    try:
        for b in iter(lambda: f.read(MiB), b""):
            got += b
    except OSError as e:
        err = e
    finally:
        f.close()
    assert time.monotonic() - t0 < 60 * SCALE
    assert bytes(got) == want[:len(got)], "bytes that are not the file's"
    if err is None:
        assert len(got) == size
    else:
        assert err.errno == errno.EIO, err
        assert len(got) < size
    assert reader.pid() == rpid, reader.log()
    umount(holder.path, lazy=True)
    holder.mount()  # same segment name: the segment is re-adopted
    wait_for(lambda: "re-adopted" in holder.log(), what="re-adoption")
    assert (reader.kv / "k").read_bytes() == want
