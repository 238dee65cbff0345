# SPDX-License-Identifier: Apache-2.0
"""Helpers for Mooncake Store tests: a real mooncake_master (with its
embedded metadata service), mooncake_client pool members, the store_shell
driver of the C API and the `mooncake` CLI, all on loopback."""
import glob
import os
import signal
import subprocess
import time

import mctest
from mctest import SCALE, binary, free_port, request, wait_for

MASTER = ("master", "mooncake_master")
MEMBER = ("mooncakefs", "cli", "mooncake_client")
CLI = ("mooncakefs", "cli", "mooncake")
SHELL = ("tests", "tools", "store_shell")


def read_port(path, proc, log_path, what):
    def ready():
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited {proc.returncode}: "
                               + open(log_path, errors="replace").read())
        try:
            return int(path.read_text())
        except (FileNotFoundError, ValueError):
            return None
    return wait_for(ready, timeout=30, what=f"{what} port file")


class Master:
    def __init__(self, procs, tmp_path, *args, rpc_port=0, meta_port=0,
                 admin_port=0, db=None, name="master", token=None,
                 host="127.0.0.1", prefix=()):
        self.procs, self.tmp, self.args, self.name = procs, tmp_path, args, name
        self.host = host  # of all three listeners
        # A command that runs it elsewhere (a test host's nsenter): its
        # port file then says it serves, /health being out of our reach.
        self.prefix = list(prefix)
        # With a token file, the master authenticates and http() signs.
        self.token = token
        self.key = mctest.auth_key(token) if token else None
        if token:
            self.args = (*args, "--auth_token_file", str(token))
        self.db = str(db or tmp_path / f"{name}.db")
        self.proc = None
        # A port of our choosing can be taken between free_port() and the
        # master's bind (a connection of a test running beside this one):
        # then other ports, as Member does.
        for attempt in range(5):
            self.rpc_port = rpc_port or free_port()
            self.meta_port = meta_port or free_port()
            self.admin_port = admin_port or free_port()
            try:
                self.start()
                return
            except RuntimeError as e:
                chosen = not (rpc_port and meta_port and admin_port)
                if not chosen or attempt == 4 or \
                        "Address already in use" not in str(e):
                    raise

    def start(self, *extra):
        log_path = self.tmp / f"{self.name}.log"
        log = open(log_path, "ab")
        pf = self.tmp / f"{self.name}.rpc.port"
        if pf.exists():
            pf.unlink()
        cmd = [*self.prefix, binary(*MASTER), "--rpc_address", self.host,
               "--rpc_port", str(self.rpc_port),
               "--metrics_host", self.host,
               "--metrics_port", str(self.admin_port),
               "--enable_http_metadata_server",
               "--http_metadata_server_host", self.host,
               "--http_metadata_server_port", str(self.meta_port),
               "--db_path", self.db, "--port_file", str(pf),
               *self.args, *extra]
        self.proc = self.procs.popen(cmd, stdout=log, stderr=log)
        log.close()
        if log_path not in self.procs.logs:
            self.procs.logs.append(log_path)
        self.log_path = log_path
        read_port(pf, self.proc, log_path, "mooncake_master")
        if not self.prefix:
            wait_for(lambda: self.http("/health")[0] == 200,
                     what="master /health")
        return self

    @property
    def addr(self):
        return mctest.hostport(self.host, self.rpc_port)

    @property
    def metadata(self):
        return f"http://{mctest.hostport(self.host, self.meta_port)}/metadata"

    def http(self, path, sign=True):
        headers = {}
        if self.key and sign:
            headers["Authorization"] = mctest.auth_sign(self.key, "GET", path)
        try:
            st, body, _ = request(self.admin_port, "GET", path,
                                  headers=headers, host=self.host)
            return st, body.decode(errors="replace")
        except OSError:
            return 0, ""

    def metric(self, name):
        st, text = self.http("/metrics")
        assert st == 200
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise KeyError(name)

    def segments(self):
        st, text = self.http("/get_all_segments")
        assert st == 200, text
        return [s for s in text.splitlines() if s]

    def kill(self):
        self.procs.kill(self.proc)

    def stop(self, timeout=30):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout * SCALE)

    def log(self):
        return open(self.log_path, errors="replace").read()


class Member:
    """A mooncake_client pool member with a fixed host:port (so a restart
    re-adopts its segment)."""

    def __init__(self, procs, tmp_path, master, size="32MB", port=None,
                 extra=(), host="127.0.0.1"):
        self.procs, self.tmp, self.master = procs, tmp_path, master
        self.size, self.extra, self.host = size, extra, host
        # A port of our choosing can be taken between free_port() and the
        # member's bind (an outgoing connection of a test running beside
        # this one gets it as its local port): then another port.
        for attempt in range(5):
            self.port = port or free_port()
            self.name = mctest.hostport(host, self.port)
            self.proc = None
            procs.own_shm(shm_segment(self.name))
            try:
                self.start()
                return
            except RuntimeError as e:
                if port or attempt == 4 or \
                        "Address already in use" not in str(e):
                    raise

    def start(self):
        tag = f"member{self.port}"
        log_path = self.tmp / f"{tag}.log"
        pf = self.tmp / f"{tag}.port"
        if pf.exists():
            pf.unlink()
        log = open(log_path, "ab")
        cmd = [binary(*MEMBER), "--host", self.host, "--port",
               str(self.port), "--global_segment_size", self.size,
               "--master_server_address", self.master.addr,
               "--metadata_server", self.master.metadata,
               "--port_file", str(pf), *self.extra]
        self.proc = self.procs.popen(cmd, stdout=log, stderr=log,
                                     env=mctest.te_env(
                                         {"MC_STORE_PING_MS": "200"}))
        log.close()
        if log_path not in self.procs.logs:
            self.procs.logs.append(log_path)
        self.log_path = log_path
        read_port(pf, self.proc, log_path, "mooncake_client")
        return self

    def log(self):
        return open(self.log_path, errors="replace").read()

    def kill(self):
        self.procs.kill(self.proc)

    def stop(self, timeout=30):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout * SCALE)


class Shell:
    """tests/tools/store_shell: one command line in, one reply out."""

    def __init__(self, procs, tmp_path, master, seg="0", buf="64MB",
                 name=None, env=None, prefix=()):
        tag = f"shell{mctest._seq.__next__()}"
        self.log_path = tmp_path / f"{tag}.log"
        log = open(self.log_path, "ab")
        self.proc = procs.popen([*prefix, binary(*SHELL)],
                                stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log, bufsize=0,
                                env=mctest.te_env(env))
        log.close()
        procs.logs.append(self.log_path)
        self.client = mctest.TeClient(self.proc, self.log_path)
        # A port picked here may be taken before the engine binds it (a
        # connection of a test running beside this one): a fresh one,
        # up to three times, for a name of our own choosing.
        for attempt in range(1 if name else 3):
            n = name or f"127.0.0.1:{free_port()}"
            procs.own_shm(shm_segment(n))
            line = (f"setup {n} {master.metadata} {seg} {buf} tcp "
                    f"{master.addr}")
            reply = self.cmd(line)
            if reply.startswith("ok") or name or \
                    "in use" not in self.log_path.read_text(errors="replace"):
                break
        assert reply.startswith("ok"), f"{line!r} -> {reply!r}"

    def cmd(self, line, timeout=60.0):
        return self.client.cmd(line, timeout)

    def ok(self, line, timeout=60.0):
        reply = self.cmd(line, timeout)
        assert reply.startswith("ok"), f"{line!r} -> {reply!r}"
        return reply[2:].strip()

    def code(self, line, timeout=60.0):
        """The error code of a reply ('ok' is 0)."""
        reply = self.cmd(line, timeout)
        if reply.startswith("ok"):
            return 0
        assert reply.startswith("err "), f"{line!r} -> {reply!r}"
        return int(reply.split()[1])

    def exist(self, keys):
        out = []
        for i in range(0, len(keys), 256):
            part = keys[i:i + 256]
            out += [int(x) for x in self.ok("exist " + " ".join(part)).split()]
        return out

    def close(self):
        self.client.proc.stdin.write(b"quit\n")
        try:
            self.proc.wait(30 * SCALE)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def cli(master, *args, timeout=120, check=True):
    """Run the `mooncake` CLI against master; returns CompletedProcess."""
    env = dict(os.environ, MOONCAKE_MASTER=master.addr,
               MOONCAKE_TE_META_DATA_SERVER=master.metadata)
    p = subprocess.run([binary(*CLI), *args], capture_output=True, text=True,
                       timeout=timeout * SCALE, env=env)
    if check:
        assert p.returncode == 0, f"mooncake {args}: {p.stderr}{p.stdout}"
    return p


def shm_segment(name):
    """The /dev/shm file of the persistent segment of a client named
    host:port."""
    return "/dev/shm/mooncake.seg." + name.replace(":", "_")


def cleanup_segments(ports):
    """Remove /dev/shm segments of members killed with kill -9."""
    for port in ports:
        for path in glob.glob(f"/dev/shm/mooncake.seg.127.0.0.1_{port}*"):
            try:
                os.unlink(path)
            except OSError:
                pass


def eventually(cond, timeout=20.0, what="condition"):
    return wait_for(cond, timeout=timeout, what=what)


__all__ = ["Master", "Member", "Shell", "cli", "free_port", "eventually",
           "cleanup_segments", "shm_segment", "SCALE", "time"]
