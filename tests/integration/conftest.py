# SPDX-License-Identifier: Apache-2.0
"""Fixtures shared by every integration test (helpers live in mctest.py)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import mctest  # noqa: E402


@pytest.fixture
def procs():
    """A process group registry: everything started is killed afterwards,
    whether the test passed or failed."""
    reg = mctest.Procs()
    yield reg
    reg.cleanup()
    reports = reg.sanitizer_reports()
    assert not reports, "sanitizer report in a daemon log:\n" + reports[0]


@pytest.fixture
def metad(procs, tmp_path):
    """A running mooncake_metad on 127.0.0.1 with an in-memory store."""
    return procs.start_metad(tmp_path)
