#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The Python package's overhead over the C API, in one run.

Both sides make the same calls against the same pool: per value size,
--iters rounds (after --warmup unreported ones) of batch_put_from of
--count fresh keys, batch_get_into of the same keys, and an untimed
batch_remove (force). The C side is bench/c_batch_bench (store.h); the
Python side is this script re-run as a child (--child), using
mooncake.store from python/ of this checkout with the build's
libmooncake.so. Each side is its own process with its own client (no
segment, one registered buffer for sources and destinations), so only the
binding differs.

The two run in lockstep: this driver tells one side to do a round, waits
for its timings, then the other (C first in even rounds, Python first in
odd ones). Both sides therefore see the same pool and the same background
load, which on a shared machine moves far more than the binding costs;
the overhead is the median of the per-round differences (Python - C). The
Python layer's own cost per call is also measured alone, against a store
that is not set up (the C function returns at once).

Without --master, a pool is started on loopback from the build directory:
one mooncake_master (HTTP metadata embedded, 200 ms read leases so that
force-removed objects free quickly) and two mooncake_client members of
--segment bytes each. Before measuring, an untimed C pass touches most of
the pool. --modes same_host,tcp: in tcp both sides run with
MC_FORCE_TCP=1, so every byte crosses a loopback connection.

Usage: bench/python_store_bench.py [--build DIR] [--count 32]
       [--sizes 65536,1048576] [--iters 200] [--warmup 20]
       [--modes same_host,tcp] [--segment 1GiB] [--json FILE]
Nothing here asserts a timing.
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_build():
    env = os.environ.get("MC_BUILD_DIR")
    if env:
        return env
    found = []
    for d in glob.glob(os.path.join(REPO, "build*")):
        exe = os.path.join(d, "bench", "c_batch_bench")
        try:
            cache = open(os.path.join(d, "CMakeCache.txt")).read()
        except OSError:
            continue
        san = re.search(r"^MC_SANITIZE:STRING=(.*)$", cache, re.M)
        if san and san.group(1).strip():
            continue  # sanitized: not loadable into /usr/bin/python3
        if os.access(exe, os.X_OK):
            found.append((os.path.getmtime(exe), d))
    if not found:
        sys.exit("no build directory with bench/c_batch_bench "
                 "(cmake --build <dir> --target c_batch_bench)")
    return max(found)[1]


def size_arg(s):
    s = s.strip().lower()
    for suffix, mult in (("gib", 1 << 30), ("mib", 1 << 20), ("kib", 1 << 10),
                         ("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
        if s.endswith(suffix):
            return int(float(s[:-len(suffix)]) * mult)
    return int(s)


# ---- the Python side (child process) --------------------------------------

def child(a):
    sys.path.insert(0, os.path.join(REPO, "python"))
    os.environ.setdefault("MOONCAKE_LIB", os.path.join(
        a.build, "mooncakefs", "lib", "libmooncake.so"))
    import ctypes
    import mmap

    from mooncake.store import MooncakeDistributedStore

    store = MooncakeDistributedStore()
    rc = store.setup("127.0.0.1", a.metadata, 0, 0, "tcp", "", a.master)
    if rc:
        sys.exit(f"setup: {rc}")
    n = a.count
    for size in [size_arg(x) for x in a.sizes.split(",")]:
        span = n * size
        # As the C side: private anonymous memory, pre-faulted.
        buf = mmap.mmap(-1, 2 * span, flags=mmap.MAP_PRIVATE |
                        mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE)
        pattern = bytes((i * 2654435761 >> 13) & 0xFF for i in range(4096))
        for off in range(0, span, 4096):
            buf[off:off + 4096] = pattern[:min(4096, span - off)]
        base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        assert store.register_buffer(base, 2 * span) == 0
        src = [base + i * size for i in range(n)]
        dst = [base + span + i * size for i in range(n)]
        sizes = [size] * n
        put_ns, get_ns = [], []
        for it in range(a.warmup + a.iters):
            keys = [f"{a.prefix}/{size}/{it}/{i}" for i in range(n)]
            if a.lockstep and not sys.stdin.readline():
                sys.exit("driver went away")
            t0 = time.perf_counter_ns()
            pres = store.batch_put_from(keys, src, sizes)
            t1 = time.perf_counter_ns()
            gres = store.batch_get_into(keys, dst, sizes)
            t2 = time.perf_counter_ns()
            if pres != [0] * n or gres != [size] * n:
                sys.exit(f"size {size} round {it}: {pres} {gres}")
            if it == 0 and buf[:span] != buf[span:2 * span]:
                sys.exit("bytes differ")
            store.batch_remove(keys, True)
            if it >= a.warmup:
                put_ns.append(t1 - t0)
                get_ns.append(t2 - t1)
            if a.lockstep:
                print(json.dumps({"it": it, "put_ns": t1 - t0,
                                  "get_ns": t2 - t1}), flush=True)
        assert store.unregister_buffer(base) == 0
        for op, ns in (("batch_put_from", put_ns),
                       ("batch_get_into", get_ns)):
            p50 = statistics.median(ns)
            print(json.dumps({
                "impl": "python", "size": size, "count": n, "op": op,
                "iters": len(ns), "p50_us": round(p50 / 1e3, 2),
                "mean_us": round(statistics.fmean(ns) / 1e3, 2),
                "min_us": round(min(ns) / 1e3, 2),
                "gbps": round(n * size / p50, 3)}), flush=True)
        buf.close()
    store.close()


# ---- the pool ------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_file(path, proc, what, timeout=30):
    t0 = time.monotonic()
    while True:
        try:
            v = open(path).read().strip()
            if v:
                return v
        except OSError:
            pass
        if proc.poll() is not None:
            sys.exit(f"{what} exited {proc.returncode}")
        if time.monotonic() - t0 > timeout:
            sys.exit(f"{what}: no {path}")
        time.sleep(0.02)


class Pool:
    def __init__(self, build, tmp, segment):
        self.procs = []
        self.tmp = tmp
        meta = free_port()
        pf = os.path.join(tmp, "master.port")
        self.start([os.path.join(build, "master", "mooncake_master"),
                    "--rpc_address", "127.0.0.1", "--rpc_port", "0",
                    "--port_file", pf, "--metrics_host", "127.0.0.1",
                    "--metrics_port", str(free_port()),
                    "--enable_http_metadata_server",
                    "--http_metadata_server_host", "127.0.0.1",
                    "--http_metadata_server_port", str(meta),
                    "--db_path", os.path.join(tmp, "master.db"),
                    "--default_kv_lease_ttl", "200"], "master")
        self.master = "127.0.0.1:" + wait_file(pf, self.procs[-1], "master")
        self.metadata = f"http://127.0.0.1:{meta}/metadata"
        self.ports = []
        for i in range(2):
            port = free_port()
            pf = os.path.join(tmp, f"member{i}.port")
            self.start([os.path.join(build, "mooncakefs", "cli",
                                     "mooncake_client"),
                        "--host", "127.0.0.1", "--port", str(port),
                        "--global_segment_size", str(segment),
                        "--master_server_address", self.master,
                        "--metadata_server", self.metadata,
                        "--port_file", pf], f"member{i}")
            wait_file(pf, self.procs[-1], f"member{i}")
            self.ports.append(port)

    def start(self, cmd, tag):
        log = open(os.path.join(self.tmp, tag + ".log"), "ab")
        self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=log,
                                           start_new_session=True))
        log.close()

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for port in self.ports:
            for path in glob.glob(f"/dev/shm/mooncake.seg.127.0.0.1_{port}"):
                try:
                    os.unlink(path)
                except OSError:
                    pass


# ---- the parent ----------------------------------------------------------

def side_cmd(impl, a, prefix, iters, warmup, lockstep):
    common = ["--master", a.master, "--metadata", a.metadata,
              "--count", str(a.count), "--sizes", a.sizes,
              "--iters", str(iters), "--warmup", str(warmup),
              "--prefix", prefix, "--lockstep", "1" if lockstep else "0"]
    if impl == "c":
        return [os.path.join(a.build, "bench", "c_batch_bench")] + common
    return [sys.executable, os.path.abspath(__file__), "--child",
            "--build", a.build] + common


def side_env(mode):
    env = dict(os.environ)
    env.pop("MC_FORCE_TCP", None)
    if mode == "tcp":
        env["MC_FORCE_TCP"] = "1"
    return env


def warm(a):
    """Untimed C pass over about 80% of the pool (its shared memory is
    mapped lazily)."""
    n = max(1, int(0.8 * 2 * size_arg(a.segment) / (a.count << 20)))
    p = subprocess.run(side_cmd("c", a, "warm", n, 0, False),
                       env=side_env("same_host"), capture_output=True,
                       text=True, timeout=1800)
    if p.returncode:
        sys.exit(f"warm pass failed:\n{p.stderr[-3000:]}")


def lockstep(a, mode):
    """Both sides, round by round; rows of per-round timings."""
    procs = {}
    for impl, prefix in (("c", "psb-c"), ("python", "psb-py")):
        procs[impl] = subprocess.Popen(
            side_cmd(impl, a, f"{prefix}-{mode}", a.iters, a.warmup, True),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=side_env(mode))
    rows = []
    try:
        for size in [size_arg(x) for x in a.sizes.split(",")]:
            for it in range(a.warmup + a.iters):
                order = ("c", "python") if it % 2 == 0 else ("python", "c")
                for impl in order:
                    p = procs[impl]
                    p.stdin.write("go\n")
                    p.stdin.flush()
                    line = p.stdout.readline()
                    while line and not line.startswith('{"it"'):
                        line = p.stdout.readline()
                    if not line:
                        p.wait(30)
                        sys.exit(f"{impl} side failed ({p.returncode}):\n"
                                 f"{p.stderr.read()[-3000:]}")
                    r = json.loads(line)
                    if it >= a.warmup:
                        rows.append(dict(mode=mode, size=size, impl=impl,
                                         it=it, put=r["put_ns"] / 1e3,
                                         get=r["get_ns"] / 1e3))
        for impl, p in procs.items():
            p.stdin.close()
            if p.wait(60):
                sys.exit(f"{impl} side failed ({p.returncode}):\n"
                         f"{p.stderr.read()[-3000:]}")
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build")
    ap.add_argument("--master")
    ap.add_argument("--metadata")
    ap.add_argument("--count", type=int, default=32)
    ap.add_argument("--sizes", default="65536,1048576")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--modes", default="same_host,tcp")
    ap.add_argument("--segment", default="1GiB")
    ap.add_argument("--json")
    ap.add_argument("--prefix", default="psb")
    ap.add_argument("--lockstep", type=int, default=0,
                    help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.build = os.path.abspath(a.build or default_build())
    if a.child:
        return child(a)

    pool = None
    tmp = tempfile.mkdtemp(prefix="python_store_bench.")
    try:
        if not a.master:
            pool = Pool(a.build, tmp, size_arg(a.segment))
            a.master, a.metadata = pool.master, pool.metadata
            warm(a)
        elif not a.metadata:
            sys.exit("--master needs --metadata")
        rows = []
        for mode in a.modes.split(","):
            rows += lockstep(a, mode)
        report(rows, a.count)
        cost = binding_cost(a)
        print(f"Python layer alone, per {a.count}-key call (no I/O): "
              + ", ".join(f"{k} {v:.1f} us" for k, v in cost.items()))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"rounds": rows, "binding_us": cost}, f)
    finally:
        if pool:
            pool.stop()
    shutil.rmtree(tmp, ignore_errors=True)  # kept (logs) when it failed


def binding_cost(a):
    """µs per 32-key call of the Python layer alone: a store that is not
    set up, so the C function returns at once (-1010)."""
    sys.path.insert(0, os.path.join(REPO, "python"))
    os.environ.setdefault("MOONCAKE_LIB", os.path.join(
        a.build, "mooncakefs", "lib", "libmooncake.so"))
    from mooncake.store import MooncakeDistributedStore
    s = MooncakeDistributedStore()
    n = a.count
    keys = [f"{a.prefix}/1048576/123/{i}" for i in range(n)]
    ptrs = [0x7f0000000000 + (i << 20) for i in range(n)]
    sizes = [1 << 20] * n
    out = {}
    for name, fn in (("batch_put_from",
                      lambda: s.batch_put_from(keys, ptrs, sizes)),
                     ("batch_get_into",
                      lambda: s.batch_get_into(keys, ptrs, sizes))):
        best = None
        for _ in range(5):
            t0 = time.perf_counter_ns()
            for _ in range(2000):
                fn()
            dt = (time.perf_counter_ns() - t0) / 2000 / 1e3
            best = dt if best is None else min(best, dt)
        out[name] = best
    return out


def report(rows, count):
    print(f"{'mode':<10} {'size':>8} {'op':<15} {'C p50 us':>9} "
          f"{'Py p50 us':>9} {'C GB/s':>7} {'Py GB/s':>7} "
          f"{'Py-C p50 (paired)':>19}")
    cases = []
    for r in rows:
        if (r["mode"], r["size"]) not in cases:
            cases.append((r["mode"], r["size"]))
    for mode, size in cases:
        for op, field in (("batch_put_from", "put"),
                          ("batch_get_into", "get")):
            by = {impl: {r["it"]: r[field] for r in rows
                         if (r["mode"], r["size"], r["impl"]) ==
                         (mode, size, impl)} for impl in ("c", "python")}
            c = statistics.median(by["c"].values())
            py = statistics.median(by["python"].values())
            diff = statistics.median(by["python"][i] - by["c"][i]
                                     for i in by["c"])
            gb = count * size / 1e3
            print(f"{mode:<10} {size:>8} {op:<15} {c:>9.1f} {py:>9.1f} "
                  f"{gb / c:>7.2f} {gb / py:>7.2f} "
                  f"{diff:>+8.1f} us {100 * diff / c:>+5.1f}%")


if __name__ == "__main__":
    main()
