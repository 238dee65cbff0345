# SPDX-License-Identifier: Apache-2.0
"""mount -t mooncakefs, an fstab line with mount -a (the test's own fstab,
never the machine's), and umount: the node leaves the pool."""
import contextlib
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from mount import HELPER, MCFS, binary, is_mounted, wait_for

SBIN = "/sbin/mount.mooncakefs"  # made by the test; deps: ignore


@pytest.fixture
def install_helper():
    """mount(8) runs /sbin/mount.<type>: point it at this build's for the
    test, and put back what was there after it (a link left behind
    pointed at a build directory deleted since)."""
    want = binary(*HELPER)
    before = os.readlink(SBIN) if os.path.islink(SBIN) else None
    saved = None
    if before is None and os.path.lexists(SBIN):
        saved = SBIN + f".mc-saved-{os.getpid()}"
        os.rename(SBIN, saved)
    if before != want:
        if os.path.lexists(SBIN):
            os.unlink(SBIN)
        os.symlink(want, SBIN)
    yield
    if os.path.lexists(SBIN):
        os.unlink(SBIN)
    if saved:
        os.rename(saved, SBIN)
    elif before is not None:
        os.symlink(before, SBIN)


def segments(master):
    return master.segments()


def test_mount_t_and_fstab_then_umount(procs, tmp_path, master,
                                       install_helper):
    before = len(segments(master))
    mp = tmp_path / "pool"
    mp.mkdir()
    log = tmp_path / "mount-t.log"
    procs.logs.append(log)
    opts = (f"metadata={master.metadata},segment_size=64M,protocol=tcp,"
            f"log_file={log},segment_name=mt{os.getpid()}")
    p = subprocess.run(["mount", "-t", "mooncakefs", master.addr, str(mp),
                        "-o", opts], capture_output=True, text=True,
                       timeout=60)
    try:
        assert p.returncode == 0, p.stderr
        assert is_mounted(mp)
        wait_for(lambda: len(segments(master)) == before + 1,
                 what="segment mounted")
        with open(mp / "kv" / "hello", "wb") as f:
            f.write(b"hello pool\n")
        assert open(mp / "kv" / "hello", "rb").read() == b"hello pool\n"
        fstype = [l.split() for l in open("/proc/self/mounts")
                  if l.split()[1] == str(mp)][0]
        assert fstype[0] == master.addr and fstype[2] == "fuse.mooncakefs"
    finally:
        subprocess.run(["umount", str(mp)], capture_output=True)
    assert not is_mounted(mp)
    wait_for(lambda: len(segments(master)) == before,
             what="segment gone after umount")

    # The same through an fstab line and mount -a.
    fstab = tmp_path / "fstab"
    log2 = tmp_path / "fstab.log"
    procs.logs.append(log2)
    fstab.write_text(
        "# the test's own fstab\n"
        f"{master.addr} {mp} mooncakefs _netdev,x-systemd.automount,"
        f"x-systemd.device-timeout=10,metadata={master.metadata},"
        f"segment_size=32M,log_file={log2},segment_name=ft{os.getpid()} "
        "0 0\n")
    p = subprocess.run(["mount", "--fstab", str(fstab), "-a"],
                       capture_output=True, text=True, timeout=60)
    try:
        assert p.returncode == 0, p.stderr
        assert is_mounted(mp)
        # The first mount left the pool cleanly, and its objects with it.
        assert not os.path.exists(mp / "kv" / "hello")
        with open(mp / "kv" / "again", "wb") as f:
            f.write(b"fstab\n")
        assert open(mp / "kv" / "again", "rb").read() == b"fstab\n"
        wait_for(lambda: len(segments(master)) == before + 1,
                 what="segment mounted (fstab)")
    finally:
        subprocess.run(["umount", str(mp)], capture_output=True)
    wait_for(lambda: len(segments(master)) == before,
             what="segment gone after umount (fstab)")


def test_small_dev_shm_mount_falls_back(procs, tmp_path, master):
    """A mount in a container's 64 MiB /dev/shm (a tmpfs in a mount
    namespace of the test's own) contributing 256 MiB: its kept segment
    does not fit, so it warns, naming the fix, and serves from private
    memory; never a SIGBUS. With segment_name= (shared memory asked for)
    the mount itself fails and says why (it mounted, and kv/ answered
    EIO)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("a tmpfs in a mount namespace needs root")
    mp = tmp_path / "small"
    mp.mkdir()
    for named in (False, True):
        log = tmp_path / f"small-{named}.log"
        log.touch()
        procs.logs.append(log)
        opts = (f"metadata={master.metadata},segment_size=256M,"
                f"log_file={log}" +
                (f",segment_name=small{os.getpid()}" if named else ""))
        script = (
            "mount -t tmpfs -o size=64m mctest /dev/shm || exit 9\n"
            f"{binary(*MCFS)} {master.addr} {mp} -o {opts} || exit 8\n"
            "i=0; until ls \"$1\"/kv >/dev/null 2>&1; do\n"
            "  i=$((i+1)); [ $i -gt $2 ] && break; sleep 0.1; done\n"
            "echo hello > \"$1\"/kv/small && cat \"$1\"/kv/small\n"
            "rc=$?; umount \"$1\"; exit $rc\n")
        p = subprocess.run(["unshare", "-m", "--propagation", "private",
                            "--", "sh", "-c", script, "sh", str(mp),
                            "20" if named else "300"],
                           capture_output=True, text=True, timeout=120)
        text = log.read_text(errors="replace")
        if named:
            assert p.returncode == 8 and "--shm-size" in p.stderr, \
                p.stderr + text
        else:
            assert "--shm-size" in text, text
            assert p.returncode == 0 and p.stdout == "hello\n", \
                p.stderr + text
            assert "private memory" in text, text


def test_read_only_dev_shm_mount_falls_back(procs, tmp_path, master):
    """A container whose /dev/shm is read-only: the mount's kept segment
    cannot be made there, so it serves from private memory and says why
    (members and mounts exited with "Read-only file system
    (INTERNAL_ERROR)")."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("a tmpfs in a mount namespace needs root")
    mp = tmp_path / "rodevshm"
    mp.mkdir()
    log = tmp_path / "rodevshm.log"
    log.touch()
    procs.logs.append(log)
    script = (
        "mount -t tmpfs -o ro,size=64m mctest /dev/shm || exit 9\n"
        f"{binary(*MCFS)} {master.addr} {mp} -o "
        f"metadata={master.metadata},segment_size=32M,log_file={log} "
        "|| exit 8\n"
        "i=0; until ls \"$1\"/kv >/dev/null 2>&1; do\n"
        "  i=$((i+1)); [ $i -gt 300 ] && break; sleep 0.1; done\n"
        "echo hello > \"$1\"/kv/ro && cat \"$1\"/kv/ro\n"
        "rc=$?; umount \"$1\"; exit $rc\n")
    p = subprocess.run(["unshare", "-m", "--propagation", "private",
                        "--", "sh", "-c", script, "sh", str(mp)],
                       capture_output=True, text=True, timeout=120)
    text = log.read_text(errors="replace")
    assert p.returncode == 0 and p.stdout == "hello\n", p.stderr + text
    assert "Read-only file system" in text and "private memory" in text, \
        text


def test_segment_larger_than_a_containers_memory_limit(procs, tmp_path,
                                                        master):
    """A mount and a pool member whose kept segment (/dev/shm, reserved
    whole at start) is larger than their memory cgroup's limit (a
    container's --memory): they were killed for memory inside fallocate,
    the mount after it had said it was mounted, with no word in any log,
    leaving the file for the next start to die on. Now both refuse to
    start, naming the limit, and leave nothing in /dev/shm."""
    import mctest
    from pool import MEMBER
    mp = tmp_path / "limited"
    mp.mkdir()
    before = set(os.listdir("/dev/shm"))
    with mctest.memory_cgroup(384 << 20) as prefix, \
            contextlib.ExitStack() as later:
        later.callback(lambda: is_mounted(mp) and subprocess.run(
            ["umount", "-l", str(mp)], capture_output=True))
        log = tmp_path / "limited.log"
        procs.logs.append(log)
        p = subprocess.run(
            [*prefix, binary(*MCFS), master.addr, str(mp), "-o",
             f"metadata={master.metadata},segment_size=1G,"
             f"log_file={log}"],
            capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and not is_mounted(mp), p.stderr
        assert "memory cgroup" in p.stderr and "384 MiB" in p.stderr, \
            p.stderr

        port = mctest.free_port()
        p = subprocess.run(
            [*prefix, binary(*MEMBER), "--host", "127.0.0.1", "--port",
             str(port), "--global_segment_size", "1GB",
             "--master_server_address", master.addr,
             "--metadata_server", master.metadata],
            capture_output=True, text=True, timeout=60,
            env=mctest.te_env())
        assert p.returncode == 1, (p.returncode, p.stderr)
        assert "memory cgroup" in p.stderr and "384 MiB" in p.stderr, \
            p.stderr
    # Other tests' mounts (ctest -j) name their segments t<pid>_...: not
    # made by the two refused here, which take the default names.
    left = {n for n in set(os.listdir("/dev/shm")) - before
            if not re.match(r"mooncake\.seg\.t\d+_", n)}
    assert not left, left


def test_no_syslog_logs_to_a_file(procs, tmp_path, master):
    """A mount given no log_file= on a host where nothing listens on
    /dev/log (containers, minimal hosts; this one) logged to syslog,
    which is to say nowhere: a mount that then failed to join left no
    word why. It now logs to /var/log/mooncakefs/<mount point>.log and
    says so (a mount namespace of the test's own, a tmpfs on /var/log,
    /dev/log hidden where there is one)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("a mount namespace needs root")
    mp = tmp_path / "nolog"
    mp.mkdir()
    name = str(mp).strip("/").replace("/", "-")
    script = (
        "[ -e /dev/log ] && { mount --bind /dev/null /dev/log || exit 9; }\n"
        "mount -t tmpfs mctest /var/log || exit 9\n"
        f"{binary(*MCFS)} {master.addr} {mp} -o "
        f"metadata={master.metadata},segment_size=32M || exit 8\n"
        "i=0; until ls \"$1\"/kv >/dev/null 2>&1; do\n"
        "  i=$((i+1)); [ $i -gt 300 ] && break; sleep 0.1; done\n"
        "echo hello > \"$1\"/kv/nolog && cat \"$1\"/kv/nolog || exit 7\n"
        "umount \"$1\"; sleep 0.5\n"
        f"cat /var/log/mooncakefs/{name}.log\n")
    p = subprocess.run(["unshare", "-m", "--propagation", "private",
                        "--", "sh", "-c", script, "sh", str(mp)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert f"logging to /var/log/mooncakefs/{name}.log" in p.stderr, \
        p.stderr
    assert p.stdout.startswith("hello\n"), p.stdout
    assert "mounted" in p.stdout, p.stdout


def test_token_named_only_in_the_config_file(procs, tmp_path, master,
                                            monkeypatch):
    """A master with a token, and a mount whose token is named only by the
    MOONCAKE_CONFIG_PATH file (no -o, no variable): the library's engine
    and the mount's own RPC clients both hold it, so files, directories
    and .mooncake/ work; without the config file the mount is refused."""
    from mount import Master, Mount
    import json
    import secrets
    tok = tmp_path / "token"
    tok.write_text(secrets.token_hex(32) + "\n")
    os.chmod(tok, 0o600)
    authed = Master(procs, tmp_path, name="authed", token=tok)
    cfg = tmp_path / "mooncake.json"
    cfg.write_text(json.dumps({"auth_token_file": str(tok)}))
    monkeypatch.delenv("MOONCAKE_AUTH_TOKEN_FILE", raising=False)
    env = {"MOONCAKE_CONFIG_PATH": str(cfg)}
    m = Mount(procs, tmp_path, authed, name="cfgmnt", env=env)
    try:
        (m.kv / "d").mkdir()
        (m.kv / "d" / "f").write_bytes(b"x" * 100000)
        assert (m.kv / "d" / "f").read_bytes() == b"x" * 100000
        # .mooncake/segments asks the master with the mount's own client.
        segs = (m.path / ".mooncake" / "segments").read_text()
        assert segs.rstrip().endswith("mounted"), segs
        (m.kv / "d" / "f").unlink()
        (m.kv / "d").rmdir()
    finally:
        m.cleanup()
    (tmp_path / "nocfg").mkdir()
    p = subprocess.run([binary(*MCFS), authed.addr, str(tmp_path / "nocfg"),
                        "-o", f"metadata={authed.metadata}"],
                       capture_output=True, text=True, timeout=60)
    # A configuration error (exit 2), as a token file that cannot be
    # read; was 1, as for a dead master.
    assert p.returncode == 2, p.returncode
    assert "authentication required" in p.stderr, p.stderr


def test_mount_again_right_after_umount(mounts):
    """umount returns while the daemon is still leaving the pool (it
    lets go of its segment a second or more later); a mount of the same
    segment right after it (a restart of the mount unit, a script) found
    the segment in use, gave up joining, and answered EIO on kv/ for
    good. The mount now waits for the leaving daemon, then joins. An
    unknown protocol fails the mount itself (it mounted, and answered
    EIO on kv/ until unmounted)."""
    m = mounts(seg="64MiB", name="again")
    (m.kv / "before").write_bytes(b"x")
    for _ in range(2):
        m.umount()
        assert not is_mounted(m.path)
        m.mount()
        (m.kv / "after").write_bytes(b"y")
        assert (m.kv / "after").read_bytes() == b"y"
    m.umount()
    p = subprocess.run([binary(*MCFS), m.master.addr, str(m.path), "-o",
                        m.options() + ",protocol=foo"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "protocol=foo: tcp or rdma" in p.stderr, \
        p.stderr
    assert not is_mounted(m.path)
    # So do other options the pool's join refuses for good: they mounted
    # (exit 0) and answered EIO until unmounted.
    for opt, needle in (
            ("segment_name=a/b", "segment_name 'a/b': 1 to 200 characters"),
            ("metadata=nonsense://x", "unknown metadata scheme"),
            ("segment_size=100T", "more than this machine's memory"),
            ("log_file=/nonexistent/x.log", "log_file=/nonexistent/x.log: "
             "No such file or directory"),
            ("read_ahead=1G", "is more than the most, 64MiB"),
            ("staging_limit=0", "staging_limit=0: every write"),
            ("auth_token_file=/nonexistent/tok",
             "cannot open token file /nonexistent/tok"),
            # libfuse's refusal of what neither knows: exit 1 before.
            ("bogus=1", "unknown option(s)"),
            ("x-systemd.automount,nosuchopt", "nosuchopt")):
        p = subprocess.run([binary(*MCFS), m.master.addr, str(m.path), "-o",
                            m.options() + "," + opt],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and needle in p.stderr, (opt, p.stderr)
        assert not is_mounted(m.path)
    # fstab's x-* options are ignored when the helper gets them (mount(8)
    # keeps them; systemd or a script calling the helper may not).
    p = subprocess.run([binary(*MCFS), m.master.addr, str(m.path), "-o",
                        m.options() + ",x-systemd.automount,"
                        "x-systemd.device-timeout=10"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert is_mounted(m.path)
    subprocess.run(["umount", str(m.path)], capture_output=True, timeout=60)


def test_mount_joins_once_the_metadata_service_is_up(mounts, procs,
                                                    tmp_path):
    """At boot the mount may come before the metadata service: it
    mounted, failed to join and answered EIO for good. It now tries again
    every 2 s, says so in its log, and works once the service is up."""
    from mctest import free_port
    port = free_port()
    m = mounts(seg="32MiB", name="boot")
    m.umount()
    p = subprocess.run([binary(*MCFS), m.master.addr, str(m.path), "-o",
                        m.options() +
                        f",metadata=http://127.0.0.1:{port}/metadata"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    with pytest.raises(OSError):
        (m.kv / "early").write_bytes(b"x")
    wait_for(lambda: "trying again every 2 s" in m.log(),
             what="the join retried")
    procs.start_metad(tmp_path, port=port)
    wait_for(lambda: "joined the pool at" in m.log().split("unmounted")[-1],
             timeout=30, what="the join done")
    (m.kv / "late").write_bytes(b"y" * 4096)
    assert (m.kv / "late").read_bytes() == b"y" * 4096


def test_sighup_keeps_the_mount(mounts):
    """libfuse ends the session on SIGHUP: logrotate's postrotate (kill
    -HUP) unmounted the pool, and the node left with its objects. A
    mount logging to a file reopens it instead; a daemonized mount
    without one (no terminal to hang up) ignores it."""
    m = mounts(name="hup")
    (m.kv / "a").write_bytes(b"x" * 4096)
    os.rename(m.log_path, str(m.log_path) + ".1")
    os.kill(m.pid(), signal.SIGHUP)
    wait_for(lambda: m.log_path.exists(), what="log file reopened")
    assert is_mounted(m.path)
    assert (m.kv / "a").read_bytes() == b"x" * 4096
    m.umount()
    wait_for(lambda: "unmounted" in m.log(), what="lines in the new log")
    m.log_file = False
    m.mount()
    (m.kv / "b").write_bytes(b"y" * 4096)
    os.kill(m.pid(), signal.SIGHUP)
    time.sleep(0.5)
    assert is_mounted(m.path)
    assert (m.kv / "b").read_bytes() == b"y" * 4096


def test_second_daemon_on_a_mount_is_refused(mounts, tmp_path):
    """A second mooncakefs on a mount point that already is one stacked
    over it, and the one below went on contributing, hidden: refused now,
    also where the path has a space (written \\040 in /proc/mounts)."""
    m = mounts(seg="32MiB", name="twice", path=tmp_path / "with space")
    (m.kv / "a").write_bytes(b"x")
    p = subprocess.run([binary(*MCFS), m.master.addr, str(m.path), "-o",
                        m.options() + ",segment_name=other"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p
    assert "is already a mooncakefs mount" in p.stderr, p.stderr
    assert (m.kv / "a").read_bytes() == b"x"
    # Its daemon killed: the mount answers ENOTCONN, and the message
    # says to unmount it (umount -l with a program inside), not that a
    # working mount is there.
    os.kill(m.pid(), signal.SIGKILL)
    wait_for(lambda: m.pid() is None, what="daemon gone")
    p = subprocess.run([binary(*MCFS), m.master.addr, str(m.path), "-o",
                        m.options()], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 1, p
    assert "whose daemon is gone: umount it first" in p.stderr, p.stderr
    m.umount()
    m.mount()
    assert (m.kv / "a").read_bytes() == b"x"


def test_master_option_with_etcd_endpoints_after_commas(tmp_path):
    """-o master=etcd://h1:2379,h2:2379 (docs/operations.md's options
    table; mount(8) and fstab split at the same commas): the endpoints
    after the first are the address's, not options. The first endpoint
    alone was the master, and the mount waited for it."""
    mp = tmp_path / "mnt"
    mp.mkdir()
    master = "etcd://127.0.0.1:1,127.0.0.1:2"
    p = subprocess.run([binary(*MCFS), str(mp), "-o",
                        f"master={master},metadata=P2PHANDSHAKE,"
                        "rpc_timeout=500"],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, MC_RPC_FAILOVER_MS="300"))
    assert p.returncode == 1, p
    assert f"master {master}: " in p.stderr, p.stderr
    assert "all 2 etcd endpoints failed" in p.stderr, p.stderr
    assert not is_mounted(mp)
