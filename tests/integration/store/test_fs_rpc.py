# SPDX-License-Identifier: Apache-2.0
"""The master RPCs the filesystem builds on: paged listing by prefix and
delimiter, stat without a lease, atomic rename over an existing key while
a reader holds the old object, holds, and the change feed."""
import socket
import struct
import subprocess
import threading
import time

import mctest
from mctest import binary
from pool import MASTER, Master, Shell, eventually
from test_basic import frame

MSHELL = ("tests", "tools", "master_shell")


class MShell:
    def __init__(self, procs, tmp_path, master):
        log = open(tmp_path / "mshell.log", "ab")
        self.proc = procs.popen([binary(*MSHELL), master.addr],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=log, bufsize=0)
        log.close()
        self.c = mctest.TeClient(self.proc, tmp_path / "mshell.log")

    def cmd(self, line, timeout=60):
        return self.c.cmd(line, timeout)

    def ok(self, line, timeout=60):
        r = self.cmd(line, timeout)
        assert r.startswith("ok"), f"{line!r} -> {r!r}"
        return r[2:].strip()

    def list(self, prefix="-", delim="-", start="-", limit=0):
        out = self.ok(f"list {prefix} {delim} {start} {limit}").split()
        trunc = out[1] == "truncated=1"
        entries = []
        for e in out[2:]:
            parts = e.split(":")
            entries.append((parts[0], int(parts[1]), len(parts) > 2))
        return entries, trunc

    def watch(self, epoch, after, wait=0):
        out = self.ok(f"watch {epoch} {after} {wait}",
                      timeout=wait / 1000 + 30).split()
        kv = dict(x.split("=") for x in out[:3])
        return int(kv["epoch"]), int(kv["last"]), kv["reset"] == "1", out[3:]


def test_list_by_prefix_delimiter_and_cursor(procs, tmp_path, master,
                                            members):
    sh = Shell(procs, tmp_path, master)
    ms = MShell(procs, tmp_path, master)
    for k in ("d/a", "d/b/c", "d/b/d", "d/e", "f", "d0"):
        sh.ok(f"put {k} {len(k)} 1")
    entries, trunc = ms.list("d/", "/")
    assert not trunc
    assert entries == [("d/a", 3, False), ("d/b/", 0, True),
                       ("d/e", 3, False)]
    entries, _ = ms.list("d/b/", "/")
    assert [e[0] for e in entries] == ["d/b/c", "d/b/d"]
    # Paging with a cursor, 2 at a time, over everything.
    names, cursor = [], "-"
    while True:
        page, trunc = ms.list("-", "-", cursor, 2)
        names += [e[0] for e in page]
        if not trunc:
            break
        assert len(page) == 2
        cursor = page[-1][0]
    assert names == sorted(["d/a", "d/b/c", "d/b/d", "d/e", "f", "d0"])
    # The cursor may be a common prefix: the next page starts after it.
    page, _ = ms.list("d/", "/", "d/b/", 0)
    assert [e[0] for e in page] == ["d/e"]
    # 3000 keys list completely through pages of 1000.
    sh.ok("bput 3000 many/ 16 3")
    names, cursor = [], "-"
    while True:
        page, trunc = ms.list("many/", "-", cursor, 1000)
        names += [e[0] for e in page]
        if not trunc:
            break
        cursor = page[-1][0]
    assert len(names) == 3000 and names == sorted(names)


def test_stat_takes_no_lease(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    ms = MShell(procs, tmp_path, master)
    sh.ok("put s 1000 1")
    out = ms.ok("stat s")
    assert "size=1000" in out and "replicas=1" in out and "lease=0" in out
    ms.ok("rm s")  # no -706: stat leased nothing
    assert ms.cmd("stat s").startswith("err -704")


def test_cached_read_renews_the_lease_from_when_it_was_made(
        procs, tmp_path, master, members):
    """The location cache tells the master of the reads it served, each
    with its age (read_age_ms): the lease runs as from a get made then
    (the master's TTL), so what is left is the TTL less the age; a read
    older than a lease leases nothing (the object is still removable at
    once), and nothing shortens a lease."""
    sh = Shell(procs, tmp_path, master)
    ms = MShell(procs, tmp_path, master)
    for k in ("ra", "rb", "rc"):
        sh.ok(f"put {k} 1000 1")
    ttl = int(ms.ok("readfrom ra 0").split("=")[1])
    assert ttl >= 1000, ttl
    assert ms.ok(f"readfrom rb {ttl - 300}") == "lease=300"
    lease = int(ms.ok("stat rb").split("lease=")[1].split()[0])
    assert 0 < lease <= 300, lease
    assert ms.cmd("rm rb").startswith("err -706")
    # Older than a lease: nothing granted, removable.
    assert ms.ok(f"readfrom rc {ttl}") == "lease=0"
    assert "lease=0" in ms.ok("stat rc")
    ms.ok("rm rc")
    # An old read does not shorten the lease a fresh one gave.
    assert ms.ok(f"readfrom ra {ttl - 100}") == "lease=100"
    lease = int(ms.ok("stat ra").split("lease=")[1].split()[0])
    assert lease > 500, lease
    assert ms.cmd("readfrom gone 0").startswith("err -704")
    eventually(lambda: ms.cmd("rm rb") == "ok", timeout=10,
               what="rb removable once its 300 ms lease ended")


def test_read_ages_that_do_not_fit_are_refused(procs, tmp_path, master,
                                              members):
    """Hand-built BatchGetReplicaList calls (our clients never send these):
    read_age_ms (field 7) must come one per key and neither with hold nor
    with touch; otherwise the whole call is -600 and nothing is leased."""
    sh = Shell(procs, tmp_path, master)
    ms = MShell(procs, tmp_path, master)
    sh.ok("put ag 1000 1")
    keys = b"\x12\x02ag" + b"\x12\x02ag"  # keys: ag, ag

    def call(body):
        s = socket.create_connection(("127.0.0.1", master.rpc_port),
                                     timeout=10)
        try:
            s.sendall(frame(21, body))
            hdr = s.recv(24)
            (n,) = struct.unpack("<I", hdr[8:12])
            resp = b""
            while len(resp) < n:
                resp += s.recv(n - len(resp))
            return resp
        finally:
            s.close()

    refused = b"\x08" + bytes([0xa8, 0xfb] + [0xff] * 7 + [0x01])
    one_age = b"\x3a\x01\x05"  # read_age_ms: [5], packed
    two_ages = b"\x3a\x02\x05\x05"
    assert call(keys + one_age) == refused  # 2 keys, 1 age
    assert call(keys + two_ages + b"\x20\x01") == refused  # with hold
    assert call(keys + two_ages + b"\x30\x01") == refused  # with touch
    assert "lease=0" in ms.ok("stat ag")
    ms.ok("rm ag")  # nothing leased it
    sh.ok("put ag 1000 1")
    ok = call(keys + two_ages)
    assert not ok.startswith(b"\x08") and ok.count(b"\x12") >= 2, ok
    assert ms.cmd("rm ag").startswith("err -706")  # leased now


def test_rename_over_a_held_object(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    ms = MShell(procs, tmp_path, master)
    sh.ok("put new 500000 1")
    sh.ok("put old 300000 2")
    hold = ms.ok("hold old")
    before = master.metric("master_allocated_bytes")
    ms.ok("rename new old")
    sh.ok("check old 500000 1")
    assert sh.exist(["new"]) == [0]
    # The replaced object's memory stays while its reader holds it.
    assert master.metric("master_allocated_bytes") == before
    ms.ok(f"renew {hold}")
    ms.ok(f"release {hold}")
    eventually(lambda: master.metric("master_allocated_bytes")
               <= before - 300000, what="old memory released")
    assert ms.cmd(f"renew {hold}").startswith("err -704")
    sh.ok("put other 10 3")
    assert ms.cmd("rename other old noreplace").startswith("err -705")
    assert ms.cmd("rename nope x").startswith("err -704")


def test_change_feed(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    ms = MShell(procs, tmp_path, master)
    epoch, last, reset, _ = ms.watch(0, 0)
    assert not reset and epoch
    sh.ok("put x 10 1")
    ms.ok("rename x y")
    ms.ok("rm y")
    e2, last2, reset, events = ms.watch(epoch, last)
    assert e2 == epoch and not reset
    assert events == ["put:x", "rename:x>y", "remove:y"]
    assert last2 == last + 3
    # A cursor from another epoch (a master restart) must reset.
    _, _, reset, _ = ms.watch(epoch + 1, 5)
    assert reset
    # Long poll: the answer comes when the event happens, not at timeout.
    done = {}

    def waiter():
        t0 = time.monotonic()
        done["r"] = ms.watch(epoch, last2, 10000)
        done["t"] = time.monotonic() - t0

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.3)
    sh.ok("put z 10 1")
    t.join(30)
    assert done["r"][3] == ["put:z"]
    assert done["t"] < 5


def test_watch_wait_ignores_a_stepped_wall_clock(procs, tmp_path,
                                                 monkeypatch):
    """A long poll (Watch with wait_ms) waited on a condition variable of
    the wall clock: with the clock stepped back an hour after the
    deadline was taken (here: the master's wall clock an hour ahead of
    the kernel's, tests/tools/clock_shift.c), a 1 s poll waited an hour,
    its connection's thread with it. It ends by the monotonic clock now."""
    monkeypatch.setenv("LD_PRELOAD", mctest.preload_env(
        binary(*mctest.CLOCK_SHIFT), binary(*MASTER)))
    monkeypatch.setenv("MC_TEST_REALTIME_SHIFT_S", "3600")
    m = Master(procs, tmp_path)
    monkeypatch.delenv("LD_PRELOAD")
    ms = MShell(procs, tmp_path, m)
    epoch, last, _, _ = ms.watch(0, 0)
    # nothing happens: the poll ends when its 1 s is up (the shell gives
    # it 31 s), empty, not after an hour
    e, l2, reset, events = ms.watch(epoch, last, 1000)
    assert (e, l2, reset, events) == (epoch, last, False, [])

