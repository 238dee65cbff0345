# SPDX-License-Identifier: Apache-2.0
"""Readers see one complete published version, never a torn one: two
mounts, writers replacing a set of names over and over (each file carries
its own length and checksum), readers on both mounts checking every file
they read and that what they read agrees with the size fstat gives.

MC_FS_TORN_SECONDS sets the length (default 8 s in the suite; the
benchmark-length run of docs/benchmarks.md is 60 s):
  MC_FS_TORN_SECONDS=60 MC_BUILD_DIR=$PWD/build-gcc \\
      /usr/bin/python3 -m pytest -q tests/integration/fs/test_torn.py"""
import errno
import os
import random
import struct
import threading
import time
import zlib

SECONDS = float(os.environ.get("MC_FS_TORN_SECONDS", "8"))
NAMES = 20
WRITERS = 6
READERS = 6
HEADER = struct.Struct("<QI")  # body length, crc32 of the body


def payload(rng):
    size = rng.choice([0, 1, 100, 4096, 70000, 300000, 1 << 20,
                       (1 << 20) + 12345, 3 << 20])
    body = rng.randbytes(size)
    return HEADER.pack(size, zlib.crc32(body)) + body


def check(data, fsize):
    """None if data is one whole version of fsize bytes, else why not."""
    if len(data) != fsize:
        return f"read {len(data)} bytes, fstat says {fsize}"
    if len(data) < HEADER.size:
        return f"{len(data)} bytes: shorter than a header"
    size, crc = HEADER.unpack_from(data)
    if len(data) != HEADER.size + size:
        return f"{len(data)} bytes, the header says {HEADER.size + size}"
    if zlib.crc32(data[HEADER.size:]) != crc:
        return "checksum mismatch: two versions mixed"
    return None


def churn(paths, writers, readers, seconds, reopen_stale=False):
    """writers replace and readers read random names of paths (lists of
    one name's paths on each mount; thread i uses mount i % len) for
    seconds; assert that no open failed and nothing read was torn. With
    reopen_stale a reader whose open fails with ESTALE opens the name once
    more, as docs/operations.md tells programs to (counted in "stale"; a
    second ESTALE in a row is an error). Returns the counts."""
    stop = time.monotonic() + seconds
    stats = {"writes": 0, "reads": 0, "stale": 0, "torn": [], "errors": []}
    lock = threading.Lock()

    def writer(w):
        rng = random.Random(w)
        while time.monotonic() < stop:
            pair = rng.choice(paths)
            path = pair[w % len(pair)]
            try:
                with open(path, "wb") as f:
                    f.write(payload(rng))
            except OSError as e:
                with lock:
                    stats["errors"].append(f"write {path}: {e}")
                return
            with lock:
                stats["writes"] += 1

    def read_once(path):
        with open(path, "rb") as f:
            return os.fstat(f.fileno()).st_size, f.read()

    def reader(r):
        rng = random.Random(100 + r)
        while time.monotonic() < stop:
            pair = rng.choice(paths)
            path = pair[r % len(pair)]
            try:
                try:
                    fsize, data = read_once(path)
                except OSError as e:
                    if not reopen_stale or e.errno != errno.ESTALE:
                        raise
                    with lock:
                        stats["stale"] += 1
                    fsize, data = read_once(path)
            except OSError as e:
                with lock:
                    stats["errors"].append(f"read {path}: {e}")
                return
            why = check(data, fsize)
            with lock:
                stats["reads"] += 1
                if why:
                    stats["torn"].append(f"{path}: {why}")

    threads = [threading.Thread(target=writer, args=(i,))
               for i in range(writers)]
    threads += [threading.Thread(target=reader, args=(i,))
                for i in range(readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"{stats['writes']} writes, {stats['reads']} reads, "
          f"{stats['stale']} stale opens seen by the program, "
          f"{len(stats['torn'])} torn")
    assert not stats["errors"], stats["errors"][:5]
    assert stats["writes"] > 50 and stats["reads"] > 50, stats
    assert not stats["torn"], \
        f"{len(stats['torn'])} torn of {stats['reads']}: {stats['torn'][:5]}"
    return stats

def test_no_torn_reads(mounts):
    a = mounts(name="a", seg="1GiB")
    b = mounts(name="b", seg="1GiB")
    paths = [(a.kv / f"n{i}", b.kv / f"n{i}") for i in range(NAMES)]
    for pa, _ in paths:
        pa.write_bytes(payload(random.Random(0)))
    churn(paths, WRITERS, READERS, SECONDS)


def test_hot_names_rarely_stale(mounts):
    """Two names on one mount, each replaced and read by many threads at
    once: an open whose inode went stale is retried once by the kernel,
    with an inode of that thread's own, so a program sees ESTALE only when
    the name moved on twice within that retry (docs/operations.md: open it
    again). Here that must stay rare (under 2% of reads: before each retry
    had an inode of its own, ESTALE reached readers in every run), an open
    made again must succeed, and nothing read is torn. (Zero was the
    target; about one run in ten still saw one such open: see the HA
    session's closing note.)"""
    m = mounts(name="hot", seg="1GiB")
    paths = [(m.kv / f"h{i}",) for i in range(2)]
    for (p,) in paths:
        p.write_bytes(payload(random.Random(0)))
    stats = churn(paths, 4, 8, SECONDS / 2, reopen_stale=True)
    assert stats["stale"] * 50 <= max(stats["reads"], 50), stats["stale"]
