# SPDX-License-Identifier: Apache-2.0
"""mount -t mooncakefs, an fstab line with mount -a (the test's own fstab,
never the machine's), and umount: the node leaves the pool."""
import os
import shutil
import subprocess

import pytest

from mount import HELPER, MCFS, binary, is_mounted, wait_for

SBIN = "/sbin/mount.mooncakefs"  # made by the test; deps: ignore


def install_helper():
    """mount(8) runs /sbin/mount.<type>: point it at this build's."""
    want = binary(*HELPER)
    if os.path.islink(SBIN) and os.readlink(SBIN) == want:
        return False
    if os.path.lexists(SBIN):
        os.unlink(SBIN)
    os.symlink(want, SBIN)
    return True


def segments(master):
    return master.segments()


def test_mount_t_and_fstab_then_umount(procs, tmp_path, master):
    install_helper()
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
        f"{master.addr} {mp} mooncakefs _netdev,metadata={master.metadata},"
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
    the pool is not joined (kv/ answers EIO) and the log says why."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("a tmpfs in a mount namespace needs root")
    mp = tmp_path / "small"
    mp.mkdir()
    for named in (False, True):
        log = tmp_path / f"small-{named}.log"
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
        assert "--shm-size" in text, text
        if named:
            assert p.returncode != 0 and "hello" not in p.stdout, p.stdout
        else:
            assert p.returncode == 0 and p.stdout == "hello\n", \
                p.stderr + text
            assert "private memory" in text, text
