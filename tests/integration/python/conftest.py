# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the Python package tests: a real mooncake_master and two
mooncake_client pool members (tests/integration/store/pool.py), and the
package itself imported from python/ of this checkout with the
libmooncake.so of the build under test (MC_BUILD_DIR)."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "store"))
sys.path.insert(0, os.path.join(HERE, "..", "fs"))

import mctest  # noqa: E402
from pool import Master, Member, cleanup_segments  # noqa: E402

# The package from this checkout (no install, no PYTHONPATH needed) and
# the library of the build under test.
sys.path.insert(0, os.path.join(mctest.SOURCE, "python"))
LIB = os.path.join(mctest.BUILD, "mooncakefs", "lib", "libmooncake.so")


def _sanitizer():
    from mooncake._lib import _build_dir_sanitized
    return _build_dir_sanitized(mctest.BUILD)


# An ASan build: ctest started us with the shared ASan runtime preloaded
# (mc_add_pytest PRELOAD_ASAN). It is loaded now; the daemons we start
# carry their own runtime and must not get it, nor our ASAN_OPTIONS.
PRELOADED = os.environ.pop("MC_PRELOADED_ASAN", "") == "1"
_PRELOAD_ENV = {}
if PRELOADED:
    for _k in ("LD_PRELOAD", "ASAN_OPTIONS"):
        _PRELOAD_ENV[_k] = os.environ.pop(_k, "")


@pytest.fixture
def python_env():
    """The environment for a python3 child that loads libmooncake (the
    preloaded ASan runtime again in an ASan build)."""
    env = dict(os.environ)
    env.update(_PRELOAD_ENV)
    return env


def pytest_collection_modifyitems(config, items):
    why = None
    san = _sanitizer()
    if san and not (PRELOADED and "thread" not in san):
        why = (f"libmooncake is built with MC_SANITIZE={san}; "
               f"/usr/bin/python3 cannot load it without the runtime "
               f"preloaded (ctest preloads ASan's for python.store)")
    elif not os.path.isfile(LIB):
        why = f"{LIB} not built"
    if why:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=why))
    else:
        os.environ["MOONCAKE_LIB"] = LIB


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No configuration leaks in from the environment of the run."""
    for k in list(os.environ):
        if (k.startswith("MOONCAKE_") and k != "MOONCAKE_LIB") or \
                k == "MC_FORCE_TCP":
            monkeypatch.delenv(k)


@pytest.fixture
def master(procs, tmp_path):
    return Master(procs, tmp_path, "--default_kv_lease_ttl", "500")


@pytest.fixture
def members(procs, tmp_path, master):
    """Two pool members of 32 MB each."""
    ms = [Member(procs, tmp_path, master) for _ in range(2)]
    yield ms
    procs.cleanup()
    cleanup_segments([m.port for m in ms])


@pytest.fixture
def mstore():
    """The mooncake.store module."""
    import mooncake.store
    return mooncake.store


@pytest.fixture
def stores(mstore):
    """Make MooncakeDistributedStore objects; closed afterwards."""
    made = []

    def make():
        s = mstore.MooncakeDistributedStore()
        made.append(s)
        return s
    yield make
    for s in made:
        s.close()
