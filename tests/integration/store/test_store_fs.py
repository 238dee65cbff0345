# SPDX-License-Identifier: Apache-2.0
"""The store client's filesystem extensions (include/mooncake/store_fs.h)
through store_shell: ranged reads of open objects (byte-exact, through
registered and staging memory, from several threads, failing over to the
next replica), holds that keep an open object readable after it is
removed or renamed over and that the library renews, writers at offsets
(reverse order, threads, holes read as zeros, abort, failed writes),
empty objects, stat, listing, rename, pool figures and the change feed."""
import subprocess
import threading
import time
import zlib

import pytest

from pool import Master, Member, Shell, cleanup_segments, eventually

MiB = 1 << 20


def kv(reply):
    """'a=1 b=2 rest...' -> {'a': '1', 'b': '2'}."""
    return dict(x.split("=", 1) for x in reply.split() if "=" in x)


def allocated(master):
    return master.metric("master_allocated_bytes")


@pytest.mark.parametrize("chunk", [MiB, 4096])
def test_ranged_reads_are_byte_exact(procs, tmp_path, master, members,
                                     chunk):
    sh = Shell(procs, tmp_path, master)
    for i, size in enumerate([0, 1, 4095, MiB + 7, 20 * MiB]):
        key = f"r/{size}"
        if size:
            sh.ok(f"put {key} {size} {i + 1}")
        else:
            sh.ok(f"wwrite {key} 0 4096 {i + 1}")
        assert sh.ok(f"oread {key} {chunk} {i + 1}") == str(size)
    # Through the staging buffer (unregistered memory), and from several
    # threads reading one handle at once.
    assert sh.ok(f"oread r/{MiB + 7} {chunk} 4 unreg") == str(MiB + 7)
    assert sh.ok(f"oread r/{20 * MiB} {chunk} 5 threads=4",
                 timeout=120) == str(20 * MiB)
    # A wrong seed is noticed (the check is real).
    assert sh.cmd(f"oread r/4095 {chunk} 9").startswith("mismatch")
    # Single reads: past the end is cut short, at the end is empty.
    h = sh.ok("oopen r/4095").split()[0]
    assert sh.ok(f"oread1 {h} 4000 4096").split()[0] == "95"
    assert sh.ok(f"oread1 {h} 4095 10").split()[0] == "0"
    assert sh.ok(f"oread1 {h} 99999 10").split()[0] == "0"
    sh.ok(f"oclose {h}")
    assert sh.code("oread nope 4096 1") == -704
    sh.close()


def test_open_object_survives_remove_and_rename(procs, tmp_path, master,
                                                members):
    sh = Shell(procs, tmp_path, master)
    other = Shell(procs, tmp_path, master)
    size = 3 * MiB + 11
    sh.ok(f"put gone {size} 1")
    h, osize = sh.ok("oopen gone").split()[:2]
    assert int(osize) == size
    assert kv(other.ok("fstat gone"))["holds"] == "1"
    # Removal needs force while held; the reader keeps reading.
    assert other.code("rm gone") == -706
    other.ok("rm gone force")
    assert other.code("fstat gone") == -704
    # New objects must not take the held memory.
    other.ok(f"put fill1 {size} 7")
    other.ok(f"put fill2 {size} 8")
    assert sh.ok(f"oreadh {h} {MiB} 1") == str(size)
    # Closing releases the hold: the removed object's memory is freed.
    held = allocated(master)
    sh.ok(f"oclose {h}")
    eventually(lambda: allocated(master) <= held - size,
               what="removed object's memory released")

    # Renamed over: the open handle still reads the replaced object.
    sh.ok("put target 500000 2")
    sh.ok("put newer 700000 3")
    h = sh.ok("oopen target").split()[0]
    other.ok("ren newer target")
    sh.ok("check target 700000 3")
    assert other.code("fstat newer") == -704
    assert sh.ok(f"oreadh {h} 4096 2") == "500000"
    h2 = sh.ok("oopen target").split()[0]
    assert sh.ok(f"oreadh {h2} 4096 3") == "700000"
    sh.ok(f"oclose {h}")
    sh.ok(f"oclose {h2}")
    eventually(lambda: kv(sh.ok("fstat target"))["holds"] == "0",
               what="holds released")
    # Renaming the held object itself: the hold follows it.
    h = sh.ok("oopen target").split()[0]
    other.ok("ren target moved")
    assert kv(other.ok("fstat moved"))["holds"] == "1"
    assert sh.ok(f"oreadh {h} {MiB} 3") == "700000"
    sh.ok(f"oclose {h}")
    assert kv(other.ok("fstat moved"))["holds"] == "0"
    sh.close()
    other.close()


def test_holds_are_renewed_and_released_at_close(procs, tmp_path):
    """A lease TTL of 400 ms makes the master drop a hold after 1.2 s
    without renewal; the library renews every lease TTL."""
    m = Master(procs, tmp_path, "--default_kv_lease_ttl", "400",
               name="shortlease")
    mem = Member(procs, tmp_path, m)
    try:
        sh = Shell(procs, tmp_path, m)
        other = Shell(procs, tmp_path, m)
        sh.ok(f"put k {2 * MiB} 5")
        h = sh.ok("oopen k").split()[0]
        time.sleep(4)
        assert kv(other.ok("fstat k"))["holds"] == "1"
        other.ok("rm k force")
        # Reuse memory aggressively: the held bytes must stay intact.
        for i in range(6):
            other.ok(f"put f{i} {2 * MiB} {100 + i}")
        time.sleep(2)
        assert sh.ok(f"oreadh {h} {MiB} 5") == str(2 * MiB)
        sh.ok(f"oclose {h}")
        # Handles come and go while the renewer runs.
        sh.ok("put k3 5000 7")
        for _ in range(4):
            hs = [sh.ok("oopen k3").split()[0] for _ in range(30)]
            assert kv(other.ok("fstat k3"))["holds"] == "30"
            time.sleep(0.5)
            for x in hs[::2] + hs[1::2]:
                sh.ok(f"oclose {x}")
        assert kv(other.ok("fstat k3"))["holds"] == "0"
        # Objects left open when the store closes lose their holds then,
        # and their handles may still be closed afterwards.
        sh.ok("put k2 1000 6")
        h = sh.ok("oopen k2").split()[0]
        assert kv(other.ok("fstat k2"))["holds"] == "1"
        sh.ok("close")
        assert kv(other.ok("fstat k2"))["holds"] == "0"
        assert sh.code(f"oreadh {h} 4096 6 unreg") == -1010
        sh.ok(f"oclose {h}")
        sh.close()
        other.close()
    finally:
        procs.cleanup()
        cleanup_segments([mem.port])


def test_writer_reverse_order_threads_and_holes(procs, tmp_path, master,
                                                members):
    sh = Shell(procs, tmp_path, master)
    size = 5 * MiB + 3
    sh.ok(f"wwrite w/1 {size} {MiB} 11")
    sh.ok(f"check w/1 {size} 11")
    assert sh.ok("oread w/1 4096 11") == str(size)
    # Two replicas written by four threads at once, from any memory.
    sh.ok(f"wwrite w/2 {size} 65536 12 2 threads=4")
    assert int(sh.ok("desc w/2").split()[0]) == 2
    sh.ok(f"check w/2 {size} 12")
    sh.ok(f"wwrite w/3 {MiB + 1} 4096 13 unreg threads=3")
    sh.ok(f"check w/3 {MiB + 1} 13")
    # A key that exists (or is being written) is -705.
    assert sh.code(f"wwrite w/1 {size} {MiB} 11") == -705
    h = sh.ok("wopen w/5 1000")
    assert sh.code("wopen w/5 1000") == -705
    # Writes past the end are refused and do not spoil the put.
    assert sh.code(f"wpiece {h} 900 200 15") == -600
    sh.ok(f"wpiece {h} 0 1000 15")
    sh.ok(f"wclose {h} commit")
    sh.ok("check w/5 1000 15")
    sh.close()


def test_bytes_never_written_read_as_zeros(procs, tmp_path, master):
    """One segment, so the new object lands where the old one was."""
    only = Member(procs, tmp_path, master)
    try:
        sh = Shell(procs, tmp_path, master)
        eventually(lambda: len(master.segments()) == 1, what="segment")
        size = 5 * MiB + 3
        sh.ok(f"put junk {size} 99")
        where = sh.ok("rtext junk")
        sh.ok("rm junk")
        sh.ok(f"wwrite w/4 {size} 300000 14 sparse")
        assert sh.ok("rtext w/4") == where  # the same memory
        assert sh.ok("oread w/4 300000 14 sparse") == str(size)
        # Nothing written at all: all zeros.
        h = sh.ok(f"wopen w/5 {size}")
        sh.ok(f"wclose {h} commit")
        assert sh.ok("get w/5") == f"{size} {zlib.crc32(bytes(size)):08x}"
        sh.close()
    finally:
        procs.cleanup()
        cleanup_segments([only.port])


def test_aborted_writer_frees_its_memory(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    before = allocated(master)
    sh.ok(f"wabort a/1 {8 * MiB}")
    assert sh.exist(["a/1"]) == [0]
    assert allocated(master) == before
    # Half written, then aborted.
    h = sh.ok(f"wopen a/2 {4 * MiB} 2")
    assert allocated(master) >= before + 8 * MiB
    sh.ok(f"wpiece {h} 0 {MiB} 3")
    sh.ok(f"wclose {h} abort")
    assert sh.exist(["a/2"]) == [0]
    assert allocated(master) == before
    # The key is free for the next writer.
    sh.ok(f"wwrite a/2 {MiB} 4096 4")
    sh.ok(f"check a/2 {MiB} 4")
    sh.close()


def test_failed_write_revokes_the_put(procs, tmp_path, master):
    only = Member(procs, tmp_path, master)
    try:
        sh = Shell(procs, tmp_path, master)
        eventually(lambda: len(master.segments()) == 1, what="segment")
        h = sh.ok(f"wopen f/1 {2 * MiB}")
        sh.ok(f"wpiece {h} 0 {MiB} 1")
        only.kill()
        assert sh.code(f"wpiece {h} {MiB} {MiB} 1", timeout=120) == -800
        # Poisoned: later writes are refused, the commit revokes.
        assert sh.code(f"wpiece {h} 0 {MiB} 1") == -800
        assert sh.code(f"wclose {h} commit") == -800
        assert sh.exist(["f/1"]) == [0]
        sh.close()
    finally:
        procs.cleanup()
        cleanup_segments([only.port])


def test_read_fails_over_to_the_next_replica(procs, tmp_path, master,
                                             members):
    sh = Shell(procs, tmp_path, master)
    eventually(lambda: len(master.segments()) == 3, what="3 segments")
    sh.ok(f"put rep {3 * MiB} 21 3")
    h = sh.ok("oopen rep").split()[0]
    first = sh.ok("rtext rep").split()[1].split("@")[0]
    victim = next(m for m in members if m.name == first)
    victim.kill()
    assert sh.ok(f"oreadh {h} {MiB} 21", timeout=120) == str(3 * MiB)
    # The replica that answered is tried first from now on: fast again.
    t0 = time.monotonic()
    assert sh.ok(f"oreadh {h} {MiB} 21") == str(3 * MiB)
    assert time.monotonic() - t0 < 5
    sh.ok(f"oclose {h}")
    sh.close()


def test_empty_object(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    before = allocated(master)
    sh.ok("wwrite e 0 4096 1")
    st = kv(sh.ok("fstat e"))
    assert st["size"] == "0" and int(st["mtime"]) > 0
    assert allocated(master) == before
    assert sh.ok("oread e 4096 1") == "0"
    h, size = sh.ok("oopen e").split()[:2]
    assert size == "0"
    assert sh.ok(f"oread1 {h} 0 4096").split()[0] == "0"
    sh.ok(f"oclose {h}")
    assert sh.ok("get e") == "0 00000000"
    assert sh.ok("ls e - - 0") == "1 truncated=0 e:0"
    assert sh.code("wwrite e 0 4096 1") == -705
    sh.ok("wabort e2 0")
    assert sh.exist(["e", "e2"]) == [1, 0]
    sh.ok("rm e force")
    sh.close()


def test_stat_list_rename(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    eventually(lambda: len(master.segments()) == 3, what="3 segments")
    sh.ok("put s 1000 1 2")
    st = kv(sh.ok("fstat s"))
    assert st["size"] == "1000" and st["replicas"] == "2"
    assert st["holds"] == "0" and st["lease"] == "0"
    sh.ok("rm s")  # stat took no lease
    sh.ok("put s 1000 1 2")
    out = sh.ok("rtext s").split()
    assert out[0] == "2" and len(out) == 3
    assert {x.split("@")[0] for x in out[1:]} <= {m.name for m in members}
    for k in ("d/a", "d/b/c", "d/b/d", "d/e", "f"):
        sh.ok(f"put {k} {len(k)} 1")
    assert sh.ok("ls d/ / - 0") == \
        "3 truncated=0 d/a:3 d/b/:0:/ d/e:3"
    assert sh.ok("ls d/ - - 2") == "2 truncated=1 d/a:3 d/b/c:5"
    assert sh.ok("ls d/ - d/b/c 2") == "2 truncated=0 d/b/d:5 d/e:3"
    sh.ok("ren f g")
    assert sh.exist(["f", "g"]) == [0, 1]
    assert sh.code("ren g d/a noreplace") == -705
    sh.ok("ren g d/a")
    sh.ok("check d/a 1 1")
    assert sh.code("ren nope x") == -704
    sh.close()


def test_pool_figures_match_the_master(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    eventually(lambda: len(master.segments()) == 3, what="3 segments")

    def same():
        p = kv(sh.ok("pool"))
        return (int(p["capacity"]) ==
                master.metric("master_total_capacity_bytes") and
                int(p["allocated"]) ==
                master.metric("master_allocated_bytes") and
                int(p["keys"]) == master.metric("master_key_count"))

    assert same()
    p = kv(sh.ok("pool"))
    assert p["segments"] == "3" and int(p["capacity"]) > 0
    assert 3 * int(p["largest"]) == int(p["capacity"])  # members alike
    sh.ok(f"put p1 {MiB} 1 2")
    assert same()
    assert int(kv(sh.ok("pool"))["allocated"]) >= \
        int(p["allocated"]) + 2 * MiB
    sh.close()


def test_change_feed(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    other = Shell(procs, tmp_path, master)
    w = kv(sh.ok("watch 0 0 0"))
    epoch, after = int(w["epoch"]), int(w["after"])
    assert epoch and w["reset"] == "0"
    other.ok("put x 10 1")
    other.ok("ren x y")
    other.ok("rm y")
    out = sh.ok(f"watch {epoch} {after} 0").split()
    w = kv(" ".join(out))
    assert int(w["epoch"]) == epoch and w["reset"] == "0"
    assert out[3:] == ["put:x", "rename:x>y", "remove:y"]
    after = int(w["after"])
    # Nothing new: an empty answer after the wait.
    t0 = time.monotonic()
    out = sh.ok(f"watch {epoch} {after} 1500").split()
    assert out[3:] == [] and time.monotonic() - t0 >= 1.2
    # A long poll answers when the event happens, not at its end.
    done = {}

    def waiter():
        t0 = time.monotonic()
        done["out"] = sh.ok(f"watch {epoch} {after} 20000", timeout=60)
        done["t"] = time.monotonic() - t0

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(2.5)  # beyond one poll slice
    other.ok("put z 10 1")
    t.join(60)
    assert done["out"].split()[3:] == ["put:z"]
    assert done["t"] < 10
    # A fresh cursor with a wait starts at the present and waits.
    t = threading.Thread(target=lambda: done.update(
        out=sh.ok("watch 0 0 20000", timeout=60)))
    t.start()
    time.sleep(1)
    other.ok("wwrite z2 100 10 1")
    t.join(60)
    assert done["out"].split()[3:] == ["put:z2"]
    # A cursor of another epoch (a master restart) resets (store_shell
    # checks that the call returned 1).
    out = sh.ok(f"watch {epoch + 1} 5 0").split()
    w = kv(" ".join(out))
    assert w["reset"] == "1" and out[3:] == []
    assert int(w["epoch"]) == epoch
    sh.close()
    other.close()


def test_versions(procs, tmp_path):
    """Every object has a version, unique in the pool: a key's next object
    has another (even of the same size within the same millisecond), a
    rename keeps it, stat and an open object agree, and a master restart
    keeps versions and never gives out one again."""
    m = Master(procs, tmp_path)
    Member(procs, tmp_path, m)
    sh = Shell(procs, tmp_path, m)
    eventually(lambda: len(m.segments()) == 1, what="segment")
    seen = set()
    for i in range(50):
        if i:
            sh.ok("rm v")
        sh.ok(f"put v 100 {i}")
        st = kv(sh.ok("fstat v"))
        v = int(st["version"])
        assert v not in seen
        assert int(st["mtime"]) == v // 1000000
        seen.add(v)
    sh.ok("put old 10 1")
    h, size, ver = sh.ok("oopen v").split()
    assert ver == f"version={v}"
    sh.ok(f"oclose {h}")
    sh.ok("ren v w")
    assert int(kv(sh.ok("fstat w"))["version"]) == v
    m.stop()
    m.start()
    eventually(lambda: len(m.segments()) == 1, timeout=20,
               what="member re-mounted")
    assert int(kv(sh.ok("fstat w"))["version"]) == v
    # A record from before versions holds ms: read as that ms in ns.
    m.stop()
    subprocess.run(["sqlite3", m.db, "UPDATE objects SET mtime = "
                    "1700000000123 WHERE key = CAST('old' AS BLOB)"],
                   check=True)
    m.start()
    eventually(lambda: len(m.segments()) == 1, timeout=20,
               what="member re-mounted")
    st = kv(sh.ok("fstat old"))
    assert st["version"] == "1700000000123000000", st
    assert st["mtime"] == "1700000000123", st
    sh.ok("put v 100 1")
    assert int(kv(sh.ok("fstat v"))["version"]) > v
    # A version is the object's, not the key's: w renamed over v.
    sh.ok("ren w v")
    assert int(kv(sh.ok("fstat v"))["version"]) == v
