# SPDX-License-Identifier: Apache-2.0
"""The location cache (docs/design.md, "One round trip per get"): a get of
a key this client read before goes straight to the holder, without the
master, while the read lease the master granted runs. The tests are the
ones a naive cache fails: memory of a removed object given to another
object is never read as the old key, a forced remove in the middle of
direct reads ends each read with an error or the complete old bytes, and
an object read only from the cache is not evicted before a colder one.
Reads go over TCP (MC_FORCE_TCP: the members are on this host), the path
the cache is for; the pool is real (master, members, Python package)."""
import os
import signal
import threading
import time

import numpy as np

from pool import Master, Member, cleanup_segments, eventually

LEASE_MS = 500  # the master fixture's --default_kv_lease_ttl
BUF = 16 << 20


def addr(a):
    return a.ctypes.data


def client(stores, master, monkeypatch, cache_keys=None):
    monkeypatch.setenv("MC_FORCE_TCP", "1")
    if cache_keys is not None:
        monkeypatch.setenv("MC_LOCATION_CACHE_KEYS", str(cache_keys))
    s = stores()
    assert s.setup("127.0.0.1", master.metadata, 0, BUF, "tcp", "",
                   master.addr) == 0
    return s


def gets(master):
    return (master.metric("master_get_replica_list_requests_total") +
            master.metric("master_batch_get_replica_list_items_total"))


def stamp(tag, version, size):
    """An object's bytes: one 8-byte word naming (tag, version), repeated:
    any mix of two objects, or of an object and other memory, shows."""
    word = np.frombuffer(f"{tag:>4.4}{version:04d}".encode(), np.uint64)
    return np.tile(word, size // 8).view(np.uint8)


def whole(buf, n):
    """The (tag, version) buf[:n] is entirely made of, else None."""
    words = buf[:n].view(np.uint64)
    if n % 8 or not n or not (words == words[0]).all():
        return None
    text = words[:1].tobytes().decode(errors="replace")
    return text[:4].strip(), int(text[4:]) if text[4:].isdigit() else -1


def test_second_get_skips_the_master(master, members, stores, monkeypatch):
    """The first get asks the master and remembers the replicas; the next
    ones read the holder directly (no GetReplicaList at the master), with
    the same bytes, single, staged and batch. A remove of this client's
    forgets the key at once; location_cache_keys 0 turns the cache off."""
    s = client(stores, master, monkeypatch)
    size = 64 << 10
    keys = [f"lc/basic/{i}" for i in range(4)]
    src = [stamp("bas", i, size) for i in range(4)]
    dst = np.zeros(4 * size, np.uint8)
    assert s.register_buffer(addr(dst), dst.nbytes) == 0
    for k, v in zip(keys, src):
        assert s.put(k, v.tobytes()) == 0
    assert s.get_into(keys[0], addr(dst), size) == size
    # Not one GetReplicaList (the toucher's batched renewal of keys[0]
    # may come meanwhile: a batch, and no miss).
    singles = master.metric("master_get_replica_list_requests_total")
    misses = s.location_cache_stats()["misses"]
    for _ in range(20):
        dst[:] = 0
        assert s.get_into(keys[0], addr(dst), size) == size
        assert whole(dst, size) == ("bas", 0)
    assert s.get(keys[0]) == src[0].tobytes()
    assert master.metric("master_get_replica_list_requests_total") == \
        singles, "cached gets asked the master"
    st = s.location_cache_stats()
    assert st["misses"] == misses, st
    assert st["hits"] >= 21 and st["keys"] >= 1, st
    # A batch: the uncached keys go to the master, then all are cached.
    for rnd in range(2):
        dst[:] = 0
        got = s.batch_get_into(keys, [addr(dst) + i * size
                                      for i in range(4)], [size] * 4)
        assert got == [size] * 4, got
        for i in range(4):
            assert whole(dst[i * size:], size) == ("bas", i)
    assert s.location_cache_stats()["keys"] == 4
    # Our own remove: the next get is NOT_FOUND at once, not the old bytes.
    assert s.remove(keys[1], True) == 0
    assert s.get_into(keys[1], addr(dst), size) == -704
    assert s.batch_get_into(keys[1:2], [addr(dst)], [size]) == [-704]
    # remove_by_regex and remove_all forget every cached key at once.
    assert s.get_into(keys[0], addr(dst), size) == size  # cached
    assert s.remove_by_regex("^lc/basic/0$", True) == 1
    assert s.get_into(keys[0], addr(dst), size) == -704
    assert s.get_into(keys[3], addr(dst), size) == size  # cached
    assert s.remove_all(True) >= 1
    assert s.get_into(keys[3], addr(dst), size) == -704
    # Off.
    off = client(stores, master, monkeypatch, cache_keys=0)
    assert off.register_buffer(addr(dst), dst.nbytes) == 0
    assert off.put(keys[2], src[2].tobytes()) == 0
    for _ in range(3):
        assert off.get_into(keys[2], addr(dst), size) == size
    assert off.location_cache_stats()["hits"] == 0


def test_answers_of_the_master_drop_a_cached_key(master, members, stores,
                                               monkeypatch):
    """Another client removes a key this one has cached: once the master
    tells this client the key is gone (is_exist, batch_is_exist,
    get_size), its gets agree (-704), rather than serving the cached old
    bytes for the rest of the lease while is_exist says 0."""
    monkeypatch.setenv("MC_LOCATION_CACHE_KEYS", "65536")
    a = client(stores, master, monkeypatch)
    b = client(stores, master, monkeypatch)
    size = 4096
    dst = np.zeros(size, np.uint8)
    assert a.register_buffer(addr(dst), dst.nbytes) == 0
    for i, ask in enumerate(("is_exist", "batch_is_exist", "get_size")):
        key = f"lc/gone/{ask}"
        assert b.put(key, stamp("gon", i, size).tobytes()) == 0
        assert a.get_into(key, addr(dst), size) == size
        assert a.get_into(key, addr(dst), size) == size  # cached
        assert b.remove(key, True) == 0
        if ask == "is_exist":
            assert a.is_exist(key) == 0
        elif ask == "batch_is_exist":
            assert a.batch_is_exist([key]) == [0]
        else:
            assert a.get_size(key) == -704
        assert a.get_into(key, addr(dst), size) == -704, ask
        assert a.batch_get_into([key], [addr(dst)], [size]) == [-704]


def test_object_replaced_by_one_of_another_size(master, members, stores,
                                               monkeypatch):
    """Another client replaces a key this one has cached with an object of
    another size: get() (get_size, then a read into a buffer of that size)
    returns the new object, not b"" (the cached old one did not fit the
    buffer, and the cache answered before the master), and a get of a key
    replaced by a larger object between the two steps is read again."""
    a = client(stores, master, monkeypatch)
    b = client(stores, master, monkeypatch)
    big, small = stamp("big", 1, 256 << 10), stamp("sml", 2, 64 << 10)
    assert b.put("lc/resized", big.tobytes()) == 0
    assert a.get("lc/resized") == big.tobytes()
    assert a.get("lc/resized") == big.tobytes()  # cached now
    assert b.upsert("lc/resized", small.tobytes()) == 0
    assert a.get("lc/resized") == small.tobytes()
    assert a.get_batch(["lc/resized"]) == [small.tobytes()]
    # Growing, raced: every get is one of the two objects, whole.
    stop, seen = threading.Event(), []

    def writer():
        i = 0
        while not stop.is_set():
            v = (big if i % 2 else small).tobytes()
            assert b.upsert("lc/resized", v) == 0
            i += 1
            time.sleep(0.002)  # replaced objects a read holds: a few MB
    t = threading.Thread(target=writer)
    t.start()
    try:
        end = time.time() + 3
        while time.time() < end:
            seen.append(a.get("lc/resized"))
    finally:
        stop.set()
        t.join()
    assert seen and all(v in (big.tobytes(), small.tobytes()) for v in seen)


def test_hot_key_stays_cached_and_leased(master, members, stores,
                                         monkeypatch):
    """A key read again and again stays in the cache across many leases
    (the toucher renews it with the master, as gets through the master
    would): after the first get no single GetReplicaList reaches the
    master, and the hit count is every get but the first. The renewals
    are leases: another client's unforced remove is refused (-706) while
    the key is being read, long after the first get's lease ended, and
    right after the reads stop (the last reads are renewed too), and
    goes through once a lease has passed since the last read (counted
    from the read, as upstream's from the last get: test_upstream_store's
    test_zero_copy waits exactly a lease). A cache that only counted its
    reads would miss once per lease and let the first remove through."""
    reader = client(stores, master, monkeypatch)
    writer = client(stores, master, monkeypatch)
    size = 64 << 10
    dst = np.zeros(size, np.uint8)
    assert reader.register_buffer(addr(dst), dst.nbytes) == 0
    assert writer.put("lc/hot", stamp("hot", 0, size).tobytes()) == 0
    assert reader.get_into("lc/hot", addr(dst), size) == size
    singles = master.metric("master_get_replica_list_requests_total")
    st0 = reader.location_cache_stats()
    start, n = time.monotonic(), 0
    while time.monotonic() < start + 5 * LEASE_MS / 1000:
        assert reader.get_into("lc/hot", addr(dst), size) == size
        n += 1
        time.sleep(0.002)
    assert whole(dst, size) == ("hot", 0)
    st = reader.location_cache_stats()
    assert st["misses"] == st0["misses"], (st0, st)
    assert st["hits"] - st0["hits"] == n and st["touched"] >= 4, (st0, st)
    assert master.metric("master_get_replica_list_requests_total") == \
        singles, "a cached key went back to the master"
    # Read on for a little, with a remove tried in the middle: refused.
    stop, refused = threading.Event(), []

    def read():
        while not stop.is_set():
            reader.get_into("lc/hot", addr(dst), size)
            time.sleep(0.002)

    t = threading.Thread(target=read)
    t.start()
    try:
        time.sleep(LEASE_MS / 1000)
        refused.append(writer.remove("lc/hot"))
    finally:
        stop.set()
        t.join()
    stopped = time.monotonic()
    refused.append(writer.remove("lc/hot"))
    assert refused == [-706, -706], refused
    eventually(lambda: writer.remove("lc/hot") == 0, timeout=10,
               what="the unforced remove once the reads stopped")
    assert time.monotonic() - stopped >= LEASE_MS / 1000 / 2
    assert reader.get_into("lc/hot", addr(dst), size) == -704


def direct_reads_under_churn(master, stores, monkeypatch, size, rounds,
                             churn):
    """A reader thread gets key K in a loop (from the cache once it is
    there) while the main thread, through another client, force-removes K
    and lets other objects take its memory (churn(writer, i)), then puts K
    again as a new version. Every read must be a whole version of K or an
    error: never another object's bytes, never a mix."""
    reader = client(stores, master, monkeypatch)
    writer = client(stores, master, monkeypatch)
    key = "lc/churn/K"
    dst = np.zeros(size, np.uint8)
    assert reader.register_buffer(addr(dst), dst.nbytes) == 0
    assert writer.put(key, stamp("K", 0, size).tobytes()) == 0
    stop = threading.Event()
    seen, bad, errors = set(), [], {}

    def read():
        while not stop.is_set():
            dst[:] = 0
            n = reader.get_into(key, addr(dst), size)
            if n < 0:
                errors[n] = errors.get(n, 0) + 1
                continue
            w = whole(dst, n) if n == size else None
            if w is None or w[0] != "K":
                bad.append((n, w))
            else:
                seen.add(w[1])

    t = threading.Thread(target=read)
    t.start()
    try:
        for i in range(1, rounds + 1):
            time.sleep(0.05)
            assert writer.remove(key, True) == 0
            churn(writer, i)
            assert writer.put(key, stamp("K", i, size).tobytes()) == 0
        time.sleep(0.3)
    finally:
        stop.set()
        t.join()
    st = reader.location_cache_stats()
    assert not bad, (bad[:5], len(bad))
    assert len(seen) > 1, seen  # it followed the new versions
    assert st["hits"] > 0 and st["dropped"] + st["stale"] > 0, st
    # Not found, not ready (K's put in progress), lease expired, transfer
    # failed: reads that failed, never ones that returned wrong bytes.
    assert set(errors) <= {-704, -703, -707, -800}, errors
    return st


def test_reused_memory_never_read_as_the_old_key(master, members, stores,
                                                 monkeypatch):
    """Each round fills the pool's free memory with other objects after K
    is removed, so K's old memory goes to them as soon as the master lets
    it (when the readers' lease is over): a cache that outlived the lease
    would read them as K."""
    size = 1 << 20

    def churn(w, i):
        fill = [f"lc/fill/{i}/{j}" for j in range(56)]
        for j, k in enumerate(fill):
            w.put(k, stamp("F", j, size).tobytes())  # some fail: full
        time.sleep(LEASE_MS / 1000 * 1.5)  # K's orphan goes to a filler
        for j, k in enumerate(fill):
            w.put(k + "x", stamp("F", j, size).tobytes())
        for k in fill:
            w.remove(k, True)
            w.remove(k + "x", True)

    direct_reads_under_churn(master, stores, monkeypatch, size, 4, churn)


def test_forced_remove_during_direct_reads(master, members, stores,
                                           monkeypatch):
    """A large object read directly again and again while it is removed
    by force and its memory rewritten: each read ends with the complete
    old bytes or an error."""
    size = 8 << 20

    def churn(w, i):
        # Rewrite the pool's free memory, K's old one included once its
        # lease is over, while the reader is still at it.
        for r in range(3):
            fill = [f"lc/big/{i}/{r}/{j}" for j in range(6)]
            for j, k in enumerate(fill):
                w.put(k, stamp("G", j, size).tobytes())
            time.sleep(LEASE_MS / 1000 / 2)
            for k in fill:
                w.remove(k, True)

    direct_reads_under_churn(master, stores, monkeypatch, size, 3, churn)


def test_cached_reads_count_for_eviction(procs, tmp_path, stores,
                                         monkeypatch):
    """A is read once through the master, then B and others are put (they
    are now the more recent), then A is read again, only from the cache,
    within the lease of that first get. Once every lease is over and the
    pool fills, B must go before A: the cache told the master of those
    reads (touch), which count as reads; a cache that never told the
    master would leave A the coldest."""
    m = Master(procs, tmp_path, "--default_kv_lease_ttl", str(LEASE_MS),
               "--eviction_high_watermark_ratio", "0.9",
               "--eviction_ratio", "0.05")
    mem = Member(procs, tmp_path, m, size="16MiB")
    try:
        eventually(lambda: len(m.segments()) == 1, what="segment mounted")
        s = client(stores, m, monkeypatch)
        obj = 256 << 10
        dst = np.zeros(obj, np.uint8)
        assert s.register_buffer(addr(dst), dst.nbytes) == 0
        assert s.put("lc/A", stamp("A", 0, obj).tobytes()) == 0
        leased = time.monotonic()
        assert s.get_into("lc/A", addr(dst), obj) == obj
        # B and eight more: colder than A once A is read from the cache,
        # so that the first eviction run (5% of the pool, some 4 objects)
        # has enough of them to take before A.
        cold = ["lc/B"] + [f"lc/C{j}" for j in range(8)]
        for j, k in enumerate(cold):
            assert s.put(k, stamp("C", j, obj).tobytes()) == 0
        st0 = s.location_cache_stats()
        n = 0
        while time.monotonic() < leased + 0.7 * LEASE_MS / 1000:
            assert s.get_into("lc/A", addr(dst), obj) == obj
            n += 1
            time.sleep(0.005)
        st = s.location_cache_stats()
        assert n >= 5 and st["hits"] - st0["hits"] == n, (n, st0, st)
        assert st["misses"] == st0["misses"]  # not one get at the master
        time.sleep(2 * LEASE_MS / 1000)  # every lease is over
        assert s.location_cache_stats()["touched"] > 0
        assert m.metric("master_evicted_key_count") == 0
        # Fill until the first eviction (is_exist would lease B: not
        # asked until then).
        i = 0
        while m.metric("master_evicted_key_count") == 0:
            assert i < 200, "nothing evicted"
            s.put(f"lc/fill/{i}", stamp("F", i, obj).tobytes())
            i += 1
            if i % 8 == 0:
                time.sleep(0.05)  # the watermark runs per 10 ms tick
        evicted = m.metric("master_evicted_key_count")
        assert s.is_exist("lc/B") == 0, "B, the coldest, was kept"
        assert evicted < len(cold), evicted
        assert s.is_exist("lc/A") == 1, "A, read more recently, went first"
        assert s.get_into("lc/A", addr(dst), obj) == obj
        assert whole(dst, obj) == ("A", 0)
    finally:
        cleanup_segments([mem.port])


def test_get_outlasting_its_lease_is_read_under_a_hold(master, members,
                                                       stores, monkeypatch):
    """A read that ends after its lease (here: the holders stopped for 2.5
    lease TTLs in the middle of the get) is no answer, as the object may
    have been removed and its memory reused meanwhile. The get asks the
    master once more, now for a hold that the client renews while it
    reads, and returns the object: registered, staged and batch gets.
    Every hold is released afterwards. (A large object over a slow link
    outlasts a lease the same way.)"""
    s = client(stores, master, monkeypatch, cache_keys=0)
    size = 1 << 20
    keys = [f"lc/slow/{i}" for i in range(2)]
    for i, k in enumerate(keys):
        assert s.put(k, stamp("slo", i, size).tobytes()) == 0
    dst = np.zeros(2 * size, np.uint8)
    assert s.register_buffer(addr(dst), dst.nbytes) == 0

    def stalled(call, n_keys):
        before = gets(master)
        out = []
        for mem in members:
            os.kill(mem.proc.pid, signal.SIGSTOP)
        t = threading.Thread(target=lambda: out.append(call()))
        try:
            t.start()
            # The stall counts from the first ask, whose lease it must
            # outlast: under load the thread may ask long after start()
            # (one ASan run asked once and read within the lease).
            eventually(lambda: gets(master) - before >= n_keys,
                       what="the get's first ask")
            time.sleep(2.5 * LEASE_MS / 1000)
        finally:
            for mem in members:
                os.kill(mem.proc.pid, signal.SIGCONT)
        t.join(30)
        assert not t.is_alive() and out, "the get did not end"
        # The first ask, then the one for holds. (One run of the batch
        # case in a loaded suite counted only the first ask, before the
        # stall was counted from it: the batch's bytes are checked below
        # either way.)
        asked = gets(master) - before
        assert asked == 2 * n_keys or (n_keys > 1 and asked >= n_keys), \
            (asked, out, s.transfer_stats("tcp"))
        eventually(lambda: master.metric("master_hold_count") == 0,
                   what="the holds released")
        return out[0]

    assert stalled(lambda: s.get_into(keys[0], addr(dst), size), 1) == size
    assert whole(dst, size) == ("slo", 0)
    assert stalled(lambda: s.get(keys[1]), 1) == \
        stamp("slo", 1, size).tobytes()
    dst[:] = 0
    ptrs = [addr(dst), addr(dst) + size]
    assert stalled(lambda: s.batch_get_into(keys, ptrs, [size, size]),
                   2) == [size, size]
    assert whole(dst[:size], size) == ("slo", 0)
    assert whole(dst[size:], size) == ("slo", 1)
