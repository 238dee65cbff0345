# SPDX-License-Identifier: Apache-2.0
"""Writes into placed space outlive no master (docs/design.md "Writes into
placed space"). A put writes its bytes into the space its PutStart got;
a master that restarts forgets that space and, 0.75 s after its restore,
places other objects there. A long write that went on regardless would
overwrite them: another client's acknowledged object would read back
with this put's bytes.

Two hosts (network namespaces made here): the master and the writing
client on host A, the only pool member and a second client on host B,
the link from A to B slowed to 8 MB/s so that a 40 MiB write lasts
seconds. The master is killed (-9) and restarted while the write goes
on; the client on B then puts an object, which lands where the write
was going. Afterwards that object must read back as put, and the
writer's put either stored (put again on the new master, from the start)
or reported failed (a writer: its bytes are gone), and a mount's close
publishes the file all the same (its bytes are still staged); never a
mix."""
import datetime
import os
import re
import signal
import subprocess
import sys
import time
import types

import pytest

import mctest
from mctest import binary, free_port
from netns import TwoHosts, can_make_namespaces
from pool import read_port

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fs"))
from mount import Mount, fuse_why  # noqa: E402

MASTER = ("master", "mooncake_master")
MEMBER = ("mooncakefs", "cli", "mooncake_client")
SHELL = ("tests", "tools", "store_shell")
MiB = 1 << 20
RATE = "64mbit"  # 8 MB/s from A to B


def slow_link(h, verb="add"):
    """What A sends to B goes at RATE."""
    h._sh(*h.a.cmd(["tc", "qdisc", verb, "dev", h.veth[0], "root", "tbf",
                    "rate", RATE, "burst", "32kb", "latency", "50ms"]))


def make_bed(procs, tmp_path, master_on, writer_env=None, master_args=()):
    why = can_make_namespaces()
    if why:
        pytest.skip(why)
    with TwoHosts(procs) as h:
        slow_link(h)
        bed = types.SimpleNamespace(hosts=h, procs=procs, tmp=tmp_path)
        bed.master_host = getattr(h, master_on)
        bed.master_args = list(master_args)
        bed.master = start_master(bed)
        bed.member = start_member(bed)
        bed.writer = shell(bed, h.a, "w", writer_env)
        bed.other = shell(bed, h.b, "o")
        yield bed


@pytest.fixture
def bed(procs, tmp_path):
    # The master on A: only what A sends to B is slowed, so the pings
    # B's member and client send to the master, and the answers, stay
    # quick.
    yield from make_bed(procs, tmp_path, "a")


@pytest.fixture
def bed_ttl(procs, tmp_path):
    # As bed, with members dropped after 2 s of silence.
    yield from make_bed(procs, tmp_path, "a",
                        master_args=["--client_ttl", "2"])


@pytest.fixture
def bed_ttl_release(procs, tmp_path):
    # As bed_ttl, with abandoned puts reclaimed after 4 s.
    yield from make_bed(procs, tmp_path, "a",
                        master_args=["--client_ttl", "2",
                                     "--put_start_release_timeout_sec",
                                     "4"])


@pytest.fixture
def bed_mem(procs, tmp_path):
    # As bed, with a master that keeps no record: a restart knows
    # nothing of the run before, not even that there was one. So it
    # places nothing in re-mounted segments for a hold's TTL (readers of
    # the run before): 3 leases of 2 s here.
    yield from make_bed(procs, tmp_path, "a",
                        master_args=["--db_path", "memory",
                                     "--default_kv_lease_ttl", "2000"])


@pytest.fixture
def bed_b(procs, tmp_path):
    # The master on B with the member and the other client: the writer
    # on A alone behind the slowed link, over one connection to the
    # member (so that slices of a part queue behind each other on it).
    yield from make_bed(procs, tmp_path, "b",
                        {"MC_TCP_LANES_PER_PEER": "1"})


def start_master(bed, ports=None):
    """The master on its host, with fixed ports when restarted."""
    a, tmp = bed.master_host, bed.tmp
    rpc, meta = ports or (free_port(), free_port())
    log = tmp / "master.log"
    if log not in bed.procs.logs:
        bed.procs.logs.append(log)
    pf = tmp / "rpc.port"
    pf.unlink(missing_ok=True)
    with open(log, "ab") as lf:
        proc = bed.procs.popen(a.nsenter([
            binary(*MASTER), "--rpc_address", a.addr, "--rpc_port", str(rpc),
            "--port_file", str(pf), "--metrics_host", a.addr,
            "--metrics_port", "0", "--enable_http_metadata_server",
            "--http_metadata_server_host", a.addr,
            "--http_metadata_server_port", str(meta),
            "--db_path", str(tmp / "m.db"), *bed.master_args]),
            stdout=lf, stderr=lf)
    read_port(pf, proc, log, "mooncake_master")
    return types.SimpleNamespace(
        proc=proc, ports=(rpc, meta), addr=f"{a.addr}:{rpc}",
        metadata=f"http://{a.addr}:{meta}/metadata", log=log)


def start_member(bed):
    """The pool's only segment: 80 MiB on host B."""
    b, tmp = bed.hosts.b, bed.tmp
    port = free_port()
    bed.procs.own_shm("/dev/shm/mooncake.seg." + f"{b.addr}_{port}")
    log, pf = tmp / "member.log", tmp / "member.port"
    bed.procs.logs.append(log)
    with open(log, "ab") as lf:
        proc = bed.procs.popen(b.nsenter([
            binary(*MEMBER), "--host", b.addr, "--port", str(port),
            "--global_segment_size", "80MiB",
            "--master_server_address", bed.master.addr,
            "--metadata_server", bed.master.metadata,
            "--port_file", str(pf)]), stdout=lf, stderr=lf,
            env=mctest.te_env({"MC_STORE_PING_MS": "200"}))
    read_port(pf, proc, log, "mooncake_client")
    return proc


def shell(bed, host, tag, env=None):
    """A store_shell on host that contributes no memory."""
    log = bed.tmp / f"shell-{tag}.log"
    bed.procs.logs.append(log)
    with open(log, "ab") as lf:
        proc = bed.procs.popen(host.nsenter([binary(*SHELL)]),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=lf, bufsize=0,
                               env=mctest.te_env({"MC_STORE_PING_MS": "200",
                                                  **(env or {})}))
    sh = mctest.TeClient(proc, log)
    name = f"{host.addr}:{free_port()}"
    bed.procs.own_shm("/dev/shm/mooncake.seg." + name.replace(":", "_"))
    sh.ok(f"setup {name} {bed.master.metadata} 0 64MiB tcp "
          f"{bed.master.addr}")
    return sh


def log_times(path, what):
    """The times (s) of the lines of a daemon's log that contain what."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if what in line:
            stamp = datetime.datetime.strptime(" ".join(line.split()[:2]),
                                               "%Y-%m-%d %H:%M:%S.%f")
            out.append(stamp.timestamp())
    return out


def send(sh, line):
    """A command whose answer is read later (sh.readline)."""
    sh.proc.stdin.write(line.encode() + b"\n")


def sent_bytes(host, dev):
    """What the slowed link has sent so far (its qdisc's counter)."""
    out = host.run(["tc", "-s", "qdisc", "show", "dev", dev]).stdout
    return int(re.search(r"Sent (\d+) bytes", out).group(1))


def put_other(bed):
    """The other client's 20 MiB object, put as soon as the master places
    again (the member re-mounted): where the writer's put was going."""
    deadline = time.monotonic() + 20 * mctest.SCALE
    while True:
        reply = bed.other.cmd(f"put other {20 * MiB} 2", timeout=60)
        if reply.startswith("ok") or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert reply.startswith("ok"), reply


def restart_master_mid_write(bed, since):
    """Kill the master 2 MiB into the write (since: the link's counter
    before it), start it again, and put an object from host B as soon as
    the new master places again: it lands where the write was going."""
    h = bed.hosts
    mctest.wait_for(lambda: sent_bytes(h.a, h.veth[0]) - since >= 2 * MiB,
                    timeout=30, what="the write under way")
    bed.procs.kill(bed.master.proc)
    killed = time.monotonic()
    bed.master = start_master(bed, bed.master.ports)
    # The member re-mounts and the fence passes: then the put goes in.
    put_other(bed)
    print(f"the other object stored {time.monotonic() - killed:.2f} s "
          "after the kill")


def across_restart(bed, line):
    """The writer's command line sent, the master restarted 2 MiB into
    its write, the other client's object put and checked as it was put;
    the writer's reply."""
    since = sent_bytes(bed.hosts.a, bed.hosts.veth[0])
    send(bed.writer, line)
    restart_master_mid_write(bed, since)
    reply = bed.writer.readline(timeout=120)
    bed.other.ok(f"check other {20 * MiB} 2")
    return reply


def test_put_goes_again_on_the_new_master(bed):
    # A batch whose writes go in parts that span its objects (the slow
    # link makes parts of about 1 MiB): each object reads back whole.
    ok5 = "ok " + ",".join(["0"] * 5)
    assert bed.writer.cmd(f"bput 5 pre/ {3 * MiB} 5", timeout=120) == ok5
    assert bed.other.cmd(f"bget 5 pre/ {3 * MiB} 5", timeout=120) == ok5
    bed.other.ok("rmall force")
    reply = across_restart(bed, f"put mine {40 * MiB} 1")
    # Put again on the new master, from the start: stored.
    assert reply.startswith("ok"), reply
    bed.writer.ok(f"check mine {40 * MiB} 1")
    bed.other.ok(f"check mine {40 * MiB} 1")
    log = bed.writer.log()
    assert "restarted or lost its lead" in log, log[-3000:]


def test_a_master_without_a_record(bed_mem):
    """A master with `--db_path memory` restarts with no record: no
    segment restored, nothing to say that a run came before it. The
    member re-mounts its segment (new memory to this master) while the
    writer's pieces of the dead run may still start: the new master must
    not place in it before they have (its fence), nor the member fence
    its connections before then."""
    reply = across_restart(bed_mem, f"put mine {40 * MiB} 1")
    # Put again on the new master: stored, or refused while its pool is
    # still empty (the member not re-mounted yet): never wrong bytes.
    if reply.startswith("ok"):
        bed_mem.other.ok(f"check mine {40 * MiB} 1")
    else:
        assert reply.startswith("err -200"), reply
    # The member fenced no sooner than the dead run's last pieces could
    # start (600 ms after its last answer, so before the new master
    # began): the new master's fence_ms made it wait, record or not.
    served = log_times(bed_mem.master.log, "master: serving RPC on")
    fenced = log_times(bed_mem.tmp / "member.log",
                       "opened before the fence")
    assert len(served) == 2 and fenced, (served, fenced)
    assert fenced[-1] - served[1] >= 0.5, (served, fenced)


def test_writer_fails_and_writes_nothing_more(bed):
    h = bed.writer.cmd(f"wopen w {40 * MiB}")
    assert h.startswith("ok"), h
    handle = h.split()[1]
    reply = across_restart(bed, f"wpiece {handle} 0 {40 * MiB} 3")
    # The writer's bytes are gone with the master that placed them.
    assert reply.startswith("err -800"), reply
    reply = bed.writer.cmd(f"wclose {handle} commit")
    assert reply.startswith("err"), reply
    assert bed.other.cmd("exist w").split()[:2] != ["ok", "1"]


def test_mount_publishes_again(bed):
    """A file written through a mount on host A is published at its close
    (its staged bytes written to a temporary key, then renamed): the
    master restarts during that write, and the close still succeeds,
    the bytes written again into space the new master placed."""
    why = fuse_why()
    if why:
        pytest.skip(why)
    a = bed.hosts.a
    m = Mount(bed.procs, bed.tmp, bed.master, name="mnt", seg="0",
              opts=f"local_hostname={a.addr}", prefix=a.nsenter([]),
              env={"MC_STORE_PING_MS": "200"})
    try:
        data = os.urandom(40 * MiB)
        src = bed.tmp / "src"
        src.write_bytes(data)
        since = sent_bytes(a, bed.hosts.veth[0])
        # cp in a process of its own: a descriptor of the file open in
        # this one would be closed (and the file published) in every
        # child it forks, by exec.
        cp = subprocess.Popen(["cp", str(src), str(m.kv / "file")],
                              stderr=subprocess.PIPE, text=True)
        restart_master_mid_write(bed, since)
        rc = cp.wait(120 * mctest.SCALE)
        bed.other.ok(f"check other {20 * MiB} 2")
        assert rc == 0, cp.stderr.read()
        with open(m.kv / "file", "rb") as g:
            assert g.read() == data
        assert "writing it again" in m.log(), m.log()[-3000:]
    finally:
        m.cleanup()


def test_end_on_the_new_master(bed):
    """A writer whose bytes were all written before the restart: its end
    (PutEnd) reaches a master that knows nothing of the put. -800, the
    master gone, not the new master's 'object not found'."""
    h = bed.writer.cmd(f"wopen late {1 * MiB}")
    assert h.startswith("ok"), h
    handle = h.split()[1]
    bed.writer.ok(f"wpiece {handle} 0 {1 * MiB} 4")
    bed.procs.kill(bed.master.proc)
    bed.master = start_master(bed, bed.master.ports)
    reply = bed.writer.cmd(f"wclose {handle} commit", timeout=60)
    assert reply.startswith("err -800"), reply
    log = bed.writer.log()
    assert "its writes stopped (No such file or directory)" in log, log[-3000:]
    assert bed.other.cmd("isexist late") == "ok 0"


@pytest.mark.parametrize("both_ways", [False, True],
                         ids=["one_way", "both_ways"])
def test_bytes_held_up_in_the_network_do_not_land(bed_b, both_ways):
    """The writer's link is cut in the middle of a part: its bytes wait
    in its socket while the master restarts and the other client's
    object takes the space the part was going to. When the link comes
    back the writer's kernel sends them again; the member, which
    re-mounted on the new master, must not take them in (it ended every
    connection opened before its re-mount, docs/design.md "Writes into
    placed space"), and the other object reads back as put. Cut both
    ways, the writer learns that the member ended the connection only
    when the link is back: the slices behind the one it was sending must
    not go again on a new connection either."""
    h = bed_b.hosts
    since = sent_bytes(h.a, h.veth[0])
    send(bed_b.writer, f"put mine {40 * MiB} 1")
    mctest.wait_for(lambda: sent_bytes(h.a, h.veth[0]) - since >= 2 * MiB,
                    timeout=30, what="the write under way")
    # Cut: what A sends to B (and with both_ways, B to A) goes nowhere
    # (TCP sends it again later).
    cuts = [(h.a, h.b.addr)] + ([(h.b, h.a.addr)] if both_ways else [])
    for host, to in cuts:
        h._sh(*host.cmd(["ip", "route", "add", "blackhole", f"{to}/32"]))
    bed_b.procs.kill(bed_b.master.proc)
    bed_b.master = start_master(bed_b, bed_b.master.ports)
    put_other(bed_b)
    for host, to in cuts:
        h._sh(*host.cmd(["ip", "route", "del", "blackhole", f"{to}/32"]))
    # The writer's put ends (stored on the new master or failed; the
    # bytes it sent before the cut have reached the member by then).
    reply = bed_b.writer.readline(timeout=120)
    print("the writer:", reply)
    bed_b.other.ok(f"check other {20 * MiB} 2")
    if reply.startswith("ok"):
        bed_b.other.ok(f"check mine {40 * MiB} 1")


def test_put_whose_segment_is_dropped_meanwhile(bed_ttl):
    """The member stops (SIGSTOP) for longer than client_ttl in the
    middle of a put: the master drops its segment, and the put with it,
    while the writer goes on (the master's run is the same, so its check
    passes). The member comes back and mounts its segment as new memory,
    and the other client's object goes in. The master keeps the put's
    range out of it until the writer ends the put (docs/design.md
    "Writes into placed space"): the other object reads back as put, and
    the writer, told at its PutEnd that its segment went, puts again."""
    bed = bed_ttl
    drop_member_mid_put(bed)
    put_other(bed)
    reply = bed.writer.readline(timeout=120)
    bed.other.ok(f"check other {20 * MiB} 2")
    assert reply.startswith("ok"), reply
    bed.other.ok(f"check mine {40 * MiB} 1")
    log = bed.master.log.read_text(errors="replace")
    assert "kept for put mine" in log, log[-3000:]
    # Let go at the writer's PutEnd, not left reserved.
    assert "put mine: its range on a dropped segment let go (its writer " \
        "ended the put)" in log, log[-3000:]
    assert "its segment was dropped while it was written" in \
        bed.writer.log(), bed.writer.log()[-3000:]


def drop_member_mid_put(bed):
    """The writer's 40 MiB put under way, the member stopped until the
    master drops its segment (client_ttl), then let go on."""
    h = bed.hosts
    since = sent_bytes(h.a, h.veth[0])
    send(bed.writer, f"put mine {40 * MiB} 1")
    mctest.wait_for(lambda: sent_bytes(h.a, h.veth[0]) - since >= 2 * MiB,
                    timeout=30, what="the write under way")
    os.kill(bed.member.pid, signal.SIGSTOP)
    try:
        mctest.wait_for(lambda: "owner timed out" in
                        bed.master.log.read_text(errors="replace"),
                        timeout=30 * mctest.SCALE,
                        what="the member's segment dropped")
    finally:
        os.kill(bed.member.pid, signal.SIGCONT)


def test_kept_range_of_a_dead_writer_is_let_go(bed_ttl_release):
    """As above, but the writer dies (kill -9) while its range is kept:
    nobody will end its put. Once its client is gone and the put's
    release timeout has passed, the master lets the range go, and the
    segment holds an object that needs that space."""
    bed = bed_ttl_release
    drop_member_mid_put(bed)
    mctest.wait_for(lambda: "kept for put mine" in
                    bed.master.log.read_text(errors="replace"),
                    timeout=30 * mctest.SCALE,
                    what="the member re-mounted, the put's range kept")
    bed.procs.kill(bed.writer.proc)
    # 60 MiB of the 80 MiB segment cannot fit beside the kept range of
    # the 40 MiB put; it fits once the range is let go.
    assert bed.other.cmd(f"put big {60 * MiB} 3", timeout=60) \
        .startswith("err -200")
    mctest.wait_for(lambda: "its range on a dropped segment let go (the "
                    "release timeout passed, its writer gone)" in
                    bed.master.log.read_text(errors="replace"),
                    timeout=30 * mctest.SCALE, what="the range let go")
    bed.other.ok(f"put big {60 * MiB} 3", timeout=60)
    bed.other.ok(f"check big {60 * MiB} 3")
