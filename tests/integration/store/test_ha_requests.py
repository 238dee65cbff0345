"""HA masters on one etcd, on loopback (master/ha.c, common/rpc/rpc_leader.c,
docs/design.md "High availability"):

- the leader's record reaches a standby through the op log, and the standby
  takes over when the leader is killed: every acknowledged object is still
  there, with its bytes, for clients given the etcd:// address;
- group commit: a change the leader committed but could not get into the op
  log (its master_view taken away, the standby dead) is never acknowledged,
  and the deposed leader's record that holds it is reconciled before it follows or leads again: it copies
  the next leader's record, or, when it wins again, every standby copies
  its record;
- entries straight to standbys: with etcd frozen, a change the in-sync
  standby holds is acknowledged before its op log write, and when the
  leader then dies the standby writes it into the log as it takes over;
  a standby whose lease expired and was granted anew is still the process
  the in-sync set names, and takes over at once;
- a leader whose record takes longer than its lease to load keeps the
  lease meanwhile, and serves; one frozen during that load for longer
  than its lease serves nothing when resumed, and follows the leader
  elected meanwhile;
- a standby keeps memory ready (touched) for loading its record when it
  takes over, sized by its count of the record's objects, and none with
  --ha_standby_prefault=false; it then takes over with every object;
- SIGTERM while etcd is frozen and a change waits for its op log write:
  the master exits (the call is answered at the lease's end) instead of
  restarting itself as a standby;
- request ids: a request sent again with the RETRY flag (as the RPC client
  does on a new leader) is answered "done" by a master that has it in its
  record, on the leader that applied it and on the next one, and is applied
  normally when no master ever applied it.

The multi-host cases (network namespaces, partitions, etcd members lost)
are tests/integration/ha/.
"""
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import threading
import time

import pytest

from ha_pool import ETCDCTL, Etcd, HaMaster, Pool
from mctest import (SCALE, binary, memory_cgroup, sanitizers, status_kib,
                    wait_for)
from pool import MASTER, Member, cleanup_segments, cli

CLUSTER = "hareq"
REMOVE = 30  # Method.REMOVE (common/rpc/master.proto)
FLAG_OPID, FLAG_RETRY = 0x2, 0x4
NOT_FOUND = -704  # OBJECT_NOT_FOUND
NO_LEADER = -1011  # UNAVAILABLE_IN_CURRENT_MODE


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def read_varint(b, i):
    n = shift = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return n, i


def signed32(n):
    n &= (1 << 64) - 1
    return n - (1 << 64) if n >> 63 else n


def remove_once(port, key, req_id, flags):
    """Remove(key, force) with req_id and flags; (code, [key codes])."""
    kb = key.encode()
    body = b"\x12" + varint(len(kb)) + kb + b"\x18\x01"
    hdr = struct.pack("<4sBBHIIQ", b"MCR1", 1, 0, REMOVE, len(body), flags,
                      req_id)
    with socket.create_connection(("127.0.0.1", port),
                                  timeout=20 * SCALE) as s:
        s.sendall(hdr + body)
        got = b""
        while len(got) < 24:
            chunk = s.recv(24 - len(got))
            if not chunk:
                return None, []  # closed: the master restarted
            got += chunk
        length = struct.unpack("<I", got[8:12])[0]
        data = b""
        while len(data) < length:
            chunk = s.recv(length - len(data))
            assert chunk
            data += chunk
    code, results, i = 0, [], 0
    while i < len(data):
        tag, i = read_varint(data, i)
        if tag == 0x08:
            v, i = read_varint(data, i)
            code = signed32(v)
        elif tag == 0x12:
            n, i = read_varint(data, i)
            sub, rc, j = data[i:i + n], 0, 0
            while j < len(sub):
                t, j = read_varint(sub, j)
                v, j = read_varint(sub, j)
                if t == 0x08:
                    rc = signed32(v)
            results.append(rc)
            i += n
        else:
            raise AssertionError(f"unexpected field {tag:#x}")
    return code, results


@pytest.fixture
def bed(procs, tmp_path, monkeypatch):
    monkeypatch.setenv("MOONCAKE_CLUSTER_ID", CLUSTER)
    etcd = Etcd(procs, tmp_path)
    m1 = HaMaster(procs, tmp_path, etcd, "m1")
    wait_for(m1.leading, timeout=30, what="m1 elected")
    m2 = HaMaster(procs, tmp_path, etcd, "m2")
    wait_for(lambda: "HA: standby" in m2.log(), timeout=30,
             what="m2 a standby")
    pool = Pool(etcd)
    member = Member(procs, tmp_path, pool, size="32MB")
    return etcd, m1, m2, pool, member


def test_standby_takes_over_with_every_object(bed, tmp_path):
    etcd, m1, m2, pool, _ = bed
    assert etcd.get(f"mooncake-store/{CLUSTER}/master_view") == \
        f"127.0.0.1:{m1.port}"
    health = m1.health()
    assert health["role"] == "leader" and health["epoch"] > 0, health
    files = {}
    for i in range(5):
        f = tmp_path / f"obj{i}"
        f.write_bytes(os.urandom(4096 * (i + 1)))
        cli(pool, "put", str(f), f"k{i}")
        files[f"k{i}"] = f
    # Each put is an entry (a standby's key is compared with this).
    assert m1.health()["op_log_entry"] >= health["op_log_entry"] + 5
    m1.procs.kill(m1.proc)
    wait_for(m2.leading, timeout=30 * SCALE, what="m2 elected")
    assert "HA: elected leader" in m2.log()
    assert etcd.get(f"mooncake-store/{CLUSTER}/master_view") == \
        f"127.0.0.1:{m2.port}"
    for k, f in files.items():
        out = tmp_path / f"{k}.out"
        cli(pool, "get", k, str(out), timeout=60)
        assert out.read_bytes() == f.read_bytes(), k
    # The new leader takes new objects too.
    cli(pool, "put", str(files["k0"]), "after")
    assert "after" in cli(pool, "ls").stdout


def test_standby_answers_on_its_admin_port(bed, tmp_path):
    """A standby's admin port was closed until it was elected: a liveness
    probe or a Prometheus scrape of every master saw it dead, and an
    operator could not ask a master what it is. As upstream's standbys,
    it answers /health (200, "role": "standby"), /role, /ha_status,
    /leader and /metrics, with how far its record follows the log; pages
    of the pool answer 503 naming the leader. Elected, the same port
    serves as the leader's."""
    from mctest import request
    etcd, m1, m2, pool, _ = bed
    f = tmp_path / "obj"
    f.write_bytes(os.urandom(8192))
    cli(pool, "put", str(f), "seen")
    port = m2.standby_admin()

    def get(path):
        st, body, _ = request(port, "GET", path)
        return st, body.decode()

    def caught_up():
        st, body = get("/health")
        assert st == 200, (st, body)
        h = json.loads(body)
        return h if h["op_log_entry"] >= m1.health()["op_log_entry"] \
            else None
    h = wait_for(caught_up, timeout=30, what="standby caught up")
    assert h["status"] == "ok" and h["role"] == "standby", h
    assert h["ha_state"] == "standby", h
    assert h["leader_address"] == f"127.0.0.1:{m1.port}", h
    assert h["view_version"] == m1.health()["epoch"], h
    assert get("/role") == (200, "standby")
    assert get("/ha_status") == (200, "standby")
    st, body = get("/leader")
    assert st == 200 and json.loads(body)["present"] is True, body
    assert json.loads(body)["leader_address"] == f"127.0.0.1:{m1.port}"
    st, body = get("/metrics")
    assert st == 200 and re.search(r"^master_ha_is_leader 0$", body, re.M)
    assert re.search(rf"^master_ha_op_log_entry {h['op_log_entry']}$",
                     body, re.M), body
    st, body = get("/get_all_keys")
    assert st == 503 and f"leader at 127.0.0.1:{m1.port}" in body, body
    assert m1.metric("master_ha_is_leader") == 1
    m1.procs.kill(m1.proc)
    wait_for(m2.leading, timeout=30 * SCALE, what="m2 elected")
    assert get("/role") == (200, "leader")
    st, body = get("/health")
    assert st == 200 and json.loads(body)["role"] == "leader", body
    st, body = get("/get_all_keys")
    assert st == 200 and "seen" in body.split(), body


def test_retried_request_is_applied_once(bed, tmp_path):
    etcd, m1, m2, pool, _ = bed
    f = tmp_path / "obj"
    f.write_bytes(os.urandom(8192))
    for k in ("a", "b"):
        cli(pool, "put", str(f), k)
    rid = int.from_bytes(os.urandom(8), "little") | 1
    assert remove_once(m1.port, "a", rid, FLAG_OPID) == (0, [0])
    # The same request again: done, not "not found".
    assert remove_once(m1.port, "a", rid, FLAG_OPID | FLAG_RETRY) == (0, [0])
    # Another id that was never applied runs: the object is gone.
    code, res = remove_once(m1.port, "a", rid + 2, FLAG_OPID | FLAG_RETRY)
    assert NOT_FOUND in (code, *res), (code, res)
    # Without the flags a request is never looked up.
    code, res = remove_once(m1.port, "a", rid, 0)
    assert NOT_FOUND in (code, *res), (code, res)
    # On the next leader the applied id is known from the op log.
    m1.procs.kill(m1.proc)
    wait_for(m2.leading, timeout=30 * SCALE, what="m2 elected")
    assert remove_once(m2.port, "a", rid, FLAG_OPID | FLAG_RETRY) == (0, [0])
    code, res = remove_once(m2.port, "a", rid + 4, FLAG_OPID | FLAG_RETRY)
    assert NOT_FOUND in (code, *res), (code, res)
    # And "b", never removed, is still there.
    assert "b" in cli(pool, "ls").stdout


def test_new_standby_copies_the_record_the_log_no_longer_reaches(
        bed, procs, tmp_path):
    etcd, m1, m2, pool, _ = bed
    f = tmp_path / "obj"
    f.write_bytes(os.urandom(16384))
    for i in range(4):
        cli(pool, "put", str(f), f"old{i}")
    base = f"mooncake-store/{CLUSTER}/oplog_base"
    # The leader trims what its standby (m2) has applied.
    wait_for(lambda: int(etcd.get(base) or "1") > 2, timeout=30 * SCALE,
             what="the op log trimmed")
    m3 = HaMaster(procs, tmp_path, etcd, "m3")
    wait_for(lambda: "record replaced by the leader's copy" in m3.log(),
             timeout=30 * SCALE, what="m3 copies the record")
    # The copy leaves no files behind on either side (each snapshot left
    # its -wal and -shm, 32 KiB, and the standby its .incoming ones).
    left = [p.name for p in tmp_path.iterdir()
            if ".snapshot." in p.name or ".incoming" in p.name]
    assert not left, left
    cli(pool, "put", str(f), "new")
    # In the etcd log, where m3 reads it (it may not be in the stream's
    # in-sync set yet): the leader writes it within 100 ms. The CLI took
    # longer to close than that until its close got fast.
    wait_logged(etcd, m3)
    # m3 alone is left: it has everything, old and new.
    procs.kill(m1.proc)
    procs.kill(m2.proc)
    wait_for(m3.leading, timeout=30 * SCALE, what="m3 elected")
    listing = cli(pool, "ls").stdout
    for k in ("old0", "old1", "old2", "old3", "new"):
        assert k in listing, (k, listing)
    out = tmp_path / "new.out"
    cli(pool, "get", "old2", str(out), timeout=60)
    assert out.read_bytes() == f.read_bytes()


def wait_logged(etcd, standby):
    """Until the standby has applied every entry of the etcd op log, and
    the log has the leader's entries (written every 100 ms while a standby
    acknowledges through the stream)."""
    time.sleep(1)
    keys = subprocess.run(
        [ETCDCTL, "--endpoints", etcd.addr, "get", "--prefix", "--keys-only",
         f"mooncake-store/{CLUSTER}/oplog/"], capture_output=True, text=True,
        timeout=30, env=dict(os.environ, ETCDCTL_API="3")).stdout.split()
    if not keys:
        # The leader trims the log below every standby's position: all of
        # it gone, every standby holds it all (a slow run, ASan, once).
        return
    last = max(int(k.rsplit("/", 2)[-2]) for k in keys)
    key = f"mooncake-store/{CLUSTER}/standby/127.0.0.1:{standby.port}"
    wait_for(lambda: int((etcd.get(key) or "0").split()[0]) >= last,
             timeout=30 * SCALE,
             what=f"the standby at op log entry {last}")


def remove_unshipped(bed, tmp_path):
    """Put gc_x and gc_y; then, with the standby m2 killed (once it holds
    everything), take master_view from the leader m1 behind its back and
    remove gc_x there: m1 commits the remove in its record, its op log
    write is refused (fenced) and no standby holds it, so the client is
    never told it is done and m1 restarts as a standby whose record holds
    a change the log lacks. Returns the file put."""
    etcd, leader, standby, pool, _ = bed
    key = "gc_x"
    f = tmp_path / "obj"
    f.write_bytes(os.urandom(8192))
    for k in ("gc_x", "gc_y"):
        cli(pool, "put", str(f), k)
    wait_logged(etcd, standby)
    # Killed, not stopped: a stopped standby's socket would still take
    # the leader's stream, and the remove could live on in it.
    standby.procs.kill(standby.proc)
    etcd.delete(f"mooncake-store/{CLUSTER}/master_view")
    code, res = remove_once(leader.port, key,
                            int.from_bytes(os.urandom(8), "little") | 1,
                            FLAG_OPID)
    # Not acknowledged: "no leader", or the connection closed by the
    # restart (never 0).
    assert code in (NO_LEADER, None), (code, res)
    wait_for(lambda: "restarting as a standby" in leader.log(),
             timeout=30 * SCALE, what="the old leader steps down")
    assert "op log write refused" in leader.log()
    leader.pf.unlink()  # written again once it serves again
    return f


def test_deposed_leader_with_unshipped_change_copies_next_leaders_record(
        bed, tmp_path):
    _, m1, m2, pool, _ = bed
    f = remove_unshipped(bed, tmp_path)
    # m1 dies (it may have been elected again already); m2 comes back and
    # wins; m1 starts again on its record.
    m1.procs.kill(m1.proc)
    m2.start()
    wait_for(m2.leading, timeout=30 * SCALE, what="m2 elected")
    m1.start()
    # m1's record removed "gc_x", m2's log never did: m1 copies m2's.
    wait_for(lambda: "record replaced by the leader's copy" in m1.log(),
             timeout=30 * SCALE, what="m1 copies m2's record")
    assert "the next leader's log goes on" in m1.log()
    cli(pool, "put", str(f), "gc_z")
    m2.procs.kill(m2.proc)
    wait_for(m1.leading, timeout=30 * SCALE, what="m1 elected again")
    listing = cli(pool, "ls").stdout
    # The unacknowledged remove is gone with the leader that made it; what
    # m2 did (gc_z) is there.
    for k in ("gc_x", "gc_y", "gc_z"):
        assert k in listing, (k, listing)


def test_reelected_leader_with_unshipped_change_makes_standbys_copy(
        bed, tmp_path):
    _, m1, m2, pool, _ = bed
    f = remove_unshipped(bed, tmp_path)
    # m1 wins again while m2 is away: its record (without "gc_x") is now
    # the truth, and the log starts after it.
    wait_for(m1.leading, timeout=30 * SCALE, what="m1 elected again")
    assert "may hold changes the log lacks" in m1.log()
    m2.start()
    wait_for(lambda: "record replaced by the leader's copy" in m2.log(),
             timeout=30 * SCALE, what="m2 copies m1's record")
    cli(pool, "put", str(f), "gc_z")
    wait_logged(bed[0], m2)
    m1.procs.kill(m1.proc)
    wait_for(m2.leading, timeout=30 * SCALE, what="m2 elected")
    listing = cli(pool, "ls").stdout
    assert "gc_x" not in listing, listing
    for k in ("gc_y", "gc_z"):
        assert k in listing, (k, listing)


def test_sigterm_with_etcd_frozen_exits_instead_of_restarting(bed, tmp_path):
    etcd, m1, _, pool, _ = bed
    f = tmp_path / "obj"
    f.write_bytes(os.urandom(8192))
    cli(pool, "put", str(f), "gc_t")
    # etcd frozen: a remove is committed on m1 and waits for its op log
    # write, which cannot happen before the lease ends.
    etcd.proc.send_signal(signal.SIGSTOP)
    try:
        waiter = threading.Thread(
            target=remove_once,
            args=(m1.port, "gc_t",
                  int.from_bytes(os.urandom(8), "little") | 1, FLAG_OPID))
        waiter.start()
        time.sleep(0.3)
        m1.proc.send_signal(signal.SIGTERM)
        # The shutdown completes (the waiting call is answered at the
        # lease's end): the process exits rather than restarting itself
        # as a standby, which would swallow the SIGTERM.
        m1.proc.wait(timeout=30 * SCALE)
        waiter.join(timeout=30 * SCALE)
        assert "restarting as a standby" not in m1.log()
    finally:
        etcd.proc.send_signal(signal.SIGCONT)


def test_acknowledged_through_the_stream_survives_the_leader(bed, tmp_path):
    etcd, m1, m2, pool, _ = bed
    isr = f"mooncake-store/{CLUSTER}/insync"
    wait_for(lambda: f"127.0.0.1:{m2.port} " in etcd.get(isr),
             timeout=30 * SCALE, what="m2 in the in-sync set")
    f = tmp_path / "obj"
    f.write_bytes(os.urandom(8192))
    for k in ("st_x", "st_y"):
        cli(pool, "put", str(f), k)
    # etcd frozen: the remove cannot reach the op log, only m2's buffer;
    # it is acknowledged (within m1's lease) because m2 holds it.
    etcd.proc.send_signal(signal.SIGSTOP)
    try:
        assert remove_once(m1.port, "st_x",
                           int.from_bytes(os.urandom(8), "little") | 1,
                           FLAG_OPID) == (0, [0])
        m1.procs.kill(m1.proc)
    finally:
        etcd.proc.send_signal(signal.SIGCONT)
    wait_for(m2.leading, timeout=30 * SCALE, what="m2 elected")
    log = m2.log()
    assert "entries of the last leader's stream into the log" in log, \
        log[-4000:]
    listing = cli(pool, "ls").stdout
    assert "st_x" not in listing, listing
    assert "st_y" in listing, listing


def test_standby_with_a_lease_granted_anew_is_still_in_sync(bed, tmp_path):
    """The in-sync set names a standby's process (its first lease), not its
    lease now: a standby whose lease ended and was granted anew (its
    keepalives kept from etcd for a TTL; here revoked) still holds its
    buffer, and when the leader dies before it lists the new lease, the
    standby takes over at once instead of reading "every in-sync standby
    gone" and waiting twice the TTL."""
    etcd, m1, m2, pool, _ = bed
    isr = f"mooncake-store/{CLUSTER}/insync"
    me = f"127.0.0.1:{m2.port}"
    wait_for(lambda: f"{me} " in etcd.get(isr), timeout=30 * SCALE,
             what="m2 in the in-sync set")
    f = tmp_path / "obj"
    f.write_bytes(os.urandom(8192))
    cli(pool, "put", str(f), "ls_x")
    line = [ln for ln in etcd.get(isr).splitlines() if ln.startswith(me)]
    first = int(line[0].split()[1], 16)
    key = f"mooncake-store/{CLUSTER}/standby/{me}"
    assert etcd.lease_of(key) == first
    # The leader frozen (it cannot list the new lease), m2's lease revoked:
    # m2 is granted another and publishes its key under it.
    m1.proc.send_signal(signal.SIGSTOP)
    etcd.ctl("lease", "revoke", f"{first:x}")
    wait_for(lambda: etcd.lease_of(key) not in (0, first),
             timeout=30 * SCALE, what="m2 on a new lease")
    assert etcd.get(key).split()[1] == f"{first:x}", etcd.get(key)
    m1.procs.kill(m1.proc)
    etcd.delete(f"mooncake-store/{CLUSTER}/master_view")
    wait_for(m2.leading, timeout=30 * SCALE, what="m2 elected")
    assert "every in-sync standby" not in m2.log(), m2.log()
    out = tmp_path / "ls_x.out"
    cli(pool, "get", "ls_x", str(out), timeout=60)
    assert out.read_bytes() == f.read_bytes()


def stamp(line):
    """The time of a log line, in seconds."""
    d, t = line.split()[:2]
    return time.mktime(time.strptime(f"{d} {t.split('.')[0]}",
                                     "%Y-%m-%d %H:%M:%S")) + \
        float("0." + t.split(".")[1])


def big_record(procs, tmp_path, etcd, name, n, cluster):
    """A leader's record with n objects of 64 bytes on one segment,
    written with sqlite while the master is down (the member's segment
    stays in the record); returns the master, stopped, and the member."""
    m = HaMaster(procs, tmp_path, etcd, name, ttl=1, cluster=cluster)
    wait_for(m.leading, timeout=30 * SCALE, what="elected")
    member = Member(procs, tmp_path, Pool(etcd), size="64MB")
    member.kill()
    m.proc.send_signal(signal.SIGTERM)
    m.proc.wait(30 * SCALE)
    db = sqlite3.connect(tmp_path / f"{name}.db")
    (seg,), = db.execute("SELECT id FROM segments").fetchall()
    db.executemany(
        "INSERT INTO objects(key, size, flags, soft_pin_until, mtime,"
        " replicas) VALUES (?, 64, 0, 0, 0, ?)",
        ((b"k%d" % i, seg + struct.pack("<Q", 64 * i)) for i in range(n)))
    db.commit()
    db.close()
    return m, member


def test_leader_whose_record_loads_longer_than_its_lease_keeps_it(
        procs, tmp_path, monkeypatch):
    """A takeover at scale loads a record of millions of objects, seconds,
    longer than the lease (here a 1 s lease and 1,000,000 objects written
    into the record while the master was down). The lease is renewed
    while the record loads: the master is elected once and serves, where
    before 2026-12-05 it lost the lead it was loading for, restarted as a
    standby and loaded again (with every load longer than the TTL it never
    served)."""
    n = 1_000_000
    monkeypatch.setenv("MOONCAKE_CLUSTER_ID", "haload")
    etcd = Etcd(procs, tmp_path)
    m, member = big_record(procs, tmp_path, etcd, "big", n, "haload")
    try:
        before = m.log().count("HA: elected leader")
        m.start()
        wait_for(m.leading, timeout=120 * SCALE, what="serving")
        # Puts' fence for reserved space counts from the election: over
        # by the time a load this long ends (it counted from the load's
        # end before 2026-12-06, 0.75 s more for the first put).
        fence = m.metric("master_put_fence_remaining_ms")
        stamps = [stamp(ln) for ln in m.log().splitlines()
                  if "HA: elected leader" in ln or "serving RPC on" in ln]
        load = stamps[-1] - stamps[-2]
        print(f"elected to serving (the load): {load:.2f} s")
        # Counted from the load's end it would be 750 ms now; from the
        # election, what is left of 750 ms after the load (0 after a
        # load of 0.75 s or more; 50 ms for the log's clock).
        assert fence <= max(0.0, 750 - load * 1000) + 50, (fence, load)
        time.sleep(3)  # three leases: it keeps leading
        log = m.log()
        assert m.proc.poll() is None, log
        assert "no longer the leader" not in log, log
        assert log.count("HA: elected leader") == before + 1, log
        assert log.count(f"restored 1 segments and {n} objects") == 1, log
    finally:
        cleanup_segments([member.port])


def test_standby_keeps_memory_ready_for_loading_its_record(
        procs, tmp_path, monkeypatch):
    """A takeover's load of a large record spends much of its time in
    page faults (the kernel zeroing fresh memory). A standby counts its
    record's objects and touches the memory the load will use while it
    waits (256 bytes an object and the record's size), resident, and none
    with --ha_standby_prefault=false.
    Elected, it loads every object and serves."""
    n = 600_000  # more than one round's 128 MiB, less than two
    monkeypatch.setenv("MOONCAKE_CLUSTER_ID", "haprefault")
    etcd = Etcd(procs, tmp_path)
    m, member = big_record(procs, tmp_path, etcd, "big", n, "haprefault")
    try:
        # The standbys start from copies of the record (at the log's
        # entry, so they follow it as they are).
        for name in ("ready", "lean"):
            shutil.copy(tmp_path / "big.db", tmp_path / f"{name}.db")
        m.start()
        wait_for(m.leading, timeout=60 * SCALE, what="serving")
        ready = HaMaster(procs, tmp_path, etcd, "ready", ttl=1,
                         cluster="haprefault")
        lean = HaMaster(procs, tmp_path, etcd, "lean", ttl=1,
                        cluster="haprefault",
                        extra=("--ha_standby_prefault=false",))
        said = re.compile(r"HA: standby: (\d+) MiB of memory ready for "
                          r"loading the record \((\d+) objects")
        wait_for(lambda: said.search(ready.log()), timeout=60 * SCALE,
                 what="the standby's memory ready")
        mib, objects = map(int, said.search(ready.log()).groups())
        assert objects == n, ready.log()
        assert mib >= n * 256 >> 20, mib
        assert ": short of memory" not in ready.log(), ready.log()
        assert status_kib(ready.proc.pid, "VmRSS") >> 10 >= mib
        time.sleep(1)  # the lean standby had its rounds too
        assert "HA: standby" in lean.log(), lean.log()
        assert not said.search(lean.log()), lean.log()
        assert status_kib(lean.proc.pid, "VmRSS") >> 10 < mib // 2
        lean.proc.send_signal(signal.SIGTERM)
        lean.proc.wait(30 * SCALE)
        m.procs.kill(m.proc)
        wait_for(ready.leading, timeout=60 * SCALE, what="takeover")
        assert f"restored 1 segments and {n} objects" in ready.log()
        # It serves: a new object goes in and is listed.
        f = tmp_path / "after"
        f.write_bytes(os.urandom(4096))
        other = Member(procs, tmp_path, Pool(etcd), size="32MB")
        cli(Pool(etcd), "put", str(f), "after", timeout=60)
        assert "after" in cli(Pool(etcd), "ls").stdout
        cleanup_segments([other.port])
    finally:
        cleanup_segments([member.port])


def test_leader_frozen_while_loading_serves_nothing_and_follows_the_next(
        procs, tmp_path, monkeypatch):
    """A master elected and then frozen while it loads its record (a
    stalled VM, SIGSTOP) for longer than its lease: the other standby is
    elected and serves. Resumed, the frozen one finds its lease gone: it
    never serves (no port file, master_view stays the other's), restarts
    as a standby of the new leader, and later takes over from it with the
    object put meanwhile."""
    n = 600_000
    monkeypatch.setenv("MOONCAKE_CLUSTER_ID", "hafrozen")
    etcd = Etcd(procs, tmp_path)
    m, member = big_record(procs, tmp_path, etcd, "big", n, "hafrozen")
    other = None
    try:
        for name in ("a", "b"):
            shutil.copy(tmp_path / "big.db", tmp_path / f"{name}.db")
        m.start()
        wait_for(m.leading, timeout=60 * SCALE, what="serving")
        heirs = [HaMaster(procs, tmp_path, etcd, name, ttl=1,
                          cluster="hafrozen") for name in ("a", "b")]
        for h in heirs:
            wait_for(lambda: "HA: standby" in h.log(), timeout=60 * SCALE,
                     what="following")
        m.procs.kill(m.proc)
        frozen = None
        deadline = time.monotonic() + 60 * SCALE
        while frozen is None and time.monotonic() < deadline:
            for h in heirs:
                if "HA: elected leader" in h.log():
                    h.proc.send_signal(signal.SIGSTOP)
                    frozen = h
                    break
            time.sleep(0.005)
        assert frozen is not None, [h.log() for h in heirs]
        assert "restored" not in frozen.log(), "not frozen mid-load"
        nxt = heirs[1] if frozen is heirs[0] else heirs[0]
        view = "mooncake-store/hafrozen/master_view"
        wait_for(nxt.leading, timeout=60 * SCALE, what="the next leader")
        f = tmp_path / "during"
        f.write_bytes(os.urandom(8192))
        other = Member(procs, tmp_path, Pool(etcd), size="32MB")
        cli(Pool(etcd), "put", str(f), "during", timeout=60)
        held = etcd.get(view)
        frozen.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: "no longer the leader" in frozen.log(),
                 timeout=60 * SCALE, what="the frozen one stepping down")
        follows = f"HA: standby 127.0.0.1:{frozen.port} "
        wait_for(lambda: frozen.log().count(follows) >= 2,
                 timeout=60 * SCALE, what="following again")
        assert not frozen.pf.exists(), frozen.log()
        assert etcd.get(view) == held
        assert held == f"127.0.0.1:{nxt.port}", held
        # It follows the new leader: elected when that one dies, it has
        # the object put meanwhile.
        nxt.procs.kill(nxt.proc)
        wait_for(frozen.leading, timeout=120 * SCALE, what="takeover")
        out = tmp_path / "during.out"
        cli(Pool(etcd), "get", "during", str(out), timeout=60)
        assert out.read_bytes() == f.read_bytes()
    finally:
        cleanup_segments([member.port] + ([other.port] if other else []))


READY = re.compile(r"HA: standby: (\d+) MiB of memory ready for loading the "
                   r"record \((\d+) objects.*\n")


def test_standby_in_a_small_container_stays_within_its_limit(
        procs, tmp_path, monkeypatch):
    """A standby in a container (a memory cgroup of 320 MiB; /proc/meminfo
    shows the host's memory, not this limit) whose record wants more
    (600,000 objects: 173 MiB) makes ready at most half of what its
    cgroup still allows and says it is short, instead of touching its way
    into the cgroup's OOM killer. It still takes over (the load fits)."""
    n, limit = 600_000, 320 << 20
    monkeypatch.setenv("MOONCAKE_CLUSTER_ID", "hacgroup")
    etcd = Etcd(procs, tmp_path)
    m, member = big_record(procs, tmp_path, etcd, "big", n, "hacgroup")
    try:
        shutil.copy(tmp_path / "big.db", tmp_path / "boxed.db")
        m.start()
        wait_for(m.leading, timeout=60 * SCALE, what="serving")
        with memory_cgroup(limit) as wrap:
            boxed = HaMaster(procs, tmp_path, etcd, "boxed", ttl=1,
                             cluster="hacgroup", wrap=wrap)
            wait_for(lambda: READY.search(boxed.log()),
                     timeout=60 * SCALE, what="the standby's memory")
            line = READY.search(boxed.log())
            mib, objects = map(int, line.groups())
            assert objects == n, boxed.log()
            assert line.group(0).rstrip().endswith(
                ": short of memory for more"), boxed.log()
            assert mib <= (limit >> 20) // 2, mib
            assert mib >= 32, mib  # it did make some ready
            time.sleep(1)  # a few more rounds: nothing more
            assert status_kib(boxed.proc.pid, "VmRSS") << 10 < limit
            assert boxed.log().count("HA: standby: ") == 1, boxed.log()
            if sanitizers():
                return  # ASan's load would not fit in the limit
            m.procs.kill(m.proc)
            wait_for(boxed.leading, timeout=60 * SCALE, what="takeover")
            assert f"restored 1 segments and {n} objects" in boxed.log()
    finally:
        cleanup_segments([member.port])


def test_standby_refused_memory_fails_its_takeover_clearly(
        procs, tmp_path, monkeypatch):
    """A standby under an address-space limit (ulimit -v) that its record
    does not fit: malloc refuses while it makes memory ready, and it gives
    some back and keeps following (its keepalives, the log). Elected, its
    load fails with an error that says out of memory and how much a
    master needs, and it exits; the next standby takes over with every
    object. (Not under ASan: its shadow memory does not run under
    RLIMIT_AS.)"""
    if sanitizers():
        pytest.skip("ASan's shadow memory does not run under RLIMIT_AS")
    n = 600_000
    monkeypatch.setenv("MOONCAKE_CLUSTER_ID", "haulimit")
    # One malloc arena: no 64 MiB reservation per thread that mallocs, so
    # the address space's size is the same from one process to the next.
    monkeypatch.setenv("MALLOC_ARENA_MAX", "1")
    etcd = Etcd(procs, tmp_path)
    m, member = big_record(procs, tmp_path, etcd, "big", n, "haulimit")
    try:
        for name in ("probe", "cramped", "roomy"):
            shutil.copy(tmp_path / "big.db", tmp_path / f"{name}.db")
        m.start()
        wait_for(m.leading, timeout=60 * SCALE, what="serving")
        # What a standby's address space is without memory made ready.
        probe = HaMaster(procs, tmp_path, etcd, "probe", ttl=1,
                         cluster="haulimit",
                         extra=("--ha_standby_prefault=false",))
        wait_for(lambda: "HA: standby" in probe.log(), timeout=60 * SCALE,
                 what="following")
        time.sleep(1)
        base = status_kib(probe.proc.pid, "VmSize") << 10
        probe.proc.send_signal(signal.SIGTERM)
        probe.proc.wait(30 * SCALE)
        cramped = HaMaster(procs, tmp_path, etcd, "cramped", ttl=1,
                           cluster="haulimit",
                           wrap=("prlimit", f"--as={base + (64 << 20)}",
                                 "--"))
        wait_for(lambda: READY.search(cramped.log()), timeout=60 * SCALE,
                 what="the standby's memory")
        line = READY.search(cramped.log())
        assert line.group(0).rstrip().endswith(
            ": short of memory for more"), cramped.log()
        assert int(line.group(1)) < n * 256 >> 20, cramped.log()
        # It goes on following: in the in-sync set, alive, for 3 leases.
        isr = "mooncake-store/haulimit/insync"
        wait_for(lambda: f"127.0.0.1:{cramped.port} " in etcd.get(isr),
                 timeout=30 * SCALE, what="in the in-sync set")
        time.sleep(3)
        assert cramped.proc.poll() is None, cramped.log()
        assert cramped.log().count("HA: standby: ") == 1, cramped.log()
        # Its keepalives went on: still in the set, its key on a lease.
        assert f"127.0.0.1:{cramped.port} " in etcd.get(isr)
        assert etcd.lease_of("mooncake-store/haulimit/standby/"
                             f"127.0.0.1:{cramped.port}"), cramped.log()
        m.procs.kill(m.proc)
        assert cramped.proc.wait(60 * SCALE) != 0, cramped.log()
        log = cramped.log()
        assert "HA: elected leader" in log, log
        assert re.search(r"failed: out of memory after \d+ of the record's "
                         rf"{n} objects \(a master holds about 256 bytes "
                         r"per object", log), log
        roomy = HaMaster(procs, tmp_path, etcd, "roomy", ttl=1,
                         cluster="haulimit")
        wait_for(roomy.leading, timeout=60 * SCALE, what="takeover")
        assert f"restored 1 segments and {n} objects" in roomy.log()
    finally:
        cleanup_segments([member.port])


def test_standby_whose_rpc_port_is_taken_does_not_join(bed, tmp_path):
    """A master whose RPC port was taken (by anything: an outgoing
    connection's local port in a rolling restart) joined as a standby,
    following the etcd log only; elected later, it failed to serve and
    exited, leaving the pool without a leader. It exits at once now."""
    etcd, m1, m2, pool, _ = bed
    squat = socket.socket()
    squat.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squat.bind(("127.0.0.1", 0))
    squat.listen(1)
    try:
        port = squat.getsockname()[1]
        p = subprocess.run(
            [binary(*MASTER), "--enable_ha", "--etcd_endpoints", etcd.addr,
             "--cluster_id", "hareq", "--ha_lease_ttl_sec", "2",
             "--rpc_address", "127.0.0.1", "--rpc_port", str(port),
             "--metrics_host", "127.0.0.1", "--metrics_port", "0",
             "--db_path", str(tmp_path / "m3.db")],
            capture_output=True, text=True, timeout=60)
    finally:
        squat.close()
    assert p.returncode != 0, p.stderr
    assert "cannot listen on the RPC address" in p.stderr, p.stderr
    assert etcd.get(f"mooncake-store/{CLUSTER}/standby/127.0.0.1:{port}") \
        == "", "it registered as a standby"


@pytest.mark.parametrize("holder", ["leader", "follower"])
def test_etcd_rebuilt_from_nothing_never_gives_wrong_bytes(
        bed, procs, tmp_path, holder):
    """etcd's data lost (rebuilt from nothing, or restored from an older
    backup): its epochs start again low and its op log is another history
    with the same entry numbers. A master whose record had led (or
    followed) a newer history applied that log on top of its own entries,
    and once elected served keys of its history at memory the new one gave
    to other objects: wrong bytes. It copies the leader's record now, so
    every key reads back as it was put, or is gone (what the lost etcd
    alone held)."""
    etcd, m1, m2, pool, _ = bed
    view = f"mooncake-store/{CLUSTER}/master_view"
    vals = {}

    def put(key):
        f = tmp_path / key
        f.write_bytes(os.urandom(8192))
        cli(pool, "put", str(f), key, timeout=60)
        vals[key] = f.read_bytes()
    for i in range(4):
        put(f"a{i}")
    wait_logged(etcd, m2)
    # The holder of the old history: m1 (its leader) or m3 (following
    # it). c* are in its record and the old etcd only.
    old = m1
    if holder == "follower":
        old = HaMaster(procs, tmp_path, etcd, "m3")
        wait_logged(etcd, old)
    m2.procs.kill(m2.proc)
    for i in range(4):
        put(f"c{i}")
    if holder == "follower":
        wait_logged(etcd, old)
        old.procs.kill(old.proc)
    m1.procs.kill(m1.proc)
    etcd.restart(wipe=True)
    # m2 leads the new etcd from its record (a*): b* get the entry
    # numbers c* had, and likely their memory.
    m2.start()
    wait_for(m2.leading, timeout=60 * SCALE, what="m2 elected")
    for i in range(4):
        put(f"b{i}")
    old.start()
    wait_for(lambda: "HA: standby" in old.log().split("heap on")[-1],
             timeout=60 * SCALE, what="the old history's master a standby")
    wait_logged(etcd, old)
    m2.procs.kill(m2.proc)
    wait_for(old.leading, timeout=60 * SCALE, what="it elected")
    assert etcd.get(view) == f"127.0.0.1:{old.port}"
    assert "copying the leader's record" in old.log()
    got = {}
    for key, want in vals.items():
        out = tmp_path / f"{key}.out"
        p = cli(pool, "get", key, str(out), timeout=60, check=False)
        got[key] = p.returncode == 0
        if got[key]:
            assert out.read_bytes() == want, f"{key}: other bytes"
    assert all(got[f"a{i}"] and got[f"b{i}"] for i in range(4)), got


def test_client_with_another_cluster_id_is_told_which_key(bed, tmp_path):
    """A client whose MOONCAKE_CLUSTER_ID is not the masters' was told
    only "no master leads (HA): none named in etcd": now it names the key
    it read and where the cluster id comes from."""
    etcd, m1, m2, pool, _ = bed
    env = dict(os.environ, MOONCAKE_CLUSTER_ID="other",
               MC_RPC_FAILOVER_MS="1000")
    p = subprocess.run([binary("mooncakefs", "cli", "mooncake"), "--master",
                        pool.addr, "status"], capture_output=True,
                       text=True, timeout=60, env=env)
    assert p.returncode != 0, p
    assert "etcd has no mooncake-store/other/master_view" in p.stderr and \
        "MOONCAKE_CLUSTER_ID" in p.stderr, p.stderr


def test_standby_refusing_the_stream_is_logged_by_the_leader(
        bed, procs, tmp_path):
    """A standby that refuses the leader's stream (here it has a token the
    leader lacks, as midway through a token rotation) was logged only on
    its side; the leader said "streaming entries" and no more."""
    etcd, m1, m2, pool, _ = bed
    tok = tmp_path / "token"
    tok.write_text("ab" * 32 + "\n")
    os.chmod(tok, 0o600)
    m3 = HaMaster(procs, tmp_path, etcd, "m3",
                  extra=("--auth_token_file", str(tok)))
    wait_for(lambda: f"HA: standby 127.0.0.1:{m3.port} does not take the "
             "stream" in m1.log(), timeout=30 * SCALE,
             what="the leader saying the standby refuses its stream")
