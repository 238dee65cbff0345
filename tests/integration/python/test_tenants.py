# SPDX-License-Identifier: Apache-2.0
"""Tenants (upstream's tenant_id; docs/design.md "Tenants") against a real
mooncake_master and two mooncake_client pool members: clients of tenants
A and B and a default client share the pool's memory but not their keys.
A tenant T's keys are the master's ".tenants/T/<key>"; libmooncake adds
and strips the prefix, and the master scopes RemoveAll/RemoveByRegex."""
import ctypes
import json
import os
import sys
import threading
import time

import pytest

from mount import fuse_why

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "store"))

from pool import Master, Member, cli  # noqa: E402

BUF = 16 << 20


def client(stores, master, tenant=None, **kw):
    s = stores()
    if tenant is not None:
        kw["tenant_id"] = tenant
    rc = s.setup("127.0.0.1", master.metadata, 0, BUF, "tcp", "",
                 master.addr, **kw)
    assert rc == 0, rc
    return s


def all_keys(master):
    st, text = master.http("/get_all_keys")
    assert st == 200, (st, text)
    return set(k for k in text.split("\n") if k)


class Entry(ctypes.Structure):
    """The head of mooncake_list_entry_t (include/mooncake/store_fs.h)."""
    _fields_ = [("name", ctypes.c_char_p)]


LIST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(Entry))


def list_keys(mstore, store, prefix=""):
    """mooncake_store_list() of one page: the names it gives."""
    out = []
    fn = mstore._L.mooncake_store_list
    fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                   ctypes.c_char_p, ctypes.c_uint, LIST_FN, ctypes.c_void_p,
                   ctypes.c_void_p]
    cb = LIST_FN(lambda _a, e: out.append(e.contents.name.decode()))
    n = fn(store._h, prefix.encode(), b"", None, 0, cb, None, None)
    assert n >= 0, n
    assert n == len(out)
    return out


class Event(ctypes.Structure):
    """mooncake_event_t (include/mooncake/store_fs.h)."""
    _fields_ = [("seq", ctypes.c_uint64), ("type", ctypes.c_int),
                ("key", ctypes.c_char_p), ("to", ctypes.c_char_p),
                ("version", ctypes.c_uint64)]


WATCH_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(Event))


class Watch:
    """mooncake_store_watch() from the present on: (type, key, to)."""

    def __init__(self, mstore, store):
        self.fn = mstore._L.mooncake_store_watch
        self.fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
                            ctypes.POINTER(ctypes.c_uint64), ctypes.c_uint,
                            WATCH_FN, ctypes.c_void_p,
                            ctypes.POINTER(ctypes.c_bool)]
        self.store = store
        self.epoch, self.after = ctypes.c_uint64(0), ctypes.c_uint64(0)
        self.events = []
        self.cb = WATCH_FN(lambda _a, e: self.events.append(
            (e.contents.type, e.contents.key.decode(),
             e.contents.to.decode())))
        self.poll(0)

    def poll(self, wait_ms=200):
        reset = ctypes.c_bool(False)
        rc = self.fn(self.store._h, ctypes.byref(self.epoch),
                     ctypes.byref(self.after), wait_ms, self.cb, None,
                     ctypes.byref(reset))
        assert rc >= 0 and not reset.value, rc
        out, self.events = self.events, []
        return out


def test_same_key_three_tenants(master, members, stores, mstore):
    a = client(stores, master, "A")
    b = client(stores, master, "B")
    d = client(stores, master)
    for s, v in ((a, b"alpha"), (b, b"bravo"), (d, b"default")):
        assert s.put("k", v) == 0
    assert a.get("k") == b"alpha"
    assert b.get("k") == b"bravo"
    assert d.get("k") == b"default"
    assert a.get_size("k") == 5 and d.get_size("k") == 7
    # The master holds them apart, under the prefix.
    keys = all_keys(master)
    assert {".tenants/A/k", ".tenants/B/k", "k"} <= keys
    # A cannot see, read or remove B's keys.
    assert b.put("only-b", b"b" * 100) == 0
    assert a.is_exist("only-b") == 0
    assert a.batch_is_exist(["only-b", "k"]) == [0, 1]
    assert a.get("only-b") == b""
    assert a.get_size("only-b") == -704
    assert a.remove("only-b") == -704
    assert a.batch_remove(["only-b"]) == [-704]
    assert d.is_exist("only-b") == 0
    assert b.get("only-b") == b"b" * 100
    # Nor B's keys by naming the prefix itself: that is A's own namespace.
    assert a.get(".tenants/B/only-b") == b""
    assert ".tenants/A/.tenants/B/only-b" not in all_keys(master)
    # The default tenant is the operator's view: it can name them.
    assert d.get(".tenants/B/only-b") == b"b" * 100
    # A zero-copy batch, and an upsert (a put and a rename) stay inside.
    assert a.put_batch(["p1", "p2"], [b"1" * 10, b"2" * 20]) == 0
    assert a.get_batch(["p1", "p2"]) == [b"1" * 10, b"2" * 20]
    assert a.upsert("k", b"ALPHA!") == 0
    assert a.get("k") == b"ALPHA!"
    assert b.get("k") == b"bravo" and d.get("k") == b"default"
    keys = all_keys(master)
    assert {".tenants/A/p1", ".tenants/A/p2"} <= keys
    assert not [k for k in keys if ".mc-upsert." in k]
    # Listing (store_fs.h) gives the tenant's keys, unprefixed.
    assert sorted(list_keys(mstore, a)) == ["k", "p1", "p2"]
    assert sorted(list_keys(mstore, b)) == ["k", "only-b"]
    assert list_keys(mstore, a, "p") == ["p1", "p2"]
    # The default tenant lists everything, the tenants' keys included.
    assert ".tenants/A/k" in list_keys(mstore, d)


def test_watch_sees_own_tenant(master, members, stores, mstore):
    a = client(stores, master, "A")
    b = client(stores, master, "B")
    d = client(stores, master)
    wa, wd = Watch(mstore, a), Watch(mstore, d)
    assert b.put("w", b"b") == 0
    assert a.put("w", b"a") == 0
    assert d.put("w", b"d") == 0
    assert a.remove("w") == 0
    ev = wa.poll()
    assert [(t, k) for t, k, _ in ev] == [(1, "w"), (2, "w")]   # put, remove
    keys = [k for _, k, _ in wd.poll()]
    assert ".tenants/A/w" in keys and ".tenants/B/w" in keys and "w" in keys
    # Renames across the border (only the default tenant can make them)
    # are a remove out of the tenant, a put into it.
    assert d.put("in", b"x") == 0
    wa.poll(0)
    fn = mstore._L.mooncake_store_rename
    fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                   ctypes.c_bool]
    assert fn(d._h, b"in", b".tenants/A/moved", False) == 0
    assert fn(d._h, b".tenants/A/moved", b"out", False) == 0
    assert [(t, k, to) for t, k, to in wa.poll()] == \
        [(1, "moved", ""), (2, "moved", "")]
    assert a.get("moved") == b""


def waiting_watch(w, wait_ms=30000):
    """A thread in a long poll of w for up to wait_ms; its result in
    out["rc"] once it returns."""
    out = {}

    def run():
        out["rc"] = w.fn(w.store._h, ctypes.byref(w.epoch),
                         ctypes.byref(w.after), wait_ms, w.cb, None, None)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    time.sleep(0.5)  # into its long poll
    assert t.is_alive() and not w.events
    return t, out


def test_watch_stop_ends_a_waiting_watch(master, members, stores, mstore):
    """mooncake_store_watch_stop() ends a watch in a 30 s long poll at once
    (-1010), and every later one, while the store works on; close() ends
    one too (a mount's daemon exits right after umount thanks to this)."""
    s = client(stores, master)
    w = Watch(mstore, s)
    stop = mstore._L.mooncake_store_watch_stop
    stop.argtypes = [ctypes.c_void_p]
    t, out = waiting_watch(w)
    assert stop(s._h) == 0
    t.join(15)
    assert not t.is_alive() and out["rc"] == -1010, out
    assert w.fn(s._h, ctypes.byref(w.epoch), ctypes.byref(w.after), 30000,
                w.cb, None, None) == -1010
    assert s.put("after-stop", b"v") == 0 and s.get("after-stop") == b"v"
    s2 = client(stores, master)
    t, out = waiting_watch(Watch(mstore, s2))
    s2.close()
    t.join(15)
    assert not t.is_alive() and out["rc"] == -1010, out
    assert stop(s2._h) == -1010  # after close


def test_remove_all_and_regex_stay_inside(master, members, stores, mstore):
    a = client(stores, master, "A")
    b = client(stores, master, "B")
    d = client(stores, master)
    for s in (a, b, d):
        for k in ("x1", "x2", "y1", "ax"):
            assert s.put(k, k.encode()) == 0
    # Anchors work on the tenant's own key, as for a default client.
    assert a.remove_by_regex("^x", force=True) == 2
    assert a.is_exist("x1") == 0 and a.is_exist("ax") == 1
    assert b.is_exist("x1") == 1 and d.is_exist("x1") == 1
    assert a.remove_by_regex("x$", force=True) == 1          # ax
    assert a.remove_by_regex("^\\.tenants", force=True) == 0
    assert a.remove_all(force=True) == 1                     # y1
    assert a.is_exist("y1") == 0
    assert all(b.is_exist(k) == 1 for k in ("x1", "x2", "y1", "ax"))
    # The default tenant's regex and remove_all leave the tenants alone.
    assert d.remove_by_regex("^\\.tenants/", force=True) == 0
    assert d.remove_by_regex("x1", force=True) == 1
    assert b.is_exist("x1") == 1
    assert d.remove_all(force=True) == 3
    keys = all_keys(master)
    assert not [k for k in keys if not k.startswith(".tenants/")]
    assert {".tenants/B/x1", ".tenants/B/x2", ".tenants/B/y1",
            ".tenants/B/ax"} <= keys
    assert b.get("ax") == b"ax"
    assert b.remove_all(force=True) == 4
    assert not [k for k in all_keys(master) if k.startswith(".tenants/B/")]


def test_tenant_names(master, members, stores, mstore, monkeypatch):
    ok = "T_1.x-" + "z" * 58                          # 64 characters
    assert len(ok) == 64
    s = client(stores, master, ok)
    assert s.put("n", b"ok") == 0
    assert f".tenants/{ok}/n" in all_keys(master)
    for bad in ("a/b", "z" * 65, ".", "..", "sp ace", "é"):
        assert stores().setup("127.0.0.1", master.metadata, 0, BUF, "tcp",
                              "", master.addr, tenant_id=bad) == -600, bad
    # The dict form too.
    assert stores().setup({"local_hostname": "127.0.0.1",
                           "metadata_server": master.metadata,
                           "master_server_address": master.addr,
                           "global_segment_size": 0,
                           "tenant_id": "x/y"}) == -600
    # A bad name from the environment: libmooncake refuses it (-600).
    monkeypatch.setenv("MOONCAKE_TENANT_ID", "..")
    assert stores().setup("127.0.0.1", master.metadata, 0, BUF, "tcp", "",
                          master.addr) == -600
    # "default" and "" are the default tenant.
    monkeypatch.delenv("MOONCAKE_TENANT_ID")
    for t in ("default", ""):
        d = client(stores, master, t)
        assert d.put("plain-" + (t or "empty"), b"d") == 0
    assert {"plain-default", "plain-empty"} <= all_keys(master)


def test_tenant_from_environment_and_file(master, members, stores, mstore,
                                          tmp_path, monkeypatch):
    a = client(stores, master, "A")
    b = client(stores, master, "B")
    assert a.put("cfg", b"from-a") == 0
    assert b.put("cfg", b"from-b") == 0
    monkeypatch.setenv("MOONCAKE_TENANT_ID", "A")
    e = client(stores, master)
    assert e.get("cfg") == b"from-a"
    # setup's tenant_id wins over the environment
    assert client(stores, master, "B").get("cfg") == b"from-b"
    monkeypatch.delenv("MOONCAKE_TENANT_ID")
    path = tmp_path / "mooncake.json"
    path.write_text(json.dumps({
        "metadata_server": master.metadata,
        "master_server_address": master.addr,
        "local_hostname": "127.0.0.1", "tenant_id": "B"}))
    monkeypatch.setenv("MOONCAKE_CONFIG_PATH", str(path))
    f = stores()
    assert f.init_all("tcp", "", 0) == 0
    assert f.get("cfg") == b"from-b"
    # the environment wins over the file
    monkeypatch.setenv("MOONCAKE_TENANT_ID", "A")
    g = stores()
    assert g.setup("", "", 0, BUF, "", "", "") == 0
    assert g.get("cfg") == b"from-a"
    # setup_dummy takes no tenant_id: the configuration's
    h = stores()
    assert h.setup_dummy(1 << 20, BUF, members[0].name) == 0
    assert h.get("cfg") == b"from-a"


def test_mooncake_client_tenant_flag(procs, tmp_path, master, members,
                                     stores, mstore):
    """mooncake_client --tenant_id (upstream's flag) is accepted; its
    segment serves every tenant: it is pool memory."""
    m = Member(procs, tmp_path, master, size="16MB",
               extra=("--tenant_id", "A"))
    cfg = mstore.ReplicateConfig()
    cfg.preferred_segment = m.name
    b = client(stores, master, "B")
    assert b.put("on-a-member", b"m" * 4096, cfg) == 0
    eps = [r.get_memory_descriptor().buffer_descriptor.transport_endpoint
           for r in b.get_replica_desc("on-a-member")]
    assert eps == [m.name]
    assert b.get("on-a-member") == b"m" * 4096
    m.stop()


def test_master_flag_and_key_length(procs, tmp_path, stores):
    """upstream's --enable_multi_tenants is accepted (tenants need no
    flag here); --max_key_length counts the prefix. A client with a
    segment is the pool's only member."""
    m = Master(procs, tmp_path, "--enable_multi_tenants=true",
               "--max_key_length", "20", name="mt")
    a = stores()
    assert a.setup("127.0.0.1", m.metadata, 16 << 20, BUF, "tcp", "",
                   m.addr, tenant_id="A") == 0
    assert a.put("k", b"v") == 0 and a.get("k") == b"v"
    assert ".tenants/A/k" in all_keys(m)
    d = client(stores, m)
    assert d.put("d" * 20, b"v") == 0
    # ".tenants/A/" is 11 bytes: 9 are left for A's own key
    assert a.put("a" * 9, b"v") == 0
    assert a.put("a" * 10, b"v") == -400


def test_cli_is_the_operators_view(master, members, stores, tmp_path,
                                   monkeypatch):
    """The mooncake CLI (like the mount) ignores MOONCAKE_TENANT_ID: it
    sees and names every tenant's keys by their full names."""
    a = client(stores, master, "A")
    assert a.put("seen", b"by-the-operator") == 0
    monkeypatch.setenv("MOONCAKE_TENANT_ID", "A")
    assert ".tenants/A/seen" in cli(master, "ls").stdout
    out = tmp_path / "got"
    cli(master, "get", ".tenants/A/seen", str(out))
    assert out.read_bytes() == b"by-the-operator"
    assert cli(master, "get", "seen", str(tmp_path / "no"),
               check=False).returncode != 0
    # --force: the get above holds a read lease for 500 ms, which a quick
    # machine's next two calls do not outlast (-706 otherwise).
    cli(master, "--force", "rm", ".tenants/A/seen")
    assert a.is_exist("seen") == 0


def test_mount_shows_tenants(procs, tmp_path, master, stores, monkeypatch):
    """The mount is the operator's view: kv/.tenants/T/<key>, whatever
    MOONCAKE_TENANT_ID its environment has."""
    why = fuse_why()
    if why:
        pytest.skip(why)
    from mount import Mount
    monkeypatch.setenv("MOONCAKE_TENANT_ID", "B")
    m = Mount(procs, tmp_path, master, seg="64MiB")
    try:
        monkeypatch.delenv("MOONCAKE_TENANT_ID")
        a = client(stores, master, "A")
        d = client(stores, master)
        assert a.put("dir/k", b"a" * 5000) == 0
        assert d.put("plain", b"d") == 0
        path = m.kv / ".tenants" / "A" / "dir" / "k"
        t0 = time.monotonic()
        while not os.path.exists(path):
            assert time.monotonic() - t0 < 5, f"{path} did not appear"
            time.sleep(0.01)
        assert path.read_bytes() == b"a" * 5000
        assert ".tenants" in os.listdir(m.kv) and "plain" in os.listdir(m.kv)
        # Written through the mount into A's directory: A's key.
        (m.kv / ".tenants" / "A" / "fromfs").write_bytes(b"f" * 10)
        assert a.get("fromfs") == b"f" * 10
    finally:
        m.cleanup()
