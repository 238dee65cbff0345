# SPDX-License-Identifier: Apache-2.0
"""The RDMA VM harness (scripts/rdma_vm.sh): one VM run in which soft-RoCE
works and the checkout under test is visible.

Inside the VM this same file runs as a script (--in-vm RESULT): it checks
that ibv_devinfo lists the rxe device with an active port, that an
ibv_rc_pingpong server and client (both on the one rxe device, the GID
index the harness found) complete, and that a binary of the build under
test runs (the host's root is shared into the VM); it writes what it saw to
RESULT, on a directory the harness shares writable. The test skips, saying
why, only where the VM cannot run at all (no qemu, no kernel package)."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from mctest import BUILD, SCALE, SOURCE, TE_PEER, binary  # noqa: E402

HARNESS = os.path.join(SOURCE, "scripts", "rdma_vm.sh")
VM_TIMEOUT = int(240 * SCALE)
PINGPONG_PORT = "18515"


# ------------------------------------------------------- inside the VM

def run(argv, timeout=60):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return {"argv": argv, "rc": p.returncode, "out": p.stdout,
            "err": p.stderr}


def pingpong():
    dev = os.environ["MC_RDMA_DEVICE"]
    gid = os.environ["MC_RDMA_GID_INDEX"]
    common = ["-d", dev, "-g", gid, "-p", PINGPONG_PORT, "-s", "4096",
              "-n", "200"]
    server = subprocess.Popen(["ibv_rc_pingpong"] + common,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        # The server listens a moment after it starts: retry the client.
        for _ in range(50):
            client = run(["ibv_rc_pingpong"] + common +
                         [os.environ["MC_RDMA_IP"]])
            if "Couldn't connect" not in client["err"]:
                break
            time.sleep(0.2)
        out, err = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return {"server": {"rc": server.returncode, "out": out, "err": err},
            "client": client}


def in_vm(result_path):
    r = {"env": {k: v for k, v in os.environ.items()
                 if k.startswith("MC_RDMA_")},
         "uname": os.uname().release}
    r["devinfo"] = run(["ibv_devinfo", "-d", os.environ["MC_RDMA_DEVICE"]])
    r["pingpong"] = pingpong()
    r["te_peer"] = run([binary(*TE_PEER), "--help"])
    # libte's view of this host's RDMA: discovery from the VM's real
    # sysfs (the GID index it picks, against the harness's own), through
    # the Python package as a user would ask for it.
    env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "python"),
               MOONCAKE_LIB=os.path.join(BUILD, "mooncakefs", "lib",
                                         "libmooncake.so"))
    p = subprocess.run(
        [sys.executable, "-c",
         "from mooncake.engine import TransferEngine as T; "
         "print(T().get_local_topology())"],
        capture_output=True, text=True, timeout=60, env=env)
    r["topology"] = {"rc": p.returncode, "out": p.stdout, "err": p.stderr}
    # rdma asked for where a device exists: accepted (the host side has
    # no device: refused there).
    r["bench_rdma"] = run([binary("bench", "transfer_engine_bench"),
                           "--mode", "initiator", "--protocol", "rdma",
                           "--metadata_server", "P2PHANDSHAKE",
                           "--segment_id", "127.0.0.1:1", "--duration", "1"])
    with open(result_path, "w") as f:
        json.dump(r, f, indent=1)
    print(json.dumps(r, indent=1))


# ------------------------------------------------------- on the host

@pytest.fixture(scope="module")
def harness():
    """The harness, its kernel and initramfs ready; skips, saying why,
    where no VM can run (no qemu; the kernel download impossible: exit
    77)."""
    if not shutil.which("qemu-system-x86_64"):
        pytest.skip("qemu-system-x86_64 not found "
                    "(scripts/setup.sh installs qemu-system-x86)")
    p = subprocess.run([HARNESS, "--prepare"], capture_output=True,
                       text=True, timeout=600)
    if p.returncode == 77:
        pytest.skip(p.stderr.strip().splitlines()[-1])
    assert p.returncode == 0, p.stdout + p.stderr
    return HARNESS


def qemus_sharing(path):
    """qemu processes whose command line names path (a --rw share)."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"qemu-system-x86_64") and \
                any(str(path).encode() in a for a in argv):
            found.append(int(pid))
    return found


def test_rdma_vm(harness, tmp_path):
    te_peer = binary(*TE_PEER)  # the build under test must have it
    result = tmp_path / "result.json"
    t0 = time.monotonic()
    p = subprocess.run(
        [harness, "-t", str(VM_TIMEOUT), "--rw", str(tmp_path), "--",
         "/usr/bin/python3", os.path.abspath(__file__), "--in-vm",
         str(result)],
        capture_output=True, text=True, timeout=VM_TIMEOUT + 60)
    took = time.monotonic() - t0
    log = f"exit {p.returncode} after {took:.1f}s\n{p.stdout}\n{p.stderr}"
    print(log)
    assert p.returncode == 0, log
    r = json.loads(result.read_text())

    # The VM's own kernel, not this machine's; the harness's variables.
    assert r["uname"] != os.uname().release, log
    assert r["env"]["MC_RDMA_DEVICE"] == "rxe0", log
    assert r["env"]["MC_RDMA_GID_INDEX"].isdigit(), log
    assert r["env"]["MC_RDMA_IP"] == "10.0.0.1", log

    d = r["devinfo"]
    assert d["rc"] == 0, d
    assert "hca_id:\trxe0" in d["out"], d
    assert "PORT_ACTIVE" in d["out"], d

    for end in ("server", "client"):
        pp = r["pingpong"][end]
        assert pp["rc"] == 0, (end, pp)
        assert "200 iters in" in pp["out"], (end, pp)

    # A binary of the checkout under test ran inside the VM: its usage
    # came back (it exits 2 on --help).
    t = r["te_peer"]
    assert t["argv"][0] == te_peer, t
    assert "usage: te_peer" in t["out"] + t["err"], t

    # libte's RDMA discovery on a real (soft-RoCE) sysfs: rxe0, active,
    # RoCE, the GID index the harness found for 10.0.0.1, and the device
    # in the priority matrix of NUMA node 0.
    tp = r["topology"]
    assert tp["rc"] == 0, tp
    rdma = json.loads(tp["out"])["rdma"]
    dev = {d["name"]: d for d in rdma["devices"]}["rxe0"]
    assert dev["active"] and dev["link_layer"] == "Ethernet", dev
    assert dev["gid_index"] == int(r["env"]["MC_RDMA_GID_INDEX"]), \
        (dev, r["env"])
    assert dev["gid"].endswith("0a00:0001"), dev  # ::ffff:10.0.0.1
    assert "rxe0" in sum(rdma["priority_matrix"]["cpu:0"], []), rdma
    # rdma asked for where a device exists: the engine is created (not
    # refused); the run then fails only for want of a peer at 127.0.0.1:1.
    b = r["bench_rdma"]
    assert b["rc"] != 0, b
    assert "transport 'rdma' was asked for" not in b["err"] + b["out"], b
    assert "segment 127.0.0.1:1" in b["err"] + b["out"], b



def test_exit_status_and_output(harness):
    """The command's status, stdout and stderr come back apart; it ran in
    the caller's directory with the caller's environment and the
    harness's own variables."""
    p = subprocess.run(
        [harness, "-t", str(VM_TIMEOUT), "-e", "MC_VM_EXTRA=x y", "--",
         "/bin/sh", "-c", 'echo "out $PWD $MC_VM_CALLER $MC_VM_EXTRA '
         '$MC_RDMA_DEVICE"; echo err >&2; exit 7'],
        capture_output=True, text=True, timeout=VM_TIMEOUT + 60,
        cwd=HERE, env=dict(os.environ, MC_VM_CALLER="caller"))
    assert p.returncode == 7, p.stdout + p.stderr
    assert p.stdout == f"out {HERE} caller x y rxe0\n", p.stdout + p.stderr
    assert p.stderr.startswith("err\n") or "\nerr\n" in p.stderr, p.stderr


def test_timeout_kills_the_vm(harness, tmp_path):
    """A command that hangs ends with exit 124, a message that says so,
    and no qemu left (the VM is found by the directory it shares). Under
    TCG the 10 s may run out during the boot: the same path."""
    t0 = time.monotonic()
    p = subprocess.run(
        [harness, "-t", "10", "--rw", str(tmp_path), "--", "sleep", "600"],
        capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    assert p.returncode == 124, p.stdout + p.stderr
    assert "TIMEOUT: the VM ran past 10s" in p.stderr, p.stderr
    assert took < 40, took
    assert qemus_sharing(tmp_path) == []


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--in-vm":
        sys.exit("usage: test_vm.py --in-vm RESULT.json")
    in_vm(sys.argv[2])
