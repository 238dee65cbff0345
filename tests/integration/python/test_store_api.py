# SPDX-License-Identifier: Apache-2.0
"""The rest of upstream's MooncakeDistributedStore API (issue 17) against
a real mooncake_master and two mooncake_client pool members: setup forms
connectors pass (dict with string sizes, a bare IPv6 host, setup_dummy
beside a mooncake_client), refusals that must not be a TypeError,
ReplicateConfig's fields and enums, SGLang's direct linker (get sessions
and ranged reads), get_into_ranges, put sessions, the upsert family,
put_from_with_metadata, and python -m mooncake.http_metadata_server."""
import ctypes
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import mctest

SEG = 16 << 20
BUF = 16 << 20


def addr(a):
    return a.ctypes.data


def rand(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def setup7(store, master, seg=SEG, buf=BUF, host="127.0.0.1"):
    rc = store.setup(host, master.metadata, seg, buf, "tcp", "", master.addr)
    assert rc == 0, rc
    return store


# ---- setup -----------------------------------------------------------------

def test_dict_setup_with_string_sizes(master, members, stores, mstore):
    """vLLM's older worker: setup({...}) with sizes as strings."""
    s = stores()
    assert s.setup({"local_hostname": "127.0.0.1",
                    "metadata_server": master.metadata,
                    "global_segment_size": "16MB",
                    "local_buffer_size": str(16 << 20),
                    "protocol": "tcp",
                    "device_name": "",
                    "master_server_address": master.addr}) == 0
    # The segment is really there: an object placed on it says so.
    cfg = mstore.ReplicateConfig()
    cfg.preferred_segment = s.get_hostname()
    assert s.put("on-dict-seg", b"x" * 4096, cfg) == 0
    d = s.get_replica_desc("on-dict-seg")
    assert [r.get_memory_descriptor().buffer_descriptor.transport_endpoint
            for r in d] == [s.get_hostname()]
    # Positional strings too, in the unit syntax of the C configuration.
    p = stores()
    assert p.setup("127.0.0.1", master.metadata, "8 MiB", "1.5MB", "tcp",
                   "", master.addr) == 0
    assert p.get("on-dict-seg") == b"x" * 4096
    assert mstore.parse_size("x", "4GB") == 4 << 30
    assert mstore.parse_size("x", "1.5 GiB") == 3 << 29
    assert mstore.parse_size("x", "64k") == 64 << 10
    assert mstore.parse_size("x", str(3355443200)) == 3355443200
    # a size it cannot read is a code, as upstream's ("50%")
    assert stores().setup("127.0.0.1", master.metadata, "lots", BUF, "tcp",
                          "", master.addr) == -600
    assert stores().setup({"local_hostname": "127.0.0.1",
                           "metadata_server": master.metadata,
                           "global_segment_size": "50%",
                           "master_server_address": master.addr}) == -600
    with pytest.raises(ValueError):
        mstore.parse_size("x", "1.5")        # a fraction of a byte
    with pytest.raises(ValueError):
        mstore.parse_size("x", -1)
    with pytest.raises(TypeError):
        mstore.parse_size("x", True)
    with pytest.raises(TypeError):
        mstore.parse_size("x", 1.5)


def test_sizes_past_64_bits_are_refused(master, members, stores, mstore):
    """ctypes cuts a size_t to its low 64 bits: setup() with a
    global_segment_size of 2**64 (or "16384 PiB") joined with no segment
    at all, and 2**64 - 1 read the configuration's size. "4iB", which
    the C parser refuses, was 4 bytes here. All are -600 now, as every
    size the C configuration refuses."""
    for bad in (2 ** 64, 2 ** 64 + (16 << 20), 2 ** 64 - 1, "16384PiB",
                "4iB"):
        s = stores()
        assert s.setup("127.0.0.1", master.metadata, bad, BUF, "tcp", "",
                       master.addr) == -600, bad
        assert s.setup({"local_hostname": "127.0.0.1",
                        "metadata_server": master.metadata,
                        "global_segment_size": SEG,
                        "local_buffer_size": bad,
                        "master_server_address": master.addr}) == -600, bad
    with pytest.raises(ValueError, match="too large"):
        mstore.parse_size("x", 2 ** 64)
    # what the C parser takes, Python takes alike
    for text, n in (("4Gi", 4 << 30), ("4 b", 4), ("16383PiB", 16383 << 50),
                    (str(2 ** 64 - 2), 2 ** 64 - 2)):
        assert mstore.parse_size("x", text) == n, text
    # a size that fits still joins with its segment
    s = setup7(stores(), master)
    cfg = mstore.ReplicateConfig()
    cfg.preferred_segment = s.get_hostname()
    assert s.put("fits", b"y" * 4096, cfg) == 0


@pytest.mark.skipif(not mctest.have_ipv6(), reason="no IPv6 loopback")
def test_bare_ipv6_local_hostname(master, members, stores, mstore):
    """vLLM's get_ip() on an IPv6 host gives "::1": not -600."""
    s = setup7(stores(), master, host="::1")
    assert s.get_hostname().startswith("[::1]:")
    cfg = mstore.ReplicateConfig()
    cfg.preferred_segment = s.get_hostname()
    data = rand(256 << 10, 1).tobytes()
    assert s.put("v6", data, cfg) == 0
    # another client reads it from the IPv6 segment
    other = setup7(stores(), master, seg=0)
    assert other.get("v6") == data


def test_local_hostname_not_found_is_named(master, members, stores, capfd):
    """A local_hostname that does not resolve (a container without
    /etc/hosts, a typo) fails setup naming it: it read "Unknown error
    4026" (the engine printed an internal code with strerror)."""
    s = stores()
    capfd.readouterr()
    rc = s.setup("nohost.invalid", master.metadata, SEG, BUF, "tcp", "",
                 master.addr)
    assert rc != 0
    err = capfd.readouterr().err
    assert "nohost.invalid" in err and "host name not found" in err, err
    assert "Unknown error" not in err, err


def test_features_turned_on_are_not_supported(master, members, stores,
                                              mstore):
    s = stores()
    args = ("127.0.0.1", master.metadata, 0, BUF, "tcp", "", master.addr)
    for kw in ({"enable_ssd_offload": True, "ssd_offload_path": "/tmp/x"},
               {"enable_client_http_server": True}):
        with pytest.raises(mstore.NotSupportedError) as e:
            s.setup(*args, None, **kw)
        assert not isinstance(e.value, TypeError)
        assert e.value.code == -1012
        assert s.health_check() == 1     # nothing was set up
    with pytest.raises(mstore.NotSupportedError, match="ssd"):
        s.setup({"local_hostname": "127.0.0.1",
                 "metadata_server": master.metadata,
                 "master_server_address": master.addr,
                 "enable_ssd_offload": True})
    # off, they are fine
    assert s.setup(*args, None, enable_ssd_offload=False,
                   enable_client_http_server=False, tenant_id="default") == 0


def test_setup_dummy_beside_a_mooncake_client(master, members, stores,
                                              mstore, monkeypatch):
    """SGLang's standalone storage: setup_dummy(mem_pool_size,
    local_buffer_size, client address), master and metadata from the
    environment; host memory from alloc_from_mem_pool."""
    monkeypatch.setenv("MOONCAKE_MASTER", master.addr)
    monkeypatch.setenv("MOONCAKE_TE_META_DATA_SERVER", master.metadata)
    real = members[0].name
    d = stores()
    assert d.alloc_from_mem_pool(4096) == 0        # before setup_dummy
    assert d.setup_dummy(4 << 20, BUF, real) == 0
    a1 = d.alloc_from_mem_pool(100)
    a2 = d.alloc_from_mem_pool(1 << 20)
    assert a1 and a2 and a1 % 4096 == 0 and a2 >= a1 + 4096
    assert d.alloc_from_mem_pool(8 << 20) == 0     # more than the pool
    assert d.register_buffer(a2, 1 << 20) == 0
    ctypes.memmove(a2, rand(1 << 20, 2).tobytes(), 1 << 20)
    assert d.put_from("dummy-obj", a2, 1 << 20) == 0
    # The dummy contributes no segment: its objects land in its
    # mooncake_client's memory (with two members, each of 8 puts would
    # otherwise have even odds of landing on the other).
    for i in range(8):
        assert d.put_from(f"dummy-obj{i}", a2, 4096) == 0
    for k in ["dummy-obj"] + [f"dummy-obj{i}" for i in range(8)]:
        eps = {r.get_memory_descriptor().buffer_descriptor.transport_endpoint
               for r in d.get_replica_desc(k)}
        assert eps == {real}, (k, eps)
    # An explicit preference still wins.
    cfg = mstore.ReplicateConfig()
    cfg.preferred_segment = members[1].name
    assert d.put_from("dummy-elsewhere", a2, 4096, cfg) == 0
    eps = {r.get_memory_descriptor().buffer_descriptor.transport_endpoint
           for r in d.get_replica_desc("dummy-elsewhere")}
    assert eps == {members[1].name}, eps
    other = setup7(stores(), master, seg=0)
    assert other.get("dummy-obj") == rand(1 << 20, 2).tobytes()
    # Nothing at the address: a code, not a hang or an exception.
    bad = stores()
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{sk.getsockname()[1]}"
    assert bad.setup_dummy(1 << 20, BUF, closed) == -600


# ---- ReplicateConfig and enums --------------------------------------------

class ObjStat(ctypes.Structure):
    """The head of mooncake_obj_stat_t (include/mooncake/store_fs.h), with
    room for the rest."""
    _fields_ = [("size", ctypes.c_uint64), ("mtime_ms", ctypes.c_uint64),
                ("replicas", ctypes.c_uint32), ("holds", ctypes.c_uint32),
                ("lease_ms", ctypes.c_uint64), ("hard_pin", ctypes.c_bool),
                ("soft_pin_ms", ctypes.c_uint64),
                ("version", ctypes.c_uint64),
                ("rest", ctypes.c_char * 256)]


def stat(mstore, store, key):
    st = ObjStat()
    fn = mstore._L.mooncake_store_stat
    fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ObjStat)]
    assert fn(store._h, key.encode(), ctypes.byref(st)) == 0
    return st


def test_replicate_config_fields_and_enums(master, members, stores, mstore):
    cfg = mstore.ReplicateConfig()
    assert cfg.soft_pin_ttl_ms is None
    assert cfg.soft_pin_action == mstore.SoftPinAction.PRESERVE == 0
    assert cfg.data_type == mstore.ObjectDataType.UNKNOWN
    assert cfg.group_ids is None
    assert [m.name for m in mstore.SoftPinAction] == ["PRESERVE", "ENABLE",
                                                      "DISABLE"]
    assert mstore.TaskType.REPLICA_MOVE == 1
    assert mstore.TaskStatus.SUCCESS == 3
    assert mstore.ReplicaStatus.COMPLETE == mstore.COMPLETE == 3
    assert mstore.KVCACHE == 1 and mstore.REPLICA_COPY == 0
    s = setup7(stores(), master)
    # soft_pin_action=ENABLE pins; PRESERVE does not
    pin = mstore.ReplicateConfig()
    pin.soft_pin_action = mstore.SoftPinAction.ENABLE
    assert s.put("pinned", b"p" * 100, pin) == 0
    assert s.put("unpinned", b"u" * 100) == 0
    assert stat(mstore, s, "pinned").soft_pin_ms > 0
    assert stat(mstore, s, "unpinned").soft_pin_ms == 0
    # group_ids: one string per key (SGLang's page groups), else -600
    g = mstore.ReplicateConfig()
    keys = ["g/0_k", "g/0_v", "g/1_k", "g/1_v"]
    g.group_ids = ["sglang-hicache:0", "sglang-hicache:0",
                   "sglang-hicache:1", "sglang-hicache:1"]
    buf = rand(4 << 10, 3)
    assert s.register_buffer(addr(buf), buf.nbytes) == 0
    ptrs = [addr(buf) + i * 1024 for i in range(4)]
    assert s.batch_put_from(keys, ptrs, [1024] * 4, g) == [0] * 4
    g.group_ids = ["only-two", "ids"]
    assert s.batch_put_from(["g/x", "g/y", "g/z"], ptrs[:3], [1024] * 3,
                            g) == [-600] * 3
    g.group_ids = "not-a-list"
    assert s.put_from("g/w", ptrs[0], 1024, g) == -600
    g.group_ids = ["L" * 1025]  # the longest id is 1024 bytes
    assert s.put_from("g/w", ptrs[0], 1024, g) == -600
    g.group_ids = ["L" * 1024]
    assert s.put_from("g/v", ptrs[0], 1024, g) == 0
    assert s.batch_is_exist(["g/x", "g/w", "g/v"]) == [0, 0, 1]


def test_refused_methods(master, members, stores, mstore):
    s = setup7(stores(), master, seg=0)
    for call in (lambda: s.put_tensor("k", object()),
                 lambda: s.batch_get_tensor_with_tp(["k"], 0, 2),
                 lambda: s.mount_segment("/dev/shm/x", 1 << 20),
                 lambda: s.unmount_segment(["x"]),
                 lambda: s.create_copy_task("k", ["seg"]),
                 lambda: s.query_task("id"),
                 lambda: s.batch_replica_clear(["k"])):
        with pytest.raises(mstore.NotSupportedError) as e:
            call()
        assert e.value.code == -1012
    assert s.get_offload_rpc_read_count() == 0


def test_bind_to_numa_node(mstore, tmp_path, python_env):
    node0 = "/sys/devices/system/node/node0/cpulist"
    if not os.path.exists(node0):
        pytest.skip("no NUMA information in sysfs")
    code = ("import os, sys; sys.path.insert(0, %r); "
            "import mooncake.store as s; s.bind_to_numa_node(0); "
            "print(sorted(os.sched_getaffinity(0)))"
            % os.path.join(mctest.SOURCE, "python"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, env=python_env, check=True).stdout
    cpus = set()
    for part in open(node0).read().strip().split(","):
        a, _, b = part.partition("-")
        cpus.update(range(int(a), int(b or a) + 1))
    assert eval(out) == sorted(cpus & os.sched_getaffinity(0)) or \
        eval(out) == sorted(cpus)


# ---- SGLang's direct linker: get sessions and ranged reads ------------------

def test_get_sessions_and_ranges(master, members, stores, mstore):
    """batch_get_session_start, batch_get_into_multi_buffer_ranges,
    batch_get_session_end as SGLang's mooncake_direct linker calls them:
    look up once, then read slices of each object into several
    buffers."""
    w = setup7(stores(), master)
    r = setup7(stores(), master, seg=0)
    objs = {f"page/{i}": rand(64 << 10, 10 + i) for i in range(4)}
    for k, v in objs.items():
        assert w.put(k, v.tobytes()) == 0
    dst = np.zeros(1 << 20, dtype=np.uint8)
    assert r.register_buffer(addr(dst), dst.nbytes) == 0
    keys = list(objs) + ["page/missing"]
    assert r.batch_get_session_start(keys) == [0, 0, 0, 0, -704]
    # key i: two slices, [1000, +4096) and [60000, +5536) (to the end)
    ptrs = [[addr(dst) + i * 16384, addr(dst) + i * 16384 + 4096]
            for i in range(5)]
    sizes = [[4096, 5536]] * 5
    offs = [[1000, 60000]] * 5
    got = r.batch_get_into_multi_buffer_ranges(keys, ptrs, sizes, offs)
    assert got == [9632] * 4 + [-600]
    for i, v in enumerate(objs.values()):
        b = i * 16384
        assert np.array_equal(dst[b:b + 4096], v[1000:5096])
        assert np.array_equal(dst[b + 4096:b + 9632], v[60000:])
    # a range past the end writes nothing for that key
    dst[:] = 0
    assert r.batch_get_into_multi_buffer_ranges(
        keys[:1], [[addr(dst)]], [[4096]], [[62000]]) == [-600]
    assert not dst.any()
    # The session holds the object: removed and replaced meanwhile, it
    # still reads the bytes it saw.
    assert w.remove("page/0", True) == 0
    assert w.put("page/0", b"\xff" * 100) == 0
    assert r.batch_get_into_multi_buffer_ranges(
        ["page/0"], [[addr(dst)]], [[4096]], [[0]]) == [4096]
    assert np.array_equal(dst[:4096], objs["page/0"][:4096])
    assert r.batch_get_session_end(keys) == 0
    assert r.batch_get_into_multi_buffer_ranges(
        ["page/1"], [[addr(dst)]], [[16]], [[0]]) == [-600]
    # a new session sees the new object
    assert r.batch_get_session_start(["page/0"]) == [0]
    assert r.batch_get_into_multi_buffer_ranges(
        ["page/0"], [[addr(dst)]], [[100]], [[0]]) == [100]
    assert bytes(dst[:100]) == b"\xff" * 100
    r.close()   # closes the session too


def test_get_into_ranges(master, members, stores, mstore):
    """Upstream's test file calls get_into_ranges: buffers x keys x
    ranges, results in the same shape."""
    s = setup7(stores(), master)
    a, b = rand(32 << 10, 20), rand(16 << 10, 21)
    assert s.put("r/a", a.tobytes()) == 0
    assert s.put("r/b", b.tobytes()) == 0
    d0, d1 = np.zeros(64 << 10, np.uint8), np.zeros(64 << 10, np.uint8)
    assert s.register_buffer(addr(d0), d0.nbytes) == 0
    assert s.register_buffer(addr(d1), d1.nbytes) == 0
    res = s.get_into_ranges(
        [addr(d0), addr(d1)],
        [["r/a", "r/b"], ["r/b", "r/none"]],
        [[[0, 100], [2000]], [[0], [10]]],       # dst offsets
        [[[10, 20000], [16000]], [[5], [0]]],     # src offsets
        [[[50, 1000], [384]], [[64], [8]]])       # sizes
    assert res == [[[50, 1000], [384]], [[64], [-704]]]
    assert np.array_equal(d0[0:50], a[10:60])
    assert np.array_equal(d0[100:1100], a[20000:21000])
    assert np.array_equal(d0[2000:2384], b[16000:])
    assert np.array_equal(d1[0:64], b[5:69])
    assert not d1[64:].any()
    # mismatched shapes are -600, per range
    assert s.get_into_ranges([addr(d0)], [["r/a"]], [[[0, 1]]], [[[0]]],
                             [[[1]]]) == [[[-600, -600]]]
    # past the object's end, past the registered buffer's end, or in a
    # buffer not registered: -600, nothing copied (upstream's checks)
    d0[:] = 0
    assert s.get_into_ranges([addr(d0)], [["r/b"]], [[[0]]], [[[16000]]],
                             [[[1000]]]) == [[[-600]]]
    assert s.get_into_ranges([addr(d0) + (60 << 10)], [["r/a"]], [[[0]]],
                             [[[0]]], [[[8192]]]) == [[[-600]]]
    assert not d0.any()
    loose = np.zeros(4096, np.uint8)
    assert s.get_into_ranges([addr(loose)], [["r/a"]], [[[0]]], [[[8]]],
                             [[[16]]]) == [[[-600]]]
    assert not loose.any()
    # after unregister_buffer the buffer is refused too
    assert s.unregister_buffer(addr(d1)) == 0
    assert s.get_into_ranges([addr(d1)], [["r/a"]], [[[0]]], [[[0]]],
                             [[[16]]]) == [[[-600]]]


def test_ranges_refuse_negative_offsets_and_sizes(master, members, stores):
    """Offsets and sizes of the ranged reads are non-negative ints: a
    negative destination offset wrote before the registered buffer (far
    before it, the process died of SIGSEGV), a negative source offset
    read 0 bytes and size -1 copied the whole object past the buffer's
    end. Each is -600 now, and nothing is copied."""
    s = setup7(stores(), master)
    obj = rand(4096, 40)
    assert s.put("neg/a", obj.tobytes()) == 0
    arena = np.zeros(3 * 4096, np.uint8)
    mid = addr(arena) + 4096          # 100 registered bytes in the middle
    assert s.register_buffer(mid, 100) == 0
    for dst, src, size in [(-4096, 0, 4096), (0, -100, 200), (0, 0, -1),
                           (-1, 0, 1), (0, 0, 1.0), (0, None, 1)]:
        assert s.get_into_ranges([mid], [["neg/a"]], [[[dst]]], [[[src]]],
                                 [[[size]]]) == [[[-600]]], (dst, src, size)
    assert not arena.any()
    # a range that is all right still copies, beside a bad one
    assert s.get_into_ranges([mid], [["neg/a"]], [[[10, -10]]],
                             [[[100, 0]]], [[[90, 10]]]) == [[[90, -600]]]
    assert np.array_equal(arena[4106:4196], obj[100:190])
    arena[4106:4196] = 0
    # far before the buffer (this was a SIGSEGV), and a negative buffer
    assert s.get_into_ranges([mid], [["neg/a"]], [[[-(1 << 40)]]], [[[0]]],
                             [[[16]]]) == [[[-600]]]
    assert s.get_into_ranges([-mid], [["neg/a"]], [[[0]]], [[[0]]],
                             [[[16]]]) == [[[-600]]]
    # the session form: -600 for the key, nothing copied
    assert s.batch_get_session_start(["neg/a"]) == [0]
    for size, src in [(-1, 0), (16, -50), (-16, 32)]:
        assert s.batch_get_into_multi_buffer_ranges(
            ["neg/a"], [[mid]], [[size]], [[src]]) == [-600], (size, src)
    assert s.batch_get_into_multi_buffer_ranges(
        ["neg/a"], [[mid, mid + 50]], [[50, 50]], [[0, -50]]) == [-600]
    assert not arena.any()
    assert s.batch_get_into_multi_buffer_ranges(
        ["neg/a"], [[mid]], [[100]], [[0]]) == [100]
    assert np.array_equal(arena[4096:4196], obj[:100])
    assert s.batch_get_session_end(["neg/a"]) == 0


def test_session_ranges_need_registered_buffers(master, members, stores):
    """batch_get_into_multi_buffer_ranges and
    batch_put_from_multi_buffer_ranges take memory registered with
    register_buffer, as get_into_ranges does: they copied into or out of
    any address (the staging buffer made it work), so memory never
    registered was written and a bad pointer killed the process. A range
    not inside a registered buffer is -600 for its key, nothing
    copied."""
    s = setup7(stores(), master)
    obj = rand(8192, 41)
    assert s.put("sr/a", obj.tobytes()) == 0
    buf = np.zeros(8192, np.uint8)
    assert s.register_buffer(addr(buf), 4096) == 0     # the first half
    loose = bytearray(4096)                             # never registered
    la = ctypes.addressof(ctypes.c_char.from_buffer(loose))
    assert s.batch_get_session_start(["sr/a"]) == [0]
    got = s.batch_get_into_multi_buffer_ranges
    assert got(["sr/a"], [[la]], [[100]], [[0]]) == [-600]
    assert not any(loose)
    # past the registered half, beside a good range: nothing copied
    assert got(["sr/a"], [[addr(buf), addr(buf) + 4000]], [[16, 200]],
               [[0, 0]]) == [-600]
    assert got(["sr/a"], [[addr(buf) + 4096]], [[16]], [[0]]) == [-600]
    assert not buf.any()
    assert got(["sr/a"], [[addr(buf), addr(buf) + 96]], [[96, 4000]],
               [[4096, 4192]]) == [4096]
    assert np.array_equal(buf[:4096], obj[4096:])
    # addresses nobody mapped (these killed the process)
    assert got(["sr/a"], [[0x1000]], [[16]], [[0]]) == [-600]
    assert got(["sr/a"], [[0]], [[16]], [[0]]) == [-600]
    assert s.batch_get_session_end(["sr/a"]) == 0
    # put sessions likewise
    assert s.batch_put_session_start(["sr/w"], [4096]) == [0]
    put = s.batch_put_from_multi_buffer_ranges
    loose[:] = obj[:4096].tobytes()
    for ptr, size, off in [(la, 4096, 0), (addr(buf) + 4000, 200, 0),
                           (0x1000, 100, 0), (addr(buf), -1, 0),
                           (addr(buf), 16, -16), (-addr(buf), 16, 0)]:
        assert put(["sr/w"], [[ptr]], [[size]], [[off]]) == [-600], \
            (ptr, size, off)
    assert put(["sr/w"], [[addr(buf), la]], [[2048, 2048]],
               [[0, 2048]]) == [-600]
    assert put(["sr/w"], [[addr(buf)]], [[4096]], [[0]]) == [0]
    assert s.batch_put_session_end(["sr/w"]) == [0]
    assert s.get("sr/w") == obj[4096:].tobytes()
    assert s.unregister_buffer(addr(buf)) == 0


# ---- put sessions, upserts ---------------------------------------------------

def test_put_sessions(master, members, stores, mstore):
    s = setup7(stores(), master)
    src = rand(64 << 10, 30)
    assert s.register_buffer(addr(src), src.nbytes) == 0
    keys = ["ps/a", "ps/b", "ps/c"]
    assert s.batch_put_session_start(keys, [8192, 4096, 100]) == [0, 0, 0]
    assert s.batch_is_exist(keys) == [0, 0, 0]      # not readable yet
    # a: two ranges, written back to front; b: one; c: nothing (zeros)
    res = s.batch_put_from_multi_buffer_ranges(
        keys[:2], [[addr(src) + 4096, addr(src)], [addr(src) + 100]],
        [[4096, 4096], [4096]], [[4096, 0], [0]])
    assert res == [0, 0]
    assert s.batch_put_from_multi_buffer_ranges(
        ["ps/a"], [[addr(src)]], [[16]], [[8190]]) == [-600]   # past end
    assert s.batch_put_from_multi_buffer_ranges(
        ["ps/none"], [[addr(src)]], [[16]], [[0]]) == [-600]
    assert s.batch_put_session_end(keys[:2]) == [0, 0]
    assert s.batch_put_session_end(keys[2:]) == [0]
    assert s.get("ps/a") == src[:8192].tobytes()
    assert s.get("ps/b") == src[100:4196].tobytes()
    assert s.get("ps/c") == bytes(100)
    # an existing key cannot start a session; a revoked one leaves nothing
    assert s.batch_put_session_start(["ps/a"], [10]) == [-705]
    assert s.batch_put_session_start(["ps/r"], [4096]) == [0]
    assert s.batch_put_session_revoke(["ps/r"]) == [0]
    assert s.is_exist("ps/r") == 0
    assert s.batch_put_session_end(["ps/r"]) == [-600]


def test_upserts(master, members, stores, mstore):
    s = setup7(stores(), master)
    r = setup7(stores(), master, seg=0)
    assert s.put("u/1", b"old") == 0
    assert s.put("u/1", b"new") == 0 and s.get("u/1") == b"old"  # immutable
    # a reader holding the old object keeps it across the upsert
    dst = np.zeros(4096, np.uint8)
    assert r.register_buffer(addr(dst), dst.nbytes) == 0
    assert r.batch_get_session_start(["u/1"]) == [0]
    assert s.upsert("u/1", b"new") == 0
    assert s.get("u/1") == b"new"
    assert r.batch_get_into_multi_buffer_ranges(
        ["u/1"], [[addr(dst)]], [[3]], [[0]]) == [3]
    assert bytes(dst[:3]) == b"old"
    assert r.batch_get_session_end(["u/1"]) == 0
    assert s.upsert("u/2", b"fresh") == 0 and s.get("u/2") == b"fresh"
    assert s.upsert_parts("u/1", b"a", b"bc") == 0
    assert s.get("u/1") == b"abc"
    assert s.upsert_batch(["u/1", "u/3"], [b"one", b"three"]) == 0
    assert s.get_batch(["u/1", "u/3"]) == [b"one", b"three"]
    src = rand(8192, 31)
    assert s.register_buffer(addr(src), src.nbytes) == 0
    assert s.upsert_from("u/3", addr(src), 4096) == 0
    assert s.get("u/3") == src[:4096].tobytes()
    assert s.batch_upsert_from(["u/1", "u/4"], [addr(src), addr(src) + 4096],
                               [100, 4096]) == [0, 0]
    assert s.get("u/1") == src[:100].tobytes()
    assert s.get("u/4") == src[4096:].tobytes()
    # failures are codes; no temporary key is left behind
    assert s.batch_upsert_from(["u/1"], [12345], [100]) == [-600]
    assert s.get("u/1") == src[:100].tobytes()
    assert s.remove_by_regex(r".*\.mc-upsert\..*", True) == 0
    # put_from_with_metadata: one object, metadata first
    meta = np.frombuffer(b"HEADER", np.uint8).copy()
    assert s.register_buffer(addr(meta), meta.nbytes) == 0
    assert s.put_from_with_metadata("u/m", addr(src), addr(meta), 64, 6) == 0
    assert s.get("u/m") == b"HEADER" + src[:64].tobytes()


def test_upsert_of_a_long_key(master, members, stores):
    """Any key put takes, upsert takes: its temporary key
    "<key>.mc-upsert.<16 hex>" made a key of more than 4068 bytes too
    long (-400), a tenant's more so (its prefix counts)."""
    s = setup7(stores(), master)
    long = "L" * 4090
    assert s.put(long, b"old") == 0
    assert s.upsert(long, b"new") == 0
    assert s.get(long) == b"new"
    assert s.upsert_batch([long, "ul/short"], [b"two", b"s"]) == 0
    assert s.get_batch([long, "ul/short"]) == [b"two", b"s"]
    assert s.upsert_parts("M" * 4096, b"a", b"b") == 0    # the longest
    assert s.get("M" * 4096) == b"ab"
    assert s.put("L" * 4097, b"x") == -400               # too long
    assert s.upsert("L" * 4097, b"x") == -400
    # a tenant's key: the master's key is ".tenants/t1/<key>"
    t = stores()
    assert t.setup("127.0.0.1", master.metadata, 0, BUF, "tcp", "",
                   master.addr, tenant_id="t1") == 0
    tk = "T" * (4096 - len(".tenants/t1/"))
    assert t.put(tk, b"old") == 0
    assert t.upsert(tk, b"new") == 0 and t.get(tk) == b"new"
    # no temporary key is left behind, in either
    assert s.remove_by_regex(r".*\.mc-upsert\..*", True) == 0
    assert t.remove_by_regex(r".*\.mc-upsert\..*", True) == 0


def test_zero_copy_numbers_are_ints(master, members, stores):
    """Addresses and sizes of the zero-copy calls are ints >= 0: a float
    raised ctypes.ArgumentError ("argument 4: TypeError: wrong type"), a
    negative size was taken for 2**64 - 1, and a float in a batch's list
    was truncated. Each raises TypeError naming the call and the argument
    now (upstream's binding raises TypeError), and nothing is done."""
    s = setup7(stores(), master)
    obj = rand(4096, 41)
    assert s.put("zc/a", obj.tobytes()) == 0
    arena = np.zeros(8192, np.uint8)
    a = addr(arena)
    assert s.register_buffer(a, arena.nbytes) == 0
    calls = [
        (lambda: s.get_into("zc/a", a, 4096.0), "get_into(): size"),
        (lambda: s.get_into("zc/a", a, -1), "get_into(): size"),
        (lambda: s.get_into("zc/a", float(a), 4096), "get_into(): buffer_ptr"),
        (lambda: s.get_into("zc/a", None, 4096), "get_into(): buffer_ptr"),
        (lambda: s.put_from("zc/b", a, 1.5), "put_from(): size"),
        (lambda: s.put_from("zc/b", a, -4096), "put_from(): size"),
        (lambda: s.upsert_from("zc/b", a, -1), "upsert_from(): size"),
        (lambda: s.batch_get_into(["zc/a", "zc/a"], [a, a + 4096],
                                  [4096, 4096.5]),
         "batch_get_into(): sizes[1]"),
        (lambda: s.batch_put_from(["zc/b", "zc/c"], [a, -a], [16, 16]),
         "batch_put_from(): buffer_ptrs[1]"),
        (lambda: s.batch_upsert_from(["zc/b"], [a], ["16"]),
         "batch_upsert_from(): sizes[0]"),
        (lambda: s.batch_put_from_multi_buffers(
            ["zc/b", "zc/c"], [[a], [a, a + 8]], [[8], [8, -8]]),
         "batch_put_from_multi_buffers(): all_sizes[1][1]"),
        (lambda: s.batch_get_into_multi_buffers(
            ["zc/a"], [[a, 1.0]], [[8, 8]]),
         "batch_get_into_multi_buffers(): all_buffer_ptrs[0][1]"),
        (lambda: s.put_from_with_metadata("zc/b", a, a + 64, 64, -1),
         "put_from_with_metadata(): metadata_size"),
        (lambda: s.register_buffer(a, -1), "register_buffer(): size"),
        (lambda: s.register_buffer(1.5, 64), "register_buffer(): buffer_ptr"),
        (lambda: s.unregister_buffer(float(a)),
         "unregister_buffer(): buffer_ptr"),
    ]
    for call, what in calls:
        with pytest.raises(TypeError) as e:
            call()
        assert str(e.value).startswith(what + " must be an int >= 0"), \
            (what, str(e.value))
    assert not arena.any()
    assert s.batch_is_exist(["zc/b", "zc/c"]) == [0, 0]
    # still registered, and ints (numpy's too) work
    assert s.get_into("zc/a", np.uint64(a), np.int64(4096)) == 4096
    assert np.array_equal(arena[:4096], obj)


def test_put_session_sizes_are_positive(master, members, stores):
    """A put session of size 0 committed an empty object, which put
    refuses (-600); a negative size was -200 (NO_AVAILABLE_HANDLE), and
    a float was taken. Each is -600 at batch_put_session_start now."""
    s = setup7(stores(), master)
    assert s.put("ps0/a", b"") == -600
    keys = ["ps0/a", "ps0/b", "ps0/c", "ps0/d"]
    assert s.batch_put_session_start(keys, [0, -1, 1.0, 4096]) == \
        [-600, -600, -600, 0]
    assert s.batch_put_session_end(keys) == [-600, -600, -600, 0]
    assert s.batch_is_exist(keys) == [0, 0, 0, 1]


# ---- python -m mooncake.http_metadata_server --------------------------------

def test_http_metadata_server_module(tmp_path):
    """SGLang's README starts the metadata service this way; engines then
    find each other through it."""
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    # The module loads no library: it runs mooncake_metad in its place, so
    # it gets no preloaded sanitizer runtime (an ASan build's daemons carry
    # their own).
    env = dict(os.environ, PYTHONPATH=os.path.join(mctest.SOURCE, "python"),
               MC_BUILD_DIR=mctest.BUILD)
    log = open(tmp_path / "meta.log", "wb")
    p = subprocess.Popen([sys.executable, "-m",
                          "mooncake.http_metadata_server", "--host",
                          "127.0.0.1", "--port", str(port)], env=env,
                         stdout=log, stderr=log)
    try:
        mctest.wait_for(lambda: mctest.request(port, "GET", "/health")[0]
                        == 200, what="metadata server")
        assert mctest.request(port, "PUT", "/metadata?key=k1",
                              b"v1")[0] == 200
        st, body = mctest.request(port, "GET", "/metadata?key=k1")[:2]
        assert (st, body) == (200, b"v1")
        assert mctest.request(port, "GET", "/metadata?key=nope")[0] == 404
        # a transfer engine registers itself there
        import mooncake.engine as me
        e = me.TransferEngine()
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            name = f"127.0.0.1:{sk.getsockname()[1]}"
        assert e.initialize(name, f"http://127.0.0.1:{port}/metadata",
                            "tcp", "") == 0
        st = mctest.request(port, "GET",
                            f"/metadata?key=mooncake/rpc_meta/{name}")[0]
        assert st == 200
        e.close()
    finally:
        p.terminate()
        p.wait(timeout=10)
    bad = subprocess.run([sys.executable, "-m",
                          "mooncake.http_metadata_server"],
                         env=dict(env, MOONCAKE_METAD="/nonexistent"),
                         capture_output=True, text=True)
    assert bad.returncode == 127 and "mooncake_metad" in bad.stderr


def test_setup_with_a_transfer_engine(master, members, stores, mstore):
    """SGLang passes its disaggregation engine (get_engine()) to setup:
    accepted, not shared (the store runs its own, and says so)."""
    import mooncake.engine as me
    te = me.TransferEngine()
    assert te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    s = stores()
    assert s.setup("127.0.0.1", master.metadata, SEG, BUF, "tcp", "",
                   master.addr, te.get_engine()) == 0
    assert s.get_hostname() != te.get_session_id()
    assert s.put("with-te", b"v") == 0 and s.get("with-te") == b"v"
    te.close()
