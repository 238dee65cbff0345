# SPDX-License-Identifier: Apache-2.0
"""The transfer engine, the store, the mount and the Python package over
RDMA (soft-RoCE, rxe0) inside the VM of scripts/rdma_vm.sh: one VM boot
runs every case, each writes its findings into one JSON result, and the
tests here assert on it, case by case.

Cases (run inside the VM, in this order, each with its own deadline):
  conformance  tests/tools/te_conformance against a te_peer, both named
               10.0.0.1:PORT (RoCE needs rxe0's IP at both ends), the
               engine pinned to the protocol: sizes, write_read, batches,
               refusals, notify, integrity; its per-transport counters.
  signal_all   the same with MC_RDMA_SIGNAL_ALL=1 (a completion for every
               work request instead of one per chain posted on a QP).
  store_cli    mooncake_master + one mooncake_client pool member (protocol
               P) + the `mooncake` CLI: put and get of 4 KiB, 1 MiB and
               8 MiB files, compared byte for byte.
  mount        two mooncakefs mounts (protocol=P): a file written into
               one is read back through the other, byte for byte.
  python       mooncake.store.MooncakeDistributedStore (protocol P) puts
               and gets the three sizes, its transfer_stats prove the
               path; mooncake.engine.TransferEngine (protocol P) in this
               process reads and writes a second engine's buffer in a
               second process.
  kill         te_client (transport P, 30 s transfer timeout) reading from
               a te_peer that is SIGKILLed with a batch in flight: every
               request ends FAILED well before the timeout; a request to
               the dead peer fails again; a new te_peer then serves.
  port         (rdma only) te_client reading from a te_peer while rxe0's
               netdev goes down and up again: the engine reads the port's
               events, requests made while it is down fail at once (no
               other NIC), and once it is up they complete again, with
               the right bytes, on endpoints made anew.

The protocol: MC_VM_PROTOCOL, "rdma" (default) or "tcp". With rdma every
process runs with MC_FORCE_HCA=1 (one VM is one host: without it the
store would move bytes through shm), with tcp with MC_FORCE_TCP=1 (the
harness's own check while no rdma transport is built). Besides the
counters of the clients that have them (te_conformance, te_client, the
Python store), every data case reads the wire: rxe0's hw_counters (the
packets soft-RoCE sent) and lo's tx_bytes (10.0.0.1 is a local address,
so TCP to it crosses lo). Over rdma the rxe0 packets must cover the bytes
moved (at most 4096 bytes a packet); over tcp rxe0 must send nothing.

Where the build refuses rdma as not built ("this build has no rdma
transport (built without libibverbs)"), every test skips with that
message; any other refusal fails."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
IN_VM = len(sys.argv) >= 2 and sys.argv[1] == "--in-vm"
if IN_VM:
    # TCG is slow: every wait of the helpers scaled (ctest's own scale
    # times MC_VM_SCALE, default 4).
    os.environ["MC_TEST_TIMEOUT_SCALE"] = str(
        float(os.environ.get("MC_TEST_TIMEOUT_SCALE", "1")) *
        float(os.environ.get("MC_VM_SCALE", "4")))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "store"))
from mctest import (BUILD, FAKE_CUDA, SCALE, SOURCE, TE_CLIENT,  # noqa: E402
                    TE_CONFORMANCE, TE_GPU, binary, te_env)

HARNESS = os.path.join(SOURCE, "scripts", "rdma_vm.sh")
PROTO = os.environ.get("MC_VM_PROTOCOL", "rdma")
VM_TIMEOUT = int(os.environ.get("MC_VM_TIMEOUT", str(int(420 * SCALE))))
KIB, MIB = 1 << 10, 1 << 20
SIZES = [4 * KIB, 1 * MIB, 8 * MIB]
CASES = ["conformance", "signal_all", "store_cli", "mount", "kill", "port",
         "auth", "gpu", "python"]
CONFORMANCE_CASES = ["sizes", "write_read", "batches", "refusals", "notify",
                     "integrity"]
NOT_BUILT = "this build has no rdma transport"
IP = "10.0.0.1"
RXE_MTU_MAX = 4096  # bytes of payload per RoCE packet, at most

# ------------------------------------------------------- inside the VM


def proto_env():
    """What every process of a case gets for the protocol."""
    if PROTO == "rdma":
        return {"MC_FORCE_HCA": "1"}
    return {"MC_FORCE_TCP": "1"}


def device():
    return os.environ.get("MC_RDMA_DEVICE", "rxe0") if PROTO == "rdma" else ""


def peer_args():
    """te_peer's arguments for the protocol: with rdma its buffer is
    registered on the NIC (--transport rdma --device rxe0)."""
    return ["--transport", "rdma", "--device", device()] \
        if PROTO == "rdma" else []


def wire():
    """rxe0's hw_counters and lo's tx_bytes, now."""
    w = {}
    d = f"/sys/class/infiniband/{os.environ.get('MC_RDMA_DEVICE', 'rxe0')}" \
        "/ports/1/hw_counters"
    try:
        for n in os.listdir(d):
            with open(os.path.join(d, n)) as f:
                w["rxe_" + n] = int(f.read().split()[0])
    except OSError:
        pass
    with open("/sys/class/net/lo/statistics/tx_bytes") as f:
        w["lo_tx_bytes"] = int(f.read())
    return w


def wire_delta(before):
    after = wire()
    return {k: after[k] - before.get(k, 0) for k in after}


def run(argv, timeout, env=None, **kw):
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, capture_output=True, text=True,
                           timeout=timeout, env=env, **kw)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timeout", e.stdout or "", e.stderr or ""
        out = out.decode(errors="replace") if isinstance(out, bytes) else out
        err = err.decode(errors="replace") if isinstance(err, bytes) else err
    return {"argv": [str(a) for a in argv], "rc": rc, "out": out[-4000:],
            "err": err[-4000:], "s": round(time.monotonic() - t0, 2)}


def tail(path, n=3000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def case_probe(ctx):
    """Is the protocol there at all? An engine created with it."""
    env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "python"),
               MOONCAKE_LIB=os.path.join(BUILD, "mooncakefs", "lib",
                                         "libmooncake.so"))
    code = ("import sys\n"
            "from mooncake.engine import TransferEngine as T\n"
            "e = T()\n"
            f"rc = e.initialize({IP!r}, 'P2PHANDSHAKE', {PROTO!r}, "
            f"{device()!r})\n"
            "print('rc', rc)\n")
    r = run([sys.executable, "-X", "faulthandler", "-c", code], 120 * SCALE,
            env=env)
    r["ok"] = r["rc"] == 0 and "rc 0" in r["out"]
    # Not built: nothing else can run. Any other failure is the python
    # case's finding; the other cases still run.
    r["not_built"] = NOT_BUILT in r["out"] + r["err"]
    return r


def case_conformance(ctx):
    from mctest import Procs
    procs, tmp = Procs(), ctx["tmp"]
    try:
        metad = procs.start_metad(tmp)
        peer = procs.start_te_peer(tmp, metad.url, *peer_args(),
                                   name=f"{IP}:29000", size=72 * MIB,
                                   seed=707, env=ctx["env"])
        # MC_VM_TE_CONFORMANCE: another te_conformance binary (one built
        # from a checkout whose build directory is not at hand).
        tool = os.environ.get("MC_VM_TE_CONFORMANCE") or \
            binary(*TE_CONFORMANCE)
        cmd = [tool, "--metadata", metad.url,
               "--transport", PROTO, "--seed", "707", "--name",
               f"{IP}:29001", "--timeout_ms", str(int(60000 * SCALE)),
               "--case", ",".join(CONFORMANCE_CASES), "--report_counters",
               "--target", peer.name, "--target_addr", str(peer.addr),
               "--target_size", str(peer.size)]
        w = wire()
        r = run(cmd, 300 * SCALE, env=te_env(ctx["env"]))
        r["wire"] = wire_delta(w)
        r["ok"] = [ln.split()[1] for ln in r["out"].splitlines()
                   if ln.startswith("ok ")]
        r["counters"] = {}
        for ln in r["out"].splitlines():
            if ln.startswith("counters "):
                _, name, js = ln.split(" ", 2)
                r["counters"][name] = json.loads(js)
        want = 'notify te_conformance hello-707 "quoted" {json}'
        t_end = time.monotonic() + (10 * SCALE if r["rc"] == 0 else 0)
        while want not in peer.log() and time.monotonic() < t_end:
            time.sleep(0.1)
        r["peer_notified"] = want in peer.log()
        r["peer_stop"] = peer.stop()
        r["peer_log"] = peer.log()[-2000:]
        return r
    finally:
        procs.cleanup()


def case_signal_all(ctx):
    return case_conformance(dict(ctx, env=dict(ctx["env"],
                                               MC_RDMA_SIGNAL_ALL="1")))


class Pool:
    """mooncake_master (RPC and metadata on 127.0.0.1: no data crosses
    them) and one mooncake_client pool member named 10.0.0.1:PORT."""

    def __init__(self, procs, tmp, env):
        from pool import MEMBER, Master, free_port, read_port
        # A lease of 10 s: 8 MiB over soft-RoCE under TCG takes ~0.5 s.
        self.master = Master(procs, tmp, "--default_kv_lease_ttl", "10000")
        self.port = free_port()
        self.name = f"{IP}:{self.port}"
        procs.own_shm(f"/dev/shm/mooncake.seg.*{self.port}*")
        log = tmp / "member.log"
        pf = tmp / "member.port"
        with open(log, "ab") as lf:
            self.proc = procs.popen(
                [binary(*MEMBER), "--host", IP, "--port", str(self.port),
                 "--global_segment_size", "64MB",
                 "--master_server_address", self.master.addr,
                 "--metadata_server", self.master.metadata,
                 "--protocol", PROTO, "--device_names", device(),
                 "--port_file", str(pf)],
                stdout=lf, stderr=lf,
                env=te_env(dict(env, MC_STORE_PING_MS="200")))
        self.log = log
        read_port(pf, self.proc, log, "mooncake_client")


def pool(ctx):
    """The pool of the store cases, started once."""
    if "pool" not in ctx:
        ctx["pool"] = Pool(ctx["procs"], ctx["tmp"], ctx["env"])
    return ctx["pool"]


def case_store_cli(ctx):
    from pool import CLI
    p = pool(ctx)
    tmp = ctx["tmp"]
    env = dict(os.environ, **ctx["env"])
    base = [binary(*CLI), "--master", p.master.addr, "--metadata",
            p.master.metadata, "--local_hostname", IP, "--protocol", PROTO]
    r = {"objects": [], "member": p.name}
    w = wire()
    moved = 0
    for size in SIZES:
        data = os.urandom(size)
        src, dst = tmp / f"cli.{size}.in", tmp / f"cli.{size}.out"
        src.write_bytes(data)
        key = f"rdma/cli/{size}"
        put = run(base + ["put", str(src), key], 120 * SCALE, env=env)
        get = run(base + ["get", key, str(dst)], 120 * SCALE, env=env)
        got = dst.read_bytes() if dst.exists() else b""
        equal = got == data
        moved += 2 * size if equal else 0
        info = run(base + ["info", key], 60 * SCALE, env=env)
        r["objects"].append({"size": size, "put": put, "get": get,
                             "info": info, "got": len(got), "equal": equal})
    r["wire"] = wire_delta(w)
    r["moved"] = moved
    r["member_log"] = tail(p.log)
    return r


def case_mount(ctx):
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "fs"))
    from mount import Mount, fuse_why
    fuse_ko = os.environ.get("MC_VM_FUSE_KO", "")
    r = {}
    if not os.path.exists("/dev/fuse") and fuse_ko:
        r["insmod"] = run(["insmod", fuse_ko], 60 * SCALE)
    why = fuse_why()
    if why:
        r["skip"] = why + (f" (insmod {fuse_ko}: {r['insmod']['err']})"
                           if "insmod" in r else
                           " (the host found no fuse.ko to load)")
        return r
    p = pool(ctx)
    tmp, procs = ctx["tmp"], ctx["procs"]
    opts = f"protocol={PROTO},local_hostname={IP}"
    if device():
        opts += f",device={device()}"
    a = b = None
    try:
        a = Mount(procs, tmp, p.master, name="mnt_a", seg="0", opts=opts,
                  env=ctx["env"])
        b = Mount(procs, tmp, p.master, name="mnt_b", seg="0", opts=opts,
                  env=ctx["env"])
        r["files"] = []
        w = wire()
        moved = 0
        for size in SIZES:
            data = os.urandom(size)
            name = f"f{size}"
            t0 = time.monotonic()
            with open(a.kv / name, "wb") as f:
                f.write(data)
            t1 = time.monotonic()
            with open(b.kv / name, "rb") as f:
                got = f.read()
            t2 = time.monotonic()
            equal = got == data
            moved += 2 * size if equal else 0
            r["files"].append({"size": size, "got": len(got),
                               "equal": equal, "write_s": round(t1 - t0, 2),
                               "read_s": round(t2 - t1, 2)})
        r["wire"] = wire_delta(w)
        r["moved"] = moved
        with open(b.path / ".mooncake" / "stats") as f:
            r["stats_b"] = f.read()
        with open(a.path / ".mooncake" / "config") as f:
            r["config_a"] = json.loads(f.read())
    except Exception:
        r["error"] = traceback.format_exc()
    finally:
        for m in (a, b):
            if m is not None:
                r.setdefault("logs", {})[m.path.name] = m.log()[-2000:]
                m.cleanup()
    return r


# The second engine of the python case: registers a buffer of the pattern
# and waits to be killed.
ENGINE_TARGET = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from mooncake.engine import TransferEngine
proto, dev, size = sys.argv[2], sys.argv[3], int(sys.argv[4])
eng = TransferEngine()
rc = eng.initialize("10.0.0.1", "P2PHANDSHAKE", proto, dev)
buf = np.random.default_rng(42).integers(0, 256, size, dtype=np.uint8)
rc2 = eng.register_memory(buf.ctypes.data, size)
print(json.dumps({"rc": rc, "reg": rc2, "addr": buf.ctypes.data,
                  "session": "10.0.0.1:%d" % eng.get_rpc_port()}),
      flush=True)
sys.stdin.read()
'''


def case_python(ctx):
    import numpy as np
    sys.path.insert(0, os.path.join(SOURCE, "python"))
    os.environ["MOONCAKE_LIB"] = os.path.join(BUILD, "mooncakefs", "lib",
                                              "libmooncake.so")
    from mooncake.engine import TransferEngine
    from mooncake.store import MooncakeDistributedStore
    # This process is the client: the protocol's variables here too.
    os.environ.update(ctx["env"])
    p = pool(ctx)
    r = {"store": {}, "engine": {}}
    # --- the store
    s = MooncakeDistributedStore()
    st = r["store"]
    st["setup"] = s.setup(IP, p.master.metadata, 0, 16 * MIB, PROTO,
                          device(), p.master.addr)
    st["objects"] = []
    w = wire()
    if st["setup"] == 0:
        for size in SIZES:
            data = os.urandom(size)
            key = f"rdma/py/{size}"
            rc = s.put(key, data)
            got = s.get(key)
            st["objects"].append({"size": size, "put": rc,
                                  "got": len(got or b""),
                                  "equal": got == data,
                                  "replicas": [
                                      d.get_memory_descriptor()
                                      .buffer_descriptor.transport_endpoint
                                      for d in s.get_replica_desc(key)]})
        # What the CLI and the mount wrote, read here: the counters of a
        # client that has them prove the path of those objects too.
        for size in SIZES:
            got = s.get(f"rdma/cli/{size}")
            st.setdefault("cli_objects", []).append(len(got or b""))
        st["stats"] = {t: s.transfer_stats(t)
                       for t in sorted({PROTO, "tcp", "shm", "local"})}
        st["hostname"] = s.get_hostname()
    st["wire"] = wire_delta(w)
    s.close()
    # --- the engine, two processes
    en = r["engine"]
    size = 8 * MIB
    script = ctx["tmp"] / "engine_target.py"
    script.write_text(ENGINE_TARGET)
    tgt = ctx["procs"].popen(
        [sys.executable, str(script), os.path.join(SOURCE, "python"),
         PROTO, device(), str(size)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=open(ctx["tmp"] / "engine_target.log", "ab"), text=True,
        env=dict(os.environ, **ctx["env"]))
    line = tgt.stdout.readline()
    en["target"] = json.loads(line) if line else {
        "exit": tgt.wait(), "log": tail(ctx["tmp"] / "engine_target.log")}
    if not line or en["target"]["rc"] != 0 or en["target"]["reg"] != 0:
        return r
    eng = TransferEngine()
    en["init"] = eng.initialize(IP, "P2PHANDSHAKE", PROTO, device())
    local = np.zeros(size, dtype=np.uint8)
    en["reg"] = eng.register_memory(local.ctypes.data, size)
    want = np.random.default_rng(42).integers(0, 256, size, dtype=np.uint8)
    sess, raddr = en["target"]["session"], en["target"]["addr"]
    w = wire()
    t0 = time.monotonic()
    en["read"] = eng.transfer_sync_read(sess, local.ctypes.data, raddr, size)
    en["read_s"] = round(time.monotonic() - t0, 2)
    en["read_equal"] = bool(np.array_equal(local, want))
    mine = np.random.default_rng(7).integers(0, 256, size, dtype=np.uint8)
    local[:] = mine
    en["write"] = eng.transfer_sync_write(sess, local.ctypes.data, raddr,
                                          size)
    local[:] = 0
    en["read_back"] = eng.transfer_sync_read(sess, local.ctypes.data, raddr,
                                             size)
    en["read_back_equal"] = bool(np.array_equal(local, mine))
    en["wire"] = wire_delta(w)
    en["moved"] = 3 * size
    eng.unregister_memory(local.ctypes.data)
    eng.close()
    tgt.stdin.close()
    tgt.wait()
    return r


def te_client(procs, tmp, tag, args, env):
    """Start tests/tools/te_client over PROTO with args; its TeClient."""
    from mctest import TeClient
    log_path = tmp / f"{tag}_client.log"
    with open(log_path, "ab") as log:
        cp = procs.popen(
            [binary(*TE_CLIENT), "--transport", PROTO, *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            bufsize=0, env=te_env(env))
    return TeClient(cp, log_path)


def stepper(r, with_time=False):
    """step(client, line, t): one te_client command, recorded in
    r["steps"]; its reply's key=value pairs."""
    r.setdefault("steps", [])

    def step(c, line, t=60):
        t0 = time.monotonic()
        reply = c.cmd(line, timeout=t * SCALE)
        rec = [line, reply]
        if with_time:
            rec.append(round(time.monotonic() - t0, 2))
        r["steps"].append(rec)
        return dict(kv.split("=", 1) for kv in reply.split()[1:]
                    if "=" in kv)
    return step


def client_and_peer(ctx, procs, r, tag, port, size, seed, timeout_ms):
    """A metad, a te_peer named IP:port+1 (size bytes, seed) and a
    te_client named IP:port (timeout_ms); (metad, peer, client), the
    client None when it did not start (r["ready"], r["log"] say why)."""
    tmp = ctx["tmp"]
    metad = procs.start_metad(tmp)
    p1 = procs.start_te_peer(tmp, metad.url, *peer_args(),
                             name=f"{IP}:{port + 1}", size=size, seed=seed,
                             env=ctx["env"])
    c = te_client(procs, tmp, tag,
                  ["--metadata", metad.url, "--name", f"{IP}:{port}",
                   "--timeout_ms", str(timeout_ms), "--size", str(size)],
                  ctx["env"])
    r["ready"] = c.readline(timeout=60)
    if not r["ready"].startswith("ready "):
        r["log"] = c.log()
        return metad, p1, None
    return metad, p1, c


def read_checked(step, c, tag, peer, n):
    """n x 1 MiB read from peer as task tag, its bytes checked: the
    replies of wait, status and check."""
    step(c, f"submit {tag} {peer.name} read {peer.addr} {MIB} {n}")
    got = (step(c, f"wait {tag} 60000", 90), step(c, f"status {tag}"),
           step(c, f"check {tag} {peer.seed} {peer.addr}"))
    step(c, f"destroy {tag}")
    return got


def case_kill(ctx):
    from mctest import Procs
    procs, tmp = Procs(), ctx["tmp"]
    r = {"steps": []}
    timeout_ms = 15000

    step = stepper(r, with_time=True)

    try:
        metad, p1, c = client_and_peer(ctx, procs, r, "kill", 31000,
                                       64 * MIB, 1, timeout_ms)
        if not c:
            return r
        step(c, f"open {p1.name}")
        step(c, f"submit warm {p1.name} read {p1.addr} {MIB} 4")
        step(c, "wait warm 60000", 90)
        r["warm"] = step(c, "status warm")
        r["warm_check"] = step(c, f"check warm {p1.seed} {p1.addr}")
        step(c, "destroy warm")
        # Killed with a batch in flight: SIGSTOP would not stop it (one-
        # sided RDMA needs no CPU of the peer), so the kill lands while
        # te_client is still submitting or waiting on 128 x 512 KiB.
        c.proc.stdin.write(
            f"submit a {p1.name} read {p1.addr} {512 * KIB} 128\n".encode())
        t0 = time.monotonic()
        time.sleep(0.05)
        p1.kill()
        r["a_submit"] = c.readline(timeout=timeout_ms / 500)
        r["a_wait"] = step(c, f"wait a {timeout_ms * 2}", timeout_ms / 500)
        r["a_status"] = step(c, "status a")
        r["a_s"] = round(time.monotonic() - t0, 2)
        step(c, "destroy a")
        # Again to the dead peer: refused or FAILED, never hanging.
        t0 = time.monotonic()
        step(c, f"submit b {p1.name} read {p1.addr} 4096 1")
        r["b_wait"] = step(c, f"wait b {timeout_ms * 2}", timeout_ms / 500)
        r["b_status"] = step(c, "status b")
        r["b_s"] = round(time.monotonic() - t0, 2)
        step(c, "destroy b")
        # A new peer serves.
        p2 = procs.start_te_peer(tmp, metad.url, *peer_args(),
                                 name=f"{IP}:31002",
                                 size=64 * MIB, seed=2, env=ctx["env"])
        step(c, f"open {p2.name}")
        r["n_wait"], r["n_status"], r["n_check"] = read_checked(
            step, c, "n", p2, 8)
        r["counters"] = {t: step(c, f"counters {t}")
                         for t in sorted({PROTO, "tcp", "shm"})}
        r["timeout_ms"] = timeout_ms
        r["quit"] = c.cmd("quit", timeout=60 * SCALE)
        r["log"] = c.log()[-2000:]
    except Exception:
        r["error"] = traceback.format_exc()
    finally:
        procs.cleanup()
    return r


def case_port(ctx):
    from mctest import Procs, wait_for
    if PROTO != "rdma":
        return {"skipped": "a port's events are rdma's"}
    procs = Procs()
    r = {"steps": []}
    timeout_ms = 30000
    netdev = os.environ.get("MC_RDMA_NETDEV", "veth0")
    state = f"/sys/class/infiniband/{device()}/ports/1/state"
    step = stepper(r, with_time=True)

    def link(up):
        subprocess.run(["ip", "link", "set", netdev, "up" if up else "down"],
                       check=True, timeout=30)

    try:
        _, p1, c = client_and_peer(ctx, procs, r, "port", 31010, 16 * MIB, 3,
                                   timeout_ms)
        if not c:
            return r
        step(c, f"open {p1.name}")
        step(c, f"submit w {p1.name} read {p1.addr} {MIB} 4")
        step(c, "wait w 60000", 90)
        r["w_status"] = step(c, "status w")
        step(c, "destroy w")
        # Down with a batch in flight (or done already, on a fast host).
        c.proc.stdin.write(
            f"submit f {p1.name} read {p1.addr} {128 * KIB} 96\n".encode())
        t0 = time.monotonic()
        link(False)
        try:
            r["f_submit"] = c.readline(timeout=timeout_ms / 500)
            r["f_wait"] = step(c, f"wait f {timeout_ms * 2}",
                               timeout_ms / 500)
            r["f_status"] = step(c, "status f")
            r["f_s"] = round(time.monotonic() - t0, 2)
            step(c, "destroy f")
            wait_for(lambda: "port 1 is down" in c.log(), timeout=30 * SCALE,
                     what="the engine sees the port down")
            r["down_state"] = open(state).read().strip()
            t0 = time.monotonic()
            step(c, f"submit d {p1.name} read {p1.addr} {MIB} 4")
            r["d_wait"] = step(c, f"wait d {timeout_ms * 2}", timeout_ms / 500)
            r["d_status"] = step(c, "status d")
            r["d_s"] = round(time.monotonic() - t0, 2)
            step(c, "destroy d")
        finally:
            link(True)
        wait_for(lambda: "port 1 is up again" in c.log(), timeout=60 * SCALE,
                 what="the engine sees the port up")
        r["u_wait"], r["u_status"], r["u_check"] = read_checked(
            step, c, "u", p1, 8)
        r["counters"] = step(c, f"counters {PROTO}")
        r["timeout_ms"] = timeout_ms
        r["quit"] = c.cmd("quit", timeout=60 * SCALE)
        r["log"] = c.log()[-3000:]
    except Exception:
        r["error"] = traceback.format_exc()
    finally:
        procs.cleanup()
    return r


def connection_request(rpc, qps=2):
    """A raw Connection handshake (type 0) to an engine's RPC address, as
    any process on the network could send it: the reply's JSON, or the
    error that ended the exchange."""
    import socket
    import struct
    host, port = rpc.rsplit(":", 1)
    body = json.dumps({
        "local_nic_path": f"{IP}:1@{device() or 'rxe0'}",
        "peer_nic_path": f"{rpc}@{device() or 'rxe0'}",
        "local_lid": 0,
        "local_gid": "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01",
        "qp_num": list(range(100, 100 + qps)), "reply_msg": ""}).encode()
    try:
        with socket.create_connection((host, int(port)), timeout=10) as so:
            so.sendall(struct.pack("=Q", len(body) + 1) + b"\0" + body)
            head = b""
            while len(head) < 9:
                chunk = so.recv(9 - len(head))
                if not chunk:
                    return {"error": "closed"}
                head += chunk
            (n,) = struct.unpack("=Q", head[:8])
            data = b""
            while len(data) < n - 1:
                chunk = so.recv(n - 1 - len(data))
                if not chunk:
                    break
                data += chunk
            return {"type": head[8], "reply": json.loads(data or b"{}")}
    except (OSError, ValueError) as e:
        return {"error": repr(e)}


def case_auth(ctx):
    """With the pool's key, queue pairs into an engine's memory open only
    for a member: a client with the key reads over rdma; a Connection
    request without it is refused before any QP exists (the same request
    to an engine without a key gets QP numbers: the control)."""
    import secrets
    from mctest import Procs
    procs, tmp = Procs(), ctx["tmp"]
    r = {"steps": []}
    tok = tmp / "auth_token"
    tok.write_text(secrets.token_hex(32) + "\n")
    os.chmod(tok, 0o600)
    keyed = dict(ctx["env"], MOONCAKE_AUTH_TOKEN_FILE=str(tok))

    step = stepper(r)

    try:
        p = procs.start_te_peer(tmp, "P2PHANDSHAKE", *peer_args(),
                                name=IP, size=16 * MIB, seed=7, env=keyed)
        open_peer = procs.start_te_peer(tmp, "P2PHANDSHAKE", *peer_args(),
                                        name=IP, size=16 * MIB, seed=8,
                                        env=dict(ctx["env"],
                                                 MOONCAKE_AUTH_TOKEN_FILE=""))
        r["unkeyed_request"] = connection_request(p.rpc)
        r["control_request"] = connection_request(open_peer.rpc)
        c = te_client(procs, tmp, "auth",
                      ["--metadata", "P2PHANDSHAKE", "--name", IP, "--size",
                       str(16 * MIB)], keyed)
        r["ready"] = c.readline(timeout=60)
        if not r["ready"].startswith("ready "):
            r["log"] = c.log()
            return r
        step(c, f"open {p.name}")
        step(c, f"submit a {p.name} read {p.addr} {MIB} 4")
        step(c, "wait a 60000", 90)
        r["status"] = step(c, "status a")
        r["check"] = step(c, f"check a {p.seed} {p.addr}")
        step(c, "destroy a")
        r["counters"] = step(c, f"counters {PROTO}")
        r["quit"] = c.cmd("quit", timeout=60 * SCALE)
        r["peer_log"] = p.log()[-2000:]
    except Exception:
        r["error"] = traceback.format_exc()
    finally:
        procs.cleanup()
    return r


def case_gpu(ctx):
    """CUDA device memory (the tests' stand-in driver, tests/tools/
    fake_cuda.c) staged through the engine's pinned buffers, whose chunks
    the rdma transport carries (they are registered on the NIC like any
    buffer): te_gpu's "out" case writes device memory to a te_peer and
    reads it back into other device memory, bytes compared."""
    from mctest import Procs
    procs, tmp = Procs(), ctx["tmp"]
    r = {}
    try:
        p = procs.start_te_peer(tmp, "P2PHANDSHAKE", *peer_args(),
                                name=IP, size=64 * MIB, seed=3,
                                env=ctx["env"])
        env = te_env(dict(ctx["env"], TE_GPU_TRANSPORT=PROTO,
                          MC_CUDA_LIBRARY=binary(*FAKE_CUDA)))
        w = wire()
        r["te_gpu"] = run([binary(*TE_GPU), "--target", p.name,
                           "--target_addr", str(p.addr), "--target_size",
                           str(64 * MIB)], timeout=300 * SCALE, env=env)
        r["wire"] = wire_delta(w)
    except Exception:
        r["error"] = traceback.format_exc()
    finally:
        procs.cleanup()
    return r


def in_vm(result_path, only):
    import pathlib
    from mctest import Procs
    t_all = time.monotonic()
    r = {"protocol": PROTO, "env": proto_env(), "cases": {},
         "scale": SCALE}
    logs = pathlib.Path(tempfile.mkdtemp(prefix="rdma_cases."))
    ctx = {"env": proto_env(), "procs": Procs(), "tmp": logs}
    os.environ.pop("MC_FORCE_TCP", None)
    os.environ.pop("MC_FORCE_HCA", None)

    def save():
        with open(result_path + ".tmp", "w") as f:
            json.dump(r, f, indent=1)
        os.replace(result_path + ".tmp", result_path)

    t0 = time.monotonic()
    r["probe"] = case_probe(ctx)
    r["probe"]["s"] = round(time.monotonic() - t0, 2)
    save()
    if r["probe"]["not_built"]:
        r["total_s"] = round(time.monotonic() - t_all, 2)
        save()
        return
    for name in CASES:
        if only and name not in only:
            continue
        t0 = time.monotonic()
        r["running"] = name
        save()
        try:
            out = globals()["case_" + name](ctx)
        except Exception:
            out = {"error": traceback.format_exc()}
        out["s"] = round(time.monotonic() - t0, 2)
        r["cases"][name] = out
        print(f"case {name}: {out['s']}s", flush=True)
        r.pop("running")
        save()
    if "pool" in ctx:
        r["member_log"] = tail(ctx["pool"].log)
        r["master_log"] = tail(ctx["pool"].master.log_path)
    ctx["procs"].cleanup()
    r["total_s"] = round(time.monotonic() - t_all, 2)
    save()


# ------------------------------------------------------- on the host

def fuse_ko(dest):
    """fuse.ko of the VM's kernel (the harness's cached kernel package;
    its initramfs does not load FUSE), extracted into dest; "" when there
    is none."""
    cache = os.environ.get("MC_RDMA_VM_CACHE") or \
        "/var/cache/mooncakefs/rdma-vm"
    if not os.path.isdir(cache):
        cache = os.path.expanduser("~/.cache/mooncakefs/rdma-vm")
    debs = sorted((os.path.join(cache, d) for d in os.listdir(cache)
                   if d.startswith("linux-image-") and d.endswith(".deb")),
                  key=os.path.getmtime) if os.path.isdir(cache) else []
    if not debs:
        return ""
    p = subprocess.run(
        f"dpkg-deb --fsys-tarfile '{debs[-1]}' | tar -x -C '{dest}' "
        f"--wildcards '*/kernel/fs/fuse/fuse.ko'", shell=True,
        capture_output=True, timeout=120)
    for root, _, files in os.walk(dest):
        if "fuse.ko" in files and p.returncode == 0:
            return os.path.join(root, "fuse.ko")
    return ""


@pytest.fixture(scope="module")
def vm(tmp_path_factory):
    """One VM run of every case: (result dict, log of the run)."""
    if not shutil.which("qemu-system-x86_64"):
        pytest.skip("qemu-system-x86_64 not found "
                    "(scripts/setup.sh installs qemu-system-x86)")
    binary(*TE_CONFORMANCE)  # the build under test must have it
    p = subprocess.run([HARNESS, "--prepare"], capture_output=True,
                       text=True, timeout=600)
    if p.returncode == 77:
        pytest.skip(p.stderr.strip().splitlines()[-1])
    assert p.returncode == 0, p.stdout + p.stderr
    d = tmp_path_factory.mktemp("rdma_vm")
    result = d / "result.json"
    ko = fuse_ko(str(d))
    t0 = time.monotonic()
    p = subprocess.run(
        [HARNESS, "-t", str(VM_TIMEOUT), "--rw", str(d),
         "-e", f"MC_VM_PROTOCOL={PROTO}", "-e", f"MC_VM_FUSE_KO={ko}",
         "-e", f"MC_BUILD_DIR={os.path.abspath(BUILD)}",
         "-e", f"MC_SOURCE_DIR={os.path.abspath(SOURCE)}",
         "-e", "MC_VM_TE_CONFORMANCE="
         f"{os.environ.get('MC_VM_TE_CONFORMANCE', '')}", "--",
         "/usr/bin/python3", os.path.abspath(__file__), "--in-vm",
         str(result), os.environ.get("MC_VM_CASES", "")],
        capture_output=True, text=True, timeout=VM_TIMEOUT + 120)
    took = time.monotonic() - t0
    log = (f"protocol {PROTO}: VM exit {p.returncode} after {took:.1f}s\n"
           f"{p.stdout[-6000:]}\n{p.stderr[-6000:]}")
    print(log)
    r = json.loads(result.read_text()) if result.exists() else None
    assert r is not None, "no result from the VM\n" + log
    if r["probe"]["not_built"]:
        why = (r["probe"]["out"] + r["probe"]["err"]).strip()
        pytest.skip(f"protocol {PROTO} not built: {why.splitlines()[-1]}")
    r["log"] = log
    r["rc"] = p.returncode
    return r


def case(vm, name):
    c = vm["cases"].get(name)
    if c is None and os.environ.get("MC_VM_CASES"):
        pytest.skip(f"case {name} not run (MC_VM_CASES)")
    assert c is not None, (
        f"case {name} has no result: the in-VM runner died in case "
        f"{vm.get('running')!r}\n{vm['log']}")
    assert "error" not in c, f"{name}: {c['error']}\n{vm['log']}"
    return c


def show(c):
    return json.dumps(c, indent=1)[-12000:]


def assert_wire(w, moved, what):
    """The wire saw the bytes moved: rxe0 packets over rdma (and none
    over tcp); over tcp at least as many bytes on lo."""
    sent = w.get("rxe_sent_pkts")
    assert sent is not None, f"{what}: no rxe0 hw_counters: {w}"
    if PROTO == "rdma":
        assert sent >= moved // RXE_MTU_MAX, (
            f"{what}: {moved} bytes moved over rdma but rxe0 sent only "
            f"{sent} packets: {w}")
    else:
        assert sent == 0, f"{what}: rxe0 sent {sent} packets over tcp: {w}"
        assert w["lo_tx_bytes"] >= moved, (
            f"{what}: {moved} bytes moved over tcp but lo sent only "
            f"{w['lo_tx_bytes']}: {w}")


def others():
    """The transports other than the protocol (the counters that must not
    move): shm always, tcp when the protocol is rdma."""
    return [t for t in ("tcp", "shm") if t != PROTO]


def test_runner_finished(vm):
    """Every case ran and the VM command exited 0, within the timeout."""
    assert vm["rc"] == 0 and "total_s" in vm, (
        f"the in-VM runner did not finish (in case {vm.get('running')!r})"
        f"\n{vm['log']}")


def test_conformance(vm):
    c = case(vm, "conformance")
    assert c["rc"] == 0 and set(CONFORMANCE_CASES) <= set(c["ok"]), (
        f"te_conformance --transport {PROTO}: exit {c['rc']}, ok "
        f"{c['ok']} of {CONFORMANCE_CASES}\n{c['out']}\n{c['err']}")
    mine = c["counters"].get(PROTO)
    assert mine, f"no counters line for {PROTO}: {c['out']}"
    assert mine["read_bytes"] > 64 * MIB and \
        mine["write_bytes"] > 64 * MIB, mine
    for t in others():
        got = c["counters"][t]
        assert got["read_bytes"] == 0 and got["write_bytes"] == 0, (
            f"{t} moved bytes although {PROTO} is pinned: {c['counters']}")
    assert_wire(c["wire"], mine["read_bytes"] + mine["write_bytes"],
                "conformance")
    assert c["peer_notified"], c["peer_log"]
    assert c["peer_stop"] == 0, c["peer_log"]


def test_conformance_signal_all(vm):
    c = case(vm, "signal_all")
    assert c["rc"] == 0 and set(CONFORMANCE_CASES) <= set(c["ok"]), (
        f"te_conformance --transport {PROTO}, MC_RDMA_SIGNAL_ALL=1: exit "
        f"{c['rc']}, ok {c['ok']} of {CONFORMANCE_CASES}\n{c['out']}\n"
        f"{c['err']}")
    mine = c["counters"].get(PROTO)
    assert mine and mine["read_bytes"] > 64 * MIB, c["counters"]
    assert c["peer_stop"] == 0, c["peer_log"]


def test_store_cli(vm):
    c = case(vm, "store_cli")
    for o in c["objects"]:
        assert o["put"]["rc"] == 0, f"mooncake put ({o['size']}): {o}"
        assert o["get"]["rc"] == 0, f"mooncake get ({o['size']}): {o}"
        assert o["equal"], (f"{o['size']} bytes put, {o['got']} got back "
                            f"or different: {o}")
    assert [o["size"] for o in c["objects"]] == SIZES
    assert_wire(c["wire"], c["moved"], "mooncake put/get")


def test_mount(vm):
    c = case(vm, "mount")
    if "skip" in c:
        pytest.skip(c["skip"])
    assert "error" not in c, show(c)
    for f in c["files"]:
        assert f["equal"], f"{f['size']} bytes written through mnt_a, " \
            f"{f['got']} read back through mnt_b or different: {show(c)}"
    assert [f["size"] for f in c["files"]] == SIZES
    assert c["config_a"]["protocol"] == PROTO, c["config_a"]
    assert_wire(c["wire"], c["moved"], "mount")


def test_python_store(vm):
    c = case(vm, "python")["store"]
    assert c["setup"] == 0, show(c)
    for o in c["objects"]:
        assert o["put"] == 0 and o["equal"], f"put/get {o['size']}: {o}"
        assert o["replicas"] and o["replicas"][0] != c["hostname"], (
            f"the object is in this client's own segment: {o}")
    assert c["cli_objects"] == SIZES, \
        f"the CLI's objects read back here: {c['cli_objects']}"
    total = sum(SIZES)
    mine = c["stats"][PROTO]
    assert mine["write_bytes"] >= total, (
        f"{PROTO} counters: {c['stats']}; puts of {total} bytes")
    assert mine["read_bytes"] >= 2 * total, (
        f"{PROTO} counters: {c['stats']}; gets of {2 * total} bytes")
    for t in others():
        got = c["stats"][t]
        assert got["read_bytes"] == 0 and got["write_bytes"] == 0, (
            f"{t} moved bytes, {PROTO} should have: {c['stats']}")
    assert_wire(c["wire"], 3 * total, "python store")


def test_python_engine(vm):
    pr = vm["probe"]
    assert pr["ok"], (
        f"TransferEngine().initialize('{IP}', 'P2PHANDSHAKE', '{PROTO}', "
        f"'{device() or os.environ.get('MC_RDMA_DEVICE', '')}') in a fresh "
        f"process: exit {pr['rc']}\n{pr['out']}\n{pr['err']}")
    c = case(vm, "python")["engine"]
    t = c["target"]
    assert t.get("rc") == 0 and t.get("reg") == 0, f"target: {t}"
    assert c["init"] == 0 and c["reg"] == 0, c
    assert c["read"] == 0 and c["read_equal"], \
        f"transfer_sync_read of the target's pattern: {c}"
    assert c["write"] == 0 and c["read_back"] == 0 and \
        c["read_back_equal"], f"write, then read back: {c}"
    assert_wire(c["wire"], c["moved"], "python engine")


def test_kill_peer(vm):
    c = case(vm, "kill")
    assert c["ready"].startswith("ready "), c
    assert c["warm"]["completed"] == "4", show(c)
    assert c["warm_check"].get("checked") == "4", show(c)
    # Killed with 128 requests in flight: all ended, those not done
    # FAILED, none by the transfer timeout, and well before it.
    assert c["a_submit"].startswith("ok"), show(c)
    a = c["a_status"]
    assert c["a_wait"]["rc"] == "0" and a["waiting"] == "0", show(c)
    assert a["timeout"] == "0", (
        f"{a['timeout']} of 128 requests to the SIGKILLed peer ended "
        f"TIMEOUT after {c['a_s']}s (transfer timeout {c['timeout_ms']} ms), "
        f"not FAILED before it: {a}\n{show(c)}")
    assert int(a["failed"]) >= 1 and \
        int(a["failed"]) + int(a["completed"]) == 128, show(c)
    assert c["a_s"] < c["timeout_ms"] / 1000, (
        f"the batch to the killed peer took {c['a_s']}s (transfer timeout "
        f"{c['timeout_ms']} ms): {show(c)}")
    # Again to the dead peer: refused at submit, or FAILED, before the
    # transfer timeout (not TIMEOUT at it).
    b_submit = [s for s in c["steps"] if s[0].startswith("submit b")][0]
    if b_submit[1].startswith("ok"):
        assert c["b_status"]["failed"] == "1", (
            f"a request to the killed peer ended {c['b_status']} after "
            f"{c['b_s']}s (transfer timeout {c['timeout_ms']} ms): {show(c)}")
    assert c["b_s"] < c["timeout_ms"] / 1000, show(c)
    # A new peer serves, with the right data.
    assert c["n_status"]["completed"] == "8", show(c)
    assert c["n_check"].get("checked") == "8", show(c)
    mine = c["counters"][PROTO]
    assert int(mine["read_bytes"]) >= 12 * MIB, c["counters"]
    if PROTO == "rdma":
        # Nothing leaked: no request still posted, and of the queue pairs
        # only the live peer's endpoint (MC_NUM_QP_PER_EP, 2) is left;
        # the dead peer's broken endpoints were destroyed.
        assert mine["inflight"] == "0", c["counters"]
        assert mine["connections"] == "2", c["counters"]
    for t in others():
        assert c["counters"][t]["read_bytes"] == "0", c["counters"]
    assert c["quit"] == "ok bye", show(c)


def test_port_down(vm):
    c = case(vm, "port")
    if "skipped" in c:
        pytest.skip(c["skipped"])
    assert c["ready"].startswith("ready "), c
    assert c["w_status"]["completed"] == "4", show(c)
    assert "DOWN" in c["down_state"], show(c)
    # The batch in flight as the port went down: every request ended,
    # completed or FAILED, none at the transfer timeout.
    f = c["f_status"]
    assert c["f_submit"].startswith("ok"), show(c)
    assert c["f_wait"]["rc"] == "0" and f["waiting"] == "0", show(c)
    assert f["timeout"] == "0", show(c)
    assert int(f["completed"]) + int(f["failed"]) == 96, show(c)
    assert c["f_s"] < c["timeout_ms"] / 1000, show(c)
    # While the only NIC's port is down: every request FAILED at once
    # (none waits for the RC timeout or the transfer timeout), and the
    # log says why.
    d = c["d_status"]
    assert c["d_wait"]["rc"] == "0" and d["waiting"] == "0", show(c)
    assert d["failed"] == "4" and d["timeout"] == "0", show(c)
    assert c["d_s"] < c["timeout_ms"] / 1000 / 2, show(c)
    assert "requests take the other NICs" in c["log"], show(c)
    # Up again: the engine says so, and requests complete with the right
    # bytes on endpoints made anew; nothing left posted.
    assert c["u_status"]["completed"] == "8", show(c)
    assert c["u_check"].get("checked") == "8", show(c)
    assert c["counters"]["inflight"] == "0", show(c)
    assert c["quit"] == "ok bye", show(c)


def test_auth(vm):
    c = case(vm, "auth")
    assert "error" not in c, c.get("error")
    assert c["ready"].startswith("ready "), show(c)
    # Without the key: refused with the code, no QP numbers given.
    u = c["unkeyed_request"]
    rep = u.get("reply") or {}
    assert rep.get("mc_error") and not rep.get("qp_num"), u
    if PROTO == "rdma":
        # The control: the same request to an engine without a key opens
        # two QPs, so the refusal above is the key's doing.
        ctl = c["control_request"].get("reply") or {}
        assert len(ctl.get("qp_num", [])) == 2 and not ctl.get(
            "reply_msg"), c["control_request"]
    # With the key: the reads go through, over the protocol.
    assert c["status"]["completed"] == "4", show(c)
    assert c["check"].get("checked") == "4", show(c)
    assert int(c["counters"]["read_bytes"]) >= 4 * MIB, show(c)
    assert c["quit"] == "ok bye", show(c)

def test_gpu_staged(vm):
    c = case(vm, "gpu")
    assert "error" not in c, c.get("error")
    out = c["te_gpu"]["out"]
    # Four sizes across the 4 MiB staging chunk, each written from device
    # memory and read back into device memory, compared.
    assert out.count("ok out ") == 4, c["te_gpu"]
    assert "FAIL out" not in out, c["te_gpu"]
    if PROTO == "rdma":
        # Only rdma can have carried them (MC_FORCE_HCA): rxe0's packets
        # cover the bytes, twice the sum of the sizes.
        moved = 2 * (1 + 4097 + 4194427 + 9437261)
        assert c["wire"].get("rxe_sent_pkts", 0) >= moved // RXE_MTU_MAX, \
            c["wire"]

if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[1] != "--in-vm":
        sys.exit("usage: test_transport.py --in-vm RESULT.json [CASE,...]")
    in_vm(sys.argv[2], [c for c in (sys.argv[3:] or [""])[0].split(",")
                        if c])
