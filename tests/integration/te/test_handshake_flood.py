# SPDX-License-Identifier: Apache-2.0
"""Idle connections to an engine's handshake port (authentication on):
the listener served one connection at a time, each given 2 s to send its
request, so 4 connections that sent nothing, opened again whenever
closed, held every Metadata, Probe and Notify request of the legitimate
engines (an open failed after 5 s). Connections are now served each on
its own thread; at the bound, a newcomer closes the one that got least far
(sent nothing first), never one that authenticated."""
import os
import secrets
import socket
import struct
import threading
import time

from mctest import SCALE


def token(tmp_path):
    path = tmp_path / "token"
    path.write_text(secrets.token_hex(32) + "\n")
    os.chmod(path, 0o600)
    return {"MOONCAKE_AUTH_TOKEN_FILE": str(path)}


class Idlers:
    """n connections to addr that send nothing; each is opened again
    pause seconds after the listener closed it."""

    def __init__(self, addr, n, pause=0.0):
        self.addr = addr
        self.pause = pause
        self.stop = threading.Event()
        self.opened = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.hold) for _ in range(n)]
        for t in self.threads:
            t.start()

    def hold(self):
        while not self.stop.is_set():
            try:
                s = socket.create_connection(self.addr, timeout=5)
            except OSError:
                self.stop.wait(0.05)
                continue
            with self.lock:
                self.opened += 1
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         struct.pack("ii", 1, 0))  # no TIME_WAIT
            s.settimeout(0.2)
            try:
                while not self.stop.is_set():
                    try:
                        if not s.recv(1):
                            break  # closed by the listener
                    except socket.timeout:
                        pass
            except OSError:
                pass
            finally:
                s.close()
            self.stop.wait(self.pause)

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join()


def served_despite(procs, tmp_path, n, pause=0.0):
    """Fresh engines open a peer (Metadata), read from it and notify it,
    each within a few seconds, while n idle connections are held against
    its handshake port; the peer."""
    tok = token(tmp_path)
    peer = procs.start_te_peer(tmp_path, "P2PHANDSHAKE", size="1M", seed=7,
                               env=tok)
    ip, port = peer.rpc.rsplit(":", 1)
    idlers = Idlers((ip, int(port)), n, pause)
    try:
        time.sleep(0.5)  # all of them connected
        for i in range(3):
            start = time.monotonic()
            c = procs.start_te_client(tmp_path, "P2PHANDSHAKE", env=tok)
            c.ok(f"open {peer.name}")
            c.ok(f"run b {peer.name} read {peer.addr} 4096 4")
            assert c.ok(f"check b {peer.seed} {peer.addr}")["checked"] == "4"
            c.ok(f"notify {peer.name} flood hello-{i}")
            assert c.quit() == 0
            took = time.monotonic() - start
            # Before, the open alone failed after 5 s.
            assert took < 10 * SCALE, took
        assert idlers.opened >= n
    finally:
        idlers.end()
    assert peer.stop() == 0, peer.log()
    return peer


def test_idle_connections_hold_no_one_else(procs, tmp_path):
    """16 idle connections: fewer than the listener serves at once."""
    served_despite(procs, tmp_path, 16)


def test_more_idle_connections_than_served_at_once(procs, tmp_path):
    """80 idle connections, more than the 64 served at once: a newcomer
    closes the oldest that sent nothing (said in the log, not for each)."""
    peer = served_despite(procs, tmp_path, 80, pause=0.2)
    log = peer.log()
    assert "had not authenticated (or sent a request) for newer" in log, log
    assert log.count("had not authenticated") < 10, log
