# SPDX-License-Identifier: Apache-2.0
"""Bad input gets a clear 4xx (or a closed connection), loses nothing, and
the server keeps serving everyone else, including an idle keep-alive
client that was connected all along."""
import http.client
import socket

import pytest

from mctest import SCALE, curl, raw, request


@pytest.fixture
def bystander(metad):
    """A keep-alive connection opened before the abuse and used after."""
    c = http.client.HTTPConnection("127.0.0.1", metad.port, timeout=10 * SCALE)
    c.request("PUT", "/metadata?key=bystander", body=b'{"ok":true}')
    r = c.getresponse()
    assert r.status == 200
    r.read()
    yield c
    c.request("GET", "/metadata?key=bystander")
    r = c.getresponse()
    assert (r.status, r.read()) == (200, b'{"ok":true}')
    c.close()


def status_of(resp):
    line = resp.split(b"\r\n", 1)[0]
    return int(line.split()[1]) if line.startswith(b"HTTP/1.1") else None


@pytest.mark.parametrize("query", ["", "?", "?key", "?key=", "?k=v",
                                   "?key=a&key=b"])
def test_missing_or_repeated_key(metad, bystander, query):
    status, body, _ = request(metad.port, "GET", "/metadata" + query)
    assert status == 400
    assert body


@pytest.mark.parametrize("key", ["%", "%2", "%zz", "a%g1", "%00", "abc%"])
def test_malformed_escapes(metad, bystander, key):
    for method in ("GET", "PUT", "DELETE"):
        status, body, _ = request(metad.port, method, "/metadata?key=" + key,
                                  body=b"{}" if method == "PUT" else None)
        assert status == 400, (method, key)
        assert b"malformed" in body


def test_key_too_long(metad, bystander):
    status, body, _ = request(metad.port, "PUT", "/metadata?key=" + "k" * 5000,
                              body=b"{}")
    assert status == 400 and b"too long" in body
    status, _, _ = request(metad.port, "PUT", "/metadata?key=" + "k" * 4096,
                           body=b"{}")
    assert status == 200


def test_oversized_body_is_413_and_not_stored(metad, bystander, tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"x" * (1024 * 1024 + 1))
    # curl waits for "100 Continue", so it reads the early 413 cleanly.
    code, body = curl("-X", "PUT", "--data-binary", f"@{big}",
                      f"{metad.url}?key=big")
    assert code == 413 and b"too large" in body
    # A declared length over the limit is refused before any body is read.
    resp = raw(metad.port, b"PUT /metadata?key=big HTTP/1.1\r\nHost: x\r\n"
               b"Content-Length: 99999999\r\n\r\n", shut=False)
    assert status_of(resp) == 413
    # A client that pushes the body anyway sees 413 or a closed connection.
    status, _, _ = request(metad.port, "PUT", "/metadata?key=big",
                           body=big.read_bytes())
    assert status in (413, None)
    assert request(metad.port, "GET", "/metadata?key=big")[0] == 404
    # Exactly the limit is fine.
    ok = b"y" * (1024 * 1024)
    assert request(metad.port, "PUT", "/metadata?key=big", body=ok)[0] == 200
    assert request(metad.port, "GET", "/metadata?key=big")[1] == ok


def test_oversized_chunked_body(metad, bystander):
    chunk = b"z" * 65536
    payload = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk)
                       for _ in range(20)) + b"0\r\n\r\n"
    resp = raw(metad.port, b"PUT /metadata?key=chunky HTTP/1.1\r\n"
               b"Host: x\r\nTransfer-Encoding: chunked\r\n\r\n" + payload)
    assert resp == b"" or status_of(resp) == 413
    assert request(metad.port, "GET", "/metadata?key=chunky")[0] == 404


@pytest.mark.parametrize("method", ["POST", "PATCH", "OPTIONS", "FOO"])
def test_unsupported_methods(metad, bystander, method):
    status, _, headers = request(metad.port, method, "/metadata?key=a")
    assert status == 405
    assert headers.get("Allow") == "GET, HEAD, PUT, DELETE"


def test_disconnect_mid_body(metad, bystander):
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", metad.port))
        s.sendall(b"PUT /metadata?key=half HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: 1000\r\n\r\n" + b"a" * 10)
        s.close()
    assert request(metad.port, "GET", "/metadata?key=half")[0] == 404
    assert request(metad.port, "GET", "/health")[0] == 200


GARBAGE = {
    "binary": b"\x00\x01\x02garbage\r\n\r\n",
    "no-target": b"GET\r\n\r\n",
    "bad-version": b"GET /metadata?key=a HTTP/9.9\r\n\r\n",
    "negative-length": b"PUT /metadata?key=a HTTP/1.1\r\n"
                       b"Content-Length: -5\r\n\r\n",
    "text-length": b"PUT /metadata?key=a HTTP/1.1\r\n"
                    b"Content-Length: zz\r\n\r\n",
    "huge-header": b"GET /metadata?key=a HTTP/1.1\r\nX: " + b"h" * 70000
                   + b"\r\n\r\n",
}


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_garbage_requests(metad, bystander, name):
    # A 4xx (or 505), a closed connection, or (libmicrohttpd on some binary input)
    # silence until its idle timeout; never a 2xx, never a dead server.
    resp = raw(metad.port, GARBAGE[name], timeout=2)
    st = status_of(resp)
    assert st is None or 400 <= st < 500 or st == 505, resp[:200]
    assert request(metad.port, "GET", "/metadata?key=a")[0] == 404
    assert request(metad.port, "GET", "/health")[0] == 200


@pytest.mark.parametrize("target", [b"/metadata?key=a\x00b",
                                    b"/metadata?key=a\x00",
                                    b"/metadata\x00?key=a"])
def test_raw_nul_in_target_is_400(metad, bystander, target):
    """A NUL byte sent as is (not %00) in the request target: the whole
    request is refused, and nothing is stored under the bytes before it."""
    for method in (b"PUT", b"GET", b"DELETE"):
        body = b"{}" if method == b"PUT" else b""
        resp = raw(metad.port, method + b" " + target + b" HTTP/1.1\r\n"
                   b"Host: x\r\nContent-Length: %d\r\n\r\n" % len(body)
                   + body)
        assert status_of(resp) == 400, (method, target, resp[:200])
    assert request(metad.port, "GET", "/metadata?key=a")[0] == 404


@pytest.mark.parametrize("lengths", [(b"2", b"40"), (b"40", b"2"),
                                     (b"2", b"2"), (b"2, 40",), (b"+2",),
                                     (b"2 2",)])
def test_ambiguous_content_length_is_400(metad, bystander, lengths):
    """RFC 9112, 6.3: two Content-Length headers (even equal ones), or one
    that is not a decimal number, make the body's length ambiguous: 400
    and the connection closed, nothing stored, and the bytes that one
    reading would take for a second request are never served. (A single
    malformed value is libmicrohttpd's own 400.)"""
    smuggled = b"DELETE /metadata?key=bystander HTTP/1.1\r\nHost: x\r\n\r\n"
    headers = b"".join(b"Content-Length: %s\r\n" % v for v in lengths)
    resp = raw(metad.port, b"PUT /metadata?key=cl HTTP/1.1\r\nHost: x\r\n"
               + headers + b"\r\n{}" + smuggled)
    assert status_of(resp) == 400, resp[:300]
    assert b"metadata" not in resp, resp  # no answer to the DELETE
    assert request(metad.port, "GET", "/metadata?key=cl")[0] == 404
    # One Content-Length still works.
    resp = raw(metad.port, b"PUT /metadata?key=cl HTTP/1.1\r\nHost: x\r\n"
               b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")
    assert status_of(resp) == 200, resp[:300]


def test_slow_request_is_cut_at_its_deadline(procs, tmp_path, monkeypatch):
    """A client sending one header line at a time never went idle long
    enough for the idle timeout: a thousand of them held every slot
    (slowloris). A request must now arrive whole within its deadline
    (MC_HTTP_REQUEST_DEADLINE_MS, 30 s by default; 2 s here)."""
    import select
    import time
    monkeypatch.setenv("MC_HTTP_REQUEST_DEADLINE_MS", "2000")
    d = procs.start_metad(tmp_path, name="slow")
    s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    s.sendall(b"GET /metadata?key=x HTTP/1.1\r\nHost: a\r\n")
    closed = False
    end = time.monotonic() + 20 * SCALE
    try:
        while not closed and time.monotonic() < end:
            try:
                s.sendall(b"X-Drip: 1\r\n")
            except OSError:
                closed = True
                break
            if select.select([s], [], [], 0.5)[0]:
                closed = s.recv(4096) == b""
    except ConnectionResetError:
        closed = True
    finally:
        s.close()
    assert closed, "the dripping request was never cut"
    # The same on a keep-alive connection's second request, dripped
    # before its request line is even whole.
    s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n")
    assert s.recv(4096).startswith(b"HTTP/1.1 200")
    closed = False
    end = time.monotonic() + 20 * SCALE
    try:
        for ch in b"GET /metadata?key=x HTTP/1.1\r\n" * 100:
            if time.monotonic() > end:
                break
            try:
                s.sendall(bytes([ch]))
            except OSError:
                closed = True
                break
            if select.select([s], [], [], 0.3)[0]:
                if s.recv(4096) == b"":
                    closed = True
                    break
    except ConnectionResetError:
        closed = True
    finally:
        s.close()
    assert closed, "a dripping second request was never cut"
    assert request(d.port, "GET", "/health")[0] == 200
    assert "did not send a whole request within 2 s" in \
        open(d.log_path).read()
