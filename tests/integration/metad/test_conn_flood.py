# SPDX-License-Identifier: Apache-2.0
"""Idle connections held by someone without the token (connect, send
nothing, reconnect when closed) do not keep anyone else out of the HTTP
services. The library refused new connections at its limit (1024) and an
idle connection was closed only at its request deadline (30 s), so ~1100
of them, re-opened at once, made signed metadata requests and /health
time out. A new connection beyond the limit now closes the one that has
waited longest for a request, as the RPC server does, and says so in the
log (at most every 10 s)."""
import resource
import selectors
import socket
import threading
import time
import urllib.parse

import pytest

import mctest
from mctest import SCALE, request

FLOOD = 1100


class Flood:
    """FLOOD idle connections to port, each re-opened when closed."""

    def __init__(self, port, n):
        self.port = port
        self.sel = selectors.DefaultSelector()
        self.stop = threading.Event()
        self.reopened = 0
        for _ in range(n):
            self._open()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _open(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass  # completes (or fails) later; either way we hear of it
        except OSError:
            pass  # refused: seen as readable below, and re-opened
        self.sel.register(s, selectors.EVENT_READ)

    def _run(self):
        while not self.stop.is_set():
            for key, _ in self.sel.select(0.2):
                s = key.fileobj
                try:
                    if s.recv(4096):
                        continue  # an answer: keep holding it
                except BlockingIOError:
                    continue
                except OSError:
                    pass
                self.sel.unregister(s)
                s.close()
                self.reopened += 1
                self._open()

    def close(self):
        self.stop.set()
        self.thread.join(10)
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()
        self.sel.close()


@pytest.fixture
def nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = FLOOD + 512
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"descriptor hard limit {hard} < {want}")
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_idle_connection_flood_does_not_lock_clients_out(procs, tmp_path,
                                                         nofile):
    tok = tmp_path / "token"
    tok.write_text("f" * 64 + "\n")
    tok.chmod(0o600)
    d = procs.start_metad(tmp_path, "--auth_token_file", str(tok))
    key = mctest.auth_key(tok)

    def signed(method, k, body=b""):
        t = "/metadata?key=" + urllib.parse.quote(k, safe="")
        auth = mctest.auth_sign(key, method, t, body)
        t0 = time.monotonic()
        st, data, _ = request(d.port, method, t, body=body or None,
                              headers={"Authorization": auth},
                              timeout=10)
        return st, data, time.monotonic() - t0

    flood = Flood(d.port, FLOOD)
    try:
        time.sleep(2)  # the flood is in place, and re-opening
        for i in range(5):
            val = b'{"i":%d}' % i
            st, body, took = signed("PUT", f"k{i}", val)
            assert st == 200, (i, st, body, took)
            st, body, took = signed("GET", f"k{i}")
            assert (st, body) == (200, val), (i, st, body, took)
            t0 = time.monotonic()
            st, body, _ = request(d.port, "GET", "/health", timeout=10)
            assert st == 200, (i, st, body, time.monotonic() - t0)
        assert flood.reopened > 0  # the flood's connections were closed
    finally:
        flood.close()
    log = open(d.log_path).read()
    assert "waiting" in log and "for a request" in log, log[-2000:]
    # Served as before once the flood is gone.
    mctest.wait_for(lambda: request(d.port, "GET", "/health")[0] == 200,
                    timeout=20 * SCALE, what="metad serving after the flood")
    assert signed("GET", "k0")[:2] == (200, b'{"i":0}')


def test_many_query_parameters_are_answered(metad):
    """A request whose query holds more parameters than libmicrohttpd's
    per-connection memory takes got no answer until its deadline (30 s):
    now a 4xx at once (or an answer), and the server serves on."""
    q = "&".join(f"p{i}=v" for i in range(2000))
    t0 = time.monotonic()
    st, body, _ = request(metad.port, "GET", "/metadata?key=a&" + q,
                          timeout=10)
    assert st is not None and 400 <= st < 500, (st, body)
    assert time.monotonic() - t0 < 10 * SCALE
    assert request(metad.port, "GET", "/health")[0] == 200
