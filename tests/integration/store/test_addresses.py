# SPDX-License-Identifier: Apache-2.0
"""Addresses as peers are told them. A pool entirely on IPv6 loopback
(::1): the master's three listeners, members and the `mooncake` CLI, with
and without a metadata service; the addresses the daemons announce or
print must be ones the others parse back ("[::1]:port"), never an
ambiguous "::1:port". And a wildcard local_hostname ("0.0.0.0"), which on
another host means that host, between two test hosts."""
import json
import re
import subprocess
import urllib.parse

import pytest

from mctest import SCALE, binary, free_port, request
from netns import TwoHosts, can_make_namespaces
from pool import MASTER, Master, Member, Shell, cli
import mctest


needs_ipv6 = pytest.mark.skipif(not mctest.have_ipv6(), reason="no IPv6 loopback")


@pytest.fixture
def master6(procs, tmp_path):
    return Master(procs, tmp_path, host="::1")


def put_get(master, tmp_path, key, *flags, local="[::1]"):
    data = bytes(range(256)) * 1200
    src, dst = tmp_path / f"{key}.in", tmp_path / f"{key}.out"
    src.write_bytes(data)
    cli(master, *flags, "--local_hostname", local, "put", str(src), key)
    cli(master, *flags, "--local_hostname", local, "get", key, str(dst))
    assert dst.read_bytes() == data


@needs_ipv6
def test_p2p_member_on_ipv6_is_reachable(procs, tmp_path, master6):
    """With P2PHANDSHAKE a member is named by its RPC address: it was
    "::1:PORT", which no peer could parse, so every put placed on it
    failed with TRANSFER_FAIL."""
    m = Member(procs, tmp_path, master6, host="::1",
               extra=("--metadata_server", "P2PHANDSHAKE"))
    assert master6.segments() == [f"[::1]:{m.port}"]
    put_get(master6, tmp_path, "p2p6", "--metadata", "P2PHANDSHAKE")


@needs_ipv6
def test_printed_metadata_url_is_usable(procs, tmp_path, master6):
    """The URL the master logs for its metadata service is one a member
    can be given as is (it read http://::1:PORT/metadata)."""
    urls = re.findall(r"metadata service on (\S+)", master6.log())
    assert urls == [f"http://[::1]:{master6.meta_port}/metadata"]
    m = Member(procs, tmp_path, master6, host="::1",
               extra=("--metadata_server", urls[0]))
    assert master6.segments() == [m.name]
    put_get(master6, tmp_path, "meta6")
    assert re.search(r"serving RPC on \[::1\]:\d+, admin HTTP on \[::1\]:\d+",
                     master6.log())


@needs_ipv6
@pytest.mark.parametrize("meta", ["service", "P2PHANDSHAKE"])
def test_bare_ipv6_local_hostname(procs, tmp_path, master6, meta):
    """local_hostname "::1" (vLLM's get_ip() on an IPv6 host, upstream
    takes it) in the C library, not only in the Python package: it was
    -600, "expected host or host:port"."""
    flags = ("--metadata", "P2PHANDSHAKE") if meta == "P2PHANDSHAKE" else ()
    Member(procs, tmp_path, master6, host="::1",
           extra=("--metadata_server", "P2PHANDSHAKE") if flags else ())
    put_get(master6, tmp_path, "bare6", *flags, local="::1")


@needs_ipv6
def test_ambiguous_ipv6_local_hostname_is_refused(procs, tmp_path, master6):
    """"::1:1234" is ::1 port 1234 and also the address ::1:1234: refused
    with words that say how to write it, not guessed."""
    Member(procs, tmp_path, master6, host="::1")
    src = tmp_path / "x"
    src.write_bytes(b"x" * 4096)
    p = cli(master6, "--local_hostname", "::1:1234", "put", str(src), "amb",
            check=False)
    assert p.returncode != 0
    assert "'::1:1234'" in p.stderr and "[IPv6]:port" in p.stderr, p.stderr
    assert "amb" not in cli(master6, "ls").stdout


@needs_ipv6
def test_unbracketed_ipv6_urls_are_refused(procs, tmp_path, master6):
    """"http://::1:PORT/metadata" and "etcd://::1:PORT" are refused with
    words that say how to write them: the metadata URL failed at its
    first request in curl's words as RPC_FAIL (-900), the etcd one the
    same, and an HA master given it ran on as a standby that never got a
    lease, warning every lease period."""
    src = tmp_path / "x"
    src.write_bytes(b"x" * 4096)
    bad = f"http://::1:{master6.meta_port}/metadata"
    p = cli(master6, "--metadata", bad, "--local_hostname", "[::1]", "put",
            str(src), "badurl", check=False)
    assert "-600 INVALID_PARAMS" in p.stderr, p.stderr
    assert "IPv6 host goes in brackets" in p.stderr, p.stderr
    p = cli(master6, "--master", "etcd://::1:2379", "status", check=False)
    assert p.returncode == 2
    assert "IPv6 address in brackets" in p.stderr, p.stderr
    for flag in ("--etcd_endpoints", "--ha_backend_connstring"):
        p = subprocess.run(
            [binary(*MASTER), "--enable_ha", flag, "::1:2379",
             "--rpc_address", "::1", "--rpc_port", str(free_port()),
             "--db_path", str(tmp_path / "ha.db")],
            capture_output=True, text=True, timeout=30 * SCALE)
        assert p.returncode == 2, p.stderr
        assert "'::1:2379'" in p.stderr and "in brackets" in p.stderr, \
            p.stderr


def test_wildcard_local_hostname_is_not_advertised(procs, tmp_path):
    """A client whose local_hostname is "0.0.0.0" holds the pool's only
    segment on host B; a client on host A reads an object from it. Peers
    were told "0.0.0.0:PORT", which on A is A itself: the read failed
    (-800). The client now advertises B's address, as mooncake_client
    --host 0.0.0.0 does."""
    why = can_make_namespaces()
    if why:
        pytest.skip(why)
    with TwoHosts(procs) as h:
        m = Master(procs, tmp_path, host=h.a.addr,
                   prefix=h.a.nsenter([]))
        port = free_port()
        owner = Shell(procs, tmp_path, m, seg="32MB", prefix=h.b.nsenter([]),
                      name=f"0.0.0.0:{port}")
        procs.own_shm(f"/dev/shm/mooncake.seg.{h.b.addr}_{port}")
        assert owner.ok("hostname") == f"{h.b.addr}:{port}"
        owner.ok(f"put w0 {1 << 20} 7")
        reader = Shell(procs, tmp_path, m, prefix=h.a.nsenter([]),
                       name=f"{h.a.addr}:{free_port()}")
        assert reader.code(f"check w0 {1 << 20} 7") == 0


@pytest.mark.parametrize("env", [
    {"MC_STORE_CLIENT_MIN_PORT": "abc"},
    {"MC_STORE_CLIENT_MAX_PORT": "70000"},
    {"MC_STORE_CLIENT_MIN_PORT": "14000", "MC_STORE_CLIENT_MAX_PORT": "13000"},
    {"MC_MIN_RPC_PORT": "abc", "P2P": "1"},
    {"MC_MAX_RPC_PORT": "-1", "P2P": "1"},
])
def test_bad_port_range_is_refused(procs, tmp_path, monkeypatch, env):
    """The ranges a client picks its port from: a value that is not a
    port, or a minimum above the maximum, was silently the default range
    (or atoi's reading of it: "16000x" was 16000); now setup fails with
    INVALID_PARAMS naming the variable, as MC_HANDSHAKE_MAX_LENGTH does."""
    m = Master(procs, tmp_path)
    Member(procs, tmp_path, m)
    p2p = env.pop("P2P", None)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    src = tmp_path / "x"
    src.write_bytes(b"x" * 4096)
    flags = ("--metadata", "P2PHANDSHAKE") if p2p else ()
    p = cli(m, *flags, "--local_hostname", "127.0.0.1", "put", str(src),
            "rng", check=False)
    assert "-600 INVALID_PARAMS" in p.stderr, p.stderr
    for k, v in env.items():
        assert f"{k}='{v}'" in p.stderr, p.stderr
    assert "rng" not in cli(m, "ls").stdout


@needs_ipv6
def test_wildcard_ipv6_listener_is_dual_stack(procs, tmp_path):
    """A master told "::" (a dual-stack pod's every address) serves IPv4
    and IPv6 clients on its ports; it set IPV6_V6ONLY, so 127.0.0.1 was
    refused (-900)."""
    m = Master(procs, tmp_path, host="::")
    for host in ("127.0.0.1", "[::1]"):
        p = cli(m, "--master", f"{host}:{m.rpc_port}", "status")
        assert p.stdout.startswith(f"master {host}:{m.rpc_port}"), p.stdout
    for host in ("127.0.0.1", "::1"):
        st, body, _ = request(m.meta_port, "GET", "/health", host=host)
        assert st == 200, (host, body)


def test_tcp_bind_address(procs, tmp_path, monkeypatch):
    """MC_TCP_BIND_ADDRESS (upstream's): the engine listens on that
    address and gives it to peers (rpc_meta), its name staying as given.
    It was ignored: a member named 127.0.0.1:PORT listened there. The
    reader goes over TCP (MC_FORCE_TCP), to the advertised address; a
    value with a port is refused, naming the variable."""
    m = Master(procs, tmp_path)
    name = f"127.0.0.1:{free_port()}"
    owner = Shell(procs, tmp_path, m, seg="32MB", name=name,
                  env={"MC_TCP_BIND_ADDRESS": "127.0.0.2"})
    owner.ok(f"put w0 {1 << 20} 7")
    key = urllib.parse.quote(f"mooncake/rpc_meta/{name}", safe="")
    target = f"/metadata?key={key}"
    st, body, _ = request(m.meta_port, "GET", target)
    assert st == 200, body
    assert json.loads(body)["ip_or_host_name"] == "127.0.0.2", body
    reader = Shell(procs, tmp_path, m, env={"MC_FORCE_TCP": "1"})
    assert reader.code(f"check w0 {1 << 20} 7") == 0
    monkeypatch.setenv("MC_TCP_BIND_ADDRESS", "127.0.0.2:80")
    src = tmp_path / "x"
    src.write_bytes(b"x" * 4096)
    p = cli(m, "--local_hostname", "127.0.0.1", "put", str(src), "bad",
            check=False)
    assert p.returncode != 0
    assert "MC_TCP_BIND_ADDRESS='127.0.0.2:80'" in p.stderr, p.stderr
