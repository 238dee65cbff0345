# SPDX-License-Identifier: Apache-2.0
"""Two hosts (network namespaces made by the test): the master and a
library client on host A, a mount contributing its segment on host B. The
mount runs through `nsenter --net=` so it stays visible here. Bytes cross
between hosts over TCP in both directions."""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from netns import TwoHosts, can_make_namespaces  # noqa: E402
from mount import binary, is_mounted, umount, wait_for  # noqa: E402
import mctest  # noqa: E402

MASTER = ("master", "mooncake_master")
MCFS = ("mooncakefs", "fuse", "mooncakefs")
SHELL = ("tests", "tools", "store_shell")


@pytest.fixture
def hosts(procs):
    why = can_make_namespaces()
    if why:
        pytest.skip(why)
    with TwoHosts(procs) as h:
        yield h


def port_of(path, proc, log):
    def ready():
        if proc.poll() is not None:
            raise RuntimeError(open(log, errors="replace").read())
        try:
            return int(path.read_text())
        except (FileNotFoundError, ValueError):
            return None
    return wait_for(ready, what=str(path))


def test_mount_on_another_host(procs, tmp_path, hosts):
    a, b = hosts.a, hosts.b
    log = tmp_path / "master.log"
    procs.logs.append(log)
    with open(log, "ab") as lf:
        m = procs.popen(a.nsenter([
            binary(*MASTER), "--rpc_address", a.addr, "--rpc_port", "0",
            "--port_file", str(tmp_path / "rpc.port"), "--metrics_host",
            a.addr, "--metrics_port", "0",
            "--enable_http_metadata_server", "--http_metadata_server_host",
            a.addr, "--http_metadata_server_port", "0",
            "--metadata_port_file", str(tmp_path / "meta.port"),
            "--db_path", str(tmp_path / "m.db")]), stdout=lf, stderr=lf)
    rpc = port_of(tmp_path / "rpc.port", m, log)
    meta = port_of(tmp_path / "meta.port", m, log)
    master = f"{a.addr}:{rpc}"
    metadata = f"http://{a.addr}:{meta}/metadata"

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    fslog = tmp_path / "fs.log"
    procs.logs.append(fslog)
    seg = f"th{os.getpid()}"
    p = subprocess.run(b.nsenter([
        binary(*MCFS), master, str(mnt), "-o",
        f"metadata={metadata},local_hostname={b.addr},segment_size=64MiB,"
        f"log_file={fslog},segment_name={seg}"]),
        capture_output=True, text=True, timeout=60)
    try:
        assert p.returncode == 0, p.stderr
        assert is_mounted(mnt)
        wait_for(lambda: os.listdir(mnt / "kv") is not None, timeout=30,
                 what="mount ready")
        # A library client on host A contributes memory too.
        shlog = tmp_path / "shell.log"
        procs.logs.append(shlog)
        with open(shlog, "ab") as lf:
            sp = procs.popen(a.nsenter([binary(*SHELL)]),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=lf, bufsize=0, env=mctest.te_env())
        sh = mctest.TeClient(sp, shlog)
        name = f"{a.addr}:{mctest._seq.__next__() + 23000}"
        procs.own_shm("/dev/shm/mooncake.seg." + name.replace(":", "_"))
        r = sh.cmd(f"setup {name} {metadata} 64MiB 64MiB tcp {master}")
        assert r.startswith("ok"), r
        # A -> B: put on host A (lands on A's or B's segment), read on B.
        for i in range(4):
            assert sh.cmd(f"put fromA/{i} 3000000 {i}").startswith("ok")
        for i in range(4):
            data = open(mnt / "kv" / "fromA" / str(i), "rb").read()
            assert len(data) == 3000000
        # B -> A: write through the mount, read with the library on A.
        blob = os.urandom(5 << 20)
        with open(mnt / "kv" / "fromB", "wb") as f:
            f.write(blob)
        r = sh.cmd("get fromB")
        assert r.startswith("ok") and r.split()[1] == str(5 << 20), r
        # Replicas live on both hosts: the segments are A's and B's.
        segs = sh.cmd("desc fromA/0")
        assert segs.startswith("ok"), segs
    finally:
        umount(mnt, lazy=True)
        subprocess.run(["pkill", "-9", "-f", f"mooncakefs .* {mnt} "],
                       capture_output=True)
        try:
            os.unlink(f"/dev/shm/mooncake.seg.{seg}")
        except OSError:
            pass
