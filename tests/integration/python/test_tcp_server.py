# SPDX-License-Identifier: Apache-2.0
"""The TCP server's reactor (docs/design.md, "The TCP server's reactor"):
idle connections wait in one thread that answers small READs itself. The
cases are the ones a reactor gets wrong: a peer that asks for far more
than the socket holds and does not read (the reactor must not block on
it, others are served meanwhile, and every answer arrives whole and in
order once it reads), small gets from several clients at once answered
by the reactor with the right bytes, and MC_TCP_REACTOR=0."""
import json
import socket
import struct
import threading
import time
import urllib.request

import numpy as np

from pool import Master, eventually

BUF = 16 << 20
OBJ = 64 << 10


def addr(a):
    return a.ctypes.data


def holder(stores, master, monkeypatch):
    """A client that holds the pool's only segment (every object is in its
    memory), reachable over TCP only."""
    monkeypatch.setenv("MC_FORCE_TCP", "1")
    s = stores()
    assert s.setup("127.0.0.1", master.metadata, 64 << 20, BUF, "tcp", "",
                   master.addr) == 0
    eventually(lambda: len(master.segments()) == 1, what="segment mounted")
    return s


def reader(stores, master):
    s = stores()
    assert s.setup("127.0.0.1", master.metadata, 0, BUF, "tcp", "",
                   master.addr) == 0
    return s


def pattern(i, size=OBJ):
    return (np.arange(size, dtype=np.uint32) * 2654435761 + i).astype(
        np.uint8)


def where(master, key):
    """(data port, address) of key's replica."""
    st, text = master.http(f"/query_key?key={key}")
    assert st == 200, text
    rep = json.loads(text)["data"][0]
    url = (f"{master.metadata}?key=mooncake/ram/"
           f"{rep['transport_endpoint_']}")
    with urllib.request.urlopen(url, timeout=10) as r:
        desc = json.loads(r.read())
    return desc["tcp_data_port"], rep["buffer_address_"]


def recv_n(s, n):
    got = bytearray()
    while len(got) < n:
        b = s.recv(min(n - len(got), 1 << 20))
        assert b, f"closed after {len(got)} of {n} bytes"
        got += b
    return bytes(got)


def test_a_peer_that_stops_reading_holds_up_no_one(master, stores,
                                                   monkeypatch):
    """A raw connection asks for 2,000 reads of 64 KiB (125 MiB, far more
    than the sockets buffer) and reads nothing for 2 s: meanwhile other
    clients' gets through the same server work; then every answer arrives,
    status and bytes, in order. The reactor answered reads (its counter)."""
    s = holder(stores, master, monkeypatch)
    src = pattern(7)
    assert s.put("tcp/k", src.tobytes()) == 0
    port, address = where(master, "tcp/k")
    n = 2000
    raw = socket.create_connection(("127.0.0.1", port), timeout=60)
    time.sleep(0.3)  # its thread is parked: the reactor sees the requests
    hdr = struct.pack("<QQB7x", OBJ, address, 0 | 0x80)
    raw.sendall(hdr * n)
    # Others are served while that connection's answers wait.
    monkeypatch.setenv("MC_FORCE_TCP", "1")
    r = reader(stores, master)
    r.set_timeouts(transfer_ms=5000)
    dst = np.zeros(OBJ, np.uint8)
    assert r.register_buffer(addr(dst), dst.nbytes) == 0
    t0 = time.monotonic()
    for i in range(50):
        dst[:] = 0
        assert r.get_into("tcp/k", addr(dst), OBJ) == OBJ, i
        assert np.array_equal(dst, src)
        time.sleep(0.005)  # parked between gets: the reactor serves them
    time.sleep(max(0.0, 2.0 - (time.monotonic() - t0)))
    ok = struct.pack("<Q", 0x4D435456 << 32)
    for i in range(n):
        got = recv_n(raw, 8 + OBJ)
        assert got[:8] == ok, (i, got[:8])
        assert got[8:] == src.tobytes(), f"answer {i} is not the object"
    raw.close()
    assert s.transfer_stats("tcp")["reactor_requests"] > 0


def test_small_gets_from_several_clients(master, stores, monkeypatch):
    """Four clients, each in its own thread, get 4 KiB objects at once
    from one holder: every answer is the object asked for (the reactor
    answers several connections per wake-up, never one's bytes to
    another), and most go through the reactor."""
    s = holder(stores, master, monkeypatch)
    size = 4096
    keys = [f"tcp/small/{i}" for i in range(16)]
    for i, k in enumerate(keys):
        assert s.put(k, pattern(i, size).tobytes()) == 0
    before = s.transfer_stats("tcp")["reactor_requests"]
    readers = [reader(stores, master) for _ in range(4)]
    errors = []

    def run(r, j):
        dst = np.zeros(size, np.uint8)
        assert r.register_buffer(addr(dst), dst.nbytes) == 0
        for n in range(300):
            i = (n + j) % len(keys)
            dst[:] = 0
            if r.get_into(keys[i], addr(dst), size) != size or \
                    not np.array_equal(dst, pattern(i, size)):
                errors.append((j, n, i))
                return
    ts = [threading.Thread(target=run, args=(r, j))
          for j, r in enumerate(readers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors, errors[:5]
    served = s.transfer_stats("tcp")["reactor_requests"] - before
    assert served > 0, served


def test_reactor_off(procs, tmp_path, stores, monkeypatch):
    """MC_TCP_REACTOR=0: connections wait on their own; gets work and the
    reactor answers nothing."""
    monkeypatch.setenv("MC_TCP_REACTOR", "0")
    m = Master(procs, tmp_path)
    s = holder(stores, m, monkeypatch)
    src = pattern(3, 4096)
    assert s.put("tcp/off", src.tobytes()) == 0
    r = reader(stores, m)
    dst = np.zeros(4096, np.uint8)
    assert r.register_buffer(addr(dst), dst.nbytes) == 0
    for _ in range(20):
        dst[:] = 0
        assert r.get_into("tcp/off", addr(dst), 4096) == 4096
        assert np.array_equal(dst, src)
    assert s.transfer_stats("tcp")["reactor_requests"] == 0
