# SPDX-License-Identifier: Apache-2.0
"""Helpers for filesystem tests: mount the real mooncakefs daemon on a
directory of the test, unmount it (or find it dead) afterwards."""
import contextlib
import errno
import mmap
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "store"))
import mctest  # noqa: E402
from mctest import SCALE, binary, wait_for  # noqa: E402
from pool import Master, Member, Shell, cleanup_segments, free_port  # noqa


def fuse_why(daemon=True):
    """Why the FUSE mount cannot run here (tests skip with it), or None.
    daemon=False: the filesystem tests, for which a missing mooncakefs
    binary is a failure, not a reason to skip."""
    if os.geteuid() != 0:
        return "mounting needs root"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if daemon and not os.access(os.path.join(mctest.BUILD, "mooncakefs",
                                             "fuse", "mooncakefs"), os.X_OK):
        return "mooncakefs (FUSE) not built"
    return None

MCFS = ("mooncakefs", "fuse", "mooncakefs")
HELPER = ("mount_helpers", "mount.mooncakefs")
PIPE_MAX = "/proc/sys/fs/pipe-max-size"


def is_mounted(path):
    # mountinfo writes a space in a path as \040 (and tab, newline, \).
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return any(re.sub(r"\\([0-3][0-7][0-7])",
                          lambda m: chr(int(m.group(1), 8)),
                          line.split()[4]) == path for line in f)


def umount(path, lazy=False):
    if is_mounted(path):
        subprocess.run(["umount"] + (["-l"] if lazy else []) + [str(path)],
                       capture_output=True)


class Mount:
    """A mooncakefs mount (daemonized, logs in the test's directory)."""

    def __init__(self, procs, tmp_path, master, name="mnt", seg="64MiB",
                 opts="", segment_name=None, env=None, path=None,
                 prefix=(), log_file=True):
        """path: the mount point (default tmp_path/name); logs stay in
        tmp_path either way. master: anything with .addr and .metadata.
        prefix: the command the daemon starts under (e.g. a namespace's
        nsenter). log_file=False: the daemon logs to syslog."""
        self.procs, self.tmp, self.master = procs, tmp_path, master
        self.env, self.prefix = env, list(prefix)
        self.path = path or tmp_path / name
        self.path.mkdir(exist_ok=True)
        self.log_path = tmp_path / f"{name}.fs.log"
        self.seg = seg
        self.segment_name = segment_name or f"t{os.getpid()}_{name}_" \
            f"{free_port()}"
        self.opts = opts
        self.log_file = log_file
        procs.logs.append(self.log_path)
        self.mount()

    def options(self):
        # Checkpoint caches in the test's directory: a mount killed by
        # the cleanup leaves nothing in /var/cache.
        log = f"log_file={self.log_path}" if self.log_file else "syslog"
        o = (f"metadata={self.master.metadata},segment_size={self.seg},"
             f"{log},segment_name={self.segment_name},"
             f"rpc_timeout=2000,ckpt_cache={self.tmp}/ckpt-cache")
        return o + ("," + self.opts if self.opts else "")

    def mount(self):
        p = subprocess.run([*self.prefix, binary(*MCFS), self.master.addr,
                            str(self.path), "-o", self.options()],
                           capture_output=True,
                           text=True, timeout=60 * SCALE,
                           env=mctest.te_env(self.env))
        assert p.returncode == 0, p.stderr + self.log()
        wait_for(lambda: is_mounted(self.path), what="mounted")
        # The pool is joined in the background: wait until kv/ answers.
        wait_for(lambda: os.listdir(self.path / "kv") is not None,
                 timeout=30, what="kv/ answers")
        return self

    @property
    def kv(self):
        return self.path / "kv"

    def pid(self):
        out = subprocess.run(["pgrep", "-f", f"mooncakefs .* {self.path} "],
                             capture_output=True, text=True).stdout.split()
        return int(out[0]) if out else None

    def stats(self):
        """The mount's .mooncake/stats as a dict of name -> int."""
        out = {}
        with open(self.path / ".mooncake" / "stats") as f:
            for line in f:
                k, v = line.split()
                out[k] = int(v)
        return out

    def log(self):
        try:
            return open(self.log_path, errors="replace").read()
        except FileNotFoundError:
            return ""

    def umount(self):
        umount(self.path)

    def cleanup(self):
        umount(self.path, lazy=True)
        subprocess.run(["pkill", "-9", "-f", f"mooncakefs .* {self.path} "],
                       capture_output=True)
        for p in (f"/dev/shm/mooncake.seg.{self.segment_name}",):
            try:
                os.unlink(p)
            except OSError:
                pass


def write_random(path, size, seed):
    data = random_bytes(size, seed)
    with open(path, "wb") as f:
        f.write(data)
    return data


def random_bytes(size, seed):
    """size pseudo-random bytes (seed is only a label: os.urandom)."""
    del seed
    return os.urandom(size)


def enotconn(path):
    try:
        os.stat(path)
    except OSError as e:
        return e.errno == errno.ENOTCONN
    return False


__all__ = ["Mount", "Master", "Member", "Shell", "cleanup_segments",
           "is_mounted", "umount", "write_random", "random_bytes",
           "enotconn", "SCALE", "time", "wait_for", "binary", "HELPER"]


def direct_read(path, size=1 << 20):
    """The whole file with O_DIRECT reads of size bytes (as fio and the
    connectors' file readers)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, size)
    got = bytearray()
    try:
        while True:
            n = os.readv(fd, [buf])
            if n == 0:
                break
            got += buf[:n]
    finally:
        os.close(fd)
    return bytes(got)


@contextlib.contextmanager
def pipe_max_size(n):
    """fs.pipe-max-size set to n for the block (mounts made inside it
    size their pipes with it), the old value back after."""
    with open(PIPE_MAX) as f:
        old = f.read().strip()
    with open(PIPE_MAX, "w") as f:
        f.write(str(n))
    try:
        yield
    finally:
        with open(PIPE_MAX, "w") as f:
            f.write(old)
