# SPDX-License-Identifier: Apache-2.0
"""Faults: a pool member killed with kill -9 (its replicas go after
client_ttl unless it restarts and re-adopts its segment), an owner killed
under a 2-replica object, the master killed -9 and restarted (every
acknowledged object back, new puts do not overwrite old ones, a client
started afterwards finds every owner), the CLI round trip of a 100 MiB
file across a master restart, and a reader joining while the master's
disk is full."""
import contextlib
import hashlib
import json
import os
import random
import time
import urllib.parse

import pytest

from mctest import fill_fs, request, small_tmpfs
from pool import Master, Member, Shell, cli, cleanup_segments, eventually


def owners(sh, key):
    desc = sh.ok(f"desc {key}").split()
    return [d.split("@")[0] for d in desc[1:]]


@contextlib.contextmanager
def pool_of_one(procs, tmp_path, *args):
    """A master started with args and one 16 MiB member, its segment
    mounted; the member's shared memory cleaned up after."""
    m = Master(procs, tmp_path, *args)
    ms = [Member(procs, tmp_path, m, size="16MiB")]
    try:
        eventually(lambda: len(m.segments()) == 1, what="segment")
        yield m
    finally:
        cleanup_segments([x.port for x in ms])


@contextlib.contextmanager
def pool_of(procs, tmp_path, n, *args):
    """A master started with args and n members of 32 MB, their segments
    mounted; (master, members), their shared memory cleaned up after."""
    m = Master(procs, tmp_path, *args)
    ms = [Member(procs, tmp_path, m) for _ in range(n)]
    try:
        eventually(lambda: len(m.segments()) == n, what="segments")
        yield m, ms
    finally:
        cleanup_segments([x.port for x in ms])


def test_killed_member_loses_replicas_after_client_ttl(procs, tmp_path):
    m = Master(procs, tmp_path, "--client_ttl", "2")
    ms = [Member(procs, tmp_path, m) for _ in range(2)]
    try:
        eventually(lambda: len(m.segments()) == 2, what="segments")
        sh = Shell(procs, tmp_path, m)
        keys = [f"t/{i}" for i in range(30)]
        for i, k in enumerate(keys):
            sh.ok(f"put {k} 100000 {i}")
        victim = ms[0]
        on_victim = [k for k in keys if owners(sh, k) == [victim.name]]
        elsewhere = [k for k in keys if k not in on_victim]
        assert on_victim and elsewhere
        victim.kill()
        eventually(lambda: victim.name not in m.segments(), timeout=15,
                   what="segment dropped after client_ttl")
        assert sh.exist(on_victim) == [0] * len(on_victim)
        for k in elsewhere:
            sh.ok(f"check {k} 100000 {keys.index(k)}")
    finally:
        cleanup_segments([x.port for x in ms])


def engine_entries(master, name):
    """The metadata service's answers for engine name's two entries."""
    return [request(master.meta_port, "GET", "/metadata?key="
                    + urllib.parse.quote(f"mooncake/{kind}/{name}",
                                         safe=""))[0]
            for kind in ("ram", "rpc_meta")]


@pytest.mark.parametrize("cleanup", [True, False], ids=["on", "off"])
def test_killed_member_engine_entries_go_after_client_ttl(procs, tmp_path,
                                                           cleanup,
                                                           monkeypatch):
    """A member killed -9 never removes its transfer-engine entries
    (mooncake/ram/<name>, mooncake/rpc_meta/<name>) from the master's
    metadata service: they stayed for good (112 seen 35 minutes after 56
    clients were killed; with pod IPs or random ports as names, without
    bound). Once the master drops the client, they go; a live member's
    stay. With --enable_metadata_cleanup_on_timeout=false (upstream's
    default) they stay. (After a grace, 60 s by default, 0.5 s here.)"""
    monkeypatch.setenv("MC_METADATA_CLEANUP_GRACE_MS", "500")
    m = Master(procs, tmp_path, "--client_ttl", "2",
               f"--enable_metadata_cleanup_on_timeout={str(cleanup).lower()}")
    ms = [Member(procs, tmp_path, m) for _ in range(2)]
    try:
        eventually(lambda: len(m.segments()) == 2, what="segments")
        victim, live = ms
        assert engine_entries(m, victim.name) == [200, 200]
        assert engine_entries(m, live.name) == [200, 200]
        victim.kill()
        eventually(lambda: victim.name not in m.segments(), timeout=15,
                   what="segment dropped after client_ttl")
        if not cleanup:
            time.sleep(2)
            assert engine_entries(m, victim.name) == [200, 200]
            return
        eventually(lambda: engine_entries(m, victim.name) == [404, 404],
                   timeout=5, what="the dead engine's entries removed")
        assert engine_entries(m, live.name) == [200, 200]
        assert "removed the transfer-engine entries of " \
            f"'{victim.name}'" in m.log()
    finally:
        cleanup_segments([x.port for x in ms])


def test_member_back_after_client_ttl_publishes_again(procs, tmp_path,
                                                      monkeypatch):
    """A member silent past client_ttl (SIGSTOP: a partition, a pause)
    is dropped with its entries; when it comes back it re-mounts and
    publishes them again, so peers can reach it."""
    import signal
    monkeypatch.setenv("MC_METADATA_CLEANUP_GRACE_MS", "500")
    m = Master(procs, tmp_path, "--client_ttl", "2")
    ms = [Member(procs, tmp_path, m) for _ in range(2)]
    try:
        eventually(lambda: len(m.segments()) == 2, what="segments")
        gone = ms[0]
        gone.proc.send_signal(signal.SIGSTOP)
        try:
            eventually(lambda: engine_entries(m, gone.name) == [404, 404],
                       timeout=15, what="the silent engine's entries removed")
        finally:
            gone.proc.send_signal(signal.SIGCONT)
        eventually(lambda: gone.name in m.segments(), timeout=15,
                   what="re-mounted")
        eventually(lambda: engine_entries(m, gone.name) == [200, 200],
                   timeout=5, what="entries published again")
        # Its entries outlive the drop's removal, and peers reach it.
        time.sleep(1)
        assert engine_entries(m, gone.name) == [200, 200]
        sh = Shell(procs, tmp_path, m)
        for i in range(20):
            sh.ok(f"put b/{i} 100000 {i}")
        assert any(owners(sh, f"b/{i}") == [gone.name] for i in range(20))
        for i in range(20):
            sh.ok(f"check b/{i} 100000 {i}")
    finally:
        cleanup_segments([x.port for x in ms])


def test_restarted_member_readopts_its_segment(procs, tmp_path):
    m = Master(procs, tmp_path, "--client_ttl", "5")
    ms = [Member(procs, tmp_path, m) for _ in range(2)]
    try:
        eventually(lambda: len(m.segments()) == 2, what="segments")
        sh = Shell(procs, tmp_path, m)
        keys = [f"r/{i}" for i in range(30)]
        for i, k in enumerate(keys):
            sh.ok(f"put {k} 150000 {i}")
        victim = ms[0]
        on_victim = [k for k in keys if owners(sh, k) == [victim.name]]
        assert on_victim
        victim.kill()
        victim.start()
        eventually(lambda: "re-adopted" in victim.log(), what="re-adoption")
        time.sleep(6)  # past client_ttl of the killed process
        assert victim.name in m.segments()
        for k in keys:
            sh.ok(f"check {k} 150000 {keys.index(k)}")
        # A clean stop leaves the pool: its objects go at once.
        assert victim.stop() == 0
        eventually(lambda: victim.name not in m.segments(),
                   what="clean leave")
        assert sh.exist(on_victim) == [0] * len(on_victim)
    finally:
        cleanup_segments([x.port for x in ms])


def metric(master, name):
    st, body, _ = request(master.admin_port, "GET", "/metrics")
    assert st == 200, body
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def test_puts_go_around_a_killed_member(procs, tmp_path):
    """A member killed -9: until client_ttl (30 s here) the master still
    places replicas on it. Every put placed there failed (TRANSFER_FAIL:
    6 of 30 single-replica puts and 22 of 30 two-replica puts on three
    members, one dead); now the writer puts again elsewhere and names the
    member to the master, which places no new replica there until it
    pings: a client that never failed puts around it too, and the member
    restarted takes new replicas again."""
    with pool_of(procs, tmp_path, 3, "--client_ttl", "30") as (m, ms):
        a = Shell(procs, tmp_path, m)
        victim = ms[0]
        victim.kill()
        for reps in (1, 2):
            for i in range(30):
                a.ok(f"put a{reps}/{i} 100000 {i} {reps}")
                got = owners(a, f"a{reps}/{i}")
                assert victim.name not in got and len(got) == reps, got
        assert metric(m, "master_unreachable_segment_reports_total") >= 1
        assert victim.name in m.segments()  # not dropped: client_ttl
        # Another client, which never wrote to the dead member.
        b = Shell(procs, tmp_path, m)
        for i in range(20):
            b.ok(f"put b/{i} 100000 {i} 2")
            assert victim.name not in owners(b, f"b/{i}")
        assert "could not reach" not in b.log_path.read_text()
        for reps in (1, 2):
            for i in range(30):
                b.ok(f"check a{reps}/{i} 100000 {i}")
        # Back (its segment re-adopted), it pings: placed on again.
        victim.start()
        eventually(lambda: "re-adopted" in victim.log(), what="re-adoption")
        time.sleep(1.5)  # a ping
        placed = set()
        for i in range(30):
            b.ok(f"put c/{i} 100000 {i}")
            placed.update(owners(b, f"c/{i}"))
        assert victim.name in placed, placed


def test_two_replica_read_survives_a_dead_owner(procs, tmp_path):
    m = Master(procs, tmp_path, "--client_ttl", "30")
    ms = [Member(procs, tmp_path, m) for _ in range(3)]
    try:
        eventually(lambda: len(m.segments()) == 3, what="segments")
        sh = Shell(procs, tmp_path, m)
        for i in range(6):
            sh.ok(f"put two/{i} 300000 {i} 2")
        for i in range(6):
            first = owners(sh, f"two/{i}")[0]
            victim = next(x for x in ms if x.name == first)
            if victim.proc.poll() is None:
                victim.kill()
                cleanup_segments([victim.port])
            # The master still lists the dead replica (client_ttl 30 s):
            # the read must fall over to the other one.
            sh.ok(f"check two/{i} 300000 {i}")
            break
    finally:
        cleanup_segments([x.port for x in ms])


def test_reads_try_a_dead_owner_last(procs, tmp_path):
    """Two-replica objects, one owner killed (the master still lists its
    replicas: client_ttl 30 s). Each read tried the dead replica first
    when the master listed it first, and fell over: with a host cut off
    rather than refusing, a 5 s connect timeout per read. After one
    failure the client reads that member's replicas last (and tells the
    master, which places no new puts there)."""
    with pool_of(procs, tmp_path, 3, "--client_ttl", "30") as (m, ms):
        sh = Shell(procs, tmp_path, m)
        keys = [f"two/{i}" for i in range(24)]
        for i, k in enumerate(keys):
            sh.ok(f"put {k} 200000 {i} 2")
        victim = ms[0]
        first = [k for k in keys if owners(sh, k)[0] == victim.name]
        assert len(first) >= 2, "no key lists the victim first"
        victim.kill()
        cleanup_segments([victim.port])
        reader = Shell(procs, tmp_path, m, env={"MC_LOG_LEVEL": "debug"})
        for k in keys:
            reader.ok(f"check {k} 200000 {keys.index(k)}")
        log = reader.log_path.read_text()
        tried = log.count(f"from {victim.name}: ")
        assert tried == 1, (tried, len(first))
        assert "could not reach " + victim.name in log


def test_master_restart_keeps_acknowledged_objects(procs, tmp_path):
    m = Master(procs, tmp_path)
    ms = [Member(procs, tmp_path, m, size="24MiB") for _ in range(3)]
    try:
        eventually(lambda: len(m.segments()) == 3, what="segments")
        sh = Shell(procs, tmp_path, m)
        rng = random.Random(5)
        objs = {}
        for i in range(40):
            size = rng.randrange(1000, 600000)
            objs[f"m/{i}"] = (size, i)
            sh.ok(f"put m/{i} {size} {i}")
        m.kill()
        assert sh.code("put during 100 1") in (-900, -901)
        m.start()
        eventually(lambda: len(m.segments()) == 3, timeout=20,
                   what="members re-mounted")
        for k, (size, seed) in objs.items():
            sh.ok(f"check {k} {size} {seed}")
        # Fill the pool with new objects: none may land on old ones.
        for i in range(300):
            code = sh.code(f"put fill/{i} 200000 {1000 + i}")
            assert code in (0, -200), code
        for k, (size, seed) in objs.items():
            if sh.exist([k]) == [1]:
                sh.ok(f"check {k} {size} {seed}")
        # A client that joins now finds every owner through the metadata
        # service the master keeps in sqlite.
        late = Shell(procs, tmp_path, m)
        found = 0
        for k, (size, seed) in objs.items():
            if late.exist([k]) == [1]:
                late.ok(f"check {k} {size} {seed}")
                found += 1
        assert found > 0
    finally:
        cleanup_segments([x.port for x in ms])


def test_cli_100mib_roundtrip_across_master_restart(procs, tmp_path):
    m = Master(procs, tmp_path)
    member = Member(procs, tmp_path, m, size="160MiB")
    try:
        eventually(lambda: len(m.segments()) == 1, what="segment")
        src = tmp_path / "big.bin"
        with open(src, "wb") as f:
            f.write(os.urandom(100 << 20))
        digest = hashlib.sha256(src.read_bytes()).hexdigest()
        cli(m, "put", str(src), "big")
        dst = tmp_path / "out1.bin"
        cli(m, "get", "big", str(dst))
        assert hashlib.sha256(dst.read_bytes()).hexdigest() == digest
        m.kill()
        m.start()
        eventually(lambda: len(m.segments()) == 1, timeout=20,
                   what="member re-mounted")
        dst2 = tmp_path / "out2.bin"
        cli(m, "get", "big", str(dst2))
        assert hashlib.sha256(dst2.read_bytes()).hexdigest() == digest
    finally:
        cleanup_segments([member.port])


def test_slow_writer_keeps_its_memory(procs, tmp_path):
    """An unfinished put is reclaimed after the release timeout only once
    its writer is gone: a live, slow writer finishes intact, and the
    memory of a killed one comes back."""
    with pool_of_one(procs, tmp_path, "--put_start_release_timeout_sec",
                     "1", "--put_start_discard_timeout_sec", "1",
                     "--client_ttl", "2") as m:
        slow = Shell(procs, tmp_path, m, env={"MC_STORE_PING_MS": "200"})
        h = slow.ok(f"wopen slow {4 << 20}")
        time.sleep(7)  # past the release timeout and a sweep (every 5 s)
        other = Shell(procs, tmp_path, m)
        for i in range(10):  # would land on the slow put's memory if freed
            assert other.code(f"put f/{i} {1 << 20} {i}") in (0, -200)
        slow.ok(f"wpiece {h} 0 {4 << 20} 7")
        slow.ok(f"wclose {h} commit")
        other.ok(f"check slow {4 << 20} 7")
        # A writer that dies: its put is reclaimed once it is gone.
        dead = Shell(procs, tmp_path, m)
        dead.ok(f"wopen doomed {4 << 20}")
        before = m.metric("master_allocated_bytes")
        dead.proc.kill()
        eventually(lambda: m.metric("master_allocated_bytes")
                   <= before - (4 << 20), timeout=20,
                   what="the dead writer's memory reclaimed")


def test_put_after_its_writer_died_mid_put(procs, tmp_path):
    """A writer killed between PutStart and PutEnd: once the master drops
    it (client_ttl), its unfinished put gives way, so the next put of
    that key goes through. It waited for the discard timeout instead
    (30 s by default; 120 s here), stalling the batch it was in."""
    with pool_of_one(procs, tmp_path, "--put_start_discard_timeout_sec",
                     "120", "--client_ttl", "2") as m:
        dead = Shell(procs, tmp_path, m, env={"MC_STORE_PING_MS": "200"})
        dead.ok(f"wopen k {1 << 20}")
        dead.proc.kill()
        other = Shell(procs, tmp_path, m)
        t0 = time.monotonic()
        other.ok(f"put k {1 << 20} 5", timeout=60)
        # client_ttl, the expiry's sweep and the put's retries; far from
        # the discard timeout.
        assert time.monotonic() - t0 < 30
        other.ok(f"check k {1 << 20} 5")


def test_a_pre_empted_put_frees_its_memory_at_its_commit(procs, tmp_path):
    """A put left unfinished past the discard timeout gives way to
    another client's put of the key. Its writer's commit then answers
    success (the key holds a complete object: a put of an existing key,
    upstream's rule) and its pre-empted memory stayed allocated until the
    release timeout (600 s by default). It goes at that commit now."""
    with pool_of_one(procs, tmp_path, "--put_start_discard_timeout_sec",
                     "2", "--put_start_release_timeout_sec", "600") as m:
        a = Shell(procs, tmp_path, m)
        b = Shell(procs, tmp_path, m)
        base = m.metric("master_allocated_bytes")
        h = a.ok(f"wopen k {4 << 20}")
        # 2 MiB: past --put_reserve_max_size, no slots kept for b
        b.ok(f"put k {2 << 20} 5", timeout=60)  # pre-empts after 2 s
        assert m.metric("master_put_start_discard_cnt") == 1
        assert m.metric("master_allocated_bytes") == base + (6 << 20)
        assert a.code(f"wclose {h} commit") == 0
        assert m.metric("master_put_start_release_cnt") == 1
        assert m.metric("master_allocated_bytes") == base + (2 << 20)
        a.ok(f"check k {2 << 20} 5")


def test_writer_back_after_client_ttl_frees_its_put(procs, tmp_path):
    """A writer stalled past client_ttl (SIGSTOP: a GC pause, a
    partition): the master gives its unfinished put up. When it comes
    back, its PutEnd fails and its revoke frees the memory; the memory
    waited for the writer to be gone, so it stayed allocated for as long
    as that (live) client did."""
    import signal
    with pool_of_one(procs, tmp_path, "--client_ttl", "2",
                     "--put_start_release_timeout_sec", "6") as m:
        w = Shell(procs, tmp_path, m, env={"MC_STORE_PING_MS": "200"})
        base = m.metric("master_allocated_bytes")
        h = w.ok(f"wopen stalled {4 << 20}")
        assert m.metric("master_allocated_bytes") >= base + (4 << 20)
        clients = m.metric("master_active_clients")
        w.proc.send_signal(signal.SIGSTOP)
        # Past client_ttl (its put given up), back before the release
        # timeout: the memory then waited for a writer that never goes.
        eventually(lambda: m.metric("master_active_clients") < clients,
                   timeout=10, what="the writer dropped")
        w.proc.send_signal(signal.SIGCONT)
        assert w.code(f"wclose {h} commit") != 0  # given up meanwhile
        eventually(lambda: m.metric("master_allocated_bytes") <= base,
                   timeout=10, what="the given-up put's memory freed")
        assert w.code("size stalled") == -704


def test_master_paused_longer_than_client_ttl_keeps_its_members(procs,
                                                                tmp_path):
    """The master stopped for longer than client_ttl (SIGSTOP here; a VM
    paused, swapped out): its members went on pinging, yet at its resume
    it dropped every one of them, with their objects, before it read the
    pings waiting for it. Silence while the master itself did not run is
    not counted now."""
    import signal
    with pool_of_one(procs, tmp_path, "--client_ttl", "2") as m:
        sh = Shell(procs, tmp_path, m)
        for i in range(5):
            sh.ok(f"put p/{i} 100000 {i}")
        m.proc.send_signal(signal.SIGSTOP)
        time.sleep(5)
        m.proc.send_signal(signal.SIGCONT)
        time.sleep(3)  # past client_ttl after the resume: pings came
        assert len(m.segments()) == 1
        for i in range(5):
            sh.ok(f"check p/{i} 100000 {i}")
        assert "owner timed out" not in m.log()


def kv(reply):
    """'a=1 b=2 rest...' -> {'a': '1', 'b': '2'}."""
    return dict(x.split("=", 1) for x in reply.split() if "=" in x)


def span(master, key):
    """The [start, end) of key's only replica, from /query_key."""
    st, body = master.http(f"/query_key?key={key}")
    assert st == 200, body
    (r,) = json.loads(body)["data"]
    return r["buffer_address_"], r["buffer_address_"] + r["size_"]


def test_master_restart_keeps_memory_readers_may_use(procs, tmp_path):
    """Leases and holds live in the master's memory only, so after a
    restart it cannot tell which objects are being read. It keeps the
    memory of an object removed before the restart while a reader held it
    (recorded as an orphan), and of objects removed during the quarantine
    that follows a restart (one hold TTL: 3 lease TTLs, 6 s here); it does
    not evict then. Afterwards the memory comes back."""
    m = Master(procs, tmp_path, "--default_kv_lease_ttl", "2000")
    mem = Member(procs, tmp_path, m, size="16MiB")
    size = 2 << 20
    try:
        eventually(lambda: len(m.segments()) == 1, what="segment")
        sh = Shell(procs, tmp_path, m)
        other = Shell(procs, tmp_path, m)
        sh.ok(f"put held {size} 1")
        sh.ok(f"put idle {size} 2")
        sh.ok(f"put open {1 << 20} 3")
        kept = [span(m, "held"), span(m, "idle")]
        gone = sh.ok("oopen held").split()[0]
        still = sh.ok("oopen open").split()[0]
        other.ok("rm held force")  # a reader holds it: an orphan
        m.kill()
        m.start()
        eventually(lambda: len(m.segments()) == 1, timeout=20,
                   what="member re-mounted")
        t0 = time.monotonic()
        assert m.metric("master_restart_quarantine_remaining_ms") > 0
        assert m.metric("master_orphan_count") == 1  # from before
        status = cli(m, "status").stdout
        assert "restarted: removals keep memory" in status, status
        assert "removed but kept for readers 1 " in status, status
        other.ok("rm idle")  # no lease is known after the restart
        assert m.metric("master_orphan_count") == 2
        placed = []
        for i in range(8):
            code = other.code(f"put f/{i} {size} {10 + i}")
            assert code in (0, -200), code
            if code == 0:
                placed.append(f"f/{i}")
        assert time.monotonic() - t0 < 5, "too slow to test the quarantine"
        assert 0 < len(placed) <= 5
        for k in placed:
            a, b = span(m, k)
            for ka, kb in kept:
                assert b <= ka or a >= kb, f"{k} took memory a reader had"
        assert m.metric("master_evicted_key_count") == 0
        # The reader's renewals learn that the master forgot its holds:
        # the object still there is held again and reads on, the removed
        # one is lost for good.
        eventually(lambda: kv(other.ok("fstat open")).get("holds") == "1",
                   what="hold taken again")
        assert sh.ok(f"oreadh {still} 65536 3") == str(1 << 20)
        eventually(lambda: sh.code(f"oreadh {gone} 65536 1") == -707,
                   what="the removed object's reads refused")
        # After the quarantine: the kept memory is free again and
        # eviction works.
        sh.ok(f"oclose {still}")
        sh.ok(f"oclose {gone}")
        eventually(lambda: m.metric("master_allocated_bytes")
                   <= len(placed) * size + (1 << 20), timeout=20,
                   what="kept memory released")
        assert m.metric("master_orphan_count") == 0
        assert m.metric("master_restart_quarantine_remaining_ms") == 0
        for i in range(8):
            other.ok(f"put g/{i} {size} {20 + i}")
        for i in range(6, 8):
            other.ok(f"check g/{i} {size} {20 + i}")
        sh.close()
        other.close()
    finally:
        cleanup_segments([mem.port])


def test_reader_joins_while_master_disk_is_full(procs, tmp_path):
    """The master's sqlite and its metadata service's (beside it) on a full
    disk: puts cannot be recorded, but a new client that only reads still
    joins (the metadata service keeps its rpc_meta in memory, logged) and
    reads; it used to be refused with 500 at setup."""
    with small_tmpfs(tmp_path / "db", "8m") as d:
        m = Master(procs, tmp_path, db=d / "master.db")
        mem = Member(procs, tmp_path, m)
        try:
            eventually(lambda: len(m.segments()) == 1, what="segment")
            data = os.urandom(1 << 20)
            src = tmp_path / "in"
            src.write_bytes(data)
            cli(m, "put", str(src), "full/obj")
            fill_fs(d)
            out = tmp_path / "out"
            cli(m, "get", "full/obj", str(out))
            assert out.read_bytes() == data
            assert "metadata store cannot be written" in m.log()
        finally:
            procs.cleanup()
            cleanup_segments([mem.port])
