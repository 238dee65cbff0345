"""HA masters on one etcd on loopback, for tests: an etcd of one member,
HA masters (standbys until elected), and the "master" object pool.Member
and pool.cli take, whose address is the etcd one (docs/design.md, "Master
high availability"). The multi-host bed is tests/integration/ha/bed.py."""
import json
import os
import re
import shutil
import subprocess

from mctest import binary, request, wait_for
from pool import MASTER, free_port

ETCD = "/usr/bin/etcd"
ETCDCTL = "/usr/bin/etcdctl"


class Etcd:
    def __init__(self, procs, tmp_path):
        self.procs, self.tmp = procs, tmp_path
        self.port, peer = free_port(), free_port()
        self.argv = [ETCD, "--name", "e0", "--data-dir",
                     str(tmp_path / "etcd"),
                     "--listen-client-urls", f"http://127.0.0.1:{self.port}",
                     "--advertise-client-urls",
                     f"http://127.0.0.1:{self.port}",
                     "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                     "--initial-advertise-peer-urls",
                     f"http://127.0.0.1:{peer}",
                     "--initial-cluster", f"e0=http://127.0.0.1:{peer}"]
        procs.logs.append(tmp_path / "etcd.log")
        self.start()

    def restart(self, wipe=False):
        """Stopped (kill -9) and started again on the same ports; wipe:
        with its data gone (an etcd rebuilt from nothing)."""
        self.procs.kill(self.proc)
        if wipe:
            shutil.rmtree(self.tmp / "etcd")
        self.start()

    def start(self):
        log = open(self.tmp / "etcd.log", "ab")
        self.proc = self.procs.popen(self.argv, stdout=log, stderr=log)
        log.close()

        def healthy():
            try:
                return request(self.port, "GET", "/health")[0] == 200
            except OSError:
                return False
        wait_for(healthy, timeout=30, what="etcd /health")

    @property
    def addr(self):
        return f"127.0.0.1:{self.port}"

    def delete(self, key):
        p = subprocess.run([ETCDCTL, "--endpoints", self.addr, "del", key],
                           capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, ETCDCTL_API="3"))
        assert p.returncode == 0, p.stderr

    def ctl(self, *args):
        """etcdctl against this member; its stdout."""
        p = subprocess.run([ETCDCTL, "--endpoints", self.addr, *args],
                           capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, ETCDCTL_API="3"))
        assert p.returncode == 0, p.stderr
        return p.stdout

    def lease_of(self, key):
        """The lease id the key is on (0: none, or no such key)."""
        kvs = json.loads(self.ctl("get", key, "-w", "json")).get("kvs", [])
        return int(kvs[0].get("lease", 0)) if kvs else 0

    def get(self, key):
        p = subprocess.run([ETCDCTL, "--endpoints", self.addr, "get", key,
                            "--print-value-only"], capture_output=True,
                           text=True, timeout=30,
                           env=dict(os.environ, ETCDCTL_API="3"))
        assert p.returncode == 0, p.stderr
        return p.stdout.strip()


class HaMaster:
    def __init__(self, procs, tmp_path, etcd, name, ttl=2, cluster="hareq",
                 extra=(), wrap=()):
        """wrap: an argv prefix that runs the master (a cgroup, limits)."""
        self.procs, self.tmp, self.name = procs, tmp_path, name
        self.port = free_port()
        self.pf = tmp_path / f"{name}.port"
        self.log_path = tmp_path / f"{name}.log"
        self.argv = [
            *wrap, binary(*MASTER), "--enable_ha",
            "--etcd_endpoints", etcd.addr,
            "--cluster_id", cluster, "--ha_lease_ttl_sec", str(ttl),
            "--rpc_address", "127.0.0.1", "--rpc_port", str(self.port),
            "--metrics_host", "127.0.0.1", "--metrics_port", "0",
            "--db_path", str(tmp_path / f"{name}.db"),
            "--port_file", str(self.pf), *extra]
        self.start()
        procs.logs.append(self.log_path)

    def start(self):
        """Start (again, on the same record, after a kill)."""
        if self.pf.exists():
            self.pf.unlink()
        log = open(self.log_path, "ab")
        self.proc = self.procs.popen(self.argv, stdout=log, stderr=log)
        log.close()

    def leading(self):
        """True once elected (the port file is written when it serves)."""
        assert self.proc.poll() is None, self.log()
        return self.pf.exists() and self.pf.read_text().strip() != ""

    def log(self):
        return open(self.log_path, errors="replace").read()

    def metric(self, name):
        """A gauge of /metrics on the admin port it logged when it began
        serving last."""
        port = re.findall(r"admin HTTP on [^ ]*:(\d+),", self.log())[-1]
        st, body, _ = request(int(port), "GET", "/metrics")
        assert st == 200, st
        return float(re.search(rf"^{name} (\S+)$", body.decode(),
                               re.M).group(1))


    def standby_admin(self):
        """The admin port it logged as a standby (it answers there from
        its start, and keeps it once elected)."""
        return int(re.findall(r"admin HTTP on [^ ]*:(\d+) \(a standby",
                              self.log())[-1])

    def health(self):
        """/health of the admin port it logged when it began serving last,
        as a dict."""
        port = re.findall(r"admin HTTP on [^ ]*:(\d+),", self.log())[-1]
        st, body, _ = request(int(port), "GET", "/health")
        assert st == 200, st
        return json.loads(body)


class Pool:
    """What pool.Member and pool.cli take as a master: the etcd address."""

    def __init__(self, etcd):
        self.addr = f"etcd://{etcd.addr}"
        self.metadata = "P2PHANDSHAKE"
