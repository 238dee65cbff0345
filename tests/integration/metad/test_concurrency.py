# SPDX-License-Identifier: Apache-2.0
"""8 clients x 2000 mixed operations against one server; afterwards every
write must be accounted for (metad_cli checks each key's final value and
that each exclusive rpc_meta key has exactly one winner)."""
import json
from urllib.parse import quote

from mctest import cli, request


def test_eight_clients_mixed(metad):
    r = cli(metad.url, "stress", "8", "2000", timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    summary = json.loads(r.stdout)
    assert summary["ops"] == 16000
    assert summary["errors"] == 0
    assert summary["final_mismatches"] == 0
    assert summary["puts"] > 0 and summary["gets"] > 0 and summary["dels"] > 0


def snapshot(port):
    """Every key the stress run can touch, with its value (None = absent)."""
    keys = [f"stress/c{t}/k{i}:%/x" for t in range(8) for i in range(64)]
    keys += [f"mooncake/rpc_meta/shared{k}" for k in range(4)]
    out = {}
    for key in keys:
        status, body, _ = request(port, "GET",
                                  "/metadata?key=" + quote(key, safe=""))
        assert status in (200, 404)
        out[key] = body if status == 200 else None
    return out


def test_concurrent_clients_durable_store(procs, tmp_path):
    """The same load on the sqlite store; a restart brings back exactly
    the state the clients left."""
    store = f"sqlite:{tmp_path}/m.db"
    d = procs.start_metad(tmp_path, "--store", store)
    r = cli(d.url, "stress", "8", "500", timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    before = snapshot(d.port)
    assert any(v is not None for v in before.values())
    assert d.stop() == 0
    d2 = procs.start_metad(tmp_path, "--store", store)
    assert snapshot(d2.port) == before
