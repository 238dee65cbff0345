# SPDX-License-Identifier: Apache-2.0
"""Segments of embedded clients (the Python package inside an inference
process) in real deployments: nothing left in /dev/shm after kill -9,
same-host clients still read each other through shared memory, and a
container's 64 MiB /dev/shm gives a working client or a clear error,
never a signal (issue 15; docs/design.md, "Segments")."""
# TIMEOUT: 300
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

import mctest
from pool import MEMBER, SCALE, binary, free_port, read_port, wait_for

MIB = 1 << 20
SEG = 64 * MIB
VAL = 1 * MIB

# A child process: an embedded client driven over stdin, one JSON answer
# per command on stdout.
CHILD = r'''
import json, os, sys
sys.path.insert(0, sys.argv[1])
from mooncake.store import MooncakeDistributedStore, ReplicateConfig
master, metadata, seg = sys.argv[2], sys.argv[3], int(sys.argv[4])
s = MooncakeDistributedStore()
rc = s.setup("127.0.0.1", metadata, seg, 16 << 20, "tcp", "", master)
print(json.dumps({"rc": rc, "name": s.get_hostname(), "pid": os.getpid()}),
      flush=True)
for line in sys.stdin:
    cmd, *args = line.split()
    out = {}
    if cmd == "put":
        cfg = ReplicateConfig()
        cfg.prefer_alloc_in_same_node = True
        out["rc"] = s.put(args[0], bytes([int(args[2])]) * int(args[1]), cfg)
    elif cmd == "get":
        v = s.get(args[0])
        out["ok"] = v == bytes([int(args[2])]) * int(args[1])
        out["replicas"] = [
            d.get_memory_descriptor().buffer_descriptor.transport_endpoint
            for d in s.get_replica_desc(args[0])]
    elif cmd == "stats":
        out = {t: s.transfer_stats(t) for t in ("tcp", "shm", "local")}
    elif cmd == "close":
        out["rc"] = s.close()
    print(json.dumps(out), flush=True)
'''


class Child:
    """An embedded client in its own python3 process."""

    def __init__(self, procs, tmp_path, master, env, seg=SEG, prefix=()):
        script = tmp_path / "embedded_child.py"
        script.write_text(CHILD)
        self.log_path = tmp_path / f"child{len(procs.procs)}.log"
        log = open(self.log_path, "ab")
        self.proc = procs.popen(
            [*prefix, sys.executable, str(script),
             os.path.join(mctest.SOURCE, "python"), master.addr,
             master.metadata, str(seg)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            env=env, text=True)
        log.close()
        procs.logs.append(self.log_path)
        self.hello = self.answer()

    def answer(self):
        line = self.proc.stdout.readline()
        assert line, (f"child exited {self.proc.wait()}: "
                      f"{self.log_path.read_text(errors='replace')}")
        return json.loads(line)

    def cmd(self, *words):
        self.proc.stdin.write(" ".join(map(str, words)) + "\n")
        self.proc.stdin.flush()
        return self.answer()

    def log(self):
        return self.log_path.read_text(errors="replace")


def endpoints(descs):
    return [d.get_memory_descriptor().buffer_descriptor.transport_endpoint
            for d in descs]


SPINNERS = f"/dev/shm/mc-spinners.{os.geteuid()}"


def dev_shm_use(pid):
    """The /dev/shm files pid maps or holds open, but the host's table of
    busy-polling slots (mc_busy_poll.h: 512 bytes, no data, shared by the
    user's processes and kept), which is checked to be just that."""
    used = set()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            path = line.split(maxsplit=5)[5:]
            if path and path[0].startswith("/dev/shm/"):
                used.add(path[0].strip())
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/dev/shm/"):
            used.add(target)
    if SPINNERS in used:
        st = os.stat(SPINNERS)
        assert st.st_size == 512 and st.st_mode & 0o777 == 0o600, st
        used.discard(SPINNERS)
    return used


def old_segment_file(name):
    return "/dev/shm/mooncake.seg." + name.replace(":", "_")


def test_embedded_clients_read_each_other_over_shm_and_leave_nothing(
        master, procs, tmp_path, stores, python_env):
    """Two embedded clients on one host, no pool member: each reads the
    other's object through shared memory (shm counters grow, tcp's stay
    0), neither uses /dev/shm, and kill -9 of one leaves no file."""
    a = Child(procs, tmp_path, master, python_env)
    assert a.hello["rc"] == 0, a.log()
    b = stores()
    assert b.setup("127.0.0.1", master.metadata, SEG, 16 * MIB, "tcp", "",
                   master.addr) == 0
    assert a.cmd("put", "from/a", VAL, 0xA1)["rc"] == 0
    from mooncake.store import ReplicateConfig
    cfg = ReplicateConfig()
    cfg.prefer_alloc_in_same_node = True
    assert b.put("from/b", bytes([0xB2]) * VAL, cfg) == 0

    # Each object lives in its writer's segment, so each read crosses.
    assert b.get("from/a") == bytes([0xA1]) * VAL
    assert endpoints(b.get_replica_desc("from/a")) == \
        [a.hello["name"]]
    got = a.cmd("get", "from/b", VAL, 0xB2)
    assert got["ok"] and got["replicas"] == [b.get_hostname()]

    sb, sa = b.transfer_stats("shm"), a.cmd("stats")
    assert sb["read_bytes"] >= VAL, sb
    assert b.transfer_stats("tcp")["read_bytes"] == 0
    assert sa["shm"]["read_bytes"] >= VAL, sa
    assert sa["tcp"]["read_bytes"] == 0, sa

    # Nothing of either in /dev/shm, while they live or after kill -9.
    assert dev_shm_use(a.hello["pid"]) == set()
    assert dev_shm_use(os.getpid()) == set()
    procs.kill(a.proc)
    assert not os.path.exists(old_segment_file(a.hello["name"]))


def in_small_dev_shm(size="64m"):
    """argv prefix: run in a mount namespace of our own whose /dev/shm is
    a tmpfs of `size` (unmounted with the namespace)."""
    return ["unshare", "-m", "--propagation", "private", "--", "sh", "-c",
            f"mount -t tmpfs -o size={size} mctest /dev/shm && exec \"$@\"",
            "sh"]


needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare"),
    reason="mounting a tmpfs in a mount namespace needs root")


@needs_root
def test_small_dev_shm_embedded_client_works(master, procs, tmp_path,
                                             python_env):
    """A 256 MiB segment with a 64 MiB /dev/shm (Docker's default): an
    embedded client does not need /dev/shm at all, and works."""
    c = Child(procs, tmp_path, master, python_env, seg=256 * MIB,
              prefix=in_small_dev_shm())
    assert c.hello["rc"] == 0, c.log()
    assert c.cmd("put", "small/k", 32 * MIB, 7)["rc"] == 0
    assert c.cmd("get", "small/k", 32 * MIB, 7)["ok"]
    assert c.cmd("close")["rc"] == 0
    c.proc.stdin.close()
    assert c.proc.wait(30 * SCALE) == 0, c.log()


@needs_root
def test_small_dev_shm_named_segment_is_a_clear_error(master, procs,
                                                      tmp_path, python_env):
    """Asking for a kept segment (segment_name) that /dev/shm cannot hold
    is -200 from setup with the fix in the log, never a signal."""
    env = dict(python_env, MOONCAKE_SEGMENT_NAME=f"mctest{free_port()}")
    c = Child(procs, tmp_path, master, env, seg=256 * MIB,
              prefix=in_small_dev_shm())
    assert c.hello["rc"] == -200, c.log()
    c.proc.stdin.close()
    assert c.proc.wait(30 * SCALE) == 0, c.log()
    assert "--shm-size" in c.log()


@needs_root
def test_small_dev_shm_pool_member_falls_back(master, procs, tmp_path):
    """mooncake_client keeps its segment in /dev/shm where it fits; where
    it does not, it warns, naming the fix, and joins with private
    memory."""
    port = free_port()
    log_path, pf = tmp_path / "member.log", tmp_path / "member.port"
    log = open(log_path, "ab")
    proc = procs.popen(
        [*in_small_dev_shm(), binary(*MEMBER), "--host", "127.0.0.1",
         "--port", str(port), "--global_segment_size", "256MB",
         "--master_server_address", master.addr,
         "--metadata_server", master.metadata, "--port_file", str(pf)],
        stdout=log, stderr=log, env=mctest.te_env())
    log.close()
    procs.logs.append(log_path)
    read_port(pf, proc, log_path, "mooncake_client")
    wait_for(lambda: f"127.0.0.1:{port}" in master.segments(),
             what="the member's segment at the master")
    text = log_path.read_text(errors="replace")
    assert "--shm-size" in text and "private memory" in text, text
    procs.kill(proc)
    assert proc.returncode == -9


# A supervisor that forks its workers (as an inference server's launcher
# does): forks share the parent's address layout, so a worker started
# again under the same host:port places its segment at the same
# addresses as the one it replaces.
RESTART = r'''
import os, signal, sys, time
sys.path.insert(0, sys.argv[1])
from mooncake.store import MooncakeDistributedStore, ReplicateConfig
master, metadata, host = sys.argv[2], sys.argv[3], sys.argv[4]
MB = 1 << 20

def worker(fill, w):
    s = MooncakeDistributedStore()
    assert s.setup(host, metadata, 32 * MB, 16 * MB, "tcp", "",
                   master) == 0
    cfg = ReplicateConfig()
    cfg.preferred_segment = s.get_hostname()
    if fill == "z":
        for i in range(8):
            assert s.put(f"old{i}", b"z" * 100000, cfg) == 0
    else:
        assert s.put("new", b"N" * (30 * MB), cfg) == 0
    os.write(w, b"ready\n")
    time.sleep(60)
    os._exit(0)

def spawn(fill):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        worker(fill, w)
    assert os.read(r, 100) == b"ready\n"
    return pid

a = spawn("z")
os.kill(a, signal.SIGKILL)
os.waitpid(a, 0)
b = spawn("N")
s = MooncakeDistributedStore()
assert s.setup("127.0.0.1", metadata, 0, 16 * MB, "tcp", "", master) == 0
buf = bytearray(MB)
import ctypes
cbuf = (ctypes.c_char * MB).from_buffer(buf)
ptr = ctypes.addressof(cbuf)
assert s.register_buffer(ptr, MB) == 0
wrong = 0
for i in range(8):
    buf[:] = bytes(MB)
    n = s.get_into(f"old{i}", ptr, MB)
    if n > 0 and bytes(buf[:n]) != b"z" * 100000:
        wrong += 1
    print(f"old{i} {n} {bytes(buf[:4])!r}", flush=True)
print(f"wrong {wrong}", flush=True)
s.unregister_buffer(ptr)
s.close()
os.kill(b, signal.SIGKILL)
os.waitpid(b, 0)
'''


@pytest.mark.parametrize("force_tcp", [False, True], ids=["shm", "tcp"])
def test_worker_restarted_under_its_name_never_serves_the_old_keys(
        master, procs, tmp_path, python_env, force_tcp):
    """A worker killed and started again under the same host:port within
    client_ttl: the master still lists the old worker's objects at their
    addresses, and the new worker's segment covers those addresses.
    Reads of the old keys fail (TRANSFER_FAIL, until the master drops the
    old segment) and never return the new worker's bytes (they did,
    through shared memory and over tcp: the engine name alone chose the
    memory; segments now tag their memory with their id)."""
    script = tmp_path / "restart.py"
    script.write_text(RESTART)
    env = dict(python_env)
    if force_tcp:
        env["MC_FORCE_TCP"] = "1"
    host = f"127.0.0.1:{free_port()}"
    out = subprocess.run(
        [sys.executable, str(script), os.path.join(mctest.SOURCE, "python"),
         master.addr, master.metadata, host],
        env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1] == "wrong 0", out.stdout
    # Not one read returned bytes (the old worker's memory is gone).
    assert all(int(line.split()[1]) < 0 for line in lines[:-1]), out.stdout


def rss_shmem(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssShmem:"):
                return int(line.split()[1]) << 10
    return 0


def test_segment_faulted_in_ahead_only_while_memory_is_available(
        master, procs, tmp_path, python_env):
    """A segment is faulted in behind setup() (first touches are slow on
    VMs), but only while the machine keeps its reserve available: a
    segment larger than what is free (a connector's 16 GB default on a
    smaller host) filled every page at once and its process was killed
    for memory before it stored anything. Here the reserve is set above
    this machine's memory, so nothing is taken ahead; the same segment
    with the default reserve is taken whole."""
    seg = 256 * MIB

    def resident(env):
        c = Child(procs, tmp_path, master, env, seg=seg)
        assert c.hello["rc"] == 0, c.log()
        pid, deadline, rss = c.hello["pid"], time.monotonic() + 20, 0
        while time.monotonic() < deadline:
            rss = rss_shmem(pid)
            if rss >= seg or "stopped faulting" in c.log():
                break
            time.sleep(0.1)
        time.sleep(0.3)  # what was on its way when it stopped
        rss = rss_shmem(pid)
        log = c.log()
        assert c.cmd("close")["rc"] == 0
        return rss, log

    rss, log = resident(python_env)
    assert rss >= seg, (rss, log)
    held = dict(python_env, MC_POPULATE_RESERVE_MB=str(1 << 40))
    rss, log = resident(held)
    assert rss < 64 * MIB, (rss, log)
    assert "stopped faulting it in ahead" in log, log


def test_segment_faulted_in_ahead_stops_below_a_containers_limit(
        master, procs, tmp_path, python_env):
    """A container's memory limit (a cgroup's, v2 or v1), not only the
    machine's free memory, bounds what is faulted in ahead: a connector
    giving a 1 GiB segment in a 384 MiB container was killed for memory
    right after setup(), before it stored anything, since the machine as
    a whole had plenty free. It now runs, takes what it is given as it
    is used, and says why in its log."""
    limit, seg = 384 * MIB, 1024 * MIB
    with mctest.memory_cgroup(limit) as prefix:
        c = Child(procs, tmp_path, master, python_env, seg=seg,
                  prefix=prefix)
        assert c.hello["rc"] == 0, c.log()
        pid, deadline = c.hello["pid"], time.monotonic() + 20
        while time.monotonic() < deadline and "cgroup" not in c.log():
            assert c.proc.poll() is None, (c.proc.returncode, c.log())
            time.sleep(0.1)
        time.sleep(0.5)  # what was on its way when it stopped
        assert c.proc.poll() is None, (c.proc.returncode, c.log())
        assert "stopped faulting it in ahead" in c.log(), c.log()
        assert "memory cgroup (limit 384 MiB)" in c.log(), c.log()
        assert rss_shmem(pid) < limit, rss_shmem(pid)
        # It still works: a put into its own segment and a get of it.
        assert c.cmd("put", "k-cg", VAL, 7)["rc"] == 0, c.log()
        assert c.cmd("get", "k-cg", VAL, 7)["ok"], c.log()
        assert c.cmd("close")["rc"] == 0
        c.proc.stdin.close()
        assert c.proc.wait(timeout=30) == 0, c.log()


def test_segment_memory_is_left_out_of_core_dumps(master, procs, tmp_path,
                                                  python_env):
    """A crash of an inference process wrote its whole segment (other
    clients' objects, gigabytes) into its core dump: the pool's memory is
    marked MADV_DONTDUMP (smaps' "dd")."""
    c = Child(procs, tmp_path, master, python_env, seg=SEG)
    assert c.hello["rc"] == 0, c.log()
    found = []
    with open(f"/proc/{c.hello['pid']}/smaps") as f:
        head = None
        for line in f:
            if line[0].isdigit() or line[0] in "abcdef":
                head = line
            elif line.startswith("VmFlags:") and head and \
                    "memfd:mooncake" in head:
                lo, hi = (int(x, 16) for x in head.split()[0].split("-"))
                if hi - lo >= SEG:
                    found.append(line.split()[1:])
    assert found, "no segment mapping found"
    assert all("dd" in flags for flags in found), found
    assert c.cmd("close")["rc"] == 0
