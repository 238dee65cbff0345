#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""mooncake.engine.TransferEngine (the Python binding) against
transfer_engine_bench (C, libte directly), in one run.

One transfer_engine_bench target (P2PHANDSHAKE on 127.0.0.1, a
--buffer_size buffer of anonymous memory, so the engine moves it over
TCP) serves both initiators. Per operation (read, write), the C initiator
(transfer_engine_bench --threads 1) and the Python one (this script
re-run with --child) take turns, --repeat times each, C first in even
rounds and Python first in odd ones, so both see the same background
load. Both run one thread in the same closed loop: a batch of
--batch_size requests of --block_size bytes at consecutive target
offsets (wrapping inside the target buffer), wait for all of it, check
every request completed, repeat for --duration seconds after one
unrecorded batch. The Python side does it with
batch_transfer_sync_read/write. The figure is the median GB/s of each
side, and the ratio the median of the per-round ratios (Python / C).

With --overhead, only the binding's own cost per call is measured, in
one process (overhead() below): what it adds to a batch whatever the
block size, which on a loaded machine is steadier than two throughputs.

Usage: bench/python_te_bench.py [--build DIR] [--block_size 1048576]
       [--batch_size 16] [--duration 4] [--repeat 3]
       [--buffer_size 256MiB] [--ops read,write] [--json FILE]
       bench/python_te_bench.py --overhead [--batch_size 16] [--repeat 3]
Nothing here asserts a timing.
"""
import argparse
import glob
import json
import os
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
        exe = os.path.join(d, "bench", "transfer_engine_bench")
        lib = os.path.join(d, "mooncakefs", "lib", "libmooncake.so")
        try:
            cache = open(os.path.join(d, "CMakeCache.txt")).read()
        except OSError:
            continue
        if "MC_SANITIZE:STRING=\n" not in cache and "MC_SANITIZE:" in cache:
            continue
        if os.path.exists(exe) and os.path.exists(lib):
            found.append((os.path.getmtime(exe), d))
    if not found:
        sys.exit("python_te_bench: no build with bench/transfer_engine_bench"
                 " (scripts/build.sh release, or --build DIR)")
    return sorted(found)[-1][1]


def parse_size(s):
    s = s.strip().lower().replace("ib", "").rstrip("b")
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def child(args):
    """The Python initiator: prints one JSON line."""
    import numpy as np
    sys.path.insert(0, os.path.join(REPO, "python"))
    from mooncake.engine import TransferEngine
    eng = TransferEngine()
    assert eng.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    n, bs = args.batch_size, args.block_size
    # transfer_engine_bench's pattern (byte i is i * 131 + 7), so writes
    # leave the target as the C initiator's check expects it
    local = ((np.arange(n * bs, dtype=np.uint64) * 131 + 7) & 0xff).astype(
        np.uint8)
    assert eng.register_memory(local.ctypes.data, local.nbytes) == 0
    seg = args.segment
    base = eng.get_first_buffer_address(seg)
    assert base, f"segment {seg} has no buffer"
    slots = max(args.buffer_size // bs, 1)
    locs = [local.ctypes.data + i * bs for i in range(n)]
    lens = [bs] * n
    op = (eng.batch_transfer_sync_read if args.operation == "read"
          else eng.batch_transfer_sync_write)
    k = 0

    def remotes():
        nonlocal k
        out = [base + ((k + i) % slots) * bs for i in range(n)]
        k = (k + n) % slots
        return out

    assert op(seg, locs, remotes(), lens) == 0  # warm-up
    batches, t0 = 0, time.monotonic()
    end = t0 + args.duration
    while True:
        assert op(seg, locs, remotes(), lens) == 0
        batches += 1
        t1 = time.monotonic()
        if t1 >= end:
            break
    secs = t1 - t0
    print(json.dumps({"gbps": batches * n * bs / secs / 1e9,
                      "batches": batches, "duration_s": secs}), flush=True)
    eng.close()


def overhead(args):
    """The binding's own cost per batch call: one process, two engines,
    --batch_size requests of 64 bytes over TCP, timed in alternating
    chunks through batch_transfer_sync_read and through the bare C calls
    the binding makes (mooncake_te_batch_submit_arrays, then
    mooncake_te_batch_result, then a reset), from ctypes with the arrays
    prepared once. Prints one JSON line: median microseconds per call of
    each, and the difference."""
    import ctypes
    import numpy as np
    sys.path.insert(0, os.path.join(REPO, "python"))
    from mooncake import engine as me
    a, b = me.TransferEngine(), me.TransferEngine()
    assert a.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    assert b.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    n = args.batch_size
    x = np.zeros(n * 4096, np.uint8)
    y = np.zeros(n * 4096, np.uint8)
    assert a.register_memory(x.ctypes.data, x.nbytes) == 0
    assert b.register_memory(y.ctypes.data, y.nbytes) == 0
    sess = f"127.0.0.1:{b.get_rpc_port()}"
    locs = [x.ctypes.data + i * 4096 for i in range(n)]
    rems = [y.ctypes.data + i * 4096 for i in range(n)]
    lens = [64] * n
    L = me._L
    seg = a._segment(sess)
    batch = ctypes.c_void_p()
    assert L.mooncake_te_batch_create(a._st.eng, n, ctypes.byref(batch)) == 0
    cl, cr, cn = me._ptrs(locs), me._u64(rems), me._u64(lens)

    def raw():
        assert L.mooncake_te_batch_submit_arrays(batch, 0, seg, cl, cr, cn,
                                                 n) == 0
        assert L.mooncake_te_batch_result(batch, n, 30000) == 0
        assert L.mooncake_te_batch_reset(batch) == 0

    def binding():
        assert a.batch_transfer_sync_read(sess, locs, rems, lens) == 0

    per = {"raw": [], "binding": []}
    for _ in range(20):
        raw()
        binding()
    for r in range(args.repeat * 20):
        for name, fn in (("raw", raw), ("binding", binding))[::1 if r % 2
                                                              else -1]:
            t = time.perf_counter()
            for _ in range(50):
                fn()
            per[name].append((time.perf_counter() - t) / 50 * 1e6)
    diffs = [p - q for p, q in zip(per["binding"], per["raw"])]
    print(json.dumps({"batch_size": n,
                      "raw_us": statistics.median(per["raw"]),
                      "binding_us": statistics.median(per["binding"]),
                      "overhead_us": statistics.median(diffs)}), flush=True)
    L.mooncake_te_batch_destroy(batch)
    a.close()
    b.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=None)
    ap.add_argument("--block_size", type=parse_size, default=1 << 20)
    ap.add_argument("--batch_size", type=int, default=16)
    ap.add_argument("--duration", type=float, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--buffer_size", type=parse_size, default=256 << 20)
    ap.add_argument("--ops", default="read,write")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--segment", default=None)
    ap.add_argument("--operation", default="read")
    ap.add_argument("--overhead", action="store_true",
                    help="only the binding's own cost per call (see "
                         "overhead())")
    args = ap.parse_args()
    if args.child:
        return child(args)
    if args.overhead:
        return overhead(args)
    build = args.build or default_build()
    teb = os.path.join(build, "bench", "transfer_engine_bench")
    lib = os.path.join(build, "mooncakefs", "lib", "libmooncake.so")
    env = dict(os.environ, MOONCAKE_LIB=lib)
    tmp = tempfile.mkdtemp(prefix="python_te_bench.")
    ready = os.path.join(tmp, "ready.json")
    target = subprocess.Popen(
        [teb, "--mode", "target", "--protocol", "tcp", "--buffer_size",
         str(args.buffer_size), "--ready_file", ready],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "t.log"),
                                               "wb"))
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(ready):
            if target.poll() is not None or time.monotonic() > deadline:
                sys.exit("python_te_bench: the target did not start: "
                         + open(os.path.join(tmp, "t.log")).read())
            time.sleep(0.05)
        seg = json.load(open(ready))["segment"]
        rows = []
        for op in args.ops.split(","):
            c_runs, py_runs, ratios = [], [], []
            for r in range(args.repeat):
                order = ("c", "py") if r % 2 == 0 else ("py", "c")
                got = {}
                for side in order:
                    if side == "c":
                        out = subprocess.run(
                            [teb, "--segment_id", seg, "--protocol", "tcp",
                             "--operation", op, "--block_size",
                             str(args.block_size), "--batch_size",
                             str(args.batch_size), "--threads", "1",
                             "--duration", str(int(args.duration)),
                             "--buffer_size", str(args.buffer_size),
                             "--json"], capture_output=True, text=True,
                            env=env, check=True).stdout
                        line = [x for x in out.splitlines()
                                if x.startswith("{")][-1]
                    else:
                        out = subprocess.run(
                            [sys.executable, os.path.abspath(__file__),
                             "--child", "--segment", seg, "--operation", op,
                             "--block_size", str(args.block_size),
                             "--batch_size", str(args.batch_size),
                             "--duration", str(args.duration),
                             "--buffer_size", str(args.buffer_size)],
                            capture_output=True, text=True, env=env,
                            check=True).stdout
                        line = out.strip().splitlines()[-1]
                    got[side] = json.loads(line)["gbps"]
                c_runs.append(got["c"])
                py_runs.append(got["py"])
                ratios.append(got["py"] / got["c"])
            row = {"operation": op, "block_size": args.block_size,
                   "batch_size": args.batch_size,
                   "c_gbps": statistics.median(c_runs),
                   "py_gbps": statistics.median(py_runs),
                   "ratio": statistics.median(ratios),
                   "ratio_min": min(ratios), "ratio_max": max(ratios),
                   "c_runs": c_runs, "py_runs": py_runs}
            rows.append(row)
        print("| operation | block | batch | C GB/s | Python GB/s | "
              "Python / C [range] |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['operation']} | {r['block_size'] >> 10} KiB | "
                  f"{r['batch_size']} | {r['c_gbps']:.2f} | "
                  f"{r['py_gbps']:.2f} | {r['ratio']:.3f} "
                  f"[{r['ratio_min']:.3f}-{r['ratio_max']:.3f}] |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    finally:
        target.terminate()
        target.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
