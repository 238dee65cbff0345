# SPDX-License-Identifier: Apache-2.0
"""mooncake_metad with the pool's token (issue 16): every /metadata request
must be signed (docs/wire-protocol.md, "HTTP authentication"), else 401
with a one-line reason; /health stays open. Transfer engines holding the
token (MOONCAKE_AUTH_TOKEN_FILE) register and transfer through it; one
without it is told what to set; another local user can neither rewrite
nor read an engine's entries. Without a token nothing changes."""
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
from mctest import SCALE, request

OTHER = 54322


@pytest.fixture
def shared():
    base = pathlib.Path(tempfile.mkdtemp(prefix="mc-metad-auth-"))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def token_file(path, mode=0o600):
    path.write_text(secrets.token_hex(32) + "\n")
    os.chmod(path, mode)
    return path


def target(key):
    return "/metadata?key=" + urllib.parse.quote(key, safe="")


def signed(d, key_, method, key, body=b"", **kw):
    t = target(key)
    auth = mctest.auth_sign(key_, method, t, body, **kw)
    st, data, _ = request(d.port, method, t, body=body or None,
                          headers={"Authorization": auth})
    return st, data.decode(errors="replace")


@pytest.fixture
def authd(procs, tmp_path, shared):
    tok = token_file(shared / "token")
    d = procs.start_metad(tmp_path, "--auth_token_file", str(tok))
    return d, tok, mctest.auth_key(tok)


def test_unsigned_requests_are_refused(authd, shared):
    d, tok, key = authd
    assert signed(d, key, "PUT", "k", b'{"a":1}') == (200, "metadata updated")
    for method, body in (("GET", None), ("PUT", b"{}"), ("DELETE", None),
                         ("HEAD", None)):
        st, text, _ = request(d.port, method, target("k"), body=body)
        assert st == 401, (method, st)
        if method != "HEAD":
            assert b"authentication required" in text, text
            assert text.count(b"\n") == 1, text
    assert signed(d, key, "GET", "k") == (200, '{"a":1}')
    bad = mctest.auth_key(token_file(shared / "bad"))
    st, text = signed(d, bad, "PUT", "k", b"{}")
    assert st == 401 and "authentication failed" in text, text
    st, text = signed(d, key, "GET", "k", ts=int(time.time()) - 600)
    assert st == 401 and "window" in text, text
    nonce = secrets.token_hex(16)
    assert signed(d, key, "GET", "k", nonce=nonce)[0] == 200
    st, text = signed(d, key, "GET", "k", nonce=nonce)
    assert st == 401 and "replayed" in text, text
    st, text, _ = request(d.port, "GET", target("k"), headers={
        "Authorization": "Bearer " + tok.read_text().strip()})
    assert st == 401 and b"malformed" in text, text
    assert request(d.port, "GET", "/health")[0] == 200
    assert signed(d, key, "GET", "k") == (200, '{"a":1}')
    assert "authentication on" in d.log()


def test_token_by_environment_and_config(procs, tmp_path, shared):
    tok = token_file(shared / "token")
    key = mctest.auth_key(tok)
    cfg = tmp_path / "metad.json"
    cfg.write_text(json.dumps({"auth_token_file": str(tok)}))
    d = procs.start_metad(tmp_path, "--config_path", str(cfg), name="cfg")
    assert request(d.port, "GET", target("k"))[0] == 401
    assert signed(d, key, "GET", "k")[0] == 404
    os.environ["MOONCAKE_AUTH_TOKEN_FILE"] = str(tok)
    try:
        e = procs.start_metad(tmp_path, name="env")
    finally:
        del os.environ["MOONCAKE_AUTH_TOKEN_FILE"]
    assert request(e.port, "GET", target("k"))[0] == 401
    assert signed(e, key, "GET", "k")[0] == 404


def test_token_open_to_others_is_refused(procs, tmp_path, shared):
    tok = token_file(shared / "loose", 0o644)
    with pytest.raises(RuntimeError) as e:
        procs.start_metad(tmp_path, "--auth_token_file", str(tok))
    assert "too open" in str(e.value), str(e.value)


def test_engines_sign_and_transfer(procs, tmp_path, authd, monkeypatch):
    """Engines with the token register and transfer; another user's
    unsigned rewrite or read of their entries is refused, unchanged."""
    d, tok, key = authd
    monkeypatch.setenv("MOONCAKE_AUTH_TOKEN_FILE", str(tok))
    p = procs.start_te_peer(tmp_path, d.url, name="127.0.0.1:31501", seed=5)
    c = procs.start_te_client(tmp_path, d.url, "--transport", "tcp")
    c.ok(f"open {p.name}")
    st, _ = c.transfer("a", p.name, "read", p.addr, 4096, 4)
    assert st["completed"] == "4", st
    assert c.ok(f"check a {p.seed} {p.addr}")["checked"] == "4"
    assert c.ok("destroy a")["rc"] == "0"
    for kind in ("rpc_meta", "ram"):
        k = f"mooncake/{kind}/{p.name}"
        st, before = signed(d, key, "GET", k)
        assert st == 200, (k, st, before)
        url = d.url + "?key=" + urllib.parse.quote(k, safe="")
        for args in (["-X", "PUT", "--data-binary",
                      '{"ip_or_host_name":"10.6.6.6","rpc_port":1}'],
                     ["-X", "DELETE"], ["-X", "GET"]):
            r = subprocess.run(
                ["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", *args,
                 url], capture_output=True, text=True, timeout=30 * SCALE,
                user=OTHER, group=OTHER, extra_groups=[])
            text, _, code = r.stdout.rpartition("\n")
            assert code == "401", (k, args, r.stdout, r.stderr)
            assert "authentication required" in text and "10.6" not in text
        assert signed(d, key, "GET", k) == (200, before)
    st, _ = c.transfer("b", p.name, "read", p.addr, 4096, 2)
    assert st["completed"] == "2", st
    assert c.ok("destroy b")["rc"] == "0"
    assert c.quit() == 0


def test_engine_without_the_token_is_told(procs, tmp_path, authd,
                                          monkeypatch):
    d, _, _ = authd
    monkeypatch.delenv("MOONCAKE_AUTH_TOKEN_FILE", raising=False)
    with pytest.raises(RuntimeError) as e:
        procs.start_te_client(tmp_path, d.url)
    msg = str(e.value)
    assert "metadata service requires authentication" in msg, msg
    assert "MOONCAKE_AUTH_TOKEN_FILE" in msg, msg


def test_without_a_token_unsigned_clients_work(procs, tmp_path, metad,
                                               monkeypatch, shared):
    """Upstream-compatible: no token, unsigned requests served; an engine
    that signs anyway is served too."""
    assert request(metad.port, "PUT", target("u"), body=b"{}")[0] == 200
    assert request(metad.port, "GET", target("u"))[:2] == (200, b"{}")
    tok = token_file(shared / "token")
    monkeypatch.setenv("MOONCAKE_AUTH_TOKEN_FILE", str(tok))
    c = procs.start_te_client(tmp_path, metad.url)
    assert c.quit() == 0


def test_signed_c_client_under_concurrency(authd, monkeypatch):
    """8 threads of the C client (libte/meta/meta_http.c), each request
    signed with a fresh nonce: no error, every write accounted for; the
    same client unsigned is refused with the reason."""
    d, tok, _ = authd
    monkeypatch.delenv("MOONCAKE_AUTH_TOKEN_FILE", raising=False)
    r = mctest.cli(d.url, "get", "stress/x")
    assert r.returncode == 1, r
    err = r.stderr.decode()
    assert "metadata service requires authentication" in err, err
    monkeypatch.setenv("MOONCAKE_AUTH_TOKEN_FILE", str(tok))
    r = mctest.cli(d.url, "stress", "8", "500", timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    summary = json.loads(r.stdout)
    assert summary["errors"] == 0 and summary["final_mismatches"] == 0
