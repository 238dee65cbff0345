# SPDX-License-Identifier: Apache-2.0
"""Helpers for integration tests: locate binaries, start daemons on
ephemeral loopback ports, wait on conditions (never fixed sleeps), and
tear everything down even when a test fails."""
import atexit
import contextlib
import errno
import glob
import hashlib
import hmac
import http.client
import itertools
import json
import os
import random
import secrets
import select
import signal
import socket
import subprocess
import time

BUILD = os.environ.get("MC_BUILD_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build")
SCALE = float(os.environ.get("MC_TEST_TIMEOUT_SCALE", "1"))


def sanitizers():
    """MC_SANITIZE of the build under test ('' when not sanitized)."""
    try:
        with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("MC_SANITIZE:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return ""


def have_ipv6():
    """Whether this host can bind ::1 (IPv6 on the loopback)."""
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def preload_env(lib, exe):
    """LD_PRELOAD for running exe (a built binary) with lib preloaded: an
    ASan build whose binaries load the sanitizer's runtime as a shared
    library needs it first in the list (ASan refuses to start otherwise);
    a runtime linked in statically needs nothing."""
    libs = [lib]
    if "address" in sanitizers():
        out = subprocess.run(["ldd", exe], capture_output=True, text=True,
                             check=True).stdout
        libs[:0] = [w for w in out.split() if "/libasan" in w or
                    "/libclang_rt.asan" in w][:1]
    return " ".join(libs)


def binary(*parts):
    path = os.path.join(BUILD, *parts)
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"{path} not built (set MC_BUILD_DIR)")
    return path


def _others_can_run(path):
    """Every directory above path searchable, and path executable, by
    users other than its owner and group."""
    d = os.path.dirname(os.path.abspath(path))
    while True:
        if not os.stat(d).st_mode & 0o001:
            return False
        if d == "/":
            break
        d = os.path.dirname(d)
    return bool(os.stat(path).st_mode & 0o001)


_for_others = {}


def binary_for_others(*parts):
    """binary(*parts), runnable by another local user: a checkout in a
    home directory (0700 on Debian 12, /root always) is not, so the
    binary (statically linked against this build) is copied once into a
    0755 directory of its own, removed at exit."""
    path = binary(*parts)
    if _others_can_run(path):
        return path
    if path not in _for_others:
        import shutil
        import tempfile
        d = tempfile.mkdtemp(prefix="mc-bin-")
        os.chmod(d, 0o755)
        atexit.register(shutil.rmtree, d, True)
        copy = os.path.join(d, os.path.basename(path))
        shutil.copy2(path, copy)
        os.chmod(copy, 0o755)
        _for_others[path] = copy
    return _for_others[path]


METAD = ("metad", "mooncake_metad")
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                     "WARNING: ThreadSanitizer", "runtime error: ")
METAD_CLI = ("tests", "tools", "metad_cli")
SOURCE = os.environ.get("MC_SOURCE_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..")
TE_TSAN_SUPP = os.path.join(SOURCE, "tests", "tools", "te_tsan.supp")
TE_PEER = ("tests", "tools", "te_peer")
TE_CONFORMANCE = ("tests", "tools", "te_conformance")
TE_CLIENT = ("tests", "tools", "te_client")
TE_GPU = ("tests", "tools", "te_gpu")
FAKE_CUDA = ("tests", "tools", "libmc_fake_cuda.so")
CLOCK_SHIFT = ("tests", "tools", "libmc_clock_shift.so")
_seq = itertools.count(1)


def te_env(extra=None):
    """Environment for the transfer-engine tools: TSan builds get the
    suppressions of tests/tools/te_tsan.supp (the tools move memory whose
    order another process guarantees, which TSan cannot see)."""
    e = dict(os.environ)
    opts = e.get("TSAN_OPTIONS", "")
    if "suppressions=" not in opts:
        e["TSAN_OPTIONS"] = (opts + ":" if opts else "") + \
            f"suppressions={TE_TSAN_SUPP}"
    e.update(extra or {})
    return e


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


_handed = set()


def free_port():
    """A loopback port free right now, for a daemon that is told its port
    (and keeps it across a restart). Chosen at random outside the kernel's
    ephemeral range: a port from bind(port 0) lies in that range, where
    any outgoing connection of a test running beside this one can take it
    before the daemon binds (a master once failed with EADDRINUSE that
    way). Never one handed out before in this process."""
    lo, hi = _ephemeral_range()
    ranges = [r for r in ((10000, lo), (hi + 1, 65536)) if r[1] - r[0] > 1000]
    if not ranges:
        ranges = [(1024, 65536)]
    while True:
        port = random.randrange(*random.choice(ranges))
        if port in _handed:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed.add(port)
        return port


def wait_for(cond, timeout=10.0, what="condition"):
    """Poll cond() until it returns a true value; fail after timeout."""
    deadline = time.monotonic() + timeout * SCALE
    delay = 0.005
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


class Daemon:
    def __init__(self, proc, port, port_file, log_path):
        self.proc = proc
        self.port = port
        self.port_file = port_file
        self.log_path = log_path

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/metadata"

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout * SCALE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


SHM_PREFIX = "/dev/shm/mooncake."


def process_group(pgid):
    """The pids of the live processes in process group pgid."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and int(fields[2]) == pgid:
            pids.append(int(d))
    return pids


def status_kib(pid, field):
    """A field of /proc/PID/status in KiB (VmRSS, VmHWM, ...)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def mapped_shm(pid):
    """The /dev/shm/mooncake.* files process pid has mapped."""
    found = set()
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                i = line.find(SHM_PREFIX)
                if i >= 0:
                    found.add(line[i:].strip().removesuffix(" (deleted)"))
    except OSError:
        pass
    return found


class Procs:
    """Registry of started processes, each in its own process group, and
    of the /dev/shm/mooncake.* files they make: cleanup() kills the
    groups and removes the files, whether the test passed or failed.

    Files are known three ways: own_shm() names them (segments with a
    known name), a process group's mappings are read before it is killed
    (kill(), note_shm() and cleanup() itself), and unnamed memory is
    /dev/shm/mooncake.anon.<pid>.* of a pid seen in a group."""

    def __init__(self):
        self.procs = []
        self.logs = []
        self.shm_pids = []
        self.shm_files = set()  # paths or glob patterns
        atexit.register(self.cleanup)

    def own_shm(self, *patterns):
        """Remove these /dev/shm paths (globs allowed) at cleanup."""
        self.shm_files.update(patterns)

    def note_shm(self, pid):
        """Remember the shared memory of pid's process group (call before
        killing it: a dead process's mappings cannot be read)."""
        for q in process_group(pid) or [pid]:
            self.shm_pids.append(q)
            self.shm_files.update(mapped_shm(q))

    def kill(self, proc, sig=signal.SIGKILL):
        """Kill a registered process (noting its shared memory first)."""
        if proc.poll() is None:
            self.note_shm(proc.pid)
            proc.send_signal(sig)
        proc.wait()

    def popen(self, args, **kw):
        p = subprocess.Popen(args, start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def start_metad(self, tmp_path, *args, host="127.0.0.1", name="metad",
                    port=0):
        port_file = tmp_path / f"{name}.port"
        if port_file.exists():
            port_file.unlink()
        log_path = tmp_path / f"{name}.log"
        log = open(log_path, "ab")
        cmd = [binary(*METAD), "--host", host, "--port", str(port),
               "--port_file", str(port_file), *args]
        p = self.popen(cmd, stdout=log, stderr=log)
        log.close()
        self.logs.append(log_path)

        def ready():
            if p.poll() is not None:
                raise RuntimeError(
                    f"mooncake_metad exited {p.returncode}: "
                    + open(log_path, errors="replace").read())
            try:
                return int(port_file.read_text())
            except (FileNotFoundError, ValueError):
                return None

        port = wait_for(ready, what="metad port file")
        d = Daemon(p, port, port_file, log_path)
        wait_for(lambda: request(d.port, "GET", "/health")[0] == 200,
                 what="metad /health")
        return d

    def start_te_peer(self, tmp_path, metadata, *args, name="127.0.0.1",
                      size="64M", shm=False, seed=0, env=None):
        """Start tests/tools/te_peer and wait for its ready file."""
        tag = f"te_peer{next(_seq)}"
        ready = tmp_path / f"{tag}.ready"
        log_path = tmp_path / f"{tag}.log"
        log = open(log_path, "ab")
        cmd = [binary(*TE_PEER), "--metadata", metadata, "--name", name,
               "--size", str(size), "--ready", str(ready), "--pattern",
               str(seed), *(["--shm"] if shm else []), *args]
        p = self.popen(cmd, stdout=log, stderr=log, env=te_env(env))
        log.close()
        self.logs.append(log_path)
        if shm:
            self.shm_pids.append(p.pid)

        def is_ready():
            try:
                return json.loads(ready.read_text())
            except (FileNotFoundError, ValueError):
                if p.poll() is not None:
                    raise RuntimeError(
                        f"te_peer exited {p.returncode}: "
                        + open(log_path, errors="replace").read())
                return None

        info = wait_for(is_ready, what=f"{tag} ready file")
        return TePeer(p, info, seed, log_path)

    def start_te_client(self, tmp_path, metadata, *args, name=None, env=None):
        """Start tests/tools/te_client; returns a TeClient once it printed
        its ready line (raises with that line otherwise)."""
        tag = f"te_client{next(_seq)}"
        log_path = tmp_path / f"{tag}.log"
        log = open(log_path, "ab")
        if name is None:
            name = f"127.0.0.1:{20000 + next(_seq)}"
        cmd = [binary(*TE_CLIENT), "--metadata", metadata, "--name", name,
               *args]
        p = self.popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                       stderr=log, bufsize=0, env=te_env(env))
        log.close()
        self.logs.append(log_path)
        c = TeClient(p, log_path)
        line = c.readline()
        if not line.startswith("ready "):
            raise RuntimeError(f"te_client: {line}")
        c.name = line.split()[1]
        return c

    def sanitizer_reports(self):
        """Sanitizer findings in the logs of the daemons started."""
        found = []
        for path in self.logs:
            with open(path, errors="replace") as f:
                text = f.read()
            for marker in SANITIZER_MARKERS:
                if marker in text:
                    i = text.index(marker)
                    found.append(f"{path}: {text[max(0, i - 200):i + 2000]}")
        return found

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                self.note_shm(p.pid)
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        self.procs = []
        # Segments and unnamed memory (te_mem_alloc) the processes made.
        paths = set()
        for pattern in self.shm_files:
            paths.update(glob.glob(pattern))
            # A name with brackets ("[::1]:port" makes mooncake.seg.[__1]_
            # port) is a path, not the character class glob reads.
            if os.path.lexists(pattern):
                paths.add(pattern)
        for pid in self.shm_pids:
            paths.update(glob.glob(f"{SHM_PREFIX}anon.{pid}.*"))
        for path in sorted(paths):
            try:
                os.unlink(path)
            except OSError:
                pass
        self.shm_pids = []
        self.shm_files = set()


class TePeer:
    """A running te_peer: its segment name, RPC address and buffer."""

    def __init__(self, proc, info, seed, log_path):
        self.proc = proc
        self.pid = proc.pid
        self.name = info["name"]
        self.rpc = info["rpc"]
        self.addr = info["addr"]
        self.size = info["size"]
        self.seed = seed
        self.log_path = log_path

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def signal(self, sig):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stopped(self):
        """Is every thread of the peer stopped (SIGSTOP delivered)?"""
        try:
            for tid in os.listdir(f"/proc/{self.pid}/task"):
                with open(f"/proc/{self.pid}/task/{tid}/stat") as f:
                    if f.read().rpartition(")")[2].split()[0] not in "tT":
                        return False
        except FileNotFoundError:
            return False
        return True

    def pause(self):
        """SIGSTOP, and wait until it took effect: the signal is delivered
        asynchronously, and a peer still running would serve requests."""
        self.signal(signal.SIGSTOP)
        wait_for(self.stopped, what="te_peer stopped")

    def kill(self):
        """SIGKILL: no clean unpublish."""
        self.signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout=30.0):
        """SIGTERM (after SIGCONT); returns the exit status."""
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout * SCALE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


class TeClient:
    """Drives tests/tools/te_client: one command line in, one reply line
    out (see the tool's header for the commands)."""

    def __init__(self, proc, log_path):
        self.proc = proc
        self.log_path = log_path
        self.buf = b""
        self.name = None

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def readline(self, timeout=30.0):
        deadline = time.monotonic() + timeout * SCALE
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("te_client did not answer")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise EOFError(
                        f"te_client exited {self.proc.wait()}: " + self.log())
                self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode(errors="replace")

    def cmd(self, line, timeout=30.0):
        self.proc.stdin.write(line.encode() + b"\n")
        return self.readline(timeout)

    def ok(self, line, timeout=30.0):
        """Run a command that must succeed; returns its key=value pairs."""
        reply = self.cmd(line, timeout)
        assert reply.startswith("ok"), f"{line!r} -> {reply!r}"
        return dict(kv.split("=", 1) for kv in reply.split()[1:]
                    if "=" in kv)

    def transfer(self, batch, seg, op, addr, length, count, timeout_ms=60000,
                 in_call=False):
        """Submit, wait, and return (status dict, wait dict); the batch
        is left for check/destroy. in_call: `run` (te_batch_transfer)
        instead of submit; the wait then returns at once."""
        verb = "run" if in_call else "submit"
        self.ok(f"{verb} {batch} {seg} {op} {addr} {length} {count}",
                timeout=timeout_ms / 1000 + 30)
        w = self.ok(f"wait {batch} {int(timeout_ms * SCALE)}",
                    timeout=timeout_ms / 1000 + 30)
        return self.ok(f"status {batch}"), w

    def quit(self, timeout=60.0):
        self.proc.stdin.write(b"quit\n")
        line = self.readline(timeout)
        assert line == "ok bye", line
        return self.proc.wait(timeout * SCALE)


def auth_key(token_path):
    """The key of a token file (common/mc_auth.h)."""
    with open(token_path, "rb") as f:
        token = f.read().rstrip(b" \t\r\n")
    return hashlib.blake2b(token, digest_size=32,
                           key=b"mooncake-auth-v1").digest()


def auth_sign(key, method, target, body=b"", ts=None, nonce=None):
    """The Authorization value of a request (common/mc_auth_http.h);
    target is the path with its query, as sent."""
    path, _, query = target.partition("?")
    ts = int(time.time()) if ts is None else ts
    nonce = nonce or secrets.token_hex(16)
    msg = "\n".join(["mooncake-http-v1", method, path, query, str(ts), nonce,
                     hashlib.sha256(body or b"").hexdigest()]).encode()
    mac = hmac.new(key, msg, hashlib.sha512).digest()[:32].hex()
    return f"MC-HMAC ts={ts},nonce={nonce},mac={mac}"


def hostport(host, port):
    """host:port as the daemons parse it: an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def request(port, method, path, body=None, headers=None, timeout=10.0,
            host="127.0.0.1"):
    """One request on a fresh connection: (status, body bytes, headers)."""
    try:
        c = http.client.HTTPConnection(host, port,
                                       timeout=timeout * SCALE)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data, dict(r.getheaders())
    except (ConnectionError, OSError):
        return None, b"", {}


def raw(port, data, timeout=10.0, shut=True):
    """Send raw bytes, return everything the server sends back."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout * SCALE)
    try:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the server answered early and closed; read what it sent
    chunks = []
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    except (ConnectionResetError, socket.timeout):
        pass
    s.close()
    return b"".join(chunks)


@contextlib.contextmanager
def small_tmpfs(path, size="4m"):
    """A tmpfs of the test's own at path (a new directory), unmounted
    afterwards; skips the test where it cannot be mounted (not root)."""
    import pytest
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    os.makedirs(path)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}",
                        "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@contextlib.contextmanager
def memory_cgroup(limit):
    """A memory cgroup of the test's own limited to limit bytes, removed
    afterwards; yields the argv prefix that starts a command in it. cgroup
    v2 (a child of the root, where the memory controller is enabled) or
    v1's memory controller (a child of this process's group); skips the
    test where neither can be made (not root, no memory controller)."""
    import pytest
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root")
    name = f"mctest-{os.getpid()}-{secrets.token_hex(4)}"
    path = None
    try:
        with open("/sys/fs/cgroup/cgroup.subtree_control") as f:
            if "memory" in f.read().split():
                path, files = f"/sys/fs/cgroup/{name}", {"memory.max": limit}
    except OSError:
        pass
    if path is None:
        own = [ln.split(":", 2)[2].strip()
               for ln in open("/proc/self/cgroup")
               if "memory" in ln.split(":", 2)[1].split(",")]
        if own and os.path.isdir("/sys/fs/cgroup/memory"):
            path = f"/sys/fs/cgroup/memory{own[0].rstrip('/')}/{name}"
            files = {"memory.limit_in_bytes": limit}
    if path is None:
        pytest.skip("no memory cgroup controller to limit a process with")
    try:
        os.mkdir(path)
        for k, v in files.items():
            with open(os.path.join(path, k), "w") as f:
                f.write(str(v))
    except OSError as e:
        pytest.skip(f"cannot make a memory cgroup at {path}: {e}")
    procs = os.path.join(path, "cgroup.procs")
    try:
        yield ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs]
    finally:
        # Processes still in it (the test's Procs kills them later) go
        # back to the parent group, so the directory can go.
        parent = os.path.join(os.path.dirname(path), "cgroup.procs")
        for pid in open(procs).read().split():
            try:
                with open(parent, "w") as f:
                    f.write(pid)
            except OSError:
                pass  # exited meanwhile
        wait_for(lambda: not open(procs).read().strip(), timeout=30,
                 what="the cgroup emptied")
        os.rmdir(path)


def fill_fs(path):
    """Take every free byte of the filesystem of directory path (the file
    'filler' there; remove it to give the space back)."""
    fd = os.open(os.path.join(path, "filler"), os.O_WRONLY | os.O_CREAT,
                 0o600)
    try:
        for block in (65536, 1):
            try:
                while True:
                    os.write(fd, b"\0" * block)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
    finally:
        os.close(fd)


def cli(*args, check=False, timeout=120.0):
    """Run metad_cli; returns CompletedProcess."""
    return subprocess.run([binary(*METAD_CLI), *args], capture_output=True,
                          timeout=timeout * SCALE, check=check)


def curl(*args):
    """Run curl; returns (http status, body bytes)."""
    r = subprocess.run(["curl", "-sS", "-o", "-", "-w", "\n%{http_code}",
                        *args], capture_output=True, timeout=30 * SCALE)
    body, _, code = r.stdout.rpartition(b"\n")
    return int(code), body
