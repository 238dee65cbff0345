# SPDX-License-Identifier: Apache-2.0
"""Helpers for integration tests: locate binaries, start daemons on
ephemeral loopback ports, wait on conditions (never fixed sleeps), and
tear everything down even when a test fails."""
import atexit
import http.client
import os
import signal
import socket
import subprocess
import time

BUILD = os.environ.get("MC_BUILD_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build")
SCALE = float(os.environ.get("MC_TEST_TIMEOUT_SCALE", "1"))


def binary(*parts):
    path = os.path.join(BUILD, *parts)
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"{path} not built (set MC_BUILD_DIR)")
    return path


METAD = ("metad", "mooncake_metad")
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                     "WARNING: ThreadSanitizer", "runtime error: ")
METAD_CLI = ("tests", "tools", "metad_cli")


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


class Procs:
    """Registry of started processes, each in its own process group."""

    def __init__(self):
        self.procs = []
        self.logs = []
        atexit.register(self.cleanup)

    def popen(self, args, **kw):
        p = subprocess.Popen(args, start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def start_metad(self, tmp_path, *args, host="127.0.0.1", name="metad"):
        port_file = tmp_path / f"{name}.port"
        if port_file.exists():
            port_file.unlink()
        log_path = tmp_path / f"{name}.log"
        log = open(log_path, "ab")
        cmd = [binary(*METAD), "--host", host, "--port", "0",
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
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        self.procs = []


def request(port, method, path, body=None, headers=None, timeout=10.0):
    """One request on a fresh connection: (status, body bytes, headers)."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port,
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
