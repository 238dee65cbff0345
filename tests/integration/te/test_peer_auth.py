# SPDX-License-Identifier: Apache-2.0
"""The transfer engine's authentication between engines (issue 16): an
engine with the pool's token serves its handshake and data ports only to
engines that prove the same token, and refuses the others with the
reason; an engine with a token refuses a peer without one (mutual, as the
master RPC). P2PHANDSHAKE, so no metadata service is involved: the
handshake is the only way to a peer. (The whole transfer contract with
authentication on: test_conformance's p2p_tcp_auth mode.)"""
import os
import secrets

import pytest


def token(tmp_path, name):
    path = tmp_path / name
    path.write_text(secrets.token_hex(32) + "\n")
    os.chmod(path, 0o600)
    return {"MOONCAKE_AUTH_TOKEN_FILE": str(path)}


@pytest.mark.parametrize("peer_tok,client_tok,want", [
    ("a", None, "authentication required"),
    ("a", "b", "authentication failed"),
    (None, "a", "does not authenticate"),
])
def test_mismatched_tokens_are_refused(procs, tmp_path, peer_tok, client_tok,
                                       want):
    toks = {n: token(tmp_path, n) for n in ("a", "b")}
    peer = procs.start_te_peer(tmp_path, "P2PHANDSHAKE", size="1M", seed=7,
                               env=toks.get(peer_tok))
    c = procs.start_te_client(tmp_path, "P2PHANDSHAKE",
                              env=toks.get(client_tok))
    reply = c.cmd(f"open {peer.name}")
    assert reply.startswith("error open"), reply
    assert want in reply, reply
    # The same client with the peer's token gets through.
    ok = procs.start_te_client(tmp_path, "P2PHANDSHAKE",
                               env=toks.get(peer_tok))
    assert ok.cmd(f"open {peer.name}").startswith("ok open"), peer.log()
    assert c.quit() == 0 and ok.quit() == 0
    assert peer.stop() == 0, peer.log()
