# SPDX-License-Identifier: Apache-2.0
"""mooncake.p2p.P2PStore (checkpoints shared peer to peer, issue 20)
against a real mooncake_master: a publisher PROCESS registers numpy and
bytearray buffers, a reader PROCESS fetches them with get_replica and
serves them on, and a third reader still gets every byte after the
publisher unregistered; list and info as they change; publish_dir and
get_dir of a tree with progress reports; links and removal; the errors a
caller meets (-704, -600, -705) and a closed P2PStore."""
import gc
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import mctest
from pool import eventually

SHARD = 64 << 10
SIZES = [300_000, 5, 2 * SHARD, 1000]

# A pool client in its own process, driven by JSON lines on stdin: each
# command's answer is one JSON line ({"code": c} for a MooncakeError).
PEER = textwrap.dedent(f"""
    import hashlib, json, sys
    import numpy as np
    sys.path.insert(0, {os.path.join(mctest.SOURCE, "python")!r})
    from mooncake.store import MooncakeDistributedStore, MooncakeError
    from mooncake.p2p import P2PStore

    def pattern(seed, n):
        return np.random.default_rng(seed).integers(0, 256, n,
                                                    dtype=np.uint8)

    def buffers(sizes, seed=None):
        # numpy arrays and bytearrays in turn
        out = []
        for i, n in enumerate(sizes):
            a = pattern(seed + i, n) if seed is not None else \\
                np.zeros(n, dtype=np.uint8)
            out.append(a if i % 2 == 0 else bytearray(a.tobytes()))
        return out

    meta, master = sys.argv[1], sys.argv[2]
    store = MooncakeDistributedStore()
    assert store.setup("127.0.0.1", meta, 0, 16 << 20, "tcp", "",
                       master) == 0
    p2p = P2PStore(store, shard_size={SHARD}, inflight=3)
    held = {{}}
    print(json.dumps({{"endpoint": p2p.endpoint}}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        op, name = cmd["op"], cmd.get("name")
        try:
            if op == "register":
                held[name] = buffers(cmd["sizes"], cmd["seed"])
                p2p.register(name, held[name])
                out = {{}}
            elif op == "get_replica":
                bufs = buffers(cmd["sizes"])
                p2p.get_replica(name, bufs, cmd["sizes"])
                held[name] = bufs
                out = {{"digests": [hashlib.sha256(b).hexdigest()
                                    for b in bufs]}}
            elif op == "unregister":
                p2p.unregister(name)
                out = {{}}
            elif op == "exit":
                p2p.close()
                p2p.close()
                store.close()
                print("{{}}", flush=True)
                break
        except MooncakeError as e:
            out = {{"code": e.code}}
        print(json.dumps(out), flush=True)
""")


def pattern(seed, n):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def digests(sizes, seed):
    return [hashlib.sha256(pattern(seed + i, n).tobytes()).hexdigest()
            for i, n in enumerate(sizes)]


class Peer:
    """A PEER process; ask() sends a command and returns its answer."""

    def __init__(self, procs, tmp_path, master, env, tag):
        script = tmp_path / "peer.py"
        script.write_text(PEER)
        self.err = tmp_path / f"{tag}.err"
        self.proc = procs.popen(
            [sys.executable, str(script), master.metadata, master.addr],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=open(self.err, "wb"), env=env, text=True)
        self.endpoint = self._answer()["endpoint"]

    def _answer(self):
        line = self.proc.stdout.readline()
        assert line, f"peer died: {self.err.read_text()}"
        return json.loads(line)

    def ask(self, op, **kw):
        self.proc.stdin.write(json.dumps(dict(op=op, **kw)) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def exit(self):
        self.ask("exit")
        assert self.proc.wait(timeout=30 * mctest.SCALE) == 0, \
            self.err.read_text()


def set_up(store, master):
    rc = store.setup("127.0.0.1", master.metadata, 0, 16 << 20, "tcp", "",
                     master.addr)
    assert rc == 0, rc
    return store


@pytest.fixture
def p2p_mod():
    import mooncake.p2p
    return mooncake.p2p


@pytest.fixture
def p2ps(stores, master, p2p_mod):
    """Make P2PStore objects, each on a store of its own; closed
    afterwards (before their stores)."""
    made = []

    def make(**kw):
        kw.setdefault("shard_size", SHARD)
        p = p2p_mod.P2PStore(set_up(stores(), master), **kw)
        made.append(p)
        return p
    yield make
    for p in made:
        p.close()


def holders(p2p, name):
    return {h["endpoint"]: h for h in p2p.info(name)["holder_list"]}


# ---- upstream's Register / GetReplica between processes --------------------

def test_register_get_replica_serve_on(procs, tmp_path, master, python_env,
                                       p2ps):
    pub = Peer(procs, tmp_path, master, python_env, "publisher")
    rd = Peer(procs, tmp_path, master, python_env, "reader")
    me = p2ps()
    want = digests(SIZES, 7)

    assert pub.ask("register", name="w-1", sizes=SIZES, seed=7) == {}
    assert rd.ask("get_replica", name="w-1", sizes=SIZES) == \
        {"digests": want}

    # list: upstream's PayloadInfo fields and ours
    [e] = me.list("w-")
    assert (e.name, e.total_size, e.files, e.link) == \
        ("w-1", sum(SIZES), len(SIZES), None)
    assert e.shards == sum(-(-n // SHARD) for n in SIZES)
    assert e.holders == 2 and e.lost_shards == 0 and e.created_ns > 0
    assert e.size_list is None
    [e] = me.list("w-", sizes=True)
    assert e.size_list == SIZES and e.max_shard_size == SHARD
    assert me.list("nothing-here-") == []
    assert "w-1" in [p.name for p in me.list()]

    info = me.info("w-1")
    assert info["name"] == "w-1" and info["total_size"] == sum(SIZES)
    assert [f["path"] for f in info["files"]] == \
        [str(i) for i in range(len(SIZES))]
    assert [f["size"] for f in info["files"]] == SIZES
    hs = holders(me, "w-1")
    assert set(hs) == {pub.endpoint, rd.endpoint}
    assert hs[pub.endpoint]["publisher"] and \
        not hs[rd.endpoint]["publisher"]

    # the publisher stops serving: the reader serves a third fetch alone
    assert pub.ask("unregister", name="w-1") == {}
    eventually(lambda: set(holders(me, "w-1")) == {rd.endpoint},
               what="the publisher gone from the holders")
    assert me.list("w-")[0].holders == 1
    bufs = [bytearray(n) for n in SIZES]
    me.get_replica("w-1", bufs)
    assert [bytes(b) for b in bufs] == \
        [pattern(7 + i, n).tobytes() for i, n in enumerate(SIZES)]
    hs = holders(me, "w-1")
    assert hs[rd.endpoint]["served_bytes"] >= sum(SIZES)
    assert me.endpoint in hs
    me.delete_replica("w-1")
    eventually(lambda: me.endpoint not in holders(me, "w-1"),
               what="delete_replica dropping this holder")

    # the name stays taken while the checkpoint exists
    assert pub.ask("register", name="w-1", sizes=[10], seed=1) == \
        {"code": -705}
    # errors seen by a process: no such name, sizes that do not match
    assert rd.ask("get_replica", name="w-none", sizes=[10]) == \
        {"code": -704}
    assert rd.ask("unregister", name="w-none") == {"code": -704}
    pub.exit()
    rd.exit()


def test_get_replica_addresses_and_sizes(p2ps, p2p_mod):
    """Addresses as ints with size_list; sizes or counts that do not
    match the files are -600; a name fetched here already is refused
    until delete_replica."""
    pub, rd = p2ps(), p2ps()
    src = [pattern(1, 100_000), pattern(2, 3000)]
    pub.register("a", [s.ctypes.data for s in src], [s.nbytes for s in src])
    dst = [np.zeros(100_000, np.uint8), np.zeros(3000, np.uint8)]
    for sizes in ([100_000, 2999], [100_000], [100_000, 3000, 1]):
        n = len(sizes)
        addrs = [d.ctypes.data for d in dst] + [dst[0].ctypes.data] * 2
        with pytest.raises(p2p_mod.MooncakeError) as ei:
            rd.get_replica("a", addrs[:n], sizes)
        assert ei.value.code == -600, sizes
    with pytest.raises(p2p_mod.MooncakeError) as ei:
        rd.get_replica("a", dst, [100_000])   # counts differ
    assert ei.value.code == -600
    with pytest.raises(p2p_mod.MooncakeError) as ei:
        rd.get_replica("a", [bytearray(10)], [11])  # past the buffer
    assert ei.value.code == -600
    rd.get_replica("a", [d.ctypes.data for d in dst], [100_000, 3000])
    assert all(np.array_equal(d, s) for d, s in zip(dst, src))
    with pytest.raises(p2p_mod.MooncakeError) as ei:
        rd.get_replica("a", dst)   # served from dst already
    assert ei.value.code == -705
    rd.delete_replica("a")
    rd.get_replica("a", dst)
    with pytest.raises(TypeError):
        rd.get_replica("b", [b"read-only"])
    with pytest.raises(p2p_mod.MooncakeError) as ei:
        pub.register("a", [bytearray(10)])
    assert ei.value.code == -705
    pub.register("c", [b"bytes are fine to publish"])
    out = [bytearray(25)]
    rd.get_replica("c", out)
    assert out[0] == b"bytes are fine to publish"


def test_copy_failing_its_check_is_801_and_not_left(p2ps, p2p_mod):
    """A holder whose memory changed after register (its copy fails the
    crc32c recorded at publish): get_replica raised -710
    REPLICA_NOT_FOUND (the master drops a copy reported corrupt, so no
    holder was left) and left the bytes that failed the check in the
    caller's buffer. It is -801, as the README says, and that shard's
    bytes are not left there."""
    pub, rd = p2ps(), p2ps()
    src = bytearray(pattern(5, 3 * SHARD).tobytes())
    pub.register("mut", [src])
    src[100] ^= 0xFF
    out = bytearray(3 * SHARD)
    with pytest.raises(p2p_mod.MooncakeError) as ei:
        rd.get_replica("mut", [out])
    assert ei.value.code == -801, ei.value
    assert out[:SHARD] == bytes(SHARD)


# ---- ours: directories, progress, links, removal ---------------------------

def make_tree(root):
    files = {"model-1.bin": pattern(3, 5 * SHARD + 77).tobytes(),
             "model-2.bin": pattern(4, SHARD).tobytes(),
             "config.json": b'{"layers": 2}\n',
             "sub/vocab.txt": pattern(5, 9000).tobytes(),
             "empty": b""}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "config.json").chmod(0o640)
    os.symlink("model-1.bin", root / "latest.bin")
    return files


def test_publish_dir_get_dir_progress(tmp_path, p2ps, p2p_mod):
    pub, rd = p2ps(), p2ps(inflight=4)
    src = tmp_path / "src"
    src.mkdir()
    files = make_tree(src)
    total = sum(len(d) for d in files.values())

    seen = []
    pub.publish_dir(src, "ckpt-step-100", progress=seen.append)
    assert seen and seen[-1].bytes == total == seen[-1].total
    assert seen[-1].shards == seen[-1].nshards

    seen = []
    rd.get_dir("ckpt-step-100", tmp_path / "dst", progress=seen.append)
    assert all(isinstance(p, p2p_mod.Progress) for p in seen)
    got = [p.bytes for p in seen]
    assert got == sorted(got), got
    assert len(seen) >= 2 and seen[-1].bytes == seen[-1].total == total
    assert seen[-1].shards == seen[-1].nshards
    for rel, data in files.items():
        assert (tmp_path / "dst" / rel).read_bytes() == data, rel
    assert os.readlink(tmp_path / "dst" / "latest.bin") == "model-1.bin"
    assert (tmp_path / "dst" / "config.json").stat().st_mode & 0o777 == \
        0o640

    info = rd.info("ckpt-step-100")
    assert info["total_size"] == total
    assert {f["path"] for f in info["files"]} >= set(files)
    assert set(holders(rd, "ckpt-step-100")) == {pub.endpoint,
                                                 rd.endpoint}

    # a link, followed by get_dir; replaced; listed with its target
    pub.link("ckpt-latest", "ckpt-step-100")
    pub.link("ckpt-latest", "ckpt-step-100", replace=True)
    third = p2ps()
    third.get_dir("ckpt-latest", tmp_path / "via-link")
    assert (tmp_path / "via-link" / "model-2.bin").read_bytes() == \
        files["model-2.bin"]
    by_name = {e.name: e for e in third.list("ckpt-", sizes=True)}
    assert by_name["ckpt-latest"].link == "ckpt-step-100"
    assert by_name["ckpt-latest"].size_list is None
    assert sorted(by_name["ckpt-step-100"].size_list) == \
        sorted(len(d) for d in files.values())
    with pytest.raises(p2p_mod.MooncakeError) as ei:
        pub.link("ckpt-latest", "ckpt-step-100", replace=False)
    assert ei.value.code == -705

    # a progress callable that raises: the fetch completes, then raises
    def boom(p):
        raise ValueError("from progress")
    with pytest.raises(ValueError, match="from progress"):
        p2ps().get_dir("ckpt-step-100", tmp_path / "boom", progress=boom)
    assert (tmp_path / "boom" / "model-1.bin").read_bytes() == \
        files["model-1.bin"]

    # a taken name; removal for everyone
    with pytest.raises(p2p_mod.MooncakeError) as ei:
        rd.publish_dir(src, "ckpt-step-100")
    assert ei.value.code == -705
    pub.remove("ckpt-step-100")
    with pytest.raises(p2p_mod.MooncakeError) as ei:
        rd.info("ckpt-step-100")
    assert ei.value.code == -704
    with pytest.raises(p2p_mod.MooncakeError) as ei:
        third.get_dir("ckpt-step-100", tmp_path / "gone")
    assert ei.value.code == -704
    # into a directory that is not empty: the reason, not "invalid write"
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep").write_bytes(b"mine")
    with pytest.raises(p2p_mod.MooncakeError) as ei:
        third.get_dir("ckpt-latest", tmp_path / "full")
    assert ei.value.code == -700 and "not empty" in str(ei.value)
    assert os.listdir(tmp_path / "full") == ["keep"]
    assert [e.name for e in rd.list("ckpt-")] == ["ckpt-latest"]


# ---- lifecycle -------------------------------------------------------------

def test_close_and_store_close(stores, master, p2p_mod):
    # a store not set up: no P2PStore
    with pytest.raises(p2p_mod.MooncakeError) as ei:
        p2p_mod.P2PStore(stores())
    assert ei.value.code == -1010

    store = set_up(stores(), master)
    with p2p_mod.P2PStore(store, shard_size=SHARD) as p:
        assert not p.closed and p.store is store
        host, port = p.endpoint.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        buf = bytearray(b"x" * 1000)
        p.register("life-1", [buf])
        assert "closed" not in repr(p)
    assert p.closed and repr(p) == "<P2PStore closed>"
    p.close()  # twice: fine
    for call in (lambda: p.endpoint, lambda: p.list(),
                 lambda: p.info("life-1"), lambda: p.unregister("life-1"),
                 lambda: p.register("life-2", [buf]),
                 lambda: p.get_replica("life-1", [bytearray(1000)]),
                 lambda: p.publish_dir(".", "life-3"),
                 lambda: p.get_dir("life-1", "/nonexistent"),
                 lambda: p.link("life-l", "life-1"),
                 lambda: p.remove("life-1")):
        with pytest.raises(p2p_mod.MooncakeError) as ei:
            call()
        assert ei.value.code == -1010
    # closing stopped serving: nobody holds life-1 now
    q = p2p_mod.P2PStore(store)
    assert q.info("life-1")["holders"] == 0
    # the store's close closes its P2PStores first
    assert store.close() == 0
    assert q.closed
    with pytest.raises(p2p_mod.MooncakeError):
        q.list()
    q.close()

    # garbage collection closes it too (and the store outlives it)
    store = set_up(stores(), master)
    r = p2p_mod.P2PStore(store)
    fin = r._finalizer
    del r
    gc.collect()
    assert not fin.alive
    assert store.health_check() == 0


def test_close_waits_for_a_call(tmp_path, p2ps):
    """close() from another thread while get_dir runs: the fetch ends
    whole, then the handle closes."""
    pub, rd = p2ps(), p2ps(inflight=1)
    src = tmp_path / "src"
    src.mkdir()
    data = pattern(9, 32 * SHARD).tobytes()
    (src / "big").write_bytes(data)
    pub.publish_dir(src, "slow")
    started, res = threading.Event(), {}

    def slow(p):
        started.set()
        time.sleep(0.01)

    def fetch():
        try:
            rd.get_dir("slow", tmp_path / "dst", progress=slow)
            res["ok"] = True
        except Exception as e:  # noqa: BLE001 - reported below
            res["error"] = e
    t = threading.Thread(target=fetch)
    t.start()
    assert started.wait(30)
    rd.close()
    assert rd.closed
    t.join()
    assert res == {"ok": True}
    assert (tmp_path / "dst" / "big").read_bytes() == data
