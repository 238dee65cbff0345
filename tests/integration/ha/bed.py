# SPDX-License-Identifier: Apache-2.0
"""The multi-host HA test bed: every "host" is a network namespace of its
own with one address on a shared bridge (itself in a namespace of its
own), all made by the test and deleted afterwards, even on failure.

On it: a 3-member etcd cluster, mooncake_master --enable_ha daemons,
mooncake_client pool members, mooncakefs mounts and `mooncake` CLI calls,
each on the host the test names. Links are cut with `ip link set down`
and hosts partitioned with blackhole routes (iproute2 only)."""
import os
import random
import signal
import subprocess
import time

import mctest
from mctest import SCALE, binary, wait_for

MASTER = ("master", "mooncake_master")
MEMBER = ("mooncakefs", "cli", "mooncake_client")
CLI = ("mooncakefs", "cli", "mooncake")
MCFS = ("mooncakefs", "fuse", "mooncakefs")
RPC_PORT = 50051
ADMIN_PORT = 9003
MEMBER_PORT = 17001
ETCD_CLIENT = 2379
ETCD_PEER = 2380


def sh(*args, check=True):
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r


class Host:
    def __init__(self, bed, name, ns, addr, dev):
        self.bed, self.name, self.ns, self.addr, self.dev = \
            bed, name, ns, addr, dev
        self.alive = True

    def cmd(self, args):
        """args run in this host's network (the caller's mounts stay
        visible: FUSE mounts, the test's directory)."""
        return ["nsenter", f"--net=/run/netns/{self.ns}", *args]

    def run(self, args, timeout=60, **kw):
        return subprocess.run(self.cmd(args), capture_output=True, text=True,
                              timeout=timeout * SCALE, **kw)

    def link(self, up):
        sh(*self.cmd(["ip", "link", "set", self.dev,
                      "up" if up else "down"]))

    def blackhole(self, addrs, on=True):
        """Drop this host's packets to addrs (its replies included, so no
        TCP connection with them survives)."""
        for a in addrs:
            sh(*self.cmd(["ip", "route", "add" if on else "del",
                          "blackhole", f"{a}/32"]))

    def pids(self):
        out = sh("ip", "netns", "pids", self.ns, check=False).stdout
        return [int(p) for p in out.split()]

    def destroy(self):
        """Kill -9 everything in the host and delete its namespace."""
        for pid in self.pids():
            self.bed.procs.note_shm(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        sh("ip", "netns", "del", self.ns, check=False)
        self.alive = False


class Bed:
    """Hosts on 10.216.N.0/24 behind one bridge."""

    def __init__(self, procs, tmp_path):
        self.procs, self.tmp = procs, tmp_path
        self.tag = f"{os.getpid() % 1000}{random.randrange(100)}"
        self.net = f"10.216.{random.randrange(1, 250)}"
        self.brns = f"mchab{self.tag}"
        self.hosts = {}
        self.mounts = []
        self.etcd = []  # (host, proc)
        self.masters = []
        self.members = []

    def __enter__(self):
        try:
            sh("ip", "netns", "add", self.brns)
            sh("ip", "netns", "exec", self.brns, "ip", "link", "add", "br0",
               "type", "bridge")
            sh("ip", "netns", "exec", self.brns, "ip", "link", "set", "br0",
               "up")
        except Exception:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for m in self.mounts:
            m.cleanup()
        for h in list(self.hosts.values()):
            if h.alive:
                h.destroy()
        sh("ip", "netns", "del", self.brns, check=False)
        return False

    def host(self, name):
        """A new host: namespace, veth to the bridge, one address."""
        i = len(self.hosts) + 1
        ns = f"mcha{self.tag}{name}"
        a, b = f"mch{self.tag}{i}a", f"mch{self.tag}{i}b"
        h = Host(self, name, ns, f"{self.net}.{i}", "eth0")
        self.hosts[name] = h
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        sh("ip", "link", "set", a, "netns", ns)
        sh("ip", "link", "set", b, "netns", self.brns)
        sh("ip", "netns", "exec", self.brns, "ip", "link", "set", b,
           "master", "br0")
        sh("ip", "netns", "exec", self.brns, "ip", "link", "set", b, "up")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", a, "name", "eth0")
        sh("ip", "netns", "exec", ns, "ip", "addr", "add",
           f"{h.addr}/24", "dev", "eth0")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        return h

    def _popen(self, host, args, name, env=None):
        log = self.tmp / f"{name}.log"
        self.procs.logs.append(log)
        with open(log, "ab") as f:
            p = self.procs.popen(host.cmd(args), stdout=f, stderr=f,
                                 stdin=subprocess.DEVNULL, env=env)
        return p, log

    # ---- etcd ----------------------------------------------------------
    def start_etcd(self, n=3):
        hosts = [self.host(f"e{i}") for i in range(1, n + 1)]
        cluster = ",".join(f"e{i}=http://{h.addr}:{ETCD_PEER}"
                           for i, h in enumerate(hosts, 1))
        for i, h in enumerate(hosts, 1):
            url = f"http://{h.addr}"
            p, log = self._popen(h, [
                "etcd", "--name", f"e{i}",
                "--data-dir", str(self.tmp / f"etcd{i}"),
                "--listen-client-urls", f"{url}:{ETCD_CLIENT}",
                "--advertise-client-urls", f"{url}:{ETCD_CLIENT}",
                "--listen-peer-urls", f"{url}:{ETCD_PEER}",
                "--initial-advertise-peer-urls", f"{url}:{ETCD_PEER}",
                "--initial-cluster", cluster,
                "--initial-cluster-token", f"mcha{self.tag}",
                "--initial-cluster-state", "new",
                "--heartbeat-interval", "100", "--election-timeout", "1000",
                "--logger", "zap", "--log-outputs", "stderr"], f"etcd{i}")
            self.etcd.append((h, p))
        self.etcd_hosts = hosts
        wait_for(lambda: self.etcdctl("endpoint", "health",
                                      check=False).returncode == 0,
                 timeout=30, what="etcd cluster healthy")
        return hosts

    @property
    def etcd_eps(self):
        return [f"{h.addr}:{ETCD_CLIENT}" for h in self.etcd_hosts]

    def etcdctl(self, *args, check=True, user=None, eps=None):
        """etcdctl on the first live etcd host."""
        live = [h for h in self.etcd_hosts
                if h.alive and not getattr(h, "etcd_down", False)]
        h = live[0]
        eps = eps or [f"{e.addr}:{ETCD_CLIENT}" for e in live]
        cmd = ["etcdctl", "--endpoints", ",".join(eps),
               "--dial-timeout", "2s", "--command-timeout", "5s"]
        if user:
            cmd += ["--user", user]
        r = h.run(cmd + list(args), env=dict(os.environ, ETCDCTL_API="3"))
        if check and r.returncode != 0:
            raise RuntimeError(f"etcdctl {args}: {r.stderr}")
        return r

    # ---- masters -------------------------------------------------------
    def start_masters(self, cluster, n=3, etcd_conn=None, ttl=None,
                      client_ttl=None, extra=()):
        self.cluster = cluster
        self.etcd_conn = etcd_conn or ",".join(self.etcd_eps)
        for i in range(1, n + 1):
            h = self.host(f"m{i}")
            args = [binary(*MASTER), "--enable_ha",
                    "--etcd_endpoints", self.etcd_conn,
                    "--cluster_id", cluster,
                    "--rpc_address", h.addr, "--rpc_port", str(RPC_PORT),
                    "--metrics_host", h.addr,
                    "--metrics_port", str(ADMIN_PORT),
                    "--db_path", str(self.tmp / f"m{i}.db"), *extra]
            if ttl:
                args += ["--ha_lease_ttl_sec", str(ttl)]
            if client_ttl:
                args += ["--client_ttl", str(client_ttl)]
            p, log = self._popen(h, args, f"master{i}")
            self.masters.append(MasterProc(self, h, p, log))
        return self.masters

    def leader(self, timeout=30):
        """The master serving as leader (master_view in etcd and the
        'serving RPC' line in its log)."""
        def find():
            v = self.master_view()
            for m in self.masters:
                if v == m.addr and m.proc.poll() is None and \
                        m.serving_count() > 0:
                    return m
            return None
        return wait_for(find, timeout=timeout, what="an elected leader")

    def master_view(self, user=None):
        r = self.etcdctl("get", f"mooncake-store/{self.cluster}/master_view",
                         "--print-value-only", check=False, user=user
                         or getattr(self, "etcd_user", None))
        return r.stdout.strip() if r.returncode == 0 else None

    @property
    def master_url(self):
        return "etcd://" + ";".join(self.etcd_eps)

    # ---- members, clients, mounts -------------------------------------
    def start_member(self, name, size="64MB", extra=(), env=None):
        h = self.host(name)
        seg = f"{h.addr}:{MEMBER_PORT}"
        self.procs.own_shm(f"/dev/shm/mooncake.seg.{h.addr}_{MEMBER_PORT}*")
        p, log = self._popen(h, [
            binary(*MEMBER), "--host", h.addr, "--port", str(MEMBER_PORT),
            "--global_segment_size", size,
            "--master_server_address", self.client_master(),
            "--metadata_server", "P2PHANDSHAKE", *extra], name,
            env=self.env(env))
        m = MemberProc(h, p, log, seg)
        self.members.append(m)
        return m

    def client_master(self):
        return getattr(self, "client_master_url", None) or self.master_url

    def env(self, extra=None):
        e = mctest.te_env({"MOONCAKE_CLUSTER_ID": self.cluster,
                           "MC_STORE_PING_MS": "200"})
        e.update(getattr(self, "client_env", {}))
        e.update(extra or {})
        return e

    def cli(self, host, *args, master=None, timeout=60, env=None):
        """`mooncake` on host against the pool (or master=host:port)."""
        return host.run([binary(*CLI), "--master", master or
                         self.client_master(), "--metadata", "P2PHANDSHAKE",
                         "--local_hostname", host.addr, *args],
                        timeout=timeout, env=self.env(env))

    def mount(self, name, seg="64MiB", opts=""):
        h = self.host(name)
        mnt = self.tmp / f"mnt_{name}"
        mnt.mkdir()
        segname = f"mcha{self.tag}{name}"
        log = self.tmp / f"{name}.fs.log"
        self.procs.logs.append(log)
        m = MountProc(h, mnt, segname)
        self.mounts.append(m)
        o = (f"metadata=P2PHANDSHAKE,local_hostname={h.addr},"
             f"segment_size={seg},log_file={log},segment_name={segname},"
             f"ckpt_cache={self.tmp / 'ckpt'}")
        if opts:
            o += "," + opts
        # Mounts name etcd's endpoints with commas, as operations.md
        # shows (they broke the daemon's own fsname= option once).
        master = self.client_master()
        if master == self.master_url:
            master = master.replace(";", ",")
        r = subprocess.run(h.cmd([binary(*MCFS), master,
                                  str(mnt), "-o", o]),
                           capture_output=True, text=True, timeout=60,
                           env=self.env())
        assert r.returncode == 0, r.stderr + log.read_text(errors="replace")
        wait_for(lambda: os.path.isdir(mnt / "kv"), timeout=30,
                 what=f"{name} mounted")
        return m


class MasterProc:
    def __init__(self, bed, host, proc, log):
        self.bed, self.host, self.proc, self.log_path = bed, host, proc, log

    @property
    def addr(self):
        return f"{self.host.addr}:{RPC_PORT}"

    def log(self):
        return self.log_path.read_text(errors="replace")

    def serving_count(self):
        return self.log().count("serving RPC on")

    def kill(self):
        self.bed.procs.kill(self.proc)

    def segments(self):
        """The leader's /get_all_segments (fetched from a host of its own
        network: the master's admin address)."""
        path = "/get_all_segments"
        hdr = []
        token = getattr(self.bed, "token", None)
        if token:
            hdr = ["-H", "Authorization: " + mctest.auth_sign(
                mctest.auth_key(token), "GET", path)]
        r = self.host.run(["curl", "-sS", "-f", "-m", "5", *hdr,
                           f"http://{self.host.addr}:{ADMIN_PORT}{path}"])
        assert r.returncode == 0, r.stderr
        return [s for s in r.stdout.splitlines() if s]


class MemberProc:
    def __init__(self, host, proc, log, seg):
        self.host, self.proc, self.log_path, self.seg = host, proc, log, seg

    def log(self):
        return self.log_path.read_text(errors="replace")


class MountProc:
    def __init__(self, host, path, segname):
        self.host, self.path, self.segname = host, path, segname

    def cleanup(self):
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
        # The daemonized mount runs in the host's namespace: destroying
        # the host kills it; its segment file is ours to remove.
        for p in (f"/dev/shm/mooncake.seg.{self.segname}",):
            try:
                os.unlink(p)
            except OSError:
                pass


def now():
    return time.monotonic()
