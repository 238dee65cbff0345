# SPDX-License-Identifier: Apache-2.0
"""The transfer engine's contract (include/mooncake/te.h), transport by
transport: tests/tools/te_conformance drives an engine pinned to one
transport against a te_peer (or, for "local", against itself) and checks
data byte for byte, batch semantics, refusals and the counters. The mode
p2p_tcp_auth runs the TCP cases with both engines holding the pool's
token (every handshake and data connection authenticated)."""
import json
import os
import secrets
import subprocess

import pytest

from mctest import (SANITIZER_MARKERS, SCALE, TE_CONFORMANCE, binary, te_env,
                    wait_for)

CASES = ["sizes", "write_read", "batches", "threads", "refusals", "enotreg",
         "e2big", "busy", "wait", "notify", "integrity"]
# Big enough for the 64 MiB case at an unaligned offset.
PEER_SIZE = 72 << 20
# _in_call: every transfer through te_batch_transfer (submit and wait in
# one call: tcp carries it on the calling thread when a lane is idle).
MODES = ["tcp", "shm", "local", "p2p_tcp", "p2p_tcp_auth", "tcp_in_call",
         "p2p_tcp_auth_in_call"]
SEEDS = {"tcp": 101, "shm": 202, "local": 303, "p2p_tcp": 404,
         "p2p_tcp_auth": 505, "tcp_in_call": 606,
         "p2p_tcp_auth_in_call": 707}


def token_env(tmp_path, mode):
    """MOONCAKE_AUTH_TOKEN_FILE for an _auth mode (a fresh 0600 token)."""
    if not mode.removesuffix("_in_call").endswith("_auth"):
        return None
    tok = tmp_path / "token"
    if not tok.exists():
        tok.write_text(secrets.token_hex(32) + "\n")
        os.chmod(tok, 0o600)
    return {"MOONCAKE_AUTH_TOKEN_FILE": str(tok)}


def start_target(procs, tmp_path, mode):
    """(metadata connection string, transport, te_peer or None)."""
    transport = "tcp" if mode.startswith(("p2p_tcp", "tcp")) else mode
    if mode.startswith("p2p_tcp"):
        metadata = "P2PHANDSHAKE"
    else:
        metadata = procs.start_metad(tmp_path).url
    peer = None
    if transport != "local":
        peer = procs.start_te_peer(tmp_path, metadata, name="127.0.0.1:29000",
                                   size=PEER_SIZE, shm=transport == "shm",
                                   seed=SEEDS[mode],
                                   env=token_env(tmp_path, mode))
    return metadata, transport, peer


def run_conformance(procs, metadata, transport, seed, peer=None, cases="all",
                    name="127.0.0.1:29001", env=None, in_call=False):
    cmd = [binary(*TE_CONFORMANCE), "--metadata", metadata, "--transport",
           transport, "--seed", str(seed), "--name", name, "--timeout_ms",
           "20000", "--case", cases, "--report_counters"] + \
        (["--wait_in_call"] if in_call else [])
    if peer is not None:
        cmd += ["--target", peer.name, "--target_addr", str(peer.addr),
                "--target_size", str(peer.size)]
    p = procs.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True, env=te_env(env))
    out, err = p.communicate(timeout=240 * SCALE)
    return p.returncode, out, err


def check_output(rc, out, err, mode, cases):
    for marker in SANITIZER_MARKERS:
        assert marker not in err, err
    missing = [c for c in cases
               if not any(line.startswith(f"ok {c} ")
                          for line in out.splitlines())]
    assert rc == 0 and not missing, (
        f"{mode}: exit {rc}, cases not ok: {missing}\n{out}\n{err}")


@pytest.mark.parametrize("mode", MODES)
def test_conformance(procs, tmp_path, mode):
    metadata, transport, peer = start_target(procs, tmp_path, mode)
    rc, out, err = run_conformance(procs, metadata, transport, SEEDS[mode],
                                   peer, cases=",".join(CASES),
                                   env=token_env(tmp_path, mode),
                                   in_call=mode.endswith("_in_call"))
    check_output(rc, out, err, mode, CASES)
    # Requests carried on the calling thread: only through
    # te_batch_transfer (calls too large for one lane, or finding no
    # idle connected lane, go through the lanes' threads).
    counters = {ln.split()[1]: json.loads(ln.split(" ", 2)[2])
                for ln in out.splitlines() if ln.startswith("counters ")}
    tcp = counters["tcp"]
    if mode.endswith("_in_call"):
        assert tcp["caller_requests"] > 100, tcp
    else:
        assert tcp["caller_requests"] == 0, tcp
    if peer is not None:
        # The peer got the notification, byte for byte.
        want = f'notify te_conformance hello-{SEEDS[mode]} "quoted" {{json}}'
        wait_for(lambda: want in peer.log(), what="notification at the peer")
        assert peer.stop() == 0, peer.log()


@pytest.mark.parametrize("mode", ["tcp", "shm", "local"])
def test_status_polled_during_submit(procs, tmp_path, mode):
    """te.h: a batch may be polled from one thread while another submits
    to it; the poller must never read a status left by the batch's
    previous use."""
    metadata, transport, peer = start_target(procs, tmp_path, mode)
    rc, out, err = run_conformance(procs, metadata, transport, SEEDS[mode],
                                   peer, cases="poll")
    check_output(rc, out, err, mode, ["poll"])
    if peer is not None:
        assert peer.stop() == 0, peer.log()
