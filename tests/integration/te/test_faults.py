# SPDX-License-Identifier: Apache-2.0
"""The transfer engine under faults (over tcp unless a test says shm):
peers killed or stopped in the middle of batches, the metadata service
gone or restarted empty, a dead peer's name taken over, and a live
peer's name refused.
tests/tools/te_client is the initiator, driven one command at a time
between the faults. Timing is only ever asserted as an upper bound on how
long a failure takes to surface."""
import glob
import json
import signal
import subprocess
import urllib.parse

import pytest

from mctest import (SCALE, TE_CLIENT, TE_PEER, binary, request, te_env,
                    wait_for)

MiB = 1 << 20


def client(procs, tmp_path, metadata, *args, transport="tcp"):
    return procs.start_te_client(tmp_path, metadata, "--transport",
                                 transport, *args)


def rpc_meta(metad, name):
    """The rpc_meta entry of a segment name as "ip:port", or None."""
    key = urllib.parse.quote(f"mooncake/rpc_meta/{name}", safe="")
    st, body, _ = request(metad.port, "GET", f"/metadata?key={key}")
    if st != 200:
        return None
    v = json.loads(body)
    return f"{v['ip_or_host_name']}:{v['rpc_port']}"


def read_ok(c, batch, peer, length, count, offset=0):
    """A batch of reads that must all complete with the peer's pattern."""
    st, _ = c.transfer(batch, peer.name, "read", peer.addr + offset, length,
                       count)
    assert st["completed"] == str(count), st
    assert c.ok(f"check {batch} {peer.seed} {peer.addr}")["checked"] == \
        str(count)
    assert c.ok(f"destroy {batch}")["rc"] == "0"


def test_peer_killed_mid_batch(procs, tmp_path, metad):
    p1 = procs.start_te_peer(tmp_path, metad.url, name="127.0.0.1:31001",
                             size=128 * MiB, seed=1)
    p2 = procs.start_te_peer(tmp_path, metad.url, name="127.0.0.1:31002",
                             size=128 * MiB, seed=2)
    p3 = procs.start_te_peer(tmp_path, metad.url, name="127.0.0.1:31003",
                             size=128 * MiB, seed=3)
    c = client(procs, tmp_path, metad.url, "--timeout_ms", "30000",
               "--size", str(128 * MiB))
    for p in (p1, p2, p3):
        c.ok(f"open {p.name}")
        read_ok(c, f"warm{p.seed}", p, MiB, 4)

    # Stopped, then killed with the whole batch in flight: every request
    # fails on the broken connections, long before the 30 s timeout.
    p1.pause()
    c.ok(f"submit a {p1.name} read {p1.addr} {MiB} 128")
    assert c.ok("status a")["waiting"] != "0"
    p1.kill()
    w = c.ok(f"wait a {int(20000 * SCALE)}", timeout=60)
    st = c.ok("status a")
    assert w["rc"] == "0" and st["waiting"] == "0", (w, st)
    assert st["failed"] == "128" and st["timeout"] == "0", st
    assert c.ok("destroy a")["rc"] == "0"

    # The same for WRITEs (a peer gone mid-send must not SIGPIPE us).
    p4 = procs.start_te_peer(tmp_path, metad.url, name="127.0.0.1:31004",
                             size=128 * MiB, seed=4)
    c.ok(f"open {p4.name}")
    read_ok(c, "warm4", p4, MiB, 4)
    p4.pause()
    c.ok(f"submit w {p4.name} write {p4.addr} {MiB} 128")
    p4.kill()
    w = c.ok(f"wait w {int(20000 * SCALE)}", timeout=60)
    st = c.ok("status w")
    assert w["rc"] == "0" and st["waiting"] == "0", (w, st)
    assert st["timeout"] == "0" and st["completed"] != "128", st
    assert c.ok("destroy w")["rc"] == "0"

    # Killed while data flows: whatever completed is correct, the rest
    # FAILED, nothing hangs or times out.
    c.ok(f"submit b {p3.name} read {p3.addr} {MiB} 128")
    p3.kill()
    w = c.ok(f"wait b {int(20000 * SCALE)}", timeout=60)
    st = c.ok("status b")
    assert w["rc"] == "0" and st["waiting"] == "0", (w, st)
    assert st["timeout"] == "0", st
    assert int(st["completed"]) + int(st["failed"]) == 128, st
    assert c.ok(f"check b {p3.seed} {p3.addr}")["checked"] == st["completed"]
    assert c.ok("destroy b")["rc"] == "0"

    # The engine still serves live peers.
    read_ok(c, "c", p2, MiB, 64, offset=17)
    assert c.quit() == 0
    assert p2.stop() == 0, p2.log()


@pytest.mark.parametrize("mode", ["metad", "p2p"])
def test_peer_gone_for_good(procs, tmp_path, mode):
    """A peer that is gone and cannot be resolved again (stopped cleanly,
    so its metadata is removed; or, with P2PHANDSHAKE, nothing answers at
    its address): every later request to it ends FAILED, again and again,
    and the initiator stays up."""
    url = "P2PHANDSHAKE" if mode == "p2p" else procs.start_metad(tmp_path).url
    p = procs.start_te_peer(tmp_path, url, name="127.0.0.1:31061", seed=61)
    c = client(procs, tmp_path, url)
    c.ok(f"open {p.name}")
    read_ok(c, "a", p, 4096, 2)
    if mode == "p2p":
        p.kill()
    else:
        assert p.stop() == 0, p.log()
    for i in range(3):
        st, _ = c.transfer(f"b{i}", p.name, "read", p.addr, 4096, 2)
        assert st["failed"] == "2" and st["waiting"] == "0", st
        assert c.ok(f"destroy b{i}")["rc"] == "0"
    r = c.cmd(f"open {p.name}")
    assert r.startswith("ok already open") or r.startswith("error open"), r
    assert c.quit() == 0


def test_stopped_peer_times_out(procs, tmp_path, metad):
    p1 = procs.start_te_peer(tmp_path, metad.url, name="127.0.0.1:31011",
                             seed=11)
    p2 = procs.start_te_peer(tmp_path, metad.url, name="127.0.0.1:31012",
                             seed=12)
    c = client(procs, tmp_path, metad.url, "--timeout_ms", "2000")
    try:
        for p in (p1, p2):
            c.ok(f"open {p.name}")
            read_ok(c, f"warm{p.seed}", p, MiB, 4)
        p1.pause()
        c.ok(f"submit a {p1.name} read {p1.addr} {MiB} 4")
        # The stopped peer does not hold up another one.
        st, w = c.transfer("b", p2.name, "read", p2.addr + 5, MiB, 16)
        assert st["completed"] == "16", st
        assert c.ok(f"check b {p2.seed} {p2.addr}")["checked"] == "16"
        w = c.ok(f"wait a {int(15000 * SCALE)}", timeout=60)
        st = c.ok("status a")
        assert w["rc"] == "0", w
        assert st["timeout"] == "4" and st["waiting"] == "0", st
        # 2 s timeout + 3 s margin.
        assert float(w["since_submit_ms"]) <= (2000 + 3000) * SCALE, w
        assert c.ok("destroy a")["rc"] == "0"
        assert c.ok("destroy b")["rc"] == "0"
    finally:
        p1.signal(signal.SIGCONT)
    # Woken up, the peer serves again (its segment is re-resolved if the
    # engine dropped it) and stops cleanly.
    for attempt in range(3):
        st, _ = c.transfer(f"r{attempt}", p1.name, "read", p1.addr, MiB, 2)
        if st["completed"] == "2":
            break
    assert st["completed"] == "2", st
    assert c.quit() == 0
    assert p1.stop() == 0, p1.log()
    assert p2.stop() == 0, p2.log()


def test_metadata_service_down(procs, tmp_path):
    d = procs.start_metad(tmp_path)
    url = d.url
    p = procs.start_te_peer(tmp_path, url, name="127.0.0.1:31051", seed=51)
    c = client(procs, tmp_path, url)
    c.ok(f"open {p.name}")
    # An unknown segment fails with -ENOENT.
    r = c.cmd("open 127.0.0.1:39999")
    assert r.startswith("error open -2 ENOENT"), r
    assert d.stop() == 0
    # With the service gone, lookups fail naming its URL...
    r = c.cmd("open 127.0.0.1:39998")
    assert r.startswith("error open") and url in r, r
    # ... while a segment resolved before still transfers.
    read_ok(c, "a", p, MiB, 4, offset=1)
    assert c.quit() == 0
    assert p.stop() == 0, p.log()
    # Creating an engine fails and names the URL.
    for tool in (TE_CLIENT, TE_PEER):
        r = subprocess.run([binary(*tool), "--metadata", url, "--name",
                            "127.0.0.1:39997"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60 * SCALE,
                           env=te_env())
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert url in r.stdout + r.stderr, (r.stdout, r.stderr)


def test_unknown_segment_is_named(procs, tmp_path, metad):
    """te_segment_open of a name nobody registered says which segment is
    unknown (not only the escaped key of a metadata URL)."""
    c = client(procs, tmp_path, metad.url)
    r = c.cmd("open 127.0.0.1:39999")
    assert r.startswith("error open -2 ENOENT"), r
    assert "127.0.0.1:39999" in r, r
    assert c.quit() == 0


@pytest.mark.parametrize("store,transport", [("memory", "tcp"),
                                             ("sqlite", "tcp"),
                                             ("memory", "shm")])
def test_killed_peer_restarts_under_same_name(procs, tmp_path, store,
                                              transport):
    args = [] if store == "memory" else ["--store", f"sqlite:{tmp_path}/m.db"]
    shm = transport == "shm"
    d = procs.start_metad(tmp_path, *args)
    name = "127.0.0.1:31021"
    p1 = procs.start_te_peer(tmp_path, d.url, name=name, seed=21, shm=shm)
    assert rpc_meta(d, name) == p1.rpc
    c = client(procs, tmp_path, d.url, transport=transport)
    c.ok(f"open {name}")
    read_ok(c, "a", p1, 65536, 4, offset=3)
    p1.kill()
    if store == "sqlite":
        # The dead peer's entries survive a restart of a durable service.
        assert d.stop() == 0
        d = procs.start_metad(tmp_path, *args, port=d.port)
    # The dead peer's entry is still there (no clean unpublish), but
    # nothing answers at its RPC address: the name is taken over.
    assert rpc_meta(d, name) == p1.rpc
    p2 = procs.start_te_peer(tmp_path, d.url, name=name, seed=22, shm=shm,
                             env={"MC_LOG_LEVEL": "debug"})
    assert rpc_meta(d, name) == p2.rpc
    if p2.rpc != p1.rpc:  # else the same bytes: nothing to take over
        assert "taking over segment name" in p2.log(), p2.log()
    # The segment opened before still names the dead peer: the first use
    # may fail against it (shm may even still reach its memory), and a
    # retry reaches the new one.
    st, _ = c.transfer("b", name, "read", p1.addr, 65536, 1)
    assert st["waiting"] == "0" and st["timeout"] == "0", st
    assert c.ok("destroy b")["rc"] == "0"
    for attempt in range(3):
        st, _ = c.transfer(f"r{attempt}", name, "read", p2.addr + 9, 65536,
                           4)
        if st["completed"] == "4":
            break
    assert st["completed"] == "4", st
    assert c.ok(f"check r{attempt} {p2.seed} {p2.addr}")["checked"] == "4"
    # Re-opening the segment works as well.
    c.ok(f"close {name}")
    c.ok(f"open {name}")
    read_ok(c, "c", p2, MiB, 2, offset=1)
    assert c.quit() == 0
    assert p2.stop() == 0, p2.log()


def test_metadata_service_restarted_empty(procs, tmp_path, metad):
    """mooncake_metad keeps its entries in memory by default (as upstream):
    restarted, it has none, and peers could no longer find an engine that
    published before. The engine's keeper finds its rpc_meta entry gone
    and publishes both entries again; a new client then opens and reads
    it."""
    name = "127.0.0.1:31041"
    p1 = procs.start_te_peer(tmp_path, metad.url, name=name, seed=41,
                             env={"MC_TE_META_CHECK_MS": "200"})
    assert rpc_meta(metad, name)
    procs.kill(metad.proc)
    m2 = procs.start_metad(tmp_path, name="metad2", port=metad.port)
    assert m2.port == metad.port
    wait_for(lambda: rpc_meta(m2, name), timeout=10,
             what="the peer's entries published again")
    c = client(procs, tmp_path, m2.url)
    c.ok(f"open {name}")
    read_ok(c, "a", p1, MiB, 4)
    assert c.quit() == 0
    assert "publishing them again" in p1.log(), p1.log()
    assert p1.stop() == 0, p1.log()


def test_live_name_is_refused(procs, tmp_path, metad):
    name = "127.0.0.1:31031"
    p1 = procs.start_te_peer(tmp_path, metad.url, name=name, seed=31)
    r = subprocess.run([binary(*TE_PEER), "--metadata", metad.url, "--name",
                        name], capture_output=True, text=True,
                       timeout=60 * SCALE, env=te_env())
    assert r.returncode == 1, r.stderr
    assert "EMETACONFLICT" in r.stderr, r.stderr
    assert "in use by a live engine" in r.stderr, r.stderr
    # The refused engine left the live one's entries alone.
    c = client(procs, tmp_path, metad.url)
    c.ok(f"open {name}")
    read_ok(c, "a", p1, MiB, 4)
    assert c.quit() == 0
    assert p1.stop() == 0, p1.log()


def test_killed_shm_peer_fails(procs, tmp_path, metad):
    """A same-host peer's memory outlives it in our mapping; the owner's
    flock tells us it died, so requests FAIL instead of completing into
    memory nobody owns."""
    p = procs.start_te_peer(tmp_path, metad.url, name="127.0.0.1:31101",
                            size=16 * MiB, shm=True, seed=11)
    c = client(procs, tmp_path, metad.url, "--timeout_ms", "5000",
               "--size", str(16 * MiB), transport="shm")
    c.ok(f"open {p.name}")
    read_ok(c, "alive", p, MiB, 4)
    p.kill()
    c.ok(f"submit dead {p.name} read {p.addr} {MiB} 4")
    w = c.ok(f"wait dead {int(10000 * SCALE)}", timeout=30)
    st = c.ok("status dead")
    assert w["rc"] == "0" and st["failed"] == "4", st
    assert c.ok("destroy dead")["rc"] == "0"
    assert c.quit() == 0
    # Its memory was a memfd: nothing of it is left in /dev/shm, and a
    # live peer's is not there either.
    assert not glob.glob(f"/dev/shm/mooncake.anon.{p.proc.pid}.*")
    live = procs.start_te_peer(tmp_path, metad.url, name="127.0.0.1:31103",
                               size=MiB, shm=True)
    assert not glob.glob(f"/dev/shm/mooncake.anon.{live.proc.pid}.*")


def test_in_call_stopped_peer_times_out(procs, tmp_path, metad):
    """te_batch_transfer on the calling thread (tcp: an idle lane) against
    a stopped peer: the call returns once the engine's timeout ended every
    request (TIMEOUT, none left waiting); woken up, the peer serves the
    next call."""
    p = procs.start_te_peer(tmp_path, metad.url, name="127.0.0.1:31031",
                            seed=31)
    c = client(procs, tmp_path, metad.url, "--timeout_ms", "2000")
    c.ok(f"open {p.name}")
    for i in range(3):  # connects the lanes, then runs on them
        st, _ = c.transfer(f"w{i}", p.name, "read", p.addr + i, 4096, 8,
                           in_call=True)
        assert st["completed"] == "8", st
        assert c.ok(f"check w{i} {p.seed} {p.addr}")["checked"] == "8"
    assert int(c.ok("counters tcp")["caller_requests"]) > 0
    p.pause()
    try:
        r = c.ok(f"run a {p.name} read {p.addr} 4096 8", timeout=60)
        st = c.ok("status a")
        assert st["timeout"] == "8" and st["waiting"] == "0", st
        # 2 s timeout + 3 s margin.
        assert float(r["since_submit_ms"]) <= (2000 + 3000) * SCALE, r
        assert c.ok("destroy a")["rc"] == "0"
    finally:
        p.signal(signal.SIGCONT)
    for attempt in range(3):
        st, _ = c.transfer(f"r{attempt}", p.name, "read", p.addr + 7, 4096,
                           8, in_call=True)
        if st["completed"] == "8":
            break
    assert st["completed"] == "8", st
    assert c.ok(f"check r{attempt} {p.seed} {p.addr}")["checked"] == "8"
    assert c.quit() == 0
    assert p.stop() == 0, p.log()


def test_in_call_on_a_dead_connection(procs, tmp_path, metad):
    """The lane a te_batch_transfer caller takes may be dead (its peer was
    killed and restarted under the same name): the call fails or is
    retried by the lanes' threads, never hangs or returns wrong bytes,
    and the next call reaches the new peer with its bytes. Writes too."""
    name = "127.0.0.1:31041"
    p1 = procs.start_te_peer(tmp_path, metad.url, name=name, seed=41)
    c = client(procs, tmp_path, metad.url)
    c.ok(f"open {name}")
    for i in range(2):
        st, _ = c.transfer(f"w{i}", name, "read", p1.addr, 65536, 4,
                           in_call=True)
        assert st["completed"] == "4", st
    p1.kill()
    p2 = procs.start_te_peer(tmp_path, metad.url, name=name, seed=42)
    st, _ = c.transfer("b", name, "read", p1.addr, 65536, 4, in_call=True)
    assert st["waiting"] == "0" and st["timeout"] == "0", st
    for attempt in range(3):
        st, _ = c.transfer(f"r{attempt}", name, "read", p2.addr + 3, 65536,
                           4, in_call=True)
        if st["completed"] == "4":
            break
    assert st["completed"] == "4", st
    assert c.ok(f"check r{attempt} {p2.seed} {p2.addr}")["checked"] == "4"
    st, _ = c.transfer("wr", name, "write", p2.addr, 4096, 16, in_call=True)
    assert st["completed"] == "16", st
    assert c.quit() == 0
    assert p2.stop() == 0, p2.log()
