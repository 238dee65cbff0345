# SPDX-License-Identifier: Apache-2.0
"""Authentication of the master RPC (issue 16): a master with a token file
serves only connections that prove they hold the token. The owner's
operations work; a client without the token, with the wrong one, or with
one whose file is open to others is refused with a message saying why;
another local user (a uid of the test's own, with no groups) cannot read
the owner's token and can neither list, read, nor remove objects. A
client with a token refuses a master without one. The admin HTTP answers
only signed requests, except /health and /metrics; so does the master's
metadata service (members sign their engines' entries; another user can
neither rewrite a member's rpc_meta or segment entry nor read it). The
transfer engines' handshake and TCP data ports serve only connections that
authenticated with the token: another user who knows a member's ports and
an object's address can neither overwrite nor read its bytes (the same
attack against a pool without a token does overwrite them)."""
import json
import os
import pathlib
import secrets
import shutil
import subprocess
import tempfile
import time
import urllib.parse

import pytest

import mctest
from mctest import SCALE, binary, request
from pool import CLI, Master, Member, Shell, cli, eventually

OTHER = 54322


@pytest.fixture
def shared():
    """A directory other users can reach (pytest's are 0700): the token
    lives here, 0600, as an operator would keep it in a shared path."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="mc-auth-"))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def token_file(path, text=None, mode=0o600):
    path.write_text((text or secrets.token_hex(32)) + "\n")
    os.chmod(path, mode)
    return path


@pytest.fixture
def pool(procs, tmp_path, shared, monkeypatch):
    """A master with a token, two members and a shell holding it (the
    shell and the CLI through MOONCAKE_AUTH_TOKEN_FILE)."""
    tok = token_file(shared / "token")
    m = Master(procs, tmp_path, token=tok)
    # One member takes the token by flag, the other by the variable.
    Member(procs, tmp_path, m, extra=("--auth_token_file", str(tok)))
    monkeypatch.setenv("MOONCAKE_AUTH_TOKEN_FILE", str(tok))
    Member(procs, tmp_path, m)
    eventually(lambda: len(m.segments()) == 2, what="2 segments")
    return m, tok


def run_cli(master, *args, env=None, user=None):
    e = dict(os.environ, MOONCAKE_MASTER=master.addr,
             MOONCAKE_TE_META_DATA_SERVER=master.metadata)
    e.pop("MOONCAKE_AUTH_TOKEN_FILE", None)
    e.update(env or {})
    kw = dict(user=user, group=user, extra_groups=[]) if user else {}
    exe = mctest.binary_for_others(*CLI) if user else binary(*CLI)
    return subprocess.run([exe, *args], capture_output=True,
                          text=True, timeout=120 * SCALE, env=e, **kw)


def test_owner_operations_work(procs, tmp_path, pool):
    master, tok = pool
    sh = Shell(procs, tmp_path, master)
    sh.ok("put auth/a 300000 5")
    sh.ok("check auth/a 300000 5")
    src = tmp_path / "src"
    src.write_bytes(os.urandom(100000))
    cli(master, "put", str(src), "auth/b")
    cli(master, "get", "auth/b", str(tmp_path / "dst"))
    assert (tmp_path / "dst").read_bytes() == src.read_bytes()
    assert "auth/a" in cli(master, "ls").stdout
    assert "clients" in cli(master, "status").stdout
    cli(master, "--force", "rm", "auth/b")
    sh.ok("rm auth/a force")
    sh.close()
    assert "authentication on" in master.log()


def test_cli_flag_alone_serves_every_command(pool, tmp_path):
    """--auth_token_file on the command line, no variable, no config file:
    put, get and rm (through the library) as well as ls."""
    master, tok = pool
    src = tmp_path / "flag-src"
    src.write_bytes(os.urandom(50000))
    flag = ("--auth_token_file", str(tok))
    for args in (("put", str(src), "auth/flag"),
                 ("get", "auth/flag", str(tmp_path / "flag-dst")),
                 ("ls",), ("--force", "rm", "auth/flag")):
        p = run_cli(master, *flag, *args)
        assert p.returncode == 0, (args, p.stderr)
    assert (tmp_path / "flag-dst").read_bytes() == src.read_bytes()


@pytest.mark.parametrize("cmd", [["status"], ["ls"], ["info", "auth/x"],
                                 ["rm", "auth/x"], ["get", "auth/x", "/dev/null"]])
def test_no_token_is_refused_with_the_reason(pool, cmd):
    master, _ = pool
    p = run_cli(master, *cmd)
    assert p.returncode != 0
    assert "authentication required" in p.stderr, p.stderr
    assert "MOONCAKE_AUTH_TOKEN_FILE" in p.stderr, p.stderr


def test_wrong_token_is_refused(pool, shared):
    master, _ = pool
    bad = token_file(shared / "bad")
    for cmd in (["ls"], ["rm", "auth/x"]):
        p = run_cli(master, *cmd, env={"MOONCAKE_AUTH_TOKEN_FILE": str(bad)})
        assert p.returncode != 0
        assert "authentication failed" in p.stderr, p.stderr


def test_token_open_to_others_is_refused(pool, shared):
    master, tok = pool
    loose = token_file(shared / "loose", tok.read_text().strip(), 0o644)
    p = run_cli(master, "ls", env={"MOONCAKE_AUTH_TOKEN_FILE": str(loose)})
    assert p.returncode != 0
    assert "too open" in p.stderr and "chmod 600" in p.stderr, p.stderr


def test_unauthenticated_bodies_do_not_hold_the_budget(procs, tmp_path,
                                                      shared):
    """The master read a request's body before checking that the
    connection had authenticated: a few connections without the token,
    each holding a large request nearly sent, took the in-flight budget
    and the pool's own clients' requests failed (-900). Such a request is
    now refused without its body being kept."""
    import socket
    import struct
    tok = token_file(shared / "budget-token")
    m = Master(procs, tmp_path, "--rpc_max_inflight_bytes", "4MiB",
               token=tok, name="budget")
    held = []
    for i in range(8):
        s = socket.create_connection(("127.0.0.1", m.rpc_port), timeout=10)
        body = 1 << 20
        s.sendall(struct.pack("<4sBBHIIQ", b"MCR1", 1, 0, 30, body, 0,
                              i + 1) + b"\0" * (body - 100))
        held.append(s)
    try:
        env = {"MOONCAKE_AUTH_TOKEN_FILE": str(tok)}
        for _ in range(3):
            p = run_cli(m, "ls", env=env)
            assert p.returncode == 0, p.stderr
        assert "would exceed --rpc_max_inflight_bytes" not in m.log()
        # Each held connection was answered and closed.
        for s in held:
            s.settimeout(10)
            assert s.recv(64), "no answer before the close"
    finally:
        for s in held:
            s.close()


def test_member_with_an_unusable_token_file_exits_2(pool, shared):
    """mooncake_client took a token file it could not use (too open,
    missing) for the pool refusing it: exit 1 after a join attempt, with
    "No such file or directory (OBJECT_NOT_FOUND)". It is a configuration
    error, exit 2, before joining, as for the master and metad."""
    from pool import MEMBER
    master, tok = pool
    loose = token_file(shared / "loose-member", tok.read_text().strip(),
                       0o644)
    for path, needle in ((loose, "too open"),
                         (shared / "absent-token", "cannot open token file")):
        p = subprocess.run([binary(*MEMBER), "--master_server_address",
                            master.addr, "--auth_token_file", str(path),
                            "--global_segment_size", "16MiB", "--host",
                            "127.0.0.1"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, (path, p.returncode, p.stderr)
        assert needle in p.stderr and "cannot join" not in p.stderr, \
            p.stderr


def test_other_user_can_neither_read_the_token_nor_use_the_pool(
        procs, tmp_path, pool, shared):
    master, tok = pool
    sh = Shell(procs, tmp_path, master)
    sh.ok("put secret/k 4096 9")
    out = pathlib.Path(tempfile.mkdtemp(dir=shared))
    os.chmod(out, 0o777)
    p = subprocess.run(["cat", str(tok)], capture_output=True, text=True,
                       timeout=60, user=OTHER, group=OTHER, extra_groups=[])
    assert p.returncode != 0 and "Permission denied" in p.stderr
    ops = {"list": ["ls"], "status": ["status"], "info": ["info", "secret/k"],
           "read": ["get", "secret/k", str(out / "stolen")],
           "remove": ["--force", "rm", "secret/k"]}
    for what, cmd in ops.items():
        # With the owner's token file named: it cannot be read.
        p = run_cli(master, *cmd, user=OTHER,
                    env={"MOONCAKE_AUTH_TOKEN_FILE": str(tok)})
        assert p.returncode != 0, what
        assert "token file" in p.stderr and "Permission denied" in p.stderr, \
            f"{what}: {p.stderr}"
        # Without a token: the master refuses.
        p = run_cli(master, *cmd, user=OTHER)
        assert p.returncode != 0, what
        assert "authentication required" in p.stderr, f"{what}: {p.stderr}"
    assert not (out / "stolen").exists()
    # The admin port's key listing, as that user with curl.
    for path in ("/get_all_keys", "/query_key?key=secret/k"):
        r = subprocess.run(
            ["curl", "-sS", "-w", "\n%{http_code}",
             f"http://127.0.0.1:{master.admin_port}{path}"],
            capture_output=True, text=True, timeout=30 * SCALE, user=OTHER,
            group=OTHER, extra_groups=[])
        text, _, code = r.stdout.rpartition("\n")
        assert code == "401" and "authentication required" in text, r.stdout
        assert "secret/k" not in text
    sh.ok("check secret/k 4096 9")
    sh.close()


def test_token_against_a_master_without_one(procs, tmp_path, shared):
    master = Master(procs, tmp_path)
    tok = token_file(shared / "token")
    p = run_cli(master, "ls", env={"MOONCAKE_AUTH_TOKEN_FILE": str(tok)})
    assert p.returncode != 0
    assert "does not authenticate" in p.stderr, p.stderr
    assert run_cli(master, "ls").returncode == 0


def test_admin_http_requires_a_signature(procs, tmp_path, pool, shared):
    master, tok = pool
    sh = Shell(procs, tmp_path, master)
    sh.ok("put adm/k 1000 3")
    st, text = master.http("/get_all_keys")
    assert st == 200 and "adm/k" in text
    for path in ("/get_all_keys", "/get_all_segments", "/query_key?key=adm/k",
                 "/batch_query_keys?keys=adm/k", "/metrics/summary"):
        st, text = master.http(path, sign=False)
        assert st == 401 and "authentication required" in text, (path, text)
        assert "adm/k" not in text
    for path in ("/health", "/metrics"):
        st, text = master.http(path, sign=False)
        assert st == 200 and "adm/k" not in text
    # Another token, a stale timestamp, a signature for another path, a
    # replayed nonce: all refused.
    bad = mctest.auth_key(token_file(shared / "bad"))
    port = master.admin_port

    def get(path, auth):
        st, body, _ = request(port, "GET", path,
                              headers={"Authorization": auth})
        return st, body.decode()
    st, text = get("/get_all_keys", mctest.auth_sign(bad, "GET", "/get_all_keys"))
    assert st == 401 and "authentication failed" in text
    st, text = get("/get_all_keys", mctest.auth_sign(
        master.key, "GET", "/get_all_keys", ts=int(time.time()) - 600))
    assert st == 401 and "window" in text
    st, text = get("/get_all_keys", mctest.auth_sign(
        master.key, "GET", "/get_all_segments"))
    assert st == 401 and "authentication failed" in text
    auth = mctest.auth_sign(master.key, "GET", "/get_all_keys")
    assert get("/get_all_keys", auth)[0] == 200
    st, text = get("/get_all_keys", auth)
    assert st == 401 and "replayed" in text
    st, text = get("/get_all_keys", "Bearer " + tok.read_text().strip())
    assert st == 401 and "malformed" in text
    sh.close()


def meta_as(user, master, method, key, body=None):
    """An unsigned metadata request by another uid (curl): (status, text)."""
    url = f"{master.metadata}?key={urllib.parse.quote(key, safe='')}"
    args = ["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "-X", method,
            *(["--data-binary", body] if body is not None else []), url]
    r = subprocess.run(args, capture_output=True, text=True, timeout=30 * SCALE,
                       user=user, group=user, extra_groups=[])
    text, _, code = r.stdout.rpartition("\n")
    return int(code), text


def meta_signed(master, method, key, body=b""):
    target = f"/metadata?key={urllib.parse.quote(key, safe='')}"
    auth = mctest.auth_sign(master.key, method, target, body)
    st, data, _ = request(master.meta_port, method, target,
                          body=body or None, headers={"Authorization": auth})
    return st, data


def test_metadata_service_requires_a_signature(procs, tmp_path, pool):
    """Members registered (their engines signed their entries) and a
    transfer works; another user's unsigned rewrite of a member's rpc_meta
    or segment entry is refused and the entry is unchanged; unsigned reads
    are refused; /health stays open."""
    master, _ = pool
    sh = Shell(procs, tmp_path, master)
    sh.ok("put meta/k 200000 7")
    sh.ok("check meta/k 200000 7")
    names = master.segments()
    assert len(names) >= 2, names
    for name in names:
        for kind in ("rpc_meta", "ram"):
            key = f"mooncake/{kind}/{name}"
            st, before = meta_signed(master, "GET", key)
            assert st == 200, (key, st, before)
            evil = '{"ip_or_host_name":"10.6.6.6","rpc_port":1}'
            for method, body in (("PUT", evil), ("DELETE", None)):
                st, text = meta_as(OTHER, master, method, key, body)
                assert st == 401, (key, method, st, text)
                assert "authentication required" in text, text
            st, text = meta_as(OTHER, master, "GET", key)
            assert st == 401 and "authentication required" in text, text
            assert name not in text
            assert meta_signed(master, "GET", key) == (200, before)
    # Python's own unsigned requests, a wrong-path signature: refused.
    key = f"mooncake/rpc_meta/{names[0]}"
    st, _, _ = request(master.meta_port, "GET", "/metadata?key=" +
                       urllib.parse.quote(key, safe=""))
    assert st == 401
    auth = mctest.auth_sign(master.key, "GET", "/metadata?key=other")
    st, _, _ = request(master.meta_port, "GET", "/metadata?key=" +
                       urllib.parse.quote(key, safe=""),
                       headers={"Authorization": auth})
    assert st == 401
    assert request(master.meta_port, "GET", "/health")[0] == 200
    sh.ok("check meta/k 200000 7")
    sh.ok("rm meta/k force")
    sh.close()


def test_engine_without_the_token_says_the_metadata_needs_it(
        procs, tmp_path, pool, monkeypatch):
    """A transfer engine with no token is refused by the metadata service
    with a line naming what to set; with the token it registers."""
    master, tok = pool
    monkeypatch.delenv("MOONCAKE_AUTH_TOKEN_FILE")
    with pytest.raises(RuntimeError) as e:
        procs.start_te_client(tmp_path, master.metadata)
    msg = str(e.value)
    assert "metadata service requires authentication" in msg, msg
    assert "MOONCAKE_AUTH_TOKEN_FILE" in msg, msg
    monkeypatch.setenv("MOONCAKE_AUTH_TOKEN_FILE", str(tok))
    c = procs.start_te_client(tmp_path, master.metadata)
    assert c.quit() == 0


# Another user's attack on a member's ports, given what it could learn
# (the ports from /proc/net/tcp, an address by guessing): a WRITE and a
# READ (version 2 and upstream's version 1) through the data port, and
# Metadata, Notify and a forged authentication on the handshake port.
ATTACK = r"""
import json, socket, struct, sys
host, dport, rport, addr, size = sys.argv[1], *map(int, sys.argv[2:])

def recv_n(s, n):
    got = b""
    try:
        while len(got) < n:
            b = s.recv(n - len(got))
            if not b:
                break
            got += b
    except OSError:
        pass
    return got

def data(op, v2, payload=b""):
    s = socket.create_connection((host, dport), timeout=10)
    try:
        s.sendall(struct.pack("<QQB7x", size, addr, op | (0x80 if v2 else 0))
                  + payload)
    except OSError:
        pass
    got = recv_n(s, 8)
    s.close()
    if len(got) < 8:
        return "closed"
    v = struct.unpack("<Q", got)[0]
    return v & 0xffffffff if v >> 32 == 0x4D435456 else "garbage"

def data_forged():
    # The data port's authentication with a made-up proof.
    s = socket.create_connection((host, dport), timeout=10)
    s.sendall(struct.pack("<QQB7x", 32, 1, 2 | 0x80) + b"\xab" * 32)
    first, challenge = recv_n(s, 8), recv_n(s, 64)
    s.sendall(b"\xcd" * 32)
    last = recv_n(s, 8)
    s.close()
    code = lambda b: (struct.unpack("<Q", b)[0] & 0xffffffff
                      if len(b) == 8 else "closed")
    return [code(first), len(challenge), code(last)]

def hs(*frames):
    s = socket.create_connection((host, rport), timeout=10)
    replies = []
    for t, body in frames:
        s.sendall(struct.pack("<QB", len(body) + 1, t) + body)
        n = recv_n(s, 8)
        if len(n) < 8:
            replies.append(None)
            break
        rest = recv_n(s, struct.unpack("<Q", n)[0])
        replies.append([rest[0], json.loads(rest[1:])])
    s.close()
    return replies

print(json.dumps({
    "write_v2": data(1, True, b"X" * size),
    "read_v2": data(0, True),
    "write_v1": data(1, False, b"Y" * size),
    "data_forged": data_forged(),
    "metadata": hs((1, b"{}")),
    "notify": hs((2, b'{"name":"evil","notify_msg":"x"}')),
    "forged": hs((16, b'{"nonce":"' + b"ab" * 32 + b'"}'),
                 (16, b'{"proof":"' + b"cd" * 32 + b'"}')),
}))
"""


def meta_get(master, key):
    target = f"/metadata?key={urllib.parse.quote(key, safe='')}"
    headers = ({"Authorization": mctest.auth_sign(master.key, "GET", target)}
               if master.key else {})
    st, data, _ = request(master.meta_port, "GET", target, headers=headers)
    assert st == 200, (key, st, data)
    return json.loads(data)


def attack(master, key, user):
    """Locate key's replica (as the owner) and attack its member as user."""
    st, text = master.http(f"/query_key?key={key}")
    assert st == 200, text
    rep = json.loads(text)["data"][0]
    member = rep["transport_endpoint_"]
    rpc = meta_get(master, f"mooncake/rpc_meta/{member}")
    desc = meta_get(master, f"mooncake/ram/{member}")
    kw = dict(user=user, group=user, extra_groups=[]) if user else {}
    p = subprocess.run(["/usr/bin/python3", "-c", ATTACK,
                        rpc["ip_or_host_name"], str(desc["tcp_data_port"]),
                        str(rpc["rpc_port"]), str(rep["buffer_address_"]),
                        str(rep["size_"])],
                       capture_output=True, text=True, timeout=60 * SCALE, **kw)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_without_a_token_the_data_port_attack_works(procs, tmp_path):
    """The control: on a pool without a token, another user's WRITE through
    a member's data port replaces the object's bytes, and the handshake
    hands out the member's descriptor. (What the next test refuses.)"""
    master = Master(procs, tmp_path)
    Member(procs, tmp_path, master)
    eventually(lambda: len(master.segments()) == 1, what="1 segment")
    sh = Shell(procs, tmp_path, master)
    sh.ok("put open/k 4096 5")
    sh.ok("check open/k 4096 5")
    r = attack(master, "open/k", OTHER)
    assert r["write_v2"] == 0 and r["read_v2"] == 0, r
    assert r["metadata"][0][1]["tcp_data_port"] > 0, r
    assert sh.cmd("check open/k 4096 5").startswith("mismatch"), \
        "the bytes were not replaced"
    sh.close()


def test_other_user_cannot_use_the_engines_ports(procs, tmp_path, pool):
    """With the token, every step of the attack is refused with a reason,
    the object's bytes are intact, and the owner's transfers still work;
    the members log the refusals."""
    master, tok = pool
    sh = Shell(procs, tmp_path, master)
    sh.ok("put sealed/k 4096 5")
    r = attack(master, "sealed/k", OTHER)
    # Data port: 2 = authentication required, then closed; version 1
    # (upstream's) is closed without a word.
    assert r["write_v2"] == 2 and r["read_v2"] == 2, r
    assert r["write_v1"] == "closed", r
    # A made-up proof on the data port: a challenge, then 3 (failed).
    assert r["data_forged"] == [0, 64, 3], r
    # Handshake: refusals of the request's own type, upstream's reply_msg
    # saying why, and no descriptor.
    for what in ("metadata", "notify"):
        (t, body), = r[what]
        assert body["mc_error"] == -4019, r
        assert "authentication required" in body["reply_msg"], r
        assert "MOONCAKE_AUTH_TOKEN_FILE" in body["reply_msg"], r
        assert "tcp_data_port" not in body and "buffers" not in body
    # A forged proof: the member answers its challenge, then refuses.
    (t1, challenge), (t2, refusal) = r["forged"]
    assert t1 == t2 == 16 and "proof" in challenge, r
    assert refusal["mc_error"] == -4020, r
    assert "authentication failed" in refusal["reply_msg"], r
    sh.ok("check sealed/k 4096 5")
    sh.ok("put sealed/k2 300000 6")
    sh.ok("check sealed/k2 300000 6")
    logs = "".join(open(p, errors="replace").read()
                   for p in tmp_path.glob("member*.log"))
    assert "refused data connection" in logs and "not authenticated" in logs
    assert "failed to prove" in logs
    sh.close()


def test_idle_data_connections_cannot_take_every_descriptor(
        procs, tmp_path, shared, monkeypatch):
    """Connections to a member's data port that never authenticate (anyone
    who can connect) held a thread and a descriptor each, without bound:
    with its descriptor limit at 256, 300 of them (re-opened when closed)
    left the member unable to accept its own clients, and the owner's
    reads failed. Past half its descriptor limit (MC_TCP_MAX_CONNS) a
    newcomer now closes the oldest unauthenticated one."""
    import resource
    import socket
    import threading
    tok = token_file(shared / "token")
    m = Master(procs, tmp_path, token=tok)
    member = Member(procs, tmp_path, m, extra=("--auth_token_file", str(tok)))
    monkeypatch.setenv("MOONCAKE_AUTH_TOKEN_FILE", str(tok))
    eventually(lambda: len(m.segments()) == 1, what="1 segment")
    sh = Shell(procs, tmp_path, m)
    sh.ok("put cap/k 65536 5")
    resource.prlimit(member.proc.pid, resource.RLIMIT_NOFILE, (256, 256))
    desc = meta_get(m, f"mooncake/ram/{member.name}")
    port = desc["tcp_data_port"]
    stop = threading.Event()
    socks = []

    def flood():
        while not stop.is_set():
            socks[:] = [s for s in socks if s.fileno() >= 0]
            while len(socks) < 300 and not stop.is_set():
                try:
                    socks.append(socket.create_connection(
                        ("127.0.0.1", port), timeout=2))
                except OSError:
                    break
            for s in list(socks):
                s.setblocking(False)
                try:
                    if s.recv(1) == b"":
                        s.close()
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
            time.sleep(0.05)
    th = threading.Thread(target=flood)
    th.start()
    try:
        time.sleep(3)
        for i in range(3):
            p = run_cli(m, "get", "cap/k", str(tmp_path / f"out{i}"),
                        env={"MOONCAKE_AUTH_TOKEN_FILE": str(tok),
                             "MC_FORCE_TCP": "1"})
            assert p.returncode == 0, p.stderr
            assert (tmp_path / f"out{i}").stat().st_size == 65536
    finally:
        stop.set()
        th.join()
        for s in socks:
            s.close()
    assert "data connections at once" in member.log(), member.log()[-3000:]
    sh.close()
