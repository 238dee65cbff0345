# SPDX-License-Identifier: Apache-2.0
"""The master's checkpoint methods (master.proto, "checkpoints"):
CkptCreate/List/Info/Remove with their validation, links, holders and the
choice of sources (CkptHold, CkptSource, CkptDone), the change feed, and
durability: records and holders come back after a kill -9 of the master,
holders whose client does not come back within the restore grace go, and
a client the master drops loses its holder records."""
import sqlite3
import time

from pool import Master, eventually
from test_fs_rpc import MShell

P, A, B, R = "01" * 16, "aa" * 16, "bb" * 16, "cc" * 16
KB64 = 65536
# -710 REPLICA_NOT_FOUND: no live holder has the shard.
NO_HOLDER = "err -710 "


def shell(procs, tmp_path, master, client):
    ms = MShell(procs, tmp_path, master)
    ms.ok(f"client {client}")
    return ms


def four_shards(procs, tmp_path, master, a_has, b_has):
    """Shells of P (the publisher, holding all 4 shards of "c" at "p"),
    A and B (holding a_has and b_has at "a" and "b") and R (a reader);
    and the checkpoint's id."""
    p, a, b, r = (shell(procs, tmp_path, master, c) for c in (P, A, B, R))
    cid = int(p.ok(f"ckpt-create c {KB64} f:{4 * KB64} p"))
    a.ok(f"ckpt-hold {cid} a {a_has}")
    b.ok(f"ckpt-hold {cid} b {b_has}")
    return p, a, b, r, cid


def info(ms, what):
    r = ms.cmd(f"ckpt-info {what}")
    if not r.startswith("ok"):
        return int(r.split()[1])
    out = {"holder": []}
    for x in r[2:].split():
        k, v = x.split("=", 1)
        if k == "holder":
            hid, rest = v.split("@", 1)
            ep, *kv = rest.split(":")
            h = dict(y.split("=") for y in kv)
            h["id"], h["endpoint"] = hid, ep
            out["holder"].append(h)
        else:
            out[k] = v
    return out


def holders(ms, what):
    return {h["id"]: h for h in info(ms, what)["holder"]}


def ls(ms, prefix="-", start="-", limit=0):
    out = ms.ok(f"ckpt-ls {prefix} {start} {limit}").split()
    return [e.split(":")[0] for e in out[2:]], out[1] == "truncated=1"


def source(ms, cid, what, have="-", *exclude):
    r = ms.cmd(f"ckpt-source {cid} {what} {have} {' '.join(exclude)}")
    if not r.startswith("ok"):
        return r
    return dict(x.split("=") for x in r[2:].split()) if "=" in r else \
        r[2:].strip()


def code(r):
    return int(r.split()[1])


def test_create_list_info_remove_and_validation(procs, tmp_path, master):
    ms = shell(procs, tmp_path, master, P)
    i1 = int(ms.ok(f"ckpt-create llama {KB64} a:100000,b/c:0,b:dir,l:>a"))
    c = info(ms, "llama")
    assert c["id"] == str(i1) and c["shards"] == "2"
    # nfiles: the regular files a and b/c, not the directory and link
    assert c["size"] == "100000" and c["nfiles"] == "2"
    assert c["holders"] == "0" and c["lost"] == "2"
    assert c["publisher"] == P and c["link"] == "-"
    assert c["files"] == "a:100644:100000:0,b/c:100644:0:2,b:40755:0:0," \
        "l:120777:0:0"
    assert c["crcs"] == "0,1"
    assert info(ms, f"#{i1}")["id"] == str(i1)
    # With an endpoint the publisher holds every shard.
    i2 = int(ms.ok(f"ckpt-create mistral {KB64} x:{4 * KB64 - 1} p"))
    assert i2 > i1
    c = info(ms, "mistral")
    assert c["shards"] == "4" and c["holders"] == "1" and c["lost"] == "0"
    (h,) = c["holder"]
    assert h["id"] == P and h["endpoint"] == "p" and h["pub"] == "1"
    assert h["bitmap"] == "0f" and h["shards"] == "4"
    # Shard size 0: 64 MiB; names starting with '.' are fine.
    assert info(ms, f"#{ms.ok('ckpt-create .hidden 0 f:100')}")[
        "shard_size"] == str(64 << 20)
    assert code(ms.cmd(f"ckpt-create llama {KB64} a:1")) == -705
    bad = ["ckpt-create . 65536 a:1", "ckpt-create .. 65536 a:1",
           "ckpt-create a/b 65536 a:1", "ckpt-create - 65536 a:1",
           f"ckpt-create {'n' * 256} 65536 a:1",
           "ckpt-create s 65535 a:1", f"ckpt-create s {(1 << 30) + 1} a:1",
           "ckpt-create s 65536/2 a:1", "ckpt-create s 65536/0 a:1",
           "ckpt-create s 65536 /abs:1", "ckpt-create s 65536 a//b:1",
           "ckpt-create s 65536 a/./b:1", "ckpt-create s 65536 a/../b:1",
           "ckpt-create s 65536 ..:1", "ckpt-create s 65536 x:1,x:2",
           "ckpt-create s 65536 x:1,x:dir", "ckpt-create s 65536 l:>"]
    for line in bad:
        assert code(ms.cmd(line)) == -600, line
    assert ms.ok(f"ckpt-create {'n' * 255} 65536 a:1")
    # Listing: name order, prefix, cursor, limit.
    for n in ("m1", "m2", "m3"):
        ms.ok(f"ckpt-create {n} {KB64} f:1")
    names, trunc = ls(ms)
    assert names == sorted(names) and "llama" in names and not trunc
    assert ls(ms, "m") == (["m1", "m2", "m3", "mistral"], False)
    assert ls(ms, "m", "-", 2) == (["m1", "m2"], True)
    assert ls(ms, "m", "m2", 2) == (["m3", "mistral"], False)
    assert ls(ms, "zz") == ([], False)
    # Remove; ids are never reused.
    ms.ok("ckpt-rm mistral")
    assert code(ms.cmd("ckpt-rm mistral")) == -704
    assert info(ms, "mistral") == -704
    assert info(ms, f"#{i2}") == -704
    assert int(ms.ok(f"ckpt-create mistral {KB64} f:1")) > i2


def test_links_replace_links_only(procs, tmp_path, master):
    ms = shell(procs, tmp_path, master, P)
    ms.ok(f"ckpt-create llama {KB64} a:1")
    l1 = int(ms.ok("ckpt-link latest llama"))
    assert code(ms.cmd("ckpt-link latest other")) == -705
    l2 = int(ms.ok("ckpt-link latest other replace"))
    assert l2 > l1
    out = ms.ok("ckpt-ls latest - 0").split()
    assert out[2] == f"latest:{l2}:0:0:0:>other"
    c = info(ms, "latest")
    assert c["link"] == "other" and c["nfiles"] == "0" and c["files"] == ""
    # A link never replaces a checkpoint, a checkpoint never a link.
    assert code(ms.cmd("ckpt-link llama x replace")) == -705
    assert code(ms.cmd(f"ckpt-create latest {KB64} a:1")) == -705
    ms.ok("ckpt-rm latest")
    assert info(ms, "latest") == -704


def test_sources_slots_exclude_unreachable_corrupt(procs, tmp_path, master):
    p, a, b, r, cid = four_shards(procs, tmp_path, master, "03", "01")
    hs = holders(p, "c")
    assert hs[A]["bitmap"] == "03" and hs[A]["pub"] == "0"
    assert hs[B]["shards"] == "1"
    # Shard 0: the two non-publishers, least active first.
    got = [source(r, cid, 0)["endpoint"] for _ in range(2)]
    assert sorted(got) == ["a", "b"]
    # Shard 1: A (non-publisher) until its 4 slots are full, then the
    # publisher; then, every holder full and the shard on its way to
    # other readers, wait for them (retry) rather than pile on.
    got = [source(r, cid, 1)["endpoint"] for _ in range(7)]
    assert got[:3] == ["a"] * 3 and got[3:7] == ["p"] * 4
    assert int(source(b, cid, 1)["retry"]) > 0
    # The fetches in flight are the caller's own: nobody else is coming,
    # so the least active of all serves.
    assert source(r, cid, 1)["endpoint"] in ("a", "p")
    hs = holders(p, "c")
    assert int(hs[A]["active"]) + int(hs[P]["active"]) == 1 + 8
    # Shard 3: only the full publisher has it and nobody is fetching it:
    # no holder is coming, so the least active of all serves.
    assert source(r, cid, 3)["endpoint"] == "p"
    # Done: the active count drops, served bytes grow.
    before = int(hs[A]["active"])
    r.ok(f"ckpt-done {cid} 1 {A} 0 4096")
    hs = holders(p, "c")
    assert int(hs[A]["active"]) == before - 1
    assert hs[A]["served"] == "4096"
    # Exclude, and the caller itself, are skipped.
    assert source(r, cid, 3, "-", "p").startswith(NO_HOLDER)
    assert source(p, cid, 3).startswith(NO_HOLDER)
    assert source(a, cid, 0)["endpoint"] in ("b", "p")
    # Unreachable: skipped for a few seconds.
    r.ok(f"ckpt-done {cid} 0 {B} 1 0")
    assert all(source(r, cid, 0).get("endpoint") != "b" for _ in range(3))
    # Corrupt: the holder loses the shard.
    r.ok(f"ckpt-done {cid} 0 {A} 2 0")
    assert holders(p, "c")[A]["bitmap"] == "02"
    # Dropping: some shards, then all (the record goes); lost shards.
    a.ok(f"ckpt-hold {cid} - 02 drop")
    assert A not in holders(p, "c")
    b.ok(f"ckpt-hold {cid} - - drop")
    p.ok(f"ckpt-hold {cid} - 0c drop")
    c = info(p, "c")
    assert c["holders"] == "1" and c["lost"] == "2"
    assert source(r, cid, 2).startswith(NO_HOLDER)
    assert source(r, cid, 0)["endpoint"] == "p"
    p.ok(f"ckpt-hold {cid} - - drop")
    assert info(p, "c")["lost"] == "4"
    assert source(r, cid, "any").startswith(NO_HOLDER)
    # Fetched, the reader becomes a holder (hold_endpoint).
    p.ok(f"ckpt-hold {cid} p 0f")
    r.ok(f"ckpt-done {cid} 3 {P} 0 100 r")
    assert holders(p, "c")[R]["bitmap"] == "08"
    # Bad requests.
    assert code(r.cmd(f"ckpt-source {cid} 4")) == -600
    assert code(r.cmd(f"ckpt-done {cid} 0 {P} 3 0")) == -600
    assert code(a.cmd(f"ckpt-hold {cid} a 10")) == -600
    assert code(a.cmd(f"ckpt-hold {cid} - 01")) == -600
    assert code(a.cmd("ckpt-hold 999 a 01")) == -704
    assert code(r.cmd("ckpt-source 999 0")) == -704


def test_any_rarest_first_retry_and_done(procs, tmp_path):
    m = Master(procs, tmp_path, "--ckpt_holder_slots", "1")
    p, a, b, r, cid = four_shards(procs, tmp_path, m, "07", "03")
    # Shard 3 has one holder: first.
    s = source(r, cid, "any")
    assert s["shard"] == "3" and s["endpoint"] == "p"
    # Then shard 2 (two holders; A, the non-publisher).
    s = source(r, cid, "any", "08")
    assert s["shard"] == "2" and s["endpoint"] == "a"
    # Then shard 0 or 1, from B: A and P are full (one slot each).
    s = source(r, cid, "any", "0c")
    assert s["shard"] in ("0", "1") and s["endpoint"] == "b"
    # Everyone full: retry later. One shard asked: shard 3 is on its way
    # to r itself only, so no other holder is coming: the least active.
    s = source(r, cid, "any", "08")
    assert int(s["retry"]) > 0
    assert source(r, cid, 3)["endpoint"] == "p"
    # Have everything: done. Nobody left for what is wanted: -710.
    assert source(r, cid, "any", "0f") == "done"
    assert source(r, cid, "any", "07", "p").startswith(NO_HOLDER)


def test_records_and_holders_survive_kill(procs, tmp_path):
    m = Master(procs, tmp_path, "--restore_grace", "2")
    p = shell(procs, tmp_path, m, P)
    a = shell(procs, tmp_path, m, A)
    cid = int(p.ok(f"ckpt-create keep {KB64} f:{3 * KB64},g:10 p"))
    a.ok(f"ckpt-hold {cid} a 05")
    lid = int(p.ok("ckpt-link latest keep"))
    before = info(p, "keep")
    m.kill()
    m.start()
    p = shell(procs, tmp_path, m, P)
    c = info(p, "keep")
    for k in ("id", "shards", "size", "files", "crcs", "publisher"):
        assert c[k] == before[k], k
    assert c["holders"] == "2"
    assert info(p, "latest")["link"] == "keep"
    assert info(p, f"#{lid}")["id"] == str(lid)
    # P comes back (pings); A never does: after the restore grace only
    # P's record is left.
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        p.ok("ping")
        time.sleep(0.3)
    hs = holders(p, "keep")
    assert list(hs) == [P] and hs[P]["bitmap"] == "0f"
    assert info(p, "keep")["lost"] == "0"
    # Ids are not reused after a restart either.
    p.ok("ckpt-rm latest")
    assert int(p.ok(f"ckpt-create new {KB64} f:1")) > lid
    m.stop()
    db = sqlite3.connect(m.db)
    assert db.execute("SELECT v FROM meta WHERE k='schema'").fetchone()[0] \
        == 5
    assert db.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == 2
    assert db.execute("SELECT count(*) FROM ckpt_holders").fetchone()[0] == 1


def test_dropped_clients_lose_their_holders(procs, tmp_path):
    m = Master(procs, tmp_path, "--client_ttl", "2")
    p = shell(procs, tmp_path, m, P)
    a = shell(procs, tmp_path, m, A)
    b = shell(procs, tmp_path, m, B)
    cid = int(p.ok(f"ckpt-create c {KB64} f:{2 * KB64} p"))
    a.ok(f"ckpt-hold {cid} a 01")
    b.ok(f"ckpt-hold {cid} b 02")
    assert len(holders(p, "c")) == 3
    # Leaving drops B at once.
    b.ok("leave")
    assert set(holders(p, "c")) == {P, A}
    # A falls silent: dropped after client_ttl; P pings and stays.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and A in holders(p, "c"):
        p.ok("ping")
        time.sleep(0.3)
    assert set(holders(p, "c")) == {P}
    # The checkpoint stays with no holder at all.
    p.ok(f"ckpt-hold {cid} - - drop")
    c = info(p, "c")
    assert c["holders"] == "0" and c["lost"] == "2"
    m.kill()
    m.start()
    p = shell(procs, tmp_path, m, P)
    assert holders(p, "c") == {}


def test_a_client_made_by_a_checkpoint_call_is_asked_to_join(procs,
                                                             tmp_path):
    """A holder the master dropped (client_ttl: a stopped or paused
    process) whose next call is a checkpoint's hold, before its ping: the
    hold made it a client again, its pings were answered "known"
    (status 1), so it never re-mounted and its memory stayed out of the
    pool for good. Until it registers again its pings say "re-mount" (2);
    then 1."""
    m = Master(procs, tmp_path, "--client_ttl", "2")
    p = shell(procs, tmp_path, m, P)
    p.ok("join")
    assert p.ok("ping") == "status=1"
    cid = int(p.ok(f"ckpt-create c {KB64} f:{2 * KB64} p"))
    a = shell(procs, tmp_path, m, A)
    a.ok("join")
    a.ok(f"ckpt-hold {cid} a 01")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and A in holders(p, "c"):
        p.ok("ping")
        time.sleep(0.3)
    assert A not in holders(p, "c")  # dropped: silent past client_ttl
    a.ok(f"ckpt-hold {cid} a 01")  # its first call after the stall
    assert a.ok("ping") == "status=2"
    a.ok("join")
    assert a.ok("ping") == "status=1"


def test_feed_events(procs, tmp_path, master):
    ms = shell(procs, tmp_path, master, P)
    epoch, last, _, _ = ms.watch(0, 0)
    ms.ok(f"ckpt-create e1 {KB64} f:1")
    ms.ok("ckpt-link e2 e1")
    ms.ok("ckpt-rm e1")
    eventually(lambda: len(ms.watch(epoch, last)[3]) == 3, what="events")
    assert ms.watch(epoch, last)[3] == ["ckpt_put:e1", "ckpt_put:e2",
                                        "ckpt_remove:e1"]
