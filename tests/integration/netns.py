# SPDX-License-Identifier: Apache-2.0
"""Two test hosts on one machine: network namespaces joined by a veth pair,
created by the test itself and deleted afterwards (even on failure). Each
host has its own loopback and one address on the pair; processes run in a
host with host.cmd([...])."""
import os
import random
import shutil
import subprocess


class Host:
    def __init__(self, ns, addr):
        self.ns = ns
        self.addr = addr

    def cmd(self, args):
        return ["ip", "netns", "exec", self.ns, *args]

    def nsenter(self, args):
        """Like cmd() but keeps the caller's mount namespace (ip netns
        exec makes a new one, which would hide FUSE mounts)."""
        return ["nsenter", f"--net=/run/netns/{self.ns}", *args]

    def run(self, args, **kw):
        return subprocess.run(self.cmd(args), capture_output=True, text=True,
                              timeout=60, **kw)


def can_make_namespaces():
    """None when namespaces can be made here, else the reason why not."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if not shutil.which("ip"):
        return "needs iproute2 (ip)"
    probe = f"mcprobe{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True,
                       text=True)
    if r.returncode != 0:
        return f"cannot create a network namespace: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


class TwoHosts:
    """Hosts a and b on 10.213.N.1/24 and 10.213.N.2/24: a subnet that
    exists only inside these namespaces."""

    def __init__(self, procs=None):
        """procs: the test's mctest.Procs; the shared memory of what runs
        in the namespaces is noted there before it is killed (and removed
        at the test's cleanup)."""
        self.procs = procs
        tag = f"{os.getpid() % 10000}{random.randrange(100)}"
        n = random.randrange(1, 250)
        self.a = Host(f"mcA{tag}", f"10.213.{n}.1")
        self.b = Host(f"mcB{tag}", f"10.213.{n}.2")
        self.veth = (f"mcva{tag}", f"mcvb{tag}")

    def __enter__(self):
        try:
            self._sh("ip", "netns", "add", self.a.ns)
            self._sh("ip", "netns", "add", self.b.ns)
            self._sh("ip", "link", "add", self.veth[0], "type", "veth",
                     "peer", "name", self.veth[1])
            for host, dev in ((self.a, self.veth[0]), (self.b, self.veth[1])):
                self._sh("ip", "link", "set", dev, "netns", host.ns)
                self._sh(*host.cmd(["ip", "addr", "add", f"{host.addr}/24",
                                    "dev", dev]))
                self._sh(*host.cmd(["ip", "link", "set", dev, "up"]))
                self._sh(*host.cmd(["ip", "link", "set", "lo", "up"]))
        except Exception:
            self.__exit__(None, None, None)
            raise
        return self

    def mtu_sized_segments(self, mtu=1500):
        """The pair as a real link carries TCP: MTU-sized segments, each
        its own packet (veth otherwise passes 64 KiB segmentation-offload
        packets, as loopback does), so a receiver gets a payload in
        fragments of about an MSS."""
        for host, dev in ((self.a, self.veth[0]), (self.b, self.veth[1])):
            self._sh(*host.cmd(["ip", "link", "set", dev, "mtu", str(mtu),
                                "gso_max_size", str(mtu),
                                "gso_max_segs", "1"]))

    def __exit__(self, *exc):
        for host in (self.a, self.b):
            # Kill whatever still runs inside, then the namespace itself.
            pids = subprocess.run(["ip", "netns", "pids", host.ns],
                                  capture_output=True, text=True).stdout
            for pid in pids.split():
                if self.procs:
                    self.procs.note_shm(int(pid))
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", host.ns],
                           capture_output=True)
        return False

    @staticmethod
    def _sh(*args):
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
