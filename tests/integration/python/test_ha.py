"""The Python package against HA masters (docs/operations.md, "High
availability"): `master_server_addr="etcd://..."` finds the leader in etcd,
and a store set up before the leader is killed keeps working after it: every
object put before reads back, new puts land, without a new setup()."""
import numpy as np

from ha_pool import Etcd, HaMaster, Pool
from mctest import SCALE, wait_for
from pool import Member

CLUSTER = "hapy"


def test_store_follows_the_leader(procs, tmp_path, monkeypatch, stores):
    monkeypatch.setenv("MOONCAKE_CLUSTER_ID", CLUSTER)
    etcd = Etcd(procs, tmp_path)
    m1 = HaMaster(procs, tmp_path, etcd, "m1", cluster=CLUSTER)
    wait_for(m1.leading, timeout=30, what="m1 elected")
    m2 = HaMaster(procs, tmp_path, etcd, "m2", cluster=CLUSTER)
    wait_for(lambda: "HA: standby" in m2.log(), timeout=30,
             what="m2 a standby")
    pool = Pool(etcd)
    Member(procs, tmp_path, pool, size="32MB")
    store = stores()
    assert store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "",
                       pool.addr) == 0
    rng = np.random.default_rng(7)
    vals = {f"py{i}": rng.integers(0, 256, 4096 * (i + 1),
                                   dtype=np.uint8).tobytes()
            for i in range(6)}
    for k, v in vals.items():
        assert store.put(k, v) == 0
    procs.kill(m1.proc)
    wait_for(m2.leading, timeout=30 * SCALE, what="m2 elected")
    for k, v in vals.items():
        assert store.get(k) == v, k
    assert store.put("after", b"x" * 1000) == 0
    assert store.get("after") == b"x" * 1000
    assert store.is_exist("py3") == 1
