# SPDX-License-Identifier: Apache-2.0
"""Two hosts (network namespaces made by the test): the master on host A,
mounts on either host; each mount runs through `nsenter --net=` so it
stays visible here. Bytes cross between hosts over TCP in both
directions, and over a link that delivers MTU-sized segments, as a real
network does (loopback and a plain veth pair carry 64 KiB ones)."""
import contextlib
import os
import subprocess
import sys
import types

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from netns import TwoHosts, can_make_namespaces  # noqa: E402
import mount  # noqa: E402
from mount import Mount, binary, wait_for  # noqa: E402
import mctest  # noqa: E402

MASTER = ("master", "mooncake_master")
SHELL = ("tests", "tools", "store_shell")
MiB = 1 << 20
KiB = 1 << 10


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


def start_master(procs, tmp_path, host):
    """A master with its metadata service on host: .addr, .metadata."""
    log = tmp_path / "master.log"
    procs.logs.append(log)
    with open(log, "ab") as lf:
        m = procs.popen(host.nsenter([
            binary(*MASTER), "--rpc_address", host.addr, "--rpc_port", "0",
            "--port_file", str(tmp_path / "rpc.port"), "--metrics_host",
            host.addr, "--metrics_port", "0",
            "--enable_http_metadata_server", "--http_metadata_server_host",
            host.addr, "--http_metadata_server_port", "0",
            "--metadata_port_file", str(tmp_path / "meta.port"),
            "--db_path", str(tmp_path / "m.db")]), stdout=lf, stderr=lf)
    rpc = port_of(tmp_path / "rpc.port", m, log)
    meta = port_of(tmp_path / "meta.port", m, log)
    return types.SimpleNamespace(
        addr=f"{host.addr}:{rpc}",
        metadata=f"http://{host.addr}:{meta}/metadata")


@contextlib.contextmanager
def mounted(procs, tmp_path, host, master, name, seg, opts="", named=True):
    """A mount of the pool on host (Mount, run through the namespace's
    nsenter so it stays visible here), with local_hostname the host's
    address unless not named; cleaned up afterwards."""
    m = None
    given = [f"local_hostname={host.addr}"] if named else []
    try:
        m = Mount(procs, tmp_path, master, name=name, seg=seg,
                  opts=",".join(given + ([opts] if opts else [])),
                  prefix=host.nsenter([]))
        yield m
    finally:
        if m:
            m.cleanup()


def library_client(procs, tmp_path, host, master, seg):
    """store_shell on host, set up as a pool member contributing seg."""
    shlog = tmp_path / "shell.log"
    procs.logs.append(shlog)
    with open(shlog, "ab") as lf:
        sp = procs.popen(host.nsenter([binary(*SHELL)]),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=lf, bufsize=0, env=mctest.te_env())
    sh = mctest.TeClient(sp, shlog)
    name = f"{host.addr}:{mctest._seq.__next__() + 23000}"
    procs.own_shm("/dev/shm/mooncake.seg." + name.replace(":", "_"))
    r = sh.cmd(f"setup {name} {master.metadata} {seg} 64MiB tcp "
               f"{master.addr}")
    assert r.startswith("ok"), r
    return sh


def test_mount_on_another_host(procs, tmp_path, hosts):
    a, b = hosts.a, hosts.b
    master = start_master(procs, tmp_path, a)
    with mounted(procs, tmp_path, b, master, "mnt", "64MiB") as m:
        mnt = m.path
        # A library client on host A contributes memory too.
        sh = library_client(procs, tmp_path, a, master, "64MiB")
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


def test_a_mount_on_the_default_local_hostname(procs, tmp_path, hosts):
    """A mount given no local_hostname (127.0.0.1, this host only) with
    the master on another host: peers are given its address on the way
    to the master, so a client on host A writes into and reads from the
    only segment, B's (it reached itself at 127.0.0.1 before)."""
    a, b = hosts.a, hosts.b
    master = start_master(procs, tmp_path, a)
    with mounted(procs, tmp_path, b, master, "mnt", "64MiB",
                 named=False) as m:
        sh = library_client(procs, tmp_path, a, master, "0")
        blob = os.urandom(3 << 20)
        (m.path / "kv" / "fromB").write_bytes(blob)
        r = sh.cmd("get fromB")
        assert r.startswith("ok") and r.split()[1] == str(3 << 20), r
        assert sh.cmd("put fromA 2000000 5").startswith("ok")
        assert len((m.path / "kv" / "fromA").read_bytes()) == 2000000
        log = m.log()
        assert f"peers are given {b.addr}" in log, log[-2000:]


@pytest.mark.parametrize("read_ahead", [0, 1])
def test_remote_reads_in_mtu_sized_segments(procs, tmp_path, hosts,
                                            read_ahead):
    """A link of 1500-byte MTU that hands the receiver one segment at a
    time (no segmentation offload on the pair): a TCP payload then
    arrives in ~1.4 KiB fragments, each taking a pipe slot (a page), so a
    pipe fills long before its size in bytes. Reads through pipes
    (splice_read, on by default) must still return the file's bytes at
    every offset; the first pipe that fills turns them off for the mount
    (libfuse would copy such replies anyway), logged once, and every read
    after it is copied through a buffer. With read_ahead=1 the pipes are
    the read-ahead chunks' (fs.pipe-max-size raised so 1 MiB chunks take
    them at all)."""
    hosts.mtu_sized_segments()
    a, b = hosts.a, hosts.b
    master = start_master(procs, tmp_path, a)
    size = 12 * MiB + 4097
    with contextlib.ExitStack() as st:
        if read_ahead:
            st.enter_context(mount.pipe_max_size(4 * MiB))
        holder = st.enter_context(mounted(procs, tmp_path, a, master,
                                          "holder", "64MiB"))
        reader = st.enter_context(mounted(procs, tmp_path, b, master,
                                          "reader", "0",
                                          f"read_ahead={read_ahead}"))
        want = mount.write_random(holder.kv / "big", size, 7)
        # Until a pipe fills (within a few passes: how much of a payload
        # the receiver's queue coalesces varies), then once more.
        passes = 0
        while reader.stats()["mount_splice_fallbacks"] == 0 and passes < 6:
            assert mount.direct_read(reader.kv / "big", 512 * KiB) == want
            passes += 1
        s = reader.stats()
        if s["mount_splice_fallbacks"] == 0:
            pytest.skip(f"no pipe filled in {passes} passes ({s}): this "
                        "kernel coalesced the link's segments")
        log = reader.log()
        assert "network fragments of" in log and "from now on" in log, log
        assert s["mount_splice_fallbacks"] == 1, s
        spliced = s["mount_splice_reads"] + s["mount_readahead_spliced"]
        # Every read after the notice is copied, and returns the bytes.
        assert mount.direct_read(reader.kv / "big", 1 * MiB) == want
        with open(reader.kv / "big", "rb") as f:
            assert f.read() == want
        s = reader.stats()
        assert s["mount_splice_reads"] + s["mount_readahead_spliced"] == \
            spliced, s
        assert s["mount_splice_fallbacks"] == 1, s
