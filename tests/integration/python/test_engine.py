# SPDX-License-Identifier: Apache-2.0
"""mooncake.engine.TransferEngine (ctypes over libte, exported by
libmooncake.so): disaggregated prefill/decode as vLLM's MooncakeConnector
and SGLang's mooncake backend run it, with a prefill PROCESS writing KV
blocks into a decode PROCESS's registered memory and notifying it (over
P2PHANDSHAKE, a real mooncake_metad, and IPv6); then each method's return
conventions between two engines of this process: registration codes,
sync, batch and async transfers and their status, managed buffers, the
bytes helpers, notifications, and what is refused."""
import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import mctest

LAYERS, BLOCKS, BLOCK = 4, 32, 16 << 10
P2P = "P2PHANDSHAKE"

# Runs in both processes: the package from this checkout.
COMMON = textwrap.dedent(f"""
    import json, sys, time
    import numpy as np
    sys.path.insert(0, {os.path.join(mctest.SOURCE, "python")!r})
    from mooncake.engine import (TransferEngine, TransferNotify,
                                 TransferOpcode)
    LAYERS, BLOCKS, BLOCK = {LAYERS}, {BLOCKS}, {BLOCK}

    def pattern(layer):
        return np.random.default_rng(100 + layer).integers(
            0, 256, (BLOCKS, BLOCK), dtype=np.uint8)
""")

# The decode instance: registers its KV cache (one tensor per layer, as
# vLLM registers kv_caches), tells the prefill side where it is, waits for
# the notification naming the request, then checks every block.
DECODE = COMMON + textwrap.dedent("""
    host, meta = sys.argv[1], sys.argv[2]
    eng = TransferEngine()
    assert eng.initialize(host, meta, "tcp", "") == 0
    kv = [np.zeros((BLOCKS, BLOCK), dtype=np.uint8) for _ in range(LAYERS)]
    rc = eng.batch_register_memory([t.ctypes.data for t in kv],
                                   [t.nbytes for t in kv])
    assert rc == 0, rc
    session = (f"{host}:{eng.get_rpc_port()}" if meta == "P2PHANDSHAKE"
               else host)
    print(json.dumps({"session": session,
                      "kv": [t.ctypes.data for t in kv]}), flush=True)
    got, deadline = [], time.monotonic() + 60
    while not any(n.name == "req-1" for n in got):
        assert time.monotonic() < deadline, "no notification"
        got += eng.get_notifies()
        time.sleep(0.005)
    note = next(n for n in got if n.name == "req-1")
    mapping = json.loads(note.msg)
    bad = []
    for layer in range(LAYERS):
        want = pattern(layer)
        for src, dst in zip(mapping["src"], mapping["dst"]):
            if not np.array_equal(kv[layer][dst], want[src]):
                bad.append([layer, dst])
        untouched = set(range(BLOCKS)) - set(mapping["dst"])
        for b in untouched:
            if kv[layer][b].any():
                bad.append([layer, b, "written"])
    print(json.dumps({"bad": bad, "notifies": [[n.name, n.msg]
                                               for n in got]}), flush=True)
""")

# The prefill instance: its KV cache holds the pattern; blocks go to the
# decode side per layer, contiguous runs merged (as vLLM's connector
# groups them), the first layers with batch_transfer_async_write and one
# get_batch_transfer_status, the last with batch_transfer_sync and the
# notification once everything has landed.
PREFILL = COMMON + textwrap.dedent("""
    host, meta, session = sys.argv[1], sys.argv[2], sys.argv[3]
    remote = json.loads(sys.argv[4])
    src_blocks = [1, 2, 3, 7, 8, 20, 31]
    dst_blocks = [5, 6, 7, 0, 1, 30, 12]
    eng = TransferEngine()
    assert eng.initialize(host, meta, "tcp", "") == 0
    kv = [pattern(layer) for layer in range(LAYERS)]
    for t in kv:
        assert eng.register_memory(t.ctypes.data, t.nbytes) == 0

    def runs():
        out, i = [], 0
        while i < len(src_blocks):
            j = i
            while (j + 1 < len(src_blocks) and
                   src_blocks[j + 1] == src_blocks[j] + 1 and
                   dst_blocks[j + 1] == dst_blocks[j] + 1):
                j += 1
            out.append((src_blocks[i], dst_blocks[i], j - i + 1))
            i = j + 1
        return out

    def layer_reqs(layer):
        src = [kv[layer].ctypes.data + s * BLOCK for s, _, _ in runs()]
        dst = [remote[layer] + d * BLOCK for _, d, _ in runs()]
        return src, dst, [n * BLOCK for _, _, n in runs()]

    ids = []
    for layer in range(LAYERS - 1):
        bid = eng.batch_transfer_async_write(session, *layer_reqs(layer))
        assert bid != 0
        ids.append(bid)
    assert eng.get_batch_transfer_status(ids) == 0
    note = TransferNotify("req-1", json.dumps({"src": src_blocks,
                                               "dst": dst_blocks}))
    rc = eng.batch_transfer_sync(session, *layer_reqs(LAYERS - 1),
                                 TransferOpcode.WRITE, note)
    assert rc == 0, rc
    print(json.dumps({"runs": len(runs())}), flush=True)
""")


def run_pd(tmp_path, python_env, meta, decode_host, prefill_host):
    (tmp_path / "decode.py").write_text(DECODE)
    (tmp_path / "prefill.py").write_text(PREFILL)
    dec = subprocess.Popen(
        [sys.executable, str(tmp_path / "decode.py"), decode_host, meta],
        stdout=subprocess.PIPE, stderr=open(tmp_path / "decode.err", "wb"),
        env=python_env, text=True)
    try:
        hello = json.loads(dec.stdout.readline() or "null")
        assert hello, (tmp_path / "decode.err").read_text()
        pre = subprocess.run(
            [sys.executable, str(tmp_path / "prefill.py"), prefill_host,
             meta, hello["session"], json.dumps(hello["kv"])],
            capture_output=True, text=True, env=python_env, timeout=120)
        assert pre.returncode == 0, pre.stderr
        assert json.loads(pre.stdout)["runs"] == 4
        out, _ = dec.communicate(timeout=60)
        assert dec.returncode == 0, (tmp_path / "decode.err").read_text()
    finally:
        if dec.poll() is None:
            dec.kill()
            dec.wait()
    res = json.loads(out)
    assert res["bad"] == []
    # exactly one notification, the one sent after the data
    assert [n[0] for n in res["notifies"]] == ["req-1"]
    return hello


def test_pd_disaggregation_p2p(tmp_path, python_env):
    """vLLM MooncakeConnector's shape: P2PHANDSHAKE, the decode side
    addressed as f"{host}:{get_rpc_port()}"."""
    hello = run_pd(tmp_path, python_env, P2P, "127.0.0.1", "127.0.0.1")
    assert hello["session"].startswith("127.0.0.1:")


def test_pd_disaggregation_metad(tmp_path, python_env, procs):
    """SGLang's shape with a metadata service: engines named host:port,
    found through a real mooncake_metad."""
    d = procs.start_metad(tmp_path)
    run_pd(tmp_path, python_env, d.url, f"127.0.0.1:{mctest.free_port()}",
           f"127.0.0.1:{mctest.free_port()}")


@pytest.mark.skipif(not mctest.have_ipv6(), reason="no IPv6 loopback")
def test_pd_disaggregation_ipv6(tmp_path, python_env):
    """A bare IPv6 local_hostname ("::1", vLLM's get_ip() on IPv6 hosts)
    and the unbracketed f"{ip}:{port}" session vLLM builds from it."""
    hello = run_pd(tmp_path, python_env, P2P, "::1", "::1")
    assert hello["session"].startswith("::1:")


# ---- two engines of this process -------------------------------------------

@pytest.fixture
def meng():
    import mooncake.engine
    return mooncake.engine


@pytest.fixture
def pair(meng):
    """Two initialized engines (P2PHANDSHAKE) and the second's session."""
    a, b = meng.TransferEngine(), meng.TransferEngine()
    assert a.initialize("127.0.0.1", P2P, "tcp", "") == 0
    assert b.initialize("127.0.0.1", P2P, "tcp", "") == 0
    yield a, b, f"127.0.0.1:{b.get_rpc_port()}"
    a.close()
    b.close()


def buf(n, seed=None):
    if seed is None:
        return np.zeros(n, dtype=np.uint8)
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def test_registration_codes(pair, meng):
    a, _, _ = pair
    x, y = buf(1 << 16), buf(1 << 16)
    assert a.register_memory(x.ctypes.data, x.nbytes) == 0
    assert a.register_memory(x.ctypes.data + 4096, 4096) == \
        meng.ERR_ADDRESS_OVERLAPPED == -7
    assert a.unregister_memory(y.ctypes.data) == \
        meng.ERR_ADDRESS_NOT_REGISTERED == -3
    assert a.unregister_memory(x.ctypes.data) == 0
    assert a.unregister_memory(x.ctypes.data) == -3
    # batch: all or nothing
    assert a.batch_register_memory([x.ctypes.data, y.ctypes.data],
                                   [x.nbytes, y.nbytes]) == 0
    assert a.batch_unregister_memory([x.ctypes.data, y.ctypes.data]) == 0
    assert a.register_memory(y.ctypes.data, y.nbytes) == 0
    assert a.batch_register_memory([x.ctypes.data, y.ctypes.data],
                                   [x.nbytes, y.nbytes]) == -7
    assert a.register_memory(x.ctypes.data, x.nbytes) == 0  # rolled back
    assert a.batch_register_memory([x.ctypes.data], [1, 2]) == -1


def test_sync_read_write(pair):
    a, b, sess = pair
    src, dst = buf(3 << 20, 1), buf(3 << 20)
    assert a.register_memory(src.ctypes.data, src.nbytes) == 0
    assert b.register_memory(dst.ctypes.data, dst.nbytes) == 0
    assert a.transfer_sync_write(sess, src.ctypes.data, dst.ctypes.data,
                                 1 << 20) == 0
    assert np.array_equal(dst[:1 << 20], src[:1 << 20])
    assert not dst[1 << 20:].any()
    back = buf(1 << 20)
    assert a.register_memory(back.ctypes.data, back.nbytes) == 0
    assert a.transfer_sync_read(sess, back.ctypes.data,
                                dst.ctypes.data + 4096, 1 << 20) == 0
    assert np.array_equal(back, dst[4096:4096 + (1 << 20)])
    # batches, many small requests
    n, size = 200, 4096
    ptrs = [src.ctypes.data + i * size for i in range(n)]
    rptr = [dst.ctypes.data + (n - 1 - i) * size for i in range(n)]
    assert a.batch_transfer_sync_write(sess, ptrs, rptr, [size] * n) == 0
    for i in range(n):
        assert np.array_equal(dst[(n - 1 - i) * size:(n - i) * size],
                              src[i * size:(i + 1) * size])
    back[:] = 0
    assert a.batch_transfer_sync_read(sess, [back.ctypes.data],
                                      [dst.ctypes.data], [size]) == 0
    assert np.array_equal(back[:size], dst[:size])
    # Sync transfers to one peer over an idle connection move on the
    # calling thread (te_batch_transfer), counted apart; bytes the same.
    for i in range(4):
        back[:size] = 0
        assert a.transfer_sync_read(sess, back.ctypes.data,
                                    dst.ctypes.data + i * size, size) == 0
        assert np.array_equal(back[:size], dst[i * size:(i + 1) * size])
    assert a.transfer_stats("tcp")["caller_requests"] > 0


def test_transfer_failures(pair):
    a, b, sess = pair
    src, dst = buf(1 << 16, 2), buf(1 << 16)
    assert b.register_memory(dst.ctypes.data, dst.nbytes) == 0
    # local memory not registered
    assert a.transfer_sync_write(sess, src.ctypes.data, dst.ctypes.data,
                                 16) == -1
    assert a.register_memory(src.ctypes.data, src.nbytes) == 0
    # remote address outside the peer's registered memory
    assert a.transfer_sync_write(sess, src.ctypes.data, 4096, 16) == -1
    # past the end of the peer's buffer
    assert a.transfer_sync_write(sess, src.ctypes.data,
                                 dst.ctypes.data + dst.nbytes - 8, 16) == -1
    assert not dst.any()
    # unknown peer, mismatched lists
    assert a.transfer_sync_write("127.0.0.1:1", src.ctypes.data,
                                 dst.ctypes.data, 16) == -1
    assert a.batch_transfer_sync_write(sess, [src.ctypes.data], [], [16]) \
        == -1
    assert a.batch_transfer_async_write(sess, [src.ctypes.data],
                                        [dst.ctypes.data], []) == 0
    # a batch (past 64 requests) whose last request is refused starts
    # none of them
    loose = buf(4096, 9)
    ptrs = [src.ctypes.data + i * 64 for i in range(99)] + [loose.ctypes.data]
    assert a.batch_transfer_sync_write(
        sess, ptrs, [dst.ctypes.data + i * 64 for i in range(100)],
        [64] * 100) == -1
    time.sleep(0.2)
    assert not dst.any()
    # and it still works afterwards
    assert a.transfer_sync_write(sess, src.ctypes.data, dst.ctypes.data,
                                 16) == 0
    assert np.array_equal(dst[:16], src[:16])


def test_target_that_is_no_name(pair, meng):
    """A target that is not a segment name (None, an int, "") fails as
    an unknown peer does: it raised AttributeError."""
    a, b, sess = pair
    src, dst = buf(4096, 4), buf(4096)
    assert a.register_memory(src.ctypes.data, src.nbytes) == 0
    assert b.register_memory(dst.ctypes.data, dst.nbytes) == 0
    s, d = src.ctypes.data, dst.ctypes.data
    for target in (None, 1234, ""):
        assert a.transfer_sync_write(target, s, d, 16) == -1
        assert a.transfer_sync_read(target, s, d, 16) == -1
        assert a.transfer_sync(target, s, d, 16, meng.TransferOpcode.Write,
                               meng.TransferNotify("n", "m")) == -1
        assert a.batch_transfer_sync_write(target, [s], [d], [16]) == -1
        assert a.batch_transfer_async_write(target, [s], [d], [16]) == 0
        assert a.transfer_submit_write(target, s, d, 16) == -1
        assert a.get_first_buffer_address(target) == 0
        assert a.send_probe(target) == -1
    assert not dst.any()
    assert b.get_notifies() == []
    assert a.transfer_sync_write(sess, s, d, 16) == 0
    assert np.array_equal(dst[:16], src[:16])


def test_async_and_status(pair):
    a, b, sess = pair
    src, dst = buf(4 << 20, 3), buf(4 << 20)
    assert a.register_memory(src.ctypes.data, src.nbytes) == 0
    assert b.register_memory(dst.ctypes.data, dst.nbytes) == 0
    ids = []
    for i in range(4):
        off = i << 20
        bid = a.batch_transfer_async_write(sess, [src.ctypes.data + off],
                                           [dst.ctypes.data + off], [1 << 20])
        assert bid > 0
        ids.append(bid)
    assert len(set(ids)) == 4
    assert a.get_batch_transfer_status(ids) == 0
    assert np.array_equal(src, dst)
    # ids are released: asking again is a failure
    assert a.get_batch_transfer_status(ids[:1]) == -1
    # one failing batch among good ones
    good = a.batch_transfer_async_read(sess, [src.ctypes.data],
                                       [dst.ctypes.data], [4096])
    bad = a.batch_transfer_async_read(sess, [src.ctypes.data], [4096],
                                      [4096])
    assert good and bad
    assert a.get_batch_transfer_status([good, bad]) == -1
    # transfer_submit_write + transfer_check_status
    dst[:] = 0
    bid = a.transfer_submit_write(sess, src.ctypes.data, dst.ctypes.data,
                                  1 << 20)
    assert bid > 0
    deadline = time.monotonic() + 30
    while (st := a.transfer_check_status(bid)) == 0:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert st == 1
    assert np.array_equal(dst[:1 << 20], src[:1 << 20])
    assert a.transfer_check_status(bid) == -1  # released
    bid = a.transfer_submit_write(sess, src.ctypes.data, 4096, 16)
    assert bid > 0
    deadline = time.monotonic() + 30
    while (st := a.transfer_check_status(bid)) == 0:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert st == -1
    assert a.transfer_submit_write("127.0.0.1:1", src.ctypes.data, 0, 1) \
        == -1


def test_opcodes(meng):
    assert meng.TransferOpcode.Read == meng.TransferOpcode.READ == 0
    assert meng.TransferOpcode.Write == meng.TransferOpcode.WRITE == 1
    assert meng.TransferEngine.TransferOpcode is meng.TransferOpcode
    assert meng.Write == 1
    n = meng.TransferNotify("a", "b")
    assert (n.name, n.msg) == ("a", "b")
    assert meng.TransferNotify().name == ""


def test_notifications(pair, meng):
    a, b, sess = pair
    src, dst = buf(4096, 4), buf(4096)
    assert a.register_memory(src.ctypes.data, src.nbytes) == 0
    assert b.register_memory(dst.ctypes.data, dst.nbytes) == 0
    assert b.get_notifies() == []
    for i in range(100):
        n = meng.TransferNotify(f"req-{i}", f"msg {i} é")
        assert a.transfer_sync(sess, src.ctypes.data, dst.ctypes.data + i,
                               1, meng.TransferOpcode.Write, n) == 0
    got, deadline = [], time.monotonic() + 10
    while len(got) < 100 and time.monotonic() < deadline:
        got += b.get_notifies()
    assert [(n.name, n.msg) for n in got] == \
        [(f"req-{i}", f"msg {i} é") for i in range(100)]
    assert b.get_notifies() == []
    assert a.get_notifies() == []
    # a failed transfer sends no notification
    n = meng.TransferNotify("never", "x")
    assert a.transfer_sync(sess, src.ctypes.data, 4096, 1,
                           meng.TransferOpcode.Write, n) == -1
    time.sleep(0.2)
    assert b.get_notifies() == []


def test_managed_buffers(pair):
    a, b, sess = pair
    sizes = [1, 4096, 5000, 1 << 20, 3 << 20, 9 << 20]
    addrs = [a.allocate_managed_buffer(s) for s in sizes]
    assert all(addrs)
    spans = sorted((x, x + s) for x, s in zip(addrs, sizes))
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end <= start, "managed buffers overlap"
    for i, (x, s) in enumerate(zip(addrs, sizes)):
        data = bytes([i + 1]) * s
        assert a.write_bytes_to_buffer(x, data, s) == 0
    for i, (x, s) in enumerate(zip(addrs, sizes)):
        assert a.read_bytes_from_buffer(x, s) == bytes([i + 1]) * s
    assert a.write_bytes_to_buffer(addrs[1], b"abc", 4) == -1
    # managed memory is registered: usable as a transfer's local side,
    # and as a peer's target (shared memory on this host)
    remote = b.allocate_managed_buffer(1 << 20)
    assert remote
    assert a.transfer_sync_write(sess, addrs[3], remote, 1 << 20) == 0
    assert b.read_bytes_from_buffer(remote, 1 << 20) == \
        bytes([4]) * (1 << 20)
    assert b.get_first_buffer_address(sess) != 0
    # freed slabs are handed out again; bad frees are refused
    for x, s in zip(addrs, sizes):
        assert a.free_managed_buffer(x, s) == 0
    assert a.free_managed_buffer(addrs[1], sizes[1]) == -1   # twice
    assert a.free_managed_buffer(12345, 4096) == -1
    assert a.free_managed_buffer(addrs[5], sizes[5]) == -1   # large, twice
    assert a.allocate_managed_buffer(4096) in addrs
    assert a.allocate_managed_buffer(0) == 0


def test_free_managed_buffer_of_another_length(pair):
    """free_managed_buffer takes the length allocate_managed_buffer was
    given: another is -1 and frees nothing. It was 0, and the buffer went
    to the free list of that length's slabs (a 1 MiB buffer freed as
    4096 bytes was handed out again as a 4 KiB one)."""
    a, _, _ = pair
    small = a.allocate_managed_buffer(4096)
    mid = a.allocate_managed_buffer(1 << 20)
    large = a.allocate_managed_buffer(5 << 20)
    assert small and mid and large
    assert a.free_managed_buffer(small, 100) == -1
    assert a.free_managed_buffer(small, 8192) == -1
    assert a.free_managed_buffer(mid, 4096) == -1
    assert a.free_managed_buffer(large, 4 << 20) == -1
    assert a.free_managed_buffer(large, 6 << 20) == -1
    got = [a.allocate_managed_buffer(4096) for _ in range(3)]
    assert not {small, mid, large} & set(got)
    a.write_bytes_to_buffer(large, b"x" * 16, 16)
    assert a.read_bytes_from_buffer(large, 16) == b"x" * 16  # not unmapped
    for x, n in [(small, 4096), (mid, 1 << 20), (large, 5 << 20)] + \
            [(g, 4096) for g in got]:
        assert a.free_managed_buffer(x, n) == 0
        assert a.free_managed_buffer(x, n) == -1
    # a buffer asked for with 100 bytes is freed with 100
    x = a.allocate_managed_buffer(100)
    assert a.free_managed_buffer(x, 4096) == -1
    assert a.free_managed_buffer(x, 100) == 0


def test_first_buffer_and_probe(pair):
    a, b, sess = pair
    x = buf(8192)
    assert b.register_memory(x.ctypes.data, x.nbytes) == 0
    assert a.get_first_buffer_address(sess) == x.ctypes.data
    assert a.get_first_buffer_address("127.0.0.1:1") == 0
    assert a.send_probe(sess) == 0
    assert a.send_probe("127.0.0.1:1") != 0


def test_topology(pair):
    a, _, _ = pair
    topo = json.loads(a.get_local_topology())
    assert "nics" in topo and "numa_nodes" in topo
    assert any(n["name"] == "lo" for n in topo["nics"])
    only = json.loads(a.get_local_topology("lo"))
    assert [n["name"] for n in only["nics"]] == ["lo"]


def test_initialize_edges(meng, procs, tmp_path):
    e = meng.TransferEngine()
    with pytest.raises(RuntimeError, match="not initialized"):
        e.get_rpc_port()
    with pytest.raises(meng.NotSupportedError, match="rdma") as ei:
        e.initialize("127.0.0.1", P2P, "rdma", "mlx5_0")
    assert "MC_RDMA_FALLBACK_TCP" in str(ei.value), str(ei.value)
    # a metadata service that is not there
    assert e.initialize("127.0.0.1:%d" % mctest.free_port(),
                        "http://127.0.0.1:1/metadata", "tcp", "") == -1
    assert e.initialize("127.0.0.1", P2P, "tcp", "") == 0
    assert e.initialize("127.0.0.1", P2P, "tcp", "") == -1  # twice
    with pytest.raises(meng.NotSupportedError):
        e.transfer_write_on_cuda("x", 0, 0, 1)
    with pytest.raises(meng.NotSupportedError):
        e.batch_transfer_read_on_cuda("x", [0], [0], [1], 0)
    inner = e.get_engine()
    assert isinstance(inner, meng.InnerTransferEngine)
    assert e.get_engine_ptr() != 0
    assert meng.SUPPORT_CUDA is False
    e.close()
    e.close()
    # initialize_ext: the metadata type given apart
    d = procs.start_metad(tmp_path)
    url = d.url
    f = meng.TransferEngine()
    name = f"127.0.0.1:{mctest.free_port()}"
    assert f.initialize_ext(name, url[len("http://"):], "tcp", "",
                            "http") == 0
    assert f.get_rpc_port() == int(name.rsplit(":", 1)[1])
    assert f.get_session_id() == name
    f.close()


def test_restarted_peer_is_found_again(meng, procs, tmp_path):
    """A decode engine restarts under the same name (a metadata service,
    fixed port) with new memory: the prefill engine's cached target
    reaches the new one (the failure that reveals the restart may cost
    one call, as upstream's)."""
    d = procs.start_metad(tmp_path)
    name = f"127.0.0.1:{mctest.free_port()}"
    a = meng.TransferEngine()
    assert a.initialize(f"127.0.0.1:{mctest.free_port()}", d.url, "tcp", "") == 0
    src = buf(1 << 16, 7)
    assert a.register_memory(src.ctypes.data, src.nbytes) == 0
    b = meng.TransferEngine()
    assert b.initialize(name, d.url, "tcp", "") == 0
    x = buf(1 << 16)
    assert b.register_memory(x.ctypes.data, x.nbytes) == 0
    assert a.transfer_sync_write(name, src.ctypes.data, x.ctypes.data,
                                 4096) == 0
    b.close()
    b2 = meng.TransferEngine()
    assert b2.initialize(name, d.url, "tcp", "") == 0
    y = buf(1 << 20)       # other memory, at another address
    assert b2.register_memory(y.ctypes.data, y.nbytes) == 0
    rcs = [a.transfer_sync_write(name, src.ctypes.data, y.ctypes.data,
                                 4096) for _ in range(2)]
    assert rcs[-1] == 0, rcs
    assert np.array_equal(y[:4096], src[:4096])
    b2.close()
    a.close()


def test_rdma_falls_back_to_tcp_only_when_allowed(meng, monkeypatch):
    """initialize(..., "rdma", ...) where rdma cannot serve: refused with
    the reason, or served over tcp where MC_RDMA_FALLBACK_TCP=1 allows."""
    e = meng.TransferEngine()
    with pytest.raises(meng.NotSupportedError, match="MC_RDMA_FALLBACK_TCP"):
        e.initialize("127.0.0.1", P2P, "rdma", "")
    monkeypatch.setenv("MC_RDMA_FALLBACK_TCP", "1")
    assert e.initialize("127.0.0.1", P2P, "rdma", "") == 0
    assert e.get_rpc_port() > 0


FORKER = COMMON + textwrap.dedent("""
    import ctypes, os
    from mooncake import engine as me
    meta, na, nb = sys.argv[1], sys.argv[2], sys.argv[3]
    a, b = TransferEngine(), TransferEngine()
    assert a.initialize(na, meta, "tcp", "") == 0
    assert b.initialize(nb, meta, "tcp", "") == 0
    src = np.full(1 << 16, 7, dtype=np.uint8)
    dst = np.zeros(1 << 16, dtype=np.uint8)
    assert a.register_memory(src.ctypes.data, src.nbytes) == 0
    assert b.register_memory(dst.ctypes.data, dst.nbytes) == 0
    assert a.transfer_sync_write(nb, src.ctypes.data, dst.ctypes.data,
                                 4096) == 0
    b_rpc = b.get_rpc_port()
    for how in ("use", "close", "own"):
        before = int(dst[0])
        pid = os.fork()
        if pid == 0:
            src[:] = 9
            # Through the binding: refused, nothing moved.
            for call in (lambda: a.transfer_sync_write(
                             nb, src.ctypes.data, dst.ctypes.data, 4096),
                         lambda: a.register_memory(src.ctypes.data + 4096,
                                                   4096),
                         a.get_notifies):
                try:
                    call()
                    raise SystemExit(f"{how}: a call in the child worked")
                except RuntimeError as e:
                    assert "fork" in str(e), e
            # libte itself, as a C program that forks calls it.
            eng = ctypes.c_void_p(a._st.eng)
            assert me._L.mooncake_te_register(eng, src.ctypes.data, 4096,
                                              b"*", 1) == -4028, how
            assert me._L.mooncake_te_unregister(
                eng, src.ctypes.data) == -4028, how
            if how == "close":
                a.close()          # what the child's exit runs too
                b.close()
            if how == "own":
                c = TransferEngine()
                assert c.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp",
                                    "") == 0
                mine = np.full(4096, 5, dtype=np.uint8)
                assert c.register_memory(mine.ctypes.data, 4096) == 0
                peer = f"127.0.0.1:{b_rpc}"
                assert c.transfer_sync_write(peer, mine.ctypes.data,
                                             dst.ctypes.data + 8192,
                                             4096) == 0
                c.close()
            # What the interpreter's exit runs for the package (weakref
            # finalizers: every engine's close), then out.
            import weakref
            weakref.finalize._exitfunc()
            os._exit(0)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            raise SystemExit(f"{how}: the child hung")
        assert st == 0, (how, st)
        assert dst[0] == before, how   # the child moved nothing
        src[:] = len(how)
        assert a.transfer_sync_write(nb, src.ctypes.data, dst.ctypes.data,
                                     4096) == 0, how
        assert dst[0] == len(how), how
    assert dst[8192] == 5              # the child's own engine wrote
    # Both engines are still published: a new engine finds them by name.
    c = TransferEngine()
    assert c.initialize(f"127.0.0.1:{sys.argv[4]}", meta, "tcp", "") == 0
    mine = np.full(4096, 3, dtype=np.uint8)
    assert c.register_memory(mine.ctypes.data, 4096) == 0
    assert c.transfer_sync_write(nb, mine.ctypes.data,
                                 dst.ctypes.data + 4096, 4096) == 0
    assert dst[4096] == 3
    assert c.transfer_sync_read(na, mine.ctypes.data, src.ctypes.data,
                                4096) == 0
    assert mine[0] == len("own")
    c.close(); a.close(); b.close()
    print("ok", flush=True)
""")


def test_fork_leaves_the_parents_engine_alone(tmp_path, python_env, procs):
    """A process forks after initialize() (multiprocessing's fork start
    method, a DataLoader's workers, a pre-forking server): the child has
    none of the engine's threads and shares its sockets. Its transfers on
    the inherited engine went over the parent's connections, and its
    exit (the finalizer closing every engine) crashed (SIGSEGV) or, after
    close(), hung for good. Now the inherited engine refuses (RuntimeError
    in the binding, MC_EFORKED -4028 from libte), closing
    it only forgets it, an engine made in the child works, and the
    parent's engines, connections and metadata entries go on."""
    d = procs.start_metad(tmp_path)
    (tmp_path / "forker.py").write_text(FORKER)
    ports = [str(mctest.free_port()) for _ in range(3)]
    p = subprocess.run(
        [sys.executable, str(tmp_path / "forker.py"), d.url,
         f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}", ports[2]],
        capture_output=True, text=True, env=python_env, timeout=180)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "ok"


CLOSER = COMMON + textwrap.dedent("""
    import logging, threading
    logging.getLogger("mooncake.engine").setLevel(logging.CRITICAL)
    P2P = "P2PHANDSHAKE"
    src = np.ones(4 << 20, dtype=np.uint8)
    dst = np.zeros(4 << 20, dtype=np.uint8)
    b = TransferEngine()
    assert b.initialize("127.0.0.1", P2P, "tcp", "") == 0
    assert b.register_memory(dst.ctypes.data, dst.nbytes) == 0
    peer = f"127.0.0.1:{b.get_rpc_port()}"
    ended = []

    def mover(a):
        try:
            while True:
                a.transfer_sync_write(peer, src.ctypes.data,
                                      dst.ctypes.data, src.nbytes)
        except RuntimeError as e:
            ended.append(str(e))

    for i in range(int(sys.argv[1])):
        a = TransferEngine()
        assert a.initialize("127.0.0.1", P2P, "tcp", "") == 0
        assert a.register_memory(src.ctypes.data, src.nbytes) == 0
        ts = [threading.Thread(target=mover, args=(a,)) for _ in range(3)]
        for t in ts:
            t.start()
        time.sleep(0.1)
        a.close()                  # while the threads are mid-transfer
        for t in ts:
            t.join(120)
            assert not t.is_alive()
    assert len(ended) == 3 * int(sys.argv[1]), ended
    assert set(ended) == {"TransferEngine: closed"}, set(ended)
    # The interpreter's exit with daemon threads mid-transfer: the
    # finalizer closes the engine once their calls have returned.
    a = TransferEngine()
    assert a.initialize("127.0.0.1", P2P, "tcp", "") == 0
    assert a.register_memory(src.ctypes.data, src.nbytes) == 0
    for _ in range(3):
        threading.Thread(target=mover, args=(a,), daemon=True).start()
    time.sleep(0.1)
    print("ok", flush=True)
""")


def test_close_waits_for_calls_in_progress(tmp_path, python_env):
    """close() (and the finalizer at the interpreter's exit, with daemon
    threads mid-transfer) freed the engine under the threads' transfers:
    the process died of SIGSEGV, now and then. Now it waits for the calls
    in progress, and later calls raise RuntimeError("... closed")."""
    (tmp_path / "closer.py").write_text(CLOSER)
    p = subprocess.run([sys.executable, str(tmp_path / "closer.py"), "20"],
                       capture_output=True, text=True, env=python_env,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "ok"
