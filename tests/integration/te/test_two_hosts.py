# SPDX-License-Identifier: Apache-2.0
"""Two hosts: network namespaces joined by a veth pair, made by this test.
Metadata lives in a real etcd on host a; a te_peer on host b and the
conformance suite on host a move data over TCP between the namespaces.
The peer's buffer is shared memory, yet no byte may go through the shm
transport: the hosts differ (network namespace), so only TCP reaches it."""
import json
import subprocess

import pytest

from mctest import (SANITIZER_MARKERS, SCALE, TE_CONFORMANCE, TE_PEER,
                    binary, te_env, wait_for)
from netns import TwoHosts, can_make_namespaces

CASES = ["sizes", "write_read", "batches", "threads", "refusals"]
ETCD_CLIENT_PORT = 23790
ETCD_PEER_PORT = 23800


@pytest.fixture
def hosts(procs):
    why = can_make_namespaces()
    if why:
        pytest.skip(why)
    with TwoHosts(procs) as h:
        yield h


def start_etcd(procs, host, tmp_path):
    url = f"http://{host.addr}:{ETCD_CLIENT_PORT}"
    peer = f"http://{host.addr}:{ETCD_PEER_PORT}"
    log = open(tmp_path / "etcd.log", "ab")
    procs.popen(host.cmd([
        "etcd", "--name", "mc2hosts", "--data-dir", str(tmp_path / "etcd"),
        "--listen-client-urls", url, "--advertise-client-urls", url,
        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
        "--initial-cluster", f"mc2hosts={peer}"]), stdout=log, stderr=log)
    log.close()

    def healthy():
        r = host.run(["curl", "-s", "-m", "2", f"{url}/health"])
        return '"health":"true"' in r.stdout

    wait_for(healthy, timeout=30, what="etcd on host a")
    return f"etcd://{host.addr}:{ETCD_CLIENT_PORT}"


def start_peer(procs, host, metadata, tmp_path, name=None):
    ready = tmp_path / "peer.ready"
    log_path = tmp_path / "peer.log"
    log = open(log_path, "ab")
    procs.popen(host.cmd([
        binary(*TE_PEER), "--metadata", metadata, "--name",
        name or host.addr,
        "--size", "72M", "--shm", "--pattern", "77", "--ready", str(ready)]),
        stdout=log, stderr=log, env=te_env())
    log.close()
    procs.logs.append(log_path)

    def is_ready():
        try:
            return json.loads(ready.read_text())
        except (FileNotFoundError, ValueError):
            return None

    return wait_for(is_ready, timeout=30, what="te_peer on host b")


@pytest.mark.parametrize("transport", ["tcp", "auto"])
def test_conformance_across_namespaces(procs, hosts, tmp_path, transport):
    metadata = start_etcd(procs, hosts.a, tmp_path)
    peer = start_peer(procs, hosts.b, metadata, tmp_path)
    assert peer["name"] == hosts.b.addr
    conformance(procs, hosts, metadata, peer, transport, CASES)


def conformance(procs, hosts, metadata, peer, transport, cases):
    """The conformance suite on host a against peer (on host b): every
    case passes, over TCP only."""
    cmd = hosts.a.cmd([
        binary(*TE_CONFORMANCE), "--metadata", metadata, "--transport",
        transport, "--name", hosts.a.addr, "--target", peer["name"],
        "--target_addr", str(peer["addr"]), "--target_size",
        str(peer["size"]), "--seed", "77", "--timeout_ms", "20000",
        "--case", ",".join(cases), "--report_counters"])
    p = procs.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True, env=te_env())
    out, err = p.communicate(timeout=240 * SCALE)
    for marker in SANITIZER_MARKERS:
        assert marker not in err, err
    assert p.returncode == 0, f"{out}\n{err}"
    for case in cases:
        assert any(line.startswith(f"ok {case} ")
                   for line in out.splitlines()), out
    counters = {}
    for line in out.splitlines():
        if line.startswith("counters "):
            _, name, js = line.split(" ", 2)
            counters[name] = json.loads(js)
    assert counters["tcp"]["read_bytes"] > 0
    assert counters["tcp"]["write_bytes"] > 0
    # Different namespaces are different hosts: shared memory never used.
    assert counters["shm"]["read_bytes"] == 0
    assert counters["shm"]["write_bytes"] == 0


def test_a_peer_named_localhost(procs, hosts, tmp_path):
    """A peer named "localhost" (upstream's examples, vLLM's configs on
    one host) whose metadata service is on another host: it published
    rpc_meta's address as "localhost", and an engine on host a reached
    itself. It now listens on and gives its address on the way to the
    service (host b's), and the conformance suite on a reads and writes
    it."""
    metadata = start_etcd(procs, hosts.a, tmp_path)
    peer = start_peer(procs, hosts.b, metadata, tmp_path, name="localhost")
    assert peer["name"] == "localhost"
    assert "giving peers " + hosts.b.addr in \
        (tmp_path / "peer.log").read_text()
    conformance(procs, hosts, metadata, peer, "tcp", ["sizes", "write_read"])
