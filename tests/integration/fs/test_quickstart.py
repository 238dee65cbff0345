# SPDX-License-Identifier: Apache-2.0
"""The README's first command, scripts/quickstart.sh, run on the build under
test (MC_QUICKSTART_BUILD: no setup, no build) with its own state
directory, ports and segment name: it starts the pool and shows it
working; `stop` waits until the node has left the pool, so a start after a
stop shows one segment (not the previous run's as "awaiting owner" next
to the new one) and the capacity of one; a last `stop` leaves no mount, no
process and no /dev/shm file. The pool authenticates with a token the
script made in its state directory."""
import os
import signal
import subprocess

import pytest

import mctest
from mount import free_port, is_mounted, umount, wait_for

SCRIPT = os.path.join(mctest.SOURCE, "scripts", "quickstart.sh")
SEG_SIZE = 64 << 20


@pytest.fixture
def quickstart(procs, tmp_path):
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        pytest.skip("mounting needs root and /dev/fuse")
    state = tmp_path / "state"
    ports = {k: free_port() for k in ("MASTER", "METRICS", "METAD")}
    env = dict(os.environ, MC_STATE_DIR=str(state),
               MC_QUICKSTART_BUILD=mctest.BUILD, MC_SEGMENT_SIZE="64MiB",
               MC_SEGMENT_NAME=f"qs{os.getpid()}_{ports['MASTER']}",
               **{f"MC_{k}_PORT": str(v) for k, v in ports.items()})
    env = mctest.te_env(env)
    shm = f"/dev/shm/mooncake.seg.{env['MC_SEGMENT_NAME']}"
    procs.own_shm(shm)
    for log in ("mooncake_master.err", "mooncake_master.log",
                "mooncakefs.log"):
        procs.logs.append(state / log)
    state.mkdir()
    for log in procs.logs[-3:]:
        log.touch()

    def run(*args):
        p = subprocess.run([SCRIPT, *args], capture_output=True, text=True,
                           env=env, timeout=180 * mctest.SCALE)
        assert p.returncode == 0, f"quickstart {args}: {p.stdout}{p.stderr}"
        return p.stdout

    run.state, run.ports, run.shm = state, ports, shm
    run.mnt = state / "pool"
    yield run
    # Whatever a failing test left: the mount, then the master.
    umount(run.mnt, lazy=True)
    subprocess.run(["pkill", "-9", "-f", f"mooncakefs .* {run.mnt} "],
                   capture_output=True)
    pid_file = state / "mooncake_master.pid"
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def segments(run):
    """The SEGMENT table of `mooncake status` as (name, state) pairs."""
    p = subprocess.run(
        [mctest.binary("mooncakefs", "cli", "mooncake"), "--master",
         f"127.0.0.1:{run.ports['MASTER']}", "status"],
        capture_output=True, text=True, timeout=30 * mctest.SCALE,
        env=dict(os.environ,
                 MOONCAKE_AUTH_TOKEN_FILE=str(run.state / "token")))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("SEGMENT"))
    rows = [ln for ln in lines[start + 1:] if ln.strip()]
    return [(r.split()[0], " ".join(r.split()[8:])) for r in rows], p.stdout


def capacity(run):
    st, text, _ = mctest.request(run.ports["METRICS"], "GET", "/metrics")
    assert st == 200
    for line in text.decode().splitlines():
        if line.startswith("master_total_capacity_bytes "):
            return float(line.split()[1])
    raise AssertionError("no master_total_capacity_bytes")


def test_stop_then_start_shows_one_segment(quickstart):
    out = quickstart()
    assert "(identical)" in out, out
    # Authentication is on, with a private token in the state directory.
    token = quickstart.state / "token"
    assert os.stat(token).st_mode & 0o777 == 0o600
    assert "authentication on" in \
        (quickstart.state / "mooncake_master.log").read_text()
    segs, text = segments(quickstart)
    assert [s for _, s in segs] == ["mounted"], text
    first = segs[0][0]

    stopped = quickstart("stop")
    assert not is_mounted(quickstart.mnt)
    assert not os.path.exists(quickstart.shm)

    out = quickstart()
    assert "(identical)" in out, out
    segs, text = segments(quickstart)
    assert len(segs) == 1 and segs[0][1] == "mounted", text
    assert first not in [n for n, _ in segs], text
    assert capacity(quickstart) == SEG_SIZE
    assert f"left the pool (segment {first})" in stopped, stopped

    status = quickstart("status")
    assert "mounted on" in status, status

    quickstart("stop")
    assert not is_mounted(quickstart.mnt)
    assert not os.path.exists(quickstart.shm)
    wait_for(lambda: not (quickstart.state / "mooncake_master.pid").exists(),
             what="master pid file removed")
    out = quickstart("status")
    assert "mooncake_master not running" in out and "not mounted" in out, out
