# SPDX-License-Identifier: Apache-2.0
"""Remote reads answered through a pipe (splice_read): a mount with no
segment, forced onto TCP, reads files that another mount holds; the bytes
go from the socket into a pipe and from there to the kernel. They must be
the object's at every offset and size, with many readers at once, and
when the holder dies; the counters show which reads took the pipe (none
when the option is off, or when the holder is reached by shared
memory).

The kernel caps a pipe at fs.pipe-max-size (1 MiB by default) for a
daemon without CAP_SYS_RESOURCE; a read goes through a pipe only with
16 KiB to spare, so with the default reads of 512 KiB take the pipe and
reads of 1 MiB a buffer (test_one_mib_reads covers both settings)."""
import errno
import mmap
import os
import random
import signal
import threading

import mount
from mount import enotconn, pipe_max_size, umount, wait_for, write_random

MiB = 1 << 20
KiB = 1 << 10


def pair(mounts, reader_opts="read_ahead=0", tcp=True):
    holder = mounts(seg="256MiB", name="holder")
    reader = mounts(seg="0", name="reader", opts=reader_opts,
                    env={"MC_FORCE_TCP": "1"} if tcp else None)
    return holder, reader


def direct_read(path, size=512 * KiB):
    return mount.direct_read(path, size)


def delta(reader, before, name):
    return reader.stats()[name] - before[name]


def test_direct_and_buffered_reads_go_through_the_pipe(mounts):
    holder, reader = pair(mounts)
    size = 21 * MiB + 4097  # a last read that is neither whole nor paged
    write_random(holder.kv / "big", size, 5)
    want = (holder.kv / "big").read_bytes()
    before = reader.stats()
    assert direct_read(reader.kv / "big") == want
    spliced = delta(reader, before, "mount_splice_reads")
    assert spliced >= 40, f"only {spliced} of 43 reads through the pipe"
    assert delta(reader, before, "mount_splice_fallbacks") == 0

    # Buffered (the kernel's read-ahead sends 128 KiB-1 MiB requests, some
    # in parallel) with cat, twice: the second from the page cache.
    for _ in range(2):
        with open(reader.kv / "big", "rb") as f:
            assert f.read() == want
    assert reader.stats()["mount_splice_fallbacks"] == 0


def test_one_mib_reads(mounts):
    # fs.pipe-max-size at its default: 1 MiB reads cannot take a pipe of
    # 1 MiB (no room for the reply header), the mount says so once and
    # copies them; raised, they go through the pipe.
    holder = mounts(seg="256MiB", name="holder")
    write_random(holder.kv / "m", 8 * MiB + 5, 31)
    want = (holder.kv / "m").read_bytes()
    with pipe_max_size(1 << 20):
        small = mounts(seg="0", name="small", opts="read_ahead=0",
                       env={"MC_FORCE_TCP": "1"})
        assert direct_read(small.kv / "m", MiB) == want
    s = small.stats()
    assert s["mount_splice_reads"] == 0
    assert s["mount_splice_fallbacks"] == 0
    assert "fs.pipe-max-size" in small.log()
    with pipe_max_size(4 << 20):
        big = mounts(seg="0", name="big", opts="read_ahead=0",
                     env={"MC_FORCE_TCP": "1"})
        assert direct_read(big.kv / "m", MiB) == want
        # With read-ahead too: chunks of 1 MiB fetched into pipes (those
        # fetched while every connection is busy go into memory).
        ra = mounts(seg="0", name="ra", env={"MC_FORCE_TCP": "1"})
        write_random(holder.kv / "l", 32 * MiB, 37)
        assert direct_read(ra.kv / "l", MiB) == \
            (holder.kv / "l").read_bytes()
    assert big.stats()["mount_splice_reads"] >= 6  # of 8 (the first
    # read connects the lanes)
    assert "fs.pipe-max-size" not in big.log()
    s = ra.stats()
    assert s["mount_readahead_spliced"] >= 6, s
    assert s["mount_splice_fallbacks"] == 0


def test_offsets_and_sizes(mounts):
    holder, reader = pair(mounts)
    size = 9 * MiB + 333
    write_random(holder.kv / "r", size, 8)
    want = (holder.kv / "r").read_bytes()
    rnd = random.Random(3)
    before = reader.stats()
    with open(reader.kv / "r", "rb", buffering=0) as f:
        for _ in range(80):
            off = rnd.randrange(size)
            n = rnd.choice([1, 4095, 64 * KiB - 1, 64 * KiB, 300001, MiB,
                            MiB + 7])
            f.seek(off)
            assert f.read(n) == want[off:off + n], (off, n)
        f.seek(size - 100 * KiB)  # past the end: cut short
        assert f.read(MiB) == want[size - 100 * KiB:]
        f.seek(size)
        assert f.read(MiB) == b""
    # Reads of 64 KiB and more take the pipe; smaller ones a buffer.
    assert delta(reader, before, "mount_splice_reads") > 0
    assert delta(reader, before, "mount_splice_fallbacks") == 0


def test_many_readers_at_once(mounts):
    # More readers than connections to the holder: those that find every
    # connection busy read into a buffer; every byte is still right.
    holder, reader = pair(mounts)
    write_random(holder.kv / "p", 16 * MiB, 12)
    want = (holder.kv / "p").read_bytes()
    errors = []

    def whole(start):
        try:
            with open(reader.kv / "p", "rb", buffering=0) as f:
                f.seek(start)
                got = b"".join(iter(lambda: f.read(MiB), b""))
            assert got == want[start:], start
        except Exception as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=whole, args=(s,))
          for s in (0, 0, MiB, 3 * MiB + 5, 7 * MiB, 0, 2 * MiB, 9 * MiB)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    assert not errors, errors
    s = reader.stats()
    assert s["mount_splice_reads"] > 0
    assert s["mount_splice_fallbacks"] == 0


def test_off_and_same_host_read_into_memory(mounts):
    holder = mounts(seg="256MiB", name="holder")
    off = mounts(seg="0", name="off", opts="read_ahead=0,splice_read=0",
                 env={"MC_FORCE_TCP": "1"})
    # Same host without MC_FORCE_TCP: shared memory, which has no pipe
    # path; the library says so before it adds anything (no fallback).
    shm = mounts(seg="0", name="shm", opts="read_ahead=0")
    write_random(holder.kv / "o", 5 * MiB + 1, 17)
    want = (holder.kv / "o").read_bytes()
    for m in (off, shm):
        assert direct_read(m.kv / "o") == want
        s = m.stats()
        assert s["mount_splice_reads"] == 0, m.path
        assert s["mount_splice_fallbacks"] == 0, m.path
        assert s["mount_reads"] >= 6


def test_with_read_ahead_every_byte_is_right(mounts):
    # Both on (the defaults; pipes large enough for 1 MiB chunks): a
    # window read with large requests fetches its chunks into pipes,
    # which answer reads that continue where the last reply from the
    # pipe ended; any other read first moves the rest of the pipe into
    # memory. Reads that jump around, go back and cross chunks never get
    # other bytes.
    with pipe_max_size(4 << 20):
        holder, reader = pair(mounts, reader_opts="")
        size = 30 * MiB + 3
        write_random(holder.kv / "b", size, 23)
        want = (holder.kv / "b").read_bytes()
        # 512 KiB requests: two replies from each chunk's pipe.
        assert direct_read(reader.kv / "b", 512 * KiB) == want
        assert reader.stats()["mount_readahead_spliced"] > 40
        rnd = random.Random(8)
        with open(reader.kv / "b", "rb", buffering=0) as f:
            f.seek(11 * MiB)
            assert f.read(5 * MiB) == want[11 * MiB:16 * MiB]
            for off in list(range(0, 4 * MiB, 300 * KiB)) + \
                    [rnd.randrange(size) for _ in range(40)] + \
                    list(range(MiB, 6 * MiB, 128 * KiB)):
                n = rnd.choice([4096, 200 * KiB, 512 * KiB, 700 * KiB])
                f.seek(off)
                assert f.read(n) == want[off:off + n], (off, n)
        # Buffered, cold: the kernel's read-ahead sends requests of one
        # file in parallel, a little out of order.
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1")
        with open(reader.kv / "b", "rb") as f:
            assert f.read() == want
    assert reader.stats()["mount_splice_fallbacks"] == 0


def test_holder_killed_mid_read(mounts):
    """kill -9 of the holder while a reader reads through the pipe: the
    reads that follow fail with EIO or return the right bytes, never a
    mix of another read's leftovers; the reader lives on and reads the
    file again once the holder is back."""
    holder, reader = pair(mounts)
    size = 24 * MiB
    write_random(holder.kv / "k", size, 29)
    want = (holder.kv / "k").read_bytes()
    rpid = reader.pid()
    f = open(reader.kv / "k", "rb", buffering=0)
    got = bytearray(f.read(MiB))
    os.kill(holder.pid(), signal.SIGKILL)
    wait_for(lambda: enotconn(holder.kv), what="ENOTCONN")
    err = None
    try:
        for b in iter(lambda: f.read(MiB), b""):
            got += b
    except OSError as e:
        err = e
    finally:
        f.close()
    assert bytes(got) == want[:len(got)], "bytes that are not the file's"
    if err is None:
        assert len(got) == size
    else:
        assert err.errno == errno.EIO, err
    assert reader.pid() == rpid, reader.log()
    umount(holder.path, lazy=True)
    holder.mount()  # same segment name: the segment is re-adopted
    wait_for(lambda: "re-adopted" in holder.log(), what="re-adoption")
    # The pipe of a failed read was dropped: whole reads are right again.
    assert direct_read(reader.kv / "k") == want
    assert (reader.kv / "k").read_bytes() == want


def test_master_killed_and_back_mid_read(mounts, master):
    """kill -9 of the master while a file is read through pipes, and the
    master back on its record: reads of the open file go on with the
    file's bytes (the hold renewer takes a new hold on the same memory,
    docs/design.md "Readers across a restart") or fail (EIO, ESTALE),
    never with other bytes; a new open reads it all."""
    holder, reader = pair(mounts)
    size = 16 * MiB
    write_random(holder.kv / "f", size, 41)
    want = (holder.kv / "f").read_bytes()
    fd = os.open(reader.kv / "f", os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 512 * KiB)
    got = bytearray()
    err = None
    try:
        got += buf[:os.readv(fd, [buf])]
        master.kill()
        master.start()
        wait_for(lambda: len(master.segments()) == 1, timeout=20,
                 what="holder re-mounted its segment")
        while True:
            n = os.readv(fd, [buf])
            if n == 0:
                break
            got += buf[:n]
    except OSError as e:
        err = e
    finally:
        os.close(fd)
    assert bytes(got) == want[:len(got)], "bytes that are not the file's"
    if err is not None:
        assert err.errno in (errno.EIO, errno.ESTALE), err
    else:
        assert len(got) == size
    assert direct_read(reader.kv / "f") == want
    assert reader.stats()["mount_splice_reads"] > 0
